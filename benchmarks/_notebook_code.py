"""Load a function a notebook defines, so a benchmark measures the notebook's own model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def notebook_function(notebook: str, name: str, **namespace: Any) -> Any:
    """Execute the code cell of notebooks/<notebook>.ipynb that defines `name`; return the function.

    Only that cell runs, in a namespace holding `namespace` (e.g. keras=keras).
    """
    cells = json.loads((NOTEBOOKS / f"{notebook}.ipynb").read_text())["cells"]
    for cell in cells:
        source = "".join(cell["source"])
        if cell["cell_type"] == "code" and f"def {name}(" in source:
            definition = source[source.index(f"def {name}("):]
            # The cell may go on to use the function (e.g. build a model); keep just its definition.
            lines = definition.splitlines()
            body = [lines[0]] + [line for line in _indented_block(lines[1:])]
            exec(compile("\n".join(body), f"{notebook}.ipynb:{name}", "exec"), namespace)
            return namespace[name]
    raise LookupError(f"notebooks/{notebook}.ipynb defines no function {name!r}")


def _indented_block(lines: list[str]) -> list[str]:
    block = []
    for line in lines:
        if line.strip() and not line.startswith((" ", "\t")):
            break
        block.append(line)
    return block


def run_notebook(notebook: str, workdir: Path, label: str, **parameters: Any) -> dict[str, Any]:
    """Execute notebooks/<notebook>.ipynb through papermill (the production path); return its record."""
    import papermill

    from colabkit.records.record import read_record

    record_path = workdir / f"{label}.json"
    papermill.execute_notebook(str(NOTEBOOKS / f"{notebook}.ipynb"), str(workdir / f"{label}.ipynb"),
                               parameters={**parameters, "results_path": str(record_path)}, progress_bar=False)
    return read_record(record_path)
