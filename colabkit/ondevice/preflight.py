"""The device run's pre-flight (`python -m colabkit.ondevice preflight`): the first thing `./run.sh on-device`
runs, before the pack is installed and before any stage spends the lent minutes. In a second or two it checks
what would make the whole run worthless, and refuses (one line, exit 2) or says it:

- the Python: 3.12, the image's, which every wheel of the pack is built for;
- where the zip goes: `$OUT` must be a folder a file can be written in (a device call brings back only what
  `$OUT` holds), with room for the largest zip the run writes there (ZIP_LIMIT_BYTES: the zip is built in the
  run's folder, and only a finished one is put in `$OUT`); unset or empty, the run's own folder, said in the
  first line;
- the pack: every file `manifest.json` names is there with its sha256, and no wheel lies beside them that the
  manifest does not name (`pip install .device/wheels/*.whl` would install it unchecked);
- the image: the packages the pack relies on (the manifest's `image`: what its closure check found the image
  gives) and the backends the presets run on (`image_backends`) against this machine's; a package the pack
  relies on that is missing is refused; a version other than device/image.txt's, or a backend missing, is said
  in one line and kept (`preflight.json`, which the run copies into `device.json`);
- the run's own folder can be created and written in.

It runs on the checkout's colabkit, not the pack's: the standard library only.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import platform
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from colabkit.errors import DevicePackError

PYTHON = (3, 12)  # the image's python3 (3.12.3): every wheel of the pack is built for it
MANIFEST = "manifest.json"
PREFLIGHT = "preflight.json"  # in the run's folder; the closing copies it into device.json
ZIP_LIMIT_BYTES = 16 * 2**20  # the zip's limit: one file a device call brings back (colabkit.ondevice.bundle)


@dataclass
class Preflight:
    """What the pre-flight found: where the zip goes (and whether that was chosen for want of $OUT), the pack
    checked, the image's packages against device/image.txt."""

    python: str
    zip_to: str
    zip_to_fallback: bool
    pack_files: int
    pack_bytes: int
    image_checked: dict[str, str | None] = field(default_factory=dict)  # name -> version here (None: absent)
    image_compared: int = 0  # of those, the ones whose version device/image.txt gives (the rest: '?', not read)
    image_differences: list[str] = field(default_factory=list)

    def image_line(self) -> str:
        """One line: the image as listed, or each difference."""
        if not self.image_differences:
            return (f"pre-flight: the {len(self.image_checked)} image packages the pack and the presets rely on are "
                    f"here, the {self.image_compared} whose version device/image.txt gives at that version")
        return ("pre-flight: this image differs from device/image.txt, which the pack was checked against: "
                + "; ".join(self.image_differences))


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_writable(folder: Path, label: str) -> None:
    """`folder` exists (or is created) and takes a file: a DevicePackError naming it (as `label`) otherwise."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".colabkit-preflight-"):
            pass
    except OSError as error:
        raise DevicePackError(f"{label}: cannot write a file there ({error.strerror or error}); nothing was "
                              "run") from error


def check_room(folder: Path, label: str) -> None:
    """`folder` has room for the largest zip the run writes there (ZIP_LIMIT_BYTES): a DevicePackError naming it
    (as `label`) otherwise."""
    free = shutil.disk_usage(folder).free
    if free < ZIP_LIMIT_BYTES:
        raise DevicePackError(f"{label}: {free / 2**20:.1f} MiB free, under the {ZIP_LIMIT_BYTES / 2**20:.0f} MiB "
                              "the zip may take; nothing was run (free some room, or point $OUT elsewhere)")


def check_zip_place(out_env: str | None, run_folder: Path) -> tuple[Path, bool]:
    """Where the zip goes: $OUT when set (an existing folder that takes a file and has room for the zip), else the
    run's folder."""
    if not out_env:
        return run_folder, True
    place = Path(out_env)
    if not place.is_dir():
        raise DevicePackError(f"$OUT={out_env}: " + ("not a folder" if place.exists() else "no such folder")
                              + " (the device call brings back what $OUT holds); nothing was run")
    check_writable(place, f"$OUT={out_env}")
    check_room(place, f"$OUT={out_env}")
    return place, False


