"""The two lists the pack is built from: what the device image has (device/image.txt) and what the pack
carries (device/pack.txt). Plain text, read here; a malformed line is a DevicePackError naming it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from colabkit.errors import DevicePackError

IMAGE_LIST = Path("device") / "image.txt"
PACK_LIST = Path("device") / "pack.txt"
UNREAD = "?"  # the image's version was not read
SAME = "="  # the rehearsal installs the image's own version
ABSENT = "-"  # not in the rehearsal venv


def normalized(name: str) -> str:
    """A distribution name as PEP 503 compares them: 'Jupyter_Core' -> 'jupyter-core'."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class ImagePackage:
    """One package of the device image: its version there (None: not read) and the rehearsal's pin (None: left out)."""

    name: str
    version: str | None
    rehearsal: str | None


@dataclass(frozen=True)
class PackItem:
    """One line of the pack list: a wheel to carry, or (`files`) the paths to take out of it."""

    name: str
    version: str
    files: tuple[str, ...] = ()

    @property
    def requirement(self) -> str:
        return f"{self.name}=={self.version}"


def _lines(path: Path) -> list[tuple[int, str]]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise DevicePackError(f"cannot read {path}: {error.strerror or error}") from error
    return [(number, line.split("#", 1)[0].strip()) for number, line in enumerate(text.splitlines(), 1)
            if line.split("#", 1)[0].strip()]


def read_image(path: Path) -> dict[str, ImagePackage]:
    """device/image.txt: `name version rehearsal` per line, keyed by normalized name."""
    packages: dict[str, ImagePackage] = {}
    for number, line in _lines(path):
        fields = line.split()
        if len(fields) != 3:
            raise DevicePackError(f"{path}:{number}: expected 'name version rehearsal', got {line!r}")
        name, version, rehearsal = fields
        read = None if version == UNREAD else version
        if rehearsal == SAME and read is None:
            raise DevicePackError(f"{path}:{number}: {name}: '=' needs the image's version, which was not read")
        pinned = {ABSENT: None, SAME: read}.get(rehearsal, rehearsal)
        if normalized(name) in packages:
            raise DevicePackError(f"{path}:{number}: {name} is listed twice")
        packages[normalized(name)] = ImagePackage(name, read, pinned)
    return packages


def read_pack(path: Path) -> list[PackItem]:
    """device/pack.txt: `name==version` per line, optionally `files: PATH ...` (paths inside the wheel)."""
    items: list[PackItem] = []
    for number, line in _lines(path):
        requirement, _, files = line.partition("files:")
        name, separator, version = requirement.strip().partition("==")
        if not separator or not name or not version or " " in version.strip():
            raise DevicePackError(f"{path}:{number}: expected 'name==version [files: PATH ...]', got {line!r}")
        if separator and files and not files.split():
            raise DevicePackError(f"{path}:{number}: 'files:' names no path")
        items.append(PackItem(name.strip(), version.strip(), tuple(files.split())))
    seen = [normalized(item.name) for item in items]
    twice = sorted({name for name in seen if seen.count(name) > 1})
    if twice:
        raise DevicePackError(f"{path}: listed twice: {', '.join(twice)}")
    return items


def rehearsal_requirements(image: dict[str, ImagePackage]) -> list[str]:
    """`name==version` of every image package the rehearsal venv installs."""
    return [f"{package.name}=={package.rehearsal}" for package in image.values() if package.rehearsal]
