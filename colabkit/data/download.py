"""Download, verify and cache data files: what every dataset loader stands on.

- Cache: `COLABKIT_DATA`, else /content/colabkit_data on Colab, else $XDG_CACHE_HOME (or ~/.cache)/colabkit.
- A file enters the cache only complete and verified (pinned sha256, announced length, the archive's
  CRCs), through a hidden temporary and a rename; stale temporaries are removed later.
- A cached file is re-hashed on every use against its pin or its `<file>.sha256`; a corrupt one is
  removed (DataCacheWarning) and fetched once more, then CorruptDownloadError. Unreachable mirrors
  raise DownloadError. Plain urllib: file:// and http://127.0.0.1 work too. See docs/data.md.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import sys
import tarfile
import time
import urllib.error
import urllib.parse
import urllib.request
import warnings
import zipfile
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from colabkit.errors import (
    CorruptDownloadError,
    CorruptFileError,
    DataCacheWarning,
    DownloadError,
    MirrorUnreachableError,
)
from colabkit.io import write_atomic
from colabkit.version import __version__
from colabkit.colab.runtime import in_colab

CHUNK_BYTES = 1 << 20
DEFAULT_TIMEOUT_S = 60.0
ATTEMPTS_PER_MIRROR = 2
STALE_TEMPORARY_S = 24 * 3600
PART_SUFFIX = ".part"  # the suffix of a download in progress (see _remove_stale_temporaries)
COLAB_DATA_DIR = Path("/content/colabkit_data")


@dataclass(frozen=True)
class Remote:
    """One place a file can be downloaded from, stored in the cache as `filename`.

    `sha256` is a pin: only set it to a digest published by a source you can name
    (`sha256_source`); without it the digest of the first verified download is recorded instead.
    """

    url: str
    filename: str
    sha256: str | None = None
    sha256_source: str | None = None


@dataclass(frozen=True)
class Fetched:
    """A verified file in the cache and where it came from."""

    path: Path
    url: str
    sha256: str
    size: int
    pinned: bool
    downloaded: bool  # False: served from the cache without network access
    sha256_source: str | None = None  # where the pin comes from, when pinned

    def provenance(self) -> dict[str, object]:
        """The file's part of a dataset's provenance record."""
        return {"url": self.url, "file": self.path.name, "sha256": self.sha256, "sha256_pinned": self.pinned,
                "sha256_source": self.sha256_source, "bytes": self.size, "downloaded": self.downloaded}


def data_dir() -> Path:
    """The cache folder: $COLABKIT_DATA, else /content/colabkit_data on Colab, else ~/.cache/colabkit."""
    configured = os.environ.get("COLABKIT_DATA")
    if configured:
        return Path(configured).expanduser()
    if in_colab():
        return COLAB_DATA_DIR
    cache_home = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache_home).expanduser() / "colabkit"


def sha256_of(path: str | Path) -> str:
    """Hex sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for chunk in iter(lambda: stream.read(CHUNK_BYTES), b""):
            digest.update(chunk)
    return digest.hexdigest()


# --- validators: raise CorruptFileError when an archive's own integrity checks fail -----------

def check_zip(path: Path) -> None:
    """Every member of a zip (or .npz) decompresses with a matching CRC."""
    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as exc:
        raise CorruptFileError(f"not a readable zip archive ({exc})") from exc
    if bad is not None:
        raise CorruptFileError(f"zip member {bad!r} fails its CRC check")


def check_tar(path: Path) -> None:
    """Every member of a (compressed) tar archive reads to its end; gzip checks its CRC there."""
    try:
        with tarfile.open(path) as archive:
            for member in archive:
                if member.isfile():
                    stream = archive.extractfile(member)
                    if stream is not None:
                        while stream.read(CHUNK_BYTES):
                            pass
    except (tarfile.TarError, zlib.error, EOFError, OSError) as exc:
        raise CorruptFileError(f"not a readable tar archive ({exc})") from exc


# --- the cache --------------------------------------------------------------------------------

def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _recorded_sha256(path: Path) -> str | None:
    sidecar = _sidecar(path)
    if not sidecar.exists():
        return None
    text = sidecar.read_text(encoding="utf-8").split()
    return text[0].lower() if text else None


def _record_sha256(path: Path, digest: str) -> None:
    write_atomic(_sidecar(path), f"{digest}  {path.name}\n", suffix=PART_SUFFIX)


