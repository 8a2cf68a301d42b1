"""Same-machine, same-run baselines that a measured figure is divided by, measured as carefully as it.

NumPy's BLAS is timed in a child process without OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE (they slow
it down on some hosts, flattering every ratio). Each sample times as many products as last
SAMPLE_MIN_S, for at least MIN_TIME_S and MIN_SAMPLES (three sub-millisecond samples once gave 2.1
GFLOPS where 160-175 is right). The result keeps every sample, the host's state and `stable`, with
its reasons when not: a median uncertain by more than UNSTABLE_HALF_WIDTH, a busy host, or a rate
below IMPLAUSIBLE_FRACTION_OF_PEAK of the CPU's peak. A ratio to an unstable baseline says so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from colabkit.device.host_state import OTHER_CPU_SHARE_MAX, Snapshot, cpu_window
from colabkit.errors import MeasurementError
from colabkit.statistics import median_ci, summarize

OPENBLAS_OVERRIDES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
MIN_TIME_S = 0.5  # the timed products add up to at least this
SAMPLE_MIN_S = 0.02  # each sample times back-to-back products lasting at least this (timer, scheduler noise)
MIN_SAMPLES = 5
UNSTABLE_HALF_WIDTH = 0.10  # the median sample's interval wider than +/- 10 %: the baseline is unstable
IMPLAUSIBLE_FRACTION_OF_PEAK = 0.02  # below 2 % of the CPU's peak estimate, a BLAS product was disturbed

_CHILD = r"""
import json, sys, time
import numpy as np
n, dtype = int(sys.argv[1]), sys.argv[2]
min_time, sample_min, min_samples = float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
rng = np.random.default_rng(0)
a = rng.random((n, n), dtype=np.float64).astype(dtype)
b = rng.random((n, n), dtype=np.float64).astype(dtype)
c = np.empty_like(a)
for _ in range(3):
    np.matmul(a, b, out=c)  # warm-up: thread pool start, page faults

def timed(calls):
    start = time.perf_counter_ns()
    for _ in range(calls):
        np.matmul(a, b, out=c)
    return (time.perf_counter_ns() - start) / 1e9

calls = 1
while timed(calls) < sample_min and calls < 1 << 20:
    calls *= 2
samples, measured = [], 0.0
while (measured < min_time or len(samples) < min_samples) and len(samples) < 10000:
    seconds = timed(calls)
    samples.append(seconds / calls)
    measured += seconds
try:
    blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
    library = f"{blas.get('name')} {blas.get('version')}"
except (TypeError, KeyError, AttributeError):  # older NumPy has no dict mode; the name is a nicety
    library = "unknown"
print(json.dumps({"samples": samples, "calls_per_sample": calls, "measured_s": measured, "library": library,
                  "numpy": np.__version__}))
"""


def clean_blas_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """A copy of the environment without the OpenBLAS overrides that slow it down."""
    env = dict(os.environ if environ is None else environ)
    for name in OPENBLAS_OVERRIDES:
        env.pop(name, None)
    return env


def child_window(before: Snapshot, after: Snapshot) -> dict[str, Any]:
    """The host while a child process ran between two snapshots, from the child's side: every other
    process counts as other, this one's own threads included (a framework's thread pool that still
    spins competes with the child as any process would)."""
    host = cpu_window(before, after)
    children = after.children_s - before.children_s
    if host["other_cpu_s"] is not None and host["cpus"]:
        host["other_cpu_s"] += max(0.0, host["own_cpu_s"] - children)
        host["other_cpu_share"] = host["other_cpu_s"] / (host["wall_s"] * host["cpus"])
    host["own_cpu_s"] = children
    return host


def baseline_problems(samples: list[float], tflops: float, host: dict[str, Any],
                      peak_tflops: float | None = None) -> list[str]:
    """Why a baseline cannot be trusted, in words (empty: it is stable): its samples leave their median
    uncertain by more than UNSTABLE_HALF_WIDTH (the interval of colabkit.statistics.median_ci), other
    processes took more than the host-quiet share of the CPUs while it ran, or its rate lies below
    IMPLAUSIBLE_FRACTION_OF_PEAK of the CPU's peak estimate."""
    problems = []
    width = median_ci(samples).half_width
    if width is not None and width > UNSTABLE_HALF_WIDTH:
        problems.append(f"its {len(samples)} samples leave their median uncertain by +/- {100 * width:.0f} % "
                        f"(threshold {100 * UNSTABLE_HALF_WIDTH:.0f} %)")
    other = host.get("other_cpu_share")
    if other is not None and other > OTHER_CPU_SHARE_MAX:
        problems.append(f"other processes took {100 * other:.0f} % of the CPUs while it ran")
    if peak_tflops and tflops < IMPLAUSIBLE_FRACTION_OF_PEAK * peak_tflops:
        problems.append(f"implausible: {1e3 * tflops:.3g} GFLOPS is {100 * tflops / peak_tflops:.2g} % of this "
                        f"CPU's peak estimate ({1e3 * peak_tflops:.3g} GFLOPS)")
    return problems


