"""Do the notebooks' headline figures agree with an independent measurement of the same work?

Four pairs, each run as interleaved rounds (A, B, A, B, ...) so that the host's drift hits both
sides alike; each side's figure is the median over its rounds, printed with every round's value
and the spread, and the ratio notebook / independent is the verdict (target 0.95-1.05):

- matmul: the notebook's warm TFLOPS (papermill, the production path) vs a plain TensorFlow script
  in a fresh process: the same chained n x n product in a tf.function, the clock around each call
  with the result copied to the host, TFLOPS = count x 2 n^3 / median seconds;
- cnn_mnist, dblstm_har, timeseries_rnn: the notebook's steady samples/s (TrainingTimer's figure,
  training time of the epochs after the first) vs a bare Keras `fit` of the notebook's own model
  (its build function, loaded from the notebook) on data of the same shapes and sizes, in a fresh
  process, timed from outside: after a warm-up fit, perf_counter around a fit of 1 epoch and a fit
  of `epochs` epochs; steady epoch time = their difference / (epochs - 1), so that fit's own set-up
  per call cancels (it is not training, and the notebook's figure leaves it out too);
  samples/s = samples per epoch / steady epoch time.

Every round is sized for >= ~10 s of steady work on a 2-core CPU. On a shared, noisy machine a
single pair can differ by 30-50 % from noise alone (docs/like-for-like.md):
read the spread before the ratio. Run: python benchmarks/agreement.py [--pairs cnn dblstm] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable
from pathlib import Path

from _notebook_code import run_notebook

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
BENCHMARKS = Path(__file__).resolve().parent
LOW, HIGH = 0.95, 1.05

# Sizes per pair: the notebook's parameters. The independent side reads the same values.
MATMUL = {"n": 2048, "count": 10, "repeats": 10, "warmup": 1, "dtype": "float32", "jit_compile": False}
CNN = {"batch_size": 256, "epochs": 4, "train_samples": 4000, "test_samples": 500, "data_source": "offline",
       "target_accuracy": 0.0}
DBLSTM = {"batch_size": 64, "bilstm_layers": 2, "units": 32, "head_units": 16, "epochs": 4, "repeats": 1,
          "train_samples": 1024, "test_samples": 64, "data_source": "offline"}
TIMESERIES = {"batch_size": 64, "units": 32, "sequence_length": 168, "epochs": 5, "steps_per_epoch": 60,
              "warmup_steps": 24, "data_source": "offline", "max_hours": 8760, "plot_hours": 48}

# The independent side: a fresh Python process with nothing of colabkit's timing or pipelines.
_PRELUDE = """
import json, os, statistics, sys, time
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, {benchmarks!r})
import numpy as np
import keras
import tensorflow as tf
P = json.loads({params!r})

def epoch_rates(model, samples_per_epoch, epochs, **fit_args):
    # A warm-up fit (tracing), then two fits timed from outside, of 1 and of `epochs` epochs; the
    # device finishes inside each clock. Their difference is epochs - 1 steady epochs: each fit call's
    # own set-up (data adapter, iterator, callbacks: ~0.1-0.2 s, a third of a short epoch) cancels.
    model.fit(epochs=1, verbose=0, **fit_args)

    def timed_fit(count):
        start = time.perf_counter()
        model.fit(epochs=count, verbose=0, **fit_args)
        keras.ops.convert_to_numpy(model.optimizer.iterations)
        return time.perf_counter() - start

    one, many = timed_fit(1), timed_fit(epochs)
    epoch_s = (many - one) / (epochs - 1)
    return samples_per_epoch / epoch_s, [epoch_s]
"""

_MATMUL_SCRIPT = """
n, count, repeats = P["n"], P["count"], P["repeats"]
x = tf.random.stateless_uniform((n, n), seed=(1, 0))
y = tf.random.stateless_uniform((n, n), seed=(2, 0), maxval=2.0 / n)

