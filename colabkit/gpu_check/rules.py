"""The GPU check's verdict rules: measurements in, rows out, no device touched.

Every threshold is a named constant here, and docs/benchmarks.md states each rule. The measuring
code (stages, worker tasks) hands these functions plain figures, or an `Unavailable` saying why a
figure is missing: skipped (the machine lacks what it needs) or failed (the measurement broke).
That keeps every verdict testable with fake measurements.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from colabkit.device.peaks import PeakFlops, gpu_bandwidth, gpu_peak
from colabkit.gpu_check.rows import CheckRow, CheckVerdict
from colabkit.timing.agreement import Agreement


# A row for each verdict (the rules below make every row through these).
def passed(name: str, figure: str, rule: str, **values: Any) -> CheckRow:
    return CheckRow(name, CheckVerdict.PASS, figure, rule, values=values)


def failed(name: str, figure: str, rule: str, reason: str, **values: Any) -> CheckRow:
    return CheckRow(name, CheckVerdict.FAIL, figure, rule, reason, values=values)


def skipped(name: str, rule: str, reason: str, figure: str = "-", **values: Any) -> CheckRow:
    return CheckRow(name, CheckVerdict.SKIP, figure, rule, reason, values=values)


def judged(name: str, figure: str, rule: str, problems: Sequence[str], **values: Any) -> CheckRow:
    """PASS when `problems` is empty, else FAIL with every problem in the reason."""
    if problems:
        return failed(name, figure, rule, "; ".join(problems), **values)
    return passed(name, figure, rule, **values)


MATMUL_LOW, MATMUL_HIGH = 0.5, 1.05  # warm matmul TFLOPS / peak; above 1.05: a wrong clock or a wrong peak
CLOCK_LOW, CLOCK_HIGH = 0.95, 1.05  # colabkit.measure TFLOPS / pipelined TFLOPS (medians of interleaved rounds)
BANDWIDTH_LOW, BANDWIDTH_HIGH = 0.5, 1.05  # measured triad GB/s / the table's peak GB/s
AGREEMENT_LOW, AGREEMENT_HIGH = 0.95, 1.05  # notebook steady samples/s / bare Keras fit (medians)
SAMPLER_LOW, SAMPLER_HIGH = 0.98, 1.02  # samples/s with the energy meters / without them (medians)
MFU_MAX = 1.0  # model TFLOPS above the peak: a wrong FLOP count, clock or peak
FC_MIN_MFU = 0.05  # the compute-bound FC model below 5 % of peak: not on the GPU, or the peak is wrong
PEAK_PRECISIONS = ("float32", "tf32", "float16", "bfloat16")
FAST_FP16_CAPABILITY = (6, 0)  # P100 (6.0) on: float16 at least at twice the float32 rate
TENSOR_CORE_CAPABILITY = (7, 0)  # V100 on: float16 tensor cores (mixed precision pays)
AMPERE_CAPABILITY = (8, 0)  # A100 on: TF32 and bfloat16 tensor cores


@dataclass(frozen=True)
class Unavailable:
    """Why a measurement is missing: the row is SKIP, or FAIL when `failed` (it broke)."""

    reason: str
    failed: bool = False

    def row(self, name: str, rule: str, figure: str = "-") -> CheckRow:
        return (failed(name, figure, rule, self.reason) if self.failed else skipped(name, rule, self.reason, figure))


def outside(value: float, low: float, high: float, above: str, below: str) -> list[str]:
    """The problem with `value` against [low, high]: [above] over it, [below] under it, else none."""
    return [above] if value > high else [below] if value < low else []


def capability_text(capability: tuple[int, ...] | None) -> str:
    return ".".join(map(str, capability)) if capability else "unknown"


def has_capability(capability: tuple[int, ...] | None, needed: tuple[int, int]) -> bool:
    return capability is not None and tuple(capability) >= needed


@dataclass(frozen=True)
class GpuFacts:
    """The GPUs as nvidia-smi lists them, and as TensorFlow sees them (or why that is unknown)."""

    smi_names: tuple[str, ...]
    memory_gib: float | None = None
    driver: str | None = None
    compute_capability: tuple[int, int] | None = None
    tf_names: tuple[str, ...] | Unavailable = Unavailable("TensorFlow was not asked")

    @property
    def name(self) -> str:
        """The name notebooks divide by: TensorFlow's where it sees the GPU, else nvidia-smi's."""
        return self.tf_names[0] if isinstance(self.tf_names, tuple) and self.tf_names else self.smi_names[0]

    @property
    def count(self) -> int:
        return len(self.smi_names)

    @property
    def tf_sees_gpu(self) -> bool:
        return isinstance(self.tf_names, tuple) and bool(self.tf_names)


def _peak_source(name: str) -> str | None:
    peak = gpu_peak(name, "float32", 1)
    return peak.source if peak else None


def device_row(facts: GpuFacts) -> CheckRow:
    rule = ("TensorFlow sees every GPU nvidia-smi lists, under a name that finds the same peaks-table entry as "
            "nvidia-smi's")
    memory = f", {facts.memory_gib:g} GiB" if facts.memory_gib else ""
    figure = (f"{facts.smi_names[0]} x{facts.count}{memory}, driver {facts.driver or '?'}, compute capability "
              f"{capability_text(facts.compute_capability)}")
    if isinstance(facts.tf_names, Unavailable):
        return facts.tf_names.row("device", rule, figure)
    problems = []
    if len(facts.tf_names) != facts.count:
        problems.append(f"TensorFlow sees {len(facts.tf_names)} GPU(s) where nvidia-smi lists {facts.count} "
                        "(CUDA or cuDNN libraries missing: pip install 'colabkit[cuda]'; or CUDA_VISIBLE_DEVICES hides some)")
    if facts.tf_names and _peak_source(facts.tf_names[0]) != _peak_source(facts.smi_names[0]):
        problems.append(f"TensorFlow names it {facts.tf_names[0]!r}, nvidia-smi {facts.smi_names[0]!r}: they find "
                        "different peaks-table entries")
    return judged("device", figure, rule, problems, tensorflow_names=list(facts.tf_names),
                  nvidia_smi_names=list(facts.smi_names))


def expected_precisions(capability: tuple[int, ...]) -> set[str]:
    """The precisions a GPU of this compute capability has a fast path for, hence a peak."""
    expected = {"float32"}
    if has_capability(capability, FAST_FP16_CAPABILITY):
        expected.add("float16")
    if has_capability(capability, AMPERE_CAPABILITY):
        expected |= {"tf32", "bfloat16"}
    return expected


def peaks_row(name: str, capability: tuple[int, ...] | None) -> CheckRow:
    rule = ("the peaks table lists the GPU at float32, at float16 from compute capability 6.0, at TF32 and "
            "bfloat16 from 8.0, and at no precision the GPU lacks")
    peaks = {precision: gpu_peak(name, precision, 1) for precision in PEAK_PRECISIONS}
    listed = {precision: peak for precision, peak in peaks.items() if peak is not None}
    if "float32" not in listed:
        return skipped("peaks", rule, f"{name!r} is not in the peaks table (colabkit/device/peaks.py): fraction of "
                       "peak and MFU stay unknown on it; add its datasheet figures")
    figure = ", ".join(f"{precision} {peak.tflops_per_device:g}" for precision, peak in listed.items()) + " TFLOPS"
    values = {precision: peak.tflops_per_device for precision, peak in listed.items()}
    if capability is None:
        return skipped("peaks", rule, "compute capability unknown (neither TensorFlow nor nvidia-smi said): the "
                       "precisions listed cannot be checked", figure, **values)
    expected = expected_precisions(capability)
    problems = [f"no peak at {precision}, which compute capability {capability_text(capability)} computes in"
                for precision in PEAK_PRECISIONS if precision in expected and precision not in listed]
    problems += [f"a peak at {precision}, which compute capability {capability_text(capability)} lacks"
                 for precision in PEAK_PRECISIONS if precision in listed and precision not in expected]
    return judged("peaks", figure, rule, problems, source=listed["float32"].source, **values)


def bandwidth_row(name: str, memory_gib: float | None, measured: Mapping[str, Any] | Unavailable) -> CheckRow:
    """The table's bandwidth, cross-checked by a measured triad where both exist; measured alone
    where the table lacks the GPU; SKIP (unknown) where neither exists."""
    rule = (f"the table's GB/s, and a measured triad between {BANDWIDTH_LOW:g} and {BANDWIDTH_HIGH:g} of it "
            "(above: the table or the clock is wrong); without a table entry the measurement stands alone")
    table = gpu_bandwidth(name, 1, memory_gib)
    table_text = f"table {table.gb_per_s_per_device:,.0f} GB/s ({table.quality})" if table else "not in the table"
    if isinstance(measured, Unavailable):
        if measured.failed:
            return failed("bandwidth", table_text, rule, measured.reason)
        return skipped("bandwidth", rule, ("not cross-checked: " if table else "unknown: ") + measured.reason,
                       table_text)
    gb_s = float(measured["gb_per_s"])
    if table is None:
        return passed("bandwidth", f"measured {gb_s:,.0f} GB/s (not in the table: the measurement is a lower "
                      "bound)", rule, measured_gb_per_s=gb_s)
    fraction = gb_s / table.gb_per_s_per_device
    figure = f"{table_text}; measured {gb_s:,.0f} GB/s = {fraction:.2f} of it"
    problems = outside(fraction, BANDWIDTH_LOW, BANDWIDTH_HIGH,
                       f"measured {fraction:.2f} x the table: the table's figure is too low, or the clock stops "
                       "before the copy is done",
                       f"measured only {fraction:.2f} x the table: a wrong table entry, or a GPU throttled or shared")
    return judged("bandwidth", figure, rule, problems, table_gb_per_s=table.gb_per_s_per_device,
                  measured_gb_per_s=gb_s, fraction=fraction, source=table.source)


def clock_row(backend: str, comparisons: Sequence[Mapping[str, Any]] | Unavailable, judge: bool = True) -> CheckRow:
    """The clock's row on `backend`; not `judge`d on the CPU rehearsal (RAN: the figure, no verdict), where a
    single-product call's dispatch is no GPU's and the rule's 5 % says nothing."""
    name = f"clock {backend}"
    rule = (f"colabkit.measure's matmul TFLOPS / the pipelined TFLOPS (calls back to back, one wait), medians "
            f"of interleaved rounds, between {CLOCK_LOW:g} and {CLOCK_HIGH:g} at every precision")
    if isinstance(comparisons, Unavailable):
        return comparisons.row(name, rule)
    if not comparisons:
        return failed(name, "-", rule, "no measurement came back")
    ratios = {f"{c['dtype']}": float(c["ratio"]) for c in comparisons}
    figure = ", ".join(f"{dtype} {ratio:.3f}" for dtype, ratio in ratios.items())
    naive = max(float(c["unsynced_tflops"]) for c in comparisons)
    figure += f" (naive clock: {naive:,.0f} TFLOPS)" if naive >= 10 else f" (naive clock: {naive:.3g} TFLOPS)"
    if not judge:
        return CheckRow(name, CheckVerdict.RAN, figure, rule, "measured on the CPU (the device run's rehearsal): the rule is a "
                   "GPU's, not applied", values={"comparisons": [dict(c) for c in comparisons]})
    problems = [problem for dtype, ratio in ratios.items() for problem in outside(
        ratio, CLOCK_LOW, CLOCK_HIGH, f"{dtype}: {ratio:.3f} (the clock stops before the device is done)",
        f"{dtype}: {ratio:.3f} (the clock adds more than {1 - CLOCK_LOW:.0%} to each call)")]
    return judged(name, figure, rule, problems, comparisons=[dict(c) for c in comparisons])


