"""Bad input, broken folders and files, full disks and signals, through the real command line.

Each test runs `python -m colabkit ...` in a child process (or papermill) and checks what a user
sees: one line on stderr and exit status 2 for a user error, decided before device detection; a
failed record (never an ok one) for a result that cannot be a measurement; a record file that
cannot be read named, kept and set aside; a combination hit by a file-system fault failed while
the sweep goes on; SIGTERM handled like Ctrl-C.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import nbformat
import pytest
from helpers import REPO

from colabkit.records.record import read_record

PYTHON_ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
              "TF_CPP_MIN_LOG_LEVEL": "3"}
NEWER_SCHEMA_OK = {"schema_version": 99, "notebook": "probe", "status": "ok", "params": {"device": "tpu", "value": 1},
                   "metrics": {"double": 2}, "new_section_of_a_later_colabkit": {}}

# A notebook that writes its record through colabkit.start_run and, on request, misbehaves the
# ways a real one can: NumPy out of memory, a NaN loss, no samples, a sleep (to be interrupted).
PROBE_PARAMETERS = '''device = "cpu"
value = 1
mode = "ok"  # ok | numpy_oom | nan_loss | no_samples | sleep
sleep_s = 0.0
results_path = ""
'''
PROBE_WORK = '''import time
import numpy as np
import colabkit

run = colabkit.start_run("{name}", params=dict(device=device, value=value, mode=mode), results_path=results_path)
metrics = {{"double": 2 * value, "test_loss": 0.5, "samples": 10}}
if mode == "numpy_oom":
    np.ones((1 << 25, 1 << 25))  # 8 PiB: NumPy's own MemoryError (_ArrayMemoryError), at once
if mode == "nan_loss":
    metrics["test_loss"] = float("nan")
if mode == "no_samples":
    metrics["samples"] = 0
if mode == "sleep":
    print("sleeping", flush=True)  # the mark a test waits for: the cell is under way
    time.sleep(sleep_s)
run.record(metrics=metrics, device={{"requested": device, "kind": "cpu"}},
           data={{"name": "none", "source": "synthetic"}})
'''


def write_probe(path: Path) -> Path:
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.cells = [nbformat.v4.new_code_cell(PROBE_PARAMETERS, metadata={"tags": ["parameters"]}),
                      nbformat.v4.new_code_cell(PROBE_WORK.format(name=path.stem))]
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, str(path))
    return path


def write_grid(path: Path, notebook: Path, body: str) -> Path:
    path.write_text(f"notebook: {notebook}\n" + textwrap.dedent(body))
    return path


def colabkit(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "colabkit", *map(str, args)], capture_output=True, text=True,
                          env=PYTHON_ENV, cwd=REPO, timeout=timeout)


def cpu_seconds(run):
    """(result of run(), CPU seconds its child processes used): a loaded machine's neighbours do not
    count, unlike wall-clock time. Device detection imports TensorFlow: about 9 CPU seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = run()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return result, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def one_line_error(result: subprocess.CompletedProcess) -> str:
    """The single stderr line of a refused command (exit 2, no traceback)."""
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


@pytest.fixture(scope="module")
def probe(tmp_path_factory) -> Path:
    return write_probe(tmp_path_factory.mktemp("probe") / "probe.ipynb")


@pytest.fixture
def grid(probe, tmp_path) -> Path:
    return write_grid(tmp_path / "probe.yaml", probe, "grid: {device: [cpu], value: [1, 2]}\n")


# --- user errors: one line, exit 2, before device detection ------------------------------------

@pytest.mark.parametrize(("args", "expected"), [
    (["--timeout", "-5"], "argument --timeout: '-5': give a number of seconds > 0, or 'none' for no limit"),
    (["--timeout", "0"], "argument --timeout: '0': give a number of seconds > 0, or 'none' for no limit"),
    (["--timeout", "soon"], "argument --timeout: 'soon' is not a number of seconds"),
    (["--jobs", "0"], "argument --jobs: '0': must be 1 or more"),
    (["--preset", "nosuch"], "unknown preset 'nosuch' (this file has: none)"),
])
def test_bad_arguments_are_one_line_and_exit_2(grid, tmp_path, args, expected):
    result, cpu_s = cpu_seconds(lambda: colabkit("sweep", grid, "--out", tmp_path / "out", *args))
    assert expected in one_line_error(result)
    assert cpu_s < 6  # refused before device detection (which imports TensorFlow)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("case", ["a file", "a folder under a file", "a read-only file system"])
