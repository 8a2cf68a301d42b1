"""Interrupted sweeps (kill -9, Ctrl-C) resume without rerunning what finished; parallel jobs record
the same results as a serial sweep; one sweep at a time writes to an output folder."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from helpers import REPO
from notebook_factory import write_tiny_notebook

from colabkit.errors import SweepLockedError
from colabkit.records.record import read_record
from colabkit.sweep.folder import sweep_lock
from colabkit.sweep.options import RunOptions
from colabkit.sweep.plan import plan
from colabkit.sweep.driver import run_sweep
from colabkit.sweep.console import format_status
from colabkit.sweep.folder import collect_status

CPU_ONLY = {"cpu": 1}


def quiet(line: str) -> None:
    """An `echo` for run_sweep that keeps test output clean."""


def held_grid(tmp_path: Path, count: int, hold_from: int) -> tuple[Path, Path]:
    """`count` combinations of the tiny notebook (values 1 to `count`), those from `hold_from` on held until
    the test writes the gate (the second path): what has finished when the test acts is what it let through."""
    notebook = write_tiny_notebook(tmp_path / "tiny.ipynb")
    gate = tmp_path / "gate"
    path = tmp_path / "held.yaml"
    path.write_text(textwrap.dedent(f"""
        notebook: {notebook}
        grid: {{device: [cpu], value: {list(range(1, count + 1))}}}
        fixed: {{hold_from: {hold_from}, hold_file: {str(gate)!r}}}
    """))
    return path, gate


def start_sweep(grid: Path, out: Path, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
           "TF_CPP_MIN_LOG_LEVEL": "3"}
    # A shell starts background jobs with SIGINT ignored, and Python keeps an ignored SIGINT ignored:
    # give the sweep the default disposition, as a terminal's Ctrl-C would find it.
    return subprocess.Popen([sys.executable, "-m", "colabkit", "sweep", str(grid), "--out", str(out), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=REPO,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def records(folder: Path) -> list[Path]:
    """The committed records in `folder` (pathlib's glob, unlike a shell's, also matches dot-files)."""
    return [path for path in folder.glob("*.json") if not path.name.startswith(".")]


def wait_for(condition, timeout_s: float, what: str) -> None:
    """Until `condition()` holds (the event waited for); `timeout_s` only guards against a hang."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def descendants(pid: int) -> set[int]:
    """Every live process below `pid`, from /proc (children of children included)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.notebook
def test_a_sweep_killed_with_sigkill_resumes_without_rerunning_finished_combinations(tmp_path):
    (grid, gate), out = held_grid(tmp_path, count=5, hold_from=3), tmp_path / "out"
    folder = out / "tiny" / "cpu"
    sweep = start_sweep(grid, out)
    try:
        wait_for(lambda: len(records(folder)) >= 2, 300, "two finished combinations")
        # the third is held (its kernel up, its cell waiting on the gate): it runs when the sweep is killed
        wait_for(lambda: "value 3" in (folder / "value-3.log").read_text() if (folder / "value-3.log").exists()
                 else False, 300, "the third combination's cell to run")
        kernels = descendants(sweep.pid)
        assert kernels, "the running combination's kernel is a child of the sweep"
        os.kill(sweep.pid, signal.SIGKILL)
        sweep.wait(timeout=300)
    finally:
        if sweep.poll() is None:
            sweep.kill()
    finished = {path.name: path.stat().st_mtime_ns for path in records(folder)}
    assert sorted(finished) == ["value-1.json", "value-2.json"]  # the third was held: it cannot have finished
    for name in finished:  # whatever carries a record is complete: every record reads, and says ok
        assert read_record(folder / name)["status"] == "ok"
    # The killed sweep's kernel notices its parent is gone and exits (ipykernel's parent poller):
    # it must not keep running beside the resumed sweep and distort its timings.
    wait_for(lambda: not any(alive(pid) for pid in kernels), 300, "the orphaned kernel to exit")

    status = collect_status(out)
    assert status.groups[("tiny", "cpu")].counts["unfinished"] == 1
    assert "interrupted; the next sweep runs it again" in format_status(status)

    gate.touch()
    outcomes = run_sweep(plan([grid], out=out), available=CPU_ONLY, echo=quiet)
    assert [o.status for o in outcomes] == ["ok"] * 5
    resumed = {o.record_path.name for o in outcomes if o.resumed}
    assert resumed == set(finished)  # exactly the finished ones were kept...
    for name, stamp in finished.items():
        assert (folder / name).stat().st_mtime_ns == stamp  # ...and not rewritten
    assert not list(out.rglob(".*"))  # the interrupted run's temporaries are gone


@pytest.mark.notebook
def test_ctrl_c_stops_parallel_jobs_and_the_same_command_resumes(tmp_path):
    # the first two go through, the others are held: the sweep is still running when the signal comes
    (grid, gate), out = held_grid(tmp_path, count=5, hold_from=3), tmp_path / "out"
    folder = out / "tiny" / "cpu"
    sweep = start_sweep(grid, out, "--jobs", "2")
    try:
        wait_for(lambda: len(records(folder)) >= 2, 300, "two finished combinations")
        workers = descendants(sweep.pid)
        sweep.send_signal(signal.SIGINT)
        printed, _ = sweep.communicate(timeout=300)
    finally:
        if sweep.poll() is None:
            sweep.kill()
    assert sweep.returncode == 130, printed
    assert "run the same command again to resume" in printed
    wait_for(lambda: not any(alive(pid) for pid in workers), 300, "workers and kernels to exit")
    finished = {path.name for path in records(folder)}
    assert all(read_record(folder / name)["status"] == "ok" for name in finished)
    # The interrupted runs' temporaries were removed, but for their partial notebooks: the marks
    # that `status` shows as unfinished (and that the next sweep removes).
    marks = [path.name for path in folder.glob(".*")]
    assert all(name.endswith(".running.ipynb") for name in marks), marks
    assert collect_status(out).total("unfinished") == len(marks)

    gate.touch()
    outcomes = run_sweep(plan([grid], out=out), available=CPU_ONLY, echo=quiet)
    assert [o.status for o in outcomes] == ["ok"] * 5
    assert {o.record_path.name for o in outcomes if o.resumed} == finished == {"value-1.json", "value-2.json"}


@pytest.mark.notebook
def test_parallel_jobs_record_the_same_results_as_a_serial_sweep(tmp_path):
    notebook = write_tiny_notebook(tmp_path / "tiny.ipynb")
    grid = tmp_path / "grid.yaml"
    grid.write_text(f"notebook: {notebook}\ngrid: {{device: [cpu, gpu], value: [1, 2, 3, 4]}}\nfixed: {{fail_on: 3}}\n")

    def summary(out: Path) -> dict:
        return {str(path.relative_to(out)): (record["status"], record["params"], record["metrics"],
                                              (record.get("error") or {}).get("type"), record["fingerprint"]["digest"])
                for path in sorted(out.rglob("*.json")) for record in [read_record(path)]}

    serial = run_sweep(plan([grid], out=tmp_path / "serial"), available=CPU_ONLY, echo=quiet)
    parallel = run_sweep(plan([grid], out=tmp_path / "parallel", options=RunOptions(jobs=3)),
                         available=CPU_ONLY, echo=quiet)
    assert [(o.combination.label, o.status) for o in parallel] == [(o.combination.label, o.status) for o in serial]
    assert summary(tmp_path / "parallel") == summary(tmp_path / "serial")
    assert len(summary(tmp_path / "serial")) == 8
    jobs = {read_record(o.record_path)["sweep"].get("jobs") for o in parallel if o.status != "skipped"}
    assert jobs == {3}  # each record says it ran beside others


@pytest.mark.notebook
def test_a_parallel_worker_that_dies_gives_its_run_a_failed_record_and_the_sweep_finishes(tmp_path):
    import nbformat

    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.cells = [nbformat.v4.new_code_cell('device = "cpu"\nvalue = 1\nresults_path = ""',
                                                metadata={"tags": ["parameters"]}),
                      nbformat.v4.new_code_cell("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)  # the "
                                                "sweep's worker process, as the OOM killer would\nos._exit(0)")]
    nbformat.write(notebook, str(tmp_path / "killer.ipynb"))
    grid = tmp_path / "grid.yaml"
    grid.write_text(f"notebook: {tmp_path / 'killer.ipynb'}\ngrid: {{device: [cpu], value: [1]}}\n")
    [outcome] = run_sweep(plan([grid], out=tmp_path / "out", html="none", options=RunOptions(jobs=2)),
                          available=CPU_ONLY, echo=quiet)
    record = read_record(outcome.record_path)
    assert (outcome.status, record["status"], record["error"]["kind"]) == ("failed", "failed", "worker_died")
    assert record["error"]["message"] == "the worker process running it died (killed, or out of host memory)"
    assert record["sweep"] == {"jobs": 2}
    assert record["device"] == {"requested": "cpu", "request": {"kind": "cpu", "count": None}}
    assert "died" in (tmp_path / "out" / "killer" / "cpu" / "value-1.log").read_text()  # the log says so too
    assert not list((tmp_path / "out").rglob(".*"))  # no temporaries, no lock left


def test_one_sweep_at_a_time_per_output_folder(tmp_path):
    with sweep_lock(tmp_path):
        with pytest.raises(SweepLockedError, match=rf"another sweep \(pid {os.getpid()}\) is writing to {tmp_path}"):
            with sweep_lock(tmp_path):
                pass
    with sweep_lock(tmp_path):  # released on exit
        pass
    assert not list(tmp_path.iterdir())
