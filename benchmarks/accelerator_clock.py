"""colabkit's clocks on a GPU, against the device's own throughput measured in the same run.

An accelerator runs asynchronously: a clock stopped when the host call returns measures dispatch,
not work. This benchmark checks, on each Keras backend that sees a GPU here (JAX, PyTorch), that
colabkit's clocks wait for the device:

- matmul: `colabkit.measure` (one synchronised call per sample) against a pipelined baseline
  (`--chain` products dispatched back to back, one wait at the end), in interleaved rounds
  (colabkit.timing.pipelined, which `python -m colabkit gpu-check` uses too). Ratio = colabkit TFLOPS /
  pipelined TFLOPS: near 1 for large n; far above 1 would mean the clock stops before the work.
  The unsynchronised figure shows what a naive timer would report; % of peak is against
  `colabkit.peaks` for the precision the backend actually uses.
- training: `TrainingTimer`'s steady samples/s against the wall clock of the same fit (synchronised
  at its end), on the CNN-MNIST notebook's own model and synthetic MNIST-shaped data.

Each backend runs in its own process (Keras fixes its backend per process). On a machine with no
GPU it says so and exits 0: there is nothing to check.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from _notebook_code import notebook_function

BENCHMARKS = Path(__file__).resolve().parent
REPO = BENCHMARKS.parent
RESULT_PREFIX = "RESULT "


def matmul_rows(backend: str, name: str, n: int, repeats: int, chain: int, on_gpu: bool, rounds: int) -> list[dict]:
    """colabkit.measure against the pipelined and naive clocks (colabkit.timing.pipelined), per dtype."""
    from colabkit.device.peaks import gpu_peak
    from colabkit.timing.pipelined import compare_clock, matmul_workload

    tf32_capable = on_gpu and _compute_capability(backend) >= (8, 0)
    rows = []
    for dtype in ("bfloat16", "float32"):
        workload = matmul_workload(backend, n, dtype, on_gpu=on_gpu, tf32_capable=tf32_capable)
        clocks = compare_clock(workload, repeats=repeats, chain=chain, rounds=rounds, warmup=2)
        peak = gpu_peak(name, clocks.precision, 1)
        rows.append({**clocks.as_dict(), "percent_of_peak": 100 * clocks.tflops / peak.tflops if peak else None})
    return rows


def _compute_capability(backend: str) -> tuple[int, ...]:
    if backend == "jax":
        import jax

        return tuple(int(part) for part in str(getattr(jax.devices()[0], "compute_capability", "0")).split("."))
    import torch

    return tuple(torch.cuda.get_device_capability(0)) if torch.cuda.is_available() else (0,)


def training_row(epochs: int, batch_size: int, samples: int) -> dict:
    import keras

    from colabkit.training.timer import TrainingTimer

    build_cnn = notebook_function("cnn_mnist", "build_cnn", keras=keras)
    rng = np.random.default_rng(0)
    x = rng.random((samples, 28, 28, 1), dtype=np.float32)
    y = rng.integers(0, 10, samples)
    model = build_cnn()
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    model.fit(x, y, batch_size=batch_size, epochs=1, verbose=0)  # compile outside every clock

    def wall_clock_fit(epochs: int, callbacks: list) -> float:
        start = time.perf_counter()
        model.fit(x, y, batch_size=batch_size, epochs=epochs, verbose=0, callbacks=callbacks)
        keras.ops.convert_to_numpy(model.optimizer.iterations)  # this clock waits for the device too
        return time.perf_counter() - start

    # The timer reports epochs 2.. of its fit. The wall-clock baseline for those epochs is the
    # difference between that fit (1 + epochs epochs) and a one-epoch fit: per-fit set-up cancels.
    timer = TrainingTimer(batch_size)
    long_s = wall_clock_fit(1 + epochs, [timer])
    short_s = wall_clock_fit(1, [])
    steps = -(-samples // batch_size)
    metrics = timer.metrics()
    wall_s = (long_s - short_s) / epochs
    return {"timer_samples_per_s": metrics["samples_per_s"],
            "wall_samples_per_s": steps * batch_size / wall_s,
            "step_time_steady_ms": metrics["step_time_steady_ms"], "batch_size": batch_size}


def child(backend: str, args: argparse.Namespace) -> int:
    import colabkit
    from colabkit.errors import DeviceNotFoundError

    try:
        setup = colabkit.setup_device(args.device, backend=backend)
    except DeviceNotFoundError as error:
        print(RESULT_PREFIX + json.dumps({"backend": backend, "skipped": str(error)}))
        return 0
    name = setup.description["name"]
    result = {"backend": backend, "device": name, "description": setup.description,
              "matmul": matmul_rows(backend, name, args.n, args.repeats, args.chain, args.device == "gpu", args.rounds),
              "training": training_row(args.epochs, args.batch_size, args.samples)}
    print(RESULT_PREFIX + json.dumps(result, default=str))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=8192)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--chain", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3,
                        help="interleaved rounds of colabkit's and the pipelined clock")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--samples", type=int, default=60000)
    parser.add_argument("--device", choices=("gpu", "cpu"), default="gpu",
                        help="cpu only tries the benchmark's logic on a machine without a GPU")
    parser.add_argument("--child", choices=("jax", "torch"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child, args)

    backends = [name for name in ("jax", "torch") if importlib.util.find_spec(name)]
    if not backends:
        print("neither JAX nor PyTorch is installed: nothing to check")
        return 0
    print(f"matmul {args.n}x{args.n}: colabkit.measure (median of {args.repeats} synchronised calls) vs "
          f"pipelined baseline ({args.chain} products, one wait); CNN-MNIST fit, batch {args.batch_size}, "
          f"{args.samples} synthetic samples, {args.epochs} steady epochs")
    print(f"{'backend':<8}{'dtype':<10}{'precision':<10}{'colabkit TFLOPS':>16}{'pipelined':>11}{'ratio':>7}"
          f"{'unsynced':>10}{'% peak':>8}")
    status = 0
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
           "TF_CPP_MIN_LOG_LEVEL": "3"}
    for backend in backends:
        completed = subprocess.run([sys.executable, __file__, "--child", backend, *sys.argv[1:]],
                                   capture_output=True, text=True, env=env)
        lines = [line for line in completed.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
        if completed.returncode or not lines:
            print(f"{backend:<8}failed (exit {completed.returncode}):\n{completed.stderr[-3000:]}")
            status = 1
            continue
        result = json.loads(lines[-1][len(RESULT_PREFIX):])
        if "skipped" in result:
            print(f"{backend:<8}skipped: {result['skipped']}")
            continue
        for row in result["matmul"]:
            peak = f"{row['percent_of_peak']:.0f}" if row["percent_of_peak"] is not None else "n/a"
            print(f"{backend:<8}{row['dtype']:<10}{row['precision']:<10}{row['tflops']:>16.1f}"
                  f"{row['pipelined_tflops']:>11.1f}{row['tflops'] / row['pipelined_tflops']:>7.2f}"
                  f"{row['unsynced_tflops']:>10.0f}{peak:>8}")
        training = result["training"]
        print(f"{backend:<8}training: TrainingTimer {training['timer_samples_per_s']:,.0f} samples/s, wall clock "
              f"{training['wall_samples_per_s']:,.0f} samples/s, ratio "
              f"{training['timer_samples_per_s'] / training['wall_samples_per_s']:.2f} "
              f"(steady step {training['step_time_steady_ms']:.2f} ms) on {result['device']}")
    return status


if __name__ == "__main__":
    sys.exit(main())
