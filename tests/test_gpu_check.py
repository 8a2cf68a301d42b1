"""`python -m colabkit gpu-check` end to end with fake measurements (a fake worker, a fake sweep, a
fake nvidia-smi), the no-GPU line through the command line, the worker protocol in a real child
process, the clock and agreement cores it shares with the benchmarks, and on a real GPU its fast part."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import REPO, visible_gpus

import colabkit.gpu_check.check as check
import colabkit.gpu_check.stages as stages
import colabkit.gpu_check.training as training
from colabkit.cli import main
from colabkit.device.probes import nvidia_smi
from colabkit.errors import GpuCheckError, MeasurementError
from colabkit.gpu_check import NO_GPU_LINE, run_check
from colabkit.gpu_check.worker import Worker
from colabkit.timing.agreement import Agreement, interleave
from colabkit.timing.pipelined import MatmulWorkload, compare_clock

A100 = "NVIDIA A100-SXM4-40GB"
# What a healthy A100 answers: warm TFLOPS per precision, each 0.6-0.9 of the table's peak.
HEALTHY_TFLOPS = {("float32", False): 17.0, ("float32", True): 120.0, ("bfloat16", False): 250.0,
                  ("float16", False): 260.0}


class FakeWorker:
    """Answers the worker's tasks from fake measurements; `answers` may override any task."""

    started: list[str] = []

    def __init__(self, backend: str, log_path: Path, env: dict | None = None, answers: dict | None = None) -> None:
        self.backend, self.answers = backend, dict(FAKE_ANSWERS, **(answers or {}))
        FakeWorker.started.append(backend)

    def request(self, task: str, timeout_s: float, **params):
        answer = self.answers[task]
        return answer(**params) if callable(answer) else answer

    def close(self, kill: bool = False) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def fake_matmul(n, dtype, tf32, tf32_capable, **_):
    tflops = HEALTHY_TFLOPS[(dtype, tf32)]
    return {"dtype": dtype, "precision": "tf32" if tf32 else dtype, "n": n, "products": 4, "tflops": tflops,
            "pipelined_tflops": tflops, "unsynced_tflops": 9000.0, "ratio": 1.0}


def fake_fit(model, jit_compile, policy, energy=False, **_):
    mixed = policy.startswith("mixed")
    return {"samples_per_s": 20_000.0 * (2 if mixed else 1) * (0.995 if energy else 1.0), "model_tflops": 60.0,
            "mfu": 0.38, "mfu_reason": None, "jit_compile": jit_compile != False,  # noqa: E712 - "auto" is True
            "compute_dtype": "bfloat16" if mixed else "float32", "samples_per_epoch": 1024,
            "energy": {"energy_j_per_epoch": 150.0, "mean_power_w": 310.0, "energy_reason": None,
                       "energy_method": "counter"} if energy else None,
            "energy_sampled": {"energy_j_per_epoch": 156.0, "energy_method": "sampled"} if energy else None}


FAKE_ANSWERS = {
    "facts": {"names": [A100], "compute_capability": [8, 0], "tf32_enabled": True, "tensorflow": "2.x",
              "built_with_cuda": True},
    "power": {"idle_w": 55.0, "limit_w": 400.0, "readings_w": [55.0]},
    "bandwidth": {"gb_per_s": 1400.0},
    "matmul": fake_matmul,
    "fit": fake_fit,
    "clock": lambda backend, dtypes, **_: {"device": A100, "comparisons": [fake_matmul(8192, dtype, False, True)
                                                                           for dtype in dtypes]},
}


PLANNED: list = []  # the plans the check handed the sweep, in order


def fake_runs(runs, available, echo):
    """run_plan without kernels: every run of the plan ok, with a plausible record."""
    PLANNED.append(runs)
    summaries = []
    for run in runs:
        replicas = run.request.count or 1
        summaries.append({"notebook": run.name, "device": run.device, "status": "ok", "message": "", "record": None,
                          "device_kind": "cpu" if run.device == "cpu" else "gpu", "device_name": A100,
                          "backend": run.params.get("backend", "tensorflow"), "replicas": replicas,
                          "strategy": "MirroredStrategy" if replicas > 1 else "default strategy",
                          "samples_per_s": 20_100.0, "samples_per_epoch": 60_000, "jit_compile": True})
    return summaries


