"""A model far too large for its device is refused before it is built: the estimate of what training
needs (colabkit.training.memory), the device's memory (colabkit.device.memory), the check a notebook
runs right after setting up its device and the one a sweep can run while planning."""

from __future__ import annotations

import json
import types

import pytest
from helpers import NOTEBOOKS, execute_notebook, notebook_builders

from colabkit.device import memory as device_memory_module
from colabkit.device.memory import DeviceMemory, container_limit_bytes, device_memory, setup_memory
from colabkit.errors import InsufficientMemoryError
from colabkit.experiments import get
from colabkit.run import start_run
from colabkit.experiments.paradnn import FAMILY_KNOBS
from colabkit.training.memory import FIT_FRACTION, human_bytes, memory_problem, paradnn_forward_flops

PARADNN = get("paradnn")
paradnn_memory = PARADNN.memory_estimate  # the declaration's estimate: training.memory's, named by FAMILY_KNOBS
HUGE_FC = {"family": "fc", "layers": 64, "nodes": 65536}
GIB = 2**30


@pytest.mark.parametrize("knobs", [
    {"family": "fc", "layers": 3, "nodes": 48, "input_size": 100, "output_size": 7},
    {"family": "cnn", "blocks": 2, "filters": 4, "block": "residual", "input_size": 37, "output_size": 5},
    {"family": "cnn", "blocks": 1, "filters": 4, "block": "bottleneck", "input_size": 32, "output_size": 5},
    {"family": "rnn", "layers": 2, "cell": "lstm", "hidden": 12, "length": 5, "vocab": 50},
    {"family": "rnn", "layers": 1, "cell": "gru", "hidden": 12, "length": 5, "vocab": 50},
    {"family": "rnn", "layers": 3, "cell": "rnn", "hidden": 12, "length": 5, "vocab": 50},
    {"family": "transformer", "layers": 2, "width": 24, "heads": 3, "length": 10, "vocab": 50, "mlp_ratio": 2},
])
def test_the_estimate_counts_the_weights_of_the_model_the_notebook_builds(knobs):
    import keras

    from colabkit.training.flops import model_flops

    values = {**PARADNN.defaults, **knobs}
    builders = notebook_builders()
    family = values["family"]
    arguments = FAMILY_KNOBS[family]  # the notebook's builders take each family's knobs in this order
    model = builders[f"build_{family}"](*(values[name] for name in arguments))
    trainable = sum(int(w.numpy().size) for w in model.trainable_weights)
    frozen = sum(int(w.numpy().size) for w in model.non_trainable_weights)
    estimate = paradnn_memory(values)
    assert (estimate.trainable, estimate.non_trainable) == (trainable, frozen)
    assert estimate.weights_bytes == 4 * model.count_params()
    # the same walk's FLOPs (the sweep's time estimate) are the built model's, as training.flops counts them
    assert paradnn_forward_flops(values) == model_flops(model).forward_per_sample
    keras.backend.clear_session()


def test_the_estimate_adds_gradients_optimizer_state_and_one_batch_of_activations():
    values = {**PARADNN.defaults, "family": "fc", "layers": 2, "nodes": 10, "input_size": 20, "output_size": 5,
              "batch_size": 8}
    estimate = paradnn_memory(values)
    weights = (20 * 10 + 10) + (10 * 10 + 10) + (10 * 5 + 5)
    assert estimate.trainable == weights
    # float32 weights and gradients, RMSprop with momentum's 2 slots, activations 20 + 10 + 10 + 5 per sample
    assert estimate.total_bytes == 4 * weights * (1 + 1 + 2) + 8 * (20 + 10 + 10 + 5) * 4
    half = paradnn_memory({**values, "mixed_precision": "mixed_bfloat16"})
    assert half.activations_bytes * 2 == estimate.activations_bytes and half.weights_bytes == estimate.weights_bytes


def test_a_model_far_too_large_is_refused_with_the_estimate_and_the_memory_named():
    problem = memory_problem(PARADNN, HUGE_FC, 24 * GIB, where="the CPU host")
    assert problem is not None
    assert problem.startswith("paradnn fc layers=64 nodes=65536 input_size=2000 output_size=200, batch 64 per replica: "
                              "training needs about 3.94 TiB (weights 1009 GiB, gradients 1009 GiB, optimizer state "
                              "1.97 TiB (RMSprop with momentum), activations of a batch of 64 1 GiB) but the CPU host "
                              "has 24 GiB")
    assert "\n" not in problem
    assert memory_problem(PARADNN, {"family": "fc"}, 24 * GIB) is None  # the default model: 12 MiB


