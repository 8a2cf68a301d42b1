"""`python tools/device_pack.py [--out .device]` (`./run.sh device-pack`): the wheels the device image lacks,
colabkit's own wheel, data files and a manifest, in one folder (`.device/`) that a device call carries. Run here,
in a checkout with a package registry (docs/device.md): it is not part of the installed package.

Every wheel is CPython 3.12 for manylinux x86-64 (or pure Python), fetched once into a cache with pip and
copied from there; a name the image has is refused (two versions of one package stop the install there);
every requirement of every wheel, and colabkit's own, must be met by the pack or the image, at a version
the requirement allows wherever the image's version is known. Real dataset files already in colabkit's
data cache go in while the pack stays under its limit (the device has no network: without them the
notebooks use their offline substitutes, and their records say so). The folder is built beside its place
and swapped in whole: a failed build leaves the last pack as it was.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from email.parser import Parser
from pathlib import Path
from typing import Any

from colabkit.data.common import MIRRORS, PACKAGE_FILES_ENV
from colabkit.data.download import data_dir, sha256_of
from colabkit.errors import ColabkitError, DevicePackError
from colabkit.ondevice.preflight import MANIFEST
from colabkit.suite import checkout_root
from device_lists import IMAGE_LIST, PACK_LIST, ImagePackage, PackItem, normalized, read_image, read_pack

PACK_LIMIT_BYTES = 40 * 2**20  # the limit; a device call carries 64 MiB of working tree in all
PYTHON_VERSION = "3.12"  # the image's python3 (3.12.3)
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_26_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64", "manylinux1_x86_64")
# What the device run imports beyond colabkit's own requirements: Keras 3, on the image's JAX (and PyTorch).
EXTRA_ROOTS = ("keras",)
# The image's packages the device presets run their models on: the pre-flight compares their versions there
# with device/image.txt's beside those the closure relies on (colabkit does not require them: Keras's backends).
IMAGE_BACKENDS = ("jax", "jaxlib", "torch")
# A requirement's environment markers as the image evaluates them.
MARKER_ENVIRONMENT = {"python_version": PYTHON_VERSION, "python_full_version": "3.12.3", "sys_platform": "linux",
                      "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix",
                      "implementation_name": "cpython", "platform_python_implementation": "CPython", "extra": ""}
DEFAULT_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "colabkit" / "device-wheels"


@dataclass(frozen=True)
class Closure:
    """What check_closure found: why each pack package is there, and the image's packages it relies on (normalized
    name -> device/image.txt's version, None where that was not read)."""

    why: dict[str, str]
    image: dict[str, str | None]


@dataclass(frozen=True)
class Entry:
    """One file of the pack: a wheel, colabkit's wheel, a data file taken out of a wheel, or a dataset file."""

    kind: str  # "wheel", "colabkit", "package-file", "dataset"
    name: str
    version: str
    path: str  # relative to the pack folder
    sha256: str
    bytes: int
    why: str


def wheel_name_version(path: Path) -> tuple[str, str]:
    name, version = path.name.split("-")[:2]
    return normalized(name), version


def cached_wheel(cache: Path, item: PackItem) -> Path | None:
    return next((path for path in sorted(cache.glob("*.whl"))
                 if wheel_name_version(path) == (normalized(item.name), item.version)), None)


def download(items: Iterable[PackItem], cache: Path, echo: Callable[[str], None]) -> dict[str, Path]:
    """Each item's wheel from the cache, the missing ones fetched by pip in one call; normalized name -> path."""
    items = list(items)
    missing = [item for item in items if cached_wheel(cache, item) is None]
    if missing:
        cache.mkdir(parents=True, exist_ok=True)
        echo(f"device-pack: fetching {len(missing)} wheel(s) into {cache}")
        command = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps",
                   "--only-binary=:all:", "--python-version", PYTHON_VERSION, "--implementation", "cp",
                   *(part for platform in PLATFORMS for part in ("--platform", platform)), "-d", str(cache),
                   *(item.requirement for item in missing)]
        fetched = subprocess.run(command, capture_output=True, text=True)
        if fetched.returncode != 0:
            said = (fetched.stderr.strip().splitlines() or ["no output"])[-1]
            raise DevicePackError(f"pip could not fetch the pack's wheels ({said}); a package registry must be "
                                  "reachable for ./run.sh device-pack")
    found = {normalized(item.name): cached_wheel(cache, item) for item in items}
    absent = sorted(name for name, path in found.items() if path is None)
    if absent:
        raise DevicePackError(f"no CPython {PYTHON_VERSION} manylinux x86-64 wheel found for: {', '.join(absent)}")
    return {name: path for name, path in found.items() if path is not None}


def requirements_of(wheel: Path) -> list[str]:
    """The wheel's Requires-Dist lines (its METADATA)."""
    with zipfile.ZipFile(wheel) as archive:
        metadata = next(name for name in archive.namelist() if name.endswith(".dist-info/METADATA"))
        text = archive.read(metadata).decode("utf-8")
    return Parser().parsestr(text).get_all("Requires-Dist") or []