def test_an_output_folder_that_cannot_be_written_is_refused_before_anything_runs(grid, tmp_path, case):
    if case == "a file":
        out = tmp_path / "taken"
        out.write_text("not a folder")
        expected = f"output folder {out} is a file, not a folder"
    elif case == "a folder under a file":
        (tmp_path / "taken").write_text("not a folder")
        out = tmp_path / "taken" / "out"
        expected = f"output folder {out} cannot be made: {tmp_path / 'taken'} is a file"
    else:
        out = tmp_path / "readonly"
        out.mkdir()
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(out)],
                          capture_output=True).returncode != 0:
            pytest.skip("cannot mount a read-only tmpfs here (not root)")
        expected = f"output folder {out / 'sub'} is on a read-only file system"
        out = out / "sub"
    try:
        result, cpu_s = cpu_seconds(lambda: colabkit("sweep", grid, "--out", out))
        assert expected in one_line_error(result)
        assert cpu_s < 6  # before device detection
    finally:
        if case == "a read-only file system":
            subprocess.run(["umount", str(tmp_path / "readonly")], check=True)


def test_a_preset_name_that_does_not_exist_is_refused(tmp_path):
    result = colabkit("sweep", REPO / "parameters" / "matmul_tflops.yaml", "--preset", "smoke-test",
                      "--out", tmp_path / "out")
    assert "unknown preset 'smoke-test' (this file has: device, device_smoke, gpu_check, paper, smoke)" in one_line_error(result)


def test_duplicate_combinations_in_one_grid_are_refused(probe, grid, tmp_path):
    repeated = write_grid(tmp_path / "repeated.yaml", probe, "grid: {device: [cpu], value: [1, 2, 1]}\n")
    assert "grid.value lists 1 twice: that combination would run twice" in one_line_error(
        colabkit("sweep", repeated, "--out", tmp_path / "out"))
    # The same grid twice: every combination twice, each named.
    result = colabkit("sweep", grid, grid, "--out", tmp_path / "out")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.startswith("error: 2 problems:")
    assert "probe cpu value-1: the combination {'device': 'cpu', 'value': 1} appears twice" in result.stderr
    assert not (tmp_path / "out").exists()


def test_a_grid_of_10000_combinations_is_validated_in_under_5_s(probe, tmp_path):
    values = list(range(100))
    big = write_grid(tmp_path / "big.yaml", probe, f"grid: {{device: [cpu], value: {values}, sleep_s: {values}}}\n")
    broken = write_grid(tmp_path / "broken.yaml", probe,
                        f"grid: {{device: [cpu], value: {values + [99]}, sleep_s: {values}}}\n")
    # CPU seconds, not wall-clock ones: on a loaded test machine the latter measure the neighbours.
    result, cpu_s = cpu_seconds(lambda: colabkit("sweep", broken, "--out", tmp_path / "out", "--dry-run"))
    line = one_line_error(result)
    assert cpu_s < 5, f"validating 10,000 combinations took {cpu_s:.1f} CPU seconds"
    assert "grid.value lists 99 twice" in line
    # The valid grid: every combination planned and decided (devices given: no detection) in < 5 s.
    # the clock starts after the imports (TensorFlow-free, but 2-3 CPU s of them on Python 3.13): planning is timed
    script = ("import time; from colabkit.sweep.driver import prepare; "
              "from colabkit.sweep.plan import plan; t = time.process_time(); "
              f"d = prepare(plan([{str(big)!r}], out={str(tmp_path / 'out')!r}), available={{'cpu': 1}}); "
              "print(len(d), time.process_time() - t)")
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=PYTHON_ENV,
                               timeout=60, check=True)
    count, seconds = completed.stdout.split()
    assert int(count) == 10_000
    assert float(seconds) < 5


# --- status and report on missing or empty folders ---------------------------------------------

def test_status_of_a_folder_that_does_not_exist_exits_2(tmp_path):
    line = one_line_error(colabkit("status", tmp_path / "no" / "such" / "folder"))
    assert f"output folder {tmp_path / 'no' / 'such' / 'folder'} does not exist" in line


def test_status_and_report_of_an_empty_folder_say_so(tmp_path):
    status = colabkit("status", tmp_path)
    assert status.returncode == 1 and f"no records below {tmp_path}" in status.stdout
    report = colabkit("report", tmp_path, "--out", tmp_path / "report")
    assert report.returncode == 2
    assert f"found 0 record(s) below {tmp_path}" in report.stdout
    assert f"error: no records found below {tmp_path}: nothing to report" in report.stderr
    assert not (tmp_path / "report").exists()


