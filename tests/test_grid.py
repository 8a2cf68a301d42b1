"""Grid files: schema, layering of presets and -p overrides, validation before anything runs, fingerprints."""

from __future__ import annotations

import json
import textwrap

import pytest
from helpers import NOTEBOOKS, REPO
from notebook_factory import write_tiny_notebook

from colabkit.cli import main
from colabkit.device.spec import DeviceRequest
from colabkit.errors import GridError
from colabkit.sweep.devices import DeviceSlots
from colabkit.sweep.runners.execute import RunFiles
from colabkit.sweep.expand import expand
from colabkit.sweep.decide import fingerprint, stale_reason
from colabkit.sweep.grids import load_grid
from colabkit.sweep.grids import parse_overrides, typed_value
from colabkit.sweep.grids import declared_parameters
from colabkit.sweep.plan import plan


@pytest.fixture(autouse=True)
def nothing_runs(monkeypatch):
    """Validation must stop every sweep in this file before devices are even detected."""
    def refuse() -> None:
        raise AssertionError("the sweep got past validation")

    monkeypatch.setattr("colabkit.sweep.devices.detect_devices", refuse)


@pytest.fixture
def tiny(tmp_path):
    return write_tiny_notebook(tmp_path / "tiny.ipynb")


def grid_file(tmp_path, body: str, name: str = "grid.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


BAD_GRIDS = [
    ("gird: {device: [cpu]}", "unknown key(s) gird; allowed: notebook, description, grid, zip, fixed, repeats, presets"),
    ("grid: {device: [cpu]}\npresets: {smoke: {fixd: {value: 1}}}", "preset 'smoke': unknown key(s) fixd"),
    ("grid: {device: [cpu], batch: [1]}", "grid.batch: the notebook NB declares no parameter `batch`"),
    ("grid: {device: [cpu]}\nfixed: {epochs: 2}", "fixed.epochs: the notebook NB declares no parameter `epochs`"),
    ("grid: {device: [cpu]}\nzip: [{units: [1, 2], value: [1, 2]}]", "zip[0].units: the notebook NB declares no parameter"),
    ("grid: {device: [cpu]}\npresets: {paper: {grid: {layers: [1]}}}", "presets.paper.grid.layers: the notebook NB declares no"),
    ("grid: {device: [cpu], value: [x]}", "grid.value: 'x' is a str, but the notebook's `value = 1` takes int"),
    ("grid: {device: [cpu], value: [1.5]}", "grid.value: 1.5 is a float, but the notebook's `value = 1` takes int"),
    ("grid: {device: [cpu], value: [true]}", "grid.value: True is a bool, but the notebook's `value = 1` takes int"),
    ("grid: {device: [cpu], label: [1]}", "grid.label: 1 is an int, but the notebook's `label = \"a\"` takes str"),
    ("grid: {device: [cpu]}\nfixed: {sleep_s: '1e-3'}", "(YAML reads 1e-3 as a string: write 1.0e-3)"),
    ("grid: {device: [cpu]}\nfixed: {write_record: 0}", "fixed.write_record: 0 is an int, but the notebook's `write_record = True` takes bool"),
    ("grid: {device: [cpu], value: []}", "grid.value is an empty list: the grid would have no combinations"),
    ("grid: {device: [cpu], value: 3}", "grid.value must be a list of values, got 3"),
    ("grid: {device: [cpu]}\nzip: [{}]", "zip[0] must be a non-empty mapping"),
    ("grid: {device: [cpu]}\nzip: {value: [1, 2], label: [a]}", "zip[0]: the lists of a zip group vary together and need the same length (value has 2, label has 1)"),
    ("grid: {device: [cpu], value: [1, 2, 1]}", "grid.value lists 1 twice: that combination would run twice"),
    ("grid: {device: [cpu]}\nzip: {value: [1, 1], label: [a, a]}", "zip[0] lists value=1, label='a' twice"),
    ("grid: {device: [cpu], value: [1]}\nfixed: {value: 2}", "fixed.value: `value` is already set at grid.value"),
    ("grid: {device: [cpu]}\nfixed: {results_path: x.json}", "fixed.results_path: `results_path` is set by the sweep"),
    ("grid: {device: [cuda]}", "grid.device: unknown device 'cuda'"),
    ("grid: {value: [1]}", "no `device` axis"),
    ("grid: !!python/object/apply:os.system [echo hi]", "a tag the safe loader refuses at line 2, column 7: could not "
     "determine a constructor for the tag 'tag:yaml.org,2002:python/object/apply:os.system'"),
]


@pytest.mark.parametrize("body, message", BAD_GRIDS, ids=[message[:40] for _, message in BAD_GRIDS])
def test_every_bad_grid_gives_its_message_and_runs_nothing(tmp_path, tiny, capsys, body, message):
    path = grid_file(tmp_path, f"notebook: {tiny}\n{body}\n")
    out = tmp_path / "out"
    assert main(["sweep", str(path), "--out", str(out)]) == 2
    assert message.replace("NB", str(tiny)) in capsys.readouterr().err
    assert not out.exists()  # validation failed before anything ran or was written


def test_a_missing_notebook_is_named_with_every_place_looked_in(tmp_path, capsys):
    folder = tmp_path / "project" / "parameters"
    folder.mkdir(parents=True)
    path = grid_file(folder, "notebook: notebooks/nowhere.ipynb\ngrid: {device: [cpu]}\n")
    assert main(["sweep", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "notebook 'notebooks/nowhere.ipynb' not found (looked for " in err and len(err.strip().splitlines()) == 1
    for place in (REPO, folder, folder.parent):  # where the command runs (and the suite's copy), beside the file, above
        assert str(place / "notebooks" / "nowhere.ipynb") in err, place
    assert not (tmp_path / "out").exists()


def test_a_key_given_twice_in_a_grid_is_refused_in_one_line_naming_the_key_and_the_file(tmp_path, tiny, capsys):
    """yaml.safe_load keeps the last of a repeated key without a word; grids are read as strictly as rates files."""
    path = grid_file(tmp_path, f"notebook: {tiny}\ngrid:\n  device: [cpu]\n  value: [1]\n  value: [2]\n")
    assert main(["sweep", str(path), "--out", str(tmp_path / "out"), "--dry-run"]) == 2
    assert capsys.readouterr().err.strip() == (f"error: {path}: `value` is given twice (line 5, column 3): the last "
                                               "would win without a word; give each key once")
    assert not (tmp_path / "out").exists()


def test_a_number_in_exponent_form_is_a_number_in_a_grid(tmp_path, tiny):
    path = grid_file(tmp_path, f"notebook: {tiny}\ngrid: {{device: [cpu]}}\nfixed: {{sleep_s: 1e-3}}\n")
    assert [c.params["sleep_s"] for c in plan([path], out=tmp_path / "out")] == [0.001]


def test_a_yaml_syntax_error_is_one_line_with_its_line_and_column(tmp_path, tiny, capsys):
    path = grid_file(tmp_path, f"notebook: {tiny}\ngrid:\n  device: [cpu]\n  value: a: b\n")
    assert main(["sweep", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {path}: not valid YAML at line 4, column 11: mapping values are not allowed here\n"
    assert not (tmp_path / "out").exists()


def test_all_problems_of_all_files_come_in_one_error(tmp_path, tiny):
    first = grid_file(tmp_path, f"notebook: {tiny}\ngrid: {{device: [cpu], value: [x], nope: [1]}}\n", "a.yaml")
    second = grid_file(tmp_path, f"notebook: {tiny}\ngrid: {{device: [gpu:0]}}\n", "b.yaml")
    with pytest.raises(GridError) as info:
        plan([first, second])
    problems = info.value.problems
    assert len(problems) == 3, problems
    assert problems[0].startswith(f"{first}: grid.value: 'x' is a str")
    assert problems[1].startswith(f"{first}: grid.nope: the notebook")
    assert problems[2].startswith(f"{second}: grid.device: unknown device 'gpu:0'")


def test_duplicate_combinations_across_files_and_colliding_file_names_are_refused(tmp_path, tiny):
    grid = grid_file(tmp_path, f"notebook: {tiny}\ngrid: {{device: [cpu], value: [1, 2]}}\n")
    with pytest.raises(GridError, match=r"appears twice \(the same notebook in two grid files"):
        plan([grid, grid])
    clash = grid_file(tmp_path, f"notebook: {tiny}\ngrid: {{device: [cpu], label: ['a b', 'a_b']}}\n", "clash.yaml")
    with pytest.raises(GridError, match=r"would write the same files .*label-a_b\.\*"):
        plan([clash], out=tmp_path / "out")


def test_unknown_preset_names_the_known_ones(tmp_path, tiny):
    grid = grid_file(tmp_path, f"notebook: {tiny}\ngrid: {{device: [cpu]}}\npresets: {{smoke: {{}}, paper: {{}}}}\n")
    with pytest.raises(GridError, match=r"unknown preset 'tiny' \(this file has: paper, smoke\)"):
        plan([grid], "tiny")


@pytest.mark.parametrize("items, message", [
    (["value"], "-p 'value': write KEY=VALUE"),
    (["batch=64"], "-p batch: no notebook of this sweep declares a parameter `batch`"),
    (["value=abc"], "-p value (tiny.ipynb): 'abc' is a str, but the notebook's `value = 1` takes int"),
    (["device=cuda"], "-p device: unknown device 'cuda'"),
    (["results_path=x"], "-p results_path: `results_path` is set by the sweep"),
])
def test_bad_overrides_are_refused_before_anything_runs(tmp_path, tiny, capsys, items, message):
    grid = grid_file(tmp_path, f"notebook: {tiny}\ngrid: {{device: [cpu], value: [1, 2]}}\n")
    argv = ["sweep", str(grid), "--out", str(tmp_path / "out")]
    for item in items:
        argv += ["-p", item]
    assert main(argv) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_overrides_are_typed_like_papermills():
    assert [typed_value(text) for text in ("True", "False", "None", "3", "-2", "2.5", "1e-3", "cpu", "")] == \
        [True, False, None, 3, -2, 2.5, 0.001, "cpu", ""]
    assert parse_overrides(["n=512", "dtype=bfloat16", "jit_compile=True"]) == \
        {"n": 512, "dtype": "bfloat16", "jit_compile": True}


def test_zip_groups_vary_together_and_cross_the_grid(tmp_path, tiny):
    grid = grid_file(tmp_path, f"""
        notebook: {tiny}
        grid: {{device: [cpu], value: [1, 2]}}
        zip: [{{label: [a, b, c], fail_on: [10, 20, 30]}}]
        fixed: {{sleep_s: 0}}
    """)
    combinations = expand(load_grid(grid))
    pairs = [(c.params["value"], c.params["label"], c.params["fail_on"]) for c in combinations]
    assert pairs == [(1, "a", 10), (1, "b", 20), (1, "c", 30), (2, "a", 10), (2, "b", 20), (2, "c", 30)]
    assert combinations[0].slug == "value-1_label-a_fail_on-10"
    assert all(c.params["sleep_s"] == 0 for c in combinations)


def test_presets_and_overrides_replace_a_key_wherever_it_was(tmp_path, tiny):
    grid = grid_file(tmp_path, f"""
        notebook: {tiny}
        grid: {{device: [cpu, cpu:2], value: [1, 2, 3]}}
        zip: {{label: [a, b], fail_on: [10, 20]}}
        presets:
          smoke: {{grid: {{value: [7]}}, fixed: {{label: z}}}}
    """)
    spec = load_grid(grid)
    smoke = expand(spec, "smoke")
    # The preset's fixed label leaves fail_on as a one-key zip group; value keeps its place in the slug.
    assert [(c.device, c.params["value"], c.params["label"], c.params["fail_on"]) for c in smoke] == \
        [("cpu", 7, "z", 10), ("cpu", 7, "z", 20), ("cpu:2", 7, "z", 10), ("cpu:2", 7, "z", 20)]
    assert smoke[0].slug == "value-7_fail_on-10"
    pinned = expand(spec, "smoke", overrides={"value": 9, "fail_on": 5})
    assert {(c.params["value"], c.params["fail_on"]) for c in pinned} == {(9, 5)}
    # One per device, named as the unpinned grid would name value 9 and fail_on 5: never another run's file.
    assert len(pinned) == 2 and [c.slug for c in pinned] == ["value-9_fail_on-5", "value-9_fail_on-5"]


def test_a_pinned_value_names_its_files_so_that_it_never_takes_another_runs_place(tmp_path, tiny):
    grid = grid_file(tmp_path, f"""
        notebook: {tiny}
        grid: {{device: [cpu], value: [1, 2]}}
        fixed: {{label: a}}
        presets: {{smoke: {{fixed: {{label: s}}}}}}
    """)
    spec = load_grid(grid)
    unpinned = {c.slug: c.params for c in expand(spec)}
    assert list(unpinned) == ["value-1", "value-2"]
    # Pinning a grid value names the run as the grid's own run of that value (resume keeps a finished one).
    [pinned] = expand(spec, overrides={"value": 2})
    assert (pinned.slug, pinned.params) == ("value-2", unpinned["value-2"])
    # Pinning a fixed value to another value adds it to the name, beside the normal results.
    assert [c.slug for c in expand(spec, overrides={"label": "b"})] == ["value-1_label-b", "value-2_label-b"]
    assert [c.slug for c in expand(spec, overrides={"fail_on": 3})] == ["value-1_fail_on-3", "value-2_fail_on-3"]
    # The value the file (or its preset) fixes already names nothing: pinning it to that value changes nothing.
    assert [c.slug for c in expand(spec, overrides={"label": "a"})] == ["value-1", "value-2"]
    assert [c.slug for c in expand(spec, "smoke", overrides={"label": "s"})] == ["value-1", "value-2"]
    assert [c.slug for c in expand(spec, "smoke", overrides={"label": "a"})] == ["value-1_label-a", "value-2_label-a"]


def test_a_key_given_twice_with_p_is_refused_before_anything_runs(tmp_path, tiny, capsys):
    grid = grid_file(tmp_path, f"notebook: {tiny}\ngrid: {{device: [cpu], value: [1, 2]}}\n")
    argv = ["sweep", str(grid), "--out", str(tmp_path / "out"), "-p", "value=256", "-p", "value=512"]
    assert main(argv) == 2
    assert capsys.readouterr().err == "error: -p value is given twice (256, then 512): give each key once\n"
    assert not (tmp_path / "out").exists()
    with pytest.raises(GridError, match="-p n is given twice"):
        parse_overrides(["n=1", "n=1"])


def test_an_override_applies_to_the_notebooks_that_declare_it(tmp_path, tiny):
    tiny_grid = grid_file(tmp_path, f"notebook: {tiny}\ngrid: {{device: [cpu], value: [1, 2]}}\n", "a.yaml")
    matmul_grid = grid_file(tmp_path, f"notebook: {NOTEBOOKS / 'matmul_tflops.ipynb'}\ngrid: {{device: [cpu]}}\n", "b.yaml")
    combinations = plan([tiny_grid, matmul_grid], overrides={"value": 5, "n": 64})
    assert [(c.name, c.params.get("value"), c.params.get("n")) for c in combinations] == \
        [("tiny", 5, None), ("matmul_tflops", None, 64)]


def test_device_narrowing_takes_counts_and_lists(tmp_path, tiny):
    grid = grid_file(tmp_path, f"notebook: {tiny}\ngrid: {{device: [cpu, cpu:2, gpu, tpu], value: [1]}}\n")
    assert [c.device for c in plan([grid], device="cpu")] == ["cpu", "cpu:2"]
    assert [c.device for c in plan([grid], device="cpu:2,tpu")] == ["cpu:2", "tpu"]
    with pytest.raises(GridError, match="--device: unknown device 'cuda'"):
        plan([grid], device="cuda")


def test_an_undeclared_notebooks_parameters_take_the_types_their_comments_name(tmp_path):
    import nbformat

    notebook = write_tiny_notebook(tmp_path / "scratch.ipynb")  # no experiment declares it
    node = nbformat.read(notebook, as_version=4)
    node.cells[1].source = node.cells[1].source.replace('label = "a"  #', 'label = "a"  # or True, False;')
    nbformat.write(node, notebook)
    declared = declared_parameters(notebook)
    assert declared["label"].problem(True) is None
    assert declared["label"].problem("b") is None
    assert "takes bool or str" in declared["label"].problem(3)
    assert declared["value"].problem(2048) is None
    assert declared["value"].problem(True) is not None  # a bool is not an int here
    assert declared["value"].default == 1 and declared["label"].default == "a"


def test_a_parameters_cell_line_whose_type_cannot_be_told_takes_anything(tmp_path):
    import nbformat

    notebook = write_tiny_notebook(tmp_path / "scratch.ipynb")
    node = nbformat.read(notebook, as_version=4)
    node.cells[1].source += "dtype = np.float32  # an expression\nnothing = None\nsize: int = 3\n"
    nbformat.write(node, notebook)
    declared = declared_parameters(notebook)
    assert declared["dtype"].problem("float16") is None and declared["dtype"].problem(3) is None
    assert declared["dtype"].default == "np.float32"  # the source text, where it is not a literal
    assert declared["nothing"].problem([1, 2]) is None
    assert declared["size"].problem("3") == "'3' is a str, but the notebook's `size = 3` takes int"


def test_a_declared_notebook_is_checked_against_its_declaration_not_its_comments():
    spec = load_grid(REPO / "parameters" / "matmul_tflops.yaml")
    assert spec.experiment is not None and spec.experiment.name == "matmul_tflops"
    assert spec.parameters["jit_compile"].problem(True) is None
    assert spec.parameters["jit_compile"].problem(3) == "jit_compile = 3: expected one of auto, True, False"
    assert spec.parameters["n"].problem(0) == "n = 0: expected an int >= 1"


def test_slugs_with_dots_keep_distinct_files(tmp_path, tiny):
    grid = grid_file(tmp_path, f"notebook: {tiny}\ngrid: {{device: [cpu], sleep_s: [0.001, 0.002]}}\n")
    files = [RunFiles.of(c, tmp_path) for c in expand(load_grid(grid))]
    assert [f.record.name for f in files] == ["sleep_s-0.001.json", "sleep_s-0.002.json"]
    assert files[0].running_notebook.name == ".sleep_s-0.001.running.ipynb"


def test_fingerprint_follows_notebook_code_and_params_not_outputs(tmp_path, tiny):
    params = {"device": "cpu", "value": 1}
    first = fingerprint(tiny, params)
    assert stale_reason(first, fingerprint(tiny, dict(params))) is None
    notebook = json.loads(tiny.read_text())
    notebook["cells"][3]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "value 1\n"}]
    notebook["cells"][3]["execution_count"] = 4
    notebook["metadata"]["papermill"] = {"duration": 1.0}
    tiny.write_text(json.dumps(notebook))
    assert stale_reason(first, fingerprint(tiny, params)) is None  # outputs and metadata do not count
    assert stale_reason(first, fingerprint(tiny, {**params, "value": 2})) == "parameters changed (value)"
    notebook["cells"][3]["source"] += "\nprint('changed')"
    tiny.write_text(json.dumps(notebook))
    assert stale_reason(first, fingerprint(tiny, params)) == "the notebook changed"
    assert stale_reason(None, first).startswith("its record has no fingerprint")
    assert stale_reason({**first, "digest": "x", "tensorflow": "2.0.0"}, first) == \
        f"TensorFlow 2.0.0 -> {first['tensorflow']}"


def test_parallel_jobs_get_their_own_gpus_and_share_the_tpu_one_at_a_time(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    gpu, two_gpus, cpu, tpu = DeviceRequest("gpu"), DeviceRequest("gpu", 2), DeviceRequest("cpu"), DeviceRequest("tpu")
    slots = DeviceSlots({"cpu": 1, "gpu": 2, "tpu": 1})
    first, second = slots.take(gpu), slots.take(gpu)
    assert (first.env, second.env) == ({"CUDA_VISIBLE_DEVICES": "3"}, {"CUDA_VISIBLE_DEVICES": "5"})
    assert slots.take(gpu) is None and slots.take(cpu).env is None
    slots.give_back(first)
    assert slots.take(two_gpus) is None
    slots.give_back(second)
    assert slots.take(two_gpus).env == {"CUDA_VISIBLE_DEVICES": "3,5"}
    tpu_lease = slots.take(tpu)
    assert tpu_lease is not None and slots.take(tpu) is None
    slots.give_back(tpu_lease)
    assert slots.take(tpu) is not None


def test_an_auto_job_waits_while_every_gpu_is_leased_rather_than_see_them_all(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    gpu, auto = DeviceRequest("gpu"), DeviceRequest("auto")
    slots = DeviceSlots({"cpu": 1, "gpu": 2})
    first, second = slots.take(gpu), slots.take(gpu)
    assert slots.take(auto) is None  # an empty lease would leave it CUDA_VISIBLE_DEVICES=3,5: both busy GPUs
    slots.give_back(second)
    assert slots.take(auto).env == {"CUDA_VISIBLE_DEVICES": "5"}  # the free one only
    assert DeviceSlots({"cpu": 1}).take(auto) is not None  # no GPU on the machine: nothing to wait for


def test_each_combination_carries_its_typed_device_request(tmp_path, tiny):
    grid = grid_file(tmp_path, f"notebook: {tiny}\ngrid: {{device: [cpu, 'gpu:2', multiworker:3], value: [1]}}\n")
    combinations = plan([grid])
    assert [(c.device, c.request) for c in combinations] == [
        ("cpu", DeviceRequest("cpu")), ("gpu:2", DeviceRequest("gpu", 2)),
        ("multiworker:3", DeviceRequest("multiworker", 3))]
    assert [c.output_base(tmp_path).parent.name for c in combinations] == ["cpu", "gpu-2", "multiworker-3"]


@pytest.mark.parametrize("item, expected", [
    ("breakdown=false", "breakdown = 'false': expected a bool"),
    ("breakdown=1", "breakdown = 1: expected a bool"),
    ("breakdown=yes", "breakdown = 'yes': expected a bool"),
])
def test_a_bool_given_in_another_spelling_is_refused_with_the_spellings_it_takes(capsys, item, expected):
    argv = ["sweep", str(REPO / "parameters" / "paradnn.yaml"), "--preset", "smoke", "--dry-run", "-p", item]
    assert main(argv) == 2
    assert capsys.readouterr().err == (
        f"error: -p breakdown (paradnn.ipynb): {expected} (-p takes a bool as True or False, spelt as Python writes "
        "them, as papermill's -p does: not true, false, yes, no, 1 or 0)\n")
