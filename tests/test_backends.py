"""Keras backends: choosing one, refusing what cannot run, the same notebook on every backend."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import types

import pytest
from helpers import REPO, execute_notebook

from colabkit.device.backends import (
    select_backend,
    setup_jax,
    setup_torch,
    unsupported_reason,
)
from colabkit.errors import (
    BackendError,
    BackendNotInstalledError,
    BackendUnsupportedError,
    DeviceNotFoundError,
)
from colabkit.records.record import read_record

HAVE = {name: importlib.util.find_spec(name) is not None for name in ("jax", "torch")}


def test_unknown_backend_names_the_choices():
    with pytest.raises(BackendError, match="expected one of tensorflow, jax, torch"):
        select_backend("mxnet")


def test_missing_package_says_how_to_install_it(monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "jax" else real_find_spec(name))
    with pytest.raises(BackendNotInstalledError, match=r"needs the jax extra .*pip install 'colabkit\[jax\]'"):
        select_backend("jax")
    assert "needs the jax extra" in unsupported_reason("jax", "cpu")  # the sweep's skip names the extra too


def test_switching_backend_after_keras_is_imported_asks_for_a_restart(monkeypatch):
    fake_keras = types.SimpleNamespace(backend=types.SimpleNamespace(backend=lambda: "jax"))
    monkeypatch.setitem(sys.modules, "keras", fake_keras)
    with pytest.raises(BackendError, match="already running the 'jax' backend.*restart the kernel"):
        select_backend("tensorflow")


def test_torch_on_tpu_and_torch_replicas_are_refused_not_run_elsewhere():
    if not HAVE["torch"]:
        pytest.skip("torch not installed")
    if importlib.util.find_spec("torch_xla") is None:
        assert "torch_xla" in unsupported_reason("torch", "tpu")
        with pytest.raises(BackendUnsupportedError, match="PyTorch on TPU is not supported here"):
            setup_torch("tpu", "tpu", None)
    with pytest.raises(BackendUnsupportedError, match="trains on one device"):
        setup_torch("cpu:2", "cpu", 2)
    assert unsupported_reason("torch", "gpu") is None


@pytest.mark.skipif(not HAVE["torch"], reason="torch not installed")
def test_torch_gpu_on_a_machine_without_cuda_is_an_error():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    with pytest.raises(DeviceNotFoundError, match="PyTorch on this machine sees no CUDA GPU"):
        setup_torch("gpu", "gpu", None)


@pytest.mark.skipif(not HAVE["jax"], reason="jax not installed")
def test_jax_gpu_on_a_cpu_machine_names_what_jax_has(monkeypatch):
    import jax

    import colabkit.device.backends as backends

    monkeypatch.setattr(backends, "keep_tensorflow_out", lambda: True)  # later tests of this process import it

    if jax.default_backend() != "cpu":
        pytest.skip("this machine has an accelerator")
    with pytest.raises(DeviceNotFoundError, match="device 'gpu' requested but JAX on this machine has: CPU:0"):
        setup_jax("gpu", "gpu", None)


JAX_DATA_PARALLEL = """
import numpy as np
import colabkit
dev = colabkit.setup_device("cpu:2", backend="jax")
import keras
assert dev.replicas == 2 and type(dev.strategy).__name__ == "DataParallel", dev
with dev.scope():
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, activation="softmax")])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
x = np.random.default_rng(0).normal(size=(64, 4)).astype("float32")
model.fit(x, (x[:, 0] > 0).astype("int64"), batch_size=16, epochs=1, verbose=0)
kernel = model.layers[0].kernel.value
assert len(kernel.sharding.device_set) == 2, kernel.sharding  # replicated on both devices
print("ok", dev.summary())
"""


@pytest.mark.skipif(not HAVE["jax"], reason="jax not installed")
def test_jax_two_host_devices_train_data_parallel():
    completed = subprocess.run([sys.executable, "-c", JAX_DATA_PARALLEL], capture_output=True, text=True,
                               timeout=300, cwd=REPO)
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert "ok CPU" in completed.stdout and "DataParallel" in completed.stdout


SMOKE = dict(device="cpu", batch_size=64, epochs=2, train_samples=256, test_samples=64, data_source="offline")


@pytest.fixture(scope="module")
def records(tmp_path_factory, warm_kernels):
    """The CNN-MNIST notebook's record per backend, same parameters otherwise: each run once, when a test first
    asks for it (TensorFlow's in the worker's warm kernel; JAX and PyTorch each in a kernel of their own)."""
    made = {}

    def record_of(backend: str) -> dict:
        if backend not in made:
            folder = tmp_path_factory.mktemp(backend)
            _, record_path = execute_notebook("cnn_mnist", folder, warm_kernels, backend=backend, **SMOKE)
            made[backend] = read_record(record_path)
        return made[backend]

    return record_of


@pytest.mark.notebook
@pytest.mark.parametrize("backend", [name for name in ("jax", "torch") if HAVE[name]] or [
    pytest.param("jax", marks=pytest.mark.skip(reason="only TensorFlow is installed"))])
@pytest.mark.long("its module fixture runs the CNN notebook on TensorFlow and on each other installed backend")
def test_the_same_notebook_runs_on_each_installed_backend_as_on_tensorflow(records, backend):
    reference, record = records("tensorflow"), records(backend)
    for checked, name in ((reference, "tensorflow"), (record, backend)):
        assert checked["status"] == "ok"
        assert checked["params"]["backend"] == name
        assert checked["device"]["backend"] == name and checked["software"]["keras_backend"] == name
        assert checked["device"]["kind"] == "cpu"
        assert checked["metrics"]["params"] == 412_778
        assert checked["metrics"]["samples_per_s"] > 0 and 0 <= checked["metrics"]["test_accuracy"] <= 1
    # records differ only where they should: same parameters but the backend, same metric names
    assert {k: v for k, v in record["params"].items() if k != "backend"} == \
           {k: v for k, v in reference["params"].items() if k != "backend"}
    assert set(record["metrics"]) == set(reference["metrics"])
    assert record["data"] == {**reference["data"], "load_s": record["data"]["load_s"]}


@pytest.mark.skipif(not HAVE["torch"] or importlib.util.find_spec("torch_xla") is not None,
                    reason="needs torch without torch_xla")
def test_sweep_skips_torch_on_tpu_with_the_reason_even_on_a_tpu_host(tmp_path):
    from colabkit.device.spec import DeviceRequest
    from colabkit.sweep.expand import expand
    from colabkit.sweep.grids import load_grid
    from colabkit.sweep.decide import decide

    spec = load_grid(REPO / "parameters" / "cnn_mnist.yaml")
    combinations = expand(spec, "frameworks_smoke", devices=[DeviceRequest("tpu")])
    decisions = {d.combination.params["backend"]: d for d in decide(combinations, tmp_path, {"cpu": 1, "tpu": 1})}
    assert decisions["torch"].action == "skip" and "PyTorch on TPU is not supported" in decisions["torch"].reason
    assert decisions["tensorflow"].action == "run" and decisions["jax"].action == "run"
