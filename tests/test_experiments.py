"""Experiment declarations: each notebook's parameters cell agrees with its declaration, values are
checked against declared types, ranges and choices (by the sweep before anything runs, and by the
notebook itself right after its parameters cell), and the README's table is made from them."""

from __future__ import annotations

import textwrap
import time
from pathlib import Path

import pytest

from colabkit.cli import main
from colabkit.colab.coordinates import Coordinates
from colabkit.errors import ExperimentDeclarationError, ParameterError, UnknownExperimentError
from colabkit.experiments import (
    Experiment,
    Headline,
    Parameter,
    all_experiments,
    check_values,
    get,
)
from experiment_tables import experiments_table
from stamp_notebooks import NOTEBOOKS_BLOCK, AcceleratorHint, NotebookInfo, NotebookTemplateError, readme_table, stamp_block
from colabkit.run import start_run
from colabkit.sweep.grids import declared_parameters
from colabkit.sweep.plan import plan

REPO = Path(__file__).resolve().parent.parent
SUITE = ("matmul_tflops", "cnn_mnist", "dblstm_har", "timeseries_rnn")


@pytest.fixture(autouse=True)
def nothing_runs(monkeypatch):
    """Validation must stop every sweep in this file before devices are even detected."""
    def refuse() -> None:
        raise AssertionError("the sweep got past validation")

    monkeypatch.setattr("colabkit.sweep.devices.detect_devices", refuse)


@pytest.mark.parametrize("name", SUITE)
def test_each_declaration_and_its_notebooks_parameters_cell_list_the_same_names_and_defaults(name):
    experiment = get(name)
    assert experiment.notebook == f"notebooks/{name}.ipynb"
    cell = declared_parameters(REPO / experiment.notebook)
    assert list(cell) == list(experiment.parameter_names)
    assert {key: parameter.default for key, parameter in cell.items()} == experiment.defaults


def test_the_suite_declares_its_four_experiments_in_report_order_with_a_grid_file_each():
    assert [experiment.name for experiment in all_experiments()][:4] == list(SUITE)
    for name in SUITE:
        assert (REPO / "parameters" / f"{name}.yaml").is_file()


def test_declared_vocabularies_are_the_ones_the_training_code_accepts():
    """Defined once, in colabkit.training.choices (no Keras), read by the declarations and by the code."""
    from colabkit.experiments import cnn_mnist, dblstm_har, paradnn, timeseries_rnn
    from colabkit.training import choices, setup, timeseries

    for module in (cnn_mnist, dblstm_har, timeseries_rnn, paradnn):
        experiment = module.EXPERIMENT
        if "mixed_precision" in experiment.parameter_names:
            assert experiment.parameter("mixed_precision").choices is choices.MIXED_PRECISION_CHOICES
        if "batch_size_is" in experiment.parameter_names:
            assert experiment.parameter("batch_size_is").choices is choices.BATCH_SIZE_MEANINGS
    assert cnn_mnist.EXPERIMENT.parameter("lr_scaling").choices is choices.LR_SCALING_RULES
    assert setup.MIXED_PRECISION_CHOICES is choices.MIXED_PRECISION_CHOICES  # what set_precision checks against
    assert set(choices.COMPUTE_DTYPES) == set(choices.MIXED_PRECISION_CHOICES)
    for dataset in timeseries_rnn.EXPERIMENT.parameter("dataset").choices:  # each one the loader knows
        assert dataset in timeseries.load_weather_series.__doc__


def test_a_misspelt_parameter_is_named_with_the_closest_declared_ones():
    experiment = get("cnn_mnist")
    assert check_values(experiment, {"batchsize": 512}) == [
        "batchsize: cnn_mnist declares no such parameter (did you mean batch_size or batch_size_is or "
        "offline_batch_sizes?)"]
    assert "it has: device, backend," in check_values(experiment, {"zzz": 1})[0]  # nothing close: every name


