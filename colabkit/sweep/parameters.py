"""What a notebook's `parameters` cell assigns, read as `colabkit.experiments.Parameter`s.

A notebook with an experiment declaration is checked against it; one without (a scratch notebook) is
checked against its own cell, read here through `papermill.inspect_notebook` into the same
`Parameter`s: the type from the default, widened by literals the comment names
(`jit_compile = "auto"  # ..., True, False` takes a string or a bool), `object` where it cannot be told.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

from colabkit.errors import GridError
from colabkit.experiments import Parameter

# Literals a parameter's comment may name as alternatives: quoted strings and True/False/None.
# (Bare numbers in a comment are usually examples of the default's own type, and an apostrophe
# inside a word, as in "notebook's", does not open a string.)
_COMMENT_LITERAL = re.compile(r"""((?<!\w)"[^"]*"(?!\w)|(?<!\w)'[^']*'(?!\w)|\bTrue\b|\bFalse\b|\bNone\b)""")
_ANNOTATION_TYPES = {"int": int, "float": float, "str": str, "bool": bool, "list": list, "dict": dict,
                     "None": type(None), "NoneType": type(None)}
_NOT_A_LITERAL = object()


def _literal(source: str) -> Any:
    try:
        return ast.literal_eval(source)
    except (ValueError, SyntaxError):
        return _NOT_A_LITERAL


def accepted_types(default_source: str, help: str = "", annotation: str | None = None) -> tuple[type, ...]:
    """The value types a parameters-cell line takes: its annotation's (`n: int = 3`,
    `lr: Optional[float] = None`), else its default's widened by the literals its comment names;
    (object,) when they cannot be told (an expression such as np.float32 or 2**10, or `x = None`)."""
    default = _literal(default_source)
    if annotation:
        words = set(re.findall(r"[A-Za-z_]+", annotation))
        if {"Any", "object"} & words:
            return (object,)
        named = {_ANNOTATION_TYPES[word] for word in words if word in _ANNOTATION_TYPES}
        if "Optional" in words:
            named.add(type(None))
        if named:
            if default is not _NOT_A_LITERAL:
                named.add(type(default))  # the notebook runs with its own default, whatever the annotation says
            return tuple(sorted(named, key=lambda kind: kind.__name__))
    if default is _NOT_A_LITERAL or default is None:
        return (object,)  # `x = None` says nothing about what x may become
    types = {type(default)}
    for literal in _COMMENT_LITERAL.findall(help):
        value = _literal(literal)
        if value is not _NOT_A_LITERAL:
            types.add(type(value))
    return tuple(sorted(types, key=lambda kind: kind.__name__))


def cell_parameter(name: str, default_source: str, help: str = "", annotation: str | None = None) -> Parameter:
    """One line of a parameters cell as a Parameter: its default the literal value (or the source
    text where it is an expression), its types as `accepted_types` reads them."""
    default = _literal(default_source)
    return Parameter(name, accepted_types(default_source, help, annotation),
                     default_source if default is _NOT_A_LITERAL else default, help,
                     declared_as=f"the notebook's `{name} = {default_source}`")


def declared_parameters(notebook: str | Path) -> dict[str, Parameter]:
    """The parameters a notebook assigns in its cell tagged `parameters`, by name, in order.

    Raises GridError if the notebook cannot be read or has no parameters cell.
    """
    import papermill
    from papermill.exceptions import PapermillException

    try:
        inspected = papermill.inspect_notebook(str(notebook))
    except (OSError, ValueError, PapermillException) as exc:
        raise GridError(f"cannot read the parameters of notebook {notebook}: {exc}") from exc
    if not inspected:
        raise GridError(f"notebook {notebook} has no cell tagged `parameters`, so a sweep cannot set anything")
    declared = {}
    for name, entry in inspected.items():
        annotation = entry.get("inferred_type_name")
        declared[name] = cell_parameter(name, str(entry.get("default", "")), str(entry.get("help") or ""),
                                        None if annotation in (None, "None") else str(annotation))
    return declared
