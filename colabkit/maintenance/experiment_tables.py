"""docs/experiments.md's index: where each of the suite's experiments lives (its notebook, declaration module, grid
files, report section module, published figures and docs page), made from the declarations and what reads them;
`python -m colabkit notebooks` stamps it, as it stamps the README's table."""

from __future__ import annotations

import importlib
from pathlib import Path

from colabkit.experiments import published
from colabkit.experiments.declaration import Experiment
from colabkit.experiments.registry import BUILTIN_MODULES
from colabkit.sweep.gridfile import load_grid


def module_path(module: str) -> str:
    """'colabkit.report.cnn_mnist' -> 'colabkit/report/cnn_mnist.py'."""
    return module.replace(".", "/") + ".py"


def _link(path: str | None) -> str:
    """A link from docs/ to `path` (relative to the suite's root), shown as that path; '-' for none."""
    return f"[`{path.partition('#')[0]}`](../{path})" if path else "-"


def experiments_index(root: str | Path) -> str:
    """The index table of the experiments colabkit declares (registry.BUILTIN_MODULES), one row each, every path
    relative to the suite's root `root`: a grid file is one of root/parameters/ naming the experiment's notebook."""
    from colabkit.report.sections import SECTIONS  # the report's table of sections: matplotlib, only when stamping

    root = Path(root).resolve()
    grids = [load_grid(path) for path in sorted((root / "parameters").glob("*.yaml"))]
    rows = ["| experiment | notebook | declaration | grid file | report section | published figures | docs |",
            "|---|---|---|---|---|---|---|"]
    for module in BUILTIN_MODULES:
        for experiment in (value for value in vars(importlib.import_module(module)).values()
                           if isinstance(value, Experiment)):
            names = [grid.path.resolve().relative_to(root).as_posix() for grid in grids
                     if grid.notebook.resolve() == root / experiment.notebook]
            section = SECTIONS.get(experiment.name)
            cited = "; ".join(reference.citation for reference in experiment.references)
            rows.append(" | ".join([
                f"| {experiment.title}", _link(experiment.notebook), _link(module_path(module)),
                ", ".join(_link(name) for name in names) or "-", _link(section and module_path(section.__module__)),
                f"{cited}: {_link(module_path(published.__name__))}" if cited else "-", _link(experiment.docs)]) + " |")
    return "\n".join(rows) + "\n"