@pytest.fixture
def fake_gpu_machine(monkeypatch, tmp_path):
    """A machine whose nvidia-smi lists one A100, TensorFlow and JAX installed, PyTorch not; workers,
    the sweep and the report faked."""
    FakeWorker.started = []
    PLANNED.clear()
    monkeypatch.setattr(check, "nvidia_smi", lambda: [{"index": "0", "name": A100, "memory.total": "40960",
                                                       "driver_version": "535.104"}])
    monkeypatch.setattr(check, "nvidia_smi_query", lambda fields: [{"compute_cap": "8.0"}])
    monkeypatch.setattr(stages, "importable", lambda package: package in ("tensorflow", "jax"))
    monkeypatch.setattr(stages, "Worker", FakeWorker)
    monkeypatch.setattr(stages, "run_plan", fake_runs)
    monkeypatch.setattr(training, "run_plan", fake_runs)
    monkeypatch.setattr(stages, "report_device_kinds", lambda results, out, echo: ["cpu", "gpu"])
    return tmp_path


def rows_of(folder: Path) -> dict[str, dict]:
    [table] = folder.glob("*/table.json")
    return {row["name"]: row for row in json.loads(table.read_text())["rows"]}


def test_a_healthy_gpu_passes_every_row_it_can_and_writes_the_table(fake_gpu_machine, capsys):
    out = fake_gpu_machine / "gpu-check"
    assert run_check(out) == 0
    rows = rows_of(out)
    assert list(rows) == ["device", "peaks", "bandwidth", "clock tensorflow", "matmul float32", "matmul tf32",
                          "matmul bfloat16", "matmul float16", "cnn xla", "cnn no-xla", "cnn mixed", "fc xla",
                          "fc no-xla", "fc mixed", "nvml energy", "sweep gpu", "sweep gpu:2", "clock jax",
                          "backend jax", "clock torch", "backend torch"]
    skipped = {name for name, row in rows.items() if row["verdict"] == "SKIP"}
    assert skipped == {"sweep gpu:2", "clock torch", "backend torch"}
    assert {row["verdict"] for name, row in rows.items() if name not in skipped} == {"PASS"}
    assert rows["cnn xla"]["values"]["agreement"]["ratio"] == pytest.approx(20_100 / 20_000)
    assert "150.0 J/epoch (counter)" in rows["nvml energy"]["figure"]
    assert "power sampled beside it: 156.0 J/epoch (+4.0%)" in rows["nvml energy"]["figure"]
    assert FakeWorker.started == ["tensorflow", "jax"]
    folder = next(out.glob("*Z"))
    assert (folder / "table.txt").read_text().rstrip().endswith("gpu-check: 18 PASS, 0 FAIL, 3 SKIP: passed")
    assert "| matmul tf32 | PASS | 120.0 TFLOPS = 0.77 of 156 |" in (folder / "table.md").read_text()
    assert not list(folder.rglob("*.yaml"))  # planned once, in memory: no grid file written to be planned again
    sweep_plan = next(runs for runs in PLANNED if runs.out == folder / "sweep")
    assert sorted({run.name for run in sweep_plan}) == sorted(path.stem for path in (REPO / "parameters").glob("*.yaml"))
    assert sorted(run.device for run in sweep_plan) == ["cpu"] * 5 + ["gpu"] * 5  # each notebook's gpu_check preset
    assert all(run.settings.repeats == 1 and run.settings.kernels == "fresh" for plan in PLANNED for run in plan)
    assert all(plan.options.force and plan.options.timeout_s == 600 for plan in PLANNED)  # afresh, within a limit
    assert sweep_plan.options.jobs == 2 and {run.params.get("mode", "train") for run in sweep_plan} == {"train"}
    assert "mode" not in next(run for run in sweep_plan if run.name == "matmul_tflops").params  # none it lacks
    fits = [plan for plan in PLANNED if plan.out.parent.name in ("cnn", "fc")]  # the training rows' notebook runs
    assert {run.params["batch_size"] for plan in fits for run in plan} == {1024} and len(fits) == 2 * 3
    printed = capsys.readouterr().out
    assert printed.rstrip().endswith(f"table and records: {folder}")
    assert "  PASS matmul tf32: 120.0 TFLOPS" in printed  # the progress line, as the stage finished


