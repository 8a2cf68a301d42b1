"""Which input pipeline feeds Keras on JAX: the CNN-MNIST model's steady samples/s per pipeline.

Three sides, each a fresh Python process (Keras fixes its backend per process), in interleaved rounds
(A, B, C, A, B, C, ...) so that the host's drift hits all alike:

- tensorflow + tf.data: today's TensorFlow path (colabkit.training.setup.tf_dataset);
- jax + tf.data: the same tf.data pipeline feeding Keras's JAX backend (what the JAX path did before);
- jax + numpy: colabkit.training.batches.ArrayBatches, a keras.utils.PyDataset over the arrays.

Every side trains the notebook's own model (its build function, loaded from the notebook) on the
offline MNIST digits, shuffled, with colabkit's fit (one input iterator for all epochs) and
TrainingTimer; the figure is TrainingTimer's steady samples/s (epochs after the first). Also printed:
the worst first step of a steady epoch over the median step (a pipeline restart between epochs would
show as a first step many times the others) and whether TensorFlow was imported in the process.
Medians over rounds, with the range; ratios to jax + tf.data. On a shared 2-core host rounds vary by
30 % and more: read the spread before the ratio.

Then the pipelines alone, with no training (the part of a step they cost): milliseconds per batch to
produce one shuffled pass of the same digits, tf.data (as_numpy_iterator) against ArrayBatches, in
interleaved passes in one process; beside it the steady step time of the JAX runs above.
Run: python benchmarks/input_pipeline.py [--rounds 5] [--epochs 6] [--pipelines-only]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import textwrap
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent
SIDES = (("tensorflow", "tf.data"), ("jax", "tf.data"), ("jax", "numpy"))

_CHILD = textwrap.dedent("""
    import json, os, statistics, sys, time
    backend, pipeline, samples, batch, epochs = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
    os.environ["KERAS_BACKEND"] = backend
    sys.path.insert(0, {benchmarks!r})
    if pipeline == "tf.data":
        import tensorflow  # before setup_device, which otherwise keeps TensorFlow out of a JAX process
    import colabkit
    dev = colabkit.setup_device("cpu", backend=backend)
    import keras
    from _notebook_code import notebook_function
    from colabkit.training.fit import fit
    from colabkit.training.setup import array_batches, tf_dataset
    from colabkit.training.timer import TrainingTimer

    mnist = colabkit.load_mnist(data_source="offline", one_hot=True)
    x, y = mnist.x_train[:samples], mnist.y_train[:samples]
    keras.utils.set_random_seed(0)
    model = notebook_function("cnn_mnist", "build_cnn", keras=keras)()
    model.compile(optimizer=keras.optimizers.Adam(0.001), loss="categorical_crossentropy", metrics=["accuracy"])
    make = tf_dataset if pipeline == "tf.data" else array_batches
    data = make(x, y, batch_size=batch, shuffle=True, seed=0)
    timer = TrainingTimer(global_batch_size=batch, dataset_size=len(x))
    fit(model, data, epochs=epochs, callbacks=[timer], verbose=0)
    steady = timer.steady_epochs
    stall = max(epoch.step_s[0] / statistics.median(epoch.step_s) for epoch in steady)
    print(json.dumps({{"samples_per_s": timer.metrics()["samples_per_s"], "first_step_ratio": stall,
                      "samples": [epoch.samples for epoch in timer.epochs],
                      "tensorflow_imported": "tensorflow" in sys.modules}}))
