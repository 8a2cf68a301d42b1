"""The sweep end to end: one papermill run per combination, isolated failures of every kind, resume,
timeouts, kernel start retries, dry runs and the status verb. Most runs use the tiny notebook from
notebook_factory (about a second each); the matmul notebook runs where its real outputs matter."""

from __future__ import annotations

import json
import os
import textwrap

import pytest
from helpers import NOTEBOOKS, REPO
from notebook_factory import write_tiny_notebook

from colabkit.cli import main
from colabkit.device.spec import DeviceRequest
from colabkit.records.record import read_record
from colabkit.sweep.console import outcomes_table
from colabkit.sweep.expand import expand
from colabkit.sweep.grids import load_grid
from colabkit.sweep.options import Repetition, RunOptions
from colabkit.sweep.plan import plan
from colabkit.sweep.decide import decide
from colabkit.sweep.driver import run_sweep
from colabkit.sweep.console import format_status
from colabkit.sweep.folder import collect_status

CPU_ONLY = {"cpu": 1}


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
    combinations = expand(spec, "smoke", devices=[DeviceRequest("cpu")])
    assert [c.params["n"] for c in combinations] == [256, 512]
    assert all(c.params["count"] == 3 and c.params["dtype"] == "float32" for c in combinations)
    assert [c.slug for c in combinations] == ["n-256_dtype-float32", "n-512_dtype-float32"]


@pytest.mark.notebook
@pytest.mark.long("the matmul smoke's notebook in several fresh kernels, a failing one among them")
def test_sweep_runs_each_combination_skips_absent_devices_and_isolates_failures(tmp_path):
    grid = write_grid(tmp_path, f"""
        notebook: {NOTEBOOKS / "matmul_tflops.ipynb"}
        grid:
          device: [cpu, tpu]
          n: [128, 1000000]  # a valid n whose 4 TB matrices no machine here can allocate: a real failure
        fixed: {{dtype: float32, count: 2, timed_calls: 2, blas_baseline: false}}
        presets: {{smoke: {{}}, paper: {{}}}}
    """)
    out = tmp_path / "out"
    outcomes = run_sweep(plan([grid], out=out), available={"cpu": 1}, echo=lambda line: None)
    by_key = {(o.combination.device, o.combination.params["n"]): o for o in outcomes}
    assert [o.status for o in outcomes] == ["ok", "failed", "skipped", "skipped"]

    ok = by_key[("cpu", 128)]
    base = out / "matmul_tflops" / "cpu" / "n-128"
    assert ok.record_path == base.with_suffix(".json")
    for suffix in (".ipynb", ".html", ".json", ".log"):
        assert base.with_suffix(suffix).is_file(), suffix
    assert read_record(base.with_suffix(".json"))["metrics"]["tflops_warm"] > 0
    html = base.with_suffix(".html").read_text()
    assert "data:image/png;base64" in html and "TFLOPS" in html
    assert not list(out.rglob(".*"))  # no temporary files left behind

    failed = read_record(by_key[("cpu", 1000000)].record_path)
    assert failed["status"] == "failed" and failed["error"]["cell"] is not None
    assert "1000000" in failed["error"]["message"] + failed["error"]["source"]
    assert (out / "matmul_tflops" / "cpu" / "n-1000000.ipynb").is_file()  # kept for inspection

    skipped = read_record(by_key[("tpu", 128)].record_path)
    assert skipped["status"] == "skipped" and "device 'tpu' is not on this machine" in skipped["error"]["message"]
    assert not (out / "matmul_tflops" / "tpu" / "n-128.ipynb").exists()

    table = outcomes_table(outcomes)
    assert "1 ok, 1 failed, 2 skipped" in table and "n-1000000" in table
    assert json.loads(ok.record_path.read_text())["params"]["device"] == "cpu"


def quiet(line: str) -> None:
    """An `echo` for run_sweep that keeps test output clean."""


@pytest.fixture
def tiny(tmp_path):
    return write_tiny_notebook(tmp_path / "tiny.ipynb")


def records_by_value(out, notebook="tiny", device="cpu"):
    return {read_record(path)["params"]["value"]: read_record(path)
            for path in (out / notebook / device).glob("*.json") if not path.name.startswith(".")}