def check_closure(roots: list[str], wheels: dict[str, Path], versions: dict[str, str],
                  image: dict[str, ImagePackage]) -> Closure:
    """Every requirement reachable from `roots` met by the pack (`versions`) or the image; why each pack
    package is there (normalized name -> 'colabkit' or 'needed by X') and which image packages it relies on.
    DevicePackError lists every gap."""
    from packaging.requirements import Requirement

    why: dict[str, str] = {}
    relied_on: dict[str, str | None] = {}
    problems: list[str] = []
    expanded: set[tuple[str, str]] = set()  # (package, extra) whose requirements are queued
    pending = [(requirement, "colabkit", "") for requirement in roots]
    while pending:
        text, needed_by, extra = pending.pop(0)
        requirement = Requirement(text)
        if requirement.marker is not None and not requirement.marker.evaluate({**MARKER_ENVIRONMENT, "extra": extra}):
            continue
        name = normalized(requirement.name)
        in_image = image.get(name)
        version = versions.get(name) or (in_image.version if in_image else None)
        if name not in versions and in_image is None:
            problems.append(f"{needed_by} needs {text}: neither the image ({IMAGE_LIST}) nor the pack "
                            f"({PACK_LIST}) has {requirement.name}")
            continue
        if version is not None and requirement.specifier and not requirement.specifier.contains(version, True):
            where = "the pack" if name in versions else "the image"
            problems.append(f"{needed_by} needs {text}, and {where} has {requirement.name} {version}")
        if name in versions and name not in why:
            why[name] = "colabkit" if needed_by == "colabkit" else f"needed by {needed_by}"
        elif name not in versions and in_image is not None:
            relied_on[name] = in_image.version
        for wanted in ("", *sorted(requirement.extras)) if name in versions else ():
            if (name, wanted) not in expanded:  # an extra (bleach[css]) brings the requirements marked with it
                expanded.add((name, wanted))
                pending += [(child, f"{name}[{wanted}]" if wanted else name, wanted)
                            for child in requirements_of(wheels[name])]
    unused = sorted(set(versions) - set(why))
    if unused:
        problems.append(f"in {PACK_LIST} but needed by nothing: {', '.join(unused)}")
    if problems:
        raise DevicePackError("the pack does not hold together:\n  " + "\n  ".join(problems))
    return Closure(why, dict(sorted(relied_on.items())))


def _entry(kind: str, name: str, version: str, path: Path, pack: Path, why: str) -> Entry:
    return Entry(kind, name, version, str(path.relative_to(pack)), sha256_of(path), path.stat().st_size, why)


def _package_files(item: PackItem, wheel: Path, pack: Path) -> list[Entry]:
    """The item's files taken out of its wheel into package-files/<name>-<version>/<path in the package>."""
    folder = pack / "package-files" / f"{item.name}-{item.version}"
    entries = []
    with zipfile.ZipFile(wheel) as archive:
        for inside in item.files:
            top, _, relative = inside.partition("/")
            if top != item.name or not relative:
                raise DevicePackError(f"{PACK_LIST}: {item.name}: {inside!r} must be a path inside the package "
                                      f"({item.name}/...)")
            try:
                data = archive.read(inside)
            except KeyError:
                raise DevicePackError(f"{wheel.name} has no {inside}") from None
            target = folder / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            entries.append(_entry("package-file", item.name, item.version, target, pack,
                                  f"read by the offline substitute without installing {item.name} "
                                  f"(${PACKAGE_FILES_ENV})"))
    return entries


def _datasets(pack: Path, room: int, echo: Callable[[str], None]) -> list[Entry]:
    """Real dataset files from colabkit's data cache (each checked against its pin where it has one), while they fit."""
    entries = []
    for dataset, remotes in MIRRORS.items():
        cached = data_dir() / remotes[0].filename
        if not cached.is_file():
            continue
        size = cached.stat().st_size
        if size > room:
            echo(f"device-pack: {cached} ({size / 2**20:.1f} MiB) left out: the pack would pass its limit")
            continue
        if remotes[0].sha256 and sha256_of(cached) != remotes[0].sha256:
            echo(f"device-pack: {cached} left out: its sha256 is not the pinned one")
            continue
        target = pack / "data" / cached.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(cached, target)
        entries.append(_entry("dataset", dataset, "-", target, pack, f"the real {dataset} data (from {cached.parent})"))
        room -= size
    return entries


