"""Sweeps on a Dask cluster (colabkit.sweep.runners.dask): the same records as a local sweep, resume, a
worker killed mid-run, GPU resources that keep two measurements off one worker, shared and returned
products, Ctrl-C. The clusters are LocalClusters of worker processes on this machine."""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import textwrap
import threading
import time
from pathlib import Path

import nbformat
import pytest
from helpers import NOTEBOOKS

from colabkit.cli import main
from colabkit.device.spec import DeviceRequest
from colabkit.errors import ColabkitError, GridError, SweepInterrupted
from colabkit.records.record import read_record
from colabkit.sweep.runners import dask as cluster_module
from colabkit.sweep.runners.dask import cluster_devices, resources_for
from colabkit.sweep.options import RunOptions
from colabkit.sweep.plan import plan
from colabkit.sweep.driver import run_sweep
from colabkit.sweep.folder import collect_status

pytest.importorskip("distributed")

PARAMETERS = '''device = "cpu"
value = 1
sleep_s = 0.0  # how long the work cell sleeps
kill_worker_on = -1  # the value whose run kills the Dask worker process running it (the kernel's parent)
meet = ""  # a folder: each run leaves its mark there, then waits (at most 120 s) until meet_count runs have
meet_count = 0  # left theirs: runs that run side by side all get through at once
results_path = ""
'''

WORK = '''import os, signal, time
import colabkit

run = colabkit.start_run("probe", params=dict(device=device, value=value, sleep_s=sleep_s), results_path=results_path)
start = time.time()
if value == kill_worker_on:
    os.kill(os.getppid(), signal.SIGKILL)  # the worker dies mid-combination, as under the OOM killer
    os._exit(0)
time.sleep(sleep_s)
if meet:
    open(os.path.join(meet, str(value)), "w").close()
    for _ in range(2400):
        if len(os.listdir(meet)) >= meet_count:
            break
        time.sleep(0.05)
run.record(metrics={"start": start, "end": time.time()}, device={"requested": device, "kind": "cpu"},
           data={"name": "none", "source": "synthetic"})
'''


def write_probe(tmp_path: Path, grid: str) -> Path:
    """A tiny notebook ('probe') that sleeps, times itself or kills its worker, and a grid file for it."""
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.cells = [nbformat.v4.new_code_cell(PARAMETERS, metadata={"tags": ["parameters"]}),
                      nbformat.v4.new_code_cell(WORK)]
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "probe.ipynb"
    nbformat.write(notebook, str(path))
    grid_path = tmp_path / "probe.yaml"
    grid_path.write_text(f"notebook: {path}\n" + textwrap.dedent(grid))
    return grid_path


def quiet(line: str) -> None:
    pass


def record_set(out: Path) -> dict[str, tuple[str, dict]]:
    """relative path -> (status, params) of every record under `out`."""
    return {str(path.relative_to(out)): (read_record(path)["status"], read_record(path)["params"])
            for path in sorted(out.rglob("*.json"))}


def test_resources_follow_the_device_and_absent_devices_come_from_the_workers():
    def resources(kind, count=None):
        return resources_for(DeviceRequest(kind, count))

    assert resources("gpu") == {"GPU": 1} and resources("gpu", 2) == {"GPU": 2}
    assert resources("tpu") == {"TPU": 1}
    assert resources("cpu") is None and resources("cpu", 2) is None and resources("auto") is None
    workers = {"a": {"resources": {"GPU": 1}}, "b": {"resources": {"GPU": 2}}, "c": {"resources": {}}}
    assert cluster_devices(workers) == {"cpu": 1, "gpu": 2, "tpu": 0}


def test_missing_extra_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setitem(__import__("sys").modules, "distributed", None)
    grid = write_probe(tmp_path, "grid: {device: [cpu]}\n")
    with pytest.raises(ColabkitError, match=r"pip install 'colabkit\[cluster\]'"):
        run_sweep(plan([grid], out=tmp_path / "out", options=RunOptions(cluster="local:1")), echo=quiet)