def test_a_matmul_above_its_peak_fails_the_check(fake_gpu_machine, monkeypatch):
    monkeypatch.setitem(HEALTHY_TFLOPS, ("float32", True), 170.0)  # 1.09 x the TF32 peak: a wrong clock or peak
    out = fake_gpu_machine / "gpu-check"
    assert run_check(out, fast=True) == 1
    rows = rows_of(out)
    assert list(rows) == ["device", "peaks", "bandwidth", "clock tensorflow", "matmul float32", "matmul tf32",
                          "matmul bfloat16", "matmul float16", "clock jax", "clock torch"]  # no notebook row
    assert rows["matmul tf32"]["verdict"] == "FAIL" and "wrong clock" in rows["matmul tf32"]["reason"]
    assert rows["clock jax"]["verdict"] == "PASS" and rows["clock torch"]["verdict"] == "SKIP"


def test_a_worker_that_dies_fails_its_stages_rows_and_the_table_still_comes_out(fake_gpu_machine, monkeypatch):
    def dies(**_):
        raise GpuCheckError("the tensorflow worker died during facts (exit -9)")

    monkeypatch.setitem(FAKE_ANSWERS, "facts", dies)
    out = fake_gpu_machine / "gpu-check"
    assert run_check(out, fast=True) == 1
    rows = rows_of(out)
    assert {rows[name]["verdict"] for name in ("device", "peaks", "bandwidth", "matmul float32")} == {"FAIL"}
    assert "died during facts" in rows["bandwidth"]["reason"]


def test_a_t4_skips_the_precisions_it_lacks(fake_gpu_machine, monkeypatch):
    t4 = {"names": ["Tesla T4"], "compute_capability": [7, 5], "tf32_enabled": True, "tensorflow": "2.x",
          "built_with_cuda": True}
    monkeypatch.setitem(FAKE_ANSWERS, "facts", t4)
    monkeypatch.setitem(FAKE_ANSWERS, "bandwidth", {"gb_per_s": 270.0})  # of the T4's 320
    monkeypatch.setattr(check, "nvidia_smi", lambda: [{"index": "0", "name": "Tesla T4", "memory.total": "15360",
                                                       "driver_version": "535"}])
    monkeypatch.setitem(HEALTHY_TFLOPS, ("float32", False), 6.0)
    monkeypatch.setitem(HEALTHY_TFLOPS, ("float16", False), 40.0)
    out = fake_gpu_machine / "gpu-check"
    assert run_check(out, fast=True) == 0
    rows = rows_of(out)
    assert rows["matmul tf32"]["verdict"] == rows["matmul bfloat16"]["verdict"] == "SKIP"
    assert "7.5 has no TF32" in rows["matmul tf32"]["reason"]
    assert rows["matmul float16"]["figure"] == "40.0 TFLOPS = 0.62 of 65"


def test_a_gpu_missing_from_the_peaks_table_still_gets_its_clock_checked(fake_gpu_machine, monkeypatch):
    card = "NVIDIA RTX PRO 6000"
    monkeypatch.setitem(FAKE_ANSWERS, "facts", {**FAKE_ANSWERS["facts"], "names": [card]})
    monkeypatch.setattr(check, "nvidia_smi", lambda: [{"index": "0", "name": card, "memory.total": "97887",
                                                       "driver_version": "575"}])
    out = fake_gpu_machine / "gpu-check"
    assert run_check(out, fast=True) == 0
    rows = rows_of(out)
    assert rows["clock tensorflow"]["verdict"] == "PASS"
    assert rows["matmul float32"]["verdict"] == "SKIP" and rows["matmul float32"]["figure"] == "17.0 TFLOPS"
    assert rows["peaks"]["verdict"] == "SKIP" and "not in the peaks table" in rows["peaks"]["reason"]
    assert rows["bandwidth"]["figure"].startswith("measured 1,400 GB/s")


def test_no_tensorflow_skips_every_tensorflow_row(fake_gpu_machine, monkeypatch):
    monkeypatch.setattr(stages, "importable", lambda package: False)
    out = fake_gpu_machine / "gpu-check"
    assert run_check(out) == 0
    rows = rows_of(out)
    assert rows["device"]["verdict"] == "SKIP" and "no TensorFlow in this image" in rows["device"]["reason"]
    assert rows["peaks"]["verdict"] == "PASS"  # nvidia-smi named the GPU and its capability
    assert all(row["verdict"] == "SKIP" for name, row in rows.items() if name not in ("device", "peaks"))