def build_pack(root: Path, out: Path, cache: Path = DEFAULT_CACHE, *, limit: int = PACK_LIMIT_BYTES,
               echo: Callable[[str], None] = print) -> dict[str, Any]:
    """Build the pack for the checkout at `root` into `out` (replaced whole); its manifest."""
    from colabkit.sweep.runners.colab.sessions import build_wheel

    image = read_image(root / IMAGE_LIST)
    items = read_pack(root / PACK_LIST)
    clash = sorted(item.name for item in items if normalized(item.name) in image)
    if clash:
        raise DevicePackError(f"{PACK_LIST} lists what the image has ({', '.join(clash)}): two versions of one "
                              "package stop the install there; carry only what the image lacks")
    wheels = download(items, cache, echo)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        built = build_wheel(Path(tempfile.mkdtemp(dir=staging)))
        roots = [text for text in requirements_of(built) if "extra ==" not in text] + list(EXTRA_ROOTS)
        installed = [item for item in items if not item.files]
        versions = {normalized(item.name): item.version for item in installed}
        closure = check_closure(roots, wheels, versions, image)
        why = closure.why
        unrehearsed = sorted(image[name].name for name in closure.image if image[name].rehearsal is None)
        if unrehearsed:  # the device run's pre-flight refuses an image without them: the rehearsal's venv would be one
            raise DevicePackError(f"{IMAGE_LIST}: the pack relies on the image for {', '.join(unrehearsed)}, which "
                                  "the rehearsal column leaves out ('-'): pin it there, so the rehearsal's venv holds "
                                  "what the pack needs of the image")
        (staging / "wheels").mkdir()
        colabkit_wheel = staging / "wheels" / built.name
        shutil.move(built, colabkit_wheel)
        shutil.rmtree(built.parent)
        entries = [_entry("colabkit", "colabkit", wheel_name_version(colabkit_wheel)[1], colabkit_wheel, staging,
                          "colabkit itself, built from this checkout")]
        for item in installed:
            target = staging / "wheels" / wheels[normalized(item.name)].name
            shutil.copy2(wheels[normalized(item.name)], target)
            entries.append(_entry("wheel", item.name, item.version, target, staging, why[normalized(item.name)]))
        for item in items:
            if item.files:
                entries += _package_files(item, wheels[normalized(item.name)], staging)
        entries += _datasets(staging, limit - sum(entry.bytes for entry in entries), echo)
        total = sum(entry.bytes for entry in entries)
        if total > limit:
            raise DevicePackError(f"the pack is {total / 2**20:.1f} MiB, over its {limit / 2**20:.0f} MiB: carry "
                                  f"fewer wheels in {PACK_LIST}")
        manifest = {"created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                    "python": PYTHON_VERSION, "platforms": list(PLATFORMS), "total_bytes": total, "limit_bytes": limit,
                    "datasets": sorted(entry.name for entry in entries if entry.kind == "dataset"),
                    # what the pre-flight compares on the device: the image's packages the closure relies on, and
                    # the backends the presets run on, at device/image.txt's versions (None: not read there)
                    "image": closure.image,
                    "image_backends": {name: image[name].version for name in IMAGE_BACKENDS if name in image},
                    "entries": [asdict(entry) for entry in entries]}
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        (staging / "manifest.txt").write_text(manifest_table(manifest), encoding="utf-8")
        previous = out.with_name(f".{out.name}-old")
        shutil.rmtree(previous, ignore_errors=True)
        if out.exists():
            out.rename(previous)
        staging.rename(out)
        shutil.rmtree(previous, ignore_errors=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return manifest


def manifest_table(manifest: dict[str, Any]) -> str:
    """The manifest as a plain table: name, version, MiB, sha256 (first 16), why; the total last."""
    rows = [f"{'kind':<13}{'name':<26}{'version':<18}{'MiB':>7}  {'sha256':<16}  why"]
    rows += [f"{entry['kind']:<13}{entry['name']:<26}{entry['version']:<18}{entry['bytes'] / 2**20:>7.2f}  "
             f"{entry['sha256'][:16]}  {entry['why']}" for entry in manifest["entries"]]
    rows.append(f"total {manifest['total_bytes'] / 2**20:.1f} MiB of {manifest['limit_bytes'] / 2**20:.0f} MiB "
                f"in {len(manifest['entries'])} files; real datasets: {', '.join(manifest['datasets']) or 'none'}")
    return "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    """The pack written (its manifest printed); one line on stderr and 2 on a user error."""
    parser = argparse.ArgumentParser(prog="python tools/device_pack.py", description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=".device", help="the pack folder (default: .device)")
    parser.add_argument("--cache", default=None, help="where fetched wheels are kept between builds "
                                                      "(default: ~/.cache/colabkit/device-wheels)")
    args = parser.parse_args(argv)
    try:
        root = checkout_root()
        if root is None:
            raise ColabkitError("device-pack builds from a checkout of colabkit: run it in a clone")
        manifest = build_pack(root, Path(args.out), Path(args.cache) if args.cache else DEFAULT_CACHE)
    except ColabkitError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(manifest_table(manifest), end="")
    print(f"device-pack: {args.out} written ({manifest['total_bytes'] / 2**20:.1f} MiB, under "
          f"{manifest['limit_bytes'] / 2**20:.0f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
