"""Each experiment notebook tells its story and leaves the harness to colabkit (issue 33): outside its
set-up cell (stamped) and the cell that builds its model (tagged `model`), at most 3 colabkit names
imported and at most 100 lines of code; its parameters cell is what `python -m colabkit notebooks`
stamps from the declaration; and the explanation of the bottleneck passes lives once, in the docs."""

from __future__ import annotations

import ast

import nbformat
import pytest
from helpers import NOTEBOOKS, REPO

from colabkit.colab.install import BOOTSTRAP_CELL_ID
from colabkit.experiments import all_experiments
from colabkit.maintenance.notebooks import parameters_source

EXPERIMENTS = [experiment.name for experiment in all_experiments() if (REPO / experiment.notebook).is_file()]
MAX_NAMES, MAX_LINES = 3, 100
MODEL_TAG = "model"  # the cell that builds the model (matmul's: the workload it times), in plain sight


def code_lines(source: str) -> int:
    """Lines of code: not blank, not a comment."""
    return sum(1 for line in source.splitlines() if line.strip() and not line.strip().startswith("#"))


def colabkit_names(source: str) -> int:
    """colabkit names a cell imports: `import colabkit` is one, each name of `from colabkit.x import a, b` one."""
    count = 0
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            count += sum(alias.name.split(".")[0] == "colabkit" for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "colabkit":
            count += len(node.names)
    return count


def story_cells(name: str) -> list:
    """The code cells that count: all but the set-up cell and the model cell (exactly one is tagged `model`)."""
    cells = [cell for cell in nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4).cells if cell.cell_type == "code"]
    tagged = [cell for cell in cells if MODEL_TAG in cell.metadata.get("tags", [])]
    assert len(tagged) == 1, f"{name}: {len(tagged)} cells tagged `{MODEL_TAG}`, expected exactly one"
    return [cell for cell in cells if cell.get("id") != BOOTSTRAP_CELL_ID and cell is not tagged[0]]


def test_the_counters_count_what_the_issue_counts():
    assert code_lines("import colabkit\n\n# a comment\n  # indented\nx = 1  # trailing\n") == 2
    assert colabkit_names("import colabkit\nfrom colabkit.training import a, b\nimport keras\n"
                          "from colabkit import plots\nimport colabkit.io as io\n") == 5


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_each_experiment_notebook_imports_at_most_3_colabkit_names_and_runs_at_most_100_lines(name):
    cells = story_cells(name)
    names = sum(colabkit_names(cell.source) for cell in cells)
    lines = sum(code_lines(cell.source) for cell in cells)
    assert names <= MAX_NAMES and lines <= MAX_LINES, f"{name}: {names} colabkit names, {lines} lines of code"


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_each_parameters_cell_is_what_the_declaration_stamps(name):
    experiment = next(experiment for experiment in all_experiments() if experiment.name == name)
    notebook = nbformat.read(REPO / experiment.notebook, as_version=4)
    cell = next(cell for cell in notebook.cells if "parameters" in cell.metadata.get("tags", []))
    assert cell.source == parameters_source(experiment), (
        f"{name}: the parameters cell drifted from colabkit/experiments/{name}.py: run `python -m colabkit notebooks`")


def test_the_bottleneck_passes_are_explained_once_in_the_docs_not_in_each_notebook():
    explanation = "Three throughputs say what bounds this run"
    assert explanation in (REPO / "docs" / "bottlenecks.md").read_text()
    for name in EXPERIMENTS:
        assert explanation not in (NOTEBOOKS / f"{name}.ipynb").read_text(), name
