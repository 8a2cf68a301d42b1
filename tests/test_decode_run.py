"""Decode as a ParaDnn run (docs/decode.md): the notebook's `mode = "decode"` through papermill (the production path)
writes a record with TTFT, TPOT, tokens/s, FLOPs and bytes per step per batch size and prompt length, the full-pass
check and the achieved GB/s against the host's measured bandwidth; the sweep's plan refuses decode on a family
without a key-value cache before anything runs; the report's decode section takes medians over runs with their
intervals from records of 3 + 3 runs."""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
import report_fixtures as fx
from helpers import REPO, execute_notebook

from colabkit.experiments import find
from colabkit.experiments.declaration import check_values
from colabkit.experiments.inference import DECODE_HEADLINE, headline_for
import schema_doc
from colabkit.records.record import make_record, read_record
from colabkit.training.memory import decode_step_bytes, palm_token_flops, transformer_weights

# layers, width, heads, length, vocab, mlp_ratio: a tiny Transformer, seconds through papermill on JAX
TINY = dict(layers=2, width=64, heads=4, length=48, vocab=97, mlp_ratio=4)
DECODE = dict(family="transformer", mode="decode", device="cpu", backend="jax", prompt_lengths="8,32",
              output_tokens=8, decode_batch_sizes="1,4", **TINY)


@pytest.mark.notebook
@pytest.mark.parametrize("backend", ["jax", pytest.param("tensorflow", marks=pytest.mark.slow)])
def test_the_notebook_decodes_and_records_ttft_tpot_tokens_per_s_and_bytes_per_step(tmp_path, backend):
    _, path = execute_notebook("paradnn", tmp_path, **{**DECODE, "backend": backend})
    record = read_record(path)
    assert record["status"] == "ok" and record["params"]["mode"] == "decode"
    assert record["software"]["keras_backend"] == backend
    rows = record["decode"]["rows"]
    assert [(row["prompt_length"], row["batch"]) for row in rows] == [(8, 1), (8, 4), (32, 1), (32, 4)]
    non_embedding = transformer_weights(2, 64, 97, 4, 48)[0]
    bandwidth = record["metrics"]["peak_bandwidth_gb_s"]
    assert bandwidth and bandwidth > 0  # the host's STREAM triad, measured in the run
    for row in rows:
        assert row["check_passed"] and row["check_max_abs_difference"] <= row["check_tolerance"]
        assert (row["check_rows"], row["check_tokens"]) == (row["batch"], 8)  # all of it, at these sizes
        assert 0 < row["tpot_p50_ms"] <= row["tpot_p90_ms"] and row["ttft_ms"] > 0
        assert len(row["step_ms"]) == 7  # the output tokens after the first
        assert row["tokens_per_s"] == pytest.approx(row["batch"] * 8 / row["total_s"])
        assert row["tpot_ms"] == pytest.approx((row["total_s"] - row["ttft_ms"] / 1e3) / 7 * 1e3)
        # a step reads every non-embedding weight, the batch's rows and the whole fixed-size cache (float32)
        assert row["step_bytes"] == decode_step_bytes(non_embedding, 2, 64, row["batch"], row["max_length"], 4, 4)
        keys = [row["prompt_length"] + i for i in range(1, 8)]
        assert row["flops_per_token"] == pytest.approx(sum(palm_token_flops(non_embedding, 2 * 64, k)
                                                           for k in keys) / 7)
        assert row["achieved_gb_s"] == pytest.approx(row["step_bytes"] / row["tpot_p50_ms"] * 1e3 / 1e9)
        # these steps read well under a megabyte: far below the host's memory bandwidth
        assert row["achieved_gb_s"] < bandwidth and row["within_bandwidth"] is True
        # the compiled step reads its cache in place; XLA's count of its bytes beside the model's (JAX only)
        assert row["compiler_cache_copies"] == 0 and row["compiler_note"] is None
        if backend == "jax":
            assert row["compiler_bytes_ratio"] == pytest.approx(row["compiler_step_bytes"] / row["step_bytes"])
            assert row["compiler_gb_s"] == pytest.approx(row["compiler_step_bytes"] / row["tpot_p50_ms"] * 1e3 / 1e9)
            assert 1 <= row["compiler_bytes_ratio"] < 2 and row["compiler_step_flops"] > 0
        else:
            assert row["compiler_step_bytes"] is row["compiler_bytes_ratio"] is row["compiler_gb_s"] is None
    described = {key for keys in schema_doc.DECODE_ROW_KEYS for key in keys.split(", ")}
    assert set(rows[0]) <= described and set(record["decode"]) <= {key for keys in schema_doc.DECODE_KEYS
                                                                   for key in keys.split(", ")}
    assert record["decode"]["compiler_source"].startswith("XLA's cost analysis" if backend == "jax" else "none")
    metrics = record["metrics"]
    assert metrics["decode_valid"] is True and metrics["decode_refused"] == 0
    assert (metrics["decode_batch"], metrics["decode_prompt_length"]) == (1, 32)
    assert metrics["decode_tpot_p50_ms"] == rows[2]["tpot_p50_ms"]
    assert headline_for(find("paradnn"), record["params"]) == DECODE_HEADLINE


