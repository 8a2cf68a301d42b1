"""The Colab header and bootstrap stamped into every notebook: drift, badges, and the stamping itself."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import nbformat
import papermill
import pytest
from helpers import NOTEBOOKS, REPO

from stamp_notebooks import (
    AcceleratorHint,
    NotebookTemplateError,
    discover,
    main,
    notebook_text,
    read_coordinates,
    stamp_header,
    stamp_notebook,
    stamp_repository,
)

from colabkit.colab.coordinates import Coordinates, configured
from colabkit.colab.install import BOOTSTRAP_CELL_ID, bootstrap_source
from colabkit.errors import CoordinatesError

BADGE_IMAGE = "https://colab.research.google.com/assets/colab-badge.svg"
COORDINATES = REPO / "colabkit" / "colab" / "coordinates.py"


# --- the committed repository --------------------------------------------------------------------

def test_committed_notebooks_and_readme_match_the_template():
    result = stamp_repository(REPO, check=True)
    assert [info.name for info in result.notebooks] == [path.stem for path in sorted(NOTEBOOKS.glob("*.ipynb"))]
    assert result.changed == [], (
        f"drifted from the template: {result.changed}; run `python tools/stamp_notebooks.py notebooks` and commit")


@pytest.mark.parametrize("path", discover(REPO), ids=lambda path: path.name)
def test_every_notebook_starts_with_its_header_then_the_bootstrap_cell(path):
    notebook = nbformat.read(path, as_version=4)
    header, cell = notebook.cells[0], notebook.cells[1]
    assert f"]({configured().notebook_url('notebooks/' + path.name)})" in header.source
    assert cell.id == BOOTSTRAP_CELL_ID and cell.source == bootstrap_source()
    assert notebook.metadata.kernelspec.name == "python3"


def test_every_notebook_is_reachable_from_the_readme_and_its_own_header():
    readme = (REPO / "README.md").read_text()
    for path in discover(REPO):
        url = configured().notebook_url(path.relative_to(REPO).as_posix())
        assert url in readme and url in nbformat.read(path, as_version=4).cells[0].source


# --- stamping one notebook ---------------------------------------------------------------------------

def new_notebook(title: str = "# CNN on MNIST: batch size on GPU vs TPU") -> nbformat.NotebookNode:
    """What a helper adds: a title cell and a parameters cell, nothing else."""
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_markdown_cell(title),
                      nbformat.v4.new_code_cell('device = "auto"\nresults_path = ""',
                                                metadata={"tags": ["parameters"]})]
    notebook.cells[0].id, notebook.cells[1].id = "title", "params"
    return notebook


def test_new_notebook_gets_badge_and_bootstrap_and_keeps_its_cells():
    stamped = stamp_notebook(new_notebook(), "notebooks/cnn_mnist.ipynb")
    assert [cell.id for cell in stamped.cells] == ["title", BOOTSTRAP_CELL_ID, "params"]
    assert stamped.cells[0].source == (
        "# CNN on MNIST: batch size on GPU vs TPU\n\n"
        f"[![Open In Colab]({BADGE_IMAGE})](https://colab.research.google.com/github/colabkit/colabkit/blob/"
        f"{configured().ref}/notebooks/cnn_mnist.ipynb)")
    assert stamped.cells[2].metadata.tags == ["parameters"]
    assert stamped.metadata.kernelspec == {"display_name": "Python 3", "language": "python", "name": "python3"}
    assert "accelerator" not in stamped.metadata and "colab" not in stamped.metadata
    nbformat.validate(stamped)


def test_stamping_is_idempotent_and_keeps_the_title_and_paragraph_verbatim():
    notebook = new_notebook("# Title\n\nWhat it measures,\nand which seed it rebuilds.\n\n- a list\n\n\n- kept")
    once = stamp_notebook(notebook, "notebooks/x.ipynb")
    twice = stamp_notebook(once, "notebooks/x.ipynb")
    assert notebook_text(once) == notebook_text(twice)
    assert once.cells[0].source.endswith("\n\nWhat it measures,\nand which seed it rebuilds.\n\n- a list\n\n\n- kept")


def test_header_badge_for_old_coordinates_or_in_html_is_replaced_by_one_new_badge():
    old = Coordinates("old/place", "dev").badge("notebooks/x.ipynb")
    html = ('<a href="https://colab.research.google.com/github/old/place/blob/dev/notebooks/x.ipynb" '
            f'target="_parent"><img src="{BADGE_IMAGE}" alt="Open In Colab"/></a>')
    new = configured().badge("notebooks/x.ipynb")
    source = f"# Title\n\n{old}\n\nParagraph {old} inline.\n\n{html}\n\nMore."
    assert stamp_header(source, new) == f"# Title\n\n{new}\n\nParagraph  inline.\n\nMore."


def test_run_products_are_stripped_and_a_misplaced_stale_bootstrap_moves_under_the_header():
    notebook = new_notebook()
    notebook.metadata.update(papermill={"duration": 3.0}, widgets={"state": {}},
                             colab={"provenance": [], "authorship_tag": "x", "name": "n.ipynb"})
    notebook.cells[1].outputs = [nbformat.v4.new_output("stream", text="hi")]
    notebook.cells[1].execution_count = 7
    notebook.cells[1].metadata.update(papermill={"status": "completed"}, execution={"iopub.status.busy": "x"})
    injected = nbformat.v4.new_code_cell('device = "cpu"', metadata={"tags": ["injected-parameters"]})
    stale = nbformat.v4.new_code_cell(bootstrap_source(Coordinates("old/place", "dev")))
    link = nbformat.v4.new_markdown_cell(
        f'<a href="https://colab.research.google.com/github/a/b/blob/main/x.ipynb"><img src="{BADGE_IMAGE}"/></a>')
    notebook.cells = [link, notebook.cells[0], notebook.cells[1], injected, stale,
                      nbformat.v4.new_code_cell("print(1)")]
    stamped = stamp_notebook(notebook, "notebooks/x.ipynb")
    assert [cell.id for cell in stamped.cells][:3] == ["title", BOOTSTRAP_CELL_ID, "params"]
    assert len(stamped.cells) == 4  # Colab's link cell, the injected cell and the stale copy are gone
    assert stamped.cells[1].source == bootstrap_source()
    assert all(cell.get("outputs") == [] and cell.get("execution_count") is None
               for cell in stamped.cells if cell.cell_type == "code")
    assert stamped.cells[2].metadata == {"tags": ["parameters"]}
    assert "papermill" not in stamped.metadata and "widgets" not in stamped.metadata
    assert "colab" not in stamped.metadata  # no accelerator hint and nothing else worth keeping


def test_notebook_without_ids_gets_stable_ids():
    notebook = new_notebook()
    notebook.nbformat_minor = 4
    for cell in notebook.cells:
        del cell["id"]
    stamped = stamp_notebook(notebook, "notebooks/x.ipynb")
    assert [cell.id for cell in stamped.cells] == ["cell-0", BOOTSTRAP_CELL_ID, "cell-2"]
    assert stamped.nbformat_minor >= 5
    assert notebook_text(stamp_notebook(stamped, "notebooks/x.ipynb")) == notebook_text(stamped)


def test_accelerator_hint_is_the_notebooks_own_unless_set():
    notebook = new_notebook()
    notebook.metadata.update(accelerator="TPU", colab={"gpuType": "V28", "provenance": [], "toc_visible": True})
    kept = stamp_notebook(notebook, "notebooks/x.ipynb")
    assert kept.metadata.accelerator == "TPU" and kept.metadata.colab == {
        "provenance": [], "gpuType": "V28", "toc_visible": True}
    gpu = stamp_notebook(notebook, "notebooks/x.ipynb", hint=AcceleratorHint.parse("gpu:l4"))
    assert gpu.metadata.accelerator == "GPU" and gpu.metadata.colab["gpuType"] == "L4"
    cpu = stamp_notebook(notebook, "notebooks/x.ipynb", hint=AcceleratorHint.parse("cpu"))
    assert "accelerator" not in cpu.metadata and "gpuType" not in cpu.metadata.colab
    assert AcceleratorHint.parse("TPU:V5E1").label() == "v5e-1 TPU"


@pytest.mark.parametrize("spec", ["gpu:V28", "tpu:T4", "cuda", "cpu:T4", "GPU:K80", "TPU:V28"])  # V28: retired
def test_accelerator_hint_rejects_what_colab_would_not_understand(spec):
    with pytest.raises(NotebookTemplateError):
        AcceleratorHint.parse(spec)


def test_notebook_without_a_title_cell_is_a_clear_error():
    notebook = new_notebook("Not a title")
    with pytest.raises(NotebookTemplateError, match=r"notebooks/x.ipynb: the first cell must be a markdown cell"):
        stamp_notebook(notebook, "notebooks/x.ipynb")
    notebook.cells = notebook.cells[::-1]
    with pytest.raises(NotebookTemplateError, match="first cell must be a markdown cell"):
        stamp_notebook(notebook, "notebooks/x.ipynb")


# --- the repository commands -------------------------------------------------------------------------

def copy_repository(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "colabkit" / "colab").mkdir(parents=True)
    shutil.copy(COORDINATES, repo / COORDINATES.relative_to(REPO))
    shutil.copytree(NOTEBOOKS, repo / "notebooks")
    shutil.copytree(REPO / "parameters", repo / "parameters")  # colab_sweep's form is stamped from the grid files
    shutil.copy(REPO / "README.md", repo / "README.md")
    (repo / "docs").mkdir()
    for page in ("colab.md", "experiments.md"):  # the pages with generated blocks
        shutil.copy(REPO / "docs" / page, repo / "docs" / page)
    return repo


def test_notebooks_command_stamps_a_new_notebook_and_check_reports_drift(tmp_path, capsys):
    repo = copy_repository(tmp_path)
    nbformat.write(new_notebook(), repo / "notebooks" / "cnn_mnist.ipynb")
    assert main(["notebooks", "--check", "--root", str(repo)]) == 1
    out = capsys.readouterr().out
    assert "notebooks/cnn_mnist.ipynb" in out and "README.md" in out and "matmul_tflops" not in out
    assert main(["notebooks", "--root", str(repo), "--accelerator", "cnn_mnist=TPU:V6E1"]) == 0
    assert main(["notebooks", "--check", "--root", str(repo)]) == 0
    stamped = nbformat.read(repo / "notebooks" / "cnn_mnist.ipynb", as_version=4)
    assert stamped.cells[1].id == BOOTSTRAP_CELL_ID and stamped.metadata.accelerator == "TPU"
    readme = (repo / "README.md").read_text()
    row = next(line for line in readme.splitlines() if "[`cnn_mnist`](notebooks/cnn_mnist.ipynb)" in line)
    assert row.startswith("| CNN on MNIST | ")  # the experiment's declared title (colabkit.experiments)
    assert row.endswith("| v6e-1 TPU |")  # the runtime the notebook now asks for


def test_one_bad_notebook_stops_the_stamp_before_anything_is_written(tmp_path, capsys):
    repo = copy_repository(tmp_path)
    nbformat.write(new_notebook(), repo / "notebooks" / "a_new.ipynb")
    nbformat.write(new_notebook("no title here"), repo / "notebooks" / "b_bad.ipynb")
    before = {path.name: path.read_text() for path in (repo / "notebooks").iterdir()}
    assert main(["notebooks", "--root", str(repo)]) == 2
    assert "notebooks/b_bad.ipynb: the first cell must be a markdown cell" in capsys.readouterr().err
    assert {path.name: path.read_text() for path in (repo / "notebooks").iterdir()} == before


def test_badges_command_moves_every_badge_and_bootstrap_to_new_coordinates(tmp_path):
    repo = copy_repository(tmp_path)
    assert main(["badges", "--repo", "someone/fork", "--ref", "v1.0", "--root", str(repo)]) == 0
    moved = Coordinates("someone/fork", "v1.0")
    module = (repo / "colabkit" / "colab" / "coordinates.py").read_text()
    assert 'REPOSITORY = "someone/fork"\n' in module and 'REF = "v1.0"\n' in module
    assert stamp_repository(repo, moved, check=True).changed == []
    texts = [(repo / "README.md").read_text(), *(path.read_text() for path in discover(repo))]
    links = [url for text in texts for url in re.findall(r"https://colab\.research\.google\.com/github/[^\s)\"'<>]+", text)]
    assert links and all("/someone/fork/blob/v1.0/" in url for url in links)
    for path in discover(repo):
        notebook = nbformat.read(path, as_version=4)
        assert notebook.cells[1].source == bootstrap_source(moved)
        assert "git+https://github.com/someone/fork@v1.0" in notebook.cells[1].source
    assert "python -m pip install -q git+https://github.com/someone/fork@v1.0" in (repo / "docs" / "colab.md").read_text()
    # `notebooks` reads the coordinates of the checkout it stamps, not those of the colabkit running it.
    assert main(["notebooks", "--check", "--root", str(repo)]) == 0


def test_badges_command_rejects_bad_coordinates_and_changes_nothing(tmp_path, capsys):
    repo = copy_repository(tmp_path)
    before = (repo / "colabkit" / "colab" / "coordinates.py").read_text()
    assert main(["badges", "--repo", "not-a-repo", "--ref", "main", "--root", str(repo)]) == 2
    assert "is not OWNER/NAME" in capsys.readouterr().err
    assert (repo / "colabkit" / "colab" / "coordinates.py").read_text() == before


def test_coordinates_are_read_from_the_one_place_in_the_checkout(tmp_path, capsys):
    assert read_coordinates(COORDINATES) == configured()
    repo = copy_repository(tmp_path)
    module = repo / "colabkit" / "colab" / "coordinates.py"
    ref_line = f'REF = "{configured().ref}"'
    module.write_text(module.read_text().replace(ref_line, f'{ref_line}\nREF = "other"'))
    with pytest.raises(CoordinatesError, match='exactly one line `REF = "..."`'):
        read_coordinates(module)
    assert main(["badges", "--repo", "a/b", "--ref", "c", "--root", str(repo)]) == 2
    assert 'exactly one line `REF = "..."`' in capsys.readouterr().err


def test_readme_without_its_generated_blocks_is_a_clear_error(tmp_path):
    repo = copy_repository(tmp_path)
    (repo / "README.md").write_text("# colabkit\n")
    with pytest.raises(NotebookTemplateError, match="no generated block 'notebooks'"):
        stamp_repository(repo)
    shutil.copy(REPO / "README.md", repo / "README.md")
    (repo / "docs" / "colab.md").write_text("# Colab\n")
    with pytest.raises(NotebookTemplateError, match="docs/colab.md: no generated block 'colab-install'"):
        stamp_repository(repo)


def test_badges_command_warns_that_a_branch_is_not_pinned(tmp_path, capsys):
    repo = copy_repository(tmp_path)
    assert main(["badges", "--repo", "someone/fork", "--ref", "main", "--root", str(repo)]) == 0
    assert "warning: ref 'main' is not a release tag" in capsys.readouterr().err
    assert main(["badges", "--repo", "someone/fork", "--ref", "v1.2.0", "--root", str(repo)]) == 0
    assert "warning" not in capsys.readouterr().err


@pytest.mark.notebook
def test_stamped_new_notebook_runs_under_papermill_outside_colab(tmp_path):
    """The bootstrap cell must be a no-op outside Colab: the stamped notebook runs as it is."""
    notebook = new_notebook()
    notebook.cells.append(nbformat.v4.new_code_cell('print("ran", device, "bootstrap" in globals())'))
    stamped = tmp_path / "stamped.ipynb"
    stamped.write_text(notebook_text(stamp_notebook(notebook, "notebooks/x.ipynb")))
    executed = papermill.execute_notebook(str(stamped), str(tmp_path / "out.ipynb"), parameters={"device": "cpu"},
                                          progress_bar=False, cwd=str(tmp_path))
    outputs = [output for cell in executed.cells for output in cell.get("outputs", [])]
    text = "".join(output.get("text", "") for output in outputs)
    assert text == "ran cpu False\n"  # nothing printed by the bootstrap, and it never imported bootstrap()
    assert json.loads(stamped.read_text())["cells"][1]["id"] == BOOTSTRAP_CELL_ID