@pytest.mark.notebook
@pytest.mark.long("three fresh kernels, each failing its own way, one of them allocating until it runs out of memory")
def test_a_cell_error_a_dead_kernel_and_a_real_oom_each_fail_alone(tmp_path, tiny, monkeypatch, capsys):
    monkeypatch.setattr("colabkit.sweep.devices.detect_devices", lambda: CPU_ONLY)
    grid = write_grid(tmp_path, f"""
        notebook: {tiny}
        grid: {{device: [cpu], value: [1, 2, 3, 4, 5]}}
        fixed: {{fail_on: 2, exit_on: 3, oom_on: 5}}
    """)
    out = tmp_path / "out"
    assert main(["sweep", str(grid), "--out", str(out), "--no-progress"]) == 1  # non-zero: something failed
    printed = capsys.readouterr().out
    assert "2 ok, 3 failed, 0 skipped" in printed
    assert f"inspect {out}/tiny/cpu/value-2.ipynb and {out}/tiny/cpu/value-2.log" in printed

    records = records_by_value(out)
    assert {value: record["status"] for value, record in records.items()} == \
        {1: "ok", 2: "failed", 3: "failed", 4: "ok", 5: "failed"}  # the sweep went on after each failure
    assert records[1]["metrics"] == {"double": 2} and records[4]["metrics"] == {"double": 8}
    assert records[1]["fingerprint"]["params"] == {"device": "cpu", "value": 1, "fail_on": 2, "exit_on": 3, "oom_on": 5}

    stored = json.loads(tiny.read_text())["cells"]
    raised = records[2]["error"]
    assert (raised["type"], raised["kind"], raised["message"]) == ("ValueError", "exception", "value 2 is set to fail")
    assert raised["cell"] == 3 and raised["source"] == "".join(stored[3]["source"])  # the cell as stored
    assert "raise ValueError" in raised["source"]
    assert raised["exec_count"] == 4  # In [4]: the parameters papermill injected ran as In [2]
    died = records[3]["error"]
    assert (died["type"], died["kind"], died["exit_code"], died["cell"]) == ("DeadKernelError", "dead_kernel", 7, 3)
    oom = records[5]["error"]
    assert (oom["type"], oom["kind"]) == ("ResourceExhaustedError", "oom") and "OOM when allocating" in oom["message"]

    for value in (2, 3, 5):  # each failed run keeps its executed notebook, HTML and log for inspection
        base = out / "tiny" / "cpu" / f"value-{value}"
        for suffix in (".ipynb", ".html", ".log"):
            assert base.with_name(base.name + suffix).is_file(), (value, suffix)
    executed = json.loads((out / "tiny" / "cpu" / "value-2.ipynb").read_text())
    [failing] = [cell for cell in executed["cells"] if cell.get("execution_count") == raised["exec_count"]]
    assert failing["outputs"][-1]["ename"] == "ValueError"
    assert "Traceback" in (out / "tiny" / "cpu" / "value-3.log").read_text()
    assert not [path for path in out.rglob(".*")]  # no temporaries, no lock left behind


@pytest.mark.notebook
def test_a_run_over_its_time_limit_fails_and_the_sweep_goes_on(tmp_path, tiny):
    # 2 sleeps 120 s (stopped at the limit, it fails; left to sleep, it would end ok); 1 and 3 import
    # colabkit and write a record (a second or two on a loaded host: 10 s is a wide margin for them)
    grid = write_grid(tmp_path, f"""
        notebook: {tiny}
        grid: {{device: [cpu], value: [1, 2, 3]}}
        fixed: {{sleep_on: 2, sleep_s: 120.0}}
    """)
    outcomes = run_sweep(plan([grid], out=tmp_path / "out", options=RunOptions(timeout_s=10)),
                         available=CPU_ONLY, echo=quiet)
    assert [o.status for o in outcomes] == ["ok", "failed", "ok"]
    error = read_record(outcomes[1].record_path)["error"]
    assert (error["type"], error["kind"], error["cell"], error["exec_count"]) == ("CellTimeoutError", "timeout", 3, 4)
    assert "--timeout 10 s" in error["message"]