def check_pack(pack: Path) -> dict:
    """Every file of the manifest present at its sha256, and no unnamed wheel beside them; the manifest."""
    try:
        manifest = json.loads((pack / MANIFEST).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DevicePackError(f"no device pack in {pack}/ (no {MANIFEST}): run ./run.sh device-pack here first, "
                              f"then carry {pack}") from None
    except (OSError, ValueError) as error:
        raise DevicePackError(f"{pack / MANIFEST} cannot be read ({error}): build the pack again "
                              "(./run.sh device-pack)") from error
    named = set()
    for entry in manifest.get("entries") or []:
        path = pack / entry["path"]
        named.add(path.resolve())
        if not path.is_file():
            raise DevicePackError(f"{path}: named in {MANIFEST} but missing; nothing was installed (build the pack "
                                  "again: ./run.sh device-pack)")
        if _sha256(path) != entry["sha256"]:
            raise DevicePackError(f"{path}: its sha256 is not the one {MANIFEST} gives (changed after the pack was "
                                  "built); nothing was installed (build the pack again: ./run.sh device-pack)")
    stray = sorted(str(path) for path in (pack / "wheels").glob("*.whl") if path.resolve() not in named)
    if stray:
        raise DevicePackError(f"{', '.join(stray)}: not in {MANIFEST} (pip would install it unchecked); nothing "
                              "was installed (remove it, or build the pack again)")
    return manifest


def version_here(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def same_release(here: str, listed: str) -> bool:
    """'2.11.0+cu130' is the listed '2.11.0': a local build label names the build, not the release."""
    return here.split("+", 1)[0] == listed.split("+", 1)[0]


def compare_image(listed: dict[str, str | None]) -> tuple[dict[str, str | None], list[str]]:
    """Each package's version here, and a phrase for each that differs from its listed version (None: not read
    there, so nothing to compare) or is absent here."""
    found = {name: version_here(name) for name in sorted(listed)}
    differences = [f"{name} {here} (listed {listed[name]})" for name, here in found.items()
                   if here is not None and listed[name] is not None and not same_release(here, listed[name] or "")]
    differences += [f"{name} not installed (listed {listed[name] or 'with its version not read'})"
                    for name, here in found.items() if here is None]
    return found, differences


def preflight(pack: Path, run_folder: Path, out_env: str | None) -> Preflight:
    """Every check in turn (the cheap ones first); a DevicePackError on the first refusal."""
    python = platform.python_version()
    if sys.version_info[:2] != PYTHON:
        raise DevicePackError(f"{sys.executable} is Python {python}; the pack is built for Python "
                              f"{PYTHON[0]}.{PYTHON[1]}, the image's python3 (set DEVICE_PYTHON)")
    zip_to, fallback = check_zip_place(out_env, run_folder)
    manifest = check_pack(pack)
    relied_on = manifest.get("image", {})
    missing = sorted(name for name in relied_on if version_here(name) is None)
    if missing:
        raise DevicePackError(f"this image lacks {', '.join(missing)}, which the pack relies on it for "
                              "(device/image.txt); nothing was installed")
    check_writable(run_folder, f"the run's folder {run_folder}")
    if fallback:
        check_room(run_folder, f"the run's folder {run_folder} (the zip's place: $OUT is not set)")
    listed = {**manifest.get("image_backends", {}), **relied_on}
    found, differences = compare_image(listed)
    size = sum(int(entry["bytes"]) for entry in manifest.get("entries") or [])
    return Preflight(python, str(zip_to), fallback, len(manifest.get("entries") or []), size, found,
                     sum(version is not None for version in listed.values()), differences)


def announce(found: Preflight, run_folder: Path, echo: Callable[[str], None] = print) -> None:
    """The pre-flight's lines (where the zip goes first), and its findings kept in the run's folder."""
    if found.zip_to_fallback:
        echo(f"on-device: $OUT is not set: the zip goes to {found.zip_to}/ (a device call brings back only what "
             "$OUT holds)")
    else:
        echo(f"on-device: the zip goes to $OUT ({found.zip_to})")
    echo(f"pre-flight: Python {found.python}; the pack's {found.pack_files} files match {MANIFEST} "
         f"({found.pack_bytes / 2**20:.1f} MiB)")
    echo(found.image_line())
    (run_folder / PREFLIGHT).write_text(json.dumps(asdict(found), indent=2) + "\n", encoding="utf-8")