@tf.function(jit_compile=P["jit_compile"])
def chained(x, y):
    # an explicit while_loop: autograph cannot read the source of a script given with -c
    _, product = tf.while_loop(lambda step, _: step < count, lambda step, p: (step + 1, tf.matmul(p, y)),
                               (tf.constant(0), x))
    return tf.reduce_sum(product)

float(chained(x, y))  # trace and warm up
times = []
for _ in range(repeats):
    start = time.perf_counter()
    float(chained(x, y))  # the result on the host: the work is done
    times.append(time.perf_counter() - start)
print(json.dumps({"value": 2 * n**3 * count / statistics.median(times) / 1e12, "times": times}))
"""

_CNN_SCRIPT = """
from _notebook_code import notebook_function
build_cnn = notebook_function("cnn_mnist", "build_cnn", keras=keras)
rng = np.random.default_rng(0)
x = rng.random((P["train_samples"], 28, 28, 1), dtype=np.float32)
y = keras.utils.to_categorical(rng.integers(0, 10, P["train_samples"]), 10)
keras.utils.set_random_seed(0)
model = build_cnn()
model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="categorical_crossentropy", metrics=["accuracy"])
rate, times = epoch_rates(model, len(x), P["epochs"], x=x, y=y, batch_size=P["batch_size"], shuffle=True)
print(json.dumps({"value": rate, "times": times}))
"""

_DBLSTM_SCRIPT = """
from _notebook_code import notebook_function
build_dblstm = notebook_function("dblstm_har", "build_dblstm", keras=keras)
rng = np.random.default_rng(0)
x = rng.normal(size=(P["train_samples"], 128, 9)).astype("float32")
y = keras.utils.to_categorical(rng.integers(0, 6, P["train_samples"]), 6)
keras.utils.set_random_seed(0)
model = build_dblstm(P["bilstm_layers"], P["units"], P["head_units"], 128, 9, 6)
model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="categorical_crossentropy",
              metrics=["accuracy", keras.metrics.Precision(), keras.metrics.Recall()])
rate, times = epoch_rates(model, len(x), P["epochs"], x=x, y=y, batch_size=P["batch_size"], shuffle=True)
print(json.dumps({"value": rate, "times": times}))
"""

_TIMESERIES_SCRIPT = """
# The notebook's GRU and loss on random windows of the offline weather substitute's shape (9 inputs,
# 3 targets): steps_per_epoch x batch windows of sequence_length hours per epoch, as the notebook trains,
# from an endless pipeline of full batches. Static batch shapes, as the notebook's (and TPUs') are: a
# batch dimension of None makes TensorFlow's graph of this small GRU up to ~30 % slower on a CPU.
from _notebook_code import notebook_function
from colabkit.training.timeseries import WarmupMSE
units = P["units"]
build_gru = notebook_function("timeseries_rnn", "build_gru", keras=keras, units=units)
samples = P["steps_per_epoch"] * P["batch_size"]
rng = np.random.default_rng(0)
x = rng.random((samples, P["sequence_length"], 9), dtype=np.float32)
y = rng.random((samples, P["sequence_length"], 3), dtype=np.float32)
keras.utils.set_random_seed(0)
model = build_gru(9, 3)
model.compile(optimizer=keras.optimizers.RMSprop(1e-3), loss=WarmupMSE(P["warmup_steps"]))
data = (tf.data.Dataset.from_tensor_slices((x, y)).repeat().shuffle(samples, seed=0)
        .batch(P["batch_size"], drop_remainder=True).prefetch(tf.data.AUTOTUNE))