def test_the_plan_refuses_decode_on_a_family_without_a_cache_before_anything_runs(tmp_path):
    paradnn = find("paradnn")
    problems = check_values(paradnn, {**DECODE, "family": "fc"})
    assert any("family = 'transformer'" in problem for problem in problems)
    assert any("exceed the model's length" in problem
               for problem in check_values(paradnn, {**DECODE, "prompt_lengths": "8,45"}))
    assert any("prompt_lengths" in problem for problem in check_values(paradnn, {**DECODE, "prompt_lengths": "8,x"}))
    assert not check_values(paradnn, DECODE)
    done = subprocess.run([sys.executable, "-m", "colabkit", "sweep", "parameters/paradnn.yaml", "--preset",
                           "decode_smoke", "--dry-run", "-p", "family=fc", "--out", str(tmp_path / "out")],
                          cwd=REPO, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)},
                          timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "expected family = 'transformer'" in done.stderr and not (tmp_path / "out" / "paradnn").exists()


@pytest.mark.parametrize("dry_run", [True, False])
def test_the_plan_refuses_decode_on_pytorch_in_one_line_before_a_kernel_starts(tmp_path, dry_run):
    assert any("backend = 'torch': expected backend = 'jax' or 'tensorflow'" in problem
               for problem in check_values(find("paradnn"), {**DECODE, "backend": "torch"}))
    done = subprocess.run([sys.executable, "-m", "colabkit", "sweep", "parameters/paradnn.yaml", "--preset",
                           "decode_smoke", "-p", "mode=decode", "-p", "backend=torch", "--out", str(tmp_path / "out"),
                           *(["--dry-run"] if dry_run else [])],
                          cwd=REPO, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)},
                          timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    [line] = done.stderr.strip().splitlines()  # one problem: steps_per_execution is no rule of a decode run
    assert "mode = 'decode' with backend = 'torch'" in line and not (tmp_path / "out" / "paradnn").exists()


def test_a_list_of_one_is_a_whole_number_and_a_bad_count_says_what_is_expected_and_why():
    paradnn = find("paradnn")
    assert not check_values(paradnn, {**DECODE, "prompt_lengths": 16, "decode_batch_sizes": 4})  # -p prompt_lengths=16
    assert not check_values(paradnn, {**DECODE, "mode": "inference", "offline_batch_sizes": 1})
    [zero] = check_values(paradnn, {**DECODE, "decode_batch_sizes": 0})
    assert zero.startswith("decode_batch_sizes = 0: expected whole numbers >= 1")  # not "expected a str"
    [one] = check_values(paradnn, {**DECODE, "output_tokens": 1})
    assert "output_tokens = 1: expected 2 tokens or more" in one and "one token has none" in one


