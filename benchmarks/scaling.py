"""Multi-worker scaling of the CNN-MNIST notebook: throughput with 1 and 2 local workers.

Both runs go through the same path (MultiWorkerMirroredStrategy over local worker processes,
colabkit's strategy.run loop), each replica with the same per-replica batch; the throughput of a
run is its chief's steady-state samples/s (TrainingTimer, first epoch excluded). Scaling
efficiency = throughput with R workers / (R x throughput with 1). On a machine with fewer cores than
workers x TensorFlow's threads the workers compete for the same cores and the figure is low: the
point here is that it is computed right; on real machines the same command gives the real number.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from colabkit.records.record import read_record
from colabkit.sweep.runners.multiworker import run_workers

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "cnn_mnist.ipynb"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def throughput(workers: int, workdir: Path, args: argparse.Namespace) -> dict:
    folder = workdir / f"w{workers}"
    parameters = dict(batch_size=args.batch_size, epochs=args.epochs, train_samples=args.train_samples,
                      test_samples=256, data_source="offline", results_path=str(folder / "record.json"))
    run_workers(NOTEBOOK, workers, parameters, folder / "chief.ipynb", folder / "scratch", cwd=Path.cwd())
    return read_record(folder / "record.json")["metrics"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64, help="per replica")
    parser.add_argument("--train-samples", type=int, default=4000)
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()
    print(f"CNN-MNIST, {args.train_samples} samples x {args.epochs} epochs, {args.batch_size} per replica, "
          f"{os.cpu_count()} cores on this machine")
    with tempfile.TemporaryDirectory() as workdir:
        single = throughput(1, Path(workdir), args)
        several = throughput(args.workers, Path(workdir), args)
    efficiency = several["samples_per_s"] / (args.workers * single["samples_per_s"])
    for label, metrics in (("1 worker", single), (f"{args.workers} workers", several)):
        print(f"{label:<10} {metrics['samples_per_s']:9.0f} samples/s total, "
              f"{metrics['samples_per_s_per_replica']:9.0f} per replica (global batch {metrics['global_batch_size']})")
    print(f"scaling efficiency with {args.workers} workers: {efficiency:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
