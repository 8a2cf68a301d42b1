"""The GPU check's verdict rules and table, with fake measurements: every row's PASS, FAIL and SKIP,
the thresholds' edges, the table's text, Markdown and JSON, and the exit status."""

from __future__ import annotations

import json

import pytest

from colabkit.device.peaks import gpu_peak
from colabkit.gpu_check import rules
from colabkit.gpu_check.rows import (
    NO_GPU_LINE,
    CheckRow,
    CheckVerdict,
    exit_code,
    table_markdown,
    table_summary,
    table_payload,
    table_text,
)
from colabkit.gpu_check.rules import failed, passed, skipped
from colabkit.gpu_check.rules import GpuFacts, Unavailable
from colabkit.timing.agreement import Agreement

A100 = "NVIDIA A100-SXM4-40GB"
T4 = "Tesla T4"
SKIP_WHY = Unavailable("jax is not installed")
BROKEN = Unavailable("the worker died", failed=True)


def verdict(row: CheckRow) -> str:
    return str(row.verdict)


def comparison(dtype: str = "float32", tflops: float = 100.0, ratio: float = 1.0) -> dict:
    return {"dtype": dtype, "precision": dtype, "n": 8192, "products": 4, "tflops": tflops, "ratio": ratio,
            "pipelined_tflops": tflops / ratio, "unsynced_tflops": 5000.0}


# --- rows and the table ---------------------------------------------------------------------------

def test_a_row_that_is_not_pass_must_say_why_and_verdicts_are_plain_strings():
    with pytest.raises(ValueError, match="must say why"):
        CheckRow("x", CheckVerdict.FAIL, "1", "rule")
    assert CheckRow("x", "SKIP", "-", "rule", "no GPU").verdict is CheckVerdict.SKIP
    assert CheckVerdict.PASS == "PASS" and json.dumps(CheckVerdict.FAIL) == '"FAIL"'


def test_the_exit_status_is_0_only_when_no_row_failed():
    good, skip, bad = passed("a", "1", "r"), skipped("b", "r", "why"), failed("c", "2", "r", "too high")
    assert exit_code([good, skip]) == 0
    assert exit_code([good, skip, bad]) == 1
    assert exit_code([]) == 0
    assert table_summary([good, skip, bad]) == "gpu-check: 1 PASS, 1 FAIL, 1 SKIP: FAILED"
    assert table_summary([good]).endswith(": passed")


def test_the_text_table_has_one_line_per_row_its_reasons_and_the_stage_times():
    rows = [passed("device", "NVIDIA A100 x1", "rule").in_stage("device"),
            failed("matmul tf32", "170 TFLOPS = 1.09 of 156", "rule", "a wrong clock").in_stage("matmul"),
            skipped("backend torch", "rule", "torch is not installed")]
    text = table_text(rows, "gpu-check on A100", {"device": (12.4, 20.0), "matmul": (40.2, 45.0)})
    lines = text.splitlines()
    assert lines[0] == "gpu-check on A100"
    assert any(line.split()[:2] == ["device", "PASS"] and "NVIDIA A100 x1" in line for line in lines)
    assert any(line.startswith("matmul tf32") and " FAIL " in line and "1.09 of 156" in line for line in lines)
    assert "FAIL matmul tf32: a wrong clock" in lines and "SKIP backend torch: torch is not installed" in lines
    assert "device 12/20 s, matmul 40/45 s; total 53 s of 65 s" in text
    assert lines[-1] == "gpu-check: 1 PASS, 1 FAIL, 1 SKIP: FAILED"


def test_the_markdown_table_and_json_carry_rules_reasons_and_values():
    rows = [passed("clock jax", "float32 1.000", "a | rule", ratio=1.0), skipped("sweep gpu:2", "r", "one GPU")]
    markdown = table_markdown(rows, "title")
    assert "| clock jax | PASS | float32 1.000 | a \\| rule |  |" in markdown
    assert "| sweep gpu:2 | SKIP | - | r | one GPU |" in markdown
    payload = table_payload(rows, {"gpus": [A100]}, {"jax": (30.0, 40.0)})
    assert payload["exit_code"] == 0 and payload["counts"] == {"PASS": 1, "FAIL": 0, "SKIP": 1, "RAN": 0}
    assert payload["rows"][0]["values"] == {"ratio": 1.0} and payload["stages"]["jax"] == {"seconds": 30.0,
                                                                                            "budget_s": 40.0}
    json.dumps(payload)


def test_the_no_gpu_line_is_one_line():
    assert "\n" not in NO_GPU_LINE and NO_GPU_LINE.startswith("gpu-check: no NVIDIA GPU")


# --- device and peaks -----------------------------------------------------------------------------