def matmul_row(precision: str, comparison: Mapping[str, Any] | Unavailable, peak: PeakFlops | None) -> CheckRow:
    name = f"matmul {precision}"
    rule = f"warm TFLOPS at n = 8192 between {MATMUL_LOW:g} and {MATMUL_HIGH:g} of the table's {precision} peak"
    if isinstance(comparison, Unavailable):
        return comparison.row(name, rule)
    tflops = float(comparison["tflops"])
    values = {"tflops": tflops, "n": comparison["n"], "products": comparison["products"]}
    if peak is None:
        return skipped(name, rule, f"no {precision} peak in the table for this GPU", f"{tflops:,.1f} TFLOPS", **values)
    fraction = tflops / peak.tflops
    figure = f"{tflops:,.1f} TFLOPS = {fraction:.2f} of {peak.tflops:g}"
    problems = outside(fraction, MATMUL_LOW, MATMUL_HIGH,
                       f"{fraction:.2f} of the peak: a wrong clock, or a wrong peak (or {precision} ran on a faster "
                       "path than it names)",
                       f"only {fraction:.2f} of the peak: a wrong peak, a throttled or shared GPU, or a slow path")
    return judged(name, figure, rule, problems, fraction=fraction, peak_tflops=peak.tflops, **values)


def _median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def training_row(model: str, variant: str, fits: Sequence[Mapping[str, Any]] | Unavailable, *,
                 expect_jit: bool, mixed: bool = False, min_mfu: float | None = None,
                 agreement: Agreement | Unavailable | None = None, notebook_jit: bool | None = None) -> CheckRow:
    """A bare Keras fit of the notebook's model in one variant (XLA on or off, mixed precision), and
    for the notebook's own variant its agreement with the notebook's headline."""
    name = f"{model} {variant}"
    rule = (f"steady samples/s and model TFLOPS > 0, MFU <= {MFU_MAX:g}"
            + (f" and >= {min_mfu:g}" if min_mfu else "") + f"; Keras's jit_compile is {expect_jit}"
            + ("; computes in float16 or bfloat16" if mixed else "")
            + (f"; notebook steady samples/s / bare fit between {AGREEMENT_LOW:g} and {AGREEMENT_HIGH:g} (medians of "
               "interleaved rounds), both compiled alike" if agreement is not None else ""))
    if isinstance(fits, Unavailable):
        return fits.row(name, rule)
    if not fits:
        return failed(name, "-", rule, "no fit came back")
    rate = _median([float(fit["samples_per_s"]) for fit in fits])
    tflops = [float(fit["model_tflops"]) for fit in fits if fit.get("model_tflops") is not None]
    mfus = [float(fit["mfu"]) for fit in fits if fit.get("mfu") is not None]
    mfu = _median(mfus) if mfus else None
    figure = f"{rate:,.0f} samples/s, {(_median(tflops) if tflops else 0):,.2f} model TFLOPS, "
    figure += f"MFU {mfu:.1%}" if mfu is not None else f"MFU unknown ({fits[0].get('mfu_reason')})"
    problems = []
    if not rate > 0 or not tflops or not min(tflops) > 0:
        problems.append("no positive steady throughput")
    if mfu is not None and mfu > MFU_MAX:
        problems.append(f"MFU {mfu:.2f} > {MFU_MAX:g}: a wrong FLOP count, clock or peak")
    if mfu is not None and min_mfu is not None and mfu < min_mfu:
        problems.append(f"MFU {mfu:.1%} < {min_mfu:.0%} on a compute-bound model: not on the GPU, or a wrong peak")
    jit = {fit.get("jit_compile") for fit in fits}
    if jit != {expect_jit}:
        problems.append(f"Keras compiled with jit_compile={sorted(map(str, jit))}, expected {expect_jit}")
    dtypes = {fit.get("compute_dtype") for fit in fits}
    if mixed and not dtypes <= {"float16", "bfloat16"}:
        problems.append(f"mixed precision computed in {sorted(map(str, dtypes))}")
    values: dict[str, Any] = {"samples_per_s": rate, "mfu": mfu, "fits": [dict(fit) for fit in fits]}
    if isinstance(agreement, Unavailable):
        problems.append(agreement.reason)
    elif agreement is not None:
        figure += f"; notebook/bare {agreement.describe()}"
        values["agreement"] = agreement.as_dict()
        if not agreement.within(AGREEMENT_LOW, AGREEMENT_HIGH):
            problems.append(f"the notebook's headline is {agreement.ratio:.3f} x the bare fit's")
        if notebook_jit is not None and {notebook_jit} != jit:
            problems.append(f"the notebook compiled with jit_compile={notebook_jit}, the bare fit with "
                            f"{', '.join(sorted(map(str, jit)))}: they did different work")
    if not problems and min_mfu is not None and mfu is None:
        # the check that tells "on the GPU" from "not" could not run: not a pass
        return skipped(name, rule, f"MFU unknown ({fits[0].get('mfu_reason')}): the compute-bound check could "
                       "not run; the other checks held", figure, **values)
    return judged(name, figure, rule, problems, **values)


