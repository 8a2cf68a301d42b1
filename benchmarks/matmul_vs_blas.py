"""Warm TF matmul GFLOPS vs NumPy BLAS GFLOPS on this machine, measured in the same run.

Runs the production path: notebooks/matmul_tflops.ipynb through papermill on the CPU at
n=2048 float32, once with TF's oneDNN graph path (the notebook's CPU default) and once with XLA.
The notebook times NumPy's BLAS on the same n in a clean child process (OPENBLAS_CORETYPE and
OPENBLAS_L2_SIZE removed), so each ratio is against a baseline from the same run.
Target: ratio >= 0.9 for the default path.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from _notebook_code import run_notebook

from colabkit.timing.baseline import OPENBLAS_OVERRIDES

TARGET = 0.9


def run(n: int, count: int, repeats: int, jit_compile: bool, workdir: Path) -> dict:
    record = run_notebook("matmul_tflops", workdir, f"jit-{jit_compile}", device="cpu", n=n, count=count,
                          dtype="float32", timed_calls=repeats, warmup=1, jit_compile=jit_compile)
    return record["metrics"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2048)
    parser.add_argument("--count", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    for name in OPENBLAS_OVERRIDES:
        os.environ.pop(name, None)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    print(f"matmul {args.n}x{args.n} float32, {args.count} chained products per call, "
          f"median of {args.repeats} warm calls; baseline: NumPy BLAS, same n, same run")
    print(f"{'path':<22}{'TF GFLOPS':>12}{'BLAS GFLOPS':>13}{'ratio':>8}")
    ratios = {}
    with tempfile.TemporaryDirectory() as workdir:
        for jit_compile, label in ((False, "TF graph (oneDNN)"), (True, "TF + XLA")):
            metrics = run(args.n, args.count, args.repeats, jit_compile, Path(workdir))
            ratios[label] = metrics["ratio_to_blas"]
            print(f"{label:<22}{metrics['tflops_warm'] * 1e3:>12.1f}{metrics['blas_tflops'] * 1e3:>13.1f}"
                  f"{metrics['ratio_to_blas']:>8.2f}")
    default = ratios["TF graph (oneDNN)"]
    verdict = "meets" if default >= TARGET else "MISSES"
    print(f"default CPU path ratio {default:.2f} {verdict} the target {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