@pytest.mark.notebook
def test_resume_keeps_finished_runs_reruns_failed_and_stale_ones(tmp_path, tiny):
    grid = write_grid(tmp_path, f"""
        notebook: {tiny}
        grid: {{device: [cpu, tpu], value: [1, 2]}}
        fixed: {{fail_on: 2}}
    """)
    out = tmp_path / "out"
    first = run_sweep(plan([grid], out=out), available=CPU_ONLY, echo=quiet)
    assert [(o.combination.device, o.status) for o in first] == \
        [("cpu", "ok"), ("cpu", "failed"), ("tpu", "skipped"), ("tpu", "skipped")]
    ok_record = out / "tiny" / "cpu" / "value-1.json"
    stamp = ok_record.stat().st_mtime_ns

    second = run_sweep(plan([grid], out=out), available=CPU_ONLY, echo=quiet)
    assert [(o.status, o.resumed) for o in second] == [("ok", True), ("failed", False), ("skipped", False), ("skipped", False)]
    assert ok_record.stat().st_mtime_ns == stamp  # not run again, not rewritten

    combinations = plan([grid])
    reasons = {(d.combination.device, d.combination.params["value"]): (d.action, d.reason)
               for d in decide(combinations, out, CPU_ONLY)}
    assert reasons[("cpu", 1)] == ("done", "finished earlier with the same fingerprint")
    assert reasons[("cpu", 2)] == ("rerun", "failed before (ValueError)")
    assert reasons[("tpu", 1)][0] == "skip" and "device 'tpu' is not on this machine" in reasons[("tpu", 1)][1]
    assert decide(combinations, out, CPU_ONLY, force=True)[0].action == "rerun"
    # -p never takes a finished run's place: a pinned grid value is that run (kept); a changed value runs beside it.
    [pinned] = [d for d in decide(plan([grid], overrides={"value": 1}), out, CPU_ONLY) if d.combination.device == "cpu"]
    assert (pinned.combination.slug, pinned.action) == ("value-1", "done")
    changed = decide(plan([grid], overrides={"label": "b"}), out, CPU_ONLY)[0]
    assert (changed.combination.slug, changed.action, changed.reason) == ("value-1_label-b", "run", "not run yet")
    grid.write_text(grid.read_text().replace("fail_on: 2", "fail_on: 2, label: c"))  # the file's own fixed value
    assert decide(plan([grid]), out, CPU_ONLY)[0].reason == "stale: parameters changed (label)"
    notebook = json.loads(tiny.read_text())
    notebook["cells"][-1]["source"] += "\nprint('edited')"
    tiny.write_text(json.dumps(notebook))
    assert decide(combinations, out, CPU_ONLY)[0].reason == "stale: the notebook changed"

    status = collect_status(out)
    cpu, tpu = status.groups[("tiny", "cpu")], status.groups[("tiny", "tpu")]
    assert (cpu.counts["ok"], cpu.counts["failed"], tpu.counts["skipped"]) == (1, 1, 2)
    text = format_status(status)
    assert "1 ok, 1 failed, 2 skipped, 0 unfinished" in text
    assert f"failed  {out}/tiny/cpu/value-2.json: ValueError [exception] in In [4]: value 2 is set to fail" in text


def test_devices_are_asked_of_a_framework_only_where_the_machine_shows_an_accelerator(monkeypatch):
    import types

    import colabkit.sweep.devices as devices

    asked = []
    monkeypatch.setattr(devices.subprocess, "run", lambda *args, **kwargs: asked.append(args) or types.SimpleNamespace(
        returncode=0, stdout='{"cpu": 1, "gpu": 2}\n', stderr=""))
    monkeypatch.setattr(devices, "tpu_runtime_hint", lambda: None)
    monkeypatch.setattr(devices, "nvidia_smi", lambda: [])
    monkeypatch.setattr(devices.glob, "glob", lambda pattern: [])
    monkeypatch.setattr(devices.os.path, "exists", lambda path: False)
    assert devices.accelerator_signs() == [] and devices.detect_devices() == {"cpu": 1} and asked == []
    monkeypatch.setattr(devices, "nvidia_smi", lambda: [{"name": "Tesla T4"}])
    assert devices.accelerator_signs() == ["nvidia-smi lists Tesla T4"]
    assert devices.detect_devices() == {"cpu": 1, "gpu": 2} and len(asked) == 1  # TensorFlow, in a child