def test_start_run_refuses_a_name_papermill_passed_that_the_declaration_lacks(tmp_path):
    """Only what papermill injected counts (its "# Parameters" cell in IPython's history): IPython's own
    names, the set-up cell's imports and a previous run's leftovers in the kernel are never refused."""
    from colabkit.run import passed_parameters

    namespace = {**get("matmul_tflops").defaults, "results_path": str(tmp_path / "r.json"), "os": object(),
                 "_": None, "Out": {}, "leftover_from_an_earlier_run": 3, "get_ipython": print}
    history = ["", "import os, sys", 'device = "auto"\nn = 1024', '# Parameters\nn = 64\nbatchsize = 512\n', "run = ..."]
    assert passed_parameters({"In": history}) == ["n", "batchsize"]
    assert passed_parameters({}) == [] and passed_parameters({"In": history[:3]}) == []
    with pytest.raises(ParameterError) as info:
        start_run("matmul_tflops", {**namespace, "In": history})
    assert str(info.value) == "batchsize: matmul_tflops declares no such parameter (it has: " + ", ".join(
        get("matmul_tflops").parameter_names) + ")"
    start_run("matmul_tflops", {**namespace, "In": history[:3] + ['# Parameters\nn = 64\n', "run = ..."]})


def test_a_profile_without_the_bottleneck_passes_is_refused_before_anything_runs():
    for name in ("cnn_mnist", "dblstm_har", "timeseries_rnn", "paradnn"):
        problems = check_values(get(name), {"breakdown": False, "profile_steps": 5})
        assert problems == ["profile_steps = 5: expected 0 with breakdown = False (the profile is taken with the "
                            "bottleneck passes); set breakdown = True or profile_steps = 0"], name
        assert check_values(get(name), {"breakdown": False, "profile_steps": 0}) == []


def test_a_profile_that_could_not_be_taken_is_refused_not_dropped():
    """The profile is of steady training steps, taken with the bottleneck passes: one epoch, inference mode or
    several machines have none, and a profile asked for there is refused (measure_breakdown would skip it)."""
    cases = {"epochs = 1 (the profile is of steady steps, after the first epoch: give epochs >= 2)": {"epochs": 1},
             "mode = 'inference' (the profile is of training steps)": {"mode": "inference"},
             "device = 'multiworker:2' (the bottleneck passes and the profile are not taken across machines)":
                 {"device": "multiworker:2"}}
    for name in ("cnn_mnist", "dblstm_har", "timeseries_rnn"):
        for why, values in cases.items():
            assert check_values(get(name), {"profile_steps": 3, **values}) == [
                f"profile_steps = 3: expected 0 with {why}"], (name, values)
            assert check_values(get(name), {"profile_steps": 0, **values}) == [], (name, values)
        assert check_values(get(name), {"profile_steps": 3, "epochs": 2}) == []
    assert check_values(get("dblstm_har"), {"profile_steps": 3, "epochs": "auto"}) == []  # 3 or 30: never 1


def test_the_notebooks_own_check_refuses_what_the_plan_refuses_for_plain_papermill(tmp_path):
    """start_run, the notebook's first checked cell, checks the same declared rules as the sweep's plan (one
    function: rule_problems), so a notebook run by papermill alone is refused before its work, every problem
    named."""
    from colabkit.errors import ParameterError
    from colabkit.experiments import rule_problems

    paradnn = get("paradnn")
    values = {**paradnn.defaults, "family": "transformer", "heads": 3, "profile_steps": 2, "breakdown": False,
              "results_path": str(tmp_path / "r.json")}
    with pytest.raises(ParameterError) as refused:
        start_run("paradnn", values)
    assert rule_problems(paradnn, values) == [
        "width = 256: expected a multiple of heads (3), each head width / heads wide",
        "profile_steps = 2: expected 0 with breakdown = False (the profile is taken with the bottleneck passes); set "
        "breakdown = True or profile_steps = 0"]
    assert all(problem in str(refused.value) for problem in rule_problems(paradnn, values))
    assert not (tmp_path / "r.json").exists()


def test_each_experiment_offers_only_its_own_modes():
    """Decode only where a decoder exists (ParaDnn's Transformer), inference where it is declared, matmul none."""
    assert {experiment.name: experiment.parameter("mode").choices if "mode" in experiment.parameter_names else None
            for experiment in all_experiments()} == {
        "matmul_tflops": None, "cnn_mnist": ("train", "inference"), "dblstm_har": ("train", "inference"),
        "timeseries_rnn": ("train", "inference"), "paradnn": ("train", "inference", "decode")}
    for name in ("cnn_mnist", "dblstm_har", "timeseries_rnn"):  # the stamped cell offers no mode it lacks
        assert "decode" not in declared_parameters(REPO / get(name).notebook)["mode"].help