def test_exit_codes_are_documented_in_help():
    result = colabkit("sweep", "--help")
    assert result.returncode == 0
    for line in ("exit status:", "  0    done", "  1    done, but something needs a look", "  2    nothing was done",
                 "  130  interrupted by Ctrl-C or SIGTERM"):
        assert line in result.stdout
    assert (REPO / "docs" / "cli.md").is_file()


# --- a mixed sweep: unreadable records, a newer schema, OOM, non-measurements, a broken folder --

@pytest.fixture(scope="module")
def mixed_sweep(probe, tmp_path_factory):
    """One sweep (one device detection) over every per-combination fault at once."""
    root = tmp_path_factory.mktemp("mixed")
    out = root / "out"
    grid = write_grid(root / "probe.yaml", probe, """
        grid: {device: [cpu, tpu]}
        zip: {value: [1, 2, 3, 4, 5], mode: [ok, numpy_oom, nan_loss, no_samples, ok]}
    """)
    other = write_grid(root / "other.yaml", write_probe(root / "other.ipynb"), "grid: {device: [cpu], value: [1]}\n")
    folder = out / "probe" / "cpu"
    folder.mkdir(parents=True)
    not_utf8 = folder / "value-5_mode-ok.json"
    not_utf8.write_bytes(b'{"schema_version": 1, "notebook": "probe", "status": "ok", "note": "\xff\xfe"}')
    newer = out / "probe" / "tpu" / "value-1_mode-ok.json"
    newer.parent.mkdir(parents=True)
    newer.write_text(json.dumps(NEWER_SCHEMA_OK))
    (out / "other").write_text("a file where the notebook's folder should be")
    contents = {path: path.read_bytes() for path in (not_utf8, newer)}
    dry = colabkit("sweep", grid, other, "--out", out, "--dry-run", "--timeout", "none")  # none: no limit
    result = colabkit("sweep", grid, other, "--out", out, "--no-html")
    status = colabkit("status", out)
    return dict(out=out, folder=folder, not_utf8=not_utf8, newer=newer, contents=contents, dry=dry,
                result=result, status=status, grid=grid, other=other)


@pytest.mark.notebook
def test_the_sweep_finishes_and_exits_1_without_a_traceback(mixed_sweep):
    result = mixed_sweep["result"]
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "Traceback" not in result.stdout + result.stderr


@pytest.mark.notebook
def test_a_record_that_is_not_utf8_is_named_kept_and_set_aside(mixed_sweep):
    path = mixed_sweep["not_utf8"]
    assert path.read_bytes() == mixed_sweep["contents"][path]  # never overwritten
    assert mixed_sweep["dry"].returncode == 0, mixed_sweep["dry"].stderr  # `--timeout none` is accepted
    dry = mixed_sweep["dry"].stdout
    assert "set_aside" in dry and "set aside 1 (record file unreadable" in dry
    newer_row = next(line for line in dry.splitlines() if " tpu " in line and "value-1_mode-ok" in line)
    assert "skip" in newer_row and "written by a newer colabkit" in newer_row and "and is kept as it is" in newer_row
    stdout = mixed_sweep["result"].stdout
    assert f"set aside: {path}: its record cannot be read (not UTF-8 text" in stdout
    assert "2 set aside: record file(s) that cannot be read, kept as they are" in stdout
    assert "--rerun" in stdout


@pytest.mark.notebook
def test_an_ok_record_of_a_newer_schema_is_never_replaced_by_a_skipped_one(mixed_sweep):
    path = mixed_sweep["newer"]
    assert path.read_bytes() == mixed_sweep["contents"][path]
    assert f"set aside: {path}" in mixed_sweep["result"].stdout
    assert "written by a newer colabkit" in mixed_sweep["result"].stdout


@pytest.mark.notebook
def test_a_numpy_memory_error_is_classed_as_oom(mixed_sweep):
    error = read_record(mixed_sweep["folder"] / "value-2_mode-numpy_oom.json")["error"]
    assert error["type"].endswith("MemoryError") and error["kind"] == "oom", error
    assert "Unable to allocate" in error["message"]


@pytest.mark.notebook
@pytest.mark.parametrize(("slug", "reason"), [("value-3_mode-nan_loss", "test_loss = nan (must be finite)"),
                                              ("value-4_mode-no_samples", "samples = 0 (must be a finite number > 0)")])
def test_a_result_that_cannot_be_a_measurement_is_a_failed_record(mixed_sweep, slug, reason):
    record = read_record(mixed_sweep["folder"] / f"{slug}.json")
    assert record["status"] == "failed"
    assert record["error"]["kind"] == "not_a_measurement"
    assert reason in record["error"]["message"]


