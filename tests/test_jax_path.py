"""Every experiment on JAX: each notebook through papermill with backend "jax" and tiny parameters, on
`cpu:2` (two XLA host devices, data-parallel through keras.distribution) in the default suite and on
`cpu` (one device) under `slow` (the CNN's one-device JAX run is in tests/test_backends.py). Each run
writes an ok record that names JAX, and its kernel never imported TensorFlow: a cell appended to the
notebook lists the tensorflow modules in sys.modules once everything else has run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from helpers import NOTEBOOKS, REPO, execute_notebook

from colabkit.records.record import read_record

pytestmark = pytest.mark.notebook

TINY = {
    "matmul_tflops": dict(n=64, count=2, timed_calls=2, blas_baseline=False),
    "cnn_mnist": dict(batch_size=32, epochs=2, train_samples=200, test_samples=64, data_source="offline",
                      target_accuracy=0.0, breakdown=True),  # the passes over Keras's JAX distribution
    "dblstm_har": dict(batch_size=32, bilstm_layers=1, units=4, head_units=4, epochs=2, models_per_run=1,
                       train_samples=96, test_samples=64, data_source="offline", breakdown=False),
    "timeseries_rnn": dict(batch_size=16, sequence_length=24, units=4, epochs=2, steps_per_epoch=2, warmup_steps=4,
                           max_hours=2000, plot_hours=24, data_source="offline", breakdown=False),
    "paradnn": dict(family="fc", layers=1, nodes=16, input_size=32, output_size=8, batch_size=8, steps=2, epochs=2,
                    breakdown=False),
}
PROBE = ('import json, sys\n'
         'print("TENSORFLOW-MODULES", json.dumps(sorted(name for name in sys.modules '
         'if name.partition(".")[0] == "tensorflow")))')


def run_with_probe(name: str, folder: Path, kernels=None, **parameters) -> tuple[dict, list[str]]:
    """Run notebooks/<name>.ipynb with a last cell that lists the tensorflow modules loaded (in a fresh kernel,
    or one of `kernels`: warm, cleared between runs as `--kernels reuse` runs JAX); return (record, those modules)."""
    notebook = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    notebook.cells.append(nbformat.v4.new_code_cell(PROBE))
    source = folder / f"{name}-probed.ipynb"
    nbformat.write(notebook, source)
    executed, record_path = execute_notebook(name, folder, kernels, source, **parameters)
    lines = [line for output in executed.cells[-1].outputs for line in output.get("text", "").splitlines()
             if line.startswith("TENSORFLOW-MODULES ")]
    assert len(lines) == 1, executed.cells[-1].outputs
    return read_record(record_path), json.loads(lines[0].split(" ", 1)[1])


def check_jax_record(record: dict, name: str, replicas: int) -> None:
    assert record["status"] == "ok", record.get("error")
    assert record["params"]["backend"] == "jax"
    device = record["device"]
    assert device["backend"] == "jax"
    assert record["software"].get("keras_backend", "not loaded" if name == "matmul_tflops" else None) in (
        "jax", "not loaded")  # the matmul notebook needs no Keras on one device
    assert device["kind"] == "cpu" and device["replicas"] == replicas and len(device["jax_devices"]) == replicas
    assert device["tensorflow_in_kernel"] == "kept out"
    assert device["strategy"] == ("DataParallel" if replicas > 1 else "single device")
    metrics, epochs = record["metrics"], record["timings"].get("epochs")
    if name == "matmul_tflops":
        assert metrics["replicas"] == replicas and metrics["xla"] is True and metrics["tflops_warm"] > 0
        assert metrics["flops_per_call"] == 2 * 64**3 * 2 * replicas  # every device's products counted
    elif name == "dblstm_har":  # repeats keep their timings apart; the global batch 32 splits over the replicas
        assert metrics["global_batch_size"] == 32 and metrics["batch_size_per_replica"] == 32 // replicas
        assert [e["samples"] for e in record["timings"]["repeats"][0]["epochs"]] == [96, 96]
    else:
        assert metrics["samples_per_s"] > 0
        samples = {  # exact counts: over two devices a pass keeps only whole global batches (static shapes)
            "cnn_mnist": 192 if replicas > 1 else 200,  # global batch 64: 3 x 64; one device: 6 x 32 + 8
            "timeseries_rnn": 2 * 16 * replicas,  # steps_per_epoch x global batch of random windows
            "paradnn": 2 * 8 * replicas,
        }[name]
        assert [epoch["samples"] for epoch in epochs] == [samples, samples]
    if name == "cnn_mnist":  # the breakdown's passes over Keras's JAX distribution: rates, shares, bound_by
        assert record["breakdown"]["measured"] and record["breakdown"]["backend"] == "jax"
        assert metrics["input_samples_per_s"] > 0 and metrics["device_samples_per_s"] > 0
        assert metrics["input_wait_share"] + metrics["host_share"] + metrics["device_share"] == pytest.approx(1)
        assert metrics["bound_by"] in ("input", "host", "compute", "memory", "device")


@pytest.mark.parametrize("name", list(TINY))
@pytest.mark.long("the first notebook starts the warm JAX kernel the five share: Keras on JAX imported, then trained")
def test_every_notebook_runs_on_jax_over_two_host_devices_without_tensorflow(name, tmp_path, warm_kernels):
    # one warm JAX kernel for the five, as `sweep --kernels reuse` runs them: TensorFlow kept out of it throughout
    record, tensorflow_modules = run_with_probe(name, tmp_path, warm_kernels, device="cpu:2", backend="jax",
                                                **TINY[name])
    check_jax_record(record, name, replicas=2)
    assert tensorflow_modules == []


@pytest.mark.slow
@pytest.mark.parametrize("name", list(TINY))
def test_every_notebook_runs_on_jax_on_one_cpu_device_without_tensorflow(name, tmp_path):
    record, tensorflow_modules = run_with_probe(name, tmp_path, device="cpu", backend="jax", **TINY[name])
    check_jax_record(record, name, replicas=1)
    assert tensorflow_modules == []


KEPT_OUT = """
import json, sys
import colabkit
dev = colabkit.setup_device("cpu", backend="jax")
import keras, numpy as np
from colabkit.training.batches import ArrayBatches
from colabkit.training.fit import fit
from colabkit.training.timer import TrainingTimer

