"""Each experiment notebook reads as a keras-io example and leaves the harness to colabkit (issues 33, 44):
outside its set-up cell (stamped), its parameters cell (stamped) and the cells that build its model (tagged
`model`, or matching MODEL_CELL as the project's before-stop hook counts them), at most 3 colabkit names
imported, at most 70 lines of code and no cell over 30; Keras's own `model.fit(` in every training notebook;
at most one `if mode ==` guard (inference is its own section, which ends the run). Its parameters cell is what
`python tools/stamp_notebooks.py notebooks` stamps from the declaration; and the explanation of the bottleneck passes
lives once, in the docs."""

from __future__ import annotations

import ast
import re

import nbformat
import pytest
from helpers import NOTEBOOKS, REPO

from colabkit.colab.install import BOOTSTRAP_CELL_ID
from colabkit.experiments import all_experiments
from stamp_notebooks import parameters_source

EXPERIMENTS = [experiment.name for experiment in all_experiments() if (REPO / experiment.notebook).is_file()]
MAX_NAMES, MAX_LINES, MAX_CELL_LINES, MAX_GUARDS = 3, 70, 30, 1
MODEL_TAG = "model"  # the cell that builds the model (matmul's: the workload it times), in plain sight
MODEL_CELL = re.compile(r"def build_|keras\.Sequential\(|keras\.Model\(")  # what the before-stop hook calls one
TRAINING = [name for name in EXPERIMENTS if name != "matmul_tflops"]  # matmul trains nothing


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


def code_cells(name: str) -> list:
    return [cell for cell in nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4).cells if cell.cell_type == "code"]


def story_cells(name: str) -> list:
    """The code cells that count: all but the set-up cell, the parameters cell and the model cells (exactly one
    tagged `model`; others only as the hook's MODEL_CELL finds them)."""
    cells = code_cells(name)
    tagged = [cell for cell in cells if MODEL_TAG in cell.metadata.get("tags", [])]
    assert len(tagged) == 1, f"{name}: {len(tagged)} cells tagged `{MODEL_TAG}`, expected exactly one"
    assert MODEL_CELL.search(tagged[0].source), f"{name}: its model cell builds no model the hook would see"
    return [cell for cell in cells if cell.get("id") != BOOTSTRAP_CELL_ID and cell is not tagged[0]
            and "parameters" not in cell.metadata.get("tags", []) and not MODEL_CELL.search(cell.source)]


def test_the_counters_count_what_the_issue_counts():
    assert code_lines("import colabkit\n\n# a comment\n  # indented\nx = 1  # trailing\n") == 2
    assert colabkit_names("import colabkit\nfrom colabkit.training import a, b\nimport keras\n"
                          "from colabkit import plots\nimport colabkit.io as io\n") == 5


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_each_experiment_notebook_imports_at_most_3_colabkit_names_and_runs_at_most_70_lines(name):
    cells = story_cells(name)
    names = sum(colabkit_names(cell.source) for cell in cells)
    lines = sum(code_lines(cell.source) for cell in cells)
    longest = max(code_lines(cell.source) for cell in cells)
    assert names <= MAX_NAMES and lines <= MAX_LINES, f"{name}: {names} colabkit names, {lines} lines of code"
    assert longest <= MAX_CELL_LINES, f"{name}: a cell of {longest} lines of code (at most {MAX_CELL_LINES})"


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_each_training_notebook_calls_keras_own_fit_and_guards_at_most_one_cell_by_mode(name):
    sources = [cell.source for cell in code_cells(name)]
    guards = sum(len(re.findall(r"^if mode ==", source, re.M)) for source in sources)
    assert guards <= MAX_GUARDS, f"{name}: {guards} cells guarded by `if mode ==`"
    if name in TRAINING:
        fits = [source for source in sources if re.search(r"^\s*history = model\.fit\(", source, re.M)]
        assert len(fits) == 1, f"{name}: Keras's own `history = model.fit(` should stand in one cell"
        assert "callbacks=trainer.callbacks(" in fits[0] or "trainer.callbacks()" in fits[0], name
    if guards:  # the inference section ends the run, so nothing after it needs a guard
        guarded = next(source for source in sources if source.startswith("if mode =="))
        assert "run.end_here()" in guarded and "measure_inference(" in guarded, name


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_each_parameters_cell_is_what_the_declaration_stamps(name):
    experiment = next(experiment for experiment in all_experiments() if experiment.name == name)
    notebook = nbformat.read(REPO / experiment.notebook, as_version=4)
    cell = next(cell for cell in notebook.cells if "parameters" in cell.metadata.get("tags", []))
    assert cell.source == parameters_source(experiment), (
        f"{name}: the parameters cell drifted from colabkit/experiments/{name}.py: run `python tools/stamp_notebooks.py notebooks`")


def test_the_bottleneck_passes_are_explained_once_in_the_docs_not_in_each_notebook():
    explanation = "Three throughputs say what bounds this run"
    assert explanation in (REPO / "docs" / "bottlenecks.md").read_text()
    for name in EXPERIMENTS:
        assert explanation not in (NOTEBOOKS / f"{name}.ipynb").read_text(), name
