"""Colab as it runs today: the Colab set and its refresh command, the floors in pyproject.toml, today's
runtimes in the peaks table, colab_sweep.ipynb's form stamped from the grid files, and the report
notebook's way to bring the sweeps' zips in."""

from __future__ import annotations

import io
import json
import re
import tomllib
import zipfile

import nbformat
import pytest
from helpers import NOTEBOOKS, REPO

from colabkit.colab.runtime import RUNTIME_TYPES
from colabkit.colab.sweep import unpack_sweep_zips
from colabkit.device.peaks import gpu_bandwidth, gpu_peak, tpu_bandwidth, tpu_peak
from colabkit.errors import ColabkitError, FolderNotFoundError
from colabkit.maintenance import colab_stack
from colabkit.maintenance.notebooks import sweep_form
from colabkit.ondevice.lists import IMAGE_LIST, read_image
from colabkit.sweep.grids import load_grid

# Colab's CPU/GPU runtime as googlecolab/backend-info listed it on 2026-08-19 ("Upgrade to Python 3.13").
COLAB_2026_08 = {"tensorflow": "2.20.0", "keras": "3.13.2", "jax": "0.7.2", "numpy": "2.1.3", "pandas": "2.2.3",
                 "scipy": "1.16.3", "matplotlib": "3.10.0", "seaborn": "0.13.2", "psutil": "5.9.5",
                 "ipykernel": "6.17.1", "nbclient": "0.10.4", "nbconvert": "7.17.1"}
# In neither tested set (no test can exercise it without a GPU): its floor is untried, and docs/colab.md says so.
UNTESTED = {"nvidia-ml-py"}
# Tested outside the two sets: torch as the lent GPU image has it, in the device rehearsal's venv (device/image.txt).
REHEARSED = {"torch"}


def pins(*paths) -> dict[str, str]:
    return {colab_stack._key(name): version for path in paths
            for name, version in colab_stack.parse_freeze(path.read_text()).values()}


COLAB_SET = [REPO / name for name in colab_stack.REQUIREMENTS]  # the core, then the test set


def test_the_colab_set_holds_colabs_versions_and_no_torch():
    colab = pins(*COLAB_SET)
    assert {name: colab.get(name) for name in COLAB_2026_08} == COLAB_2026_08
    assert "torch" not in colab and "xprof" not in colab  # not needed / conflicts with Colab's absl-py
    constraints = pins(REPO / colab_stack.CONSTRAINTS)
    assert all(constraints[name] == version for name, version in COLAB_2026_08.items())
    assert "papermill" not in constraints  # not on Colab: the set-up cell's install brings it


def test_pyproject_floors_are_the_oldest_tested_versions():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    requirements = [*project["dependencies"], *(r for extra in project["optional-dependencies"].values() for r in extra
                                                if not r.startswith("colabkit["))]  # an extra made of extras
    today, colab = pins(REPO / "requirements.txt", REPO / "requirements-test.txt"), pins(*COLAB_SET)
    rehearsed = {name: read_image(REPO / IMAGE_LIST)[name].rehearsal for name in REHEARSED}
    checked = set()
    for requirement in requirements:
        name, floor = re.fullmatch(r"([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?>=(\S+)", requirement).groups()
        name = colab_stack._key(name)
        tested = [tuple(map(int, re.findall(r"\d+", pinned[name])[:3])) for pinned in (today, colab, rehearsed)
                  if name in pinned]
        if name in UNTESTED:
            assert not tested, f"{name} is tested now: its floor should follow"
            continue
        assert tested, f"{requirement}: in neither tested set"
        assert tuple(map(int, floor.split("."))) == min(tested), f"{requirement}: the oldest tested is {min(tested)}"
        checked.add(name)
    assert {"numpy", "pandas", "jax", "tensorflow", "keras", "torch"} <= checked


FREEZE = "# a comment\nnumpy==9.9.9\ntensorflow==3.0.0\nfoo @ file:///x.whl\nKeras==4.0\n"


def test_refresh_rewrites_colabs_block_keeps_the_additions_and_constrains_everything():
    core = "# Source: old\nnumpy==1.0\nkeras==1.0\n# Not in Colab's image: added\npapermill==2.7.0\n"
    test = "-r core.txt\ntensorflow==1.0\n# Not in Colab's image\npytest-xdist==3.8.0\n"
    new_core, new_test, constraints = colab_stack.refresh((core, test), FREEZE, "URL")
    assert new_core == "# Source: URL\nnumpy==9.9.9\nkeras==4.0\n# Not in Colab's image: added\npapermill==2.7.0\n"
    assert new_test == "-r core.txt\ntensorflow==3.0.0\n# Not in Colab's image\npytest-xdist==3.8.0\n"
    assert constraints.splitlines()[1:] == ["Keras==4.0", "numpy==9.9.9", "tensorflow==3.0.0"]