def _remove(path: Path) -> None:
    for stale in (path, _sidecar(path)):
        stale.unlink(missing_ok=True)


def _remove_stale_temporaries(folder: Path, filename: str) -> None:
    """Temporaries left by killed runs; a day-old one cannot belong to a live download."""
    now = time.time()
    for temporary in folder.glob(f".{filename}.*{PART_SUFFIX}"):
        try:
            if now - temporary.stat().st_mtime > STALE_TEMPORARY_S:
                temporary.unlink()
        except FileNotFoundError:
            pass  # another process cleaned it first


def _verify(path: Path, remote: Remote, validate: Callable[[Path], None] | None,
            expected: str | None = None) -> str:
    """Return the file's sha256 if it passes its pin (or `expected`) and `validate`; else raise
    CorruptFileError."""
    digest = sha256_of(path)
    wanted = (remote.sha256 or expected or "").lower() or None
    if wanted is not None and digest != wanted:
        raise CorruptFileError(f"sha256 {digest} differs from the expected {wanted}")
    if validate is not None and wanted is None:
        validate(path)  # a known digest already proves the content; otherwise check the archive
    return digest


def _cached(folder: Path, remote: Remote, validate: Callable[[Path], None] | None,
            removed: list[str] | None = None) -> Fetched | None:
    """The verified cached copy of `remote`, or None. A corrupt copy is removed, with a
    DataCacheWarning saying which file and why (also appended to `removed`)."""
    path = folder / remote.filename
    if not path.is_file():
        return None
    recorded = _recorded_sha256(path)
    try:
        digest = _verify(path, remote, validate if recorded is None else None, expected=recorded)
    except CorruptFileError as exc:
        _remove(path)
        note = f"removed the corrupt cached file {path} ({exc})"
        warnings.warn(DataCacheWarning(f"{note}; fetching it again from {remote.url}"), stacklevel=3)
        if removed is not None:
            removed.append(note)
        return None
    if recorded != digest:
        _record_sha256(path, digest)
    return Fetched(path, remote.url, digest, path.stat().st_size, remote.sha256 is not None, downloaded=False,
                   sha256_source=remote.sha256_source)


def _download_to(url: str, target: Path, label: str, timeout_s: float, progress: bool) -> None:
    """Stream `url` into `target`; raise MirrorUnreachableError before the body starts, CorruptFileError
    if it breaks off."""
    from tqdm import tqdm

    request = urllib.request.Request(url, headers={"User-Agent": f"colabkit/{__version__}"})
    try:
        response = urllib.request.urlopen(request, timeout=timeout_s)  # noqa: S310 - http(s) and file
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
        raise MirrorUnreachableError(f"{url}: {getattr(exc, 'reason', None) or exc}") from exc
    written = 0
    with response, open(target, "wb") as out:
        announced = response.headers.get("Content-Length")
        total = int(announced) if announced and announced.isdigit() else None
        with tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc=label,
                  disable=not progress, file=sys.stderr, mininterval=0.5, leave=False) as bar:
            try:
                while chunk := response.read(CHUNK_BYTES):
                    out.write(chunk)
                    written += len(chunk)
                    bar.update(len(chunk))
            except (http.client.HTTPException, OSError) as exc:  # IncompleteRead, reset, read timeout
                raise CorruptFileError(f"the transfer broke off after {written} bytes ({exc!r})") from exc
        out.flush()
        os.fsync(out.fileno())
    if total is not None and written != total:
        raise CorruptFileError(f"truncated: {written} of the {total} bytes announced")