def energy_row(energy: Mapping[str, Any] | Unavailable, sampler: Agreement | None) -> CheckRow:
    """NVML's energy of the steady epochs of the compute-bound FC fit (the board's energy counter where it has one,
    with the power sampled beside it for comparison, shown and not judged), and the meters' own cost."""
    rule = (f"energy per epoch > 0; idle power < mean power <= the board's enforced limit; samples/s with the "
            f"energy meters / without them between {SAMPLER_LOW:g} and {SAMPLER_HIGH:g} (medians of interleaved "
            f"rounds)")
    if isinstance(energy, Unavailable):
        return energy.row("nvml energy", rule)
    joules, watts = energy.get("energy_j_per_epoch"), energy.get("mean_power_w")
    idle, limit = float(energy["idle_w"]), float(energy["limit_w"])
    method = f" ({energy['energy_method']})" if energy.get("energy_method") else ""
    figure = (f"{joules:,.1f} J/epoch{method}, {watts:,.0f} W (idle {idle:,.0f} W, limit {limit:,.0f} W)"
              if joules is not None and watts is not None else f"no energy (idle {idle:,.0f} W, limit {limit:,.0f} W)")
    sampled = energy.get("sampled_j_per_epoch")
    if energy.get("energy_method") == "counter" and sampled is not None and joules:
        figure += f"; power sampled beside it: {sampled:,.1f} J/epoch ({sampled / joules - 1:+.1%})"
    problems = []
    if joules is None or watts is None:
        problems.append(f"no energy figure: {energy.get('energy_reason')}")
    else:
        if not joules > 0:
            problems.append(f"energy per epoch {joules} J is not > 0")
        if not idle < watts <= limit:
            problems.append(f"mean power {watts:,.0f} W is not between idle {idle:,.0f} W and the limit {limit:,.0f} W")
    if sampler is None:
        problems.append("the energy meters' cost was not measured")
    else:
        figure += f"; with/without the meters {sampler.describe()}"
        if not sampler.within(SAMPLER_LOW, SAMPLER_HIGH):
            problems.append(f"the energy meters change samples/s by {sampler.ratio - 1:+.1%}")
    return judged("nvml energy", figure, rule, problems, **dict(energy),
                  sampler=sampler.as_dict() if sampler else None)


