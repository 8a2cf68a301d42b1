"""A run's name holds only what shapes it: a parameter's `used_when` (ParaDnn's family knobs) read by
the sweep's expansion, slugs, fingerprints and duplicate check, by the record, and by the loader for
records written before the declaration said so."""

from __future__ import annotations

import json
import textwrap

import pytest
from helpers import REPO
from report_fixtures import CPU, write

from colabkit.errors import ExperimentDeclarationError, GridError
from colabkit.experiments import Experiment, Headline, Parameter, device_parameter, get, results_path_parameter
from colabkit.experiments.paradnn import FAMILY_KNOBS
from colabkit.records.loading import load_records
from colabkit.records.record import make_record
from colabkit.run import start_run
from colabkit.sweep.decide import fingerprint
from colabkit.sweep.plan import plan

PARADNN = get("paradnn")
INFERENCE_ONLY = {parameter.name for parameter in PARADNN.parameters if ("mode", ("inference",)) in parameter.used_when}
SHARED = {"family", "batch_size", "steps", "epochs", "steps_per_execution", "mixed_precision", "device", "backend",
          "seed"}


def test_each_family_keeps_its_own_knobs_and_the_shared_parameters():
    # every family has them; the mode's own (docs/inference.md) count in one mode, `queries` and the other
    # inference settings in inference runs only
    unconditional = {parameter.name for parameter in PARADNN.parameters
                     if not any(name == "family" for name, _ in parameter.used_when)}
    every_knob = {knob for knobs in FAMILY_KNOBS.values() for knob in knobs}
    assert SHARED | {"results_path"} <= unconditional and not unconditional & every_knob
    for family, knobs in FAMILY_KNOBS.items():
        values = {**PARADNN.defaults, "family": family}
        kept = set(PARADNN.relevant(values))
        assert kept == unconditional - INFERENCE_ONLY | set(knobs), family
        assert set(PARADNN.unused(values)) == set(PARADNN.parameter_names) - kept
    # a value's own family decides, whatever else the values hold
    assert PARADNN.relevant({"family": "fc", "cell": "gru", "nodes": 8}) == {"family": "fc", "nodes": 8}
    assert PARADNN.relevant({"cell": "gru"}) == {}  # the default family, fc, has no cell
    assert "cell" in PARADNN.relevant({"family": "rnn", "cell": "gru"})


def test_a_used_when_must_name_another_declared_parameter():
    def experiment(*parameters: Parameter) -> Experiment:
        return Experiment("x", "notebooks/x.ipynb", "x", "x", (*parameters, device_parameter(),
                                                                  results_path_parameter("x")),
                          ("v",), Headline("v", "v", "", "higher"))

    kind = Parameter("kind", str, "a", "", choices=("a", "b"))
    experiment(kind, Parameter("size", int, 1, "", used_when=(("kind", ("a",)),)))  # fine
    with pytest.raises(ExperimentDeclarationError, match="used_when names colour"):
        experiment(kind, Parameter("size", int, 1, "", used_when=(("colour", ("red",)),)))
    with pytest.raises(ExperimentDeclarationError, match="used_when names size"):
        experiment(Parameter("size", int, 1, "", used_when=(("size", (1,)),)))


def test_the_smoke_sweep_names_and_fingerprints_each_model_by_its_family_knobs_only():
    combinations = plan([REPO / "parameters" / "paradnn.yaml"], "smoke", "cpu")
    assert len(combinations) == 8  # 2 FC, 1 CNN, 3 RNN, 1 Transformer trained, the same one decoding
    for combination in combinations:
        family = combination.params["family"]
        others = {knob for knobs in FAMILY_KNOBS.values() for knob in knobs} - set(FAMILY_KNOBS[family])
        assert set(FAMILY_KNOBS[family]) <= set(combination.params)
        assert not others & set(combination.params), combination.label
        assert not any(f"{knob}-" in combination.slug for knob in others - {"layers", "input_size"})
        assert set(fingerprint(combination.notebook, combination.params)["params"]) == set(combination.params)
    first = combinations[0]
    assert first.slug == "batch_size-32_mode-train_family-fc_layers-2_nodes-64_input_size-256_output_size-16"
    assert first.unused["cell"] == "lstm"  # kept aside, only to explain a duplicate


