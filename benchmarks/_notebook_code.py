"""Load a function a notebook defines (colabkit.suite.notebook_function), and run a notebook through
papermill into a work folder, so a benchmark measures the notebook's own model and path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from colabkit.suite import notebook_function, suite_path

__all__ = ["notebook_function", "run_notebook"]


def run_notebook(notebook: str, workdir: Path, label: str, **parameters: Any) -> dict[str, Any]:
    """Execute notebooks/<notebook>.ipynb through papermill (the production path); return its record."""
    import papermill

    from colabkit.experiments import get
    from colabkit.records.record import read_record

    # papermill injects any name; a renamed parameter would be ignored and the run silently measure the default
    declared = {parameter.name for parameter in get(notebook).parameters}
    unknown = sorted(set(parameters) - declared)
    if unknown:
        raise SystemExit(f"{notebook}: not a parameter of the notebook: {', '.join(unknown)} "
                         f"(declared: {', '.join(sorted(declared))})")
    record_path = workdir / f"{label}.json"
    papermill.execute_notebook(str(suite_path(f"notebooks/{notebook}.ipynb")), str(workdir / f"{label}.ipynb"),
                               parameters={**parameters, "results_path": str(record_path)}, progress_bar=False)
    return read_record(record_path)
