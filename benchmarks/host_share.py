"""The breakdown's host share at steps_per_execution 1 against 50, on a tiny Keras model on the CPU.

One host round trip (logs, callbacks) per step against one per 50 steps: the passes of
colabkit.training.breakdown should see the host's share of a step shrink. Each round trains the
same tiny model (Dense 8-4-1, batch 32, 3,200 samples, 3 epochs) with each setting, the settings
alternating, then breaks the run down; the verdict takes the medians over the rounds. Target: the
host share at 1 over 0.4, and over twice the share at 50 plus 0.1. The passes time real work in
windows of a quarter second: a busy host (another process on a core) moves them, which is why this
is a benchmark, run on a quiet host, and not a test.
"""

from __future__ import annotations

import argparse
import os
import statistics

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from colabkit.training.breakdown import measure_breakdown  # noqa: E402
from colabkit.training.fit import fit  # noqa: E402
from colabkit.training.setup import make_dataset  # noqa: E402
from colabkit.training.timer import TrainingTimer  # noqa: E402

SAMPLES, BATCH = 3200, 32  # 100 batches a pass: 2 executions of 50


class CpuSetup:
    """The notebook's DeviceSetup as the breakdown reads it: one CPU, no multi-worker, no known bandwidth."""

    kind = "cpu"
    description: dict = {}

    def peak_bandwidth(self):
        return None


def host_share(steps_per_execution: int, x: np.ndarray, y: np.ndarray) -> float:
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4, activation="relu"), keras.layers.Dense(1)])
    model.compile("adam", "mse", steps_per_execution=steps_per_execution)
    data = make_dataset(x, y, batch_size=BATCH, shuffle=True)
    timer = TrainingTimer(global_batch_size=BATCH, dataset_size=SAMPLES)
    fit(model, data, epochs=3, callbacks=[timer], verbose=0)
    return measure_breakdown(model, data, timer.metrics(), CpuSetup(), target_s=0.25).metrics["host_share"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    x, y = rng.random((SAMPLES, 8), dtype="float32"), rng.random((SAMPLES, 1), dtype="float32")
    shares: dict[int, list[float]] = {1: [], 50: []}
    for _ in range(args.rounds):
        for spe in shares:
            shares[spe].append(host_share(spe, x, y))
    one, fifty = statistics.median(shares[1]), statistics.median(shares[50])
    for spe, found in shares.items():
        print(f"steps_per_execution {spe:2d}: host share median {statistics.median(found):.2f} "
              f"(rounds: {', '.join(f'{share:.2f}' for share in found)})")
    meets = one > 0.4 and one > 2 * fifty + 0.1
    print(f"host share at 1 {one:.2f} against {fifty:.2f} at 50: {'meets' if meets else 'MISSES'} the target "
          "(over 0.4, and over twice the share at 50 plus 0.1)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
