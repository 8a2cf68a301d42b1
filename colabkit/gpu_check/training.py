"""The GPU check's training stages: the CNN and a compute-bound ParaDnn FC model, each trained bare
(colabkit.training.bare_fit, in the TensorFlow worker) with XLA on, XLA off and mixed precision,
and in the notebook's own variant (Keras's automatic XLA on one GPU, float32) against the notebook
run through the sweep, in interleaved rounds: notebook, bare fit (, bare fit with the NVML sampler),
notebook, ... Each side's figure is the median of its rounds (colabkit.timing.agreement). The other
variants run once each: their rules bound figures, they compare no two clocks. The notebook's run is its grid
file's `gpu_check_fit` preset, whose parameters (model, batch, epochs) the bare fits take too.
"""

from __future__ import annotations

import math
from typing import Any

from colabkit.gpu_check.notebook_runs import preset_plan, run_plan
from colabkit.gpu_check.rows import CheckRow
from colabkit.gpu_check.rules import (
    AMPERE_CAPABILITY,
    FC_MIN_MFU,
    TENSOR_CORE_CAPABILITY,
    Unavailable,
    energy_row,
    has_capability,
    training_row,
)
from colabkit.gpu_check.stages import REQUEST_TIMEOUT_S, Context
from colabkit.timing.agreement import Agreement, interleave

PRESET = "gpu_check_fit"  # the notebook's run, in cnn_mnist.yaml and paradnn.yaml: its epochs' first left out
CNN_FALLBACK_SAMPLES = 60_000  # MNIST's training set, for bare fits when the notebook gave no count
FC_KNOBS = ("layers", "nodes", "input_size", "output_size")  # the FC model's shape, as the preset gives it
FC_EPOCH_S = 0.5  # steps per epoch are sized for epochs of about this long at the measured matmul rate
FC_STEPS_MIN, FC_STEPS_MAX, FC_STEPS_UNSIZED = 5, 400, 50
VARIANTS = ("xla", "no-xla", "mixed")


def fc_steps(matmul_tflops: float | None, params: dict[str, Any]) -> int:
    """Steps per FC epoch of the model `params` give: its training FLOPs per step (3 x 2 x batch x the Dense
    weights: for sizing only; the rows count FLOPs with colabkit.training.flops) at the float32 matmul rate this GPU
    just measured, for epochs of about FC_EPOCH_S."""
    if not matmul_tflops:
        return FC_STEPS_UNSIZED
    nodes, layers = params["nodes"], params["layers"]
    weights = params["input_size"] * nodes + (layers - 1) * nodes * nodes + nodes * params["output_size"]
    step_s = 6.0 * params["batch_size"] * weights / (matmul_tflops * 1e12)
    return min(FC_STEPS_MAX, max(FC_STEPS_MIN, math.ceil(FC_EPOCH_S / step_s)))


def mixed_policy(capability: tuple[int, ...] | None) -> str | Unavailable:
    if has_capability(capability, AMPERE_CAPABILITY):
        return "mixed_bfloat16"
    if has_capability(capability, TENSOR_CORE_CAPABILITY):
        return "mixed_float16"
    shown = ".".join(map(str, capability)) if capability else "unknown"
    return Unavailable(f"compute capability {shown} has no tensor cores: mixed precision does not pay there")


class _Model:
    """One model's runs: its notebook through the sweep and its bare fits in the worker."""

    def __init__(self, ctx: Context, model: str) -> None:
        self.ctx, self.model = ctx, model
        self.notebook = "cnn_mnist" if model == "cnn" else "paradnn"
        [planned] = preset_plan(PRESET, ctx.out, notebooks=(self.notebook,))
        self.params = planned.params  # the preset's: the bare fits train the same model, batch and epochs
        precision = "tf32" if ctx.tf32_capable else "float32"
        self.overrides = {"steps": fc_steps(ctx.matmul_tflops.get(precision), self.params)} if model == "fc" else {}
        self.samples = CNN_FALLBACK_SAMPLES
        self.notebook_runs: list[dict[str, Any]] = []

    def run_notebook(self, round_index: int) -> float | None:
        runs = preset_plan(PRESET, self.ctx.out / "train" / self.model / f"round-{round_index + 1}",
                           overrides=self.overrides, notebooks=(self.notebook,))
        [run] = run_plan(runs, self.ctx.available, self.ctx.log)
        self.notebook_runs.append(run)
        if self.model == "cnn" and run.get("samples_per_epoch"):
            self.samples = int(run["samples_per_epoch"])  # the bare fit trains on as many samples
        return float(run["samples_per_s"]) if run["status"] == "ok" and run.get("samples_per_s") else None

    def fit(self, jit_compile: str | bool = "auto", policy: str = "float32", energy: bool = False) -> dict[str, Any]:
        fc = self.model == "fc"
        return self.ctx.request("fit", REQUEST_TIMEOUT_S, model=self.model, jit_compile=jit_compile, policy=policy,
                                batch_size=self.params["batch_size"], epochs=self.params["epochs"],
                                gpu_name=self.ctx.facts.name, tf32_capable=self.ctx.tf32_capable,
                                samples=self.samples, steps=self.overrides.get("steps", 0),
                                knobs={knob: self.params[knob] for knob in FC_KNOBS} if fc else {}, energy=energy)

    def agreement(self, notebook_rates: list[float | None], bare: list[dict[str, Any]]) -> Agreement | Unavailable:
        broken = [run for run in self.notebook_runs if run["status"] != "ok" or not run.get("samples_per_s")]
        if broken:
            first = broken[0]
            return Unavailable(f"the {self.notebook} notebook on gpu: {first['status']}: "
                               f"{first.get('message') or 'no steady samples/s'} ({first.get('record')})", failed=True)
        return Agreement(tuple(float(rate) for rate in notebook_rates if rate),
                         tuple(float(fit["samples_per_s"]) for fit in bare))