def _run_problems(runs: Sequence[Mapping[str, Any]], expected_devices: Sequence[str]) -> list[str]:
    problems = [f"{run['notebook']} on {run['device']}: {run['status']}: {run.get('message') or 'no message'}"
                for run in runs if run["status"] != "ok"]
    for notebook in sorted({run["notebook"] for run in runs}):
        present = {run["device"] for run in runs if run["notebook"] == notebook}
        problems += [f"{notebook} did not run on {device}" for device in expected_devices if device not in present]
    return problems


def sweep_row(runs: Sequence[Mapping[str, Any]] | Unavailable, report_kinds: Sequence[str] | Unavailable) -> CheckRow:
    """One smoke combination of every notebook on the GPU and on the CPU, and a report of both."""
    rule = "every notebook's smoke run gives an ok record on gpu and on cpu; the report lists GPU runs beside CPU runs"
    if isinstance(runs, Unavailable):
        return runs.row("sweep gpu", rule)
    notebooks = sorted({run["notebook"] for run in runs})
    ok = sum(run["status"] == "ok" for run in runs)
    figure = f"{ok}/{len(runs)} ok ({len(notebooks)} notebooks x gpu, cpu)"
    problems = _run_problems(runs, ("gpu", "cpu")) if runs else ["no notebook ran"]
    if isinstance(report_kinds, Unavailable):
        problems.append(f"the report: {report_kinds.reason}")
    else:
        figure += f"; report with {', '.join(sorted(report_kinds)).upper() or 'nothing'}"
        problems += [f"the report lists no {kind.upper()} run" for kind in ("gpu", "cpu") if kind not in report_kinds]
    return judged("sweep gpu", figure, rule, problems, runs=[dict(run) for run in runs])


