"""Where a number came from: software versions, host, git commit of the suite."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from colabkit.colab.runtime import colab_runtime_info, in_colab
from colabkit.device.memory import physical_memory_bytes
from colabkit.device.probes import cpu_info

_PACKAGES = ("colabkit", "tensorflow", "keras", "numpy", "pandas", "papermill", "jax", "jaxlib", "torch")


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def software_versions() -> dict[str, Any]:
    """Python and library versions; TensorFlow's CUDA/cuDNN build info if TensorFlow is loaded."""
    versions: dict[str, Any] = {"python": platform.python_version()}
    for package in _PACKAGES:
        version = _version(package)
        if version is not None:
            versions[package] = version
    if "tensorflow" in sys.modules:  # never import TensorFlow just to describe it
        build = dict(sys.modules["tensorflow"].sysconfig.get_build_info())
        versions["tf_cuda_build"] = build.get("cuda_version")
        versions["tf_cudnn_build"] = build.get("cudnn_version")
        versions["tf_is_cuda_build"] = bool(build.get("is_cuda_build"))
    if "keras" in sys.modules:
        versions["keras_backend"] = sys.modules["keras"].backend.backend()
    return versions


def host_info() -> dict[str, Any]:
    """The machine: OS, CPU model and cores, memory, and whether it is a Colab runtime.

    On Colab, `colab_runtime` adds what the runtime says about itself (release tag, COLAB_GPU,
    TPU_ACCELERATOR_TYPE, the TPU chips' generation from their PCI ids); None elsewhere.
    """
    cpu = cpu_info()
    memory = physical_memory_bytes()
    return {
        "hostname": platform.node(),
        "platform": platform.platform(),
        "cpu_model": cpu["model"],
        "cpu_cores": cpu["cores"],  # logical CPUs usable by the process
        "cpu_physical_cores": cpu.get("physical_cores"),
        "memory_gib": round(memory / 2**30, 1) if memory is not None else None,
        "colab": in_colab(),
        "colab_runtime": colab_runtime_info(),
    }


def git_commit(path: str | Path | None = None) -> str | None:
    """The commit of the code that ran: by default colabkit's own.

    From a git checkout (the one holding `path`, by default the one whose tracked files colabkit's
    source is), the HEAD commit, with '-dirty' when tracked files differ from it. Where colabkit is
    not in a checkout, the commit pip installed it from (`pip install git+URL@REF` writes it in the
    distribution's direct_url.json, as `vcs_info.commit_id`). None when neither says (a wheel built
    from a plain copy of the source).
    """
    if path is not None:
        return checkout_commit(Path(path))
    source = Path(__file__).resolve()
    return checkout_commit(source.parent, tracked=source.name) or installed_commit() or built_commit()


def built_commit() -> str | None:
    """The commit a `sweep --colab` wheel was built from (colabkit.sweep.runners.colab.sessions.build_wheel writes it)."""
    try:
        return (Path(__file__).resolve().parents[1] / "source_commit.txt").read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def checkout_commit(where: Path, tracked: str | None = None) -> str | None:
    """HEAD of the git checkout holding the folder `where` ('-dirty' if tracked files are modified);
    None outside one, or, with `tracked`, when that file of `where` is not tracked by it (colabkit
    installed into a virtual environment that happens to sit inside some checkout)."""
    try:
        if tracked is not None:
            subprocess.run(["git", "ls-files", "--error-unmatch", tracked], cwd=where, capture_output=True,
                           text=True, timeout=10, check=True)
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True,
                                text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=where,
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{commit}-dirty" if dirty else commit


def installed_commit(distribution: str = "colabkit") -> str | None:
    """The commit an installed `distribution` was built from, as pip recorded it for a VCS install
    (direct_url.json's `vcs_info.commit_id`, PEP 610); None for any other kind of install.

    Only the installed copy this colabkit was imported from counts (another copy elsewhere on the
    path says nothing about the code running).
    """
    package_init = Path(__file__).resolve().parents[1] / "__init__.py"
    for dist in metadata.distributions(name=distribution):
        if Path(str(dist.locate_file("colabkit/__init__.py"))).resolve() != package_init:
            continue
        text = dist.read_text("direct_url.json")
        if not text:
            continue
        try:
            commit = (json.loads(text).get("vcs_info") or {}).get("commit_id")
        except (ValueError, AttributeError):
            continue
        if isinstance(commit, str) and commit:
            return commit
    return None
