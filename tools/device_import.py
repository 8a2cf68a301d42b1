"""`python tools/device_import.py ZIP`: a returned device run's records and the report's tables into the
checkout's `results/<gpu>-<date>/`, which `python -m colabkit report` reads like any results folder.

Kept: the records (`records/`, the sweep's layout below it), the report's tables and records.csv
(`tables/`), the gpu-check's table (`gpu-check/`, text and Markdown), and a README.md holding the run's
summary. Not kept: executed notebooks (none are zipped), figures (the report draws them again), logs (the
zip keeps them). The only JSON files are records, so the report reads no other file as one. A folder that
exists already is refused (nothing overwritten); a zip of a CPU rehearsal is refused (results/ holds real
GPU runs only).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path, PurePosixPath

from colabkit.errors import ColabkitError, DevicePackError
from colabkit.io import inside, write_atomic
from colabkit.ondevice.bundle import META, SUMMARY


def _kept(name: str) -> str | None:
    """Where a member of the zip goes in the results folder (a path below it: import_zip keeps it there with
    colabkit.io.inside), or None."""
    path = PurePosixPath(name)
    if not path.parts:
        return None
    top, rest = path.parts[0], PurePosixPath(*path.parts[1:]) if len(path.parts) > 1 else None
    if top == "results" and rest is not None and path.suffix == ".json" and not path.name.startswith("."):
        return str(PurePosixPath("records") / rest)
    if top == "report" and rest is not None and path.suffix in (".csv", ".md") and (
            rest.parts[0] == "tables" or str(rest) == "records.csv"):
        return str(PurePosixPath("tables") / rest.name)
    if top == "gpu-check" and path.name in ("table.txt", "table.md"):
        return str(PurePosixPath("gpu-check") / path.name)
    return None


def import_zip(archive: Path, results: Path) -> Path:
    """Unpack `archive` (a device run's zip) into results/<gpu>-<date>/; that folder."""
    try:
        with zipfile.ZipFile(archive) as opened:
            names = opened.namelist()
            if META not in names:
                raise DevicePackError(f"{archive} is not a device run's zip: it has no {META}")
            meta = json.loads(opened.read(META).decode("utf-8"))
            if not isinstance(meta, dict):
                raise DevicePackError(f"{archive}: its {META} is not a device run's (a JSON object)")
            if not meta.get("on_gpu"):
                raise DevicePackError(f"{archive} is a CPU rehearsal ({meta.get('device')}): results/ keeps runs "
                                      "on a real GPU only")
            named = f"{meta['slug']}-{meta['date']}"
            if inside(results, named, name=True) is None:
                raise DevicePackError(f"{archive}: its folder {named!r} (the run's slug and date) is no name in "
                                      f"{results}: nothing was imported")
            folder = results / named
            if folder.exists():
                raise DevicePackError(f"{folder} exists already: nothing was overwritten (move it away to import again)")
            staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=results if results.is_dir() else None))
            try:
                for name in names:
                    place = _kept(name)
                    if place is not None:
                        target = inside(staging, place)
                        if target is None:
                            raise DevicePackError(f"{archive}: its member {name!r} would land outside {folder}: "
                                                  "nothing was imported")
                        target.parent.mkdir(parents=True, exist_ok=True)
                        target.write_bytes(opened.read(name))
                summary = opened.read(SUMMARY).decode("utf-8") if SUMMARY in names else "(no summary in the zip)\n"
                write_atomic(staging / "README.md", _readme(meta, summary, archive.name))
                results.mkdir(parents=True, exist_ok=True)
                shutil.move(str(staging), folder)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
    except (zipfile.BadZipFile, OSError, KeyError, ValueError) as error:
        raise DevicePackError(f"cannot import {archive}: {error}") from error
    return folder


def _readme(meta: dict, summary: str, zip_name: str) -> str:
    return (f"# {meta['device']}, {meta['date']}\n\n"
            f"Records of one `./run.sh on-device` run on a lent {meta['device']} (docs/device.md), imported from "
            f"`{zip_name}` by `python tools/device_import.py`. `records/` holds the JSON records, `tables/` the "
            "report's tables, `gpu-check/` the GPU check's table. `python -m colabkit report` on this folder "
            "draws the report again.\n\nThe run's summary, as written into the zip (its last line names the zip, "
            "whose size came after):\n\n```\n" + summary + "```\n")


def main(argv: list[str] | None = None) -> int:
    """The zip imported (its folder said); one line on stderr and 2 on a user error."""
    parser = argparse.ArgumentParser(prog="python tools/device_import.py", description=__doc__.splitlines()[0])
    parser.add_argument("zip", help="the zip the device run wrote")
    parser.add_argument("--results", default="results", help="the results folder (default: results)")
    args = parser.parse_args(argv)
    try:
        folder = import_zip(Path(args.zip), Path(args.results))
    except ColabkitError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"device-import: records and tables in {folder}; `python -m colabkit report {folder}` reads them")
    return 0


if __name__ == "__main__":
    sys.exit(main())