def test_device_passes_when_tensorflow_sees_every_gpu_under_a_name_with_the_same_peak():
    facts = GpuFacts((A100, A100), 40.0, "535.1", (8, 0), (A100, A100))
    row = rules.device_row(facts)
    assert verdict(row) == "PASS" and row.figure.startswith(f"{A100} x2, 40 GiB, driver 535.1")


@pytest.mark.parametrize("tf_names, why", [
    ((), "TensorFlow sees 0 GPU(s) where nvidia-smi lists 1"),
    (("NVIDIA H100 80GB HBM3",), "different peaks-table entries"),
])
def test_device_fails_when_tensorflow_misses_the_gpu_or_names_it_otherwise(tf_names, why):
    row = rules.device_row(GpuFacts((A100,), 40.0, "535", (8, 0), tf_names))
    assert verdict(row) == "FAIL" and why in row.reason


def test_device_skips_without_tensorflow_and_fails_when_its_worker_broke():
    assert verdict(rules.device_row(GpuFacts((A100,), tf_names=Unavailable("TensorFlow is not installed")))) == "SKIP"
    assert verdict(rules.device_row(GpuFacts((A100,), tf_names=BROKEN))) == "FAIL"


def test_peaks_pass_where_the_table_lists_exactly_the_gpus_precisions():
    row = rules.peaks_row(A100, (8, 0))
    assert verdict(row) == "PASS" and row.figure == "float32 19.5, tf32 156, float16 312, bfloat16 312 TFLOPS"
    assert verdict(rules.peaks_row(T4, (7, 5))) == "PASS"


def test_peaks_fail_on_a_precision_the_gpu_lacks_or_one_missing(monkeypatch):
    row = rules.peaks_row(A100, (7, 5))  # an A100 entry read against a pre-Ampere capability
    assert verdict(row) == "FAIL" and "a peak at tf32, which compute capability 7.5 lacks" in row.reason
    row = rules.peaks_row(T4, (8, 9))
    assert verdict(row) == "FAIL" and "no peak at tf32" in row.reason and "no peak at bfloat16" in row.reason


def test_peaks_skip_a_gpu_missing_from_the_table_or_of_unknown_capability():
    row = rules.peaks_row("NVIDIA GeForce RTX 4090", (8, 9))
    assert verdict(row) == "SKIP" and "not in the peaks table" in row.reason
    assert verdict(rules.peaks_row(A100, None)) == "SKIP"


# --- bandwidth ------------------------------------------------------------------------------------

@pytest.mark.parametrize("gb_s, expected", [(1400.0, "PASS"), (1555 * 0.5, "PASS"), (1555 * 1.05, "PASS"),
                                            (1555 * 1.06, "FAIL"), (700.0, "FAIL")])
def test_bandwidth_cross_checks_the_table_with_a_measurement(gb_s, expected):
    row = rules.bandwidth_row(A100, 40.0, {"gb_per_s": gb_s})
    assert verdict(row) == expected and "table 1,555 GB/s (vendor)" in row.figure


def test_bandwidth_stands_measured_alone_or_is_unknown_without_a_table_entry():
    assert verdict(rules.bandwidth_row("NVIDIA RTX 6000", None, {"gb_per_s": 800.0})) == "PASS"
    unknown = rules.bandwidth_row("NVIDIA RTX 6000", None, SKIP_WHY)
    assert verdict(unknown) == "SKIP" and unknown.reason.startswith("unknown")
    unchecked = rules.bandwidth_row(A100, 40.0, SKIP_WHY)
    assert verdict(unchecked) == "SKIP" and unchecked.reason.startswith("not cross-checked")
    assert verdict(rules.bandwidth_row(A100, 40.0, BROKEN)) == "FAIL"


# --- clock and matmul -----------------------------------------------------------------------------

@pytest.mark.parametrize("ratio, expected", [(1.0, "PASS"), (0.95, "PASS"), (1.05, "PASS"), (0.94, "FAIL"),
                                             (1.2, "FAIL")])
def test_the_clock_row_holds_every_precision_within_5_percent(ratio, expected):
    row = rules.clock_row("tensorflow", [comparison("float32", ratio=1.0), comparison("bfloat16", ratio=ratio)])
    assert verdict(row) == expected
    if expected == "FAIL":
        assert row.reason.startswith("bfloat16:")


def test_the_clock_row_skips_a_backend_that_is_absent_and_fails_an_empty_measurement():
    assert verdict(rules.clock_row("jax", SKIP_WHY)) == "SKIP"
    assert verdict(rules.clock_row("jax", BROKEN)) == "FAIL"
    assert verdict(rules.clock_row("jax", [])) == "FAIL"


@pytest.mark.parametrize("tflops, expected, why", [(120.0, "PASS", ""), (156 * 0.5, "PASS", ""),
                                                   (156 * 1.05, "PASS", ""), (170.0, "FAIL", "a wrong clock"),
                                                   (60.0, "FAIL", "only 0.38 of the peak")])
