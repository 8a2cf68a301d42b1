"""The fake `colab` (tests/fake_colab.py) keeps what google-colab-cli v0.6.0's source does, which the
tests of `sweep --colab` rely on: one persistent interpreter per session, an error that exits 0, a
--timeout that stops only the waiting, stop's words and exit statuses, tokens that expire, the
assign-to-save gap and the kernel-client break; and its clock moves only on events (the test's moves,
the gap, finished runs), never with real time."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from colab_helpers import advance_clock, assignments, client_sessions, fake_colab_for, release_new
from fake_colab import clock

FAKE = Path(__file__).resolve().parent / "fake_colab.py"


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A fake `colab` first on PATH (colab_helpers)."""
    yield from fake_colab_for(tmp_path)


def colab(env: dict[str, str], *args: str, code: str | None = None, tmp: Path | None = None
          ) -> subprocess.CompletedProcess[str]:
    if code is not None:
        assert tmp is not None
        script = tmp / f"cell-{time.monotonic_ns()}.py"
        script.write_text(code)
        args = (*args, "-f", str(script))
    return subprocess.run([sys.executable, str(FAKE), *args], env=env, capture_output=True, text=True, timeout=120)


def test_a_session_keeps_one_interpreter_and_exec_exits_0_on_an_error(fake, tmp_path: Path):
    assert colab(fake, "new", "-s", "s1", "--gpu", "T4").stdout.endswith("[colab] Session READY.\n")
    assert colab(fake, "exec", "-s", "s1", code="import os\nx = 41\nos.chdir('..')", tmp=tmp_path).returncode == 0
    later = colab(fake, "exec", "-s", "s1", code="import os\nprint(x + 1, os.path.basename(os.getcwd()))", tmp=tmp_path)
    assert later.stdout == "42 content\n"  # the variable survived; each exec starts in /content again
    failed = colab(fake, "exec", "-s", "s1", code="print(__file__)", tmp=tmp_path)
    assert failed.returncode == 0 and "NameError: name '__file__' is not defined" in failed.stderr
    go = tmp_path / "go"  # the code waits for it: it cannot finish before the client stops waiting
    waited = colab(fake, "exec", "-s", "s1", "--timeout", "0.5", tmp=tmp_path,
                   code=f"import os, time\nwhile not os.path.exists({str(go)!r}):\n    time.sleep(0.01)\ny = 1")
    assert waited.returncode == 1 and waited.stderr.strip().endswith("TimeoutError: Timeout waiting for output")
    go.touch()
    assert colab(fake, "exec", "-s", "s1", code="print(y)", tmp=tmp_path).stdout == "1\n"  # it ran on


def test_stop_says_terminated_only_when_it_stopped_and_exits_0_on_an_unknown_name(fake):
    colab(fake, "new", "-s", "s1", "--tpu", "v5e1")
    [endpoint] = assignments(fake)
    assert colab(fake, "status", "-s", "s1").stdout == f"[s1] {endpoint} | Hardware: V5E1 | Variant: TPU | Status: IDLE\n"
    assert colab(fake, "sessions").stdout == f"[s1] {endpoint} | Hardware: V5E1 | Variant: TPU\n"
    stopped = colab(fake, "stop", "-s", "s1")
    assert stopped.returncode == 0 and stopped.stdout.endswith("[colab] Session terminated.\n")
    unknown = colab(fake, "stop", "-s", "s1")
    assert unknown.returncode == 0 and unknown.stdout == "[colab] Session 's1' not found.\n"
    assert assignments(fake) == {} and colab(fake, "sessions").stdout == "[colab] No active sessions found on server.\n"


def test_an_expired_token_loses_the_session_to_the_client_while_its_vm_runs_on(fake, tmp_path: Path):
    colab(fake, "new", "-s", "s1", "--gpu", "T4")
    assert colab(fake, "exec", "-s", "s1", code="print(1)", tmp=tmp_path).stdout == "1\n"
    advance_clock(fake, 3599)
    assert colab(fake, "exec", "-s", "s1", code="print(2)", tmp=tmp_path).stdout == "2\n"  # within its hour
    advance_clock(fake, 1)
    lost = colab(fake, "exec", "-s", "s1", code="print(3)", tmp=tmp_path)
    assert lost.returncode == 1 and "[colab] Session 's1' appears to be lost (404/401). Cleaning up." in lost.stdout
    [endpoint] = assignments(fake)
    assert client_sessions(fake) == {} and colab(fake, "sessions").stdout.startswith(f"[?] {endpoint} |")
    unknown = colab(fake, "stop", "-s", "s1")
    assert unknown.returncode == 0 and "Session terminated." not in unknown.stdout and list(assignments(fake)) == [endpoint]


def test_the_clock_moves_with_each_finished_run_and_a_token_can_expire_at_the_nth_exec(fake, tmp_path: Path):
    env = {**fake, "FAKE_COLAB_RUN_S": "600", "FAKE_COLAB_RUN_FILES": "out/*.json"}
    colab(env, "new", "-s", "s1", "--gpu", "T4")
    write = "import os\nos.makedirs('out', exist_ok=True)\nopen('out/{}.json', 'w').close()\nopen('out/.{}.json', 'w')"
    for run in range(6):  # six runs of 600 s (their dot-files are no runs): the sixth ends the token's hour
        assert colab(env, "exec", "-s", "s1", code=write.format(run, run), tmp=tmp_path).returncode == 0
    assert "appears to be lost" in colab(env, "exec", "-s", "s1", code="print(1)", tmp=tmp_path).stdout
    colab(fake, "new", "-s", "s2", "--gpu", "T4")
    third = {**fake, "FAKE_COLAB_TOKEN_EXECS": "3"}
    assert [colab(third, "exec", "-s", "s2", code="print(1)", tmp=tmp_path).returncode for _ in range(2)] == [0, 0]
    assert "appears to be lost" in colab(third, "exec", "-s", "s2", code="print(1)", tmp=tmp_path).stdout


def test_new_names_the_session_only_after_the_assignment_and_a_broken_kernel_client_breaks_exec(fake, tmp_path):
    started = subprocess.Popen([sys.executable, str(FAKE), "new", "-s", "s1", "--gpu", "T4"], stdout=subprocess.PIPE,
                               env={**fake, "FAKE_COLAB_HOLD_NEW": "1", "FAKE_COLAB_ASSIGN_GAP_S": "10"}, text=True)
    deadline = time.monotonic() + 300  # a guard against a hang only
    while not assignments(fake):
        assert time.monotonic() < deadline and started.poll() is None
        time.sleep(0.05)
    assert client_sessions(fake) == {} and started.poll() is None  # assigned, not yet named: held in the gap
    release_new(fake)
    started.communicate(timeout=300)
    assert list(client_sessions(fake)) == ["s1"] and clock(Path(fake["FAKE_COLAB_HOME"])) == 10  # the gap's 10 s
    broken = colab({**fake, "FAKE_COLAB_KERNEL_CLIENT": "1.0.2"}, "exec", "-s", "s1", code="print(1)", tmp=tmp_path)
    assert broken.returncode == 1
    assert broken.stderr.strip().endswith("AttributeError: module 'jupyter_kernel_client' has no attribute 'KernelClient'")
    refused = colab({**fake, "FAKE_COLAB_REFUSE": "A100"}, "new", "-s", "s2", "--gpu", "A100")
    assert refused.returncode == 1 and "Backend rejected accelerator 'A100'" in refused.stderr
