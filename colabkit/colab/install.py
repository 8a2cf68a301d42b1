"""Google Colab: the bootstrap cell every notebook runs, and what it installs on each runtime.

The repository coordinates (GitHub OWNER/NAME and a pinned ref) live in colabkit/colab/coordinates.py
and nowhere else: the Open-in-Colab badges, the bootstrap's `pip install
git+https://github.com/OWNER/NAME@REF` and the docs are all stamped from them (`python -m colabkit
notebooks`), and `python -m colabkit badges --repo OWNER/NAME --ref REF` rewrites them, then restamps.

The bootstrap cell (BOOTSTRAP_TEMPLATE) must work before colabkit is installed, which is its whole
point, so it holds only the first step: in Colab, install colabkit when it is missing. Everything
after that is `bootstrap()` below: on a TPU runtime the tensorflow + tensorflow-tpu pair (Colab's
TPU runtimes ship no TensorFlow), on a CPU or GPU runtime TensorFlow only if the image lacks it.
Outside Colab neither the cell nor `bootstrap()` does anything.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass

from colabkit.colab.coordinates import Coordinates, configured
from colabkit.colab.runtime import in_colab, runtime_accelerator
from colabkit.errors import BootstrapError

# The TensorFlow a CPU or GPU runtime gets when its image has none: the suite's tested version
# (requirements.txt pins the same; a test keeps them equal).
TENSORFLOW_VERSION = "2.21.0"
# TPU runtimes need TensorFlow built for TPUs. tensorflow-tpu's newest release is 2.20.0 (there is
# no 2.21 TPU build), so a TPU runtime gets the 2.20.0 pair; the record's `software` section says so.
TPU_TENSORFLOW_VERSION = "2.20.0"
LIBTPU_INDEX = "https://storage.googleapis.com/libtpu-tf-releases/index.html"


@dataclass(frozen=True)
class Install:
    """One `pip install -q ARGS` the bootstrap runs, and why."""

    args: tuple[str, ...]
    reason: str

    def command(self, python: str = "python") -> str:
        """The shell command, as a person would type it."""
        return " ".join((python, "-m", "pip", "install", "-q", *self.args))


def is_installed(requirement: str) -> bool:
    """Whether `requirement` is present: 'tensorflow-tpu' as an installed distribution (only the
    TPU build will do), anything else as an importable module (any TensorFlow build will do)."""
    if requirement == "tensorflow-tpu":
        try:
            importlib.metadata.distribution("tensorflow-tpu")
        except importlib.metadata.PackageNotFoundError:
            return False
        return True
    return importlib.util.find_spec(requirement) is not None


def install_plan(accelerator: str, installed: Callable[[str], bool] = is_installed,
                 coordinates: Coordinates | None = None) -> list[Install]:
    """The pip installs a Colab runtime with this accelerator needs, in order; [] when it lacks nothing.

    colabkit comes first because the bootstrap cell installs it before it can call `bootstrap()`.
    On a TPU runtime, `tensorflow` is installed before `tensorflow-tpu` (two commands, so the order
    is certain): both carry the `tensorflow` package, the TPU build's files must be the ones that
    stay, and the `tensorflow` distribution keeps every package that requires it satisfied, so
    nothing later installs a plain TensorFlow over the TPU build.
    """
    coordinates = coordinates or configured()
    plan = []
    if not installed("colabkit"):
        plan.append(Install((coordinates.pip_requirement,), "colabkit is not installed"))
    if accelerator == "tpu":
        if not installed("tensorflow-tpu"):
            why = "a TPU runtime needs TensorFlow built for TPUs (Colab's TPU images ship none)"
            plan.append(Install((f"tensorflow=={TPU_TENSORFLOW_VERSION}",), why))
            plan.append(Install((f"tensorflow-tpu=={TPU_TENSORFLOW_VERSION}", "-f", LIBTPU_INDEX), why))
    elif not installed("tensorflow"):
        # Plain `tensorflow`, not tensorflow[and-cuda]: Colab's GPU images carry CUDA and cuDNN,
        # and the and-cuda wheels would fight the versions PyTorch installed there.
        plan.append(Install((f"tensorflow=={TENSORFLOW_VERSION}",), "this runtime has no TensorFlow"))
    return plan


def run_pip(args: list[str]) -> None:
    """`python -m pip install -q ARGS` in this interpreter; BootstrapError with pip's words if it fails."""
    completed = subprocess.run([sys.executable, "-m", "pip", "install", "-q", *args],
                               capture_output=True, text=True)
    if completed.returncode != 0:
        output = (completed.stderr or completed.stdout).strip()[-2000:]
        raise BootstrapError(f"pip install {' '.join(args)} failed (exit {completed.returncode}):\n{output}")


def bootstrap(*, pip: Callable[[list[str]], None] | None = None, installed: Callable[[str], bool] | None = None,
              coordinates: Coordinates | None = None, echo: Callable[[str], None] = print) -> list[Install]:
    """In Colab, install what this runtime lacks (see install_plan) and return what was installed.

    Outside Colab it does nothing and returns []. `pip` runs one `pip install -q ARGS` (default:
    run_pip); `installed` says whether a requirement is present (default: is_installed). Run it
    before TensorFlow is imported: installing a module does not replace the one already imported,
    so in that case it asks for a restart.
    """
    if not in_colab():
        return []
    pip, installed = pip or run_pip, installed or is_installed
    accelerator, evidence = runtime_accelerator()
    plan = install_plan(accelerator, installed, coordinates)
    if not plan:
        echo(f"colabkit: Colab {accelerator.upper()} runtime ({evidence}); nothing to install")
        return []
    for step in plan:
        echo(f"colabkit: Colab {accelerator.upper()} runtime ({evidence}); {step.reason}: pip install {' '.join(step.args)}")
        pip(list(step.args))
    importlib.invalidate_caches()
    if "tensorflow" in sys.modules and any(step.args[0].startswith("tensorflow") for step in plan):
        echo("colabkit: TensorFlow was imported before it was installed: Runtime > Restart session, then Run all")
    return plan


BOOTSTRAP_CELL_ID = "colab-bootstrap"
BOOTSTRAP_MARKER = "# Colab set-up"
BOOTSTRAP_TEMPLATE = '''\
# Colab set-up, the same in every notebook (stamped by `python -m colabkit notebooks`).
# In Colab it quietly installs what the runtime lacks: colabkit from {repository}@{ref}, and TensorFlow
# (on a TPU runtime the TPU build, which Colab does not ship). Anywhere else it does nothing.
import os, sys

if "google.colab" in sys.modules or "COLAB_RELEASE_TAG" in os.environ:
    import importlib.util, subprocess

    if importlib.util.find_spec("colabkit") is None:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "{requirement}"], check=True)
        importlib.invalidate_caches()
    from colabkit.colab import bootstrap

    bootstrap()'''


def bootstrap_source(coordinates: Coordinates | None = None) -> str:
    """The bootstrap cell's source for these coordinates (default: the configured ones)."""
    coordinates = coordinates or configured()
    return BOOTSTRAP_TEMPLATE.format(repository=coordinates.repository, ref=coordinates.ref,
                                     requirement=coordinates.pip_requirement)


def install_commands(coordinates: Coordinates | None = None) -> dict[str, list[str]]:
    """Every command the bootstrap can issue, per runtime type, on a runtime that lacks everything."""
    return {accelerator: [step.command() for step in install_plan(accelerator, _fresh_runtime, coordinates)]
            for accelerator in ("cpu", "gpu", "tpu")}


def _fresh_runtime(requirement: str) -> bool:
    """The `installed` probe of a runtime that has nothing yet."""
    return False