def test_only_a_clear_excess_is_refused():
    needed = paradnn_memory({**PARADNN.defaults, **HUGE_FC}).total_bytes
    assert memory_problem(PARADNN, HUGE_FC, int(needed / FIT_FRACTION) + 1) is None
    assert memory_problem(PARADNN, HUGE_FC, int(needed / FIT_FRACTION) - 1024) is not None
    shared = memory_problem(PARADNN, HUGE_FC, int(needed / FIT_FRACTION) + 1, copies=2)  # cpu:2 shares the host
    assert shared is not None and "x 2 replicas sharing it" in shared
    assert memory_problem(get("cnn_mnist"), {"batch_size": 10**9}, 1) is None  # no estimate declared: no verdict


def test_bytes_read_in_binary_units():
    assert [human_bytes(n) for n in (512, 1536, 16 * GIB, 4.3e12)] == ["512 B", "1.5 KiB", "16 GiB", "3.91 TiB"]


def test_the_device_memory_per_model_copy(tmp_path, monkeypatch):
    monkeypatch.setattr(device_memory_module, "physical_memory_bytes", lambda: 24 * GIB)
    monkeypatch.setattr(device_memory_module, "container_limit_bytes", lambda: None)
    assert device_memory("cpu", 2) == DeviceMemory(24 * GIB, "the CPU host", 2, device_memory("cpu").source)
    monkeypatch.setattr(device_memory_module, "container_limit_bytes", lambda: 4 * GIB)
    assert device_memory("cpu").bytes == 4 * GIB and "container" in device_memory("cpu").where
    gpu = device_memory("gpu", 1, {"name": "Tesla T4", "memory_gib": 15.0})
    assert (gpu.bytes, gpu.where) == (15 * GIB, "each GPU (Tesla T4)")
    tpu = device_memory("tpu", 8, {"accelerator_type": "v2-8"})
    assert (tpu.bytes, tpu.where) == (8 * GIB, "each TPU v2 core")  # 16 GiB per chip, two cores
    monkeypatch.delenv("TPU_ACCELERATOR_TYPE", raising=False)
    assert device_memory("tpu", 8, {"tpu_generation": "v2 or v3"}) is None  # PCI ids cannot tell: no guess
    assert device_memory("auto") is None and device_memory("multiworker", 2) is None
    limit = tmp_path / "memory.max"
    limit.write_text("max\n")
    assert container_limit_bytes((str(limit),)) is None
    limit.write_text(f"{2 * GIB}\n")
    assert container_limit_bytes((str(limit),)) == 2 * GIB


def test_the_notebook_side_check_refuses_before_anything_is_built(tmp_path, monkeypatch):
    monkeypatch.setattr(device_memory_module, "physical_memory_bytes", lambda: 24 * GIB)
    monkeypatch.setattr(device_memory_module, "container_limit_bytes", lambda: None)
    cpu = types.SimpleNamespace(kind="cpu", replicas=1, description={"name": "AMD EPYC"}, multi_worker=None)
    huge = start_run("paradnn", params={**PARADNN.defaults, **HUGE_FC, "device": "cpu"},
                     results_path=tmp_path / "r.json")
    with pytest.raises(InsufficientMemoryError, match=r"training needs about 3\.94 TiB .* but the CPU host has 24 GiB"):
        huge.check_memory(cpu)
    assert not (tmp_path / "r.json").exists()
    small = start_run("paradnn", params={**PARADNN.defaults, "device": "cpu"}, results_path=tmp_path / "s.json")
    small.check_memory(cpu)  # the default model: 12 MiB, nothing said
    two_gpus = types.SimpleNamespace(kind="gpu", replicas=2, description={"name": "T4", "memory_gib": 16.0},
                                     multi_worker=None)
    assert setup_memory(two_gpus).copies == 1  # each GPU holds its own copy


@pytest.mark.notebook
def test_the_paradnn_notebook_refuses_a_model_far_too_large_in_its_set_up_cell(tmp_path):
    import papermill

    with pytest.raises(papermill.PapermillExecutionError) as raised:
        execute_notebook("paradnn", tmp_path, device="cpu", family="fc", layers=64, nodes=65536)
    assert raised.value.ename == "InsufficientMemoryError"
    assert "training needs about 3.94 TiB" in raised.value.evalue and "but the CPU host" in raised.value.evalue
    executed = json.loads((tmp_path / "paradnn.ipynb").read_text())
    failed = next(cell for cell in executed["cells"]
                  if any(output.get("output_type") == "error" for output in cell.get("outputs", [])))
    assert "run.check_memory(dev)" in "".join(failed["source"])  # before the model cell ran
    assert not (tmp_path / "record.json").exists()


