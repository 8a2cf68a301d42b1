"""`sweep --kernels reuse`: warm kernels (colabkit.sweep.runners.kernels) that leave nothing of one run in the
next, serve only runs of one key, and are replaced after any failure; used by every executor."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import nbformat
import pytest
from helpers import REPO

from colabkit.cli import build_parser, main
from colabkit.errors import GridError
from colabkit.records.record import read_record
from colabkit.sweep.expand import Combination
from colabkit.sweep.grids import device_request
from colabkit.sweep.runners.kernels import KernelLease, kernel_key
from colabkit.sweep.options import RunOptions
from colabkit.sweep.plan import plan
from colabkit.sweep.decide import decide
from colabkit.sweep.driver import run_sweep

CPU_ONLY = {"cpu": 1}

PARAMETERS = '''device = "cpu"
value = 1  # the swept value
exit_on = -1  # os._exit(7) on this value (a dead kernel)
oom_on = -1  # an impossible NumPy array on this value (a real out-of-memory error of the host)
sleep_on = -1  # sleep past the time limit on this value
results_path = ""
'''
# What a run leaves behind that the next must not see: a name, a Keras dtype policy, a changed folder
# and environment variable, an open figure; and what it must see: its first cell as In [n] of a fresh kernel.
WORK = '''import os, time
import colabkit

assert "leftover" not in globals(), "a name of the previous run is still here"
assert "COLABKIT_TEST_LEFTOVER" not in os.environ, "the previous run's environment is still here"
first_count = get_ipython().execution_count
run = colabkit.start_run("leaky", params=dict(device=device, value=value), results_path=results_path)
if value == exit_on:
    os._exit(7)
if value == oom_on:
    import numpy
    numpy.empty(1 << 60, dtype=numpy.uint8)
if value == sleep_on:
    time.sleep(600)
policy = None
if value == 1:  # leave Keras's global policy, a figure, a folder and a variable behind
    import keras
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    plt.figure()
    os.environ["COLABKIT_TEST_LEFTOVER"] = "1"
    os.chdir("/")
elif "keras" in __import__("sys").modules:
    import keras
    import matplotlib.pyplot as plt
    policy = keras.mixed_precision.global_policy().name
    assert plt.get_fignums() == [], "the previous run's figure is still open"
leftover = value
run.record(metrics={"double": 2 * value, "pid": os.getpid(), "first_count": first_count, "policy": policy,
                    "cwd": os.getcwd()}, device={"requested": device, "kind": "cpu"},
           data={"name": "none", "source": "synthetic"})
'''


def leaky_notebook(path: Path) -> Path:
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.cells = [nbformat.v4.new_code_cell(PARAMETERS, metadata={"tags": ["parameters"]}),
                      nbformat.v4.new_code_cell(WORK)]
    nbformat.write(notebook, str(path))
    return path


def write_grid(tmp_path: Path, body: str, name: str = "grid.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


@pytest.mark.notebook
def test_a_reused_kernel_leaves_nothing_behind_and_a_failure_of_any_kind_gets_the_next_run_a_fresh_one(tmp_path):
    notebook = leaky_notebook(tmp_path / "leaky.ipynb")
    # Two sweeps into one folder. The first, with no time limit (its first run imports Keras and matplotlib, however
    # long that takes): a dead kernel (3), an out-of-memory error (5). The second: a run past its time limit (8),
    # whose runs import nothing but colabkit (a second or two, loaded: the 10 s limit is a wide margin for them,
    # and what the sleeping run waits before it is stopped).
    first = write_grid(tmp_path, f"""
        notebook: {notebook}
        grid: {{device: [cpu], value: [1, 2, 3, 4, 5, 6]}}
        fixed: {{exit_on: 3, oom_on: 5}}
        kernels: reuse
        html: failed
    """)
    outcomes = run_sweep(plan([first], out=tmp_path / "out"), available=CPU_ONLY, echo=lambda line: None)
    second = write_grid(tmp_path, f"""
        notebook: {notebook}
        grid: {{device: [cpu], value: [7, 8, 9, 10]}}
        fixed: {{sleep_on: 8}}
        kernels: reuse
        html: failed
    """, name="timed.yaml")
    outcomes += run_sweep(plan([second], out=tmp_path / "out", options=RunOptions(timeout_s=10)),
                          available=CPU_ONLY, echo=lambda line: None)
    records = [read_record(outcome.record_path) for outcome in outcomes]
    assert [record["status"] for record in records] == ["ok", "ok", "failed", "ok", "failed", "ok", "ok", "failed",
                                                        "ok", "ok"]
    assert [records[index]["error"]["kind"] for index in (2, 4, 7)] == ["dead_kernel", "oom", "timeout"]
    # each failure costs its own kernel (5 and 8 ran in the kernel of the run before): the run after
    # a failure starts a fresh one, and succeeds
    assert [record["kernel"]["runs_before"] for record in records] == [0, 1, 2, 0, 1, 0, 0, 1, 0, 1]
    assert {record["kernel"]["mode"] for record in records} == {"reuse"}
    assert records[0]["kernel"]["key"] == {"backend": None, "device": "cpu", "mixed_precision": "none", "repeat": 1}
    ok = {record["params"]["value"]: record["metrics"] for record in records if record["status"] == "ok"}
    assert ok[1]["pid"] == ok[2]["pid"] != ok[4]["pid"]  # 2 ran in 1's kernel, 4 in a new one
    assert ok[9]["pid"] == ok[10]["pid"] != ok[7]["pid"]  # 8 ran in 7's kernel, 9 in a new one
    assert len({metrics["first_count"] for metrics in ok.values()}) == 1  # In [n] as in a fresh kernel
    assert ok[1]["cwd"] == "/" and ok[2]["cwd"] == str(Path.cwd()) and ok[2]["policy"] == "float32"  # all reset
    assert "Traceback" not in (tmp_path / "out" / "leaky" / "cpu" / "value-2.log").read_text()
    assert not list((tmp_path / "out").rglob(".*"))  # no temporaries
    # html: failed -- every run keeps its executed notebook, only the failed ones get HTML now; the rest on demand
    folder = tmp_path / "out" / "leaky" / "cpu"
    assert len(list(folder.glob("*.ipynb"))) == 10
    assert sorted(path.stem for path in folder.glob("*.html")) == ["value-3", "value-5", "value-8"]
    assert main(["export-html", str(tmp_path / "out")]) == 0
    assert len(list(folder.glob("*.html"))) == 10


@pytest.mark.notebook
def test_jobs_workers_reuse_their_kernels_too(tmp_path):
    notebook = leaky_notebook(tmp_path / "leaky.ipynb")
    grid = write_grid(tmp_path, f"""
        notebook: {notebook}
        grid: {{device: [cpu], value: [2, 4, 6, 8]}}
    """)
    outcomes = run_sweep(plan([grid], out=tmp_path / "out", kernels="reuse", options=RunOptions(jobs=2)),
                         available=CPU_ONLY, echo=lambda line: None)
    records = [read_record(outcome.record_path) for outcome in outcomes]
    assert all(record["status"] == "ok" and record["kernel"]["mode"] == "reuse" for record in records)
    assert sorted(record["kernel"]["runs_before"] for record in records)[-1] >= 1  # a worker's kernel ran twice
    by_pid: dict[int, list[int]] = {}
    for record in records:
        by_pid.setdefault(record["metrics"]["pid"], []).append(record["kernel"]["runs_before"])
    assert all(sorted(runs) == list(range(len(runs))) for runs in by_pid.values())
    # the mode is not part of the result: the same grid with fresh kernels keeps what reuse finished
    assert {decision.action for decision in decide(plan([grid]), tmp_path / "out", CPU_ONLY)} == {"done"}


@pytest.mark.notebook
def test_dask_workers_reuse_their_kernels_too(tmp_path):
    pytest.importorskip("distributed")
    notebook = leaky_notebook(tmp_path / "leaky.ipynb")
    grid = write_grid(tmp_path, f"""
        notebook: {notebook}
        grid: {{device: [cpu], value: [2, 4, 6]}}
    """)
    outcomes = run_sweep(plan([grid], out=tmp_path / "out", kernels="reuse", options=RunOptions(cluster="local:1")),
                         echo=lambda line: None)
    records = [read_record(outcome.record_path) for outcome in outcomes]
    assert [record["status"] for record in records] == ["ok"] * 3
    assert [record["kernel"]["runs_before"] for record in records] == [0, 1, 2]
    assert len({record["metrics"]["pid"] for record in records}) == 1


def combination(device: str = "cpu", **params) -> Combination:
    notebook = REPO / "notebooks" / "paradnn.ipynb"
    return Combination(notebook, {"device": device, "backend": "auto", **params}, "x", device_request(device))


def test_runs_share_a_kernel_only_where_the_backend_device_and_precision_agree():
    key = kernel_key(combination(mixed_precision="none"), None, "/here", {})
    assert key == kernel_key(combination(mixed_precision="none", family="rnn", batch_size=8), None, "/here", {})
    assert key == kernel_key(combination(), None, "/here", {})  # no such parameter (matmul): no policy set, "none"'s
    assert key.backend == "tensorflow" and key.kernel_name == "python3"  # "auto" resolved; the notebook's kernel
    others = [combination("cpu:2", mixed_precision="none"), combination(mixed_precision="mixed_bfloat16"),
              combination(mixed_precision="none", backend="jax")]
    assert all(kernel_key(other, None, "/here", {}) != key for other in others)
    assert kernel_key(combination(), None, "/here", {"CUDA_VISIBLE_DEVICES": "1"}) != kernel_key(
        combination(), None, "/here", {"CUDA_VISIBLE_DEVICES": "0"})
    assert kernel_key(combination("multiworker:2"), None, "/here", {}) is None  # its processes are its own
    # Repeats of one combination are independent runs: repeat 2 never shares repeat 1's kernel.
    repeated = combination(mixed_precision="none").with_repeat(2)
    assert kernel_key(repeated, None, "/here", {}) != key and kernel_key(repeated, None, "/here", {}).repeat == 2
    fresh = KernelLease.of(combination(), RunOptions(cwd="/here"), {})
    assert fresh.manager is None and fresh.record == {"mode": "fresh", "runs_before": 0}


def test_a_grid_file_or_preset_says_which_kernels_and_the_command_line_overrides(tmp_path):
    grid = write_grid(tmp_path, f"""
        notebook: {REPO / 'notebooks' / 'matmul_tflops.ipynb'}
        grid: {{device: [cpu], n: [64]}}
        kernels: reuse
        presets:
          careful: {{kernels: fresh}}
          plain: {{fixed: {{count: 2}}}}
    """)
    assert [c.settings.kernels for c in plan([grid], out=tmp_path)] == ["reuse"]
    assert [c.settings.kernels for c in plan([grid], "careful", out=tmp_path)] == ["fresh"]
    assert [c.settings.kernels for c in plan([grid], "plain", out=tmp_path)] == ["reuse"]
    assert [c.settings.kernels for c in plan([grid], "careful", out=tmp_path, kernels="reuse")] == ["reuse"]
    assert plan([REPO / "parameters" / "paradnn.yaml"], "smoke", "cpu")[0].settings.kernels == "reuse"
    bad = write_grid(tmp_path, grid.read_text().replace("kernels: reuse", "kernels: warm"))
    with pytest.raises(GridError, match="kernels: 'warm': expected one of fresh, reuse"):
        plan([bad], out=tmp_path)
    args = build_parser().parse_args(["sweep", str(grid), "--kernels", "fresh", "--kernel-runs", "5"])
    assert (args.kernels, args.max_kernel_runs) == ("fresh", 5)
    with pytest.raises(SystemExit) as refused:  # the command line's choices: no run reads the value again
        main(["sweep", str(grid), "--kernels", "warm", "--out", str(tmp_path / "o")])
    assert refused.value.code == 2 and not (tmp_path / "o").exists()


def test_the_record_field_is_documented():
    from colabkit.records.record import FIELD_DOCS

    assert "kernel" in FIELD_DOCS and "runs_before" in FIELD_DOCS["kernel"]
    assert json.dumps(FIELD_DOCS["kernel"])
