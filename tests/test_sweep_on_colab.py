"""`sweep --colab`: Colab sessions per accelerator, driven through a fake `colab` client
(tests/fake_colab.py) that behaves as google-colab-cli v0.6.0's source says, its "VM" running the work
on this CPU while reporting the accelerator granted. What the client does beyond its docs (expiring
tokens, stop's words, the kernel-client break, Ctrl-C) is tested in test_colab_sessions.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from colab_helpers import (GRID, ONE_RUN, ROOT, assignments, calls, fake_colab_for, records, start_at_a_terminal, sweep,
                           verbs)

from colabkit.errors import ColabkitError
from colabkit.sweep.runners.colab.client import accelerators


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A fake `colab` first on PATH (colab_helpers)."""
    yield from fake_colab_for(tmp_path)


def test_accelerators_are_checked_in_the_clients_spelling():
    assert accelerators("t4, V5E1,H100") == ["T4", "v5e1", "H100"]
    with pytest.raises(ColabkitError, match="unknown accelerator K80; choose from T4, L4"):
        accelerators("T4,K80")
    with pytest.raises(ColabkitError, match="twice"):
        accelerators("T4,t4")
    with pytest.raises(ColabkitError, match="names no accelerator"):
        accelerators(" , ")


def test_without_the_client_one_line_names_its_install_and_nothing_is_created(tmp_path: Path):
    env = {**os.environ, "PATH": str(Path(sys.executable).parent)}  # python, and no colab
    completed = sweep(env, tmp_path / "out", "--colab", "T4")
    assert completed.returncode == 2, completed.stderr
    assert completed.stderr.strip().count("\n") == 0 and "uv tool install google-colab-cli==0.6.0" in completed.stderr
    assert "jupyter-kernel-client==0.15.0" in completed.stderr  # the pin that keeps its `exec` working
    assert not (tmp_path / "out").exists()


def test_not_logged_in_one_line_names_the_login_step_and_no_session_is_asked_for(fake: dict[str, str], tmp_path):
    completed = sweep({**fake, "FAKE_COLAB_LOGGED_OUT": "1"}, tmp_path / "out", "--colab", "T4")
    assert completed.returncode == 2 and "not logged in" in completed.stderr and "colab whoami" in completed.stderr
    assert calls(fake) == ["whoami"]
    assert not (tmp_path / "out").exists()


def test_a_dry_run_lists_the_sessions_and_an_estimate_and_calls_no_colab(fake: dict[str, str], tmp_path: Path):
    completed = sweep(fake, tmp_path / "out", "--colab", "T4,v5e1", "--dry-run")
    assert completed.returncode == 0, completed.stderr
    assert "Colab T4 (gpu): 1 run(s), in about 1 session(s) of at most 3000 s" in completed.stdout
    assert "Colab v5e1 (tpu): 1 run(s)" in completed.stdout and "estimated wall time" in completed.stdout
    assert "compute units" in completed.stdout
    assert calls(fake) == []


def test_a_refused_accelerator_fails_its_combinations_with_the_reason_and_nothing_is_left(fake, tmp_path: Path):
    completed = sweep({**fake, "FAKE_COLAB_REFUSE": "v5e1"}, tmp_path / "out", "--colab", "v5e1")
    assert completed.returncode == 1, completed.stderr
    [record] = records(tmp_path / "out" / "colab-v5e1")
    assert record["status"] == "failed" and record["error"]["kind"] == "colab"
    assert "Backend rejected accelerator 'V5E1'" in record["error"]["message"]
    assert not (tmp_path / "out" / "colab-v5e1" / ".colab-session.json").exists()
    # a session that never existed is never reported stopped, nor asked to stop
    assert "stopped" not in completed.stdout and verbs(fake, "stop") == [] and assignments(fake) == {}


def test_unknown_accelerators_and_clashing_options_are_refused_before_anything(fake: dict[str, str], tmp_path):
    for args, words in ((["--colab", "K80"], "unknown accelerator K80"),
                        (["--colab", "T4", "--device", "gpu"], "drop --device")):
        completed = sweep(fake, tmp_path / "out", *args)
        assert completed.returncode == 2 and words in completed.stderr, completed.stderr
    assert calls(fake) == []


