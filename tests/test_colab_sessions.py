"""`sweep --colab` against the Colab client as google-colab-cli v0.6.0's source has it behave (the fake:
tests/fake_colab.py): its kernel-client break, runtime tokens that expire, `stop`'s words, Ctrl-C that is
colabkit's alone, and what a hostile session may send back; and the options that go with --colab."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from colab_helpers import (ONE_RUN, ROOT, assignments, calls, client_sessions, fake_colab_for, records, release_new,
                           remote_records, start_at_a_terminal, sweep, sweep_command, sweep_here, verbs)

from colabkit.errors import ColabkitError, HostileArchiveError
from colabkit.sweep.runners.colab.sessions import (STATE_FILE, HeldSession, fitting, held_sessions, remember,
                                                  session_count, unpack_results)

# Runs of the smoke's matmul in warm kernels (each repeat in its own): by the estimate 6.6 s for the first, 2.4 s for
# each next one; a run on the fake's clock takes what FAKE_COLAB_RUN_S says, whatever it takes here.
REPEATS = ("--preset", "smoke", "-p", "n=256", "--repeats")
RUNS_ON_THE_CLOCK = {"FAKE_COLAB_RUN_FILES": "colabkit/out/**/*.json"}  # a run is finished once its record is there


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A fake `colab` first on PATH (colab_helpers)."""
    yield from fake_colab_for(tmp_path)


def held(out: Path) -> list[dict]:
    path = out / STATE_FILE
    return json.loads(path.read_text())["sessions"] if path.exists() else []


# --- 1. the kernel-client break ------------------------------------------------------------------------

def test_a_broken_kernel_client_gives_one_line_naming_the_fix_after_one_session_start(fake, tmp_path: Path):
    out = tmp_path / "out"
    completed = sweep({**fake, "FAKE_COLAB_KERNEL_CLIENT": "1.0.2"}, out, "--colab", "T4,v5e1")
    assert completed.returncode == 2, completed.stdout[-2000:] + completed.stderr[-2000:]
    [line] = completed.stderr.strip().splitlines()
    assert "jupyter-kernel-client==0.15.0" in line and "issue #94" in line and "Traceback" not in completed.stdout
    assert len(verbs(fake, "new")) == 1  # the first session proved it; the other accelerator asked for none
    assert verbs(fake, "upload") == [] and assignments(fake) == {}  # nothing sent, the one session stopped
    assert records(out) == [] and not list(out.rglob(STATE_FILE))  # nothing ran: a rerun after the fix runs all


# --- 2. tokens that expire: sessions cut to end before, stopped means stopped ---------------------------