def test_the_fast_check_without_tensorflow_measures_on_jax_and_torch_and_skips_every_tensorflow_row(
        fake_gpu_machine, monkeypatch, capsys):
    """The lent GPU machines' image: JAX and PyTorch, no TensorFlow (docs/device.md)."""
    monkeypatch.setattr(stages, "importable", lambda package: package in ("jax", "torch"))
    out = fake_gpu_machine / "gpu-check"
    assert run_check(out, fast=True) == 0  # a SKIP is not a failure
    rows = rows_of(out)
    assert FakeWorker.started == ["jax", "torch"]  # no TensorFlow worker was started
    assert rows["clock jax"]["verdict"] == rows["clock torch"]["verdict"] == rows["peaks"]["verdict"] == "PASS"
    tensorflow_rows = ["device", "bandwidth", "clock tensorflow", "matmul float32", "matmul tf32", "matmul bfloat16",
                       "matmul float16"]
    assert {rows[name]["verdict"] for name in tensorflow_rows} == {"SKIP"}
    assert {rows[name]["reason"] for name in tensorflow_rows if name != "bandwidth"} == {stages.NO_TENSORFLOW}
    assert rows["bandwidth"]["reason"].endswith(stages.NO_TENSORFLOW)
    assert "gpu-check: 3 PASS, 0 FAIL, 7 SKIP: passed" in capsys.readouterr().out