def test_refresh_refuses_a_package_colab_dropped():
    with pytest.raises(ColabkitError, match="Colab's list has no seaborn"):
        colab_stack.refresh(("numpy==1.0\n", "seaborn==0.13.2\n"), FREEZE, "URL")


def test_refresh_check_says_whether_the_set_is_current(tmp_path, capsys):
    core, test = colab_stack.REQUIREMENTS
    (tmp_path / core).write_text("numpy==1.0\n")
    (tmp_path / test).write_text("-r core\nkeras==1.0\n")
    freeze = tmp_path / "pip-freeze.txt"
    freeze.write_text(FREEZE)
    assert colab_stack.main([str(freeze), "--root", str(tmp_path), "--check"]) == 1
    assert colab_stack.main([str(freeze), "--root", str(tmp_path)]) == 0
    assert colab_stack.main([str(freeze), "--root", str(tmp_path), "--check"]) == 0
    assert colab_stack.main([str(tmp_path / ".." / freeze.parent.name / freeze.name), "--root", str(tmp_path),
                             "--check"]) == 0  # the same list from elsewhere: only the source line differs
    assert (tmp_path / core).read_text() == "numpy==9.9.9\n" and (tmp_path / test).read_text() == "-r core\nkeras==4.0\n"
    assert colab_stack.main([str(tmp_path / "missing.txt"), "--root", str(tmp_path)]) == 2
    assert "missing.txt" in capsys.readouterr().err


# --- today's runtimes ---------------------------------------------------------------------------------------

G4 = "NVIDIA RTX PRO 6000 Blackwell Server Edition"


@pytest.mark.parametrize("name", ["Tesla T4", "NVIDIA L4", "NVIDIA A100-SXM4-40GB", "NVIDIA H100 80GB HBM3", G4])
def test_every_colab_gpu_has_a_sourced_float32_peak_and_bandwidth(name):
    peak, bandwidth = gpu_peak(name, "float32", 1), gpu_bandwidth(name, 1)
    assert peak.tflops > 0 and "datasheet" in peak.source and bandwidth.gb_per_s > 0


def test_the_g4_has_its_datasheets_float32_figure_and_no_guessed_tensor_core_one():
    assert gpu_peak(G4, "float32", 1).tflops == pytest.approx(120.0)
    assert gpu_peak(G4, "bfloat16", 1) is None  # the datasheet gives no dense BF16 figure
    assert gpu_bandwidth(G4, 1).gb_per_s == pytest.approx(1597.0)


@pytest.mark.parametrize("kind, tflops, gb_s", [("TPU v5 lite", 197.0, 819.0), ("TPU v6 lite", 918.0, 1640.0)])
def test_colabs_tpus_have_peaks(kind, tflops, gb_s):
    assert tpu_peak(kind, 1).tflops == tflops and tpu_bandwidth(kind, 1).gb_per_s == gb_s


def test_no_doc_offers_the_retired_v2_8_as_a_runtime_to_pick():
    texts = {path: path.read_text() for path in [REPO / "README.md", *(REPO / "docs").glob("*.md")]}
    for path, text in texts.items():
        for line in text.splitlines():
            if re.search(r"v2-8", line) and re.search(r"(?i)runtime type|pick|choose|Change runtime", line):
                assert "retired" in line, f"{path.name}: {line}"
    assert [runtime.dialog for runtime in RUNTIME_TYPES if not runtime.retired] == [
        "T4", "L4", "A100", "H100", "G4", "v5e-1", "v6e-1"]


def test_one_table_spells_each_runtime_type_for_the_dialog_the_cli_and_the_metadata():
    from colabkit.colab.runtime import CLI_ACCELERATORS, runtime_type
    from colabkit.maintenance.notebooks import AcceleratorHint
    from colabkit.sweep.runners.colab import client

    v5e = runtime_type("v5e-1")
    assert v5e is runtime_type("v5e1") is runtime_type("V5E1") and (v5e.cli, v5e.metadata, v5e.label) == (
        "v5e1", "V5E1", "v5e-1 TPU")
    assert client.ACCELERATORS is CLI_ACCELERATORS and CLI_ACCELERATORS["v5e1"] == ("tpu", "v5e")
    assert "v2-8" not in {runtime.cli for runtime in RUNTIME_TYPES} and runtime_type("K80") is None  # retired, none
    assert AcceleratorHint.parse("TPU:v6e1").label() == "v6e-1 TPU" == AcceleratorHint("TPU", "V6E1").label()


# --- the Colab notebooks --------------------------------------------------------------------------------------