@pytest.mark.long("two fake Colab sessions, each installing colabkit's wheel, and up to five TensorFlow runs")
def test_work_that_outlasts_the_token_finishes_in_several_sessions_with_nothing_lost_or_left(
        fake, tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    # Four runs (the smoke's two sizes, twice). On the fake's clock (never real time) a run takes 6 s and a token
    # expires 20 s after its `colab new`: the runs take 24 s in all. In sessions of at most 12 s the estimate (6.6 +
    # 2.4 + 2.4 s) starts 3 runs in the first; its second run's record brings the session to 12 s, and at the next
    # poll it is drained (its third run stopped, or brought back if it finished first) or, its sweep done, ends with
    # no time left for the fourth. A fresh session runs the rest, and ends at 12 s at most, when its last record is
    # there. No session reaches 20 s: none is lost.
    env = {**fake, **RUNS_ON_THE_CLOCK, "FAKE_COLAB_RUN_S": "6", "FAKE_COLAB_TOKEN_S": "20"}
    status, printed = sweep_here(monkeypatch, capsys, env, out, "--colab", "T4", "--colab-session-limit", "12",
                                 grid_args=("--preset", "smoke", "--repeats", "2"))
    assert status == 0, printed[-3000:]
    assert [r["status"] for r in records(out / "colab-T4")] == ["ok"] * 4
    started = [line.split(": ")[1].split(" run(s)")[0] for line in printed.splitlines() if "run(s) started" in line]
    assert started[0] == "3" and len(verbs(fake, "new")) == 2  # cut by the estimate; a second session ran the rest
    assert "appears to be lost" not in printed
    assert assignments(fake) == {} and held(out / "colab-T4") == []  # every session stopped, proved so
    assert {line.split()[2] for line in verbs(fake, "stop")} == {line.split()[2] for line in verbs(fake, "new")}


def test_a_limit_no_session_can_finish_a_run_in_costs_one_session_not_one_per_run(fake, tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    # the floor without the start allowance: the first run's estimate (6.6 s) fits in 9 s; a session whose `colab
    # new` alone takes 12 s (of the fake's clock) does not, and its first poll finds it past its limit
    env = {**fake, "COLABKIT_COLAB_SESSION_START_S": "0", "FAKE_COLAB_ASSIGN_GAP_S": "12"}
    status, printed = sweep_here(monkeypatch, capsys, env, out, "--colab", "T4", "--colab-session-limit", "9",
                                 grid_args=(*REPEATS, "3"))
    assert status == 1, printed[-3000:]
    assert len(verbs(fake, "new")) == 1  # the first session that finished no run stopped this accelerator
    assert [r["status"] for r in records(out / "colab-T4")] == ["failed"] * 3
    assert all("ended before its first run" in r["error"]["message"] for r in records(out / "colab-T4"))
    assert assignments(fake) == {} and held(out / "colab-T4") == []


@pytest.mark.long("two fake Colab sessions, each installing colabkit's wheel and making the same TensorFlow run")
def test_a_failed_download_stops_its_session_before_anything_else_is_sent_to_it(fake, tmp_path: Path):
    out = tmp_path / "out"
    completed = sweep({**fake, "FAKE_COLAB_DOWNLOAD_FAILS": "1"}, out, "--colab", "T4")
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-2000:]
    log = calls(fake)
    failed = next(index for index, line in enumerate(log) if line.startswith("download "))
    first = log[failed].split()[2] if len(log[failed].split()) > 2 else None
    following = [line for line in log[failed + 1:] if first is None or first in line]
    assert following[0].startswith("stop "), log[failed:]  # no exec between the failed download and the stop
    assert "could not be downloaded" in completed.stdout and len(verbs(fake, "new")) == 2  # a fresh one ran it
    assert [r["status"] for r in records(out / "colab-T4")] == ["ok"] and assignments(fake) == {}


def test_a_session_lost_to_its_expired_token_is_not_called_stopped_and_a_rerun_tries_it_again(fake, tmp_path):
    out = tmp_path / "out"
    # the old behaviour: sessions as long as the work; the token expires mid-sweep: the probe, the set-up and the
    # sweep's start go through, and its first poll (the session's 4th `colab exec`) finds the session lost
    first = sweep({**fake, "FAKE_COLAB_TOKEN_EXECS": "4"}, out, "--colab", "T4", "--colab-session-limit", "3000")
    assert first.returncode == 1, first.stdout[-3000:]
    [endpoint] = assignments(fake)  # the VM runs on (and bills), the client has forgotten it
    assert client_sessions(fake) == {}
    session = verbs(fake, "new")[0].split()[2]
    assert f"session {session} stopped" not in first.stdout
    line, again_in_summary = [text for text in first.stdout.splitlines() if text.startswith("[T4] runtime")]
    assert line == again_in_summary and endpoint in line and "may still be running" in line and "Manage sessions" in line
    failed = [r for r in records(out / "colab-T4") if r["status"] == "failed"]
    assert failed and all(endpoint in r["error"]["message"] and "may still be running" in r["error"]["message"]
                          for r in failed)
    assert [entry["endpoint"] for entry in held(out / "colab-T4")] == [endpoint]  # saved right after `new`
    # the rerun tries the saved endpoint first (then its own session, at once out of time, is stopped)
    again = sweep(fake, out, "--colab", "T4", "--colab-timeout", "0.1")
    assert again.returncode == 1, again.stdout[-3000:]
    tried = [text for text in again.stdout.splitlines() if text.startswith("[T4] runtime")]
    assert tried and all(endpoint in text and "token expired" in text for text in tried)
    assert [entry["endpoint"] for entry in held(out / "colab-T4")] == [endpoint]  # still named, still unproved
    assert list(assignments(fake)) == [endpoint] and len(verbs(fake, "new")) == 2  # the rerun's session: stopped


# --- 4. stop's words -------------------------------------------------------------------------------------

def test_a_stop_that_did_not_say_terminated_is_checked_and_a_rerun_stops_it(fake, tmp_path: Path):
    out = tmp_path / "out"
    first = sweep({**fake, "FAKE_COLAB_UNASSIGN_FAILS": "1"}, out, "--colab", "T4", "--colab-timeout", "0.1")
    assert first.returncode == 1
    [endpoint] = assignments(fake)
    session = verbs(fake, "new")[0].split()[2]
    line, again_in_summary = [text for text in first.stdout.splitlines() if text.startswith("[T4] runtime")]
    assert line == again_in_summary and endpoint in line and "Service Unavailable" in line
    assert f"session {session} stopped" not in first.stdout
    [record] = records(out / "colab-T4")
    assert "--colab-timeout 0.1 s" in record["error"]["message"] and endpoint in record["error"]["message"]
    assert [entry["endpoint"] for entry in held(out / "colab-T4")] == [endpoint]
    again = sweep(fake, out, "--colab", "T4", "--colab-timeout", "0.1")  # the client still knows it: stopped now
    assert f"session {session} stopped" in again.stdout
    assert assignments(fake) == {} and held(out / "colab-T4") == []


# --- 3 and 6. Ctrl-C is colabkit's --------------------------------------------------------------------------

def test_ctrl_c_during_colab_new_leaves_no_assigned_runtime(fake, tmp_path: Path):
    out = tmp_path / "out"
    env = {**fake, "FAKE_COLAB_HOLD_NEW": "1"}  # `new` waits, assigned and not yet named (the client's window)
    running = start_at_a_terminal(sweep_command(out, "--colab", "T4"), env)
    deadline = time.monotonic() + 300  # a guard against a hang only: the assignment is the event waited for
    while not assignments(fake):
        assert time.monotonic() < deadline and running.poll() is None
        time.sleep(0.05)
    assert client_sessions(fake) == {}  # inside the gap
    os.killpg(running.pid, signal.SIGINT)  # Ctrl-C at the terminal: the sweep's whole process group
    release_new(fake)  # the `colab new` under way finishes (colabkit lets it), then colabkit stops what it made
    output, _ = running.communicate(timeout=300)
    assert running.returncode == 130, output[-3000:]
    assert assignments(fake) == {} and client_sessions(fake) == {}
    assert verbs(fake, "upload") == [] and not list(out.rglob(STATE_FILE))


def test_sigint_mid_sweep_brings_back_every_finished_record_then_stops_every_session(fake, tmp_path: Path):
    out = tmp_path / "out"
    env = {**fake, "COLABKIT_COLAB_POLL_S": "600"}  # no poll before the interrupt: only the last one brings records
    running = start_at_a_terminal(sweep_command(out, "--colab", "T4", grid_args=tuple(ONE_RUN)), env)
    deadline = time.monotonic() + 300  # a guard against a hang only: a finished run on the VM is the event waited for
    while not [r for r in remote_records(fake) if r.get("status") == "ok"]:
        assert time.monotonic() < deadline and running.poll() is None
        time.sleep(0.2)
    os.killpg(running.pid, signal.SIGINT)
    output, _ = running.communicate(timeout=300)
    assert running.returncode == 130, output[-3000:]
    finished = {r["started_at"] for r in remote_records(fake) if r.get("status") == "ok"}
    assert finished and finished <= {r["started_at"] for r in records(out / "colab-T4") if r["status"] == "ok"}
    assert assignments(fake) == {} and not list(out.rglob(STATE_FILE))
    assert verbs(fake, "download") and calls(fake)[-1].startswith("stop ")  # brought back, then stopped


# --- issue 43: a hostile session, options that go with --colab ----------------------------------------------

def hostile_tar(path: Path, name: str) -> Path:
    with tarfile.open(path, "w") as tar:
        data = b"not yours\n"
        member = tarfile.TarInfo(name)
        member.size = len(data)
        tar.addfile(member, io.BytesIO(data))
    return path


def test_a_hostile_tarball_from_a_session_gives_one_line_and_a_failed_record_naming_the_member(fake, tmp_path):
    out = tmp_path / "sweeps" / "out"
    archive = hostile_tar(tmp_path / "hostile.tar", "out/../../escaped.txt")
    completed = sweep({**fake, "FAKE_COLAB_RESULTS": str(archive)}, out, "--colab", "T4")
    assert completed.returncode == 1, completed.stdout[-2000:] + completed.stderr[-2000:]
    assert "Traceback" not in completed.stderr + completed.stdout and "None" not in completed.stdout
    [line] = [line for line in completed.stdout.splitlines() if line.startswith("[T4] session") and "refused" in line]
    assert "'out/../../escaped.txt'" in line and "nothing of it was unpacked" in line  # then the run's failure
    [record] = records(out / "colab-T4")
    assert record["status"] == "failed" and "out/../../escaped.txt" in record["error"]["message"]
    assert not list(tmp_path.rglob("escaped.txt")) and assignments(fake) == {}


@pytest.mark.parametrize("name, words", [("out/../escaped.txt", "not under out/"), ("../escaped.txt", "not under out/"),
                                         ("/tmp/escaped.txt", "not under out/"), ("outside/escaped.txt", "not under out/")])
def test_results_are_unpacked_only_inside_their_folder(tmp_path: Path, name: str, words: str):
    archive = hostile_tar(tmp_path / "results.tar", name)
    with pytest.raises(HostileArchiveError, match=words):
        unpack_results(archive, tmp_path / "out")
    assert not list(tmp_path.rglob("escaped.txt"))
    linked = tmp_path / "linked.tar"
    with tarfile.open(linked, "w") as tar:
        link = tarfile.TarInfo("out/notebook.ipynb")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    with pytest.raises(HostileArchiveError, match="link"):
        unpack_results(linked, tmp_path / "out")
    fine = hostile_tar(tmp_path / "fine.tar", "out/matmul_tflops/gpu/run.json")
    assert unpack_results(fine, tmp_path / "out") == 1
    assert (tmp_path / "out" / "matmul_tflops" / "gpu" / "run.json").read_text() == "not yours\n"



def test_sessions_a_live_sweep_here_holds_are_refused_and_a_dead_ones_are_taken_over(tmp_path: Path):
    remember(tmp_path, HeldSession("colabkit-a", "T4", pid=os.getppid()))  # the process that started pytest: alive
    with pytest.raises(ColabkitError, match=f"another sweep \\(process {os.getppid()}\\) holds Colab session 'colabkit-a'"):
        held_sessions(tmp_path)
    gone = subprocess.Popen(["true"])
    gone.wait()
    remember(tmp_path, HeldSession("colabkit-a", "T4", pid=gone.pid))  # its process has ended: its sessions are ours
    assert [entry.session for entry in held_sessions(tmp_path)] == ["colabkit-a"]

def test_results_never_follow_a_link_already_in_their_folder_out_of_it(tmp_path: Path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "gpu").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    archive = hostile_tar(tmp_path / "results.tar", "out/gpu/escaped.txt")
    with pytest.raises(HostileArchiveError, match="'out/gpu/escaped.txt' would land outside"):
        unpack_results(archive, tmp_path / "out")
    assert not list(tmp_path.rglob("escaped.txt"))


@pytest.mark.parametrize("args, words", [
    (["--colab="], "--colab '' names no accelerator"),
    (["--colab", " , "], "names no accelerator"),
    (["--colab", "T4", "--colab-timeout", "0"], "--colab-timeout: '0': must be more than 0 seconds"),
    (["--colab", "T4", "--colab-session-limit", "0"], "--colab-session-limit: '0': must be more than 0 seconds"),
    (["--colab-timeout", "60"], "--colab-timeout goes with --colab"),
    (["--colab-session-limit", "60", "--colab-timeout", "9"], "--colab-timeout and --colab-session-limit go with"),
    (["--colab", "T4", "--device", "gpu"], "--colab runs each accelerator's combinations on its own runtime: drop"),
    (["--colab", "T4", "--colab-session-limit", "7200"], "--colab-session-limit 7200: at most 3300 s"),
    (["--colab", "T4", "--colab-session-limit", "7200", "--dry-run"], "--colab-session-limit 7200: at most 3300 s"),
    (["--colab", "T4", "--colab-session-limit", "1e-9"], "--colab-session-limit 1e-09: under the"),
    (["--colab", "T4", "--colab-session-limit", "5", "--dry-run"], "a T4 session needs for one run (about 2 s to start"),
    (["--colab", "T4", "--jobs", "2"], "drop --cluster and --jobs"),
])
def test_colab_options_are_refused_in_one_line_before_anything(fake, tmp_path: Path, args: list[str], words: str):
    completed = sweep(fake, tmp_path / "out", *args)
    assert completed.returncode == 2 and words in completed.stderr, completed.stderr
    assert completed.stderr.strip().count("\n") == 0
    assert calls(fake) == [] and not (tmp_path / "out").exists()


# --- how a session's runs are cut ---------------------------------------------------------------------------

def test_runs_are_cut_by_their_estimates_to_fit_a_session():
    assert fitting([6.6, 2.4, 2.4, 2.4], 10) == 2
    assert fitting([30.0, 1.0], 10) == 1  # one run always goes to a fresh session, however long its estimate
    assert fitting([30.0, 1.0], 10, at_least_one=False) == 0  # a session that ran some hands it to a fresh one
    assert session_count([6.6, 2.4, 2.4, 2.4, 2.4, 2.4], 18) == 2
    assert session_count([], 18) == 0


def test_a_session_runs_exactly_the_runs_of_the_plan_it_is_given_planning_nothing(tmp_path: Path):
    from colabkit.sweep.plan import SweepPlan, plan

    runs = plan([str(ROOT / "parameters" / "matmul_tflops.yaml")], "smoke", "cpu", {}, tmp_path / "out", 2)
    share = tmp_path / "plan.json"  # what a session's sweep is given: its runs, as planned on the user's machine
    share.write_text(SweepPlan([runs[3], runs[0]], runs.out).to_json())
    command = [sys.executable, "-m", "colabkit", "sweep", "--plan", str(share), "--dry-run"]
    dry = subprocess.run([*command, "--out", str(tmp_path / "elsewhere")], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    assert dry.returncode == 0, dry.stderr
    assert "would run 2 " in dry.stdout and runs[3].run_slug in dry.stdout and runs[0].run_slug in dry.stdout
    assert str(tmp_path / "elsewhere") in dry.stdout  # --out: where the receiving side writes
    refused = subprocess.run([*command, "--preset", "smoke"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "holds what runs and how: give it alone" in refused.stderr


# --- 6. what the page promises ------------------------------------------------------------------------------

def test_the_colab_page_gives_the_clients_python_its_pinned_install_and_no_keep_alive_promise():
    from colabkit.sweep.runners.colab.client import INSTALL

    page = (ROOT / "docs" / "colab.md").read_text(encoding="utf-8")
    section = page[page.index("## Every accelerator from one command: `--colab`"):]
    assert "Python 3.12 or later" in section and "3.13+" not in section
    assert INSTALL in section and "2026-11-27" in section and "not been run against\nreal Colab" in section
    assert "keeps a session from idling out" not in section  # the client's keep-alive ends with its record
    assert "ends as soon as the client drops the session's record" in section
