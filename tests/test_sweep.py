"""The sweep: grid validation, one papermill run per combination, skipped devices, isolated failures."""

from __future__ import annotations

import json
import textwrap

import pytest

from colabkit.cli import main
from colabkit.errors import GridError
from colabkit.grid import expand, load_grid
from colabkit.results import read_record
from colabkit.sweep import plan, run_sweep, summary_table
from conftest import NOTEBOOKS, REPO


def write_grid(tmp_path, body: str):
    path = tmp_path / "grid.yaml"
    path.write_text(textwrap.dedent(body))
    return path


def test_every_committed_grid_file_is_valid_and_has_smoke_and_paper_presets():
    for grid_path in sorted((REPO / "parameters").glob("*.yaml")):
        spec = load_grid(grid_path)
        assert {"smoke", "paper"} <= set(spec.presets), grid_path.name
        assert expand(spec, "smoke"), grid_path.name


def test_smoke_preset_overrides_grid_and_fixed_values():
    spec = load_grid(REPO / "parameters" / "matmul_tflops.yaml")
    combinations = expand(spec, "smoke", devices=["cpu"])
    assert [c.params["n"] for c in combinations] == [256, 512]
    assert all(c.params["count"] == 3 and c.params["dtype"] == "float32" for c in combinations)
    assert [c.slug for c in combinations] == ["n-256_dtype-float32", "n-512_dtype-float32"]


@pytest.mark.parametrize("body, message", [
    ("notebook: [unclosed", "not valid YAML"),
    ("grid: {device: [cpu]}", "`notebook` (path of the .ipynb to run) is missing"),
    ("notebook: notebooks/nope.ipynb\ngrid: {device: [cpu]}", "notebook 'notebooks/nope.ipynb' not found"),
    ("notebook: NB\ngrid: {device: [cpu], n: []}", "grid.n is an empty list"),
    ("notebook: NB\ngrid: {device: [cuda]}", "unknown device 'cuda'"),
    ("notebook: NB\ngrid: {n: [1]}", "no `device` axis"),
    ("notebook: NB\ngird: {device: [cpu]}", "unknown key(s) gird"),
])
def test_bad_grid_files_give_one_clear_error(tmp_path, body, message):
    path = write_grid(tmp_path, body.replace("NB", str(NOTEBOOKS / "matmul_tflops.ipynb")))
    with pytest.raises(GridError) as info:
        load_grid(path)
    assert message in str(info.value)


def test_unknown_preset_names_the_known_ones():
    with pytest.raises(GridError, match=r"unknown preset 'tiny' \(this file has: paper, smoke\)"):
        plan([REPO / "parameters" / "matmul_tflops.yaml"], "tiny", None)


def test_cli_reports_bad_grid_and_runs_nothing(tmp_path, capsys):
    path = write_grid(tmp_path, "notebook: nowhere.ipynb\ngrid: {device: [cpu]}\n")
    assert main(["sweep", str(path), "--out", str(tmp_path / "out")]) == 2
    assert "notebook 'nowhere.ipynb' not found" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.notebook
def test_sweep_runs_each_combination_skips_absent_devices_and_isolates_failures(tmp_path):
    grid = write_grid(tmp_path, f"""
        notebook: {NOTEBOOKS / "matmul_tflops.ipynb"}
        grid:
          device: [cpu, tpu]
          dtype: [float32, no_such_dtype]
        fixed: {{n: 128, count: 2, repeats: 2, blas_baseline: false}}
        presets: {{smoke: {{}}, paper: {{}}}}
    """)
    out = tmp_path / "out"
    outcomes = run_sweep([grid], out=out, available={"cpu": 1}, echo=lambda line: None)
    by_key = {(o.combination.device, o.combination.params["dtype"]): o for o in outcomes}
    assert [o.status for o in outcomes] == ["ok", "failed", "skipped", "skipped"]

    ok = by_key[("cpu", "float32")]
    base = out / "matmul_tflops" / "cpu" / "dtype-float32"
    assert ok.record_path == base.with_suffix(".json")
    for suffix in (".ipynb", ".html", ".json", ".log"):
        assert base.with_suffix(suffix).is_file(), suffix
    assert read_record(base.with_suffix(".json"))["metrics"]["tflops_warm"] > 0
    html = base.with_suffix(".html").read_text()
    assert "data:image/png;base64" in html and "TFLOPS" in html
    assert not list(out.rglob(".*"))  # no temporary files left behind

    failed = read_record(by_key[("cpu", "no_such_dtype")].record_path)
    assert failed["status"] == "failed" and failed["error"]["cell"] is not None
    assert "no_such_dtype" in failed["error"]["message"] + failed["error"]["source"]
    assert (out / "matmul_tflops" / "cpu" / "dtype-no_such_dtype.ipynb").is_file()  # kept for inspection

    skipped = read_record(by_key[("tpu", "float32")].record_path)
    assert skipped["status"] == "skipped" and "device 'tpu' is not on this machine" in skipped["error"]["message"]
    assert not (out / "matmul_tflops" / "tpu" / "dtype-float32.ipynb").exists()

    table = summary_table(outcomes)
    assert "1 ok, 1 failed, 2 skipped" in table and "dtype-no_such_dtype" in table
    assert json.loads(ok.record_path.read_text())["params"]["device"] == "cpu"