@pytest.mark.parametrize("dry_run", [True, False])
@pytest.mark.parametrize("name", ["cnn_mnist", "dblstm_har", "timeseries_rnn"])
def test_the_plan_refuses_a_mode_the_experiment_lacks_in_one_line(tmp_path, capsys, name, dry_run):
    argv = ["sweep", str(REPO / "parameters" / f"{name}.yaml"), "--preset", "smoke", "-p", "mode=decode",
            "--out", str(tmp_path / "out"), *(["--dry-run"] if dry_run else [])]
    assert main(argv) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"error: -p mode ({name}.ipynb): mode = 'decode': expected one of train, inference"]
    assert not (tmp_path / "out").exists()


def test_rules_of_training_steps_do_not_bind_an_inference_run():
    paradnn = get("paradnn")
    assert check_values(paradnn, {"steps_per_execution": 3}) == [
        "steps = 20: expected a multiple of steps_per_execution (3), so every epoch runs whole executions"]
    assert check_values(paradnn, {"steps_per_execution": 3, "mode": "inference"}) == []  # it trains no steps


@pytest.mark.parametrize("name, values, message", [
    ("cnn_mnist", {"batch_size": 0}, "batch_size = 0: expected an int >= 1"),
    ("cnn_mnist", {"epochs": -1}, "epochs = -1: expected an int >= 1"),
    ("matmul_tflops", {"n": -5}, "n = -5: expected an int >= 1"),
    ("matmul_tflops", {"n": "abc"}, "n = 'abc': expected an int >= 1"),
    ("matmul_tflops", {"count": 0}, "count = 0: expected an int >= 1"),
    ("matmul_tflops", {"dtype": "float8x"}, "dtype = 'float8x': expected one of float32, bfloat16, float16"),
    ("matmul_tflops", {"jit_compile": 1}, "jit_compile = 1: expected one of auto, True, False"),
    ("matmul_tflops", {"n": True}, "n = True: expected an int >= 1"),
    ("cnn_mnist", {"learning_rate": 0}, "learning_rate = 0: expected a float > 0"),
    ("cnn_mnist", {"learning_rate": "1e-3"}, "(YAML reads 1e-3 as a string: write 1.0e-3)"),
    ("cnn_mnist", {"train_samples": -1}, "train_samples = -1: expected an int >= 1 (0: the whole training set)"),
    ("cnn_mnist", {"backend": "mxnet"}, "backend = 'mxnet': expected one of auto, tensorflow, jax, torch"),
    ("cnn_mnist", {"data_source": "web"}, "data_source = 'web': expected one of auto, real, offline"),
    ("cnn_mnist", {"target_accuracy": 1.5}, "target_accuracy = 1.5: expected a float >= 0 and <= 1"),
    ("dblstm_har", {"mixed_precision": "fp8"}, "mixed_precision = 'fp8': expected one of none, mixed_float16"),
    ("timeseries_rnn", {"dataset": "moon"}, "dataset = 'moon': expected one of weather_denmark, jena_climate"),
    ("timeseries_rnn", {"device": "cuda"}, "device = 'cuda': expected one of auto, cpu, gpu, tpu, multiworker"),
    ("timeseries_rnn", {"device": "gpu:0"}, "device = 'gpu:0': expected"),
])
def test_a_value_outside_its_declared_range_is_named_with_what_is_allowed(name, values, message):
    problems = check_values(get(name), values)
    assert len(problems) == 1 and message in problems[0], problems


def test_values_inside_their_ranges_pass_and_zero_means_all_where_declared():
    assert check_values(get("cnn_mnist"), {"train_samples": 0, "learning_rate": 1, "device": "gpu:4",
                                           "batch_size_is": "global", "backend": "jax"}) == []
    assert check_values(get("matmul_tflops"), {"jit_compile": True, "warmup": 0, "dtype": "bfloat16"}) == []
    for experiment in all_experiments():
        assert check_values(experiment, experiment.defaults, complete=True) == []


def test_every_problem_comes_at_once_including_unknown_and_missing_names():
    experiment = get("matmul_tflops")
    values = {**experiment.defaults, "n": 0, "count": -1, "dtype": "x", "nope": 1}
    del values["warmup"]
    problems = check_values(experiment, values, complete=True)
    assert [problem.split(" ")[0].rstrip(":") for problem in problems] == ["n", "count", "dtype", "nope", "warmup"]
    assert problems[-1] == "warmup: not set (the notebook's parameters cell must assign it)"


