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
from colab_set import COLAB_PINS, COLAB_SET
from helpers import REPO, FakeTensorFlow, WarmKernels, visible_gpus

sys.path.insert(0, str(REPO / "tools"))  # the development tools (tools/*.py: scripts, not part of the package)

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
    """Mark `colab_set` the tests of the files in tests/colab_set.py's COLAB_SET, `colab_pins` those of COLAB_PINS; skip the tests marked `gpu`
    when no GPU is visible, and those marked `device_rehearsal` unless `-m` names that marker, saying why."""
    for item in items:
        if item.path.name in COLAB_SET:
            item.add_marker(pytest.mark.colab_set)
        elif item.path.name in COLAB_PINS:
            item.add_marker(pytest.mark.colab_pins)
        marker = item.get_closest_marker("long")
        if marker is not None and not (marker.args and isinstance(marker.args[0], str) and marker.args[0].strip()):
            raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.long needs its reason: long(\"why over 30 s\")")
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


LONG_S = 30  # docs/testing.md: no test over this unless marked `long` with its reason


_SECONDS: dict[str, float] = {}  # each test's set-up, call and tear-down together, unmarked ones only


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Add up each test's time (in the controller too, under pytest-xdist: the reports carry their marks)."""
    if "long" not in report.keywords:
        _SECONDS[report.nodeid] = _SECONDS.get(report.nodeid, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """Name the tests over LONG_S that carry no `long` mark: a timing on this host, never a failure (a busy host
    slows every test), but the list to shorten or mark (docs/testing.md)."""
    over = sorted(((spent, node) for node, spent in _SECONDS.items() if spent > LONG_S), reverse=True)
    if over:
        terminalreporter.section(f"over {LONG_S} s and not marked long (a timing on this host, not a failure)")
        for spent, node in over:
            terminalreporter.line(f"{spent:6.1f} s  {node}")


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
