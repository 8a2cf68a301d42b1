"""`sweep --dry-run`'s wall-time estimate (colabkit.sweep.estimate): a fixed cost per run from the
benchmark's model plus the declarations' FLOPs at a speed, and the paper presets' stated estimates."""

from __future__ import annotations

import pytest
from helpers import REPO

from colabkit.cli import main
from colabkit.experiments import get
from colabkit.experiments.paradnn import FAMILY_KNOBS
from colabkit.sweep import estimate
from colabkit.sweep.estimate import FIXED_COST_S, NEW_KERNEL_S, accelerator_speed, estimate_plan
from colabkit.sweep.grids import load_grid
from colabkit.sweep.plan import plan

GRID = REPO / "parameters" / "paradnn.yaml"
SPEED = {"cpu": (1e11, "a test speed"), "gpu": (1e13, "a test GPU"), "tpu": None}


def test_a_run_costs_its_fixed_cost_plus_its_declared_flops_at_the_speed():
    combinations = plan([GRID], "smoke", "cpu")
    paradnn = get("paradnn")
    flops = sum(paradnn.work_flops({**paradnn.defaults, **c.params}) for c in combinations)
    fresh = estimate_plan(plan([GRID], "smoke", "cpu", kernels="fresh"), SPEED)
    assert fresh.fixed_s == pytest.approx(len(combinations) * FIXED_COST_S["fresh"])
    assert fresh.work_s == pytest.approx(flops / 1e11) and fresh.seconds == fresh.fixed_s + fresh.work_s
    warm = estimate_plan(combinations, SPEED)  # the grid asks for warm kernels: one kernel, one new start
    assert warm.kernels == 1 and warm.fixed_s == pytest.approx(len(combinations) * FIXED_COST_S["reuse"] + NEW_KERNEL_S)
    assert any("a test speed" in line for line in warm.lines())
    # an FC smoke model: 3 x forward FLOPs x batch x steps x epochs
    fc = {**paradnn.defaults, "family": "fc", "layers": 2, "nodes": 64, "input_size": 256, "output_size": 16,
          "batch_size": 32, "steps": 5, "epochs": 3, "device": "cpu:2"}
    forward = (2 * 256 * 64 + 64) + (2 * 64 * 64 + 64) + (2 * 64 * 16 + 16)
    assert paradnn.work_flops(fc) == 3 * forward * 32 * 2 * 5 * 3  # two replicas, each a batch of 32


def test_runs_without_flops_or_a_known_speed_count_their_fixed_cost_and_are_named(tmp_path):
    cnn = plan([REPO / "parameters" / "cnn_mnist.yaml"], "smoke", "cpu")
    tpu = plan([GRID], "smoke", "tpu")
    result = estimate_plan([*cnn, *tpu], SPEED)
    assert result.work_s == 0 and result.without_work == len(cnn) and result.unknown_speed == len(tpu)
    text = "\n".join(result.lines())
    assert f"{len(cnn)} run(s) have no FLOP count" in text and f"{len(tpu)} run(s) on a device whose speed" in text


def test_the_dry_run_prints_the_estimate_and_what_it_rests_on(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(estimate, "cpu_speed", lambda: (2e11, "200 GFLOPS, a test's"))
    assert main(["sweep", str(GRID), "--preset", "smoke", "--device", "cpu", "--dry-run", "--out",
                 str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    assert "estimated wall time:" in printed and "for 9 run(s)" in printed
    assert "speed on cpu: 200 GFLOPS, a test's" in printed and "benchmarks/sweep_overhead.py" in printed
    assert not (tmp_path / "out").exists()


# The devices the paper presets' descriptions state an estimate for: label -> (kind, name in the peaks table).
PAPER_DEVICES = {"T4": ("gpu", "Tesla T4"), "A100": ("gpu", "NVIDIA A100-SXM4-40GB"), "TPU v5e": ("tpu", "v5litepod-1")}


def rough(seconds: float) -> str:
    """A duration as a preset's description states it: '~40 min', '~22 h', '~15 days'."""
    if seconds < 3600:
        return f"~{max(1, round(seconds / 60))} min"
    if seconds < 48 * 3600:
        return f"~{round(seconds / 3600)} h"
    return f"~{round(seconds / 86400)} days"


def paper_estimate(runs) -> str:
    """What a paper preset's description states: the wall time of its runs on each of PAPER_DEVICES with
    warm kernels, the work at the peaks table's figure (so a lower bound), labelled as estimates."""
    parts = []
    for label, (kind, name) in PAPER_DEVICES.items():
        mine = [combination for combination in runs if combination.request.kind == kind]
        seconds = estimate_plan(mine, {kind: accelerator_speed(kind, "float32", name)}).seconds
        parts.append(f"{label} {rough(seconds)}")
    return ("estimated per device at the peaks table's figure (a lower bound) with warm kernels: "
            + ", ".join(parts))


@pytest.mark.parametrize("preset", ["paper", "paper_cnn", "paper_rnn"])
def test_each_paper_preset_states_its_estimate_for_a_t4_an_a100_and_a_tpu_v5e(preset):
    """The descriptions are recomputed here: a change of the grid, the peaks or the fixed cost shows."""
    description = load_grid(GRID).presets[preset].description
    stated = paper_estimate(plan([GRID], preset, kernels="reuse"))
    assert stated in description, f"parameters/paradnn.yaml presets.{preset}: state {stated!r}"
    assert all(device in stated for device in ("T4", "A100", "TPU v5e"))


def test_the_knobs_of_each_family_are_counted_in_its_flops():
    paradnn = get("paradnn")
    for family, knobs in FAMILY_KNOBS.items():
        base = {**paradnn.defaults, "family": family}
        for knob in knobs:
            if knob == "block":
                changed = {**base, knob: "bottleneck"}
            elif knob == "cell":
                changed = {**base, knob: "gru"}
            else:
                changed = {**base, knob: base[knob] * 2}
            if (family, knob) == ("transformer", "heads"):  # H x Q = width: more heads, each narrower, same FLOPs
                assert paradnn.work_flops(changed) == paradnn.work_flops(base)
                continue
            assert paradnn.work_flops(changed) != paradnn.work_flops(base), (family, knob)


def test_every_committed_grid_gets_an_estimate_from_its_declaration():
    # each declaration's work_flops reads its own parameter names: a renamed parameter must not
    # leave the dry run a KeyError (matmul's `repeats` became `timed_calls`)
    for grid in sorted((REPO / "parameters").glob("*.yaml")):
        for preset in (None, "smoke"):
            combinations = plan([grid], preset, "cpu")
            result = estimate_plan(combinations, SPEED)
            assert result.seconds > 0, (grid.name, preset)
            experiment = get(combinations[0].name)
            if experiment.work_flops is not None:
                assert experiment.work_flops({**experiment.defaults, **combinations[0].params}) > 0, grid.name


def test_the_cpu_speed_is_the_matmul_notebooks_numpy_baseline_timed_here():
    """One calibration of NumPy's matrix product: colabkit.timing.baseline's, in a clean child process."""
    estimate.cpu_speed.cache_clear()
    flops, source = estimate.cpu_speed()
    assert 1e8 < flops < 1e14 and "NumPy float32 1024 x 1024 matrix product timed here" in source