def test_the_decode_memory_estimate_is_the_plans_in_decode_mode():
    estimate = find("paradnn").memory_estimate({**find("paradnn").defaults, **DECODE})
    assert estimate.batch == 1 and estimate.max_length == 32 + 8  # the smallest batch at the longest prompt
    assert estimate.activity == "decoding"


def _decode_row(batch: int, prompt: int, tpot_ms: float, ttft_ms: float) -> dict:
    total_s = (ttft_ms + 7 * tpot_ms) / 1e3
    return {"batch": batch, "prompt_length": prompt, "output_tokens": 8, "max_length": prompt + 8,
            "ttft_ms": ttft_ms, "tpot_ms": tpot_ms, "tpot_p50_ms": tpot_ms, "tpot_p90_ms": 1.2 * tpot_ms,
            "total_s": total_s, "tokens_per_s": batch * 8 / total_s, "step_bytes": 1e6 * batch, "cache_bytes": 1e5,
            "achieved_gb_s": batch / tpot_ms, "flops_per_token": 1e6, "decode_tflops": 1e-3 * batch / tpot_ms,
            "decode_intensity": 1.0, "prefill_tflops": 0.1, "prefill_intensity": 100.0, "peak_tflops": 1.0,
            "bandwidth_gb_s": 20.0, "within_bandwidth": batch / tpot_ms <= 20.0, "check_passed": True,
            "compiler_step_bytes": 1.1e6 * batch, "compiler_bytes_ratio": 1.1, "compiler_gb_s": 1.1 * batch / tpot_ms,
            "compiler_cache_copies": 0}


def decode_record(device: str, scale: float, run: int) -> dict:
    """A decode record as the notebook writes one: TPOT `scale` x (1 + run / 100) ms at batch 1, prompt 8."""
    factor = scale * (1 + run / 100)
    rows = [_decode_row(batch, prompt, factor * (1 + prompt / 32) * (1 + batch / 8), factor * prompt / 8)
            for prompt in (8, 32) for batch in (1, 4)]
    params = {**DECODE, "device": device, "seed": 0}
    metrics = {"decode_tpot_p50_ms": rows[0]["tpot_p50_ms"], "decode_valid": True}
    return make_record("paradnn", "ok", params, metrics=metrics, device=fx.DEVICES[device],
                       decode={"rows": rows, "method": "synthetic"})


