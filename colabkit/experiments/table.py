"""The README's table of experiments, made from the declarations, and the hook that stamps it."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from colabkit.colab.coordinates import Coordinates, configured
from colabkit.errors import NotebookTemplateError
from colabkit.experiments.declaration import Experiment
from colabkit.experiments.registry import all_experiments

START_MARKER = "<!-- experiments:start -->"  # the start line may say more: <!-- experiments:start (...) -->
END_MARKER = "<!-- experiments:end -->"
_BLOCK = re.compile(r"(<!-- experiments:start\b[^\n]*-->\n)(.*?)(" + re.escape(END_MARKER) + ")", flags=re.DOTALL)


def _cell(text: str) -> str:
    return text.replace("|", "/").replace("\n", " ")


def markdown_table(experiments: tuple[Experiment, ...] | None = None, coordinates: Coordinates | None = None,
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


def has_markers(text: str) -> bool:
    """Whether `text` has the experiments block's start and end markers, in that order."""
    return _BLOCK.search(text) is not None


def stamp_experiments_table(text: str, table: str | None = None, where: str = "README.md") -> str:
    """`text` with the block between the experiments markers replaced by `table` (by default the
    table of every declared experiment). NotebookTemplateError when the markers are not there."""
    if not has_markers(text):
        raise NotebookTemplateError(f"{where}: no `{START_MARKER}` ... `{END_MARKER}` block for the experiments table")
    body = markdown_table() if table is None else table
    return _BLOCK.sub(lambda match: match.group(1) + body + match.group(3), text, count=1)


def stamp_readme_file(path: str | Path, coordinates: Coordinates | None = None, check: bool = False) -> bool:
    """Rewrite the experiments block of the README at `path` with the experiments table alone; return
    whether it changed (with `check`, whether it would change, writing nothing). `python -m colabkit
    notebooks` stamps the same block with this table and the suite's other notebooks."""
    path = Path(path)
    original = path.read_text(encoding="utf-8")
    text = stamp_experiments_table(original, markdown_table(coordinates=coordinates), str(path))
    if text != original and not check:
        # Through a temporary file and a rename, so a reader never sees half a README.
        temporary = path.with_name(f".{path.name}.tmp")
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, path)
    return text != original