def test_an_invalid_grid_is_reported_before_any_cluster_is_contacted(monkeypatch, tmp_path):
    def no_connection(*args, **kwargs):
        raise AssertionError("connected before validating")

    monkeypatch.setattr(cluster_module, "connect", no_connection)
    grid = write_probe(tmp_path, "grid: {device: [cpu], no_such_parameter: [1]}\n")
    with pytest.raises(GridError, match="no_such_parameter"):
        run_sweep(plan([grid], out=tmp_path / "out", options=RunOptions(cluster="tcp://127.0.0.1:1")), echo=quiet)
    assert main(["sweep", str(grid), "--cluster", "local:1", "--jobs", "2", "--out", str(tmp_path / "o")]) == 2


@pytest.mark.parametrize("address, message", [("local:x", "expected local:N"), ("nonsense", "expected a scheduler"),
                                               ("tcp://127.0.0.1:1", "no Dask scheduler answered")])
def test_a_bad_cluster_address_is_a_one_line_error(address, message):
    with pytest.raises(ColabkitError, match=message):
        cluster_module.connect(address, timeout_s=2)


def test_a_scheduler_address_where_nothing_listens_fails_within_seconds(tmp_path, capsys):
    import socket

    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens there now
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    grid = write_probe(tmp_path, "grid: {device: [cpu], value: [1]}\n")
    assert main(["sweep", str(grid), "--cluster", f"tcp://127.0.0.1:{port}", "--out", str(tmp_path / "out")]) == 2
    # the probe's refusal (its words, below), not distributed's Client, which retries for its whole 30 s timeout
    err = capsys.readouterr().err
    assert err.startswith(f"error: --cluster tcp://127.0.0.1:{port}: no Dask scheduler answered (Connection refused)")
    assert len(err.strip().splitlines()) == 1


@contextlib.contextmanager
def serving(handler):
    """A TCP server on 127.0.0.1 running `handler(connection)` for each connection, in threads; its port."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()

    def accept():
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return  # the listener closed
            threading.Thread(target=handler, args=(connection,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()


def answers_400(connection):
    """A proxy that answers 400 to whatever comes, then closes (it waits for the first bytes a moment)."""
    with connection:
        connection.settimeout(1)
        try:
            connection.recv(1024)
        except OSError:
            pass
        connection.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")


def http_server():
    """A real HTTP server (the standard library's) in a thread; its port."""
    from http.server import HTTPServer, SimpleHTTPRequestHandler

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def half_a_handshake(connection):
    """A listener that sends what opens a Dask frame (its length, 1 frame of 84 bytes) and then nothing:
    distributed's Client would wait for the rest with no time limit."""
    with connection:
        connection.sendall(struct.pack("<QQQ", 100, 1, 84))
        time.sleep(30)


@pytest.mark.parametrize("kind", ["http.server", "a proxy answering 400", "a silent port", "half a handshake"])
def test_an_address_where_something_else_answers_is_a_one_line_error_within_seconds(kind, tmp_path, capsys):
    """Not a Dask scheduler: distributed's Client would read an HTTP reply as a frame length (and try to
    allocate exbibytes) or wait on a silent port for minutes; the probe says what answered instead."""
    grid = write_probe(tmp_path, "grid: {device: [cpu], value: [1]}\n")
    with contextlib.ExitStack() as stack:
        if kind == "http.server":
            server = http_server()
            stack.callback(server.shutdown)
            port = server.server_address[1]
        else:
            handlers = {"a proxy answering 400": answers_400, "half a handshake": half_a_handshake}
            port = stack.enter_context(serving(handlers.get(kind, lambda connection: time.sleep(30))))
        start = time.perf_counter()
        status = main(["sweep", str(grid), "--cluster", f"tcp://127.0.0.1:{port}", "--out", str(tmp_path / "out")])
        seconds = time.perf_counter() - start
    err = capsys.readouterr().err
    # the probe's 4 s at most, not distributed's Client (minutes, or no limit): the message says which, and the bound
    # is far from the probe's time, loaded host or not
    assert status == 2 and seconds < 25, (status, seconds, err)
    assert err.startswith(f"error: --cluster tcp://127.0.0.1:{port}: no Dask scheduler answered (")
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    # http.server waits for a request, as a silent port does; the probe sends none: it waits for a handshake
    expected = {"a proxy answering 400": "an HTTP server did: HTTP/1.1 400 Bad Request",
                "half a handshake": "something sent the start of a Dask handshake (24 of its 108 bytes), then no more "
                                    "within 4 s"}.get(
        kind, "something accepts connections there but sent no Dask handshake within 4 s")
    assert expected in err
    assert not (tmp_path / "out").exists()


def test_the_probe_takes_a_real_schedulers_handshake_for_one():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=0, processes=False, dashboard_address=None) as local:
        assert cluster_module.not_a_scheduler(local.scheduler_address, 4) is None


