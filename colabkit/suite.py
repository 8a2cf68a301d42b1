"""Where the suite's own files are: the notebooks, the grid files and the report notebook.

First the checkout colabkit runs from (a clone or `pip install -e .`: notebooks/ and parameters/),
then the copy inside the installed package (colabkit/bundled/, put there by setup.py). Both keep the
layout grid files name their notebook by (`notebook: notebooks/cnn_mnist.ipynb`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SUITE_FOLDERS = ("notebooks", "parameters")
_PACKAGE = Path(__file__).resolve().parent
BUNDLED = _PACKAGE / "bundled"  # setup.py maps colabkit.bundled.<folder> onto the top-level folders


def _has_suite(root: Path) -> bool:
    return all((root / folder).is_dir() for folder in SUITE_FOLDERS)


def checkout_root() -> Path | None:
    """The checkout colabkit runs from (the folder holding colabkit/, notebooks/, parameters/), or None."""
    root = _PACKAGE.parent
    return root if _has_suite(root) else None


def suite_root() -> Path:
    """The folder holding notebooks/ and parameters/: the checkout when colabkit runs from one,
    else the copy installed with the package. When neither is there (a build that left the files
    out) it returns the installed location anyway, so the caller's error names where it looked."""
    return checkout_root() or BUNDLED


def suite_path(relative: str | Path) -> Path:
    """`relative` (e.g. "notebooks/report.ipynb", "parameters/cnn_mnist.yaml") inside suite_root()."""
    return suite_root() / relative


def notebook_function(notebook: str, name: str, **namespace: Any) -> Any:
    """The function `name` that notebooks/<notebook>.ipynb defines, so that a check or a benchmark
    measures the notebook's own model (e.g. `build_cnn`), not a copy of it.

    Only that function's definition runs (the rest of its cell may go on to use it), in a namespace
    holding `namespace` (e.g. keras=keras). LookupError when the notebook defines no such function.
    """
    cells = json.loads(suite_path(f"notebooks/{notebook}.ipynb").read_text(encoding="utf-8"))["cells"]
    for cell in cells:
        source = "".join(cell["source"])
        if cell["cell_type"] == "code" and f"def {name}(" in source:
            lines = source[source.index(f"def {name}("):].splitlines()
            body = [lines[0]]
            for line in lines[1:]:  # the definition ends at the first line back at the left margin
                if line.strip() and not line.startswith((" ", "\t")):
                    break
                body.append(line)
            exec(compile("\n".join(body), f"{notebook}.ipynb:{name}", "exec"), namespace)
            return namespace[name]
    raise LookupError(f"notebooks/{notebook}.ipynb defines no function {name!r}")
