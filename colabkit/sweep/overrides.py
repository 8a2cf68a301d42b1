"""The command line's `-p KEY=VALUE`: read, typed like papermill's, and checked against each notebook.

A key applies to every notebook of the sweep that declares it (`-p epochs=1` over several grid files
sets epochs where there is one), so it is an error only when no notebook has it. A key given twice
is refused: the last value would win without a word. How a pinned value names its combinations'
files is colabkit.sweep.layers' (Resolved.pin).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from colabkit.errors import GridError
from colabkit.sweep.gridfile import SET_BY_THE_SWEEP, GridSpec, value_problem


# What a bool parameter's refusal adds: -p reads only Python's spellings, as papermill's -p does.
BOOL_SPELLINGS = (" (-p takes a bool as True or False, spelt as Python writes them, as papermill's -p does: "
                  "not true, false, yes, no, 1 or 0)")


def typed_value(text: str) -> Any:
    """A command-line value typed as papermill's `-p` types it: True/False/None, int, float, else str."""
    if text in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[text]
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


def parse_overrides(items: Iterable[str] | None) -> dict[str, Any]:
    """{'n': 512} from ['n=512']. Raises GridError naming every item not written KEY=VALUE and every
    key given more than once."""
    overrides: dict[str, Any] = {}
    problems = []
    for item in items or []:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not re.fullmatch(r"[A-Za-z_]\w*", key):
            problems.append(f"-p {item!r}: write KEY=VALUE, e.g. -p batch_size=64")
        elif key in overrides:
            problems.append(f"-p {key} is given twice ({overrides[key]!r}, then {typed_value(value)!r}): "
                            "give each key once")
        else:
            overrides[key] = typed_value(value)
    if problems:
        raise GridError(problems)
    return overrides


def check_overrides(specs: list[GridSpec], overrides: dict[str, Any]) -> list[str]:
    """Problems with `-p` values: a key the sweep owns, a key no notebook declares, a value a
    notebook's parameter does not take, a device colabkit does not know."""
    problems: list[str] = []
    seen: set[str] = set()  # one line for a value several notebooks refuse alike
    for key, value in overrides.items():
        owners = [spec for spec in specs if key in spec.parameters]
        if key in SET_BY_THE_SWEEP:
            problems.append(f"-p {key}: `{key}` is set by the sweep for each combination")
            continue
        if not owners and specs and key != "device":  # (no spec at all: every grid file failed, and said why)
            names = ", ".join(spec.notebook.name for spec in specs)
            problems.append(f"-p {key}: no notebook of this sweep declares a parameter `{key}` ({names})")
        for spec in owners or ([None] if key == "device" else []):
            declared = spec.parameters[key].problem(value) if spec else None  # the parameter's own rule
            if declared and not isinstance(value, bool) and bool in spec.parameters[key].types:
                declared += BOOL_SPELLINGS
            problem = declared or value_problem(None, key, value)  # else whether it names a device
            if problem and problem not in seen:
                problems.append(f"-p {key} ({spec.notebook.name}): {problem}" if declared else f"-p {key}: {problem}")
                seen.add(problem)
    return problems
