"""A plan file (`sweep --plan FILE`) is read as strictly as a grid file, by the grid's own checks, before anything
runs: each bad plan of issue 58 is refused by the dry run and the run alike, in one line, exit 2, nothing written;
`sweep GRID --dry-run --save-plan FILE` writes the plan `--plan` reads."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from helpers import REPO
from notebook_factory import write_tiny_notebook

from colabkit.cli import main
from colabkit.errors import GridError
from colabkit.sweep.plan import SweepPlan, plan, read_plan

CNN = REPO / "parameters" / "cnn_mnist.yaml"


@pytest.fixture(scope="module")
def planned(tmp_path_factory) -> dict:
    """The CNN smoke's plan on the CPU as JSON: its first run is a training run, its third an inference run."""
    return json.loads(plan([CNN], "smoke", "cpu", out=tmp_path_factory.mktemp("planned") / "out").to_json())


def one_run(data: dict, **changes) -> dict:
    """The plan with its first run only, each `changes` key replacing the run's, or (a dict) updating it."""
    data = copy.deepcopy(data)
    run = data["runs"][0]
    for key, value in changes.items():
        run[key] = {**run[key], **value} if isinstance(value, dict) and isinstance(run.get(key), dict) else value
    data["runs"] = [run]
    return data


def other_checkout(data: dict) -> dict:
    """Every run named by another checkout's absolute path, as a plan written there before plans named notebooks
    relatively: one line for all of them."""
    data = copy.deepcopy(data)
    for run in data["runs"]:
        run["notebook"] = "/home/someone/colabkit/notebooks/cnn_mnist.ipynb"
    return {**data, "out": "/home/someone/colabkit/outputs/smoke"}


CASES = [  # (name, the bad plan made from the good one, words its one line says)
    ("slug a path", lambda d: one_run(d, slug="../../../x/evil"),
     "run 1: slug '../../../x/evil': expected a name as the sweep makes them"),
    ("notebook outside the suite", lambda d: one_run(d, notebook="../../x.ipynb"),
     "run 1: notebook '../../x.ipynb' is not one of the suite's"),
    ("undeclared parameter", lambda d: one_run(d, params={"bogus_knob": 3}),
     "run 1: params.bogus_knob: the notebook notebooks/cnn_mnist.ipynb declares no parameter `bogus_knob`"),
    ("batch size -1", lambda d: one_run(d, params={"batch_size": -1}),
     "run 1: params.batch_size: batch_size = -1: expected an int >= 1"),
    ("a mode the CNN does not offer", lambda d: one_run(d, params={"mode": "decode"}),
     "run 1: params.mode: mode = 'decode': expected one of train, inference"),
    ("repeat 0", lambda d: one_run(d, repeat=0), "run 1: repeat = 0: expected a whole number >= 1"),
    ("repeats -3", lambda d: one_run(d, settings={"repeats": -3}),
     "run 1: settings.repeats = -3: expected a whole number >= 1"),
    ("html bogus", lambda d: one_run(d, settings={"html": "bogus"}),
     "run 1: settings.html: 'bogus': expected one of all, failed, none"),
    ("kernels bogus", lambda d: one_run(d, settings={"kernels": "bogus"}),
     "run 1: settings.kernels: 'bogus': expected one of fresh, reuse"),
    ("a missing notebook", lambda d: one_run(d, notebook="notebooks/no_such.ipynb"),
     "run 1: notebook 'notebooks/no_such.ipynb': no such notebook in"),
    ("another checkout", other_checkout,
     "is not one of the suite's (" + str(REPO / "notebooks") + "): a plan made in another checkout? plan it again "
     "with this colabkit: sweep GRID ... --dry-run --save-plan FILE (and 8 more run(s) alike)"),
    ("another version", lambda d: {**d, "colabkit_plan": 1},
     "a plan of format 1, from another colabkit; this one reads format 2"),
    ("a rule between parameters", lambda d: one_run(d, params={"profile_steps": 2, "breakdown": False}),
     "run 1: profile_steps = 2: expected 0 with breakdown = False"),
    ("an option out of range", lambda d: {**d, "options": {**d["options"], "jobs": 0}},
     "options: jobs = 0: expected a whole number >= 1"),
    ("an unknown setting", lambda d: one_run(d, settings={"speed": "max"}), "run 1: settings: unknown key `speed`"),
    ("two runs, one slug", lambda d: {**d, "runs": [d["runs"][0], {**d["runs"][1], "slug": d["runs"][0]["slug"]}]},
     "would write the same files"),
]


