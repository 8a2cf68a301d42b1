"""The report's experiment sections, one per declared experiment (colabkit.experiments), in the
registry's order: the report notebook loops over them, so adding an experiment adds its section."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from colabkit.experiments import all_experiments
from colabkit.report.records import ReportData
from colabkit.report.section import Section, publish


def section_functions() -> list[Callable[[ReportData], Section]]:
    """Each declared experiment's report section function, in the registry's order."""
    return [experiment.section_function() for experiment in all_experiments()]


def experiment_sections(data: ReportData) -> list[Section]:
    """Every declared experiment's section built from `data` (a section without records says so)."""
    return [function(data) for function in section_functions()]


def publish_experiments(data: ReportData, output_dir: str | Path, display: bool = True) -> list[Path]:
    """Build, write and (in a notebook) show every experiment's section under its own heading;
    return the files written."""
    written: list[Path] = []
    for section in experiment_sections(data):
        if display:
            from IPython.display import display as show

            heading = f"## {section.title}"
            show({"text/markdown": heading, "text/plain": heading}, raw=True)
        written += publish(section, output_dir, display)
    return written
