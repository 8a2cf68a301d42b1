"""The same notebooks on each installed backend, on this machine's CPU, as ratios to TensorFlow.

1. cnn: steady-state training throughput of the CNN-MNIST notebook on each installed Keras backend.
   The notebook runs once per backend (each in its own kernel: Keras fixes its backend per process)
   with the same data, batch size and epochs; each run's steady-state samples/s comes from its
   TrainingTimer (first epoch excluded).
2. matmul: the matmul notebook's warm TFLOPS on JAX (the chained product in one jax.jit call) against
   the same work on TensorFlow (a tf.while_loop in a tf.function; its CPU default runs TensorFlow's
   oneDNN graph path, no XLA), and against TensorFlow with XLA (jit_compile=True), in interleaved
   rounds (TF, JAX, TF-XLA, TF, JAX, ...): medians over rounds with their range, and the verdict
   JAX / TensorFlow within 10 %. Each round is a fresh papermill kernel with ~10 s of warm calls.
   Then the same comparison call by call: the notebook's own `build_tensorflow_matmul` and `build_jax_matmul`
   (loaded from it) in one process, calls alternating TF, JAX, TF-XLA, ... each timed alone, so that
   a neighbour's load hits the sides of a pair alike; the median of the paired ratios.
On a shared 2-core host single runs vary by 30 % and more: read the ranges before the ratios.
Run: python benchmarks/backends.py [--only cnn|matmul] [--rounds 5]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from _notebook_code import run_notebook

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
MATMUL = {"device": "cpu", "n": 2048, "count": 10, "dtype": "float32", "timed_calls": 10, "warmup": 1,
          "blas_baseline": False}
MATMUL_SIDES = {"tensorflow": {"backend": "tensorflow", "jit_compile": "auto"},
                "jax": {"backend": "jax", "jit_compile": "auto"},
                "tensorflow-xla": {"backend": "tensorflow", "jit_compile": True}}
AGREEMENT = 0.10  # JAX / TensorFlow within 10 %


def cnn(args: argparse.Namespace) -> None:
    backends = ["tensorflow"] + [name for name in ("jax", "torch") if importlib.util.find_spec(name)]
    print(f"CNN-MNIST model on the CPU, {args.train_samples} samples x {args.epochs} epochs, batch "
          f"{args.batch_size}; steady state = median of epochs 2..{args.epochs}")
    print(f"{'backend':<12}{'version':>12}{'samples/s':>12}{'first epoch s':>15}{'ratio to TF':>13}")
    rates = {}
    with tempfile.TemporaryDirectory() as workdir:
        for backend in backends:
            record = run_notebook("cnn_mnist", Path(workdir), backend, device="cpu", backend=backend,
                                  batch_size=args.batch_size, epochs=args.epochs, train_samples=args.train_samples,
                                  test_samples=512, data_source="offline")
            metrics = record["metrics"]
            rates[backend] = metrics["samples_per_s"]
            version = record["software"].get(backend, "?")
            print(f"{backend:<12}{version:>12}{rates[backend]:>12.0f}{metrics['epoch_time_first_s']:>15.2f}"
                  f"{rates[backend] / rates['tensorflow']:>13.2f}")
    missing = sorted({"jax", "torch"} - set(backends))
    if missing:
        print(f"not installed (skipped): {', '.join(missing)}")


def matmul(args: argparse.Namespace) -> None:
    print(f"matmul notebook on the CPU: n={MATMUL['n']} {MATMUL['dtype']}, {MATMUL['count']} chained products, "
          f"{MATMUL['timed_calls']} warm calls per run; {args.rounds} interleaved rounds")
    warm: dict[str, list[float]] = {side: [] for side in MATMUL_SIDES}
    with tempfile.TemporaryDirectory() as workdir:
        for round_index in range(args.rounds):
            for side, parameters in MATMUL_SIDES.items():
                record = run_notebook("matmul_tflops", Path(workdir), f"{side}-{round_index}", **MATMUL, **parameters)
                assert record["device"]["backend"] == parameters["backend"], record["device"]
                warm[side].append(record["metrics"]["tflops_warm"] * 1e3)
                print(f"round {round_index + 1}: {side:<15}{warm[side][-1]:8.1f} GFLOPS warm "
                      f"(XLA {record['metrics']['xla']})", flush=True)
    medians = {side: statistics.median(values) for side, values in warm.items()}
    print(f"\n{'side':<16}{'median GFLOPS':>15}{'range':>18}{'/ TensorFlow':>14}")
    for side, values in warm.items():
        print(f"{side:<16}{medians[side]:>15.1f}{f'{min(values):.0f}-{max(values):.0f}':>18}"
              f"{medians[side] / medians['tensorflow']:>14.2f}")
    paired = [jax / tf for jax, tf in zip(warm["jax"], warm["tensorflow"])]
    ratio = medians["jax"] / medians["tensorflow"]
    verdict = "agree" if abs(ratio - 1) <= AGREEMENT else "DIFFER"
    print(f"JAX / TensorFlow = {ratio:.3f} (paired rounds {min(paired):.2f}-{max(paired):.2f}): {verdict} "
          f"within {AGREEMENT:.0%}")


_PAIRED = textwrap.dedent("""
    import json, os, statistics, sys, time, types
    os.environ["JAX_PLATFORMS"] = "cpu"
    sys.path.insert(0, {benchmarks!r})
    import numpy as np
    import colabkit
    from _notebook_code import notebook_function

    n, count, dtype, pairs = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    tf_dev = colabkit.setup_device("cpu", backend="tensorflow")
    import jax

    jax_dev = types.SimpleNamespace(devices=jax.devices("cpu")[:1], replicas=1, kind="cpu")
    shared = dict(np=np, n=n, count=count, dtype=dtype)

    def notebook_call(name, **namespace):  # the notebook's function, built: its first element is the call
        return notebook_function("matmul_tflops", name, **namespace, **shared)()[0]

    calls = {{
        "tensorflow": notebook_call("build_tensorflow_matmul", dev=tf_dev, jit_compile="auto"),
        "jax": notebook_call("build_jax_matmul", dev=jax_dev),
        "tensorflow-xla": notebook_call("build_tensorflow_matmul", dev=tf_dev, jit_compile=True),
    }}
    for call in calls.values():  # cold and warm-up calls, untimed
        for _ in range(2):
            colabkit.block_until_ready(call())
    seconds = {{side: [] for side in calls}}
    for _ in range(pairs):
        for side, call in calls.items():
            _, elapsed = colabkit.timed(call)
            seconds[side].append(elapsed)
    print(json.dumps(seconds))