def write_grid(tmp_path, body: str):
    path = tmp_path / "grid.yaml"
    path.write_text(f"notebook: {REPO / 'notebooks' / 'paradnn.ipynb'}\n" + textwrap.dedent(body))
    return path


def test_a_grid_asking_for_one_model_twice_is_told_before_anything_runs(tmp_path):
    grid = write_grid(tmp_path, """
        grid: {device: [cpu], family: [fc, rnn], cell: [lstm, gru]}
    """)
    with pytest.raises(GridError) as raised:
        plan([grid], out=tmp_path / "out")
    (problem,) = raised.value.problems  # the two RNN runs differ in their cell: fine; the FC ones do not
    assert "family-fc" in problem and "differing only in cell 'lstm' and 'gru'" in problem
    assert "do not shape this run" in problem


def test_an_override_no_combination_uses_is_refused(tmp_path):
    grid = write_grid(tmp_path, """
        grid: {device: [cpu], nodes: [8, 16]}
        fixed: {family: fc}
    """)
    with pytest.raises(GridError, match="-p cell: no combination of this sweep uses `cell`"):
        plan([grid], overrides={"cell": "gru"}, out=tmp_path / "out")
    assert len(plan([grid], overrides={"batch_size": 8}, out=tmp_path / "out")) == 2


def test_the_record_keeps_only_what_shapes_the_run():
    namespace = {**PARADNN.defaults, "family": "cnn", "cell": "gru", "results_path": ""}
    run = start_run("paradnn", namespace)
    assert "cell" not in run.params and "nodes" not in run.params
    assert run.params["block"] == "residual" and run.params["family"] == "cnn"
    by_hand = start_run("paradnn", params={"family": "fc", "cell": "gru", "nodes": 8})
    assert by_hand.params == {"family": "fc", "nodes": 8}


def paradnn_record(params: dict, finished_at: str, with_fingerprint: bool) -> dict:
    extra = {"fingerprint": {"digest": "d", "params": dict(params)}} if with_fingerprint else {}
    metrics = {"samples_per_s": 100.0, "model_tflops": 1e-4, "family": params["family"]}
    return make_record("paradnn", "ok", params, metrics=metrics, device=dict(CPU), finished_at=finished_at,
                       data={"name": "synthetic", "source": "synthetic"}, **extra)


def test_records_written_before_the_declaration_said_so_group_with_newer_ones(tmp_path):
    shape = {"device": "cpu", "family": "fc", "layers": 2, "nodes": 64, "input_size": 256, "output_size": 16,
             "batch_size": 32}
    old = {**shape, "blocks": 1, "filters": 16, "block": "residual", "cell": "lstm", "hidden": 100, "length": 10,
           "vocab": 1024}
    write(tmp_path / "old", paradnn_record(old, "2026-11-01T00:00:00+00:00", True), "old-slug")
    write(tmp_path / "new", paradnn_record(shape, "2026-11-20T00:00:00+00:00", True), "new-slug")
    loaded = load_records([tmp_path / "old", tmp_path / "new"])
    for record in loaded.records.values():
        assert record["params"] == shape and record["fingerprint"]["params"] == shape
    (group,) = loaded.combinations()
    assert len(group.paths) == 2 and group.used.endswith("new-slug.json")
    frame = loaded.frame()
    assert "params.cell" not in frame.columns  # the report's tables see one configuration, not two
    stored = json.loads((tmp_path / "old" / "paradnn" / "cpu" / "old-slug.json").read_text())
    assert stored["params"]["cell"] == "lstm"  # the file itself is never rewritten