def test_the_sweep_form_offers_each_grid_its_own_presets_and_the_notebook_has_them():
    form = sweep_form(REPO)
    choices = re.search(r"@param (\[.*?\])", form["grid"]).group(1)
    expected = [f"{path.stem}: {preset}" for path in sorted((REPO / "parameters").glob("*.yaml"))
                for preset in load_grid(path).presets]
    assert sorted(json.loads(choices)) == sorted(expected)
    assert "paradnn: smoke" in expected and "matmul_tflops: batch" not in expected
    assert "v6e-1" in form["runtime_asked"] and "G4" in form["runtime_asked"] and "v2-8" not in form["runtime_asked"]
    notebook = nbformat.read(NOTEBOOKS / "colab_sweep.ipynb", as_version=4)
    parameters = next(cell.source for cell in notebook.cells if "parameters" in cell.metadata.get("tags", []))
    assert form["grid"] in parameters and form["runtime_asked"] in parameters  # no drift


def zip_of(folder: str, files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in files.items():
            archive.writestr(f"{folder}/{name}", text)
    return buffer.getvalue()


def test_sweep_zips_come_in_by_upload_or_from_a_folder_each_unpacked_apart(tmp_path):
    uploads = {"smoke-gpu-1.zip": zip_of("smoke-gpu", {"a.json": "{}"}),
               "smoke-tpu-2.zip": zip_of("smoke-tpu", {"b.json": "{}"})}
    folders = unpack_sweep_zips("upload", tmp_path / "in", upload=lambda: uploads)
    assert [folder.name for folder in folders] == ["smoke-gpu-1", "smoke-tpu-2"]
    assert (folders[0] / "smoke-gpu" / "a.json").exists() and (folders[1] / "smoke-tpu" / "b.json").exists()
    again = unpack_sweep_zips(str(tmp_path / "in"), tmp_path / "again")  # a folder of zips (e.g. on Drive)
    assert sorted(folder.name for folder in again) == ["smoke-gpu-1", "smoke-tpu-2"]


def test_bad_sweep_zips_are_refused_with_the_reason(tmp_path):
    with pytest.raises(FolderNotFoundError, match="no sweep zip"):
        unpack_sweep_zips(str(tmp_path), tmp_path / "in")
    (tmp_path / "broken.zip").write_text("not a zip")
    with pytest.raises(FolderNotFoundError, match="not a readable zip"):
        unpack_sweep_zips(str(tmp_path / "broken.zip"), tmp_path / "in")
    (tmp_path / "evil.zip").write_bytes(zip_of("..", {"../escape.json": "{}"}))
    with pytest.raises(FolderNotFoundError, match="outside its folder"):
        unpack_sweep_zips(str(tmp_path / "evil.zip"), tmp_path / "in")
    assert not (tmp_path / "escape.json").exists()


def files_below(folder):
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*") if not path.is_dir())


def test_a_zip_named_dot_dot_writes_nothing_outside_its_merge_folder(tmp_path):
    """The zip's own name makes its folder: `...zip` (stem `..`) from a folder or a browser upload, and names
    with slashes or spaces, each get a plain folder inside the merge folder, named apart."""
    source, merge = tmp_path / "drive", tmp_path / "report"
    source.mkdir()
    (source / "...zip").write_bytes(zip_of("outputs", {"matmul_tflops/cpu/n-256.json": "{}"}))
    folders = unpack_sweep_zips(str(source / "...zip"), merge / "in")
    assert folders == [(merge / "in" / "sweep").resolve()]
    assert files_below(merge) == ["in/sweep/outputs/matmul_tflops/cpu/n-256.json"]
    assert files_below(tmp_path) == ["drive/...zip", "report/in/sweep/outputs/matmul_tflops/cpu/n-256.json"]
    uploads = {name: zip_of("outputs", {f"{index}.json": "{}"}) for index, name in enumerate(
        ["...zip", "..", "../../up.zip", "/etc/x.zip", "a b.zip", "a_b.zip", ".hidden.zip"])}
    folders = unpack_sweep_zips("upload", merge / "up", upload=lambda: uploads)
    assert [folder.name for folder in folders] == ["sweep", "sweep-2", "up", "x", "a_b", "a_b-2", "hidden"]
    assert all(folder.parent == (merge / "up").resolve() for folder in folders)
    assert [name for name in files_below(tmp_path) if not name.startswith(("drive/", "report/in/"))] == sorted(
        [f"report/up/{name}.zip" for name in ("sweep", "sweep-2", "up", "x", "a_b", "a_b-2", "hidden")]
        + [f"report/up/{folder.name}/outputs/{index}.json" for index, folder in enumerate(folders)])


def test_a_link_in_the_merge_folder_that_leads_out_is_refused(tmp_path):
    elsewhere, merge = tmp_path / "elsewhere", tmp_path / "in"
    elsewhere.mkdir()
    merge.mkdir()
    (merge / "smoke").symlink_to(elsewhere)  # left by someone: the zip's folder resolves outside the merge folder
    (tmp_path / "smoke.zip").write_bytes(zip_of("outputs", {"a.json": "{}"}))
    with pytest.raises(FolderNotFoundError, match="leads outside"):
        unpack_sweep_zips(str(tmp_path / "smoke.zip"), merge)
    assert files_below(elsewhere) == []
