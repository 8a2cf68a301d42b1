"""Shared test fixtures and hooks: quiet TensorFlow, a fake machine for device logic, the `gpu` marker (a test
that needs a real GPU is skipped where `nvidia-smi -L` lists none) and the `colab_set` marker on the files
tests/colab_set.py lists (the tests Colab's versions can change: .ci/run runs those under Colab's set)."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from typing import Any

import pytest
from colab_set import COLAB_SET
from helpers import FakeTensorFlow, WarmKernels, visible_gpus

# Kernels started by papermill inherit this: TensorFlow's start-up chatter buries real errors.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# ... and these: the achievable peak's scan kept in a cache of the test session's own, never the user's
# (~/.cache/colabkit), and each of its shapes timed for 0.05 s instead of 1 s (colabkit.device.achievable)
_HOST_CACHE = tempfile.mkdtemp(prefix="colabkit-test-host-cache-")
os.environ["COLABKIT_HOST_CACHE"] = os.path.join(_HOST_CACHE, "host-facts.json")
os.environ["COLABKIT_SCAN_SECONDS"] = "0.05"
atexit.register(shutil.rmtree, _HOST_CACHE, True)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "device_rehearsal: ./run.sh device-rehearsal end to end (minutes); runs "
                                       "only where selected, `-m device_rehearsal` (.ci/run's own step)")


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects: it must see the `colab_set` marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark `colab_set` the tests of the files in tests/colab_set.py's COLAB_SET; skip the tests marked `gpu`
    when no GPU is visible, and those marked `device_rehearsal` unless `-m` names that marker, saying why."""
    for item in items:
        if item.path.name in COLAB_SET:
            item.add_marker(pytest.mark.colab_set)
    marked = [item for item in items if item.get_closest_marker("gpu") is not None]
    if marked and not visible_gpus():
        skip = pytest.mark.skip(reason="needs a real GPU: nvidia-smi -L lists none here")
        for item in marked:
            item.add_marker(skip)
    if "device_rehearsal" not in (config.getoption("markexpr", "") or ""):
        skip = pytest.mark.skip(reason="the device rehearsal runs in its own step: pytest -m device_rehearsal")
        for item in items:
            if item.get_closest_marker("device_rehearsal") is not None:
                item.add_marker(skip)


@pytest.fixture
def fake_machine(monkeypatch):
    """Install a fake TensorFlow and a clean environment; returns a function building the machine."""
    import colabkit.device.probes as probes
    import colabkit.device.setup as device_setup

    monkeypatch.setattr(device_setup, "_SETUPS", {})
    monkeypatch.setattr(probes, "nvidia_smi", lambda: [])
    for name in ("COLAB_TPU_ADDR", "TPU_NAME", "TPU_ACCELERATOR_TYPE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(probes, "_TPU_DEVICE_GLOBS", ())
    monkeypatch.setattr(probes, "_PCI_DEVICES", "/nonexistent-pci-devices")  # no real TPU chips leak in

    def build(**kwargs: Any) -> FakeTensorFlow:
        fake = FakeTensorFlow(**kwargs)
        monkeypatch.setitem(sys.modules, "tensorflow", fake)
        return fake

    return build


@pytest.fixture(scope="session")
def warm_kernels():
    """The test process's warm kernels (helpers.WarmKernels): `execute_notebook(name, folder, warm_kernels, ...)` runs
    a notebook in one, as `sweep --kernels reuse` runs a sweep's notebooks one after another, so a pytest worker pays
    the kernel start and TensorFlow's import once per key, not once per test. A test whose run fails on purpose
    takes a fresh kernel instead: a failure costs its kernel."""
    kernels = WarmKernels()
    yield kernels
    kernels.close()
