"""Download, verify, cache: the machinery under every dataset loader, on a local server and file:// URLs."""

from __future__ import annotations

import os
import socket
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
from data_fixtures import (
    FixtureServer,
    closed_port_url,
    har_nested_zip,
    sha256,
    weather_tarball,
)

import colabkit.data.download as download
from colabkit.data.download import (
    Remote,
    cached_arrays,
    check_tar,
    check_zip,
    data_dir,
    fetch,
    sha256_of,
    url_basename,
)
from colabkit.errors import CorruptDownloadError, CorruptFileError, DataCacheWarning, DownloadError

PAYLOAD = b"colabkit test payload " * 1000


@pytest.fixture
def server():
    with FixtureServer() as running:
        yield running


def folder_listing(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir()) if folder.exists() else []


def test_cache_dir_is_colabkit_data_else_colab_content_else_user_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("COLABKIT_DATA", str(tmp_path / "mine"))
    assert data_dir() == tmp_path / "mine"
    monkeypatch.delenv("COLABKIT_DATA")
    monkeypatch.setattr(download, "in_colab", lambda: True)
    assert data_dir() == Path("/content/colabkit_data")
    monkeypatch.setattr(download, "in_colab", lambda: False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert data_dir() == tmp_path / "xdg" / "colabkit"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert data_dir() == tmp_path / "home" / ".cache" / "colabkit"


def test_file_url_download_lands_verified_with_its_sha256_recorded(tmp_path):
    source = tmp_path / "served" / "UCI HAR Dataset.zip"
    source.parent.mkdir()
    source.write_bytes(PAYLOAD)
    fetched = fetch([Remote(source.as_uri(), "payload.bin", sha256=sha256(PAYLOAD))], "things",
                    cache_dir=tmp_path / "cache", progress=False)
    assert fetched.path == tmp_path / "cache" / "things" / "payload.bin"
    assert fetched.path.read_bytes() == PAYLOAD
    assert (fetched.sha256, fetched.size, fetched.pinned, fetched.downloaded) == (sha256(PAYLOAD), len(PAYLOAD), True, True)
    assert (fetched.path.parent / "payload.bin.sha256").read_text() == f"{sha256(PAYLOAD)}  payload.bin\n"
    assert folder_listing(fetched.path.parent) == ["payload.bin", "payload.bin.sha256"]
    assert url_basename(source.as_uri()) == "UCI HAR Dataset.zip"


def test_second_fetch_is_served_from_the_cache_without_a_request(server, tmp_path):
    remote = Remote(server.serve("/f.bin", PAYLOAD), "f.bin")
    first = fetch([remote], "x", cache_dir=tmp_path, progress=False)
    second = fetch([remote], "x", cache_dir=tmp_path, progress=False)
    assert server.requests["/f.bin"] == 1
    assert (first.downloaded, second.downloaded) == (True, False)
    assert second.sha256 == first.sha256 == sha256(PAYLOAD) and not second.pinned


def test_truncated_transfer_is_discarded_and_fetched_once_more(server, tmp_path):
    server.truncate["/f.bin"] = 1
    fetched = fetch([Remote(server.serve("/f.bin", PAYLOAD), "f.bin", sha256=sha256(PAYLOAD))], "x",
                    cache_dir=tmp_path, progress=False)
    assert server.requests["/f.bin"] == 2
    assert fetched.path.read_bytes() == PAYLOAD
    assert folder_listing(tmp_path / "x") == ["f.bin", "f.bin.sha256"]  # no temporary left behind


def test_file_failing_its_pin_twice_raises_and_leaves_nothing_in_the_cache(server, tmp_path):
    server.corrupt["/f.bin"] = 5
    remote = Remote(server.serve("/f.bin", PAYLOAD), "f.bin", sha256=sha256(PAYLOAD))
    with pytest.raises(CorruptDownloadError, match=r"attempt 2.*differs from the expected"):
        fetch([remote], "x", cache_dir=tmp_path, progress=False)
    assert server.requests["/f.bin"] == 2
    assert folder_listing(tmp_path / "x") == []


def test_unpinned_archive_that_is_not_a_zip_is_rejected_by_its_validator(server, tmp_path):
    remote = Remote(server.serve("/f.zip", b"PK\x03\x04 but not really a zip"), "f.zip")
    with pytest.raises(CorruptDownloadError, match="not a readable zip"):
        fetch([remote], "x", validate=check_zip, cache_dir=tmp_path, progress=False)
    assert server.requests["/f.zip"] == 2 and folder_listing(tmp_path / "x") == []


def test_corrupted_cached_file_is_removed_and_downloaded_again(server, tmp_path):
    remote = Remote(server.serve("/f.bin", PAYLOAD), "f.bin")  # unpinned: checked against the recorded sha256
    cached = fetch([remote], "x", cache_dir=tmp_path, progress=False).path
    cached.write_bytes(PAYLOAD[:-10])  # bit rot, or a copy cut short
    with pytest.warns(DataCacheWarning, match=f"removed the corrupt cached file {cached} .*fetching it again"):
        again = fetch([remote], "x", cache_dir=tmp_path, progress=False)
    assert server.requests["/f.bin"] == 2 and again.downloaded
    assert again.path.read_bytes() == PAYLOAD


def test_cached_file_without_a_record_is_validated_before_use(server, tmp_path):
    folder = tmp_path / "x"
    folder.mkdir()
    (folder / "f.zip").write_bytes(b"dropped here by hand, not a zip")
    good = har_nested_zip()
    with pytest.warns(DataCacheWarning, match="not a readable zip archive"):
        fetched = fetch([Remote(server.serve("/f.zip", good), "f.zip")], "x", validate=check_zip,
                        cache_dir=tmp_path, progress=False)
    assert fetched.downloaded and fetched.path.read_bytes() == good


def test_unreachable_mirror_falls_through_to_the_next(server, tmp_path):
    good = server.serve("/good.bin", PAYLOAD)
    fetched = fetch([Remote(server.url("/gone.bin"), "a.bin"), Remote(good, "b.bin")], "x", cache_dir=tmp_path,
                    progress=False)
    assert fetched.url == good and fetched.path.name == "b.bin"
    assert server.requests["/gone.bin"] == 1  # a 404 is not retried


def test_no_reachable_mirror_raises_download_error_naming_each(tmp_path):
    first, second = closed_port_url("/a"), (tmp_path / "absent.bin").as_uri()
    with pytest.raises(DownloadError, match="no mirror could be reached") as caught:
        fetch([Remote(first, "a"), Remote(second, "b")], "x", cache_dir=tmp_path, progress=False)
    assert first in str(caught.value) and second in str(caught.value)
    assert "data_source='offline'" in str(caught.value)


def test_a_server_that_never_answers_times_out(tmp_path):
    with socket.socket() as silent:  # accepts connections (backlog) but never replies
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/slow"
        start = time.perf_counter()
        with pytest.raises(DownloadError, match="timed out"):
            fetch([Remote(url, "slow")], "x", cache_dir=tmp_path, timeout_s=0.5, progress=False)
    assert time.perf_counter() - start < 30  # its 0.5 s, not the default 60 s (nor forever): far from either


def test_an_exception_mid_verification_leaves_no_partial_file(server, tmp_path):
    def validate(path: Path) -> None:
        raise KeyboardInterrupt  # the user interrupts while the file is being checked

    with pytest.raises(KeyboardInterrupt):
        fetch([Remote(server.serve("/f.bin", PAYLOAD), "f.bin")], "x", validate=validate, cache_dir=tmp_path,
              progress=False)
    assert folder_listing(tmp_path / "x") == []


def test_stale_temporaries_of_killed_runs_are_removed_fresh_ones_kept(server, tmp_path):
    folder = tmp_path / "x"
    folder.mkdir()
    stale, fresh = folder / ".f.bin.old123.part", folder / ".f.bin.new456.part"
    stale.write_bytes(b"half")
    fresh.write_bytes(b"half")
    day_ago = time.time() - 2 * download.STALE_TEMPORARY_S
    os.utime(stale, (day_ago, day_ago))
    fetch([Remote(server.serve("/f.bin", PAYLOAD), "f.bin")], "x", cache_dir=tmp_path, progress=False)
    assert not stale.exists() and fresh.exists()


def test_archive_validators_catch_truncation(tmp_path):
    tarball, archive = tmp_path / "w.tar.gz", tmp_path / "h.zip"
    tarball.write_bytes(weather_tarball())
    archive.write_bytes(har_nested_zip())
    check_tar(tarball)
    check_zip(archive)
    for path in (tarball, archive):
        path.write_bytes(path.read_bytes()[: path.stat().st_size * 2 // 3])
    with pytest.raises(CorruptFileError):
        check_tar(tarball)
    with pytest.raises(CorruptFileError):
        check_zip(archive)


def test_zip_with_a_damaged_member_fails_its_crc(tmp_path):
    path = tmp_path / "d.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("member.txt", "x" * 1000)
    payload = bytearray(path.read_bytes())
    payload[payload.index(b"xxxx") + 10] = ord("y")
    path.write_bytes(bytes(payload))
    with pytest.raises(CorruptFileError, match="CRC|readable"):
        check_zip(path)


def test_derived_arrays_are_built_once_then_reloaded_and_rebuilt_if_damaged(tmp_path):
    calls = []

    def build():
        calls.append(1)
        return {"values": np.arange(6.0).reshape(2, 3), "names": np.array(["a", "b"])}

    path = tmp_path / "derived" / "parsed-abc-v1.npz"
    first, hit_first = cached_arrays(path, build)
    second, hit_second = cached_arrays(path, build)
    assert (hit_first, hit_second, len(calls)) == (False, True, 1)
    np.testing.assert_array_equal(second["values"], first["values"])
    assert second["names"].tolist() == ["a", "b"]
    path.write_bytes(b"garbage")
    with pytest.warns(DataCacheWarning, match="could not be read"):
        third, hit_third = cached_arrays(path, build)
    assert not hit_third and len(calls) == 2 and third["values"].shape == (2, 3)
    assert folder_listing(path.parent) == ["parsed-abc-v1.npz"]


def test_a_truncated_array_cache_is_rebuilt_said_and_leaves_no_file_open(tmp_path):
    import gc
    import warnings

    path = tmp_path / "parsed-abc-v1.npz"
    built, _ = cached_arrays(path, lambda: {"values": np.arange(4096.0)})
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) // 2])  # a copy cut short: the zip's directory is gone
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # ResourceWarning included: an unclosed file is recorded when freed
        again, hit = cached_arrays(path, lambda: {"values": np.arange(4096.0)})
        gc.collect()
    assert not hit and np.array_equal(again["values"], built["values"]) and path.read_bytes() == whole
    said = [str(warning.message) for warning in caught if issubclass(warning.category, DataCacheWarning)]
    assert len(said) == 1 and str(path) in said[0] and "BadZipFile" in said[0] and "built them again" in said[0]
    assert not [warning for warning in caught if issubclass(warning.category, ResourceWarning)]


def test_sha256_of_matches_hashlib(tmp_path):
    path = tmp_path / "p"
    path.write_bytes(PAYLOAD * 100)  # several read chunks
    assert sha256_of(path) == sha256(PAYLOAD * 100)
