"""The experiments' two tables in the docs, made from the declarations (`python tools/stamp_notebooks.py notebooks` stamps both):
the README's (`experiments_table`: what each measures, its headline, its Open-in-Colab badge) and docs/experiments.md's
index (`experiments_index`: where each one's notebook, declaration, grid files, report section, published figures
and docs page live)."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from pathlib import Path

from colabkit.colab.coordinates import Coordinates, configured
from colabkit.experiments import all_experiments, published
from colabkit.experiments.declaration import Experiment
from colabkit.experiments.registry import BUILTIN_MODULES
from colabkit.sweep.grids import notebook_places, read_grid_yaml


def _cell(text: str) -> str:
    return text.replace("|", "/").replace("\n", " ")


def experiments_table(experiments: tuple[Experiment, ...] | None = None, coordinates: Coordinates | None = None,
                      runtimes: Mapping[str, str] | None = None) -> str:
    """A Markdown table of the experiments (by default every declared one): title, notebook, what it
    measures, headline figure and an Open-in-Colab badge (on the configured repository and ref);
    with `runtimes` (notebook name -> Colab runtime it asks for), a column for that too."""
    coordinates = coordinates or configured()
    header = "| experiment | notebook | what it measures | headline | open |"
    rows = [header + (" Colab runtime |" if runtimes is not None else ""),
            "|---|---|---|---|---|" + ("---|" if runtimes is not None else "")]
    for experiment in experiments if experiments is not None else all_experiments():
        headline = experiment.headline
        row = (f"| {_cell(experiment.title)} | [`{experiment.name}`]({experiment.notebook}) | "
               f"{_cell(experiment.measures)} | {_cell(headline.label)} ({headline.unit}, "
               f"{headline.better} is better) | {coordinates.badge(experiment.notebook)} |")
        if runtimes is not None:
            row += f" {_cell(runtimes.get(experiment.name, 'CPU'))} |"
        rows.append(row)
    return "\n".join(rows) + "\n"


def _path(module: str) -> str:
    """'colabkit.report.cnn_mnist' -> 'colabkit/report/cnn_mnist.py'."""
    return module.replace(".", "/") + ".py"


def _link(path: str | None) -> str:
    """A link from docs/ to `path` (relative to the suite's root), shown as that path; '-' for none."""
    return f"[`{path.partition('#')[0]}`](../{path})" if path else "-"


def grid_notebook(path: Path) -> Path | None:
    """The notebook a grid file names, found as the sweep finds it (notebook_places), unchecked: a notebook being
    stamped may not have its parameters cell yet. None where the file names none that exists."""
    named = (read_grid_yaml(path) or {}).get("notebook")
    found = [place for place in notebook_places(path, str(named)) if place.is_file()] if named else []
    return found[0] if found else None


def experiments_index(root: str | Path) -> str:
    """The index of the experiments colabkit declares (registry.BUILTIN_MODULES), one row each, every path relative
    to the suite's root `root`: its grid files are those of root/parameters/ naming the experiment's notebook."""
    from colabkit.report.experiment_sections import SECTIONS  # the report's table of sections: matplotlib, only when stamping

    root = Path(root).resolve()
    grids = {path: grid_notebook(path) for path in sorted((root / "parameters").glob("*.yaml"))}
    rows = ["| experiment | notebook | declaration | grid file | report section | published figures | docs |",
            "|---|---|---|---|---|---|---|"]
    for module in BUILTIN_MODULES:
        for experiment in (value for value in vars(importlib.import_module(module)).values()
                           if isinstance(value, Experiment)):
            names = [path.resolve().relative_to(root).as_posix() for path, notebook in grids.items()
                     if notebook == root / experiment.notebook]
            section = SECTIONS.get(experiment.name)
            cited = "; ".join(reference.citation for reference in experiment.references)
            rows.append(" | ".join([
                f"| {experiment.title}", _link(experiment.notebook), _link(_path(module)),
                ", ".join(_link(name) for name in names) or "-", _link(section and _path(section.__module__)),
                f"{cited}: {_link(_path(published.__name__))}" if cited else "-", _link(experiment.docs)]) + " |")
    return "\n".join(rows) + "\n"
