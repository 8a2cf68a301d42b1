"""Committed notebooks are clean, parameterized, and record every parameter they declare."""

from __future__ import annotations

import json

import papermill
import pytest
from conftest import NOTEBOOKS

NOTEBOOK_PATHS = sorted(NOTEBOOKS.glob("*.ipynb"))


def test_there_are_notebooks():
    assert NOTEBOOK_PATHS


@pytest.mark.parametrize("path", NOTEBOOK_PATHS, ids=lambda p: p.name)
def test_notebook_is_stored_clean_with_a_parameters_cell(path):
    notebook = json.loads(path.read_text())
    code = [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]
    assert all(not cell.get("outputs") and cell.get("execution_count") is None for cell in code)
    assert sum("parameters" in cell.get("metadata", {}).get("tags", []) for cell in notebook["cells"]) == 1
    first = notebook["cells"][0]
    assert first["cell_type"] == "markdown"
    text = "".join(first["source"])
    assert text.startswith("# ") and "colab.research.google.com/assets/colab-badge.svg" in text
    assert notebook["metadata"]["kernelspec"]["name"] == "python3"


DRIVERS = ("report", "colab_sweep")  # notebooks that run others or read records, and write no record of their own


@pytest.mark.parametrize("path", [p for p in NOTEBOOK_PATHS if p.stem not in DRIVERS], ids=lambda p: p.name)
def test_every_declared_parameter_reaches_the_record(path):
    """The notebook starts its run from its namespace, so the record holds every parameter its
    declaration names (tests/test_experiments.py checks those are the parameters cell's), checked."""
    declared = set(papermill.inspect_notebook(str(path)))
    assert "results_path" in declared, "the sweep hands every notebook a results_path"
    source = "\n".join("".join(cell["source"]) for cell in json.loads(path.read_text())["cells"])
    assert f'colabkit.start_run("{path.stem}", globals())' in source, f"{path.name}: no start_run from globals()"
