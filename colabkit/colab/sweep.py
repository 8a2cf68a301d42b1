"""Sweeping from a Colab runtime: the suite's files, the runtime's device, and getting results out.

notebooks/colab_sweep.ipynb strings these together: find the suite's notebooks and grid files (the
checkout, or the copy installed with colabkit), detect the runtime's device, sweep its combinations,
build the report, zip the outputs and hand the zip over (a browser download; a copy on Google Drive
only when asked). Run it on a CPU, a GPU and a TPU runtime and merge the three zips with
`python -m colabkit report` for the full comparison.
"""

from __future__ import annotations

import datetime as dt
import shutil
from collections.abc import Callable
from pathlib import Path

from colabkit.colab.runtime import in_colab
from colabkit.errors import ColabkitError
from colabkit.suite import SUITE_FOLDERS, suite_root

DRIVE_MOUNT = Path("/content/drive")  # where Colab mounts Google Drive; MyDrive is inside
DEVICE_PREFERENCE = ("tpu", "gpu", "cpu")


def suite_checkout() -> Path:
    """The folder holding the suite's notebooks/ and parameters/.

    The checkout colabkit runs from, when it runs from one (a clone, an editable install); else the
    copy installed with the package (`pip install git+...`, what the Colab set-up cell does), which
    comes from the same commit as the code running it. ColabkitError when neither is there (a
    colabkit built without its notebooks).
    """
    root = suite_root()
    if not all((root / folder).is_dir() for folder in SUITE_FOLDERS):
        raise ColabkitError(f"this colabkit has no notebooks/ and parameters/ ({root}): reinstall it from its "
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
        raise ColabkitError(f"nothing to archive: {folder} is not a folder")
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
