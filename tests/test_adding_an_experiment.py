"""Adding an experiment takes one declaration, one notebook, one grid file and one report section
module, and no change to colabkit: a tiny experiment written under tmp_path is validated, swept
(the real sweep, papermill kernels) and reported (the real report notebook) as
docs/adding-an-experiment.md says."""

from __future__ import annotations

import csv
import os
import subprocess
import textwrap
from pathlib import Path

import nbformat
import pytest

from colabkit.cli import main
from colabkit.records.record import read_record

REPO = Path(__file__).resolve().parent.parent

DECLARATION = '''
from colabkit.experiments import Experiment, Headline, Parameter, device_parameter, results_path_parameter

EXPERIMENT = Experiment(
    name="tiny",
    notebook="notebooks/tiny.ipynb",
    title="Tiny doubling",
    measures="Twice a whole number, per device",
    parameters=(
        device_parameter(),
        Parameter("value", int, 1, "the number doubled", minimum=1, maximum=1000),
        Parameter("label", str, "a", "a tag", choices=("a", "b")),
        results_path_parameter("tiny"),
    ),
    metrics=("double",),
    headline=Headline("double", "twice the value", "1", "higher"),
)
'''

SECTION = '''
import pandas as pd

from colabkit.report.common import column
from colabkit.report.headline import notebook_section
from colabkit.report.section import ReportTable
from colabkit.report.experiment_sections import register_section


def tiny_table(data):
    ok = data.ok("tiny")
    return pd.DataFrame({"device": ok["device_label"], "value": column(ok, "params.value"),
                         "double": column(ok, "metrics.double")}).sort_values("value")


def _fill(section, table, data):
    section.text.append(f"The tiny experiment doubled {len(table)} value(s).")
    section.items.append(ReportTable("tiny_values", table, "Each value and its double."))


def tiny_section(data):
    return notebook_section(data, "tiny", "Tiny doubling", "tiny", tiny_table, _fill, "Doubles a number.")


register_section("tiny", tiny_section)
'''

PARAMETERS = 'device = "auto"  # where it runs\nvalue = 1  # the number doubled\nlabel = "a"  # a tag\nresults_path = ""\n'
START = 'import colabkit\n\nrun = colabkit.start_run("tiny", globals())'
WORK = ('run.record(metrics={"double": 2 * value}, device={"requested": device, "kind": "cpu"},\n'
        '           data={"name": "none", "source": "synthetic"})')

GRID = '''
notebook: notebooks/tiny.ipynb
description: The tiny experiment.
grid:
  device: [cpu]
  value: [1, 2, 3]
presets:
  smoke: {}
  paper: {}
'''


@pytest.fixture
def tiny_suite(tmp_path, monkeypatch):
    """The four files of a new experiment, all outside the repository, found through COLABKIT_EXPERIMENTS."""
    lab = tmp_path / "lab" / "tiny_lab"
    lab.mkdir(parents=True)
    (lab / "__init__.py").write_text("")
    (lab / "experiment.py").write_text(DECLARATION)
    (lab / "section.py").write_text(SECTION)
    suite = tmp_path / "suite"
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.cells = [nbformat.v4.new_markdown_cell("# Tiny doubling"),
                      nbformat.v4.new_code_cell(PARAMETERS, metadata={"tags": ["parameters"]}),
                      nbformat.v4.new_code_cell(START), nbformat.v4.new_code_cell(WORK)]
    (suite / "notebooks").mkdir(parents=True)
    nbformat.write(notebook, str(suite / "notebooks" / "tiny.ipynb"))
    (suite / "parameters").mkdir()
    (suite / "parameters" / "tiny.yaml").write_text(textwrap.dedent(GRID))
    monkeypatch.setenv("COLABKIT_EXPERIMENTS", "tiny_lab.experiment,tiny_lab.section")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(lab.parent), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.syspath_prepend(str(lab.parent))
    return suite


def repository_state() -> str:
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=REPO, capture_output=True,
                          text=True, check=True).stdout


@pytest.mark.notebook
def test_a_new_experiment_is_validated_swept_and_reported_with_no_file_of_colabkit_touched(tiny_suite, tmp_path,
                                                                                         capsys):
    import papermill
    from papermill.exceptions import PapermillExecutionError

    from colabkit.experiments import get

    before = repository_state()
    grid = tiny_suite / "parameters" / "tiny.yaml"
    out = tmp_path / "out"
    assert get("tiny").title == "Tiny doubling"

    # Validated: by the sweep, before anything runs ...
    assert main(["sweep", str(grid), "--out", str(out), "-p", "value=0", "-p", "label=c"]) == 2
    err = capsys.readouterr().err
    assert "-p value (tiny.ipynb): value = 0: expected an int >= 1 and <= 1000" in err
    assert "-p label (tiny.ipynb): label = 'c': expected one of a, b" in err
    assert not out.exists()
    # ... and by the notebook itself, run by plain papermill.
    with pytest.raises(PapermillExecutionError) as info:
        papermill.execute_notebook(str(tiny_suite / "notebooks" / "tiny.ipynb"), str(tmp_path / "bad.ipynb"),
                                   parameters={"value": "abc", "results_path": str(tmp_path / "bad.json")},
                                   progress_bar=False, cwd=str(tiny_suite))
    assert (info.value.ename, info.value.evalue) == ("ParameterError", "value = 'abc': expected an int >= 1 and <= 1000")

    # Swept: the real sweep runs the notebook once per combination in papermill kernels.
    assert main(["sweep", str(grid), "--out", str(out), "--device", "cpu"]) == 0
    records = {read_record(path)["params"]["value"]: read_record(path) for path in (out / "tiny" / "cpu").glob("*.json")}
    assert sorted(records) == [1, 2, 3]
    assert all(record["status"] == "ok" and record["metrics"]["double"] == 2 * value
               for value, record in records.items())
    assert records[2]["params"] == {"device": "cpu", "value": 2, "label": "a"}

    # Reported: the report gives the experiment its section, from its own section module.
    report_dir = tmp_path / "report"
    assert main(["report", str(out), "--out", str(report_dir)]) == 0
    html = (report_dir / "report.html").read_text(encoding="utf-8")
    assert "Tiny doubling" in html and "The tiny experiment doubled 3 value(s)." in html
    with open(report_dir / "tables" / "tiny_values.csv", encoding="utf-8") as stream:
        rows = list(csv.DictReader(stream))
    assert [(row["value"], row["double"]) for row in rows] == [("1", "2"), ("2", "4"), ("3", "6")]
    assert "have no section" not in html  # the overview knows the experiment

    assert repository_state() == before  # nothing of the repository was written
