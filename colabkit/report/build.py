"""`python -m colabkit report`: execute notebooks/report.ipynb through papermill, then export it.

The notebook does the work (reads the records, writes figures/, tables/ and records.csv under the
output folder, section by section, and a summary of what it read, RECORDS_SUMMARY); this module
checks the inputs (every folder exists, at least one readable record: a look that reads one file
where there are records), runs it (the kernel's own output goes to report.log), reads the summary
back (so the records are parsed once, in the notebook), and exports the executed notebook as
report.html (code hidden, self-contained: figures embedded, no script or image fetched from the
network) and report-with-code.html.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from colabkit.errors import NoRecordsError, RecordError, ReportError
from colabkit.io import write_atomic, write_json_atomic
from colabkit.notebook_runner import execute_notebook, failure_summary
from colabkit.records.loading import first_record, read_summary
from colabkit.report.records import ReportData
from colabkit.suite import suite_path

# The checkout's notebooks/report.ipynb, else the copy installed with the package (colabkit.suite).
REPORT_NOTEBOOK = suite_path("notebooks/report.ipynb")
REPORT_FILES = {"figures": (".png", ".pdf", ".svg", ".csv"), "tables": (".csv", ".tex", ".md")}
# What the notebook read (LoadedRecords.summary): hidden, so that a later report over a folder that
# holds this one never takes it for a record.
RECORDS_SUMMARY = ".records-read.json"
_TEMPLATE_NAME = "colabkit_report.html.j2"
# The lab template, minus the scripts it loads from a CDN (require.js, MathJax, mermaid): the report
# has no widgets, equations or diagrams, and must open anywhere, offline included. Figures carry
# their caption as alternative text.
_TEMPLATE = """{%- extends 'index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{% block data_png scoped %}
<div class="jp-RenderedImage jp-OutputArea-output {{ extra_class }}">
<img src="data:image/png;base64,{{ output.data['image/png'] | escape_html }}"
{%- set width = output | get_metadata('width', 'image/png') %}
{%- if width is not none %} width="{{ width | escape_html }}"{% endif %}
 alt="{{ (output | get_metadata('alt', 'image/png') or 'figure') | escape_html }}">
</div>
{% endblock data_png %}
{% block extra_css %}
<style>
  body { max-width: 1200px; margin: 0 auto; }
  .colabkit-table { font-size: 0.85em; border-collapse: collapse; margin: 4px 0 16px 0; }
  .colabkit-table th, .colabkit-table td { padding: 2px 8px; border-bottom: 1px solid #ddd; text-align: right; }
  .jp-RenderedImage img { max-width: 100%; height: auto; }
</style>
{% endblock extra_css %}
"""
# A Markdown image that would be fetched from the network (the Open-in-Colab badge), linked or not.
_REMOTE_IMAGE = re.compile(r"\[!\[[^\]]*\]\(https?://[^)]*\)\]\([^)]*\)|!\[[^\]]*\]\(https?://[^)]*\)")


@dataclass
class ReportOutputs:
    """Where a report went."""

    folder: Path
    html: Path
    html_with_code: Path
    notebook: Path
    figures: Path
    tables: Path
    records_csv: Path
    log: Path
    records: dict[str, Any] = field(default_factory=dict)  # what the notebook read: LoadedRecords.summary()

    def files(self) -> list[Path]:
        """Every file the report wrote, sorted."""
        return sorted(path for path in self.folder.rglob("*") if path.is_file() and not path.name.startswith("."))


def prepare_output(output_dir: str | Path) -> Path:
    """Create the output folder, and remove the figure and table files an earlier report left there,
    so that no stale figure can pass for one of this report. Returns the folder."""
    folder = Path(output_dir)
    for sub, suffixes in REPORT_FILES.items():
        (folder / sub).mkdir(parents=True, exist_ok=True)
        for path in (folder / sub).iterdir():
            if path.is_file() and path.suffix in suffixes:
                path.unlink()
    return folder


def write_records_summary(data: ReportData, output_dir: str | Path) -> Path:
    """Write what the report read (record counts per status, rejected files, missing folders) to
    output_dir/RECORDS_SUMMARY, for `colabkit report` to print without reading the records again."""
    return write_json_atomic(Path(output_dir) / RECORDS_SUMMARY, data.loaded.summary())


def export_report_html(notebook_path: str | Path, html_path: str | Path, with_code: bool = False) -> Path:
    """Export an executed report notebook as one HTML file that needs nothing else: figures are
    embedded as data URIs, no script or image is loaded from the network; code hidden unless `with_code`."""
    import jinja2
    import nbformat
    from nbconvert import HTMLExporter

    notebook = nbformat.read(str(notebook_path), as_version=4)
    notebook = copy.deepcopy(notebook)
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            cell.source = _REMOTE_IMAGE.sub("", cell.source)
    notebook.metadata["title"] = "colabkit report"
    exporter = HTMLExporter(template_name="lab", extra_loaders=[jinja2.DictLoader({_TEMPLATE_NAME: _TEMPLATE})],
                            template_file=_TEMPLATE_NAME, exclude_input=not with_code,
                            exclude_input_prompt=not with_code, exclude_output_prompt=not with_code, embed_images=True)
    body, _ = exporter.from_notebook_node(notebook)
    path = Path(html_path)
    write_atomic(path, body)
    return path


def build_report(results_dirs: list[str | Path], out: str | Path, *, kernel_name: str | None = None,
                 notebook: str | Path | None = None, exclude_busy: bool = False) -> ReportOutputs:
    """Run the report notebook on the records under `results_dirs` and write everything under `out`
    (`exclude_busy`: runs made on a busy host are left out of the figures and intervals, and listed).

    Raises ReportError when a results folder does not exist, the report notebook is missing, or a
    cell of it fails (the executed notebook is kept in `out` for inspection); NoRecordsError, before
    anything is written, when no readable record is below the folders. The outputs' `records` are
    what the notebook read (LoadedRecords.summary).
    """
    dirs = [Path(d) for d in results_dirs]
    missing = [str(d) for d in dirs if not d.exists()]
    if missing:
        raise ReportError(f"results folder(s) not found: {', '.join(missing)}")
    first, rejected = first_record(dirs)
    if first is None:
        raise NoRecordsError(f"no records found below {', '.join(map(str, dirs))}: nothing to report (run a sweep "
                             "first, or give the folder it wrote to)", rejected)
    source = Path(notebook) if notebook else REPORT_NOTEBOOK
    if not source.is_file():
        raise ReportError(f"the report notebook {source} is missing: reinstall colabkit from its repository "
                          "(pip install git+https://github.com/OWNER/NAME@REF) or run from a checkout")
    folder = prepare_output(Path(out).resolve())
    executed = folder / "report.ipynb"
    summary_path = folder / RECORDS_SUMMARY
    summary_path.unlink(missing_ok=True)  # an earlier report's summary must not pass for this one's
    parameters = {"results_dirs": [str(d.resolve()) for d in dirs], "output_dir": str(folder),
                  "exclude_busy_runs": exclude_busy}
    with open(folder / "report.log", "w", encoding="utf-8") as log:
        try:
            execute_notebook(source, executed, parameters, log, kernel_name=kernel_name, cwd=folder)
        except Exception as exc:  # noqa: BLE001 - papermill raises its own and the kernel's errors; all mean "failed"
            raise ReportError(f"the report notebook failed ({failure_summary(exc)}); the executed notebook is {executed}, "
                              f"its log {folder / 'report.log'}") from exc
    try:
        records = read_summary(summary_path.read_text(encoding="utf-8"))
    except (OSError, RecordError) as exc:
        raise ReportError(f"the report notebook {source} wrote no summary of the records it read ({summary_path}: "
                          f"{exc}); is it colabkit's notebooks/report.ipynb?") from exc
    return ReportOutputs(
        folder=folder, html=export_report_html(executed, folder / "report.html"),
        html_with_code=export_report_html(executed, folder / "report-with-code.html", with_code=True),
        notebook=executed, figures=folder / "figures", tables=folder / "tables", records_csv=folder / "records.csv",
        log=folder / "report.log", records=records,
    )
