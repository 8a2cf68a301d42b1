"""Writing files so that a reader never sees half of one: the package's single atomic write.

Records, report pages, downloaded data and stamped notebooks go through `write_atomic`: a hidden
temporary in the same folder, then `os.replace`; a process killed mid-write leaves at most a hidden
`.<name>.<random><suffix>`, never a truncated file under the real name. What comes from outside (an
archive's own name, its members' names, a plan's notebooks and slugs, a record's notebook) is kept inside its
folder by `safe_name` and `inside` (a name by `is_name`), the one check of such paths. What the user writes in
YAML (grids, rates files) is read by `load_strict_yaml`, the one strict reader: a key given twice is refused.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from collections.abc import Callable, Mapping
from enum import Enum
from pathlib import Path
from typing import Any

import yaml

__all__ = ["inside", "is_name", "json_value", "safe_name", "write_atomic", "write_json_atomic"]


def _umask() -> int:
    """The process's umask, read without changing it where Linux tells it (os.umask can only be read
    by setting it, which would race with threads creating files meanwhile)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _default_mode(target: Path) -> int:
    """The mode a plain `open(path, "w")` would leave: the existing file's, else 0666 less the umask."""
    try:
        return target.stat().st_mode & 0o7777
    except FileNotFoundError:
        return 0o666 & ~_umask()


def write_atomic(path: str | Path, content: str | bytes | Callable[[Path], None], *, mode: int | None = None,
                 fsync: bool = False, suffix: str = ".tmp", temporary: str | Path | None = None) -> Path:
    """Put `content` at `path` atomically and return `path`.

    `content` is text (written as UTF-8), bytes, or a callable that writes the temporary file whose
    path it is given (e.g. a download, or `np.savez`). The file gets `mode` (default: what a plain
    write would give, so a temporary's private 0600 never leaks into place); with `fsync` its data
    reach the disk before the rename. The temporary is `.<name>.<random><suffix>` beside `path`,
    unless `temporary` names it (a caller that must find and remove leftovers of its own). On any
    error, the temporary is removed and the old content of `path` stays as it was.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    wanted_mode = _default_mode(target) if mode is None else mode
    if temporary is None:
        handle, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=suffix, dir=target.parent)
        os.close(handle)
        scratch = Path(name)
    else:
        scratch = Path(temporary)
    try:
        if callable(content):
            content(scratch)
        else:
            data = content.encode("utf-8") if isinstance(content, str) else bytes(content)
            with open(scratch, "wb") as stream:
                stream.write(data)
                if fsync:
                    stream.flush()
                    os.fsync(stream.fileno())
        if fsync and callable(content):
            with open(scratch, "rb") as stream:
                os.fsync(stream.fileno())
        os.chmod(scratch, wanted_mode)
        os.replace(scratch, target)
    except BaseException:
        scratch.unlink(missing_ok=True)
        raise
    return target


def json_value(value: Any) -> Any:
    """`value` as plain JSON: enum members, NumPy scalars and arrays, tuples, sets and paths converted; non-finite
    floats as None (JSON has no NaN or infinity, and a reader must not mistake them for numbers)."""
    if isinstance(value, Enum):  # a vocabulary member (e.g. RecordStatus.OK) as the plain value it stands for
        return json_value(value.value)
    if isinstance(value, Mapping):
        return {str(key): json_value(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [json_value(item) for item in value]
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "tolist") and callable(value.tolist):  # numpy arrays and scalars
        return json_value(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def write_json_atomic(path: str | Path, payload: Any, *, mode: int = 0o644) -> Path:
    """Write `payload` (through `json_value`) as indented JSON to `path`, atomically and fsynced.

    Mode 0644 by default: a record in a folder shared by several users must be readable by all.
    Raises TypeError for a value JSON cannot hold; `path` is then left untouched.
    """
    text = json.dumps(json_value(payload), indent=2, sort_keys=False, allow_nan=False)
    return write_atomic(path, text + "\n", mode=mode, fsync=True)


def safe_name(text: str, fallback: str) -> str:
    """`text` as one plain file name (an archive's name from a browser or a folder): every run of characters
    other than letters, digits, '.', '_' and '-' becomes '_', dots and '_' at either end go (no '..', no
    hidden name), at most 100 characters; `fallback` where nothing is left ('..', '', '/')."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._")[:100].rstrip("._")
    return name or fallback


def is_name(text: str) -> bool:
    """Whether `text` is one file name, never a path: not '', '.' or '..', and no '/', '\\' or NUL in it."""
    return text not in ("", ".", "..") and not any(character in text for character in "/\\\0")


def inside(parent: str | Path, relative: str | Path, *, name: bool = False) -> Path | None:
    """`parent / relative` resolved (links followed, '..' applied), or None where that lands outside `parent`
    resolved: an absolute `relative`, a '../' in it, or a link already there that points out. With `name`,
    `relative` must also be one name (is_name), directly in `parent`.

    The package's one check of a path read from a file (a plan's notebooks and runs' files, an archive's members
    and folder, a device run's zip): every reader that writes or runs what such a path names goes through it."""
    if name and not is_name(str(relative)):
        return None
    base = Path(parent).resolve()
    target = (base / relative).resolve()
    return target if target.is_relative_to(base) else None


class RepeatedKeyError(yaml.constructor.ConstructorError):
    """A YAML mapping giving one key twice; `problem` names the key, `problem_mark` where it is given again."""

    def one_line(self) -> str:
        """'`batch_size` is given twice (line 4, column 3): the last would win without a word; give each key once'."""
        mark = self.problem_mark
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        return f"{self.problem}{where}: the last would win without a word; give each key once"


class StrictLoader(yaml.SafeLoader):
    """YAML's safe loader, stricter and closer to JSON: a key given twice in a mapping is refused (the last would win
    without a word), an unquoted date stays text (a reader checks it: an impossible one is no traceback), and
    a number in exponent form without a dot ('1e-10', JSON's form) is a number, as in YAML 1.2."""

    def construct_mapping(self, node: yaml.Node, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            seen: set[Any] = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue  # `<<: *anchor` merges a mapping in: its keys may be given again after it
                key = self.construct_object(key_node, deep=True)
                if isinstance(key, (str, int, float)):  # (an unhashable key: the safe loader's own error)
                    if key in seen:
                        raise RepeatedKeyError(None, None, f"`{key}` is given twice", key_node.start_mark)
                    seen.add(key)
        return super().construct_mapping(node, deep=deep)


StrictLoader.add_constructor("tag:yaml.org,2002:timestamp", yaml.SafeLoader.construct_yaml_str)
StrictLoader.add_implicit_resolver("tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9]+(\.[0-9]*)?[eE][-+]?[0-9]+$"),
                                   list("-+0123456789"))


def load_strict_yaml(text: str) -> Any:
    """`text` parsed by StrictLoader; RepeatedKeyError for a key given twice, yaml.YAMLError for anything else."""
    return yaml.load(text, Loader=StrictLoader)  # noqa: S506 (a safe loader)