@pytest.mark.slow  # about 80 s on a 2-core host: two sessions, each a TensorFlow/JAX kernel
def test_two_accelerators_run_side_by_side_come_back_and_are_stopped(fake: dict[str, str], tmp_path: Path):
    out = tmp_path / "out"
    completed = sweep({**fake, "FAKE_COLAB_DOWNLOAD_FAILS": "1", "FAKE_COLAB_DOWNLOAD_DELAY": "0.5"}, out,
                      "--colab", "T4,v5e1")
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    made = [line for line in calls(fake) if line.startswith("new ")]
    asked = sorted(" ".join(line.split()[-2:]) for line in made)
    assert set(asked) == {"--gpu T4", "--tpu v5e1"} and len(made) == 3  # the session whose download failed: replaced
    sessions = {line.split()[2] for line in made}
    assert {line.split()[2] for line in calls(fake) if line.startswith("stop ")} == sessions
    assert assignments(fake) == {}
    assert "asked for" not in completed.stdout  # Tesla T4 is a T4, TPU v5 lite a v5e-1: no warning
    gpu, tpu = records(out / "colab-T4"), records(out / "colab-v5e1")
    assert [r["status"] for r in gpu + tpu] == ["ok", "ok"]
    assert gpu[0]["device"]["kind"] == "gpu" and gpu[0]["device"]["name"] == "Tesla T4"
    assert tpu[0]["device"]["kind"] == "tpu" and tpu[0]["device"]["name"] == "TPU v5 lite"
    assert all(r["device"]["stand_in"] == "cpu" for r in gpu + tpu)  # the fake's runs say they ran on the CPU
    assert list((out / "colab-T4").glob("colab-sweep-colabkit-t4-*.log"))
    report = subprocess.run([sys.executable, "-m", "colabkit", "report", str(out), "--out", str(tmp_path / "report")],
                            cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert report.returncode == 0, report.stderr[-2000:]
    overview = (tmp_path / "report" / "tables" / "records_overview.md").read_text()
    assert "Tesla T4" in overview and "v5 lite" in overview
    assert overview.count("(a CPU standing in)") >= 2  # the report never takes the fake's CPU runs for a T4 or a TPU


@pytest.mark.slow  # about 2 minutes: a sweep killed mid-run, then run again
def test_a_killed_sweep_rerun_stops_the_orphan_and_runs_only_what_is_left(fake: dict[str, str], tmp_path: Path):
    out = tmp_path / "out"
    command = [sys.executable, "-m", "colabkit", "sweep", GRID, "--preset", "smoke", "--repeats", "2", "-p", "n=256",
               "--out", str(out), "--colab", "T4"]
    first = subprocess.Popen(command, env=fake, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    deadline = time.monotonic() + 300
    while not (finished := [r for r in records(out / "colab-T4") if r["status"] == "ok"]):
        assert time.monotonic() < deadline and first.poll() is None
        time.sleep(0.5)
    os.killpg(first.pid, signal.SIGKILL)  # a crash: no clean-up ran
    first.wait()
    [orphan] = [line.split()[2] for line in calls(fake) if line.startswith("new ")]
    assert orphan in {line.split()[2] for line in verbs(fake, "new")} and len(assignments(fake)) == 1
    again = subprocess.run(command, env=fake, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert f"stop -s {orphan}" in calls(fake)
    assert assignments(fake) == {}
    after = records(out / "colab-T4")
    assert [r["status"] for r in after] == ["ok", "ok"]
    assert finished[0]["started_at"] in {r["started_at"] for r in after}  # what had finished did not run again
    if len([line for line in calls(fake) if line.startswith("new ")]) == 2:  # something was left: a new session ran it
        logs = "".join(path.read_text() for path in (out / "colab-T4").glob("colab-sweep-*.log"))
        assert "1 runs: 1 to run" in logs  # the new session got only the run that had not finished


@pytest.mark.slow  # about a minute
def test_a_lost_session_fails_what_did_not_come_back_and_a_rerun_resumes(fake: dict[str, str], tmp_path: Path):
    out = tmp_path / "out"
    # its 4th `exec` (after the probe, the set-up and the start: its first poll) finds it lost
    lost = sweep({**fake, "FAKE_COLAB_LOSE": "T4:4"}, out, "--colab", "T4")
    assert lost.returncode == 1
    [record] = records(out / "colab-T4")
    assert record["error"]["kind"] == "colab" and "was lost" in record["error"]["message"]
    again = sweep(fake, out, "--colab", "T4")
    assert again.returncode == 0, again.stdout[-3000:]
    assert [r["status"] for r in records(out / "colab-T4")] == ["ok"]


def test_a_session_past_its_time_limit_is_stopped_and_its_runs_fail_saying_so(fake: dict[str, str], tmp_path):
    out = tmp_path / "out"
    completed = sweep(fake, out, "--colab", "T4", "--colab-timeout", "0.1")
    assert completed.returncode == 1, completed.stdout[-2000:]
    [record] = records(out / "colab-T4")
    assert record["error"]["kind"] == "colab" and "--colab-timeout 0.1 s" in record["error"]["message"]
    assert assignments(fake) == {}


def test_the_wheel_is_this_checkout_with_its_commit_and_suite(tmp_path: Path):
    import zipfile

    from colabkit.records.provenance import git_commit
    from colabkit.sweep.runners.colab.sessions import build_wheel

    with zipfile.ZipFile(build_wheel(tmp_path)) as wheel:
        names = set(wheel.namelist())
        assert wheel.read("colabkit/source_commit.txt").decode().strip() == git_commit()
    assert {"colabkit/sweep/runners/colab/executor.py", "colabkit/sweep/runners/colab/sessions.py", "colabkit/bundled/parameters/matmul_tflops.yaml",
            "colabkit/bundled/notebooks/matmul_tflops.ipynb"} <= names


def test_the_granted_accelerator_is_compared_by_kind_and_model_and_a_real_difference_said_once(tmp_path, capsys):
    from colabkit.sweep.runners.colab.command import _summary
    from colabkit.sweep.runners.execute import Outcome
    from colabkit.sweep.plan import plan

    runs = list(plan([GRID], "smoke", "gpu", {"n": 256}, tmp_path, 3))
    tpu = list(plan([GRID], "smoke", "tpu", {"n": 256}, tmp_path, 1))

    def outcomes(found: str, combinations: list) -> list:
        made = []
        for index, combination in enumerate(combinations):
            path = tmp_path / f"{found}-{index}.json"
            path.write_text(json.dumps({"status": "ok", "accelerator_found": found}))
            made.append(Outcome(combination, "ok", 1.0, path))
        return made

    assert _summary(["T4", "v5e1"], {"T4": outcomes("Tesla T4", runs), "v5e1": outcomes("TPU v5 lite", tpu)},
                    tmp_path) == 0
    assert "asked for" not in capsys.readouterr().out  # the driver's name of a T4 is a T4
    assert _summary(["T4"], {"T4": outcomes("NVIDIA L4", runs)}, tmp_path) == 0
    said = capsys.readouterr().out
    assert said.count("[T4] asked for T4; Colab granted NVIDIA L4") == 1  # three records, one line


@pytest.mark.slow  # about a minute
def test_ctrl_c_stops_every_session_and_keeps_what_came_back(fake: dict[str, str], tmp_path: Path):
    out = tmp_path / "out"
    command = [sys.executable, "-m", "colabkit", "sweep", GRID, *ONE_RUN, "--out", str(out), "--colab", "T4,v5e1"]
    running = start_at_a_terminal(command, fake)
    deadline = time.monotonic() + 300  # a guard against a hang only: both sessions polled is the event waited for
    while len({line.split()[2] for line in calls(fake) if "poll.py" in line}) < 2:
        assert time.monotonic() < deadline and running.poll() is None
        time.sleep(0.2)
    os.killpg(running.pid, signal.SIGINT)  # Ctrl-C at the terminal: the `colab` commands, in sessions of their own, miss it
    output, _ = running.communicate(timeout=300)
    assert running.returncode == 130, output[-3000:]
    made = {line.split()[2] for line in calls(fake) if line.startswith("new ")}
    assert len(made) == 2 and {line.split()[2] for line in calls(fake) if line.startswith("stop ")} == made
    assert assignments(fake) == {}
    assert not list(out.rglob(".colab-session.json"))


@pytest.mark.long("a fake session's sweep detects its devices (TensorFlow's import in a child), waits up to 5 s for a "
                  "quiet host and runs one JAX matmul: 67 s measured on a shared, busy 2-core host")
def test_the_run_options_reach_the_session_and_its_records_show_them(fake: dict[str, str], tmp_path: Path):
    """The plan carries its options to Colab as JSON (`sweep --plan`): a Colab record shows --kernels, --kernel-runs
    and --wait-quiet as a local run's does, the session given them in its plan file, less the runner's own."""
    out = tmp_path / "out"
    completed = sweep(fake, out, "--colab", "T4", "--kernels", "reuse", "--kernel-runs", "7", "--wait-quiet", "5",
                      grid_args=(*ONE_RUN, "-p", "backend=jax"))
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    [record] = records(out / "colab-T4")
    assert record["status"] == "ok" and record["device"]["name"] == "Tesla T4"
    assert record["kernel"]["mode"] == "reuse" and record["kernel"]["max_runs"] == 7  # --kernels, --kernel-runs
    assert record["sweep"]["quiet_wait"]["max_wait_s"] == 5  # --wait-quiet
    [given] = Path(fake["FAKE_COLAB_HOME"]).glob("vms/*/content/colabkit/plan.json")  # what the session ran
    options = json.loads(given.read_text())["options"]
    assert (options["max_kernel_runs"], options["wait_quiet_s"], options["colab"]) == (7, 5, [])
