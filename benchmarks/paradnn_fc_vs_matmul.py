"""ParaDnn's largest smoke FC model on the CPU against the matmul notebook's GFLOPS, same run, float32.

Runs the production path: notebooks/paradnn.ipynb (the FC family, the largest model of the `smoke`
preset: 4 x Dense(1024) on 1024 inputs, 128 outputs) and notebooks/matmul_tflops.ipynb (an n x n
float32 product on TensorFlow's CPU default path), both through papermill, one after the other.
An FC training step is matrix products plus what products do not count (activations, the loss, the
RMSProp update, the host loop), so its achieved model GFLOPS is at most the matmul GFLOPS; a
compute-bound FC (large batch) should come close, a memory-bound one (small batch) sits lower, as
the roofline printed beside each says. Prints the ratio per batch size.

Target: ratio >= 0.5 at the largest batch (compute-bound), reported, not asserted: on a shared
2-core VM the figures move with the load, so read them with the load average printed beside them.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from _notebook_code import run_notebook

TARGET = 0.5
LARGEST_SMOKE_FC = dict(family="fc", layers=4, nodes=1024, input_size=1024, output_size=128)


def fc_metrics(batch: int, steps: int, epochs: int, workdir: Path) -> dict:
    record = run_notebook("paradnn", workdir, f"fc-{batch}", device="cpu", batch_size=batch, steps=steps,
                          epochs=epochs, steps_per_execution=1, mixed_precision="none", **LARGEST_SMOKE_FC)
    return record["metrics"]


def matmul_metrics(n: int, count: int, repeats: int, workdir: Path) -> dict:
    record = run_notebook("matmul_tflops", workdir, "matmul", device="cpu", n=n, count=count, dtype="float32",
                          timed_calls=repeats, warmup=1, jit_compile="auto", blas_baseline=False)
    return record["metrics"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[32, 256],
                        help="FC batch sizes (32: the smoke preset's; larger: more compute-bound)")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--n", type=int, default=1024, help="matmul size (the FC's layers are 1024 wide)")
    parser.add_argument("--count", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    print(f"ParaDnn FC {LARGEST_SMOKE_FC} float32 on the CPU, {args.epochs - 1} steady epochs of {args.steps} "
          f"steps; matmul {args.n}x{args.n} float32, {args.count} chained products, median of {args.repeats} warm "
          f"calls. Load average before: {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as workdir:
        matmul = matmul_metrics(args.n, args.count, args.repeats, Path(workdir))
        matmul_gflops = matmul["tflops_warm"] * 1e3
        rows = [(batch, fc_metrics(batch, args.steps, args.epochs, Path(workdir))) for batch in args.batch_sizes]
    print(f"matmul: {matmul_gflops:.1f} GFLOPS (warm median)")
    print(f"{'batch':>6}{'FC GFLOPS':>11}{'ratio':>8}{'MFU':>8}{'FLOPs/B':>9}{'bound':>9}{'roof GFLOPS':>13}")
    for batch, metrics in rows:
        gflops = metrics["model_tflops"] * 1e3
        roof = metrics.get("roofline_tflops")
        mfu = metrics.get("mfu")
        print(f"{batch:>6}{gflops:>11.1f}{gflops / matmul_gflops:>8.2f}{mfu if mfu is not None else float('nan'):>8.3f}"
              f"{metrics['arithmetic_intensity']:>9.1f}{str(metrics.get('bound')):>9}"
              f"{roof * 1e3 if roof is not None else float('nan'):>13.1f}")
    print(f"bandwidth used for the roof: {rows[0][1]['peak_bandwidth_gb_s']:.1f} GB/s "
          f"({rows[0][1]['peak_bandwidth_source'][:60]}...)")
    largest = rows[-1][1]["model_tflops"] * 1e3 / matmul_gflops
    verdict = "meets" if largest >= TARGET else "MISSES"
    print(f"batch {rows[-1][0]}: FC reaches {largest:.2f} of the matmul GFLOPS, {verdict} the target {TARGET}; "
          f"load average after: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