def test_dry_run_lists_what_would_run_and_writes_nothing(tmp_path, tiny, monkeypatch, capsys):
    monkeypatch.setattr("colabkit.sweep.devices.detect_devices", lambda: CPU_ONLY)
    grid = write_grid(tmp_path, f"notebook: {tiny}\ngrid: {{device: [cpu, gpu], value: [1, 2]}}\n")
    out = tmp_path / "out"
    assert main(["sweep", str(grid), "--out", str(out), "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2].split()[:5] == ["tiny", "cpu", "value-1", "run", "not"]
    assert lines[4].split()[:4] == ["tiny", "gpu", "value-1", "skip"] and "device 'gpu' is not on this machine" in lines[4]
    assert lines[-1] == f"would run 2 (0 of them again), keep 0 finished earlier, skip 2; outputs in {out}"
    assert not out.exists()


@pytest.mark.parametrize("options, message", [
    (["--wait-quiet", "5", "--jobs", "2"], "--wait-quiet waits for an idle host before each run"),
    (["--max-repeats", "3"], "--max-repeats goes with --target-ci"),
    (["--cluster", "local:1", "--jobs", "2"], "--jobs does not apply with --cluster")])
def test_the_dry_run_refuses_exactly_what_the_real_run_refuses(tmp_path, tiny, capsys, options, message):
    """Options that do not go together are checked once (RunOptions), for both: one line, exit 2, nothing run."""
    grid = write_grid(tmp_path, f"notebook: {tiny}\ngrid: {{device: [cpu], value: [1]}}\n")
    out = tmp_path / "out"
    for dry_run in (["--dry-run"], []):
        assert main(["sweep", str(grid), "--out", str(out), *options, *dry_run]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {message}") and len(err.strip().splitlines()) == 1, err
    assert not out.exists()


def test_a_dry_run_beside_a_running_sweep_says_which_combination_it_runs(tmp_path, tiny, monkeypatch, capsys):
    """What `status` calls running now, the dry run must not offer to run again."""
    import subprocess
    import sys

    monkeypatch.setattr("colabkit.sweep.devices.detect_devices", lambda: CPU_ONLY)
    grid = write_grid(tmp_path, f"notebook: {tiny}\ngrid: {{device: [cpu], value: [1, 2]}}\n")
    out = tmp_path / "out"
    running = out / "tiny" / "cpu" / ".value-1.running.ipynb"  # the mark of a combination a sweep is running
    running.parent.mkdir(parents=True)
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from colabkit.sweep.folder import sweep_lock\n"
        f"with sweep_lock({str(out)!r}):\n"
        f"    open({str(running)!r}, 'w').close(); print('locked', flush=True); time.sleep(60)")],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert holder.stdout.readline().strip() == "locked"
        assert main(["sweep", str(grid), "--out", str(out), "--dry-run"]) == 0
    finally:
        holder.kill()
        holder.wait()
    lines = capsys.readouterr().out.splitlines()
    assert lines[2].split()[:4] == ["tiny", "cpu", "value-1", "running"]
    assert lines[2].endswith(f"running now (sweep pid {holder.pid})")
    assert lines[3].split()[:5] == ["tiny", "cpu", "value-2", "run", "not"]
    assert f"a sweep (pid {holder.pid}) is writing to {out} now" in lines[-1]
    # Once that sweep is gone, the same mark is an interrupted run, to be run again.
    [first, _] = decide(plan([grid]), out, CPU_ONLY)
    assert (first.action, first.reason) == ("rerun", "an earlier sweep stopped while running it")


def test_a_multi_line_error_message_keeps_the_summary_table_one_row_per_combination(tmp_path):
    from colabkit.records.run_error import RunError
    from colabkit.sweep.runners.execute import Outcome

    [combination] = plan([write_grid(tmp_path, f"notebook: {NOTEBOOKS / 'matmul_tflops.ipynb'}\n"
                                                "grid: {device: [cpu], n: [64]}\n")])
    tensorflow_message = ("\n\nTraceback (most recent call last):\n-----\n"
                          "2024-05-01 10:00:00.123456: W tensorflow/core/framework/op_kernel.cc:1830] \n"
                          "2024-05-01 10:00:00.123457: W tensorflow/core/framework/op_kernel.cc:1830] OP_REQUIRES "
                          "failed at matmul_op.cc:42 : RESOURCE_EXHAUSTED: OOM when allocating tensor\n"
                          "Hint: If you want to see a list of allocated tensors when OOM happens...\n")
    error = RunError("ResourceExhaustedError", "oom", tensorflow_message, exec_count=7, cell=3, source="x = 1")
    outcome = Outcome(combination, "failed", 1.0, tmp_path / "n-64.json", error.summary(), error=error)
    lines = outcomes_table([outcome]).splitlines()
    assert len(lines) == 4  # header, rule, one row, counts
    assert lines[2].endswith("ResourceExhaustedError: OP_REQUIRES failed at matmul_op.cc:42 : RESOURCE_EXHAUSTED: OOM "
                             "when allocating tensor (In [7])"[:100])
    plain = Outcome(combination, "failed", 1.0, tmp_path / "x.json", "a\nb")
    assert outcomes_table([plain]).splitlines()[2].endswith(" a")


@pytest.mark.notebook
def test_a_full_disk_during_the_html_export_is_a_filesystem_failure(tmp_path, tiny, monkeypatch):
    import errno

    def full_disk(notebook, html, temporary=None):
        raise OSError(errno.ENOSPC, "No space left on device", str(temporary))

    monkeypatch.setattr("colabkit.sweep.runners.execute.export_run_html", full_disk)
    grid = write_grid(tmp_path, f"notebook: {tiny}\ngrid: {{device: [cpu], value: [1]}}\n")
    [outcome] = run_sweep(plan([grid], out=tmp_path / "out"), available=CPU_ONLY, echo=quiet)
    error = read_record(outcome.record_path)["error"]
    assert (outcome.status, error["type"], error["kind"]) == ("failed", "OSError", "filesystem")
    assert error["message"].startswith("No space left on device: ") and ".running.html" in error["message"]
    assert outcome.error.kind == "filesystem" and outcome.message.startswith("OSError: No space left on device")


@pytest.mark.notebook
def test_a_kernel_that_fails_to_start_is_retried(tmp_path, tiny, monkeypatch):
    """A kernel dying at start-up (as when two parallel kernels race for a port) gets another try."""
    import sys

    spec_dir = tmp_path / "jupyter" / "kernels" / "flaky"
    spec_dir.mkdir(parents=True)
    marker = tmp_path / "first-start-happened"
    launcher = tmp_path / "flaky_launcher.py"
    launcher.write_text(textwrap.dedent(f"""
        import os, pathlib, sys
        marker = pathlib.Path({str(marker)!r})
        if not marker.exists():
            marker.touch()
            sys.exit(1)  # the first start dies before the kernel answers
        os.execv(sys.executable, [sys.executable, "-m", "ipykernel_launcher", *sys.argv[1:]])
    """))
    (spec_dir / "kernel.json").write_text(json.dumps(
        {"argv": [sys.executable, str(launcher), "-f", "{connection_file}"], "display_name": "flaky", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    grid = write_grid(tmp_path, f"notebook: {tiny}\ngrid: {{device: [cpu], value: [1]}}\n")
    [outcome] = run_sweep(plan([grid], out=tmp_path / "out", options=RunOptions(kernel_name="flaky")),
                          available=CPU_ONLY, echo=quiet)
    assert outcome.status == "ok", outcome.message
    assert read_record(outcome.record_path)["sweep"]["kernel_start_attempts"] == 2
    assert "the kernel did not start (attempt 1 of 3); retrying" in (tmp_path / "out/tiny/cpu/value-1.log").read_text()


def test_an_unknown_kernel_fails_at_once_without_retries(tmp_path, tiny):
    grid = write_grid(tmp_path, f"notebook: {tiny}\ngrid: {{device: [cpu], value: [1]}}\n")
    [outcome] = run_sweep(plan([grid], out=tmp_path / "out", options=RunOptions(kernel_name="no-such-kernel")),
                          available=CPU_ONLY, echo=quiet)
    record = read_record(outcome.record_path)
    assert (record["status"], record["error"]["kind"], record["sweep"]["kernel_start_attempts"]) == \
        ("failed", "kernel_start", 1)
    assert "no-such-kernel" in record["error"]["message"]


def test_a_new_run_clears_what_a_killed_one_left_and_nothing_of_its_neighbours(tmp_path):
    from colabkit.sweep.runners.execute import RunFiles

    folder = tmp_path / "tiny" / "cpu"
    folder.mkdir(parents=True)
    files = RunFiles(folder / "lr-0.1")
    leftovers = [files.record, files.notebook, files.html, files.running_notebook, files.running_html,
                 folder / ".lr-0.1.json.k2j3.tmp", folder / "..lr-0.1.running.json.x8z.tmp"]
    neighbours = [folder / "lr-0.1.5.json", folder / ".lr-0.1.5.running.ipynb", folder / "lr-0.1.log"]
    for path in leftovers + neighbours:
        path.write_text("{}")
    files.prepare()
    assert sorted(path.name for path in folder.iterdir()) == sorted(path.name for path in neighbours)


@pytest.mark.parametrize("grid, preset, overrides, expected", [
    ("paradnn", "smoke", ["profile_steps=2", "breakdown=False", "heads=3"], [
        "paradnn cpu batch_size-32_mode-train_family-fc_layers-2_nodes-64_input_size-256_output_size-16_"
        "profile_steps-2: profile_steps = 2: expected 0 with breakdown = False (the profile is taken with the "
        "bottleneck passes); set breakdown = True or profile_steps = 0 (and 7 more combinations alike)",
        "paradnn cpu batch_size-32_mode-train_family-transformer_layers-2_length-32_vocab-256_width-64_heads-3_mlp_"
        "ratio-4_profile_steps-2: width = 64: expected a multiple of heads (3), each head width / heads "
        "wide (and 1 more combination alike)",
        "paradnn cpu batch_size-32_mode-decode_family-transformer_layers-2_length-32_vocab-256_width-64_heads-3_mlp_"
        "ratio-4_profile_steps-2: profile_steps = 2: expected 0 with mode = 'decode' (the profile is of "
        "training steps)"]),
    ("cnn_mnist", "inference_smoke", ["device=cpu:2"], [
        "cnn_mnist cpu:2 backend-tensorflow: device = 'cpu:2' with mode = 'inference': expected one device ('cpu', "
        "'gpu'); a batch of 1 does not split over replicas"]),
    ("cnn_mnist", "smoke", ["profile_steps=2", "epochs=1"], [
        "cnn_mnist cpu mode-train_batch_size-256_profile_steps-2_epochs-1: profile_steps = 2: expected 0 with epochs = 1 "
        "(the profile is of steady steps, after the first epoch: give epochs >= 2) (and 1 more combination alike)",
        "cnn_mnist cpu mode-inference_profile_steps-2: profile_steps = 2: expected 0 with mode = 'inference' (the "
        "profile is of training steps)"]),
])
def test_rules_between_parameters_are_refused_by_the_plan_before_any_kernel(tmp_path, monkeypatch, capsys, grid,
                                                                           preset, overrides, expected):
    """The declarations' rules between parameters, checked for every combination by the plan: the dry run and the
    run alike exit 2 with one line per problem, and no device is detected, no kernel started, nothing written."""
    def no_kernel(*args, **kwargs):
        raise AssertionError("a notebook ran")

    monkeypatch.setattr("papermill.execute_notebook", no_kernel)
    monkeypatch.setattr("colabkit.sweep.devices.detect_devices", no_kernel)
    out = tmp_path / "out"
    for dry_run in (["--dry-run"], []):
        arguments = ["sweep", str(REPO / "parameters" / f"{grid}.yaml"), "--preset", preset, "--device", "cpu",
                     "--out", str(out), *[f"-p{item}" for item in overrides], *dry_run]
        assert main(arguments) == 2
        err = capsys.readouterr().err
        if len(expected) == 1:
            assert err == f"error: {expected[0]}\n"
        else:
            assert err == f"error: {len(expected)} problems:\n" + "".join(f"  - {line}\n" for line in expected)
    assert not out.exists()


def test_a_plan_file_holds_its_runs_and_options_and_the_command_line_adds_none(tmp_path, capsys):
    """One JSON holds the runs and how they run (`sweep --plan FILE`: what a Colab session and a device run's stage
    get); options on the command line beside it are refused, and so is a plan of an older form."""
    from colabkit.sweep.plan import read_plan

    options = RunOptions(timeout_s=9.0, max_kernel_runs=7, wait_quiet_s=5.0, repetition=Repetition(0.05, 4))
    planned = plan([REPO / "parameters" / "matmul_tflops.yaml"], "smoke", "cpu", out=tmp_path / "out",
                   options=options)
    path = tmp_path / "plan.json"
    path.write_text(planned.to_json())
    read = read_plan(path)
    assert read.options == options and [run.label for run in read] == [run.label for run in planned]
    assert read.out == tmp_path / "out" and read_plan(path, tmp_path / "there").out == tmp_path / "there"
    assert main(["sweep", "--plan", str(path), "--timeout", "3"]) == 2
    assert "holds what runs and how" in capsys.readouterr().err
    old = json.loads(path.read_text())
    path.write_text(json.dumps({**old, "colabkit_plan": 1}))
    assert main(["sweep", "--plan", str(path), "--dry-run"]) == 2
    assert "a plan of format 1, from another colabkit; this one reads format 2" in capsys.readouterr().err