def numpy_matmul_baseline(n: int, dtype: str = "float32", peak_tflops: float | None = None,
                          min_time_s: float = MIN_TIME_S, timeout_s: float = 600) -> dict[str, Any]:
    """Time NumPy's n x n matmul in a clean child process for at least `min_time_s`.

    Returns `tflops` (from the median per-product time), `seconds` (that median), every sample
    (seconds per product), `calls_per_sample`, `measured_s`, the BLAS library NumPy links, which
    OpenBLAS overrides were removed, `host` (the host while the child ran), and `stable` with
    `unstable_reasons` (baseline_problems; `peak_tflops`, when known, lets it spot an implausible rate);
    and what a record keeps of all that: `metrics` (blas_tflops, blas_library, blas_stable,
    blas_unstable_reason) and `timings` (its `timings["blas"]`).
    """
    before = Snapshot.take()
    try:
        completed = subprocess.run(
            [sys.executable, "-c", _CHILD, str(n), dtype, str(min_time_s), str(SAMPLE_MIN_S), str(MIN_SAMPLES)],
            capture_output=True, text=True, timeout=timeout_s, env=clean_blas_env(),
        )
    except subprocess.TimeoutExpired:
        raise MeasurementError(f"the NumPy BLAS baseline (n={n}) ran past its {timeout_s:g} s limit") from None
    host = child_window(before, Snapshot.take())
    if completed.returncode != 0:
        last = (completed.stderr.strip().splitlines() or [f"exit status {completed.returncode}"])[-1]
        raise MeasurementError(f"the NumPy BLAS baseline failed: {last[:300]}")  # the exception's own line
    try:
        result = json.loads(completed.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):  # no output, or a last line that is not its JSON result
        last = (completed.stdout.strip().splitlines() or [""])[-1]
        raise MeasurementError(f"the NumPy BLAS baseline printed no JSON result (last line: {last[:200]!r})") from None
    stats = summarize(result["samples"])
    median = float(stats["median"])  # type: ignore[arg-type]
    tflops = 2 * n**3 / median / 1e12
    problems = baseline_problems(result["samples"], tflops, host, peak_tflops)
    env_removed = [name for name in OPENBLAS_OVERRIDES if name in os.environ]
    return {
        "n": n,
        "dtype": dtype,
        "tflops": tflops,
        "seconds": median,
        "stats": stats,
        "samples": result["samples"],
        "calls_per_sample": result["calls_per_sample"],
        "measured_s": result["measured_s"],
        "min_time_s": min_time_s,
        "library": result["library"],
        "numpy": result["numpy"],
        "env_removed": env_removed,
        "host": host,
        "stable": not problems,
        "unstable_reasons": problems,
        # what a record keeps of it: its metrics, and its `timings["blas"]`
        "metrics": {"blas_tflops": tflops, "blas_library": result["library"], "blas_stable": not problems,
                    "blas_unstable_reason": "; ".join(problems) or None},
        "timings": {"median_s": median, "samples_s": result["samples"], "env_removed": env_removed,
                    "calls_per_sample": result["calls_per_sample"], "measured_s": result["measured_s"],
                    "min_time_s": min_time_s, "host": host},
    }
