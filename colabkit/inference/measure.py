"""An inference run (docs/inference.md): the model's forward pass on one device in MLPerf Inference's single-stream
and offline scenarios under the run's settings (inference.scenarios); its metrics and record fields."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from colabkit.device.energy import describe_energy, open_energy_source, source_fields
from colabkit.device.energy_source import EnergySource
from colabkit.device.nvml import visible_gpu_indices
from colabkit.errors import ParameterError
from colabkit.inference.scenarios import InferenceSettings, largest_batch, offline, single_stream
from colabkit.statistics import CONFIDENCE, min_samples, quantile_ci, summarize

PERCENTILES = (50, 90, 99)  # MLPerf scores SingleStream by p90, MultiStream and Server by p99

LATENCY_METHOD = ("one predict_on_batch per query at batch 1, its NumPy answer on the host when the clock stops; the "
                  "first call and the warm-up apart; queries until both minimums (queries, duration) are met; "
                  "percentiles by linear interpolation, equal-tailed order-statistic intervals (Binomial(n, q))")
OFFLINE_METHOD = ("per batch size: one call compiles, three warm up (the quickest sizes the runs), then runs of "
                  "back-to-back predict_on_batch calls on one batch built before the clock starts (its copy to the "
                  "device timed), until both minimums (runs, duration) are met; samples/s per run, their median and "
                  "its interval")


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else 1e3 * seconds


@dataclass
class Inference:
    """What `measure_inference` measured: the record's `metrics` and other fields."""

    metrics: dict[str, Any]
    record_fields: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        """The figures in a few lines, each scenario's with the minimum that bound it (or NOT VALID)."""
        single = self.record_fields["inference"]["single_stream"]
        lines = [f"single-stream, {single['queries']} queries at batch 1 in {single['duration_s']:.3g} s "
                 f"(binding: {single['binding'] or 'none, NOT VALID'}; first call {single['first_call_s']:.3g} s):"]
        for entry in single["percentiles"]:
            interval = (f"[{entry['low_ms']:.4g}, {entry['high_ms']:.4g}] ({100 * entry['coverage']:.1f} %)"
                        if entry["low_ms"] is not None else f"no interval: {entry['note']}")
            lines.append(f"  p{entry['percentile']:g} {entry['estimate_ms']:.4g} ms {interval}")
        for row in self.record_fields["inference"]["offline"]:
            interval = f" [{row['low']:.4g}, {row['high']:.4g}]" if row["low"] is not None else f" ({row['note']})"
            lines.append(f"offline batch {row['batch']}: {row['samples_per_s']:.4g} samples/s{interval}, {row['runs']} runs "
                         f"in {row['duration_s']:.3g} s (binding: {row['binding'] or 'none, NOT VALID'})")
        if "energy_method" in self.metrics:
            lines.append(describe_energy(self.metrics, [("single-stream", single["energy"])] + [
                (f"offline batch {row['batch']}", row) for row in self.record_fields["inference"]["offline"]],
                "inference"))
        return "\n".join(lines)