def test_a_full_local_disk_fails_only_the_combination_whose_products_it_could_not_take(tmp_path, monkeypatch):
    import errno
    import types

    from colabkit.sweep.runners.dask import TaskResult
    from colabkit.sweep.runners.execute import RunFiles
    from colabkit.sweep.decide import Decision, SweepAction

    combination = plan([NOTEBOOKS.parent / "parameters" / "matmul_tflops.yaml"], "smoke", "cpu")[0]
    decision = Decision(combination, SweepAction.RUN, "", {"digest": "d"})
    submitted = cluster_module._Submitted(decision, RunFiles.of(combination, tmp_path))

    def disk_full(files, products):
        raise OSError(errno.ENOSPC, "No space left on device", str(files.record))

    monkeypatch.setattr(cluster_module, "commit_products", disk_full)
    result = TaskResult("ok", 1.5, "", None, {"host": "w1"}, files={".json": b"{}"})
    future = types.SimpleNamespace(cancelled=lambda: False, status="finished", result=lambda: result)
    outcome = cluster_module._collect(future, submitted, {})
    assert outcome.status == "failed" and "No space left on device" in outcome.message
    assert outcome.error.kind == "filesystem"


@pytest.fixture(scope="module")
def gpu_cluster():
    """Two local workers, each declaring one (fake) GPU and running up to two tasks at once."""
    import dask
    from distributed import LocalCluster

    with dask.config.set({"distributed.scheduler.allowed-failures": 1}):
        local = LocalCluster(n_workers=2, threads_per_worker=2, processes=True, dashboard_address=None,
                             resources={"GPU": 1}, silence_logs=40)
    yield local.scheduler_address
    local.close()


@pytest.mark.long("the matmul smoke twice, here and on a two-worker Dask cluster, each run a TensorFlow kernel")
@pytest.mark.notebook
def test_matmul_smoke_on_local_cluster_writes_the_local_sweeps_records_and_a_rerun_submits_nothing(
        tmp_path, capsys, gpu_cluster):
    grid = NOTEBOOKS.parent / "parameters" / "matmul_tflops.yaml"
    overrides = ["-p", "n=64", "-p", "count=2", "-p", "timed_calls=2", "-p", "blas_baseline=False"]
    local_out, cluster_out = tmp_path / "local", tmp_path / "cluster"
    # The local sweep as the CLI runs it, told the devices (detecting them imports TensorFlow: slow here).
    run_sweep(plan([grid], preset="smoke", out=local_out, overrides={"n": 64, "count": 2, "timed_calls": 2,
                   "blas_baseline": False}, repeats=1),
              available={"cpu": 1}, echo=quiet)
    assert main(["sweep", str(grid), "--preset", "smoke", *overrides, "--out", str(cluster_out), "--no-progress",
                 "--cluster", "local:2", "--repeats", "1"]) == 0
    local, on_cluster = record_set(local_out), record_set(cluster_out)
    assert on_cluster == local  # same slugs, statuses and parameters
    assert sorted(status for status, _ in on_cluster.values()) == ["ok", "skipped", "skipped"]
    # The values pinned with -p name the files, beside the smoke preset's own results.
    pinned = "n-64_dtype-float32_count-2_timed_calls-2_blas_baseline-False"
    record = read_record(cluster_out / "matmul_tflops" / "cpu" / f"{pinned}.json")
    assert record["metrics"]["tflops_warm"] > 0
    assert record["worker"]["address"].startswith("tcp://") and record["worker"]["host"]
    assert record["sweep"]["cluster"]["out"] in ("shared", "returned")
    for suffix in (".ipynb", ".html", ".log"):
        assert (cluster_out / "matmul_tflops" / "cpu" / f"{pinned}{suffix}").is_file()
    skipped = read_record(cluster_out / "matmul_tflops" / "gpu" / f"{pinned}.json")
    assert "no worker of the Dask cluster" in skipped["error"]["message"]
    assert not list(cluster_out.rglob(".*"))  # no temporaries, probe or lock left
    status = collect_status(cluster_out)
    assert status.total("ok") == 1 and status.total("skipped") == 2

    capsys.readouterr()
    before = record["finished_at"]
    # A rerun (on another running cluster, its CPU combination only) submits nothing: it finished.
    assert main(["sweep", str(grid), "--preset", "smoke", *overrides, "--out", str(cluster_out), "--no-progress",
                 "--cluster", gpu_cluster, "--device", "cpu", "--repeats", "1"]) == 0
    printed = capsys.readouterr().out
    assert "0 to run" in printed and "1 finished earlier (kept)" in printed
    assert read_record(cluster_out / "matmul_tflops" / "cpu" / f"{pinned}.json")["finished_at"] == before


