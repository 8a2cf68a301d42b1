"""The sweep-in-Colab notebook and its helpers: device choice, checkout, zip, delivery."""

from __future__ import annotations

import json
import sys
import types
import zipfile

import pytest
from helpers import REPO, execute_notebook

from colabkit.colab.sweep import archive_outputs, best_device, deliver, suite_checkout
from colabkit.errors import ColabkitError


@pytest.mark.parametrize("available, expected", [({"cpu": 1}, "cpu"), ({"cpu": 1, "gpu": 2}, "gpu"),
                                                 ({"cpu": 1, "gpu": 1, "tpu": 1}, "tpu"), ({}, "cpu")])
def test_the_runtime_device_is_its_best_one(available, expected):
    assert best_device(available) == expected


def test_a_checkout_is_used_where_colabkit_runs_from_one():
    assert suite_checkout() == REPO


def test_without_a_checkout_the_copy_installed_with_colabkit_is_used(tmp_path, monkeypatch):
    import colabkit.suite as suite

    package = tmp_path / "site-packages" / "colabkit"
    for folder in ("notebooks", "parameters"):
        (package / "bundled" / folder).mkdir(parents=True)
    monkeypatch.setattr(suite, "_PACKAGE", package)
    monkeypatch.setattr(suite, "BUNDLED", package / "bundled")
    assert suite_checkout() == package / "bundled"


def test_a_colabkit_without_its_notebooks_is_a_clear_error(tmp_path, monkeypatch):
    import colabkit.suite as suite

    package = tmp_path / "site-packages" / "colabkit"
    monkeypatch.setattr(suite, "_PACKAGE", package)
    monkeypatch.setattr(suite, "BUNDLED", package / "bundled")
    with pytest.raises(ColabkitError, match="reinstall it from its repository"):
        suite_checkout()


def fake_colab(monkeypatch, tmp_path):
    calls = []
    google = types.ModuleType("google")
    colab = types.ModuleType("google.colab")
    colab.files = types.SimpleNamespace(download=lambda path: calls.append(("download", path)))
    colab.drive = types.SimpleNamespace(mount=lambda path: calls.append(("mount", path)))
    google.colab = colab
    monkeypatch.setitem(sys.modules, "google", google)
    monkeypatch.setitem(sys.modules, "google.colab", colab)
    return calls


def test_delivery_downloads_and_mounts_drive_only_when_asked(tmp_path, monkeypatch):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "r.json").write_text("{}")
    archive = archive_outputs(tmp_path / "out", "gpu")
    calls = fake_colab(monkeypatch, tmp_path)
    deliver(archive, download=True, drive_folder=None, echo=lambda line: None)
    assert calls == [("download", str(archive))]  # no Drive unless a folder is given
    calls.clear()
    import colabkit.colab.sweep as module

    monkeypatch.setattr(module, "DRIVE_MOUNT", tmp_path / "drive")
    done = deliver(archive, download=False, drive_folder="runs", echo=lambda line: None)
    assert calls == [("mount", str(tmp_path / "drive"))] and any("Google Drive" in line for line in done)
    assert (tmp_path / "drive" / "MyDrive" / "runs" / archive.name).is_file()


def test_archive_holds_the_folder_and_never_overwrites(tmp_path):
    (tmp_path / "out" / "nb").mkdir(parents=True)
    (tmp_path / "out" / "nb" / "r.json").write_text("{}")
    archive = archive_outputs(tmp_path / "out", "cpu")
    assert archive.name.startswith("out-cpu-") and archive.suffix == ".zip"
    assert zipfile.ZipFile(archive).namelist() == ["out/", "out/nb/", "out/nb/r.json"]
    with pytest.raises(ColabkitError, match="not a folder"):
        archive_outputs(tmp_path / "missing", "cpu")


@pytest.mark.notebook
def test_colab_sweep_notebook_runs_the_sweep_builds_the_report_and_zips_it(tmp_path):
    out = tmp_path / "sweep"
    execute_notebook("colab_sweep", tmp_path, grid="matmul_tflops: smoke", runtime_asked="T4",
                     download_zip=False, out=str(out), repeats=1)
    records = sorted(path.relative_to(out).as_posix() for path in out.rglob("*.json") if "report" not in path.parts)
    assert records == ["matmul_tflops/cpu/n-256_dtype-float32.json", "matmul_tflops/cpu/n-512_dtype-float32.json"]
    record = json.loads((out / records[0]).read_text())  # the form's runtime type reached every run's record
    assert (record["accelerator_asked"], record["accelerator_found"]) == ("T4", "none")
    assert record["accelerator_mismatch"].startswith("asked for T4, ran on none")
    assert (out / "report" / "report.html").is_file()
    (archive,) = tmp_path.glob("sweep-cpu-*.zip")
    names = zipfile.ZipFile(archive).namelist()
    assert "sweep/report/report.html" in names and "sweep/matmul_tflops/cpu/n-256_dtype-float32.ipynb" in names
