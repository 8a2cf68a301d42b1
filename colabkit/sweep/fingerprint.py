"""Fingerprints: what a result depends on, so a resumed sweep reruns exactly what changed.

A fingerprint covers the notebook's cells (types and sources only), the combination's parameters,
colabkit's version, colabkit's code by content (`code_sha256` of every .py file: a dirty checkout,
a pip install or a wheel all count for what they are) and TensorFlow's version. Every committed record
stores it (`fingerprint`); a matching digest is a finished result. The commit is stored beside it,
outside the digest.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

from colabkit.records.provenance import git_commit

# Distributions that provide the `tensorflow` module, in the order they are looked for.
_TENSORFLOW_DISTRIBUTIONS = ("tensorflow", "tensorflow-cpu", "tensorflow-tpu", "tf-nightly", "tensorflow-macos")


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


@lru_cache(maxsize=64)
def _notebook_digest_cached(path: str, mtime_ns: int, size: int) -> str:
    notebook = json.loads(Path(path).read_text(encoding="utf-8"))
    cells = []
    for cell in notebook.get("cells", []):
        source = cell.get("source", "")
        cells.append([cell.get("cell_type"), "".join(source) if isinstance(source, list) else source])
    return _sha256(_canonical(cells))


def notebook_digest(path: str | Path) -> str:
    """SHA-256 of a notebook's cell types and sources (outputs and metadata left out)."""
    stat = Path(path).stat()
    return _notebook_digest_cached(str(Path(path).resolve()), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=1)  # read once per process: reading package metadata costs ~1 ms, per combination
def tensorflow_version() -> str | None:
    """The installed TensorFlow's version, read from package metadata (TensorFlow is not imported)."""
    for distribution in _TENSORFLOW_DISTRIBUTIONS:
        try:
            return metadata.version(distribution)
        except metadata.PackageNotFoundError:
            continue
    return None


def colabkit_version() -> str:
    from colabkit.version import __version__

    return __version__


@lru_cache(maxsize=1)
def code_digest() -> str:
    """SHA-256 of colabkit's own source: every .py file under the package, with its relative path.

    Read once per process: the code a process imported does not change while it runs.
    """
    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode("utf-8") + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


@lru_cache(maxsize=1)
def code_commit() -> str | None:
    """The commit colabkit's code came from (records.provenance.git_commit), once per process."""
    return git_commit()


def fingerprint(notebook: str | Path, params: dict[str, Any]) -> dict[str, Any]:
    """The fingerprint of running `notebook` with `params` here: its parts and their digest.

    `git_commit` is informative only: the digest covers the code itself (`code_sha256`).
    """
    parts = {
        "notebook_sha256": notebook_digest(notebook),
        "params": dict(params),
        "colabkit": colabkit_version(),
        "code_sha256": code_digest(),
        "tensorflow": tensorflow_version(),
    }
    return {"digest": _sha256(_canonical(parts)), **parts, "git_commit": code_commit()}


def stale_reason(recorded: Any, current: dict[str, Any]) -> str | None:
    """Why a record's fingerprint no longer matches `current` (None when it does), in words."""
    if not isinstance(recorded, dict) or "digest" not in recorded:
        return "its record has no fingerprint (written before fingerprints, or by hand)"
    if recorded["digest"] == current["digest"]:
        return None
    changes = []
    if recorded.get("notebook_sha256") != current["notebook_sha256"]:
        changes.append("the notebook changed")
    before, now = recorded.get("params") or {}, current["params"]
    if _canonical(before) != _canonical(now):
        changed = sorted(key for key in set(before) | set(now)
                         if _canonical(before.get(key)) != _canonical(now.get(key)))
        changes.append(f"parameters changed ({', '.join(changed)})")
    for part, label in (("colabkit", "colabkit"), ("tensorflow", "TensorFlow")):
        if recorded.get(part) != current[part]:
            changes.append(f"{label} {recorded.get(part)} -> {current[part]}")
    if recorded.get("code_sha256") != current["code_sha256"]:
        commits = (recorded.get("git_commit"), current.get("git_commit"))
        changes.append("colabkit's code changed" + (f" (commit {commits[0]} -> {commits[1]})"
                                                    if commits[0] != commits[1] else ""))
    return "; ".join(changes) or "its fingerprint differs"
