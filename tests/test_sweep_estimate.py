"""`sweep --dry-run`'s wall-time estimate (colabkit.sweep.estimate): a fixed cost per run from the
benchmark's model plus the declarations' FLOPs at a speed, and the paper presets' stated estimates."""

from __future__ import annotations

from types import SimpleNamespace

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


def test_runs_without_flops_or_a_known_speed_are_not_estimated_and_say_why(tmp_path):
    cnn = plan([REPO / "parameters" / "cnn_mnist.yaml"], "smoke", "cpu")
    tpu = plan([GRID], "smoke", "tpu")
    result = estimate_plan([*cnn, *tpu], SPEED)
    assert result.seconds == 0 and result.without_work == len(cnn) and result.unknown_speed == len(tpu)
    text = "\n".join(result.lines())
    assert text.startswith(f"estimated wall time: cannot estimate the {len(cnn) + len(tpu)} run(s)\n")
    assert f"cannot estimate {len(cnn)} run(s): their declaration counts no FLOPs" in text
    assert f"cannot estimate {len(tpu)} run(s): their device's speed is not known here" in text
    paradnn = estimate_plan([*plan([GRID], "smoke", "cpu"), *cnn], SPEED)  # a part estimated: it says of how many
    assert paradnn.lines()[0].startswith(f"estimated wall time: ~") and f"for {paradnn.runs - len(cnn)} of " \
        f"{paradnn.runs} run(s)" in paradnn.lines()[0] and "(and the runs it cannot estimate)" in paradnn.lines()[0]


def cnn_record(combination, wall_s: float | None, status: str = "ok") -> dict:
    """The parts of a record `earlier_runs` reads: an earlier run of `combination` that took `wall_s` on the sweep."""
    return {"notebook": combination.name, "status": status, "params": combination.notebook_params,
            "kernel": {"mode": combination.settings.kernels}, "sweep": {} if wall_s is None else {"wall_s": wall_s}}


def test_a_run_timed_before_in_the_output_folder_costs_the_median_of_those_wall_times(tmp_path, monkeypatch):
    """The issue-58 case: the CNN (no FLOP count) took 25-37 s a run, where the fixed cost said ~8 s."""
    cnn = plan([REPO / "parameters" / "cnn_mnist.yaml"], "smoke", "cpu")
    train_256 = [c for c in cnn if c.params["mode"] == "train" and c.params["batch_size"] == 256]
    first, repeats = train_256[0], train_256[1:]  # the first runs the bottleneck passes (bottlenecks: first)
    records = {f"r{i}.json": cnn_record(repeats[0], wall) for i, wall in enumerate((25.0, 37.0, 31.0))}
    records["failed.json"] = cnn_record(repeats[0], 1.0, status="failed")  # a failed run times nothing
    records["older.json"] = cnn_record(repeats[0], None)  # written before sweep.wall_s: times nothing
    monkeypatch.setattr(estimate, "load_records", lambda out: SimpleNamespace(records=records))
    earlier = estimate.earlier_runs(tmp_path)
    assert list(earlier.values()) == [[25.0, 37.0, 31.0]]
    result = estimate_plan(train_256, SPEED, earlier)  # the repeats: each as long as the median, 31 s
    assert (result.measured, result.measured_s, result.without_work) == (len(repeats), 31.0 * len(repeats), 1)
    assert result.run_seconds[1:] == [31.0] * len(repeats)
    assert result.lines()[0] == (f"estimated wall time: ~1 min 2 s for 2 of 3 run(s) = timed before ~1 min 2 s "
                                 "(and the runs it cannot estimate)")
    records["first.json"] = cnn_record(first, 40.0)  # with the passes: it times the first alone
    both = estimate_plan(train_256, SPEED, estimate.earlier_runs(tmp_path))
    assert (both.measured, both.measured_s, both.not_estimated) == (3, 40.0 + 62.0, 0)
    assert both.lines()[0] == "estimated wall time: ~1 min 42 s for 3 run(s) = timed before ~1 min 42 s"
    others = estimate_plan(cnn, SPEED, estimate.earlier_runs(tmp_path))  # batch 512, inference: other work
    assert (others.measured, others.without_work) == (len(train_256), len(cnn) - len(train_256))
    fresh = plan([REPO / "parameters" / "cnn_mnist.yaml"], "smoke", "cpu", kernels="fresh")
    assert estimate_plan(fresh, SPEED, estimate.earlier_runs(tmp_path)).measured == 0  # warm runs time no fresh one


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
            experiment = get(combinations[0].name)
            if experiment.work_flops is not None:
                assert result.seconds > 0 and result.not_estimated == 0, (grid.name, preset)
                assert experiment.work_flops({**experiment.defaults, **combinations[0].params}) > 0, grid.name
            else:  # no FLOPs and no earlier run: not estimated, and said so
                assert result.seconds == 0 and result.without_work == result.runs, (grid.name, preset)


def test_the_cpu_speed_is_the_matmul_notebooks_numpy_baseline_timed_here():
    """One calibration of NumPy's matrix product: colabkit.timing.baseline's, in a clean child process."""
    estimate.cpu_speed.cache_clear()
    flops, source = estimate.cpu_speed()
    assert 1e8 < flops < 1e14 and "NumPy float32 1024 x 1024 matrix product timed here" in source