def test_a_declaration_refuses_a_default_outside_its_own_rule_and_a_headline_it_does_not_record():
    with pytest.raises(ExperimentDeclarationError, match="its default does not fit its own rule: x = 0"):
        Parameter("x", int, 0, "a count", minimum=1)
    common = (Parameter("device", str, "auto", "d"), Parameter("results_path", str, "", "r"))
    with pytest.raises(ExperimentDeclarationError, match="headline metric 'speed' is not among its metrics"):
        Experiment("e", "notebooks/e.ipynb", "E", "e", common, ("time",), Headline("speed", "s", "x", "higher"))
    with pytest.raises(ExperimentDeclarationError, match="every experiment declares device, results_path"):
        Experiment("e", "notebooks/e.ipynb", "E", "e", (), ("t",), Headline("t", "t", "s", "lower"))


def test_an_unknown_experiment_is_named_with_the_known_ones():
    with pytest.raises(UnknownExperimentError, match=r"no experiment is declared as 'nope' \(known: matmul_tflops"):
        get("nope")


def test_start_run_reads_checks_and_records_the_declared_parameters_of_a_namespace(tmp_path):
    namespace = {**get("matmul_tflops").defaults, "results_path": str(tmp_path / "r.json"), "other": 1}
    run = start_run("matmul_tflops", namespace)
    assert run.params == {key: value for key, value in get("matmul_tflops").defaults.items() if key != "results_path"}
    assert run.path == tmp_path / "r.json"
    with pytest.raises(ParameterError) as info:
        start_run("matmul_tflops", {**namespace, "n": "abc", "count": 0})
    assert str(info.value) == "n = 'abc': expected an int >= 1; count = 0: expected an int >= 1"
    assert len(info.value.problems) == 2
    with pytest.raises(ParameterError, match="timed_calls: not set"):
        start_run("matmul_tflops", {key: value for key, value in namespace.items() if key != "timed_calls"})
    with pytest.raises(ParameterError, match="n = 0"):  # the older params= form of a declared notebook is checked too
        start_run("matmul_tflops", params={"device": "cpu", "n": 0})


