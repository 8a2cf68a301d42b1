"""Sweeping from a Colab runtime: the suite's files, the runtime's device, and getting results out.

notebooks/colab_sweep.ipynb strings these together: find the suite's notebooks and grid files (the
checkout, or the copy installed with colabkit), detect the runtime's device, sweep its combinations,
build the report, zip the outputs and hand the zip over (a browser download; a copy on Google Drive
only when asked). Run it on a CPU, a GPU and a TPU runtime and merge the three zips with
`python -m colabkit report` for the full comparison, or in Colab with notebooks/report.ipynb, whose
`sweep_zips` brings the zips in (an upload, or a zip, folder or Drive path: `unpack_sweep_zips`). (A sweep
that drives Colab runtimes from another machine is colabkit.sweep.runners.colab's: `sweep --colab`.)
"""

from __future__ import annotations

import datetime as dt
import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path

from colabkit.colab.runtime import in_colab
from colabkit.errors import FolderNotFoundError, SuiteNotFoundError
from colabkit.io import inside, safe_name
from colabkit.suite import SUITE_FOLDERS, suite_root

DRIVE_MOUNT = Path("/content/drive")  # where Colab mounts Google Drive; MyDrive is inside
DEVICE_PREFERENCE = ("tpu", "gpu", "cpu")


def suite_checkout() -> Path:
    """The folder holding the suite's notebooks/ and parameters/.

    The checkout colabkit runs from, when it runs from one (a clone, an editable install); else the
    copy installed with the package (`pip install git+...`, what the Colab set-up cell does), which
    comes from the same commit as the code running it. SuiteNotFoundError when neither is there (a
    colabkit built without its notebooks).
    """
    root = suite_root()
    if not all((root / folder).is_dir() for folder in SUITE_FOLDERS):
        raise SuiteNotFoundError(f"this colabkit has no notebooks/ and parameters/ ({root}): reinstall it from its "
                            "repository (pip install git+https://github.com/OWNER/NAME@REF) or run from a clone")
    return root


def best_device(available: dict[str, int]) -> str:
    """The device a sweep on this runtime measures: its TPU, else its GPU, else its CPU."""
    for kind in DEVICE_PREFERENCE:
        if available.get(kind):
            return kind
    return "cpu"


def archive_outputs(folder: str | Path, label: str) -> Path:
    """A zip of `folder` beside it, named `<folder>-<label>-<UTC time>.zip` (never overwriting one)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FolderNotFoundError(f"nothing to archive: {folder} is not a folder")
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    base = folder.with_name(f"{folder.name}-{label}-{stamp}")
    return Path(shutil.make_archive(str(base), "zip", root_dir=folder.parent, base_dir=folder.name))


def deliver(archive: str | Path, *, download: bool = True, drive_folder: str | None = None,
            echo: Callable[[str], None] = print) -> list[str]:
    """Hand `archive` to the user: in Colab a browser download (if `download`) and a copy in
    MyDrive/<drive_folder> (only if a folder is given: Drive is mounted only when asked).
    Outside Colab it stays where it is. Returns what was done, one line each."""
    archive = Path(archive)
    done = [f"archive: {archive} ({archive.stat().st_size / 2**20:.1f} MiB)"]
    if in_colab():
        if drive_folder:
            from google.colab import drive

            drive.mount(str(DRIVE_MOUNT))
            destination = DRIVE_MOUNT / "MyDrive" / drive_folder
            destination.mkdir(parents=True, exist_ok=True)
            done.append(f"copied to Google Drive: {shutil.copy2(archive, destination / archive.name)}")
        if download:
            from google.colab import files

            files.download(str(archive))
            done.append("download started in the browser")
    for line in done:
        echo(line)
    return done


def unpack_sweep_zips(source: str, into: str | Path = "outputs/sweep-zips", *,
                      upload: Callable[[], dict[str, bytes]] | None = None) -> list[Path]:
    """The sweeps' zips (archive_outputs) unpacked, one folder each under `into`, for the report to merge.

    `source` is "upload" (in Colab, the browser's file picker: google.colab.files.upload, or `upload`), a
    zip, or a folder holding zips; a path under MyDrive/ (or /content/drive) mounts Google Drive first.
    Each zip's folder is named after the zip, made a plain name first (colabkit.io.safe_name: a zip called
    `...zip` unpacks into `into/sweep`, never into `into/..`), '-2', '-3' added where two zips of one call
    come to the same name, and checked inside `into` once resolved (a link there pointing out is refused);
    an upload is kept as `into/<that name>.zip`. FolderNotFoundError when the path holds no zip, or a zip
    is unreadable or would write outside its folder (nothing of that zip is unpacked).
    """
    into = Path(into)
    names: dict[str, int] = {}

    def folder_for(name: str) -> str:  # a plain name, unique among this call's zips
        base = safe_name(name.removesuffix(".zip"), "sweep")
        names[base] = names.get(base, 0) + 1
        return base if names[base] == 1 else f"{base}-{names[base]}"

    if source == "upload":
        if upload is None:
            from google.colab import files  # only in Colab: nowhere else is there a browser to upload from

            upload = files.upload
        into.mkdir(parents=True, exist_ok=True)
        zips = []
        for name, content in upload().items():
            kept = inside(into, f"{folder_for(Path(name).name)}.zip")
            if kept is None:
                raise FolderNotFoundError(f"upload {name!r}: {into} holds a link that leads outside it; not kept")
            kept.write_bytes(content)
            zips.append((kept, kept.stem))  # its folder: the name it is kept under
    else:
        path = Path(source)
        if in_colab() and (source.startswith("MyDrive") or path.is_relative_to(DRIVE_MOUNT)):
            from google.colab import drive

            drive.mount(str(DRIVE_MOUNT))
            path = path if path.is_absolute() else DRIVE_MOUNT / path
        found = sorted(path.glob("*.zip")) if path.is_dir() else [path] if path.is_file() else []
        zips = [(archive, folder_for(archive.name)) for archive in found]
    if not zips:
        raise FolderNotFoundError(f"no sweep zip in {source!r}: give 'upload', a .zip, or a folder holding them")
    return [_unpack(archive, into, name) for archive, name in zips]


def _unpack(archive: Path, into: Path, name: str) -> Path:
    """`archive` unpacked into `into/name` (a plain name), every member checked inside it before any is written."""
    folder = inside(into, name, name=True)
    if folder is None:
        raise FolderNotFoundError(f"{archive}: its folder {into / name} leads outside {into}; not unpacked")
    try:
        with zipfile.ZipFile(archive) as opened:
            outside = [member for member in opened.namelist() if inside(folder, member) is None]
            if outside:
                raise FolderNotFoundError(f"{archive}: would write outside its folder ({outside[0]}); not unpacked")
            opened.extractall(folder)
    except zipfile.BadZipFile as exc:
        raise FolderNotFoundError(f"{archive}: not a readable zip ({exc})") from exc
    return folder