def _energy(ctx: Context, metered: list[dict[str, Any]], bare: list[dict[str, Any]]) -> CheckRow:
    if isinstance(ctx.power, Unavailable):
        return energy_row(ctx.power, None)
    meters = [fit["energy"] or {} for fit in metered]
    per_epoch = [m["energy_j_per_epoch"] for m in meters if m.get("energy_j_per_epoch") is not None]
    power = [m["mean_power_w"] for m in meters if m.get("mean_power_w") is not None]
    complete = len(per_epoch) == len(meters) and len(power) == len(meters)
    reasons = [m.get("energy_reason") for m in meters if m.get("energy_reason")]
    sampled = [(fit.get("energy_sampled") or {}).get("energy_j_per_epoch") for fit in metered]
    figures = {"energy_j_per_epoch": sorted(per_epoch)[len(per_epoch) // 2] if complete else None,
               "mean_power_w": sorted(power)[len(power) // 2] if complete else None,
               "idle_w": ctx.power["idle_w"], "limit_w": ctx.power["limit_w"],
               "energy_reason": reasons[0] if reasons else None,
               "energy_method": meters[0].get("energy_method") if meters else None,
               "sampled_j_per_epoch": sorted(sampled)[len(sampled) // 2] if sampled and None not in sampled else None}
    sampler = Agreement(tuple(fit["samples_per_s"] for fit in metered), tuple(fit["samples_per_s"] for fit in bare))
    return energy_row(figures, sampler)


def train_stage(ctx: Context, model: str) -> list[CheckRow]:
    """The rows of `model` ("cnn" or "fc"): xla (with the notebook agreement), no-xla, mixed; for the
    FC model also the NVML energy row (its sampler's cost measured in the same rounds)."""
    min_mfu = FC_MIN_MFU if model == "fc" else None
    with_energy = model == "fc"
    if ctx.tf_reason:
        rows = [training_row(model, variant, ctx.tf_reason, expect_jit=variant != "no-xla") for variant in VARIANTS]
        return rows + ([energy_row(ctx.tf_reason, None)] if with_energy else [])
    runs = _Model(ctx, model)
    metering = with_energy and not isinstance(ctx.power, Unavailable)
    sides = [runs.run_notebook, lambda _: runs.fit()]
    if metering:
        sides.append(lambda _: runs.fit(energy=True))
    results = interleave(sides, ctx.rounds, on_round=lambda index, _: ctx.echo(
        f"  {model}: round {index + 1} of {ctx.rounds} done"))
    notebook_rates, bare = results[0], results[1]
    notebook_jit = next((run.get("jit_compile") for run in runs.notebook_runs if run["status"] == "ok"), None)
    rows = [training_row(model, "xla", bare, expect_jit=True, min_mfu=min_mfu,
                         agreement=runs.agreement(notebook_rates, bare), notebook_jit=notebook_jit)]
    rows.append(training_row(model, "no-xla", [runs.fit(jit_compile=False)], expect_jit=False, min_mfu=min_mfu))
    policy = mixed_policy(ctx.facts.compute_capability)
    mixed: list[dict[str, Any]] | Unavailable = policy if isinstance(policy, Unavailable) else [runs.fit(policy=policy)]
    rows.append(training_row(model, "mixed", mixed, expect_jit=True, mixed=True, min_mfu=min_mfu))
    if with_energy:
        rows.append(_energy(ctx, results[2], bare) if metering else energy_row(ctx.power, None))
    return rows