keras.utils.set_random_seed(0)  # Keras seeds TensorFlow here wherever it can import it
seen = []

class Recorded(ArrayBatches):
    def __getitem__(self, index):
        seen.append(index)
        return super().__getitem__(index)

    def endless(self):
        return Recorded(self.arrays, batch_size=self.batch_size, shuffle=True, seed=self.seed, endless=True)

x = np.arange(10, dtype="float32")[:, None]
model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(2, activation="softmax")])
model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
timer = TrainingTimer(global_batch_size=4, dataset_size=10)
fit(model, Recorded((x, (x[:, 0] > 4).astype("int64")), batch_size=4, shuffle=True), epochs=3,
    callbacks=[timer], verbose=0)
try:
    import tensorflow
    refused = None
except ImportError as error:
    refused = str(error)
print(json.dumps({"seen": seen, "epochs": [[e.steps, e.samples] for e in timer.epochs], "refused": refused,
                  "loaded": sorted(m for m in sys.modules if m.partition(".")[0] == "tensorflow")}))
"""


def test_a_jax_process_keeps_tensorflow_out_and_trains_every_epoch_from_one_input_iterator():
    completed = subprocess.run([sys.executable, "-c", KEPT_OUT], capture_output=True, text=True, timeout=300,
                               cwd=REPO)
    assert completed.returncode == 0, completed.stderr[-2000:]
    result = json.loads(completed.stdout.strip().splitlines()[-1])
    assert result["loaded"] == []  # not even keras.utils.set_random_seed loaded it
    assert "kept out of this kernel" in result["refused"]
    # One iterator for all epochs: after Keras's look at the first batches (it builds the training state
    # from them: batch 0 on Keras 3.15, batches 0 and 1 on Colab's 3.13), the batch indices run on across
    # epochs, 3 per pass of 10 samples, where a restarted input would start again at 0 every epoch (Keras
    # 3.13 also fetches one batch ahead); each epoch's partial batch counted as it is.
    seen = result["seen"]
    start = len(seen) - 1 - seen[::-1].index(0)  # where training's one iterator began
    assert start <= 2 and seen[start:start + 9] == list(range(9)) and len(seen) - start <= 10, seen
    assert result["epochs"] == [[3, 10]] * 3


IMPORT_ALL = """
import importlib, json, os, pkgutil, sys
os.environ["KERAS_BACKEND"] = "jax"
from colabkit.device.backends import keep_tensorflow_out
keep_tensorflow_out()  # what setup_device does on JAX: an import of TensorFlow would now fail
import colabkit
failed = {}
for info in pkgutil.walk_packages(colabkit.__path__, "colabkit."):
    if not info.name.endswith("__main__"):  # runs the command line
        try:
            importlib.import_module(info.name)
        except Exception as error:
            failed[info.name] = repr(error)[:300]
print(json.dumps({"failed": failed, "loaded": sorted(m for m in sys.modules if m.partition(".")[0] == "tensorflow")}))
"""


def test_no_colabkit_module_imports_tensorflow_when_it_is_imported():
    completed = subprocess.run([sys.executable, "-c", IMPORT_ALL], capture_output=True, text=True, timeout=300,
                               cwd=REPO)
    assert completed.returncode == 0, completed.stderr[-2000:]
    result = json.loads(completed.stdout.strip().splitlines()[-1])
    assert result == {"failed": {}, "loaded": []}
