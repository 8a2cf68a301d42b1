"""colabkit.io: the one atomic write every product of the suite goes through."""

from __future__ import annotations

import json
import os
from enum import StrEnum
from pathlib import Path

import numpy as np
import pytest

from colabkit.io import json_value, write_atomic, write_json_atomic


def names(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir())


def test_text_bytes_and_writer_callables_land_complete(tmp_path):
    assert write_atomic(tmp_path / "a.txt", "héllo\n").read_text(encoding="utf-8") == "héllo\n"
    assert write_atomic(tmp_path / "b.bin", b"\x00\x01").read_bytes() == b"\x00\x01"

    def save(temporary: Path) -> None:
        with open(temporary, "wb") as stream:
            np.savez(stream, x=np.arange(3))

    write_atomic(tmp_path / "c.npz", save)
    with np.load(tmp_path / "c.npz") as stored:
        assert stored["x"].tolist() == [0, 1, 2]
    assert names(tmp_path) == ["a.txt", "b.bin", "c.npz"]  # no temporary left beside them


def test_a_failed_write_keeps_the_old_content_and_removes_its_temporary(tmp_path):
    target = write_atomic(tmp_path / "r.txt", "old")

    def broken(temporary: Path) -> None:
        temporary.write_text("half of the ne")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_atomic(target, broken, suffix=".part")
    assert target.read_text() == "old" and names(tmp_path) == ["r.txt"]


def test_new_files_get_the_umask_mode_not_the_temporary_0600_and_old_files_keep_theirs(tmp_path):
    previous = os.umask(0o027)
    try:
        assert write_atomic(tmp_path / "new.txt", "x").stat().st_mode & 0o777 == 0o640
    finally:
        os.umask(previous)
    kept = tmp_path / "script.sh"
    kept.write_text("old")
    kept.chmod(0o755)
    assert write_atomic(kept, "new").stat().st_mode & 0o777 == 0o755
    assert write_atomic(tmp_path / "shared.json", "{}", mode=0o644).stat().st_mode & 0o777 == 0o644


def test_a_named_temporary_is_used_and_then_gone(tmp_path):
    temporary = tmp_path / ".page.running.html"
    write_atomic(tmp_path / "page.html", "<p>", temporary=temporary)
    assert not temporary.exists() and (tmp_path / "page.html").read_text() == "<p>"


class Colour(StrEnum):
    RED = "red"


def test_json_values_are_plain(tmp_path):
    payload = {"status": Colour.RED, "n": np.int64(3), "xs": (np.float32(0.5), float("nan")), "p": tmp_path}
    plain = json_value(payload)
    assert plain == {"status": "red", "n": 3, "xs": [0.5, None], "p": str(tmp_path)}
    assert type(plain["status"]) is str and type(plain["n"]) is int
    path = write_json_atomic(tmp_path / "r.json", payload)
    assert json.loads(path.read_text(encoding="utf-8")) == plain


def test_safe_name_and_inside_keep_what_comes_from_outside_in_its_folder(tmp_path):
    from colabkit.io import inside, safe_name

    assert [safe_name(text, "x") for text in ("..", "", "/", ".hidden", "a b/c", "smoke-gpu-1", "v1.2_")] == [
        "x", "x", "x", "hidden", "a_b_c", "smoke-gpu-1", "v1.2"]
    assert inside(tmp_path, "a/b.json") == tmp_path.resolve() / "a" / "b.json"
    assert inside(tmp_path, "../b.json") is None and inside(tmp_path, "/etc/passwd") is None
    (tmp_path / "out").symlink_to(tmp_path.parent)
    assert inside(tmp_path, "out/b.json") is None  # a link that leads out is followed, then refused


def test_a_name_is_never_a_path(tmp_path):
    from colabkit.io import inside, is_name

    assert [is_name(text) for text in ("cnn_mnist", "n-256_lr-0.001", "..x", "", ".", "..", "a/b", "a\\b", "a\0")] \
        == [True, True, True, False, False, False, False, False, False]
    assert inside(tmp_path, "run.json", name=True) == tmp_path.resolve() / "run.json"
    assert [inside(tmp_path, text, name=True) for text in ("a/run.json", "..", ".", "/etc")] == [None] * 4
