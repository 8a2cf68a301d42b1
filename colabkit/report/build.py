"""`python -m colabkit report`: the report built in this process (no kernel), kept as report.ipynb (its parameters
relative to the report folder, each shown output under the cell of its tag) and exported, self-contained, as
report.html (code hidden) and report-with-code.html. Library warnings go to report.log, not the report."""

from __future__ import annotations

import copy
import os
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from colabkit.cost.rates import load_rates
from colabkit.errors import NoRecordsError, ReportError
from colabkit.io import write_atomic
from colabkit.records.loading import first_record, load_records
from colabkit.report.contents import log_warnings, report_outputs, report_sections
from colabkit.report.figures import report_style
from colabkit.report.methods import write_references
from colabkit.report.records import report_data
from colabkit.report.section import write_section
from colabkit.report.summary import every_ok_run_busy
from colabkit.report.writers import write_records_csv
from colabkit.suite import suite_path

# The checkout's notebooks/report.ipynb, else the copy installed with the package (colabkit.suite).
REPORT_NOTEBOOK = suite_path("notebooks/report.ipynb")
REPORT_FILES = {"figures": (".png", ".pdf", ".svg", ".csv"), "tables": (".csv", ".tex", ".md")}
# The tags of notebooks/report.ipynb's two cells whose outputs `colabkit report` keeps: the one that shows the
# report (contents.publish_report) and the one that writes records.csv and references.bib and lists the files.
REPORT_CELL, FILES_CELL = "colabkit-report", "colabkit-files"
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
  .jp-OutputArea-output { overflow-x: auto; }
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
    figures: Path
    tables: Path
    records: dict[str, Any] = field(default_factory=dict)  # what was read: LoadedRecords.summary()

    def files(self) -> list[Path]:
        """Every file the report wrote, sorted."""
        return sorted(path for path in self.folder.rglob("*") if path.is_file() and not path.name.startswith("."))


def prepare_output(output_dir: str | Path) -> Path:
    """Create the folder; remove the figures and tables an earlier report left there. Returns it."""
    folder = Path(output_dir)
    for sub, suffixes in REPORT_FILES.items():
        (folder / sub).mkdir(parents=True, exist_ok=True)
        for path in (folder / sub).iterdir():
            if path.is_file() and path.suffix in suffixes:
                path.unlink()
    return folder


def files_written(written: list[Path]) -> str:
    """What a report wrote, in a few lines: how many files, in figures/ and in tables/."""
    folders = [Path(path).parent.name for path in written]
    return (f"{len(written)} files:\n"
            f"  figures/     {folders.count('figures')} files: PNG (300 dpi), PDF, SVG and the data of each figure (CSV); "
            "each experiment's headline figure also as PDFs one and two of a paper's columns wide (-1col, -2col)\n"
            f"  tables/      {folders.count('tables')} files: CSV, LaTeX (booktabs), Markdown\n"
            "  records.csv  every record, one row each\n"
            "  references.bib  the published works the report compares with, the statistics it uses, colabkit")


def export_report_html(notebook: Any, html_path: str | Path, with_code: bool = False) -> Path:
    """A report notebook as one self-contained HTML file, code hidden unless `with_code`."""
    import jinja2
    from nbconvert import HTMLExporter

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


def _relative(path: str | Path, start: Path) -> str:
    """`path` as seen from `start` ('../smoke'): how the kept notebook names a folder, never by the machine's path."""
    try:
        return Path(os.path.relpath(Path(path).resolve(), start)).as_posix()
    except ValueError:  # another drive (Windows): the folder's name is all that can be said without its path
        return Path(path).resolve().name


def report_notebook(source: Path, parameters: dict[str, Any], outputs: dict[str, list[Any]]) -> Any:
    """The report notebook with its `parameters` injected as papermill does, under each tagged cell its `outputs`."""
    import nbformat

    notebook = nbformat.read(str(source), as_version=4)
    cells = []
    for cell in notebook.cells:
        cells.append(cell)
        if cell.cell_type == "code":
            cell.outputs = [output for tag in cell.metadata.get("tags", []) for output in outputs.get(tag, [])]
        if "parameters" in cell.metadata.get("tags", []):
            assignments = "".join(f"{name} = {value!r}\n" for name, value in parameters.items())
            cells.append(nbformat.v4.new_code_cell("# Parameters\n" + assignments,
                                                   metadata={"tags": ["injected-parameters"]}))
    notebook.cells = cells
    return notebook


def build_report(results_dirs: list[str | Path], out: str | Path, *, exclude_busy: bool = False,
                 rates_file: str | Path | None = None) -> ReportOutputs:
    """Build the report of the records under `results_dirs` under `out`; errors before anything is written."""
    import nbformat

    rates = load_rates(rates_file)
    dirs = [Path(d) for d in results_dirs]
    missing = [str(d) for d in dirs if not d.exists()]
    if missing:
        raise ReportError(f"results folder(s) not found: {', '.join(missing)}")
    first, rejected = first_record(dirs)
    if first is None:
        raise NoRecordsError(f"no records found below {', '.join(map(str, dirs))}: nothing to report (run a sweep "
                             "first, or give the folder it wrote to)", rejected)
    if not REPORT_NOTEBOOK.is_file():
        raise ReportError(f"the report notebook {REPORT_NOTEBOOK} is missing: reinstall colabkit from its repository "
                          "(pip install git+https://github.com/OWNER/NAME@REF) or run from a checkout")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        data = report_data(load_records(dirs), exclude_busy, rates)
        left_out = every_ok_run_busy(data)
        if left_out:  # before the folder is touched: an earlier report there stays as it was
            raise ReportError(f"--exclude-busy leaves nothing to report: all {left_out} ok run(s) below "
                              f"{', '.join(map(str, dirs))} were made on a busy host (host_quiet false); report "
                              "without --exclude-busy (the report marks them), or rerun with --wait-quiet SECONDS")
        folder = prepare_output(out)
        report_style()
        sections = report_sections(data)
        written = [path for section in sections for path in write_section(section, folder)]
        shown = [nbformat.v4.new_output("display_data", data=bundle, metadata=metadata)
                 for bundle, metadata in report_outputs(sections)]
        written.append(write_records_csv(data.frame, folder / "records.csv"))
        written.append(write_references(folder))
    outputs = {REPORT_CELL: shown,
               FILES_CELL: [nbformat.v4.new_output("stream", name="stdout", text=files_written(written) + "\n")]}
    log_warnings(caught, folder / "report.log")
    parameters = {"results_dirs": [_relative(d, folder.resolve()) for d in dirs], "output_dir": ".",
                  "exclude_busy_runs": exclude_busy,
                  "rates_file": _relative(rates_file, folder.resolve()) if rates_file else ""}
    notebook = report_notebook(REPORT_NOTEBOOK, parameters, outputs)
    write_atomic(folder / "report.ipynb", nbformat.writes(notebook))
    return ReportOutputs(folder, export_report_html(notebook, folder / "report.html"),
                         export_report_html(notebook, folder / "report-with-code.html", with_code=True),
                         folder / "figures", folder / "tables", data.loaded.summary())