def inference_energy(source: EnergySource, single: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Joules per inference over each scenario's timed window (its `energy_marks`, popped), into `single` (`energy`)
    and each offline row (WindowEnergy.per_unit's keys); returns the metrics: `single_stream_energy_j_per_inference`,
    `offline_energy_j_per_inference_bN`, and `energy_method`, `energy_source`, `energy_reason` (the first reason a
    figure is missing; None when none is)."""
    def measured(part: dict[str, Any], inferences: int) -> dict[str, Any]:
        marks = part.pop("energy_marks")
        if marks is None:
            return {"energy_j": None, "energy_j_per_inference": None, "mean_power_w": None, "energy_window_s": None,
                    "energy_reason": source.reason or "the window was not marked"}
        return source.energy(*marks).per_unit(inferences, "inference")

    single["energy"] = measured(single, len(single["latencies_s"]))
    for row in rows:
        row.update(measured(row, row["inferences"]))
    reasons = [part["energy_reason"] for part in (single["energy"], *rows) if part["energy_reason"]]
    return {**source_fields(source), "energy_reason": source.reason or (reasons[0] if reasons else None),
            "single_stream_energy_j_per_inference": single["energy"]["energy_j_per_inference"],
            **{f"offline_energy_j_per_inference_b{row['batch']}": row["energy_j_per_inference"] for row in rows}}


def measure_inference(model: Any, samples: Any, device: Any, settings: InferenceSettings, *,
                      tokens_per_sample: int | None = None, call: Callable[[Any], Any] | None = None,
                      clock: Callable[[], float] = time.perf_counter, energy: EnergySource | None = None) -> Inference:
    """Single-stream latencies and offline throughput of `model` on `samples` (one sample a row) on `device` (one: a
    batch of 1 does not split over replicas), printed and returned. `tokens_per_sample` (a sequence model's): each
    offline row also gives `tokens_per_s`, and the metrics `offline_tokens_per_s` (a decoder's prefill). `call` and
    `clock` replace model.predict_on_batch and time.perf_counter (a test's fakes). `energy`: a started energy source
    (default: the device's, colabkit.device.energy.open_energy_source), stopped here; joules per inference are over
    each scenario's timed queries. A scenario short of a minimum makes `inference_valid` false: the record is then
    written as failed (colabkit.records.plausibility)."""
    # The declarations' inference_rules refuse a count (cpu:2) before anything runs; what only the
    # machine tells ('gpu' is every GPU there is, a TPU's cores) is refused here.
    if device.replicas > 1 or device.kind == "multiworker":
        raise ParameterError(f"mode = 'inference' runs on one device; {getattr(device, 'name', device.kind)} has "
                             f"{device.replicas} replicas: give device 'cpu' or 'gpu:1'")
    samples = np.asarray(samples)
    if not len(samples):
        raise ParameterError("inference needs at least one sample to query with")
    call = call or model.predict_on_batch
    maximum = largest_batch(model, device, samples[:1], settings.max_batch_cap) if "max" in settings.batches else None
    batches = sorted({int(maximum["batch"]) if size == "max" and maximum else int(size) for size in settings.batches})
    gpus = visible_gpu_indices(1) if device.kind == "gpu" else []
    source = energy if energy is not None else open_energy_source(device.kind, gpus)
    try:
        single = single_stream(call, samples, settings, clock, mark=source.mark)
        rows = [offline(call, samples, batch, settings, clock, mark=source.mark) for batch in batches]
    finally:
        source.stop()
    energy_metrics = inference_energy(source, single, rows)
    latencies = single.pop("latencies_s")
    for row in rows if tokens_per_sample else []:
        row.update(tokens_per_sample=tokens_per_sample, tokens_per_s=row["samples_per_s"] * tokens_per_sample,
                   tokens_low=None if row["low"] is None else row["low"] * tokens_per_sample,
                   tokens_high=None if row["high"] is None else row["high"] * tokens_per_sample)
    percentiles = [{"percentile": level, "estimate_ms": _ms(point.estimate), "low_ms": _ms(point.low),
                    "high_ms": _ms(point.high), "coverage": point.confidence if point.resolved else None,
                    "min_queries": min_samples(level / 100), "note": point.note and f"p{level:g}: {point.note}"}
                   for level, point in ((level, quantile_ci(latencies, level / 100)) for level in PERCENTILES)]
    best = max(rows, key=lambda row: row["samples_per_s"] or 0.0)
    metrics: dict[str, Any] = {
        "latency_queries": len(latencies), "latency_min_queries_p99": min_samples(0.99),
        "latency_mean_ms": 1e3 * float(np.mean(latencies)), "latency_first_call_ms": 1e3 * single["first_call_s"],
        **{f"latency_p{entry['percentile']:g}{end}_ms": entry[key] for entry in percentiles
           for end, key in (("", "estimate_ms"), ("_low", "low_ms"), ("_high", "high_ms"))},
        "latency_duration_s": single["duration_s"], "latency_binding": single["binding"],
        "inference_valid": single["valid"] and all(row["valid"] for row in rows),
        "offline_samples_per_s": best["samples_per_s"], "offline_batch": best["batch"],
        **({"offline_tokens_per_s": best["tokens_per_s"]} if tokens_per_sample else {}),
        **{f"offline_samples_per_s_b{row['batch']}": row["samples_per_s"] for row in rows},
        **energy_metrics, "offline_energy_j_per_inference": best["energy_j_per_inference"],
        "dtype_policy": getattr(getattr(model, "dtype_policy", None), "name", None), "replicas": 1,
        "params": model.count_params() if hasattr(model, "count_params") else None,
    }
    inference = {
        "confidence": CONFIDENCE,
        "single_stream": {**single, "queries": len(latencies), "latencies_ms": [1e3 * value for value in latencies],
                          "method": LATENCY_METHOD, "percentiles": percentiles},
        "offline": rows, "offline_method": OFFLINE_METHOD, "max_batch": maximum,
    }
    fields = {"inference": inference, "timings": {"single_stream_latency_s": summarize(latencies),
                                                  "offline_samples_per_s": {str(row["batch"]): row["samples_per_s_runs"]
                                                                            for row in rows}}}
    measured = Inference(metrics, fields)
    print(measured.describe())
    return measured
