"""The Colab bootstrap on fake runtimes: a fake `google.colab` module, a fake nvidia-smi, fake TPU
device files and a fake pip runner. No network: nothing here runs a real install."""

from __future__ import annotations

import importlib.util
import os
import stat
import subprocess
import sys
import types
from pathlib import Path

import pytest
from helpers import REPO

import colabkit
import colabkit.colab.install as install
import colabkit.device.probes as probes
from colabkit.colab.coordinates import Coordinates, configured
from colabkit.colab.install import (
    bootstrap_source,
    install_commands,
    install_missing,
    install_plan,
    run_pip,
)
from colabkit.colab.runtime import colab_runtime_info, in_colab, runtime_accelerator
from colabkit.errors import BootstrapError, CoordinatesError

LIBTPU = "https://storage.googleapis.com/libtpu-tf-releases/index.html"
COLABKIT_FROM_GITHUB = f"git+https://github.com/colabkit/colabkit@v{colabkit.__version__}"
RELEASE_TAG = "release-colab_20260310-060056_RC00"


class FakePip:
    """Records each `pip install -q ARGS` instead of running it."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, args: list[str]) -> None:
        self.calls.append(list(args))


def has(*requirements: str):
    """An `installed` probe for a runtime that has exactly these requirements."""
    return lambda requirement: requirement in requirements


def holding(monkeypatch, *requirements: str) -> None:
    """The fake runtime has exactly these requirements installed (what install.is_installed answers)."""
    monkeypatch.setattr(install, "is_installed", has(*requirements))


@pytest.fixture
def runtime(monkeypatch, tmp_path):
    """Build a fake machine: `runtime("gpu", colab=True)`. Returns the fake pip runner, now install.run_pip."""
    for name in ("COLAB_RELEASE_TAG", "COLAB_GPU", "COLAB_TPU_ADDR", "TPU_NAME", "TPU_ACCELERATOR_TYPE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    fake_bin, fake_dev = tmp_path / "bin", tmp_path / "dev"
    fake_bin.mkdir()
    fake_dev.mkdir()
    # The real PATH minus any folder holding a real nvidia-smi, so a GPU test host cannot leak in.
    real_path = [folder for folder in os.environ.get("PATH", "").split(os.pathsep)
                 if folder and not (Path(folder) / "nvidia-smi").exists()]
    monkeypatch.setenv("PATH", os.pathsep.join([str(fake_bin), *real_path]))
    monkeypatch.setattr(probes, "_TPU_DEVICE_GLOBS", (str(fake_dev / "accel*"),))
    monkeypatch.setattr(probes, "_PCI_DEVICES", str(tmp_path / "no-pci"))

    def build(kind: str = "cpu", colab: bool = True) -> FakePip:
        if colab:
            monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
            monkeypatch.setenv("COLAB_RELEASE_TAG", RELEASE_TAG)
        if kind == "gpu":
            smi = fake_bin / "nvidia-smi"
            smi.write_text("#!/bin/sh\necho 'Tesla T4'\n")
            smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
        elif kind == "tpu":
            (fake_dev / "accel0").write_text("")
        pip = FakePip()
        monkeypatch.setattr(install, "run_pip", pip)
        return pip

    return build


# --- coordinates ---------------------------------------------------------------------------------

def test_configured_coordinates_make_the_badge_and_the_pip_requirement():
    coordinates = configured()
    # Pinned by default: this version's release tag, so a badge's notebook and the colabkit the
    # bootstrap installs come from the same, fixed code.
    assert (coordinates.repository, coordinates.ref) == ("colabkit/colabkit", f"v{colabkit.__version__}")
    assert coordinates.pinned
    assert coordinates.pip_requirement == COLABKIT_FROM_GITHUB
    assert coordinates.notebook_url("notebooks/x.ipynb") == \
        f"https://colab.research.google.com/github/colabkit/colabkit/blob/v{colabkit.__version__}/notebooks/x.ipynb"
    assert coordinates.badge("notebooks/x.ipynb").startswith(
        "[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://")


@pytest.mark.parametrize("repository, ref", [("me/fork", "v1.0"), ("Org-1/my.repo_x", "release/2026-03"),
                                             ("a/b", "0123abc")])
def test_coordinates_accept_github_names_and_refs(repository, ref):
    assert Coordinates(repository, ref).pip_requirement == f"git+https://github.com/{repository}@{ref}"


@pytest.mark.parametrize("ref, pinned", [("v0.1.0", True), ("v2", True), ("v1.0.0rc1", True),
                                         ("0123abc", True), ("0123456789abcdef0123456789abcdef01234567", True),
                                         ("main", False), ("dev", False), ("release/2026-03", False),
                                         ("v1.x", False), ("0123ab", False)])
def test_a_ref_is_pinned_when_it_is_a_release_tag_or_a_commit(ref, pinned):
    assert Coordinates("a/b", ref).pinned is pinned


@pytest.mark.parametrize("repository, ref", [("colabkit", "main"), ("a/b/c", "main"), ("-a/b", "main"),
                                             ("a/b c", "main"), ("a/b", ""), ("a/b", "x..y"), ("a/b", "-x"),
                                             ("a/b", "main)"), ("a/b", "v1 "), ("a/b", "x.lock"), ("a/..", "main")])
def test_coordinates_reject_what_would_break_a_url_or_pip(repository, ref):
    with pytest.raises(CoordinatesError):
        Coordinates(repository, ref)


# --- where we are -----------------------------------------------------------------------------------

def test_outside_colab_the_bootstrap_does_nothing_even_on_a_tpu_host(runtime, monkeypatch):
    pip = runtime("tpu", colab=False)
    monkeypatch.setenv("TPU_ACCELERATOR_TYPE", "v2-8")
    assert not in_colab()
    holding(monkeypatch)
    assert install_missing() == []
    assert pip.calls == []


def test_colab_is_recognised_by_module_or_by_release_tag(runtime, monkeypatch):
    runtime("cpu", colab=False)
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    assert in_colab()
    monkeypatch.delitem(sys.modules, "google.colab")
    assert not in_colab()
    monkeypatch.setenv("COLAB_RELEASE_TAG", RELEASE_TAG)  # a papermill kernel started inside Colab
    assert in_colab()


@pytest.mark.parametrize("kind", ["cpu", "gpu", "tpu"])
def test_runtime_accelerator_reads_nvidia_smi_and_tpu_files(runtime, kind):
    runtime(kind)
    accelerator, evidence = runtime_accelerator()
    assert accelerator == kind
    assert {"cpu": "no TPU hint", "gpu": "nvidia-smi", "tpu": "accel0 exists"}[kind] in evidence


def test_tpu_environment_variable_marks_a_tpu_runtime(runtime, monkeypatch):
    runtime("cpu")
    monkeypatch.setenv("TPU_ACCELERATOR_TYPE", "v5litepod-1")
    assert runtime_accelerator() == ("tpu", "TPU_ACCELERATOR_TYPE is set")


# --- what gets installed ---------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["cpu", "gpu"])
def test_cpu_and_gpu_runtimes_install_tensorflow_only_when_missing(runtime, kind, capsys, monkeypatch):
    pip = runtime(kind)
    holding(monkeypatch, "colabkit", "tensorflow")
    assert install_missing() == []
    assert pip.calls == []
    assert f"Colab {kind.upper()} runtime" in capsys.readouterr().out
    holding(monkeypatch, "colabkit")
    install_missing()
    assert pip.calls == [["tensorflow==2.21.0"]]


def test_tpu_runtime_runs_jax_and_installs_nothing_tpu_specific(runtime, capsys, monkeypatch):
    pip = runtime("tpu")
    holding(monkeypatch, "colabkit")  # a fresh TPU image: JAX, no TensorFlow at all
    plan = install_missing()
    assert plan == [] and pip.calls == []
    assert install_plan("tpu", has("colabkit"), backend="jax") == []
    out = capsys.readouterr().out
    assert "notebooks run on JAX here" in out and 'backend = "tensorflow"' in out and "nothing to install" in out
    assert "WARNING" not in out


def test_tensorflow_on_a_tpu_installs_tensorflow_then_the_tpu_build_and_warns_about_jax(runtime, capsys, monkeypatch):
    pip = runtime("tpu")
    holding(monkeypatch, "colabkit", "tensorflow")  # plain TensorFlow: not enough
    plan = install_missing(backend="tensorflow")
    assert pip.calls == [["tensorflow==2.20.0"], ["tensorflow-tpu==2.20.0", "-f", LIBTPU]]
    assert [step.command() for step in plan] == [
        "python -m pip install -q tensorflow==2.20.0",
        f"python -m pip install -q tensorflow-tpu==2.20.0 -f {LIBTPU}",
    ]
    out = capsys.readouterr().out
    assert install.TPU_TENSORFLOW_WARNING in out
    assert "fall back to the CPU (jax-ml/jax #29989)" in out and "googlecolab/colabtools #4567" in out


def test_a_run_asking_tensorflow_on_a_colab_tpu_installs_the_pair_when_it_starts(runtime, monkeypatch, capsys, tmp_path):
    """The set-up cell installed nothing for TensorFlow (the TPU runtime's default is JAX): the run that asks
    for it installs the pair when its parameters are read (start_run), before TensorFlow is imported, then
    warns. colabkit.setup_device is the device's own set-up, which installs nothing."""
    import colabkit.device.setup as device_setup
    from colabkit.run import start_run

    pip = runtime("tpu")
    holding(monkeypatch, "colabkit")
    monkeypatch.delitem(sys.modules, "tensorflow", raising=False)  # a fresh kernel: no TensorFlow yet
    params = {"device": "tpu", "backend": "tensorflow"}
    start_run("matmul_tflops", params=params, results_path=tmp_path / "r.json")
    assert pip.calls == [["tensorflow==2.20.0"], ["tensorflow-tpu==2.20.0", "-f", LIBTPU]]
    assert install.TPU_TENSORFLOW_WARNING in capsys.readouterr().out
    assert colabkit.setup_device is device_setup.setup_device  # what the notebooks call: it installs nothing
    pip.calls.clear()
    start_run("matmul_tflops", params={**params, "backend": "auto"}, results_path=tmp_path / "r.json")  # JAX
    start_run("matmul_tflops", params={**params, "device": "cpu"}, results_path=tmp_path / "r.json")
    assert pip.calls == []


def test_install_for_run_is_silent_where_nothing_is_missing(runtime, capsys, monkeypatch):
    pip = runtime("tpu")
    holding(monkeypatch, "colabkit", "tensorflow-tpu")
    assert install.install_for_run("tpu", "tensorflow") == []
    holding(monkeypatch, "colabkit")
    assert install.install_for_run("tpu", "jax") == []  # Colab's images have JAX
    assert pip.calls == [] and capsys.readouterr().out == ""


def test_install_for_run_does_nothing_outside_colab_even_on_a_tpu_host(runtime, monkeypatch):
    pip = runtime("tpu", colab=False)
    holding(monkeypatch)
    assert install.install_for_run("tpu", "tensorflow") == [] and pip.calls == []


def test_tpu_runtime_with_the_tpu_build_installs_nothing_for_tensorflow(runtime, monkeypatch):
    pip = runtime("tpu")
    holding(monkeypatch, "colabkit", "tensorflow-tpu")
    assert install_missing(backend="tensorflow") == []
    assert pip.calls == []


def test_missing_colabkit_comes_first_from_the_configured_repository(runtime, monkeypatch):
    pip = runtime("tpu")
    holding(monkeypatch)
    install_missing(backend="tensorflow")
    assert pip.calls[0] == [COLABKIT_FROM_GITHUB]
    assert [call[0] for call in pip.calls[1:]] == ["tensorflow==2.20.0", "tensorflow-tpu==2.20.0"]
    pip.calls.clear()
    install_missing(coordinates=Coordinates("me/fork", "v2"))  # JAX: colabkit alone
    assert pip.calls == [["git+https://github.com/me/fork@v2"]]


def test_install_commands_per_runtime_are_the_documented_ones():
    commands = install_commands()
    assert commands["cpu"] == commands["gpu"] == [
        f"python -m pip install -q {COLABKIT_FROM_GITHUB}", "python -m pip install -q tensorflow==2.21.0"]
    assert commands["tpu"] == [f"python -m pip install -q {COLABKIT_FROM_GITHUB}"]  # JAX: the image has it
    assert commands["tpu-tensorflow"] == [
        f"python -m pip install -q {COLABKIT_FROM_GITHUB}",
        "python -m pip install -q tensorflow==2.20.0",
        f"python -m pip install -q tensorflow-tpu==2.20.0 -f {LIBTPU}",
    ]
    colab_doc = (REPO / "docs" / "colab.md").read_text()
    assert all(command in colab_doc for command in commands["tpu-tensorflow"] + commands["cpu"])


def test_tensorflow_for_cpu_and_gpu_is_the_tested_version_in_requirements():
    pins = dict(line.split("==") for line in (REPO / "requirements.txt").read_text().splitlines()
                if "==" in line and not line.startswith("#"))
    assert pins["tensorflow"] == install.TENSORFLOW_VERSION


def test_is_installed_tells_modules_from_the_tpu_distribution():
    assert install.is_installed("colabkit") and install.is_installed("tensorflow")
    assert not install.is_installed("tensorflow-tpu")  # this machine has the plain build
    assert not install.is_installed("no_such_module_colabkit_test")
    assert install_plan("cpu") == []  # this environment lacks nothing a CPU runtime needs


def test_real_pip_runner_reports_pip_failure_as_a_typed_error():
    # --no-index keeps it offline: pip fails at once on a package that exists nowhere locally.
    with pytest.raises(BootstrapError, match=r"pip install --no-index colabkit-no-such-package-x9 failed"):
        run_pip(["--no-index", "colabkit-no-such-package-x9"])


# --- the cell itself --------------------------------------------------------------------------------

def run_cell(monkeypatch, colabkit_missing: bool = False, pip_fails: str = "") -> list[list[str]]:
    """Execute the bootstrap cell's exact text; return the commands it gave subprocess.run (whose pip
    exits 1 saying `pip_fails` on stderr when that is given)."""
    commands: list[list[str]] = []

    def fake_run(command, **kwargs):
        commands.append(list(command))
        return subprocess.CompletedProcess(command, 1 if pip_fails else 0, "", pip_fails)

    monkeypatch.setattr(subprocess, "run", fake_run)
    if colabkit_missing:
        real_find_spec = importlib.util.find_spec
        monkeypatch.setattr(importlib.util, "find_spec",
                            lambda name, *args: None if name == "colabkit" else real_find_spec(name, *args))
    exec(compile(bootstrap_source(), "<bootstrap cell>", "exec"), {"__name__": "__main__"})
    return commands


def test_cell_outside_colab_runs_no_pip_and_leaves_the_rest_to_bootstrap(runtime, monkeypatch):
    runtime("tpu", colab=False)
    called = []
    monkeypatch.setattr(colabkit, "bootstrap", lambda **kwargs: called.append(kwargs), raising=False)
    assert run_cell(monkeypatch, colabkit_missing=True) == []  # no pip: colabkit.bootstrap() decides the rest
    assert called == [{}]


def test_cell_in_a_fresh_colab_installs_colabkit_then_calls_bootstrap(runtime, monkeypatch):
    runtime("gpu")
    called = []
    monkeypatch.setattr(colabkit, "bootstrap", lambda **kwargs: called.append(kwargs), raising=False)
    commands = run_cell(monkeypatch, colabkit_missing=True)
    assert commands == [[sys.executable, "-m", "pip", "install", "-q", COLABKIT_FROM_GITHUB]]
    assert called == [{}]


@pytest.mark.parametrize("pip_said", [
    "  fatal: repository 'https://github.com/colabkit/colabkit/' not found\nerror: subprocess-exited-with-error",
    "error: pathspec 'v0.1.0' did not match any file(s) known to git",
    "ERROR: Could not find a version that satisfies the requirement numpy>=9"])
def test_cell_whose_pip_fails_stops_with_pips_words_in_one_block_and_names_the_fixes(runtime, monkeypatch, pip_said):
    runtime("gpu")
    with pytest.raises(SystemExit) as stopped:
        run_cell(monkeypatch, colabkit_missing=True, pip_fails=pip_said)
    message = str(stopped.value)
    assert message.startswith("colabkit could not be installed from colabkit/colabkit@v") and pip_said in message
    assert "python tools/stamp_notebooks.py badges --repo OWNER/NAME" in message and "wheel" in message


def test_cell_on_a_colab_tpu_runtime_runs_the_real_bootstrap_and_installs_no_tensorflow(runtime, monkeypatch, capsys):
    pip = runtime("tpu")  # install.run_pip, as the cell calls bootstrap()
    assert run_cell(monkeypatch) == []  # colabkit is importable: the cell installs nothing itself
    assert pip.calls == []  # the TPU runtime's default backend is JAX, which its image has
    out = capsys.readouterr().out
    assert "Colab TPU runtime" in out and "notebooks run on JAX here" in out


def test_cell_on_a_colab_gpu_runtime_without_tensorflow_installs_it(runtime, monkeypatch):
    pip = runtime("gpu")
    holding(monkeypatch, "colabkit")
    run_cell(monkeypatch)
    assert pip.calls == [["tensorflow==2.21.0"]]


def test_cell_source_follows_the_coordinates():
    source = bootstrap_source(Coordinates("me/fork", "v2"))
    assert '"git+https://github.com/me/fork@v2"' in source and "colabkit/colabkit" not in source
    compile(source, "<bootstrap cell>", "exec")


# --- what the record says --------------------------------------------------------------------------

def test_record_host_section_describes_the_colab_runtime(runtime, monkeypatch):
    from colabkit.records.record import make_record

    runtime("gpu")
    monkeypatch.setenv("COLAB_GPU", "1")
    host = make_record("x", "ok", {})["host"]
    assert host["colab"] is True
    assert host["colab_runtime"] == {
        "release_tag": RELEASE_TAG, "backend_version": None, "image_type": None, "accelerator": "gpu",
        "accelerator_evidence": "nvidia-smi is on the PATH", "colab_gpu": "1", "tpu_accelerator_type": None,
        "tpu_pci": None,
    }


GPU_FOUND = {"kind": "gpu", "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition"}


@pytest.mark.parametrize("asked, device, found, mismatch", [
    (None, GPU_FOUND, GPU_FOUND["name"], None),  # nobody said what was asked
    ("G4", GPU_FOUND, GPU_FOUND["name"], None),
    ("H100", GPU_FOUND, GPU_FOUND["name"], "asked for H100, ran on NVIDIA RTX PRO 6000 Blackwell Server Edition"),
    ("A100", {"kind": "gpu", "name": "NVIDIA L4"}, "NVIDIA L4", "asked for A100, ran on NVIDIA L4"),
    ("l4", {"kind": "gpu", "name": "NVIDIA L4"}, "NVIDIA L4", None),
    ("v6e-1", {"kind": "tpu", "device_kind": "TPU v6 lite", "name": "TPU v6e-1"}, "TPU v6 lite", None),
    ("V5E1", {"kind": "tpu", "device_kind": "TPU v5 lite"}, "TPU v5 lite", None),  # Colab's metadata spelling
    ("v6e-1", {"kind": "tpu", "device_kind": "TPU v5 lite"}, "TPU v5 lite", "asked for v6e-1, ran on TPU v5 lite"),
    ("T4", {"kind": "cpu", "name": "AMD EPYC"}, "none", "asked for T4, ran on none"),
    ("cpu", {"kind": "cpu", "name": "AMD EPYC"}, "none", None),
    ("B200", GPU_FOUND, GPU_FOUND["name"], None),  # a runtime type colabkit does not know: it cannot tell
])
def test_record_says_which_accelerator_was_asked_for_and_which_ran(runtime, monkeypatch, capsys, asked, device,
                                                                   found, mismatch):
    from colabkit.records.record import make_record
    from colabkit.report.records import device_label

    runtime("cpu")
    if asked:
        monkeypatch.setenv("COLABKIT_ACCELERATOR_ASKED", asked)
    else:
        monkeypatch.delenv("COLABKIT_ACCELERATOR_ASKED", raising=False)
    record = make_record("x", "ok", {}, device=device)
    assert (record["accelerator_asked"], record["accelerator_found"]) == (asked, found)
    assert record["colab_runtime_version"] == RELEASE_TAG
    if mismatch is None:
        assert record["accelerator_mismatch"] is None and "WARNING" not in capsys.readouterr().err
    else:
        assert record["accelerator_mismatch"].startswith(mismatch)
        assert mismatch in capsys.readouterr().err  # said on the console too
    assert device_label(record) == f"{device['kind'].upper()}: {device['name']}" if "name" in device else True
    assert not mismatch or asked not in device_label(record)  # labelled by what ran, never by what was asked


def test_a_record_without_an_accelerator_in_use_names_the_machines_one(runtime, tmp_path, monkeypatch):
    from colabkit.records.record import make_record

    runtime("cpu", colab=False)
    assert make_record("x", "skipped", {}, error={"kind": "skipped"})["accelerator_found"] == "none"
    smi = tmp_path / "bin" / "nvidia-smi"  # the fake PATH's folder: nvidia-smi's CSV answer for one L4
    smi.write_text("#!/bin/sh\necho '0, NVIDIA L4, 23034, 550.54'\n")
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    record = make_record("x", "skipped", {}, error={"kind": "skipped"})
    assert (record["accelerator_found"], record["colab_runtime_version"]) == ("NVIDIA L4", None)
    monkeypatch.setenv("COLABKIT_ACCELERATOR_ASKED", "L4")  # a CPU run on an L4 runtime: the runtime got its L4
    cpu_run = make_record("x", "ok", {}, device={"kind": "cpu", "name": "AMD EPYC"})
    assert (cpu_run["accelerator_found"], cpu_run["accelerator_mismatch"]) == ("NVIDIA L4", None)


def test_record_host_section_outside_colab_has_no_colab_runtime(runtime):
    runtime("cpu", colab=False)
    assert colab_runtime_info() is None