def multi_gpu_row(runs: Sequence[Mapping[str, Any]] | Unavailable) -> CheckRow:
    rule = "every notebook's smoke run on gpu:2 gives an ok record with 2 replicas under MirroredStrategy"
    if isinstance(runs, Unavailable):
        return runs.row("sweep gpu:2", rule)
    problems = _run_problems(runs, ("gpu:2",)) if runs else ["no notebook ran"]
    problems += [f"{run['notebook']}: {run.get('replicas')} replica(s) under {run.get('strategy')}"
                 for run in runs if run["status"] == "ok" and (run.get("replicas") != 2
                                                               or "Mirrored" not in str(run.get("strategy")))]
    figure = f"{sum(run['status'] == 'ok' for run in runs)}/{len(runs)} ok on 2 GPUs"
    return judged("sweep gpu:2", figure, rule, problems, runs=[dict(run) for run in runs])


def backend_row(backend: str, run: Mapping[str, Any] | Unavailable) -> CheckRow:
    """The CNN notebook on Keras's `backend`, on the GPU, through the sweep."""
    name = f"backend {backend}"
    rule = f"the CNN notebook with backend {backend} on gpu gives an ok record, on the GPU, with steady samples/s > 0"
    if isinstance(run, Unavailable):
        return run.row(name, rule)
    rate = run.get("samples_per_s")
    figure = f"{rate:,.0f} samples/s on {run.get('device_name')}" if rate else str(run["status"])
    problems = _run_problems([run], ("gpu",))
    if run["status"] == "ok":
        if run.get("device_kind") != "gpu":
            problems.append(f"the record says it ran on {run.get('device_kind')!r}")
        if run.get("backend") != backend:
            problems.append(f"the record says backend {run.get('backend')!r}")
        if not rate or not rate > 0:
            problems.append("no steady samples/s")
    return judged(name, figure, rule, problems, run=dict(run))