def test_the_report_gives_decode_medians_over_runs_with_intervals_and_keeps_them_out_of_training(tmp_path):
    from colabkit.report import decode_section, load_report_data, paradnn_table

    for run in range(3):
        slug = "decode" if run == 0 else f"decode_repeat-{run + 1}"
        fx.write(tmp_path, decode_record("cpu", 1.0, run), slug)
        fx.write(tmp_path, decode_record("gpu", 0.1, run), slug)
    data = load_report_data([tmp_path])
    assert len(paradnn_table(data)) == 0  # no training figure takes a decode run
    section = decode_section(data)
    table = section.table("decode")
    assert len(table) == 8 and set(table["runs"]) == {3}
    cpu = table[(table["device"].str.startswith("CPU")) & (table["batch"] == 1) & (table["prompt_length"] == 8)].iloc[0]
    expected = [1.0 * (1 + run / 100) * 1.25 * 1.125 for run in range(3)]
    assert cpu["tpot_ms"] == pytest.approx(expected[1])  # the median of the 3 runs
    assert (cpu["tpot_ms_low"], cpu["tpot_ms_high"]) == pytest.approx((expected[0], expected[2]))
    assert cpu["tpot_ms_level"] == pytest.approx(0.75)  # 3 runs: their range, at 75 %
    assert cpu["tokens_per_s_low"] <= cpu["tokens_per_s"] <= cpu["tokens_per_s_high"]
    scaling = section.figure("decode_scaling").data
    assert len(scaling) == 8
    roofline = section.figure("decode_roofline").data
    assert set(roofline["phase"]) == {"prefill", "decode"} and len(roofline) == 16
    # the GPU's batch 4, prompt 8 steps: 4 MB in 0.19 ms, 21 GB/s, above its (synthetic) 20 GB/s; the rest within
    assert len(section.warnings) == 1 and "Tesla T4 batch 4 prompt 8 (21" in section.warnings[0]
    assert table["within_bandwidth"].sum() == 7
    assert cpu["compiler_bytes_ratio"] == pytest.approx(1.1) and cpu["compiler_cache_copies"] == 0
    # a compiled step that copies its cache: it accesses 2.8x the model's bytes in one run, the report says so
    copying = decode_record("cpu", 1.0, 3)
    copying["decode"]["rows"][3].update(compiler_bytes_ratio=2.8, compiler_cache_copies=8)
    fx.write(tmp_path / "copying", copying, "decode")
    warned = decode_section(load_report_data([tmp_path / "copying"])).warnings
    assert any("accesses more than the model must read at" in warning and "batch 4 prompt 32 (2.8x)" in warning
               for warning in warned), warned
    assert any("copies (or converts) a whole key or value cache at" in warning and "(8 copies)" in warning
               for warning in warned)
    assert decode_section(load_report_data([fx.write(tmp_path / "none", fx.cnn("cpu", 256), "b").parent])).empty


def test_compare_judges_decode_runs_on_their_median_time_per_output_token(tmp_path):
    for run in range(3):
        slug = "decode" if run == 0 else f"decode_repeat-{run + 1}"
        fx.write(tmp_path / "before", decode_record("cpu", 1.0, run), slug)
        fx.write(tmp_path / "after", decode_record("cpu", 2.0, run), slug)
    rows = fx.compare_folders(tmp_path / "before", tmp_path / "after")
    assert [row.measure for row in rows] == [DECODE_HEADLINE.label]
    assert not rows[0].higher_is_better and rows[0].comparison.ratio.estimate == pytest.approx(2.0)
    assert rows[0].comparison.verdict == "slower"


def test_a_combination_the_estimate_refuses_is_recorded_unbuilt_and_the_others_run():
    import keras
    from helpers import notebook_builders

    from colabkit.device.memory import DeviceMemory
    from colabkit.errors import InsufficientMemoryError
    from colabkit.inference.generation import measure_decode

    keras.utils.set_random_seed(3)
    model = notebook_builders()["build_transformer"](2, 64, 4, 48, 97, 4)
    device = SimpleNamespace(kind="cpu", replicas=1, name="a CPU", peak=lambda dtype: None,
                             peak_bandwidth=lambda: None)
    small = DeviceMemory(2 * 2**20, "a small device")  # batch 1 x 40 positions about 0.5 MiB; batch 64 about 5 MiB
    decode = measure_decode(model, device, prompt_lengths="32", output_tokens=8, batch_sizes="1,64,max", memory=small)
    rows = decode.record_fields["decode"]["rows"]
    largest = decode.record_fields["decode"]["max_batch"]
    assert 1 < largest < 64 and [row["batch"] for row in rows] == [1, largest, 64]
    assert "decoding needs about" in rows[2]["refused"] and "tpot_p50_ms" not in rows[2]
    assert all(row["check_passed"] for row in rows[:2]) and decode.metrics["decode_refused"] == 1
    assert rows[0]["within_bandwidth"] is None  # no bandwidth known: no check claimed
    assert rows[0]["compiler_cache_copies"] == 0 and "compiler_cache_copies" not in rows[2]  # the refused: unbuilt
    with pytest.raises(InsufficientMemoryError):
        measure_decode(model, device, prompt_lengths="32", output_tokens=8, batch_sizes="64", memory=small)
