"""The README's table of experiments, made from the declarations (`python -m colabkit notebooks` stamps it)."""

from __future__ import annotations

from collections.abc import Mapping

from colabkit.colab.coordinates import Coordinates, configured
from colabkit.experiments.declaration import Experiment
from colabkit.experiments.registry import all_experiments


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

