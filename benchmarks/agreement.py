"""Do the notebooks' headline figures agree with an independent measurement of the same work?

Four pairs, each run as interleaved rounds (A, B, A, B, ...) so that the host's drift hits both
sides alike; each side's figure is the median over its rounds, printed with every round's value
and the spread, and the ratio notebook / independent is the verdict (target 0.95-1.05):

- matmul: the notebook's warm TFLOPS (papermill, the production path) vs a plain TensorFlow
  script: the same chained n x n product in a tf.function, the clock around each call
  with the result copied to the host, TFLOPS = count x 2 n^3 / median seconds;
- cnn_mnist, dblstm_har, timeseries_rnn: the notebook's steady samples/s (TrainingTimer's figure:
  the samples of the epochs after the first over their summed training time) vs a bare Keras `fit`
  of the notebook's own model (its build function, loaded from the notebook) fed by the notebook's
  pipeline written out plainly (shuffled passes repeated, one per epoch, as colabkit's fit feeds
  them), on data of the same shapes and sizes, for the notebook's epochs, and one clock from the end
  of its first epoch to the end of training: samples/s = steady samples / that time, epoch
  boundaries included. The clock stops at Keras's `on_train_end`, the device finished, not when
  `fit` returns: after training, fit tears its input pipeline down, which took 0 to 3.6 s per call
  here, varying call to call (not training either).

Both sides run in a fresh Jupyter kernel under papermill, the notebook's kind of process (Colab's
too); `--plain-process` runs the independent side in a plain Python process instead.

The verdict is the ratio of the two sides' medians; the paired ratios (each round's notebook figure
over the independent one measured right after it) are printed with their range. Every round is sized
for >= ~10 s of steady work on a 2-core CPU: on a shared host some epochs run 30-60 % slower than
others, every step alike, and only long rounds average them out. On a shared, noisy machine a
single pair can differ by 30-50 % from noise alone (docs/like-for-like.md): read the spread before
the ratio. Run: python benchmarks/agreement.py [--pairs cnn dblstm] [--rounds 5]
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

from colabkit.timing.agreement import Agreement, interleave, spread

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
BENCHMARKS = Path(__file__).resolve().parent
LOW, HIGH = 0.95, 1.05

# Sizes per pair: the notebook's parameters. The independent side reads the same values.
MATMUL = {"n": 2048, "count": 10, "timed_calls": 10, "warmup": 1, "dtype": "float32", "jit_compile": False}
CNN = {"batch_size": 256, "epochs": 12, "train_samples": 4000, "test_samples": 500, "data_source": "offline",
       "target_accuracy": 0.0}
DBLSTM = {"batch_size": 64, "bilstm_layers": 2, "units": 32, "head_units": 16, "epochs": 12, "models_per_run": 1,
          "train_samples": 1024, "test_samples": 64, "data_source": "offline"}
TIMESERIES = {"batch_size": 64, "units": 32, "sequence_length": 168, "epochs": 10, "steps_per_epoch": 60,
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

# The independent side's pipeline and clock (colabkit.training.bare_fit): nothing of colabkit's
# timing or pipelines, the same code `python -m colabkit gpu-check` runs on a GPU.
from colabkit.training.bare_fit import shuffled_batches, steady_rate
"""

_MATMUL_SCRIPT = """
n, count, timed_calls = P["n"], P["count"], P["timed_calls"]
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
for _ in range(timed_calls):
    start = time.perf_counter()
    float(chained(x, y))  # the result on the host: the work is done
    times.append(time.perf_counter() - start)
print(json.dumps({"value": 2 * n**3 * count / statistics.median(times) / 1e12, "times": times}))
"""

_CNN_SCRIPT = """
from colabkit.suite import notebook_function
build_cnn = notebook_function("cnn_mnist", "build_cnn", keras=keras)
rng = np.random.default_rng(0)
x = rng.random((P["train_samples"], 28, 28, 1), dtype=np.float32)
y = keras.utils.to_categorical(rng.integers(0, 10, P["train_samples"]), 10)
keras.utils.set_random_seed(0)
model = build_cnn()
model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="categorical_crossentropy", metrics=["accuracy"])
rate, times = steady_rate(model, len(x), P["epochs"], **shuffled_batches(x, y, P["batch_size"]))
print(json.dumps({"value": rate, "times": times}))
"""

