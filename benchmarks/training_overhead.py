"""Training throughput with colabkit's machinery vs a bare `model.fit`, same model, same run.

colabkit's way: the notebook's CNN built inside the device strategy's scope, fed by
colabkit.training.make_dataset, timed by TrainingTimer. The bare way: the same model and data
given to model.fit as NumPy arrays, no strategy, no callback. Both train the same number of
samples; the runs alternate (bare, colabkit, bare, ...) so drift hits both, and each side's
throughput is the median over its runs. Target: ratio >= 0.98.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
from _notebook_code import notebook_function  # noqa: E402

import colabkit  # noqa: E402
from colabkit.training.setup import make_dataset
from colabkit.training.timer import TrainingTimer

TARGET = 0.98


def timed_fit(model, data, epochs: int, **kwargs) -> float:
    start = time.perf_counter()
    model.fit(data, epochs=epochs, verbose=0, **kwargs)
    keras.ops.convert_to_numpy(model.optimizer.iterations)  # the device finished
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=8192)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--epochs", type=int, default=2, help="epochs per timed fit")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    build_cnn = notebook_function("cnn_mnist", "build_cnn", keras=keras)
    rng = np.random.default_rng(0)
    x = rng.random((args.samples, 28, 28, 1), dtype=np.float32)
    y = keras.utils.to_categorical(rng.integers(0, 10, args.samples), 10)
    dev = colabkit.setup_device("cpu")

    def compiled(model):
        model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="categorical_crossentropy", metrics=["accuracy"])
        return model

    bare = compiled(build_cnn())
    with dev.strategy.scope():
        ours = compiled(build_cnn())
    ours_data = make_dataset(x, y, batch_size=args.batch_size, shuffle=True)

    def run_bare() -> float:
        return timed_fit(bare, x, args.epochs, y=y, batch_size=args.batch_size, shuffle=True)

    def run_ours() -> float:
        timer = TrainingTimer(global_batch_size=args.batch_size)
        return timed_fit(ours, ours_data, args.epochs, callbacks=[timer], shuffle=False)  # the pipeline shuffles

    run_bare(), run_ours()  # compile both before timing
    bare_rates, ours_rates = [], []
    for _ in range(args.rounds):
        bare_rates.append(args.epochs * args.samples / run_bare())
        ours_rates.append(args.epochs * args.samples / run_ours())
    bare_rate, ours_rate = statistics.median(bare_rates), statistics.median(ours_rates)
    ratio = ours_rate / bare_rate
    print(f"CNN-MNIST model, {args.samples} samples x {args.epochs} epochs per fit, batch {args.batch_size}, "
          f"median of {args.rounds} alternating rounds, {dev.name}")
    print(f"bare model.fit:             {bare_rate:9.0f} samples/s  (runs: {', '.join(f'{r:.0f}' for r in bare_rates)})")
    print(f"colabkit (strategy+timer):  {ours_rate:9.0f} samples/s  (runs: {', '.join(f'{r:.0f}' for r in ours_rates)})")
    print(f"ratio {ratio:.3f} {'meets' if ratio >= TARGET else 'MISSES'} the target {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
