"""Google Colab: the bootstrap cell every notebook runs, and what it installs on each runtime.

The repository coordinates (GitHub OWNER/NAME and a pinned ref) live in colabkit/colab/coordinates.py
and nowhere else: the Open-in-Colab badges, the bootstrap's `pip install
git+https://github.com/OWNER/NAME@REF` and the docs are all stamped from them (`python tools/stamp_notebooks.py
notebooks`), and `python tools/stamp_notebooks.py badges --repo OWNER/NAME --ref REF` rewrites them, then restamps.

The set-up cell (BOOTSTRAP_TEMPLATE) must work before colabkit is installed, so it holds only that install; the
rest is its one call, `colabkit.bootstrap()`, for the runtime's default backend (JAX on a TPU, TensorFlow
elsewhere: colabkit.device.backends): TensorFlow on a CPU or GPU runtime whose image lacks it, nothing on a TPU
runtime (its image has jax[tpu]). TensorFlow's TPU build comes only when a run asks for TensorFlow on a TPU
(`install_for_run`, which the notebook's `colabkit.start_run` calls once its parameters are read, before its
`setup_device` imports TensorFlow), with a warning: after it, JAX there falls back to the CPU (jax-ml/jax #29989),
and the two cannot share the TPU (googlecolab/colabtools #4567). Outside Colab nothing is installed.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass

from colabkit.colab.coordinates import Coordinates, configured
from colabkit.colab.runtime import in_colab, runtime_accelerator
from colabkit.device.backends import resolve_backend
from colabkit.device.probes import tensorflow_tpu_installed
from colabkit.device.spec import DeviceKind, parse_device
from colabkit.errors import BootstrapError

# The TensorFlow a CPU or GPU runtime gets when its image has none: the suite's tested version
# (requirements.txt pins the same; a test keeps them equal).
TENSORFLOW_VERSION = "2.21.0"
# TensorFlow on a TPU needs its TPU build. tensorflow-tpu's newest release is 2.20.0 (there is no
# 2.21 TPU build), so a TensorFlow TPU run gets the 2.20.0 pair; the record's `software` section says so.
TPU_TENSORFLOW_VERSION = "2.20.0"
LIBTPU_INDEX = "https://storage.googleapis.com/libtpu-tf-releases/index.html"
TPU_TENSORFLOW_WARNING = (
    "colabkit: WARNING: TensorFlow's TPU build is now installed in this runtime. JAX here will fall back to "
    "the CPU (jax-ml/jax #29989), and TensorFlow and JAX cannot share the TPU in one process "
    "(googlecolab/colabtools #4567): a JAX run on this runtime is refused, not measured on the CPU. For JAX, "
    "start a fresh runtime (Runtime > Disconnect and delete runtime).")


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
        return tensorflow_tpu_installed()
    return importlib.util.find_spec(requirement) is not None


def install_plan(accelerator: str, installed: Callable[[str], bool] = is_installed,
                 coordinates: Coordinates | None = None, backend: str = "auto") -> list[Install]:
    """The pip installs a Colab runtime with this accelerator needs for `backend`, in order; [] when it
    lacks nothing. `backend` "auto" is the runtime's default: JAX on a TPU, TensorFlow elsewhere.

    colabkit comes first because the bootstrap cell installs it before it can call `bootstrap()`.
    TensorFlow on a TPU needs the TPU build: `tensorflow` is installed before `tensorflow-tpu` (two
    commands, so the order is certain): both carry the `tensorflow` package, the TPU build's files
    must be the ones that stay, and the `tensorflow` distribution keeps every package that requires it
    satisfied, so nothing later installs a plain TensorFlow over the TPU build. JAX (and PyTorch) get
    nothing: Colab's images carry them (the TPU image jax[tpu]).
    """
    coordinates = coordinates or configured()
    plan = []
    if not installed("colabkit"):
        plan.append(Install((coordinates.pip_requirement,), "colabkit is not installed"))
    if resolve_backend(backend, accelerator) != "tensorflow":
        return plan
    if accelerator == "tpu":
        if not installed("tensorflow-tpu"):
            why = "TensorFlow on a TPU needs its TPU build (Colab's TPU images ship JAX, no TensorFlow)"
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


def bootstrap(backend: str = "auto") -> None:
    """The set-up cell's one call, `colabkit.bootstrap()`: in Colab, what the runtime lacks installed
    (`install_missing`); anywhere else nothing."""
    install_missing(backend=backend)


def install_missing(*, backend: str = "auto", coordinates: Coordinates | None = None,
                    quiet: bool = False) -> list[Install]:
    """In Colab, install what this runtime lacks for `backend` (install_plan, each step by run_pip) and return it;
    elsewhere nothing, []. `bootstrap` asks for the runtime's default backend ("auto"): on a TPU runtime JAX, so
    nothing TPU-specific is installed and it says how to ask for TensorFlow (`quiet`: nothing said unless something
    is installed). Run it before TensorFlow is imported (a module installed later is not the one imported: it then
    asks for a restart)."""
    if not in_colab():
        return []
    accelerator, evidence = runtime_accelerator()
    where = f"colabkit: Colab {accelerator.upper()} runtime ({evidence})"
    resolved = resolve_backend(backend, accelerator)
    if accelerator == "tpu" and resolved != "tensorflow" and not quiet:
        name = {"jax": "JAX", "torch": "PyTorch"}.get(resolved, resolved)
        print(f"{where}: notebooks run on {name} here, which the image has; for TensorFlow on this TPU set "
             "backend = \"tensorflow\" (its TPU build is then installed, and JAX in this runtime falls back "
             "to the CPU)")
    plan = install_plan(accelerator, is_installed, coordinates, backend)
    if not plan:
        if not quiet:
            print(f"{where}; nothing to install")
        return []
    for step in plan:
        print(f"{where}; {step.reason}: pip install {' '.join(step.args)}")
        run_pip(list(step.args))
    importlib.invalidate_caches()
    if any(step.args[0].startswith("tensorflow-tpu") for step in plan):
        print(TPU_TENSORFLOW_WARNING)
    if "tensorflow" in sys.modules and any(step.args[0].startswith("tensorflow") for step in plan):
        print("colabkit: TensorFlow was imported before it was installed: Runtime > Restart session, then Run all")
    return plan


def install_for_run(device: str = "auto", backend: str | None = None) -> list[Install]:
    """In Colab, what a run on `device` with `backend` needs beyond the set-up cell's installs: TensorFlow's TPU build
    when TensorFlow is asked for on a TPU (or "auto") device, with TPU_TENSORFLOW_WARNING (`install_missing`, silent
    when nothing is missing; the set-up cell installs nothing TPU-specific, the runtime's default being JAX). Nothing
    for another backend or device, once TensorFlow is imported, or outside Colab. `colabkit.start_run` calls it."""
    if not backend or "tensorflow" in sys.modules or parse_device(device).kind not in (DeviceKind.TPU, DeviceKind.AUTO):
        return []
    resolved = resolve_backend(backend, device)
    return install_missing(backend=resolved, quiet=True) if resolved == "tensorflow" else []


BOOTSTRAP_CELL_ID = "colab-bootstrap"
BOOTSTRAP_MARKER = "# Set-up"
# The set-up cell: the install of colabkit itself, which no package can do for itself, then `colabkit.bootstrap()`.
# pip's own words on a failure, in one block, with the fixes (a repository out of reach: not published, private
# or misspelt); SystemExit so that Colab shows the message alone.
BOOTSTRAP_TEMPLATE = '''\
# Set-up, stamped by tools/stamp_notebooks.py. In Colab: colabkit from {repository}@{ref} where it is missing,
# then colabkit.bootstrap() adds what the runtime lacks (TensorFlow on CPU and GPU runtimes). Elsewhere: nothing.
import importlib.util, subprocess, sys
if "google.colab" in sys.modules and not importlib.util.find_spec("colabkit"):
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q",
                          "{requirement}"], capture_output=True, text=True)
    if pip.returncode:  # pip's own words, and the fixes (the repository or its ref out of reach, or a wheel)
        raise SystemExit(f"colabkit could not be installed from {repository}@{ref}; pip said:\\n{{pip.stderr[-3000:]}}"
                         "\\nFixes: `python tools/stamp_notebooks.py badges --repo OWNER/NAME` in a checkout (then "
                         "push), or pip install a colabkit wheel here first.")
import colabkit
colabkit.bootstrap()'''


def bootstrap_source(coordinates: Coordinates | None = None) -> str:
    """The bootstrap cell's source for these coordinates (default: the configured ones)."""
    coordinates = coordinates or configured()
    return BOOTSTRAP_TEMPLATE.format(repository=coordinates.repository, ref=coordinates.ref,
                                     requirement=coordinates.pip_requirement)


def install_commands(coordinates: Coordinates | None = None) -> dict[str, list[str]]:
    """Every command the bootstrap can issue, per runtime type, on a runtime that lacks everything:
    'cpu', 'gpu' and 'tpu' for their default backends (JAX on the TPU), and 'tpu-tensorflow' for a
    run that asks for TensorFlow on a TPU."""
    runtimes = {"cpu": ("cpu", "auto"), "gpu": ("gpu", "auto"), "tpu": ("tpu", "auto"),
                "tpu-tensorflow": ("tpu", "tensorflow")}
    nothing = lambda requirement: False  # noqa: E731 - what a runtime that has nothing yet has installed
    return {name: [step.command() for step in install_plan(accelerator, nothing, coordinates, backend)]
            for name, (accelerator, backend) in runtimes.items()}