_DBLSTM_SCRIPT = """
from colabkit.suite import notebook_function
build_dblstm = notebook_function("dblstm_har", "build_dblstm", keras=keras)
rng = np.random.default_rng(0)
x = rng.normal(size=(P["train_samples"], 128, 9)).astype("float32")
y = keras.utils.to_categorical(rng.integers(0, 6, P["train_samples"]), 6)
keras.utils.set_random_seed(0)
model = build_dblstm(P["bilstm_layers"], P["units"], P["head_units"], 128, 9, 6)
model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="categorical_crossentropy",
              metrics=["accuracy", keras.metrics.Precision(), keras.metrics.Recall()])
rate, times = steady_rate(model, len(x), P["epochs"], **shuffled_batches(x, y, P["batch_size"]))
print(json.dumps({"value": rate, "times": times}))
"""

_TIMESERIES_SCRIPT = """
# The notebook's GRU and loss, fed as the notebook feeds it (colabkit's random_windows, written out):
# an endless stream of batches of windows of sequence_length hours starting at random rows of a
# training series of the offline substitute's shape (9 inputs, 3 targets, 90 % of the hours), cut
# by a gather; static batch shapes, as the notebook's (and TPUs') are.
from colabkit.suite import notebook_function
from colabkit.training.timeseries import WarmupMSE
units, length, batch = P["units"], P["sequence_length"], P["batch_size"]
build_gru = notebook_function("timeseries_rnn", "build_gru", keras=keras, units=units)
rng = np.random.default_rng(0)
rows = int(0.9 * (P["max_hours"] - 24))
x_all = tf.constant(rng.random((rows, 9), dtype=np.float32))
y_all = tf.constant(rng.random((rows, 3), dtype=np.float32))
offsets = tf.range(length, dtype=tf.int64)

def windows(draws):
    starts = tf.math.floormod(draws, rows - length + 1)[:, tf.newaxis] + offsets[tf.newaxis, :]
    return tf.gather(x_all, starts), tf.gather(y_all, starts)

data = (tf.data.Dataset.random(seed=0, rerandomize_each_iteration=True).batch(batch, drop_remainder=True)
        .map(windows, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE))
keras.utils.set_random_seed(0)
model = build_gru(9, 3)
model.compile(optimizer=keras.optimizers.RMSprop(1e-3), loss=WarmupMSE(P["warmup_steps"]))
rate, times = steady_rate(model, P["steps_per_epoch"] * batch, P["epochs"], x=data,
                          steps_per_epoch=P["steps_per_epoch"])
print(json.dumps({"value": rate, "times": times}))
"""


def independent(script: str, params: dict, workdir: Path, label: str, *,
                in_kernel: bool = True) -> tuple[float, list[float]]:
    """Run a plain script, none of colabkit's timing or pipelines, in a fresh Jupyter kernel through
    papermill (the notebook's kind of process), or with `in_kernel` False in a plain Python process;
    the script's last stdout line is {"value", "times"}."""
    source = textwrap.dedent(_PRELUDE).format(benchmarks=str(BENCHMARKS), params=json.dumps(params)) + script
    if in_kernel:
        import nbformat
        import papermill

        notebook = nbformat.v4.new_notebook()
        notebook.cells = [nbformat.v4.new_code_cell(source)]
        path = workdir / f"{label}-independent.ipynb"
        nbformat.write(notebook, path)
        executed = papermill.execute_notebook(str(path), str(path), kernel_name="python3", progress_bar=False)
        stdout = "".join(output.get("text", "") for output in executed.cells[0].outputs
                         if output.get("name") == "stdout")
    else:
        path_entries = [str(BENCHMARKS.parent), os.environ.get("PYTHONPATH", "")]
        completed = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, check=False,
                                   env={**os.environ, "PYTHONPATH": os.pathsep.join(path_entries)})
        if completed.returncode:
            raise RuntimeError(f"independent script failed:\n{completed.stderr[-2000:]}")
        stdout = completed.stdout
    result = json.loads(stdout.strip().splitlines()[-1])
    return float(result["value"]), [float(t) for t in result["times"]]


