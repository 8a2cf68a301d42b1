"""A decode run (docs/decode.md): greedy generation with a key-value cache (colabkit.inference.decode) at every batch
size and prompt length a run asks for, timed as MLPerf Inference's LLM benchmarks time it (time to first token, time
per output token), each combination's cached logits checked against the model's full pass, and each step placed
against the device's bandwidth (the bytes it must read over its time, the model's) and each prefill against its peak
FLOPS; beside the model's bytes and FLOPs a step, the compiler's own count of the compiled step (XLA's cost analysis,
JAX only) and whether the compiled step copies a whole cache."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import keras
import numpy as np

from colabkit.device.energy import describe_energy, open_energy_source, source_fields
from colabkit.device.energy_source import EnergySource, Mark
from colabkit.device.nvml import visible_gpu_indices
from colabkit.device.memory import setup_memory
from colabkit.errors import InsufficientMemoryError, MeasurementError, ParameterError
from colabkit.inference.compiled import JAX_COST_SOURCE, TENSORFLOW_COST_SOURCE
from colabkit.inference.decode import GreedyDecoder, decoder_memory
from colabkit.inference.decode_check import check_against_full_pass
from colabkit.inference.scenarios import parse_batch_sizes, parse_lengths
from colabkit.training.memory import (
    DECODE_BYTES_CONVENTION,
    DECODE_FLOP_CONVENTION,
    FIT_FRACTION,
    largest_decode_batch,
)

DECODE_METHOD = (
    "per prompt length and batch size a decoder of max_length = prompt + output tokens: its prefill and step "
    "compiled on zeros (first calls apart), one untimed generation to warm up, then one timed generation of "
    "`output_tokens` tokens after seeded random prompts. TTFT: the prompt handed over to the first tokens on the "
    "host (prefill and first token); TPOT = (total - TTFT) / (output tokens - 1), MLPerf's; tpot_p50/p90: the "
    "percentiles of the per-step times (inter-token latencies); tokens/s = batch x output tokens / total. Then a "
    "generation with kept logits (at most CHECK_LOGIT_BYTES of them) is checked against the model's full pass over "
    "the batch's first rows (as many as CHECK_LOGIT_BYTES of its logits hold). achieved_gb_s: the model's bytes a "
    "step (step_bytes) over its median time; beside them the compiler's: XLA's cost analysis of the compiled step "
    "(compiler_step_bytes, compiler_step_flops; JAX, the executable the steps ran; none on TensorFlow) and the "
    "instructions of its optimized HLO that transpose, copy or convert a whole key or value cache "
    "(compiler_cache_copies)")
CHECK_LOGIT_BYTES = 256 * 2**20  # the float32 logits kept for the check, at most: its first tokens, its first rows
COMPILER_SOURCES = {"jax": JAX_COST_SOURCE, "tensorflow": TENSORFLOW_COST_SOURCE}
MAX_DECODE_BATCH = 1024  # `max`: the largest power-of-two batch the estimate allows, at most this


@dataclass
class Decode:
    """What `measure_decode` measured: the record's `metrics` and its other fields (`decode`: one row per batch size
    and prompt length)."""

    metrics: dict[str, Any]
    record_fields: dict[str, Any]

    def describe(self) -> str:
        lines = []
        for row in self.record_fields["decode"]["rows"]:
            head = f"batch {row['batch']:>4}, prompt {row['prompt_length']:>5}:"
            if row.get("refused"):
                lines.append(f"{head} refused: {row['refused']}")
                continue
            bound = "" if row["within_bandwidth"] is None else (" within" if row["within_bandwidth"] else " ABOVE")
            compiler = ("" if row.get("compiler_step_bytes") is None else
                        f" (the compiled step accesses {row['compiler_step_bytes'] / 1e6:.4g} MB, "
                        f"{row['compiler_bytes_ratio']:.3g}x)")
            copies = row.get("compiler_cache_copies")
            copied = f"; the compiled step copies or converts a whole cache {copies} times" if copies else ""
            checked = "passed" if row["check_passed"] else "FAILED"
            lines.append(f"{head} TTFT {row['ttft_ms']:.4g} ms, TPOT p50 {row['tpot_p50_ms']:.4g} ms (p90 "
                         f"{row['tpot_p90_ms']:.4g}), {row['tokens_per_s']:.4g} tokens/s, "
                         f"{row['step_bytes'] / 1e6:.4g} MB a step{compiler} at {row['achieved_gb_s']:.4g} GB/s"
                         f"{bound} the device's{copied}; full-pass check {checked} (difference "
                         f"{row['check_max_abs_difference']:.2g}, tolerance {row['check_tolerance']:.2g})")
        if "energy_method" in self.metrics:
            lines.append(describe_energy(self.metrics, [(f"batch {row['batch']}, prompt {row['prompt_length']}", row)
                                                        for row in self.record_fields["decode"]["rows"]
                                                        if not row.get("refused")], "token"))
        return "\n".join(lines)


def _compiler_fields(decoder: GreedyDecoder, step_bytes: float, median_step_s: float | None) -> dict[str, Any]:
    """The record row's fields of what the compiler made of `decoder`'s step: XLA's bytes accessed and FLOPs a step
    (None where the backend gives no cost analysis), their bytes over `step_bytes` (the model's) and over the median
    step, the whole-cache copies in its HLO; or, where the compiler could not be asked, `compiler_note` saying why."""
    fields: dict[str, Any] = {"compiler_step_bytes": None, "compiler_step_flops": None, "compiler_bytes_ratio": None,
                              "compiler_gb_s": None, "compiler_cache_copies": None, "compiler_note": None}
    try:
        program = decoder.compiled_step()
    except MeasurementError as error:
        return {**fields, "compiler_note": str(error)}
    fields["compiler_cache_copies"] = len(program.whole_copies(decoder.cache_shape))
    if program.bytes_accessed is not None:
        fields.update(compiler_step_bytes=program.bytes_accessed, compiler_step_flops=program.flops,
                      compiler_bytes_ratio=program.bytes_accessed / step_bytes,
                      compiler_gb_s=program.bytes_accessed / median_step_s / 1e9 if median_step_s else None)
    return fields


def _combination(model: Any, batch: int, prompt_length: int, output_tokens: int, memory: Any, rng: np.random.Generator,
                 peak_tflops: float | None, bandwidth_gb_s: float | None, arithmetic: str | None,
                 clock: Callable[[], float],
                 mark: Callable[[], Mark]) -> tuple[dict[str, Any], tuple[Mark, Mark] | None]:
    """One batch size and prompt length measured (DECODE_METHOD): a row of the record's `decode.rows`, and the energy
    source's marks around its timed generation (None where the combination was refused)."""
    row: dict[str, Any] = {"batch": batch, "prompt_length": prompt_length, "output_tokens": output_tokens,
                           "max_length": prompt_length + output_tokens}
    try:
        decoder = GreedyDecoder(model, batch=batch, prompt_length=prompt_length, max_length=row["max_length"],
                                memory=memory)
    except InsufficientMemoryError as error:  # refused before the cache is built; the other combinations run
        return {**row, "refused": str(error)}, None
    prompt = rng.integers(0, decoder.decoder.vocab, size=(batch, prompt_length)).astype(np.int32)
    compiled = decoder.compile(clock)
    decoder.generate(prompt, output_tokens, clock=clock)  # warm-up: caches, allocator, page faults
    begin = mark()
    timed = decoder.generate(prompt, output_tokens, clock=clock)
    window = (begin, mark())
    vocab, positions = decoder.decoder.vocab, decoder.decoder.max_positions or row["max_length"]
    checked_tokens = max(1, min(output_tokens, CHECK_LOGIT_BYTES // (4 * batch * vocab)))
    kept = decoder.generate(prompt, checked_tokens, keep_logits=True)
    # The full pass gives float32 logits at every position of the model's length: over the first rows only (the
    # batch's rows never meet), as many as CHECK_LOGIT_BYTES holds, at least one.
    checked_rows = max(1, min(batch, CHECK_LOGIT_BYTES // (4 * positions * vocab)))
    check = check_against_full_pass(model, prompt[:checked_rows], replace(
        kept, tokens=kept.tokens[:checked_rows], logits=kept.logits[:checked_rows]), arithmetic)
    steps = np.asarray(timed.step_s, dtype=float)
    tpot_s = (timed.total_s - timed.prefill_s) / len(steps) if len(steps) else None
    p50 = float(np.median(steps)) if len(steps) else None
    flops = [decoder.step_flops(keys) for keys in timed.step_keys]
    step_flops = float(np.mean(flops)) if flops else None
    step_bytes = decoder.step_bytes(decoder.max_length)  # what a step over the fixed-size cache reads
    needed = float(np.mean([decoder.step_bytes(keys) for keys in timed.step_keys])) if flops else None
    achieved = step_bytes / p50 / 1e9 if p50 else None
    prefill_tflops = decoder.prefill_flops() / timed.prefill_s / 1e12
    row.update({
        **compiled, "ttft_ms": 1e3 * timed.prefill_s, "tpot_ms": None if tpot_s is None else 1e3 * tpot_s,
        "tpot_p50_ms": None if p50 is None else 1e3 * p50,
        "tpot_p90_ms": float(1e3 * np.quantile(steps, 0.9)) if len(steps) else None,
        "step_ms": (1e3 * steps).tolist(), "total_s": timed.total_s,
        "tokens_per_s": batch * output_tokens / timed.total_s,
        "flops_per_token": None if step_flops is None else step_flops / batch, "step_flops": step_flops,
        "step_bytes": step_bytes, "step_bytes_needed": needed,
        "cache_bytes": decoder.allocated_cache_bytes(), "achieved_gb_s": achieved,
        "decode_tflops": None if not (step_flops and p50) else step_flops / p50 / 1e12,
        "decode_intensity": None if step_flops is None else step_flops / step_bytes,
        "prefill_flops": decoder.prefill_flops(), "prefill_bytes": decoder.prefill_bytes(),
        "prefill_tflops": prefill_tflops, "prefill_intensity": decoder.prefill_flops() / decoder.prefill_bytes(),
        "peak_tflops": peak_tflops, "bandwidth_gb_s": bandwidth_gb_s,
        "within_bandwidth": None if not (bandwidth_gb_s and achieved) else achieved <= bandwidth_gb_s,
        "check_passed": check.passed, "check_max_abs_difference": check.max_abs_difference,
        "check_tolerance": check.tolerance, "check_arithmetic": check.arithmetic, "check_ties": check.ties,
        "check_tokens": checked_tokens, "check_rows": checked_rows, "tokens_agree": check.tokens_agree,
        **_compiler_fields(decoder, step_bytes, p50),
    })
    return row, window


def decode_energy(source: EnergySource, rows: list[dict[str, Any]],
                  windows: list[tuple[Mark, Mark] | None]) -> dict[str, Any]:
    """Joules per generated token over each measured row's timed generation (prefill included, as tokens_per_s's
    time is), into the row (WindowEnergy.per_unit's keys); returns `energy_method`, `energy_source` and
    `energy_reason` (the first reason a row's figure is missing; None when none is)."""
    for row, window in zip(rows, windows):
        if window is not None:
            row.update(source.energy(*window).per_unit(row["batch"] * row["output_tokens"], "token"))
    reasons = [row["energy_reason"] for row in rows if row.get("energy_reason")]
    return {**source_fields(source), "energy_reason": source.reason or (reasons[0] if reasons else None)}


def measure_decode(model: Any, device: Any, *, prompt_lengths: str | int, output_tokens: int,
                   batch_sizes: str | int, seed: int = 0, memory: Any = None, arithmetic: str | None = None,
                   clock: Callable[[], float] = time.perf_counter, energy: EnergySource | None = None) -> Decode:
    """Greedy decode of `model` (ParaDnn's Transformer, built) on `device` (a DeviceSetup, one device) at every
    prompt length ('128,2048') and batch size ('1,8,max'; max: the largest power of two the memory estimate allows
    at the longest prompt): DECODE_METHOD, printed and returned. A combination the estimate refuses against
    `memory` (colabkit.device.memory.DeviceMemory; default: the device's) is recorded as refused, unbuilt. `energy`:
    a started energy source (default: the device's, colabkit.device.energy.open_energy_source), stopped here; joules
    per token are over each combination's timed generation. A failed full-pass check makes `decode_valid` false: the
    record is then written as failed (records.plausibility)."""
    if device.replicas > 1 or device.kind == "multiworker":
        raise ParameterError(f"mode = 'decode' runs on one device; {getattr(device, 'name', device.kind)} has "
                             f"{device.replicas} replicas: give device 'cpu' or 'gpu:1'")
    if output_tokens < 2:
        raise ParameterError(f"output_tokens = {output_tokens}: expected 2 or more (TPOT needs a step after the first)")
    prompts, memory = parse_lengths(prompt_lengths), memory or setup_memory(device)
    asked = parse_batch_sizes(str(batch_sizes))
    largest = None
    if "max" in asked:
        def at(batch: int) -> Any:
            longest = max(prompts)
            return decoder_memory(model, batch=batch, prompt_length=longest, max_length=longest + output_tokens)
        largest = largest_decode_batch(at, memory.bytes, FIT_FRACTION, MAX_DECODE_BATCH) if memory else MAX_DECODE_BATCH
    batches = sorted({int(largest if size == "max" else size) for size in asked if size != "max" or largest})
    if not batches:
        raise InsufficientMemoryError(f"decode_batch_sizes = {batch_sizes!r}: not even batch 1 fits {memory.where} at "
                                      f"prompt {max(prompts)} + {output_tokens} tokens by the memory estimate")
    compute_dtype = str(model.dtype_policy.compute_dtype)
    if arithmetic is None and compute_dtype == "float32" and device.kind in ("gpu", "tpu"):
        # the products' own arithmetic: TF32 on a GPU that runs float32 in it, bfloat16 passes on a TPU
        tf32 = device.kind == "gpu" and device.gpu_precision("float32") == "tf32"
        arithmetic = "tensorfloat32" if tf32 else "bfloat16" if device.kind == "tpu" else None
    peak = device.peak(compute_dtype)
    bandwidth = device.peak_bandwidth()
    peak_tflops, bandwidth_gb_s = (peak.tflops if peak else None), (bandwidth.gb_per_s if bandwidth else None)
    rng = np.random.default_rng(seed)
    source = energy if energy is not None else open_energy_source(device.kind, visible_gpu_indices(1)
                                                                  if device.kind == "gpu" else [])
    try:
        measured_windows = [_combination(model, batch, prompt, output_tokens, memory, rng, peak_tflops, bandwidth_gb_s,
                                         arithmetic, clock, source.mark) for prompt in prompts for batch in batches]
    finally:
        source.stop()
    rows = [row for row, _ in measured_windows]
    energy_fields = decode_energy(source, rows, [window for _, window in measured_windows])
    measured = [row for row in rows if not row.get("refused")]
    if not measured:
        raise InsufficientMemoryError("every decode combination was refused by the memory estimate:\n"
                                      + "\n".join(row["refused"] for row in rows))
    # The headline: the smallest batch at the longest prompt (the most bandwidth-bound step a user waits for).
    head = min(measured, key=lambda row: (row["batch"], -row["prompt_length"]))
    best = max(measured, key=lambda row: row["tokens_per_s"])
    metrics: dict[str, Any] = {
        "decode_tpot_p50_ms": head["tpot_p50_ms"], "decode_tpot_p90_ms": head["tpot_p90_ms"],
        "decode_tpot_ms": head["tpot_ms"], "decode_ttft_ms": head["ttft_ms"], "decode_batch": head["batch"],
        "decode_prompt_length": head["prompt_length"], "decode_achieved_gb_s": head["achieved_gb_s"],
        "decode_tokens_per_s": best["tokens_per_s"], "decode_tokens_per_s_batch": best["batch"],
        "decode_valid": all(row["check_passed"] for row in measured),
        "decode_refused": len(rows) - len(measured), "peak_tflops": peak_tflops,
        **energy_fields, "decode_energy_j_per_token": head.get("energy_j_per_token"),
        "decode_energy_j_per_token_best": best.get("energy_j_per_token"),
        "peak_bandwidth_gb_s": bandwidth_gb_s, "dtype_policy": model.dtype_policy.name, "replicas": 1,
        "params": model.count_params(),
    }
    fields = {"decode": {"rows": rows, "method": DECODE_METHOD, "flop_convention": DECODE_FLOP_CONVENTION,
                         "bytes_convention": DECODE_BYTES_CONVENTION, "seed": seed, "max_batch": largest,
                         "compiler_source": COMPILER_SOURCES.get(keras.backend.backend()),
                         "peak_tflops_source": peak.source if peak else f"no published peak for {device.name}",
                         "bandwidth_source": bandwidth.source if bandwidth else f"no bandwidth for {device.name}"}}
    result = Decode(metrics, fields)
    print(result.describe())
    return result