@pytest.mark.notebook
def test_a_worker_killed_mid_combination_gives_a_failed_record_and_the_sweep_finishes(tmp_path):
    grid = write_probe(tmp_path, "grid: {device: [cpu], value: [1, 2]}\nfixed: {kill_worker_on: 2}\n")
    out = tmp_path / "out"
    outcomes = run_sweep(plan([grid], out=out, options=RunOptions(cluster="local:2")), echo=quiet)
    by_value = {outcome.combination.params["value"]: outcome for outcome in outcomes}
    assert [by_value[value].status for value in (1, 2)] == ["ok", "failed"]
    failed = read_record(out / "probe" / "cpu" / "value-2.json")
    assert failed["status"] == "failed" and failed["error"]["kind"] == "worker_died"
    # local:N retries once: the worker died on both tries.
    assert "on each of 2 tries" in failed["error"]["message"] and failed["worker"]["address"].startswith("tcp://")
    assert "died" in (out / "probe" / "cpu" / "value-2.log").read_text()
    assert not list(out.rglob(".*"))


def intervals(out: Path, device: str) -> dict[str, list[tuple[float, float]]]:
    """worker address -> (start, end) of each run that worker did, from the records."""
    found: dict[str, list[tuple[float, float]]] = {}
    for path in sorted((out / "probe" / device).glob("*.json")):
        record = read_record(path)
        assert record["status"] == "ok", record.get("error")
        found.setdefault(record["worker"]["address"], []).append((record["metrics"]["start"], record["metrics"]["end"]))
    return found


@pytest.mark.notebook
def test_gpu_resources_keep_two_measurements_off_one_worker(tmp_path, gpu_cluster):
    grid = write_probe(tmp_path, "grid: {device: [gpu, tpu], value: [1, 2, 3, 4]}\nfixed: {sleep_s: 1.5}\n")
    out = tmp_path / "out"
    outcomes = run_sweep(plan([grid], out=out, options=RunOptions(cluster=gpu_cluster)), echo=quiet)
    assert sorted(outcome.status for outcome in outcomes) == ["ok"] * 4 + ["skipped"] * 4
    by_worker = intervals(out, "gpu")
    assert sum(len(runs) for runs in by_worker.values()) == 4
    for runs in by_worker.values():
        runs.sort()
        for (_, end), (start, _) in zip(runs, runs[1:]):
            assert start >= end, f"two GPU runs overlapped on one worker: {runs}"
    skipped = read_record(out / "probe" / "tpu" / "value-1.json")
    assert "none declares TPU=1" in skipped["error"]["message"]

    # The same worker threads without the resource request do run side by side (the check can fail): the four runs
    # fill the cluster's four threads, and each waits until all four have begun (were they one after another, each
    # would wait out the 120 s and none overlap), so a worker's two runs overlap however fast each one starts.
    (tmp_path / "meet").mkdir()
    cpu_grid = write_probe(tmp_path / "cpu", "grid: {device: [cpu], value: [1, 2, 3, 4]}\n"
                                             f"fixed: {{meet: {str(tmp_path / 'meet')!r}, meet_count: 4}}\n")
    run_sweep(plan([cpu_grid], out=tmp_path / "cpu-out", options=RunOptions(cluster=gpu_cluster)), echo=quiet)
    overlapped = False
    for runs in intervals(tmp_path / "cpu-out", "cpu").values():
        runs.sort()
        overlapped |= any(start < end for (_, end), (start, _) in zip(runs, runs[1:]))
    assert overlapped