def notebook_figure(notebook: str, metric: str, params: dict, workdir: Path, label: str) -> tuple[float, list[float]]:
    """Run the notebook through papermill on the CPU; its headline metric and its steady epochs' times."""
    record = run_notebook(notebook, workdir, label, device="cpu", **params)
    epochs = record["timings"].get("epochs") or [e for r in record["timings"].get("repeats", []) for e in r["epochs"]]
    steady = [e["train_s"] for e in epochs[1:]] if epochs else []
    return float(record["metrics"][metric]), steady


Figure = tuple[float, list[float]]
PAIRS: dict[str, tuple[str, Callable[[Path, str], Figure], Callable[[Path, str, bool], Figure]]] = {
    "matmul": ("warm TFLOPS",
               lambda w, l: notebook_figure("matmul_tflops", "tflops_warm", {**MATMUL, "blas_baseline": False}, w, l),
               lambda w, l, k: independent(_MATMUL_SCRIPT, MATMUL, w, l, in_kernel=k)),
    "cnn": ("steady samples/s",
            lambda w, l: notebook_figure("cnn_mnist", "samples_per_s", CNN, w, l),
            lambda w, l, k: independent(_CNN_SCRIPT, CNN, w, l, in_kernel=k)),
    "dblstm": ("steady samples/s",
               lambda w, l: notebook_figure("dblstm_har", "samples_per_s", DBLSTM, w, l),
               lambda w, l, k: independent(_DBLSTM_SCRIPT, DBLSTM, w, l, in_kernel=k)),
    "timeseries": ("steady windows/s",
                   lambda w, l: notebook_figure("timeseries_rnn", "samples_per_s", TIMESERIES, w, l),
                   lambda w, l, k: independent(_TIMESERIES_SCRIPT, TIMESERIES, w, l, in_kernel=k)),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", nargs="+", choices=list(PAIRS), default=list(PAIRS))
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds per pair (>= 5 for a verdict)")
    parser.add_argument("--small", action="store_true",
                        help="smaller work per round (for a loaded machine, where it still lasts >= 10 s)")
    parser.add_argument("--plain-process", action="store_true",
                        help="run the independent side in a plain Python process rather than a Jupyter kernel "
                             "(shows what the kernel itself costs)")
    args = parser.parse_args()
    if args.small:
        MATMUL.update(n=1024)
        CNN.update(train_samples=2000, epochs=8)  # shorter epochs, but enough of them to average the modes
        DBLSTM.update(train_samples=512, epochs=8)
        TIMESERIES.update(steps_per_epoch=30, epochs=8)
    verdicts = {}
    with tempfile.TemporaryDirectory() as workdir:
        for name in args.pairs:
            what, ours, theirs = PAIRS[name]
            notebook_side, independent_side = interleave(
                [lambda round_: ours(Path(workdir), f"{name}-{round_}"),
                 lambda round_: theirs(Path(workdir), f"{name}-{round_}", not args.plain_process)],
                args.rounds,
                on_round=lambda round_, pair: print(f"  {name} round {round_ + 1}: notebook {pair[0][0]:.4g}, "
                                                    f"independent {pair[1][0]:.4g}", flush=True))
            agreement = Agreement(tuple(value for value, _ in notebook_side),
                                  tuple(value for value, _ in independent_side))
            notebook_epochs = [seconds for _, epochs in notebook_side for seconds in epochs]
            independent_epochs = [seconds for _, epochs in independent_side for seconds in epochs]
            verdicts[name] = agreement.ratio
            print(f"{name}: {what}, median of {args.rounds} interleaved rounds")
            print(f"  notebook     {agreement.ours_median:10.4g}  (rounds {spread(agreement.ours)}; steady "
                  f"epochs/calls {spread(notebook_epochs)} s)")
            print(f"  independent  {agreement.theirs_median:10.4g}  (rounds {spread(agreement.theirs)}; steady "
                  f"epochs/calls {spread(independent_epochs)} s)")
            print(f"  ratio {agreement.ratio:.3f} {'within' if agreement.within(LOW, HIGH) else 'OUTSIDE'} "
                  f"{LOW}-{HIGH} (paired rounds: median {statistics.median(agreement.paired):.3f}, "
                  f"{spread(agreement.paired)})", flush=True)
    print("summary: " + ", ".join(f"{name} {ratio:.3f}" for name, ratio in verdicts.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