def test_matmul_passes_between_half_and_105_percent_of_the_peak(tflops, expected, why):
    row = rules.matmul_row("tf32", comparison("float32", tflops), gpu_peak(A100, "tf32", 1))
    assert verdict(row) == expected and why in row.reason


def test_matmul_skips_a_precision_without_a_peak_or_a_measurement():
    row = rules.matmul_row("bfloat16", comparison("bfloat16", 30.0), None)
    assert verdict(row) == "SKIP" and row.figure == "30.0 TFLOPS"
    assert verdict(rules.matmul_row("tf32", Unavailable("no TF32 on compute capability 7.5"), None)) == "SKIP"
    assert verdict(rules.matmul_row("float32", BROKEN, gpu_peak(A100, "float32", 1))) == "FAIL"


# --- training -------------------------------------------------------------------------------------

def fit(rate: float = 10_000.0, mfu: float | None = 0.4, jit: bool = True, dtype: str = "float32") -> dict:
    return {"samples_per_s": rate, "model_tflops": 50.0, "mfu": mfu, "mfu_reason": None if mfu else "no peak",
            "jit_compile": jit, "compute_dtype": dtype}


def test_a_training_row_passes_with_sane_figures_and_an_agreeing_notebook():
    agreement = Agreement((10_100.0, 9_950.0, 10_050.0), (10_000.0, 10_000.0, 9_900.0))
    row = rules.training_row("fc", "xla", [fit(), fit(), fit()], expect_jit=True, min_mfu=rules.FC_MIN_MFU,
                             agreement=agreement, notebook_jit=True)
    assert verdict(row) == "PASS" and "notebook/bare 1.005" in row.figure and "MFU 40.0%" in row.figure


@pytest.mark.parametrize("fits, kwargs, why", [
    ([fit(mfu=1.2)], {}, "MFU 1.20 > 1"),
    ([fit(mfu=0.01)], {"min_mfu": rules.FC_MIN_MFU}, "compute-bound"),
    ([fit(jit=False)], {}, "expected True"),
    ([fit()], {"mixed": True}, "mixed precision computed in ['float32']"),
    ([fit(rate=0.0)], {}, "no positive steady throughput"),
    ([fit()], {"agreement": Agreement((9_000.0,), (10_000.0,))}, "0.900 x the bare fit's"),
    ([fit()], {"agreement": Agreement((10_000.0,), (10_000.0,)), "notebook_jit": False}, "the notebook compiled"),
    ([fit()], {"agreement": Unavailable("the cnn_mnist notebook on gpu: failed: OOM", failed=True)}, "OOM"),
])
def test_a_training_row_fails_on_each_broken_rule(fits, kwargs, why):
    row = rules.training_row("cnn", "xla", fits, expect_jit=True, **kwargs)
    assert verdict(row) == "FAIL" and why in row.reason


def test_a_training_row_skips_mixed_precision_without_tensor_cores_and_reports_an_unknown_mfu():
    assert verdict(rules.training_row("cnn", "mixed", Unavailable("no tensor cores"), expect_jit=True)) == "SKIP"
    row = rules.training_row("cnn", "no-xla", [fit(mfu=None, jit=False)], expect_jit=False)
    assert verdict(row) == "PASS" and "MFU unknown (no peak)" in row.figure
    # the compute-bound FC's MFU floor is what tells "on the GPU" from "not": unknown, the row is no pass
    row = rules.training_row("fc", "xla", [fit(mfu=None)], expect_jit=True, min_mfu=rules.FC_MIN_MFU)
    assert verdict(row) == "SKIP" and "compute-bound check could not run" in row.reason
    row = rules.training_row("fc", "xla", [fit(mfu=None, jit=False)], expect_jit=True, min_mfu=rules.FC_MIN_MFU)
    assert verdict(row) == "FAIL"  # a broken rule still fails


# --- NVML -----------------------------------------------------------------------------------------

def energy(joules: float | None = 120.0, watts: float | None = 300.0) -> dict:
    return {"energy_j_per_epoch": joules, "mean_power_w": watts, "idle_w": 55.0, "limit_w": 400.0,
            "energy_reason": None if joules else "no power sample fell in a steady epoch"}