def test_a_sweep_skips_a_model_far_too_large_before_anything_runs(tmp_path):
    """The sweep's planning asks the same estimate (colabkit.sweep.devices.too_large): the combination
    is skipped with the estimate and the memory named, and its record says InsufficientMemoryError."""
    from colabkit.sweep.devices import Inventory
    from colabkit.sweep.plan import plan
    from colabkit.sweep.decide import SweepAction, decide
    from colabkit.sweep.driver import run_sweep

    grid = tmp_path / "paradnn.yaml"
    grid.write_text(f"notebook: {NOTEBOOKS / 'paradnn.ipynb'}\ngrid:\n  device: [cpu]\n"
                    "fixed: {family: fc, layers: 64, nodes: 65536, steps: 5, epochs: 2}\n", encoding="utf-8")
    out = tmp_path / "out"
    host = DeviceMemory(24 * GIB, "the CPU host", 1, "test")
    inventory = Inventory({"cpu": 1}, known_memory={})
    inventory.known_memory[next(iter(plan([grid], out=out))).request] = host
    decision, = decide(plan([grid], out=out), out, inventory)
    assert decision.action == SweepAction.SKIP and decision.skip_type == "InsufficientMemoryError"
    assert "training needs about" in decision.reason and "the CPU host has 24 GiB" in decision.reason
    # A model that fits is not refused by the estimate (it is not run here either: only planned).
    small = tmp_path / "small.yaml"
    small.write_text(grid.read_text().replace("layers: 64, nodes: 65536", "layers: 2, nodes: 16"), encoding="utf-8")
    inventory.known_memory[next(iter(plan([small], out=out))).request] = host
    assert decide(plan([small], out=out), out, inventory)[0].action == SweepAction.RUN
    outcome, = run_sweep(plan([grid], out=out), available={"cpu": 1}, echo=lambda line: None)
    record = json.loads(outcome.record_path.read_text())
    assert record["status"] == "skipped" and record["error"]["type"] == "InsufficientMemoryError"
    assert outcome.too_large


def test_a_refused_model_needs_a_look_exit_1_an_absent_device_does_not(tmp_path, capsys, monkeypatch):
    """A model too large for a device that is here never runs there, whoever asks again (the notebook would
    refuse it too, as a failure): the sweep says so and exits 1 (docs/cli.md). An absent device's skip
    is the grid's design (each machine runs its share): exit 0."""
    from colabkit.cli import main

    big = tmp_path / "big.yaml"
    big.write_text(f"notebook: {NOTEBOOKS / 'paradnn.ipynb'}\ngrid:\n  device: [cpu]\n"
                   "fixed: {family: fc, layers: 64, nodes: 65536, steps: 5, epochs: 2}\n", encoding="utf-8")
    assert main(["sweep", str(big), "--out", str(tmp_path / "out"), "--no-progress"]) == 1
    printed = capsys.readouterr().out
    assert "too large: 1 combination(s) refused before they ran" in printed
    monkeypatch.setattr("colabkit.sweep.devices.detect_devices", lambda: {"cpu": 1})  # no child process
    absent = tmp_path / "absent.yaml"
    absent.write_text(big.read_text().replace("[cpu]", "[tpu]"), encoding="utf-8")
    assert main(["sweep", str(absent), "--out", str(tmp_path / "out2"), "--no-progress"]) == 0


def test_the_transformer_preset_spans_small_to_what_a_t4_and_a_v5e_hold():
    from helpers import REPO

    from colabkit.sweep.plan import plan

    memory = {"gpu": 15 * GIB, "tpu": 16 * GIB}  # a Colab T4; a TPU v5e chip's HBM
    estimates = {}
    for combination in plan([REPO / "parameters" / "paradnn.yaml"], "transformer"):
        params = combination.params
        assert params["family"] == "transformer" and params["mixed_precision"] != "none"
        assert memory_problem(PARADNN, params, memory[combination.device]) is None
        estimates.setdefault(combination.device, []).append(paradnn_memory({**PARADNN.defaults, **params}).total_bytes)
    for sizes in estimates.values():
        # from a few hundred MiB to about half the device: the estimate is a lower bound, so room is left
        assert sizes == sorted(sizes) and sizes[0] < GIB and 6 * GIB < sizes[-1] < 8 * GIB
    too_big = {"family": "transformer", "layers": 24, "width": 1024, "heads": 16, "length": 1024, "vocab": 32768,
               "batch_size": 16, "mixed_precision": "mixed_float16"}
    problem = memory_problem(PARADNN, too_big, 15 * GIB, where="the GPU")
    assert problem and "paradnn transformer layers=24 width=1024" in problem and "refused" in problem