""").format(benchmarks=str(BENCHMARKS))


def run_side(backend: str, pipeline: str, samples: int, batch: int, epochs: int) -> dict:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": str(BENCHMARKS.parent)}
    completed = subprocess.run([sys.executable, "-c", _CHILD, backend, pipeline, str(samples), str(batch), str(epochs)],
                               capture_output=True, text=True, env=env, timeout=900)
    if completed.returncode != 0:
        raise RuntimeError(f"{backend} + {pipeline} failed:\n{completed.stderr[-3000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


_PIPELINES_ALONE = textwrap.dedent("""
    import json, statistics, sys, time
    import tensorflow  # the tf.data side needs it
    import colabkit
    from colabkit.training.setup import array_batches, tf_dataset

    samples, batch, passes = map(int, sys.argv[1:4])
    mnist = colabkit.load_mnist(data_source="offline", one_hot=True)
    x, y = mnist.x_train[:samples], mnist.y_train[:samples]
    numpy_batches = array_batches(x, y, batch_size=batch, shuffle=True, seed=0).endless()
    tf_batches = iter(tf_dataset(x, y, batch_size=batch, shuffle=True, seed=0).repeat().as_numpy_iterator())
    per_pass = numpy_batches.batches_per_pass
    times = {"tf.data": [], "numpy": []}
    for index in range(passes):
        start = time.perf_counter()
        for _ in range(per_pass):
            next(tf_batches)
        times["tf.data"].append((time.perf_counter() - start) / per_pass)
        start = time.perf_counter()
        for step in range(index * per_pass, (index + 1) * per_pass):
            numpy_batches[step]
        times["numpy"].append((time.perf_counter() - start) / per_pass)
    print(json.dumps({side: statistics.median(values[1:]) * 1e3 for side, values in times.items()}))
""")


def pipelines_alone(samples: int, batch: int, passes: int = 21) -> dict:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": str(BENCHMARKS.parent)}
    completed = subprocess.run([sys.executable, "-c", _PIPELINES_ALONE, str(samples), str(batch), str(passes)],
                               capture_output=True, text=True, env=env, timeout=900)
    if completed.returncode != 0:
        raise RuntimeError(f"pipelines alone failed:\n{completed.stderr[-3000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--samples", type=int, default=4000)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--pipelines-only", action="store_true", help="only the pipelines alone, no training")
    args = parser.parse_args()
    if args.pipelines_only:
        alone = pipelines_alone(args.samples, args.batch_size)
        print(f"pipelines alone, one shuffled pass of {args.samples} digits in batches of {args.batch_size}, median "
              f"of 20 passes: tf.data {alone['tf.data']:.3f} ms per batch, ArrayBatches {alone['numpy']:.3f} ms")
        return 0
    print(f"CNN-MNIST model on the CPU: {args.samples} offline digits x {args.epochs} epochs, batch {args.batch_size}, "
          f"{args.rounds} interleaved rounds")
    results: dict[tuple[str, str], list[dict]] = {side: [] for side in SIDES}
    for round_index in range(args.rounds):
        for side in SIDES:
            result = run_side(*side, args.samples, args.batch_size, args.epochs)
            results[side].append(result)
            print(f"round {round_index + 1}: {side[0]:>10} + {side[1]:<8} {result['samples_per_s']:8.0f} samples/s, "
                  f"worst first step {result['first_step_ratio']:.1f}x the median step, "
                  f"TensorFlow imported: {result['tensorflow_imported']}", flush=True)
    reference = statistics.median(r["samples_per_s"] for r in results[("jax", "tf.data")])
    print(f"\n{'side':<22}{'median samples/s':>18}{'range':>20}{'/ jax+tf.data':>15}{'first step':>12}"
          f"{'TF loaded':>11}")
    for side, rounds in results.items():
        rates = [r["samples_per_s"] for r in rounds]
        median = statistics.median(rates)
        print(f"{side[0] + ' + ' + side[1]:<22}{median:>18.0f}{f'{min(rates):.0f}-{max(rates):.0f}':>20}"
              f"{median / reference:>15.2f}{max(r['first_step_ratio'] for r in rounds):>11.1f}x"
              f"{str(any(r['tensorflow_imported'] for r in rounds)):>11}")
    paired = [numpy["samples_per_s"] / tf_data["samples_per_s"]
              for numpy, tf_data in zip(results[("jax", "numpy")], results[("jax", "tf.data")])]
    print(f"jax + numpy / jax + tf.data, round by round: {', '.join(f'{ratio:.2f}' for ratio in paired)} "
          f"(median {statistics.median(paired):.2f})")
    alone = pipelines_alone(args.samples, args.batch_size)
    step_ms = args.batch_size / statistics.median(r["samples_per_s"] for r in results[("jax", "numpy")]) * 1e3
    print(f"pipelines alone: tf.data {alone['tf.data']:.3f} ms per batch, ArrayBatches {alone['numpy']:.3f} ms; "
          f"a steady JAX training step here: {step_ms:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