@pytest.mark.notebook
def test_an_unwritable_notebook_folder_fails_its_combination_and_the_sweep_goes_on(mixed_sweep):
    stdout = mixed_sweep["result"].stdout
    assert "failed: other cpu value-1: NotADirectoryError" in stdout
    assert read_record(mixed_sweep["folder"] / "value-1_mode-ok.json")["status"] == "ok"
    assert "1 ok, 4 failed, 4 skipped" in stdout  # and 2 set aside: all 11 combinations accounted for


@pytest.mark.notebook
def test_status_names_unreadable_records_and_exits_1(mixed_sweep):
    status = mixed_sweep["status"]
    assert status.returncode == 1
    assert f"unreadable {mixed_sweep['not_utf8']}: not UTF-8 text" in status.stdout
    assert f"unreadable {mixed_sweep['newer']}: schema_version 99 was written by a newer colabkit" in status.stdout
    assert "2 unreadable (set aside, not counted above)" in status.stdout


@pytest.mark.notebook
def test_rerun_replaces_an_unreadable_record(mixed_sweep):
    dry = colabkit("sweep", mixed_sweep["grid"], "--out", mixed_sweep["out"], "--dry-run", "--rerun")
    assert dry.returncode == 0, dry.stderr
    row = next(line for line in dry.stdout.splitlines() if "value-5_mode-ok" in line and " cpu " in line)
    assert " rerun " in row and "set_aside" not in dry.stdout.split("would run")[0].replace("set aside", "")


# --- a full disk, SIGTERM ----------------------------------------------------------------------

@pytest.mark.notebook
def test_a_disk_that_fills_up_mid_sweep_fails_combinations_not_the_sweep(probe, tmp_path):
    out = tmp_path / "small"
    out.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=200k", "tmpfs", str(out)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (not root)")
    try:
        grid = write_grid(tmp_path / "probe.yaml", probe, "grid: {device: [cpu], value: [1, 2, 3, 4]}\n")
        filler = out / "filler"
        # Leave ~48 KiB: the first run fits (notebook, log, record), later ones do not.
        with open(filler, "wb") as stream:
            stream.write(b"\0" * (os.statvfs(out).f_bavail * os.statvfs(out).f_frsize - 48 * 1024))
        result = colabkit("sweep", grid, "--out", out, "--no-html")
        assert result.returncode == 1, (result.stdout, result.stderr)
        assert "Traceback" not in result.stdout + result.stderr
        assert "[1/4] ok" in result.stdout
        assert "[4/4] failed" in result.stdout  # every combination was tried
        assert "No space left on device" in result.stdout
        assert read_record(out / "probe" / "cpu" / "value-1.json")["status"] == "ok"
        for record in out.rglob("*.json"):  # whatever is a record is whole
            read_record(record)
        for notebook in out.rglob("*.ipynb"):  # and so is every notebook left under its final name
            nbformat.read(str(notebook), as_version=4)
        assert not [path for path in out.rglob(".*") if path.name.endswith(".tmp")]
    finally:
        subprocess.run(["umount", str(out)], check=True)