""").format(benchmarks=str(Path(__file__).resolve().parent))


def matmul_paired(pairs: int) -> None:
    """The notebook's two implementations call by call in one process (module docstring, part 2)."""
    completed = subprocess.run([sys.executable, "-c", _PAIRED, str(MATMUL["n"]), str(MATMUL["count"]),
                                MATMUL["dtype"], str(pairs)], capture_output=True, text=True, timeout=1800,
                               env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)})
    if completed.returncode != 0:
        raise RuntimeError(f"paired matmul failed:\n{completed.stderr[-3000:]}")
    seconds = json.loads(completed.stdout.strip().splitlines()[-1])
    flops = 2 * MATMUL["n"] ** 3 * MATMUL["count"]
    gflops = {side: [flops / value / 1e9 for value in values] for side, values in seconds.items()}
    print(f"\ncall by call in one process ({pairs} rounds of TF, JAX, TF-XLA; n={MATMUL['n']}, "
          f"count {MATMUL['count']})")
    for side, values in gflops.items():
        print(f"{side:<16}{statistics.median(values):>10.1f} GFLOPS "
              f"(median; range {min(values):.0f}-{max(values):.0f})")
    for other in ("tensorflow", "tensorflow-xla"):
        paired = [jax / reference for jax, reference in zip(gflops["jax"], gflops[other])]
        ratio = statistics.median(paired)
        quartiles = statistics.quantiles(paired, n=4)
        verdict = "agree" if abs(ratio - 1) <= AGREEMENT else "DIFFER"
        print(f"JAX / {other}: median of paired ratios {ratio:.3f} (quartiles {quartiles[0]:.2f}-{quartiles[2]:.2f}): "
              f"{verdict} within {AGREEMENT:.0%}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("cnn", "matmul"))
    parser.add_argument("--train-samples", type=int, default=4096)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5, help="matmul: interleaved rounds")
    parser.add_argument("--pairs", type=int, default=40, help="matmul: call-by-call rounds in one process")
    args = parser.parse_args()
    if args.only in (None, "cnn"):
        cnn(args)
    if args.only in (None, "matmul"):
        if importlib.util.find_spec("jax") is None:
            print("matmul: jax is not installed (skipped)")
        else:
            matmul(args)
            matmul_paired(args.pairs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
