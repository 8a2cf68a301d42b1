"""Steady-state training throughput of the CNN-MNIST notebook's model on each installed Keras backend.

The notebook itself runs once per backend (each in its own kernel: Keras fixes its backend per
process) on this machine's CPU with the same data, batch size and epochs; each run's steady-state
samples/s comes from its TrainingTimer (first epoch excluded). Ratios are to TensorFlow, measured
in the same invocation.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
from pathlib import Path

from _notebook_code import run_notebook

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train-samples", type=int, default=4096)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--epochs", type=int, default=4)
    args = parser.parse_args()
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