def test_no_gpu_prints_one_line_and_exits_0(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(check, "nvidia_smi", lambda: [])
    assert main(["gpu-check", "--out", str(tmp_path / "out")]) == 0
    assert capsys.readouterr().out == NO_GPU_LINE + "\n"
    assert not (tmp_path / "out").exists()


def test_the_command_without_a_gpu_in_a_subprocess(tmp_path):
    """A fake nvidia-smi that lists nothing (as on a machine whose driver sees no GPU)."""
    fake = tmp_path / "bin" / "nvidia-smi"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{fake.parent}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(REPO)}
    completed = subprocess.run([sys.executable, "-m", "colabkit", "gpu-check", "--out", str(tmp_path / "out")],
                               capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert (completed.returncode, completed.stdout, completed.stderr) == (0, NO_GPU_LINE + "\n", "")


def test_the_cpu_rehearsal_runs_the_jax_and_pytorch_clocks_on_the_cpu_shown_and_not_judged(monkeypatch, capsys,
                                                                                           tmp_path):
    """What the device run's rehearsal calls (`gpu-check --fast --rehearse-on-cpu`): real JAX and PyTorch workers
    time their clocks on the CPU; each row RAN (a figure, no verdict: the 5 % rule is a GPU's), none "not installed"."""
    monkeypatch.setattr(check, "nvidia_smi", lambda: pytest.fail("the rehearsal asks for no GPU"))
    assert main(["gpu-check", "--fast", "--rehearse-on-cpu", "--rounds", "1", "--out", str(tmp_path / "out")]) == 0
    [table] = (tmp_path / "out").glob("*/table.json")
    payload = json.loads(table.read_text())
    rows = {row["name"]: row for row in payload["rows"]}
    assert sorted(rows) == ["clock jax", "clock torch"] and payload["meta"]["on_cpu"] is True
    for name, row in rows.items():
        assert row["verdict"] == "RAN" and "not applied" in row["reason"], row
        [comparison] = row["values"]["comparisons"]
        assert comparison["n"] == 1024 and comparison["dtype"] == "float32" and comparison["ratio"] > 0
        assert row["figure"].startswith("float32 ") and "naive clock: 0 TFLOPS" not in row["figure"]
    said = capsys.readouterr().out
    assert "on the CPU (the device run's rehearsal: no GPU checked)" in said
    assert "gpu-check: 0 PASS, 0 FAIL, 0 SKIP, 2 RAN (not judged): passed" in said


def test_an_out_that_is_a_file_is_refused_before_anything_runs(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(check, "nvidia_smi", lambda: pytest.fail("refused before looking for a GPU"))
    (tmp_path / "taken").write_text("")
    assert main(["gpu-check", "--out", str(tmp_path / "taken" / "check")]) == 2
    assert capsys.readouterr().err.startswith("error: --out ")
    with pytest.raises(SystemExit) as refused:
        main(["gpu-check", "--rounds", "0"])
    assert refused.value.code == 2 and "must be 1 or more" in capsys.readouterr().err


def test_the_worker_answers_runs_and_reports_a_failed_task_in_a_real_child(tmp_path):
    with Worker("tensorflow", tmp_path / "worker.log") as worker:
        facts = worker.request("facts", 180)
        assert facts["tensorflow"] and isinstance(facts["names"], list)
        with pytest.raises(GpuCheckError, match="unknown task 'nope'"):
            worker.request("nope", 60)
        power = worker.request("power", 60)
        if not visible_gpus():  # no GPU, no NVML reading: said, not raised
            assert facts["names"] == [] and power["unavailable"]
    assert "ValueError: unknown task" in (tmp_path / "worker.log").read_text()


def test_a_worker_past_its_time_limit_is_stopped(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{REPO}")
    (tmp_path / "sitecustomize.py").write_text("import time\ntime.sleep(600)\n")  # a child that hangs at start
    worker = Worker("tensorflow", tmp_path / "worker.log")
    start = time.perf_counter()
    with pytest.raises(GpuCheckError, match="longer than 1 s"):
        worker.request("facts", 1)
    assert time.perf_counter() - start < 300  # stopped at its 1 s, not waited for (its child sleeps 600 s)
    worker.close()


# --- the cores shared with the benchmarks ---------------------------------------------------------

def test_interleave_alternates_the_sides_and_agreement_takes_medians():
    calls = []
    results = interleave([lambda r: calls.append(("a", r)) or 10.0 + r, lambda r: calls.append(("b", r)) or 10.0],
                         3)
    assert calls == [("a", 0), ("b", 0), ("a", 1), ("b", 1), ("a", 2), ("b", 2)]
    agreement = Agreement(tuple(results[0]), tuple(results[1]))
    assert agreement.ratio == pytest.approx(11.0 / 10.0) and agreement.paired == (1.0, 1.1, 1.2)
    assert not agreement.within(0.95, 1.05) and agreement.within(1.0, 1.1)
    with pytest.raises(MeasurementError):
        Agreement((1.0,), ())
    with pytest.raises(MeasurementError):
        Agreement((0.0,), (1.0,))
    with pytest.raises(MeasurementError):
        interleave([lambda r: 1.0], 0)


def test_compare_clock_sees_a_clock_that_waits_and_one_that_does_not(monkeypatch):
    """A fake device on a clock the test moves (both clocks read it): each call takes 0.1 ms on the host and
    queues 20 ms of work; waiting on a value moves the clock to the end of its work."""
    import types

    import colabkit.timing.clock as clock_module
    import colabkit.timing.pipelined as pipelined_module

    now, busy_until = [0.0], [0.0]
    fake_time = types.SimpleNamespace(perf_counter=lambda: now[0], perf_counter_ns=lambda: round(now[0] * 1e9))
    monkeypatch.setattr(clock_module, "time", fake_time)
    monkeypatch.setattr(pipelined_module, "time", fake_time)

    class Pending:
        def block_until_ready(self):
            now[0] = max(now[0], busy_until[0])

    def call():
        now[0] += 0.0001
        busy_until[0] = max(busy_until[0], now[0]) + 0.02
        return Pending()

    clocks = compare_clock(MatmulWorkload("jax", 64, "float32", "float32", 1, call), repeats=3, chain=4, rounds=2)
    assert clocks.measured_s == pytest.approx((0.0201, 0.0201))  # colabkit's clock waits for each call's work ...
    assert clocks.pipelined_s == pytest.approx((0.020025, 0.020025))  # ... so it reads about the pipelined rate
    assert clocks.ratio == pytest.approx(0.020025 / 0.0201)  # about 1: its rate is about the pipelined one
    assert clocks.unsynced_tflops == pytest.approx(201 * clocks.tflops)  # the naive clock sees the host's 0.1 ms
    assert len(clocks.measured_s) == len(clocks.pipelined_s) == 2


@pytest.mark.gpu
def test_the_fast_part_of_the_check_passes_on_this_gpu(tmp_path):
    """Device, peaks, bandwidth, clock and matmul rows on the real GPU (about a minute)."""
    assert run_check(tmp_path / "gpu-check", fast=True) == 0, (next(tmp_path.glob("gpu-check/*/table.txt"))
                                                                .read_text())
    rows = json.loads(next(tmp_path.glob("gpu-check/*/table.json")).read_text())["rows"]
    assert [row["name"] for row in rows][:3] == ["device", "peaks", "bandwidth"]
    assert rows[0]["verdict"] == "PASS" and rows[0]["figure"].startswith(nvidia_smi()[0]["name"])
