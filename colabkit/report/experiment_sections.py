"""SECTIONS: experiment name -> the function that builds its section (the suite's: headline.notebook_section). An
experiment declared outside the suite registers its own (`register_section`: docs/adding-an-experiment.md)."""

from __future__ import annotations

from collections.abc import Callable

from colabkit.errors import ExperimentDeclarationError
from colabkit.experiments import all_experiments
from colabkit.report.cnn_mnist import cnn_section
from colabkit.report.dblstm_har import dblstm_section
from colabkit.report.matmul_tflops import matmul_section
from colabkit.report.paradnn import paradnn_section
from colabkit.report.records import ReportData
from colabkit.report.section import Section
from colabkit.report.timeseries_rnn import timeseries_section

SectionFunction = Callable[[ReportData], Section]

SECTIONS: dict[str, SectionFunction] = {
    "matmul_tflops": matmul_section,
    "cnn_mnist": cnn_section,
    "dblstm_har": dblstm_section,
    "timeseries_rnn": timeseries_section,
    "paradnn": paradnn_section,
}


def register_section(experiment: str, function: SectionFunction) -> SectionFunction:
    """Make `function` the report section of the experiment declared as `experiment` (which has no other); return it."""
    if SECTIONS.setdefault(experiment, function) is not function:
        raise ExperimentDeclarationError(f"experiment {experiment!r} already has a report section")
    return function


def experiment_sections(data: ReportData) -> list[Section]:
    """The section of every declared experiment that has one, in the registry's order."""
    return [SECTIONS[experiment.name](data) for experiment in all_experiments() if experiment.name in SECTIONS]
