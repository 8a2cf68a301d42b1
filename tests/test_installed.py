"""colabkit installed from a wheel, as `pip install git+...` installs it in Colab: no checkout anywhere.

The wheel is built from a copy of this source tree, installed into a fresh folder, and run from a
working folder outside the checkout with only that folder (and the interpreter's own packages, for
the dependencies) on the path: a sweep of the installed matmul grid, then the report. A
direct_url.json like the one pip writes for a git install says which commit the code came from.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO

from colabkit.records.provenance import checkout_commit
from colabkit.sweep.decide import code_digest, fingerprint, stale_reason

COMMIT = "0123456789abcdef0123456789abcdef01234567"
# What a checkout holds that is no part of the source: never copied into the build (.venv-colab is 3 GB).
NOT_SOURCE = shutil.ignore_patterns(".git", ".venv", ".venv-*", ".device", ".device-*", "outputs", "build", "dist",
                                    "*.egg-info", "__pycache__", ".pytest_cache", ".ipynb_checkpoints")


def run(command: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: int = 300) -> str:
    completed = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert completed.returncode == 0, f"{' '.join(command)} failed ({completed.returncode}):\n" \
                                      f"{completed.stdout[-3000:]}\n{completed.stderr[-3000:]}"
    return completed.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A folder holding colabkit installed from a freshly built wheel, as if from git at COMMIT."""
    base = tmp_path_factory.mktemp("installed")
    source = base / "source"
    shutil.copytree(REPO, source, ignore=NOT_SOURCE)
    run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "-w", str(base / "wheel"), str(source)], cwd=base)
    wheels = list((base / "wheel").glob("colabkit-*.whl"))
    assert len(wheels) == 1, wheels
    target = base / "site"
    run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), str(wheels[0])],
        cwd=base)
    (dist_info,) = target.glob("colabkit-*.dist-info")
    (dist_info / "direct_url.json").write_text(json.dumps({
        "url": "https://github.com/colabkit/colabkit",
        "vcs_info": {"vcs": "git", "requested_revision": "v0.1.0", "commit_id": COMMIT}}))
    return target


def environment(site: Path) -> dict[str, str]:
    """This interpreter with only the installed copy added to its path (not the checkout under test)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("COLABKIT_", "PYTHON"))}
    env["PYTHONPATH"] = str(site)
    env["COLABKIT_DATA"] = str(site.parent / "data")
    return env


@pytest.mark.notebook
def test_the_wheel_carries_the_notebooks_and_grid_files(installed):
    bundled = installed / "colabkit" / "bundled"
    assert sorted(path.name for path in (bundled / "notebooks").glob("*.ipynb")) == \
        sorted(path.name for path in (REPO / "notebooks").glob("*.ipynb"))
    assert sorted(path.name for path in (bundled / "parameters").glob("*.yaml")) == \
        sorted(path.name for path in (REPO / "parameters").glob("*.yaml"))
    assert (bundled / "notebooks" / "report.ipynb").read_bytes() == (REPO / "notebooks" / "report.ipynb").read_bytes()


@pytest.mark.notebook
def test_an_installed_colabkit_sweeps_and_reports_from_its_own_files(installed, tmp_path):
    env = environment(installed)
    where = run([sys.executable, "-c", "import colabkit, colabkit.suite as s, colabkit.colab.sweep as c;"
                 "print(colabkit.__file__); print(s.suite_root()); print(c.suite_checkout())"], tmp_path, env)
    package, root, checkout = where.split()
    assert Path(package) == installed / "colabkit" / "__init__.py"
    assert Path(root) == Path(checkout) == installed / "colabkit" / "bundled"

    grid = installed / "colabkit" / "bundled" / "parameters" / "matmul_tflops.yaml"
    run([sys.executable, "-m", "colabkit", "sweep", str(grid), "--preset", "smoke", "--device", "cpu",
         "-p", "n=64", "-p", "count=2", "-p", "timed_calls=2", "--repeats", "1", "--out", "out",
         "--no-progress"], tmp_path, env)
    records = sorted((tmp_path / "out").rglob("*.json"))
    assert records, f"no record under {tmp_path / 'out'}"
    for path in records:
        record = json.loads(path.read_text())
        assert record["status"] == "ok", record.get("error")
        assert record["git_commit"] == COMMIT  # from direct_url.json: there is no checkout
        assert record["fingerprint"]["git_commit"] == COMMIT

    run([sys.executable, "-m", "colabkit", "report", "out", "--out", "report"], tmp_path, env)
    html = tmp_path / "report" / "report.html"
    assert html.is_file() and COMMIT[:12] in html.read_text(encoding="utf-8")  # the provenance table's short id


# --- provenance and fingerprints, without a wheel ------------------------------------------------

def git(*args: str, cwd: Path) -> str:
    return run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd).strip()


def test_a_checkout_commit_counts_only_for_files_it_tracks(tmp_path):
    git("init", "-q", cwd=tmp_path)
    (tmp_path / "tracked.py").write_text("x = 1\n")
    (tmp_path / "venv").mkdir()
    (tmp_path / "venv" / "installed.py").write_text("y = 1\n")
    git("add", "tracked.py", cwd=tmp_path)
    git("commit", "-q", "-m", "one", cwd=tmp_path)
    head = git("rev-parse", "HEAD", cwd=tmp_path)
    assert checkout_commit(tmp_path, tracked="tracked.py") == head
    # A package installed into an untracked folder of some checkout is not that checkout's code.
    assert checkout_commit(tmp_path / "venv", tracked="installed.py") is None
    (tmp_path / "tracked.py").write_text("x = 2\n")
    assert checkout_commit(tmp_path, tracked="tracked.py") == f"{head}-dirty"
    assert checkout_commit(tmp_path.parent / "nowhere") is None


def test_the_fingerprint_follows_colabkit_code_not_the_commit_id(tmp_path):
    notebook = REPO / "notebooks" / "matmul_tflops.ipynb"
    current = fingerprint(notebook, {"n": 64})
    assert current["code_sha256"] == code_digest() and len(current["code_sha256"]) == 64
    # Same code from another commit (one that changed only docs): the record stays.
    assert stale_reason({**current, "git_commit": "another"}, current) is None
    # Other code (another commit, or uncommitted edits under the same `-dirty` id): it runs again.
    recorded = {**current, "digest": "made by other code", "code_sha256": "0" * 64, "git_commit": "abc-dirty"}
    reason = stale_reason(recorded, current)
    assert reason is not None and reason.startswith("colabkit's code changed")
    assert stale_reason({**recorded, "git_commit": current["git_commit"]}, current) == "colabkit's code changed"
