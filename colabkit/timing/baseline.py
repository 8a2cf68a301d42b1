"""Same-machine, same-run baselines that a measured figure is divided by.

NumPy's BLAS is timed in a child process whose environment drops OPENBLAS_CORETYPE and
OPENBLAS_L2_SIZE: some hosts set them, OpenBLAS reads them only at load time, and they slow it
down, which would flatter every ratio against it. The child changes nothing in this process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from colabkit.errors import MeasurementError
from colabkit.timing.clock import summarize

OPENBLAS_OVERRIDES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")

_CHILD = r"""
import json, sys, time
import numpy as np
n, repeats, dtype = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
rng = np.random.default_rng(0)
a = rng.random((n, n), dtype=np.float64).astype(dtype)
b = rng.random((n, n), dtype=np.float64).astype(dtype)
np.matmul(a, b)  # warm-up: thread pool start, page faults
samples = []
for _ in range(repeats):
    start = time.perf_counter_ns()
    np.matmul(a, b)
    samples.append((time.perf_counter_ns() - start) / 1e9)
try:
    blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
    library = f"{blas.get('name')} {blas.get('version')}"
except (TypeError, KeyError, AttributeError):  # older NumPy has no dict mode; the name is a nicety
    library = "unknown"
print(json.dumps({"samples": samples, "library": library, "numpy": np.__version__}))
"""


def clean_blas_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """A copy of the environment without the OpenBLAS overrides that slow it down."""
    env = dict(os.environ if environ is None else environ)
    for name in OPENBLAS_OVERRIDES:
        env.pop(name, None)
    return env


def numpy_matmul_baseline(n: int, repeats: int = 5, dtype: str = "float32", timeout_s: float = 600) -> dict[str, Any]:
    """Time NumPy's n x n matmul in a clean child process; return TFLOPS and the timing summary.

    The result holds `tflops` (from the median time), `seconds` (median), the warm samples, the
    BLAS library NumPy links, and which OpenBLAS overrides were removed from the child's env.
    """
    completed = subprocess.run(
        [sys.executable, "-c", _CHILD, str(n), str(repeats), dtype],
        capture_output=True, text=True, timeout=timeout_s, env=clean_blas_env(),
    )
    if completed.returncode != 0:
        raise MeasurementError(f"the NumPy BLAS baseline failed: {completed.stderr.strip()[-500:]}")
    result = json.loads(completed.stdout.strip().splitlines()[-1])
    stats = summarize(result["samples"])
    median = float(stats["median"])  # type: ignore[arg-type]
    return {
        "n": n,
        "dtype": dtype,
        "tflops": 2 * n**3 / median / 1e12,
        "seconds": median,
        "stats": stats,
        "samples": result["samples"],
        "library": result["library"],
        "numpy": result["numpy"],
        "env_removed": [name for name in OPENBLAS_OVERRIDES if name in os.environ],
    }