@pytest.mark.notebook
def test_sigterm_stops_the_sweep_like_ctrl_c_and_status_shows_the_unfinished_run(probe, tmp_path):
    grid = write_grid(tmp_path / "probe.yaml", probe, """
        grid: {device: [cpu]}
        zip: {value: [1, 2, 3], mode: [ok, sleep, ok]}
        fixed: {sleep_s: 60}
    """)
    out = tmp_path / "out"
    folder = out / "probe" / "cpu"
    sweep = subprocess.Popen([sys.executable, "-m", "colabkit", "sweep", str(grid), "--out", str(out), "--no-html"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=PYTHON_ENV, cwd=REPO)
    try:
        deadline = time.monotonic() + 300  # a guard against a hang only: the cell's mark is the event waited for
        log = folder / "value-2_mode-sleep.log"
        while not (log.exists() and "sleeping" in log.read_text()):
            assert time.monotonic() < deadline and sweep.poll() is None, "the sleeping combination never started"
            time.sleep(0.1)
        sweep.send_signal(signal.SIGTERM)  # into the sleeping cell (60 s: far more than a signal takes)
        stdout, stderr = sweep.communicate(timeout=300)
    finally:
        if sweep.poll() is None:
            sweep.kill()
    assert sweep.returncode == 130, (stdout, stderr)
    assert "Traceback" not in stderr
    assert "interrupted after 1 of 3 runs" in stderr and "run the same command again to resume" in stderr
    assert read_record(folder / "value-1_mode-ok.json")["status"] == "ok"
    assert not (folder / "value-2_mode-sleep.json").exists()  # no half result
    leftovers = sorted(path.name for path in out.rglob(".*"))
    assert leftovers == [".value-2_mode-sleep.running.ipynb"]  # the mark of the unfinished run, nothing else
    status = colabkit("status", out)
    assert status.returncode == 1
    assert "1 ok, 0 failed, 0 skipped, 1 unfinished" in status.stdout
    assert f"unfinished {folder / 'value-2_mode-sleep'}: interrupted; the next sweep runs it again" in status.stdout


# --- matmul figures: 0 or NaN TFLOPS is not a measurement -----------------------------------------

def test_matmul_count_0_is_refused_before_anything_runs(tmp_path):
    result = colabkit("sweep", REPO / "parameters" / "matmul_tflops.yaml", "--preset", "smoke", "--device", "cpu",
                      "-p", "n=64", "-p", "count=0", "--out", tmp_path)
    assert "count = 0" in one_line_error(result)


@pytest.mark.parametrize("tflops", [0.0, float("nan"), float("inf")])
def test_a_matmul_record_of_0_or_nan_tflops_is_failed_not_ok(tmp_path, tflops):
    """What the matmul notebook's last cell does, with the figures a run that multiplied nothing
    (or whose clock failed) would produce: the record on disk says failed, and why."""
    from colabkit.errors import MeasurementError
    from colabkit.run import start_run

    path = tmp_path / "matmul.json"
    run = start_run("matmul_tflops", params={"device": "cpu", "n": 64, "count": 1}, results_path=path)
    metrics = {"tflops_cold": 1.0, "tflops_warm": tflops, "seconds_warm": 0.001, "flops_per_call": 2 * 64**3}
    with pytest.raises(MeasurementError, match="not a measurement: tflops_warm = "):
        run.record(metrics=metrics, timings={}, device={"requested": "cpu", "kind": "cpu"},
                   data={"name": "uniform random matrices", "source": "synthetic"})
    record = read_record(path)
    assert record["status"] == "failed" and record["error"]["kind"] == "not_a_measurement"
    assert "(must be a finite number > 0)" in record["error"]["message"]
    assert "tflops_cold" not in record["error"]["message"]  # only the bad figures are named


# --- the data cache: say what was removed and why, and what to do next --------------------------

def test_a_corrupt_cached_file_is_reported_removed_and_the_error_says_what_to_do(tmp_path, monkeypatch):
    from data_fixtures import closed_port_url

    from colabkit.data import common, mnist
    from colabkit.data.download import Remote
    from colabkit.errors import DataCacheWarning, DownloadError

    url = closed_port_url("/mnist.npz")  # the source is unreachable: no network
    monkeypatch.setitem(common.MIRRORS, "mnist", (Remote(url, "mnist.npz", sha256="0" * 64),))
    monkeypatch.delenv("COLABKIT_MIRROR_MNIST", raising=False)
    cached = tmp_path / "mnist" / "mnist.npz"
    cached.parent.mkdir()
    cached.write_bytes(b"a copy cut short")
    with pytest.warns(DataCacheWarning, match=f"removed the corrupt cached file {cached} \\(sha256 "):
        with pytest.raises(DownloadError) as caught:
            mnist.load_mnist("real", cache_dir=tmp_path, progress=False)
    assert not cached.exists()
    message = str(caught.value)
    assert f"Before that, removed the corrupt cached file {cached}" in message
    assert "Next: set COLABKIT_MIRROR_MNIST to another URL or a local copy of the file" in message
    assert f"download {url} yourself and save it as {cached}" in message
    assert "data_source='offline'" in message
    assert "by hand" not in message


# --- TrainingTimer: a fit that trained nothing is named as such, not blamed on the callback ------

@pytest.mark.parametrize("epochs", [0, -1])
def test_a_fit_with_no_epoch_is_a_measurement_error_not_a_missing_callback(epochs):
    import numpy as np
    keras = pytest.importorskip("keras")

    from colabkit.errors import MeasurementError
    from colabkit.training.timer import TrainingTimer

    model = keras.Sequential([keras.Input(shape=(2,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    timer = TrainingTimer(global_batch_size=4)
    model.fit(np.zeros((8, 2)), np.zeros((8, 1)), batch_size=4, epochs=epochs, callbacks=[timer], verbose=0)
    with pytest.raises(MeasurementError, match="model.fit ran no epoch, so nothing was timed: set epochs to 1 or more"):
        timer.metrics()