@pytest.mark.parametrize("figures, sampler, expected, why", [
    (energy(), Agreement((100.0, 99.0, 101.0), (100.0, 100.0, 100.0)), "PASS", ""),
    (energy(watts=50.0), Agreement((100.0,), (100.0,)), "FAIL", "not between idle 55 W"),
    (energy(watts=401.0), Agreement((100.0,), (100.0,)), "FAIL", "the limit 400 W"),
    (energy(joules=0.0), Agreement((100.0,), (100.0,)), "FAIL", "not > 0"),
    (energy(joules=None, watts=None), Agreement((100.0,), (100.0,)), "FAIL", "no power sample fell"),
    (energy(), Agreement((97.0,), (100.0,)), "FAIL", "the energy meters change samples/s by -3.0%"),
    (energy(), None, "FAIL", "not measured"),
])
def test_the_energy_row(figures, sampler, expected, why):
    row = rules.energy_row(figures, sampler)
    assert verdict(row) == expected and why in row.reason


def test_the_energy_row_names_the_method_and_shows_the_sampled_figure_beside_the_counters():
    row = rules.energy_row({**energy(), "energy_method": "counter", "sampled_j_per_epoch": 114.0},
                           Agreement((100.0,), (100.0,)))
    assert verdict(row) == "PASS" and "120.0 J/epoch (counter), 300 W" in row.figure
    assert "power sampled beside it: 114.0 J/epoch (-5.0%)" in row.figure  # shown, not judged
    sampled_only = rules.energy_row({**energy(), "energy_method": "sampled", "sampled_j_per_epoch": 118.0},
                                    Agreement((100.0,), (100.0,)))
    assert "(sampled)" in sampled_only.figure and "beside it" not in sampled_only.figure


def test_the_energy_row_skips_without_nvml():
    row = rules.energy_row(Unavailable("NVML is not installed: pip install 'colabkit[gpu]'"), None)
    assert verdict(row) == "SKIP" and "colabkit[gpu]" in row.reason


# --- the sweep, gpu:2 and the backends ------------------------------------------------------------

def run(notebook: str, device: str, status: str = "ok", **extra) -> dict:
    return {"notebook": notebook, "device": device, "status": status, "message": "" if status == "ok" else "boom",
            **extra}


def test_the_sweep_row_passes_with_every_notebook_ok_on_gpu_and_cpu_and_a_report_of_both():
    runs = [run(name, device) for name in ("cnn_mnist", "matmul_tflops") for device in ("gpu", "cpu")]
    row = rules.sweep_row(runs, ["cpu", "gpu"])
    assert verdict(row) == "PASS" and row.figure == "4/4 ok (2 notebooks x gpu, cpu); report with CPU, GPU"


@pytest.mark.parametrize("runs, kinds, why", [
    ([run("cnn_mnist", "gpu", "failed"), run("cnn_mnist", "cpu")], ["cpu"], "cnn_mnist on gpu: failed: boom"),
    ([run("cnn_mnist", "gpu")], ["gpu"], "cnn_mnist did not run on cpu"),
    ([run("cnn_mnist", "gpu"), run("cnn_mnist", "cpu")], ["cpu"], "the report lists no GPU run"),
    ([run("cnn_mnist", "gpu"), run("cnn_mnist", "cpu")], Unavailable("ReportError: boom", failed=True), "the report"),
    ([], ["cpu", "gpu"], "no notebook ran"),
])
def test_the_sweep_row_fails(runs, kinds, why):
    row = rules.sweep_row(runs, kinds)
    assert verdict(row) == "FAIL" and why in row.reason


def test_the_sweep_row_skips_without_a_gpu_tensorflow_sees():
    assert verdict(rules.sweep_row(Unavailable("TensorFlow sees no GPU"), Unavailable("-"))) == "SKIP"


def test_the_gpu2_row_wants_two_replicas_under_mirroredstrategy():
    good = run("cnn_mnist", "gpu:2", replicas=2, strategy="MirroredStrategy")
    assert verdict(rules.multi_gpu_row([good])) == "PASS"
    one = run("cnn_mnist", "gpu:2", replicas=1, strategy="default strategy (one device, as plain Keras)")
    assert verdict(rules.multi_gpu_row([one])) == "FAIL"
    assert verdict(rules.multi_gpu_row([run("cnn_mnist", "gpu:2", "failed")])) == "FAIL"
    assert verdict(rules.multi_gpu_row(Unavailable("this machine has 1 GPU: gpu:2 needs 2"))) == "SKIP"


def test_the_backend_row_wants_an_ok_gpu_record_of_that_backend():
    good = run("cnn_mnist", "gpu", device_kind="gpu", backend="jax", samples_per_s=40_000.0, device_name=A100)
    assert verdict(rules.backend_row("jax", good)) == "PASS"
    assert "ran on 'cpu'" in rules.backend_row("jax", {**good, "device_kind": "cpu"}).reason
    assert "backend 'tensorflow'" in rules.backend_row("jax", {**good, "backend": "tensorflow"}).reason
    assert verdict(rules.backend_row("jax", run("cnn_mnist", "gpu", "failed"))) == "FAIL"
    assert verdict(rules.backend_row("torch", Unavailable("torch is not installed"))) == "SKIP"