def fetch(
    remotes: Sequence[Remote],
    subdir: str,
    *,
    validate: Callable[[Path], None] | None = None,
    cache_dir: str | Path | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    progress: bool = True,
    mirror_variable: str | None = None,
) -> Fetched:
    """Return a verified local copy of the file the mirrors `remotes` serve, downloading if needed.

    The cache (`cache_dir` or `data_dir()`, then `subdir`) is searched for every mirror's file
    first; only then is the network used, mirror after mirror. Each mirror gets at most
    ATTEMPTS_PER_MIRROR downloads. `validate(path)` raises `CorruptFileError` for a file whose archive is
    damaged. Raises DownloadError when no mirror answered, CorruptDownloadError when one answered
    with a file that failed verification twice; both messages say what was removed from the
    cache and what to do next (`mirror_variable`, the environment variable naming an extra
    mirror, is suggested when given).
    """
    if not remotes:
        raise DownloadError(f"no mirror configured for {subdir!r}")
    folder = Path(cache_dir).expanduser() if cache_dir is not None else data_dir()
    folder = folder / subdir
    folder.mkdir(parents=True, exist_ok=True)
    removed: list[str] = []
    for remote in remotes:
        cached = _cached(folder, remote, validate, removed)
        if cached is not None:
            return cached
    unreachable: list[str] = []
    corrupt: list[str] = []
    for remote in remotes:
        path = folder / remote.filename
        _remove_stale_temporaries(folder, remote.filename)
        for attempt in range(1, ATTEMPTS_PER_MIRROR + 1):
            outcome: dict[str, str] = {}

            def download_and_verify(temporary: Path) -> None:
                _download_to(remote.url, temporary, remote.filename, timeout_s, progress)
                outcome["sha256"] = _verify(temporary, remote, validate)

            try:
                write_atomic(path, download_and_verify, suffix=PART_SUFFIX)
            except MirrorUnreachableError as exc:
                unreachable.append(str(exc))
                break
            except CorruptFileError as exc:
                corrupt.append(f"{remote.url} (attempt {attempt}): {exc}")
                continue
            _record_sha256(path, outcome["sha256"])
            return Fetched(path, remote.url, outcome["sha256"], path.stat().st_size, remote.sha256 is not None,
                           downloaded=True, sha256_source=remote.sha256_source)
    earlier = (" Before that, " + "; ".join(removed) + ".") if removed else ""
    mirror = f"set {mirror_variable} to another URL or a local copy of the file, " if mirror_variable else ""
    wanted = remotes[0]
    next_step = (f" Next: {mirror}download {wanted.url} yourself and save it as {folder / wanted.filename} "
                 "(it is verified on use), or pass data_source='offline' to run on the offline substitute.")
    if corrupt:
        raise CorruptDownloadError(
            f"{subdir}: the download failed verification and was discarded (nothing was kept in {folder}): "
            + "; ".join(corrupt) + ("; unreachable: " + "; ".join(unreachable) if unreachable else "")
            + "." + earlier + next_step)
    raise DownloadError(f"{subdir}: no mirror could be reached (no network?): " + "; ".join(unreachable)
                        + "." + earlier + next_step)


def url_basename(url: str) -> str:
    """The unquoted last path segment of a URL ('UCI%20HAR%20Dataset.zip' -> 'UCI HAR Dataset.zip')."""
    return urllib.parse.unquote(urllib.parse.urlparse(url).path.rsplit("/", 1)[-1])


# --- derived caches: arrays computed from a verified file, keyed by its sha256 ------------------

def cached_arrays(path: Path, build: Callable[[], Mapping[str, np.ndarray]]) -> tuple[dict[str, np.ndarray], bool]:
    """Load the arrays saved at `path` (.npz), or build, save (atomically) and return them.

    Returns (arrays, hit). Name `path` after the sha256 of the file the arrays come from and the
    version of the code that derives them, so a new file or new processing never reads stale
    arrays. An unreadable cache file (truncated, damaged) is rebuilt, not trusted, with a
    DataCacheWarning naming it and why.
    """
    if path.is_file():
        try:
            # Opened here, not by np.load: np.load leaves the file it opened unclosed when the zip
            # inside cannot be read (a truncated .npz), and this `with` closes it whatever happens.
            with open(path, "rb") as stream, np.load(stream, allow_pickle=False) as stored:
                return {name: stored[name] for name in stored.files}, True
        except (OSError, ValueError, zipfile.BadZipFile, EOFError, zlib.error) as exc:
            path.unlink(missing_ok=True)
            warnings.warn(DataCacheWarning(f"the cached arrays {path} could not be read ({type(exc).__name__}: "
                                           f"{exc}); removed them and built them again"), stacklevel=2)
    arrays = {name: np.asarray(value) for name, value in build().items()}
    path.parent.mkdir(parents=True, exist_ok=True)

    def save(temporary: Path) -> None:
        with open(temporary, "wb") as stream:
            np.savez(stream, **arrays)

    write_atomic(path, save, suffix=PART_SUFFIX)
    return arrays, False