@pytest.mark.notebook
@pytest.mark.parametrize("shared_out, written", [(None, "shared"), (False, "returned")])
def test_products_are_written_by_the_worker_in_a_shared_out_or_come_back_as_bytes(tmp_path, gpu_cluster,
                                                                                  shared_out, written):
    grid = write_probe(tmp_path, "grid: {device: [cpu], value: [1, 2]}\n")
    out = tmp_path / "out"
    outcomes = run_sweep(plan([grid], out=out, options=RunOptions(cluster=gpu_cluster, shared_out=shared_out)),
                         echo=quiet)
    assert [outcome.status for outcome in outcomes] == ["ok", "ok"]
    for value in (1, 2):
        base = out / "probe" / "cpu" / f"value-{value}"
        record = read_record(base.with_name(base.name + ".json"))
        assert record["sweep"]["cluster"] == {"scheduler": gpu_cluster, "out": written}
        assert record["params"]["value"] == value
        assert "probe" in base.with_name(base.name + ".html").read_text()
        assert json.loads(base.with_name(base.name + ".ipynb").read_text())["cells"]
        assert "[colabkit] probe cpu" in base.with_name(base.name + ".log").read_text()
    assert not list(out.rglob(".*"))


def test_a_shared_out_that_a_worker_cannot_see_fails_that_combination(tmp_path, gpu_cluster, monkeypatch):
    grid = write_probe(tmp_path, "grid: {device: [cpu], value: [1]}\n")
    out = tmp_path / "out"
    # The probe file is what a worker looks for; written elsewhere, no worker sees OUT.
    monkeypatch.setattr(cluster_module, "PROBE_PREFIX", ".colabkit-elsewhere-")
    outcomes = run_sweep(plan([grid], out=out, options=RunOptions(cluster=gpu_cluster, shared_out=True)), echo=quiet)
    assert outcomes[0].status == "failed"
    assert "does not see" in read_record(out / "probe" / "cpu" / "value-1.json")["error"]["message"]


def test_dry_run_on_a_cluster_plans_against_the_workers_resources(tmp_path, gpu_cluster, capsys):
    grid = write_probe(tmp_path, "grid: {device: [gpu, gpu:2, cpu], value: [1]}\n")
    out = tmp_path / "out"
    assert main(["sweep", str(grid), "--dry-run", "--cluster", gpu_cluster, "--out", str(out)]) == 0
    rows = {line.split()[1]: line.split()[3] for line in capsys.readouterr().out.splitlines()
            if line.startswith("probe ")}
    assert rows == {"gpu": "run", "gpu:2": "skip", "cpu": "run"}
    assert not out.exists() or not list(out.rglob("*.json"))  # nothing written, nothing submitted


@pytest.mark.notebook
def test_ctrl_c_cancels_the_submitted_tasks_stops_their_kernels_and_leaves_no_half_files(tmp_path, gpu_cluster):
    # The first run is quick; the four others would sleep 10 minutes each.
    grid = write_probe(tmp_path, "grid: {device: [cpu]}\n"
                                 "zip: {value: [1, 2, 3, 4, 5], sleep_s: [0.0, 600, 600, 600, 600]}\n")
    out = tmp_path / "out"

    def interrupt_after_the_first(line: str) -> None:
        if line.startswith("[1/"):
            raise KeyboardInterrupt

    before = sweep_kernels()
    start = time.perf_counter()
    with pytest.raises(SweepInterrupted) as stopped:
        run_sweep(plan([grid], out=out, options=RunOptions(cluster=gpu_cluster)), echo=interrupt_after_the_first)
    assert time.perf_counter() - start < 300  # the 600 s runs were stopped, not waited for (however busy the host)
    assert [outcome.status for outcome in stopped.value.outcomes] == ["ok"]
    records = list(out.rglob("*.json"))
    assert len(records) == 1 and read_record(records[0])["params"]["value"] == 1
    assert not list(out.rglob("*.ipynb"))[1:]  # only the finished run's notebook
    assert not list(out.rglob(".*"))
    deadline = time.monotonic() + 60  # a guard against a hang only: the kernels' end is the event waited for
    while left := sweep_kernels() - before:
        assert time.monotonic() < deadline, f"kernels of the stopped sweep still run: {left}"
        time.sleep(0.1)


def sweep_kernels() -> set[int]:
    """Processes started by a cluster sweep's tasks (they carry the sweep's token in their environment)."""
    import psutil

    found = set()
    for process in psutil.process_iter():
        try:
            if cluster_module.TOKEN_ENV in process.environ():
                found.add(process.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found
