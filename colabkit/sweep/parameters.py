"""What a notebook's `parameters` cell declares, and whether a value fits a declared parameter.

A notebook with an experiment declaration (colabkit.experiments) is checked against that: its types,
ranges and choices. What follows is the fallback for a notebook that has none (a scratch notebook
swept as it is), and how the sweep reads the names a parameters cell assigns.

papermill's inspection (`papermill.inspect_notebook`) gives each parameter's name, default (as
source text), inferred type (only where the line has a type annotation) and help (its comment).
Most notebooks write `n = 1024  # matrix size`, with no annotation, so the type a value must have
is read from the default instead, widened by literals the comment names: the line
`jit_compile = "auto"  # ..., True, False` accepts a string or a bool.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from colabkit.errors import GridError
from colabkit.experiments.declaration import is_float_text

# Literals a parameter's comment may name as alternatives: quoted strings and True/False/None.
# (Bare numbers in a comment are usually examples of the default's own type, and an apostrophe
# inside a word, as in "notebook's", does not open a string.)
_COMMENT_LITERAL = re.compile(r"""((?<!\w)"[^"]*"(?!\w)|(?<!\w)'[^']*'(?!\w)|\bTrue\b|\bFalse\b|\bNone\b)""")
_ANNOTATION_TYPES = {"int": int, "float": float, "str": str, "bool": bool, "list": list, "dict": dict,
                     "None": type(None), "NoneType": type(None)}


@dataclass(frozen=True)
class DeclaredParameter:
    """One line of a notebook's parameters cell."""

    name: str
    default_source: str
    help: str = ""
    annotation: str | None = None

    @property
    def default(self) -> Any:
        """The default value, or the source text itself where it is not a plain literal."""
        try:
            return ast.literal_eval(self.default_source)
        except (ValueError, SyntaxError):
            return self.default_source

    def accepted_types(self) -> set[type] | None:
        """The value types this parameter takes; None when they cannot be told (accept anything)."""
        if self.annotation:  # `n: int = 3`, `lr: Optional[float] = None`
            words = set(re.findall(r"[A-Za-z_]+", self.annotation))
            if {"Any", "object"} & words:
                return None
            named = {_ANNOTATION_TYPES[word] for word in words if word in _ANNOTATION_TYPES}
            if "Optional" in words:
                named.add(type(None))
            if named:
                return named
        try:
            default = ast.literal_eval(self.default_source)
        except (ValueError, SyntaxError):
            return None  # an expression (np.float32, 2**10): its type is not knowable without running it
        if default is None:
            return None  # `x = None` says nothing about what x may become
        types = {type(default)}
        for literal in _COMMENT_LITERAL.findall(self.help):
            try:
                types.add(type(ast.literal_eval(literal)))
            except (ValueError, SyntaxError):
                continue
        return types

    def problem_with(self, value: Any) -> str | None:
        """Why `value` does not fit this parameter, or None if it does.

        An int is accepted where a float is declared (a grid may write 2 for 2.0); a bool is never
        taken for an int, though Python would.
        """
        accepted = self.accepted_types()
        if accepted is None:
            return None
        kind = type(value)
        if kind in accepted or (kind is int and float in accepted):
            return None
        names = " or ".join(sorted(t.__name__ for t in accepted))
        article = "an" if kind.__name__[0] in "aeiou" else "a"
        problem = (f"{value!r} is {article} {kind.__name__}, but the notebook's `{self.name} = {self.default_source}` "
                   f"takes {names}")
        if kind is str and float in accepted and is_float_text(value):
            problem += " (YAML reads 1e-3 as a string: write 1.0e-3)"
        return problem


def declared_parameters(notebook: str | Path) -> dict[str, DeclaredParameter]:
    """The parameters a notebook declares in its cell tagged `parameters`, by name.

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
        declared[name] = DeclaredParameter(
            name=name, default_source=str(entry.get("default", "")), help=str(entry.get("help") or ""),
            annotation=None if annotation in (None, "None") else str(annotation),
        )
    return declared