rate, times = epoch_rates(model, samples, P["epochs"], x=data, steps_per_epoch=P["steps_per_epoch"])
print(json.dumps({"value": rate, "times": times}))
"""


def independent(script: str, params: dict) -> tuple[float, list[float]]:
    """Run a plain script in a fresh process; its last stdout line is {"value", "times"}."""
    source = textwrap.dedent(_PRELUDE).format(benchmarks=str(BENCHMARKS), params=json.dumps(params)) + script
    completed = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, check=False,
                               env={**os.environ, "PYTHONPATH": os.pathsep.join([str(BENCHMARKS.parent),
                                                                                  os.environ.get("PYTHONPATH", "")])})
    if completed.returncode:
        raise RuntimeError(f"independent script failed:\n{completed.stderr[-2000:]}")
    result = json.loads(completed.stdout.strip().splitlines()[-1])
    return float(result["value"]), [float(t) for t in result["times"]]


def notebook_figure(notebook: str, metric: str, params: dict, workdir: Path, label: str) -> tuple[float, list[float]]:
    """Run the notebook through papermill on the CPU; its headline metric and its steady epochs' times."""
    record = run_notebook(notebook, workdir, label, device="cpu", **params)
    epochs = record["timings"].get("epochs") or [e for r in record["timings"].get("repeats", []) for e in r["epochs"]]
    steady = [e["train_s"] for e in epochs[1:]] if epochs else []
    return float(record["metrics"][metric]), steady


PAIRS: dict[str, tuple[str, Callable[[Path, str], tuple[float, list[float]]], Callable[[], tuple[float, list[float]]]]] = {
    "matmul": ("warm TFLOPS",
               lambda w, l: notebook_figure("matmul_tflops", "tflops_warm", {**MATMUL, "blas_baseline": False}, w, l),
               lambda: independent(_MATMUL_SCRIPT, MATMUL)),
    "cnn": ("steady samples/s",
            lambda w, l: notebook_figure("cnn_mnist", "samples_per_s", CNN, w, l),
            lambda: independent(_CNN_SCRIPT, CNN)),
    "dblstm": ("steady samples/s",
               lambda w, l: notebook_figure("dblstm_har", "samples_per_s", DBLSTM, w, l),
               lambda: independent(_DBLSTM_SCRIPT, DBLSTM)),
    "timeseries": ("steady windows/s",
                   lambda w, l: notebook_figure("timeseries_rnn", "samples_per_s", TIMESERIES, w, l),
                   lambda: independent(_TIMESERIES_SCRIPT, TIMESERIES)),
}


def spread(values: list[float]) -> str:
    return f"{min(values):.4g}-{max(values):.4g}" if values else "n/a"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", nargs="+", choices=list(PAIRS), default=list(PAIRS))
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds per pair (>= 5 for a verdict)")
    parser.add_argument("--small", action="store_true",
                        help="smaller work per round (for a loaded machine, where it still lasts >= 10 s)")
    args = parser.parse_args()
    if args.small:
        MATMUL.update(n=1024)
        CNN.update(train_samples=2000, epochs=3)
        DBLSTM.update(train_samples=512, epochs=3)
        TIMESERIES.update(steps_per_epoch=30, epochs=3)
    verdicts = {}
    with tempfile.TemporaryDirectory() as workdir:
        for name in args.pairs:
            what, ours, theirs = PAIRS[name]
            notebook_values, independent_values, notebook_epochs, independent_epochs = [], [], [], []
            for round_ in range(args.rounds):
                value, epochs = ours(Path(workdir), f"{name}-{round_}")
                notebook_values.append(value)
                notebook_epochs += epochs
                value, epochs = theirs()
                independent_values.append(value)
                independent_epochs += epochs
                print(f"  {name} round {round_ + 1}: notebook {notebook_values[-1]:.4g}, "
                      f"independent {independent_values[-1]:.4g}", flush=True)
            a, b = statistics.median(notebook_values), statistics.median(independent_values)
            ratio = a / b
            verdicts[name] = ratio
            print(f"{name}: {what}, median of {args.rounds} interleaved rounds")
            print(f"  notebook     {a:10.4g}  (rounds {spread(notebook_values)}; steady epochs/calls "
                  f"{spread(notebook_epochs)} s)")
            print(f"  independent  {b:10.4g}  (rounds {spread(independent_values)}; steady epochs/calls "
                  f"{spread(independent_epochs)} s)")
            print(f"  ratio {ratio:.3f} {'within' if LOW <= ratio <= HIGH else 'OUTSIDE'} {LOW}-{HIGH}", flush=True)
    print("summary: " + ", ".join(f"{name} {ratio:.3f}" for name, ratio in verdicts.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
