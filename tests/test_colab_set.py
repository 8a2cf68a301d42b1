"""The Colab set's list (tests/colab_set.py) names every test file once, with its reason, and the conftest marks
exactly the listed files' tests `colab_set` (and `colab_pins`)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from colab_set import COLAB_PINS, COLAB_SET, NOT_COLAB_SET
from helpers import REPO


def test_every_test_file_is_in_one_table_with_a_reason():
    files = {path.name for path in (REPO / "tests").glob("test_*.py")}
    tables = (COLAB_SET, COLAB_PINS, NOT_COLAB_SET)
    listed = [name for table in tables for name in table]
    unlisted = sorted(files - set(listed))
    assert unlisted == [], f"add these to a table of tests/colab_set.py, saying why: {unlisted}"
    assert len(listed) == len(set(listed)), "a file in two tables"
    assert sorted(set(listed) - files) == [], "a listed file no longer exists"
    assert all(reason.strip() for table in tables for reason in table.values())


@pytest.mark.parametrize("marker, listed_file", [("colab_set", "test_statistics.py"),
                                                  ("colab_pins", "test_matmul_notebook.py")])
def test_minus_m_selects_the_tests_of_that_tables_files_and_no_other(marker, listed_file):
    others = {"colab_set": "test_docs.py", "colab_pins": "test_statistics.py"}  # a file of another table
    listed = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                             "-m", marker, f"tests/{listed_file}", f"tests/{others[marker]}"],
                            cwd=REPO, capture_output=True, text=True, timeout=120)
    ids = [line for line in listed.stdout.splitlines() if "::" in line]
    assert ids and all(line.startswith(f"tests/{listed_file}::") for line in ids), listed.stdout[-2000:]
