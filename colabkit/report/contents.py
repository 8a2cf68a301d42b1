"""The report in order: the body (the Summary, "Not in this report, and why", the cross-cutting sections, each
experiment's, Methods), then the appendix (each section's detail in the same order, Records, Provenance)."""

from __future__ import annotations

import warnings
from pathlib import Path

from colabkit.io import write_atomic
from colabkit.report.backends import backends_section
from colabkit.report.comparisons import comparisons_section
from colabkit.report.cost import cost_section
from colabkit.report.decode import decode_section
from colabkit.report.experiment_sections import experiment_sections
from colabkit.report.inference import inference_section
from colabkit.report.methods import methods_section
from colabkit.report.provenance import overview_section, provenance_section
from colabkit.report.records import ReportData
from colabkit.report.section import Output, Section, section_outputs, show, write_section
from colabkit.report.summary import summary_section

CROSS_CUTTING = (backends_section, comparisons_section, inference_section, decode_section, cost_section)


def absent_section(sections: list[Section]) -> Section:
    """"Not in this report, and why": a line for each of `sections` that is not in the body (its `empty`)."""
    lines = [f"- **{section.title}**: {section.empty}" for section in sections if section.empty]
    return Section("absent", "Not in this report, and why", text=["\n".join(lines)] if lines else [],
                   empty=None if lines else "every section has something to show.")


def report_sections(data: ReportData) -> list[Section]:
    """Every section of the report of `data`, in the report's order (see the module's docstring)."""
    sections = [*(build(data) for build in CROSS_CUTTING), *experiment_sections(data), methods_section(data)]
    return [summary_section(data), absent_section(sections), *sections, overview_section(data),
            provenance_section(data)]


def report_outputs(sections: list[Section]) -> list[Output]:
    """What the report shows of `sections`: the body of each, then the appendix of each."""
    return [output for part in ("body", "appendix") for section in sections
            for output in section_outputs(section, part)]  # type: ignore[arg-type]


def log_warnings(caught: list[warnings.WarningMessage], path: str | Path) -> Path:
    """Write the warnings libraries raised while a report was built to `path` (report.log): none reaches the report."""
    return write_atomic(Path(path), "".join(f"{warning.filename}:{warning.lineno}: {warning.category.__name__}: "
                                            f"{warning.message}\n" for warning in caught))


def publish_report(data: ReportData, output_dir: str | Path, display: bool = True) -> list[Path]:
    """Build, write and (in a notebook) show every section; warnings to report.log. The files written."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sections = report_sections(data)
        written = [path for section in sections for path in write_section(section, output_dir)]
        outputs = report_outputs(sections)
    log_warnings(caught, Path(output_dir) / "report.log")
    if display:
        show(outputs)
    return written