@pytest.mark.parametrize("body, messages", [
    ("grid: {device: [cpu], n: [0, abc]}\nfixed: {count: 0, dtype: float8x}",
     ["grid.n: n = 0: expected an int >= 1", "grid.n: n = 'abc': expected an int >= 1",
      "fixed.count: count = 0: expected an int >= 1",
      "fixed.dtype: dtype = 'float8x': expected one of float32, bfloat16, float16"]),
    ("grid: {device: [cpu, cuda]}\npresets: {smoke: {fixed: {timed_calls: -1, size: 3}}}",
     ["grid.device: device = 'cuda': expected one of auto, cpu",
      "presets.smoke.fixed.timed_calls: timed_calls = -1: expected an int >= 1",
      "presets.smoke.fixed.size: the notebook"]),
])
def test_the_sweep_refuses_out_of_range_values_all_at_once_before_anything_runs(tmp_path, capsys, body, messages):
    grid = tmp_path / "grid.yaml"
    grid.write_text(f"notebook: {REPO / 'notebooks' / 'matmul_tflops.ipynb'}\n{body}\n")
    assert main(["sweep", str(grid), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert f"{len(messages)} problems" in err
    for message in messages:
        assert message in err
    assert not (tmp_path / "out").exists()


def test_overrides_are_checked_against_the_declarations_of_every_notebook_that_has_them(tmp_path, capsys):
    argv = ["sweep", str(REPO / "parameters" / "cnn_mnist.yaml"), str(REPO / "parameters" / "dblstm_har.yaml"),
            "--out", str(tmp_path / "out"), "-p", "epochs=0", "-p", "batch_size=abc"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "-p epochs (cnn_mnist.ipynb): epochs = 0: expected an int >= 1" in err
    assert "-p batch_size (cnn_mnist.ipynb): batch_size = 'abc': expected an int >= 1" in err


def test_a_notebook_whose_parameters_cell_drifted_from_its_declaration_is_refused(tmp_path):
    import nbformat

    notebook = nbformat.read(REPO / "notebooks" / "matmul_tflops.ipynb", as_version=4)
    cell = next(cell for cell in notebook.cells if "parameters" in cell.metadata.get("tags", []))
    cell.source = cell.source.replace("warmup = 1", "warm_up = 1")
    (tmp_path / "matmul_tflops.ipynb").write_text(nbformat.writes(notebook))
    grid = tmp_path / "grid.yaml"
    grid.write_text(f"notebook: {tmp_path / 'matmul_tflops.ipynb'}\ngrid: {{device: [cpu]}}\n")
    with pytest.raises(Exception, match="only the cell has warm_up; only the declaration has warmup"):
        plan([grid])


def test_validating_a_grid_of_ten_thousand_combinations_takes_under_five_seconds(tmp_path):
    grid = tmp_path / "big.yaml"
    grid.write_text(textwrap.dedent(f"""
        notebook: {REPO / 'notebooks' / 'matmul_tflops.ipynb'}
        grid:
          device: [cpu]
          n: {list(range(1, 101))}
          count: {list(range(1, 101))}
        fixed: {{timed_calls: 2}}
    """))
    # CPU seconds of this process, not wall-clock ones: on a loaded host the latter measure the neighbours
    started = time.process_time()
    combinations = plan([grid], overrides={"warmup": 0}, out=tmp_path / "out")
    elapsed = time.process_time() - started
    assert len(combinations) == 10_000
    assert elapsed < 5, f"{elapsed:.1f} CPU s"
    bad = grid.read_text().replace("count: [1,", "count: [0,")
    grid.write_text(bad)
    started = time.process_time()
    with pytest.raises(Exception, match="count = 0: expected an int >= 1"):
        plan([grid], out=tmp_path / "out")
    assert time.process_time() - started < 5


@pytest.mark.notebook
def test_plain_papermill_stops_right_after_the_parameters_cell_naming_the_parameter(tmp_path):
    import papermill
    from papermill.exceptions import PapermillExecutionError

    with pytest.raises(PapermillExecutionError) as info:
        papermill.execute_notebook(str(REPO / "notebooks" / "matmul_tflops.ipynb"), str(tmp_path / "out.ipynb"),
                                   parameters={"n": "abc", "dtype": "float8x", "results_path": str(tmp_path / "r.json")},
                                   progress_bar=False, cwd=str(REPO))
    assert info.value.ename == "ParameterError"
    assert info.value.evalue == ("n = 'abc': expected an int >= 1; "
                                 "dtype = 'float8x': expected one of float32, bfloat16, float16")
    assert not (tmp_path / "r.json").exists()  # stopped before any work, and wrote no record


@pytest.mark.notebook
def test_a_misspelt_parameter_passed_to_papermill_stops_the_notebook_in_its_first_checked_cell(tmp_path):
    """`papermill notebooks/cnn_mnist.ipynb out.ipynb -p batchsize 512` once ran to an ok record with the default."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    with pytest.raises(PapermillExecutionError) as info:
        papermill.execute_notebook(str(REPO / "notebooks" / "cnn_mnist.ipynb"), str(tmp_path / "out.ipynb"),
                                   parameters={"batchsize": 512, "results_path": str(tmp_path / "r.json")},
                                   progress_bar=False, cwd=str(REPO))
    assert info.value.ename == "ParameterError"
    assert info.value.evalue == ("batchsize: cnn_mnist declares no such parameter (did you mean batch_size or "
                                 "batch_size_is or offline_batch_sizes?)")
    assert "colabkit.start_run(" in info.value.source and not (tmp_path / "r.json").exists()


@pytest.mark.notebook
def test_plain_papermill_refuses_a_mode_the_experiment_lacks_in_its_first_checked_cell(tmp_path):
    import papermill
    from papermill.exceptions import PapermillExecutionError

    with pytest.raises(PapermillExecutionError) as info:
        papermill.execute_notebook(str(REPO / "notebooks" / "cnn_mnist.ipynb"), str(tmp_path / "out.ipynb"),
                                   parameters={"mode": "decode", "results_path": str(tmp_path / "r.json")},
                                   progress_bar=False, cwd=str(REPO))
    assert (info.value.ename, info.value.evalue) == ("ParameterError",
                                                     "mode = 'decode': expected one of train, inference")
    assert "colabkit.start_run(" in info.value.source and not (tmp_path / "r.json").exists()


def test_the_readme_table_has_every_experiment_with_its_headline_and_colab_badge():
    coordinates = Coordinates("someone/fork", "v1.2")
    table = experiments_table(coordinates=coordinates)
    lines = table.strip().splitlines()
    assert len(lines) == 2 + len(all_experiments())
    for experiment, line in zip(all_experiments(), lines[2:]):
        assert line.startswith(f"| {experiment.title} | [`{experiment.name}`]({experiment.notebook}) |")
        assert f"{experiment.headline.label} ({experiment.headline.unit}, {experiment.headline.better} is better)" in line
        assert coordinates.notebook_url(experiment.notebook) in line


def test_the_experiments_table_is_stamped_between_the_readme_markers():
    readme = "# colabkit\n\nintro\n\n<!-- experiments:start -->\nstale\n<!-- experiments:end -->\n\nafter\n"
    text = stamp_block(readme, NOTEBOOKS_BLOCK, experiments_table())
    assert text == ("# colabkit\n\nintro\n\n<!-- experiments:start -->\n" + experiments_table()
                    + "<!-- experiments:end -->\n\nafter\n")
    assert stamp_block(text, NOTEBOOKS_BLOCK, experiments_table()) == text  # stamping twice changes nothing
    with pytest.raises(NotebookTemplateError, match="no generated block"):
        stamp_block("# no markers\n", NOTEBOOKS_BLOCK, experiments_table())


def test_the_notebooks_command_stamps_the_experiments_table_and_then_the_other_notebooks():
    coordinates = Coordinates("colabkit/colabkit", "main")
    notebooks = [NotebookInfo("cnn_mnist", "notebooks/cnn_mnist.ipynb", "CNN", AcceleratorHint("GPU", "T4")),
                 NotebookInfo("report", "notebooks/report.ipynb", "Results report", AcceleratorHint())]
    table = readme_table(notebooks, coordinates)
    experiments_part, others_part = table.split("The notebooks that sweep and report them:")
    assert experiments_part.startswith(experiments_table(coordinates=coordinates, runtimes={"cnn_mnist": "T4 GPU",
                                                                                          "report": "CPU"}))
    assert "| [`cnn_mnist`](notebooks/cnn_mnist.ipynb) |" in experiments_part
    assert "T4 GPU |" in experiments_part.splitlines()[3]  # cnn_mnist's row says the runtime it asks for
    assert "[`report`](notebooks/report.ipynb)" in others_part and "cnn_mnist" not in others_part
    readme = "# x\n<!-- experiments:start (generated) -->\nSTALE\n<!-- experiments:end -->\n"
    stamped = stamp_block(readme, NOTEBOOKS_BLOCK, table)
    assert stamped == "# x\n<!-- experiments:start (generated) -->\n" + table + "<!-- experiments:end -->\n"


def test_the_experiments_index_names_every_piece_of_each_experiment_and_each_path_exists():
    """docs/experiments.md: per experiment its notebook, declaration, grid file, report section, published figures'
    module and docs page, each a link that resolves (its #anchor a heading of the page)."""
    import re

    page = REPO / "docs" / "experiments.md"
    rows = [line for line in page.read_text().splitlines() if line.startswith("| ") and "](" in line]
    assert [row.split(" | ")[0][2:] for row in rows] == [experiment.title for experiment in all_experiments()]
    for row, experiment in zip(rows, all_experiments()):
        targets = re.findall(r"\]\(([^)]+)\)", row)
        assert len(targets) == 6 and targets[0] == f"../{experiment.notebook}", row  # a link in every column
        for target in targets:
            path, _, anchor = target.partition("#")
            assert (page.parent / path).is_file(), target
            headings = re.findall(r"^#+ (.+)$", (page.parent / path).read_text(), flags=re.M) if anchor else []
            slugs = {re.sub(r"[^a-z0-9 -]", "", heading.lower()).replace(" ", "-") for heading in headings}
            assert not anchor or anchor in slugs, target


def test_the_repositorys_readme_carries_the_current_table():
    from colabkit.colab.coordinates import configured
    from stamp_notebooks import stamp_repository

    result = stamp_repository(REPO, configured(), check=True)
    assert "README.md" not in result.changed, "run `python tools/stamp_notebooks.py notebooks` to restamp the README"