@pytest.mark.parametrize("name,bad,words", CASES, ids=[case[0] for case in CASES])
def test_a_bad_plan_is_refused_in_one_line_before_anything_runs_or_is_written(tmp_path, monkeypatch, capsys, planned,
                                                                             name, bad, words):
    def no_kernel(*args, **kwargs):
        raise AssertionError("a notebook ran")

    monkeypatch.setattr("papermill.execute_notebook", no_kernel)
    monkeypatch.setattr("colabkit.sweep.devices.detect_devices", no_kernel)
    monkeypatch.chdir(tmp_path)  # a relative path that leaked would land here
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(bad(planned)))
    for dry_run in (["--dry-run"], []):
        assert main(["sweep", "--plan", str(path), "--out", str(tmp_path / "out"), *dry_run]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: --plan {path}: ") and words in err and err.count("\n") == 1, err
    assert [p.name for p in tmp_path.iterdir()] == ["plan.json"]  # nothing written, here or elsewhere below it
    assert not (tmp_path.parent / "x").exists()


def test_a_plan_file_that_is_no_plan_is_refused_in_one_line(tmp_path, capsys):
    path = tmp_path / "plan.json"
    for text, words in (('{"colabkit_plan": 2, "colabkit_plan": 2}', "the key 'colabkit_plan' is given twice"),
                        ("[1]", "not a colabkit plan (no `colabkit_plan`)"), ("{", "cannot be read as a sweep's plan"),
                        ('{"colabkit_plan": 2, "out": "o", "options": {}, "runs": [], "extra": 1}', "unknown key")):
        path.write_text(text)
        assert main(["sweep", "--plan", str(path), "--dry-run"]) == 2
        err = capsys.readouterr().err
        assert words in err and err.count("\n") == 1, err


def test_save_plan_writes_the_plan_that_plan_runs_here_or_elsewhere(tmp_path, capsys):
    """Plan here, run there: --save-plan writes the dry run's plan, whose notebooks are named in the suite
    (notebooks/NAME.ipynb) and whose folder stays as given; `--plan` reads the same runs back."""
    saved = tmp_path / "smoke.json"
    assert main(["sweep", str(CNN), "--preset", "smoke", "--device", "cpu", "--out", "outputs/smoke", "--dry-run",
                 "--save-plan", str(saved)]) == 0
    assert f"plan of 9 run(s) saved to {saved}" in capsys.readouterr().out
    data = json.loads(saved.read_text())
    assert data["out"] == "outputs/smoke" and {run["notebook"] for run in data["runs"]} == {"notebooks/cnn_mnist.ipynb"}
    again = read_plan(saved, tmp_path / "there")
    made = plan([CNN], "smoke", "cpu", out="outputs/smoke")
    assert [(run.label, run.params, run.settings) for run in again] == [(run.label, run.params, run.settings)
                                                                         for run in made]
    assert main(["sweep", "--plan", str(saved), "--out", str(tmp_path / "there"), "--dry-run"]) == 0
    assert "would run 9" in capsys.readouterr().out and not (tmp_path / "there").exists()
    for refused in (["sweep", str(CNN), "--save-plan", str(tmp_path / "x.json")],  # no --dry-run
                    ["sweep", "--plan", str(saved), "--dry-run", "--save-plan", str(tmp_path / "x.json")]):
        assert main(refused) == 2 and "--save-plan FILE goes with grid files and --dry-run" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()


def test_a_notebook_outside_the_suite_cannot_be_written_into_a_plan(tmp_path):
    notebook = write_tiny_notebook(tmp_path / "scratch.ipynb")
    grid = tmp_path / "grid.yaml"
    grid.write_text(f"notebook: {notebook}\ngrid: {{device: [cpu]}}\n")
    with pytest.raises(GridError, match="is not one of the suite's .*: a plan file names only those"):
        plan([grid], out=tmp_path / "out").to_json()
    assert isinstance(plan([grid], out=tmp_path / "out"), SweepPlan)  # planned and run here, as ever
    assert Path(notebook).exists()
