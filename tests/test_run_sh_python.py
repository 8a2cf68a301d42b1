"""run.sh's find_python: a PYTHON that is not the set's Python is refused in one line, never passed over unsaid,
and no Python found ends the script after its line (never with `: command not found`). Only refusals run
run.sh itself: a Python that fits would set up a venv."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from helpers import REPO

MINOR = sys.version_info[1]
FIND_PYTHON = 'source <(sed -n "/^find_python() {/,/^}/p" run.sh); find_python'


def find_python(tmp_path, **environment: str) -> subprocess.CompletedProcess:
    """run.sh's own find_python, called alone (no venv set up) with `environment`."""
    # PYTHON and COLABKIT_STACK of the calling shell stay out: .ci/run runs this file under the Colab set too.
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHON", "COLABKIT_STACK")}
    return subprocess.run(["bash", "-c", FIND_PYTHON], capture_output=True, text=True, cwd=REPO, timeout=60,
                          env={**env, "MINOR": str(MINOR), **environment})


@pytest.mark.parametrize("python, why", [
    ("/no/such/python", "no such command"),
    ("/bin/false", "it does not run as Python (no output)"),
    (sys.executable, f"it is Python 3.{MINOR}"),  # asked of a set that needs another minor version
])
def test_a_python_that_is_not_the_sets_is_refused_in_one_line(tmp_path, python, why):
    needed = MINOR + 1  # even /no/such and /bin/false are refused for a set this interpreter does not fit
    result = find_python(tmp_path, PYTHON=python, MINOR=str(needed), PYTHONS=sys.executable)
    assert result.stdout == "false\n"  # the caller's "$(find_python)" -m venv then fails, after the line
    assert result.stderr == f"run.sh: PYTHON={python}: {why}; the today set needs Python 3.{needed} (or leave PYTHON unset)\n"


def test_the_right_python_is_taken_and_none_found_is_said(tmp_path):
    assert find_python(tmp_path, PYTHON=sys.executable).stdout == f"{sys.executable}\n"
    assert find_python(tmp_path, PYTHONS=f"/no/such {sys.executable}").stdout == f"{sys.executable}\n"
    none = find_python(tmp_path, PYTHONS="/no/such", COLABKIT_STACK="colab")
    assert none.stdout == "false\n"
    assert none.stderr == (f"run.sh: no Python 3.{MINOR} found for the colab set (set "
                           f"PYTHON=/path/to/python3.{MINOR})\n")


def test_run_sh_under_the_colab_set_with_a_bad_python_stops_after_one_line(tmp_path):
    env = {**os.environ, "COLABKIT_STACK": "colab", "PYTHON": "/no/such/python3.13",
           "COLABKIT_VENV": str(tmp_path / "venv")}
    result = subprocess.run([str(REPO / "run.sh"), "test"], capture_output=True, text=True, cwd=REPO, env=env,
                            timeout=60)
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1] == ("run.sh: PYTHON=/no/such/python3.13: no such command; the colab set "
                                              "needs Python 3.13 (or leave PYTHON unset)")
    assert "command not found" not in result.stderr and not (tmp_path / "venv").exists()


SETUP = 'source <(sed -n "/^setup() {/,/^}/p" run.sh); for wanted in "$@"; do setup $wanted; done'


def test_setup_installs_the_core_or_the_test_set_once_and_never_drops_what_is_there(tmp_path):
    """run.sh's setup, with a venv whose uv only notes what it is asked: the core for smoke, the test set (which
    holds the core) for test, nothing again while the requirement files are unchanged, an extra on top."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    asked = tmp_path / "asked.txt"
    (venv / "bin" / "uv").write_text(f'#!/bin/sh\necho "$@" >> {asked}\n')
    (venv / "bin" / "uv").chmod(0o755)

    def setup(*sets: str) -> list[str]:
        asked.unlink(missing_ok=True)
        env = {**os.environ, "VENV": str(venv), "PY": str(venv / "bin" / "python"), "CORE": "requirements.txt",
               "TESTS": "requirements-test.txt", "CONSTRAINTS": ""}
        result = subprocess.run(["bash", "-c", SETUP, "setup", *sets], capture_output=True, text=True, cwd=REPO,
                                env=env, timeout=60)
        assert result.returncode == 0, result.stderr
        return asked.read_text().splitlines() if asked.exists() else []

    [core] = setup("core")
    assert "-r requirements.txt" in core and "requirements-test.txt" not in core and core.endswith("-e .")
    assert setup("core") == []  # installed: nothing again
    [test] = setup("test")
    assert "-r requirements.txt -r requirements-test.txt" in test
    assert setup("core") == [] and setup("test") == []  # the test set holds the core
    [cuda] = setup("core cuda")  # one word each: setup's $1 and $2
    assert "-r requirements-test.txt" in cuda and cuda.endswith("-e .[cuda]")  # on top, the test set kept
