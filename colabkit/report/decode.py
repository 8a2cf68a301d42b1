"""The report's decode section (docs/decode.md): every run in decode mode. Per device, model and batch size x prompt
length, time to first token, time per output token and output tokens/s, each the median over independent runs with
its distribution-free interval (colabkit.statistics.median_ci, as colabkit.report.runs gives every headline); how
TPOT grows with the cache and tokens/s with the batch; beside the bytes a step must read (the model's) the bytes the
compiled step accesses (XLA's cost analysis, as the compiler's FLOPs stand beside the model's in training), with a
warning where it moves far more or copies a whole cache; and each device's roofline (colabkit.plots.draw_roofline, as
the ParaDnn section's) with its prefill points under the compute ceiling and its decode steps under the bandwidth's.
Training and inference sections never see these runs (ReportData.runs)."""

from __future__ import annotations

from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from colabkit.plots import draw_roofline
from colabkit.report.records import ReportData
from colabkit.report.section import ReportFigure, ReportTable, Section
from colabkit.statistics import median_ci
from colabkit.training.roofline import known

DECODE = "decode"
# The figures given per combination: the median over runs with its interval (a row's field, its column's name).
WITH_INTERVALS = {"ttft_ms": "ttft_ms", "tpot_p50_ms": "tpot_ms", "tokens_per_s": "tokens_per_s"}
# The medians over runs alone (each run's check of achieved against the bandwidth is kept: `within_bandwidth`).
MEDIANS = ("tpot_p90_ms", "achieved_gb_s", "step_bytes", "compiler_step_bytes", "compiler_bytes_ratio", "compiler_gb_s",
           "cache_bytes", "flops_per_token", "decode_tflops", "decode_intensity", "prefill_tflops", "prefill_intensity",
           "peak_tflops", "bandwidth_gb_s")
# The compiled step's bytes over the model's beyond which the report warns (colabkit/training/compiler_flops.py's
# band's upper end): the compiled step moves what the model does not need, a copy of its cache, say.
COMPILER_BYTES_WARN_RATIO = 1.25


def decode_rows(data: ReportData) -> pd.DataFrame:
    """One row per counted decode run and measured batch size x prompt length: the run's device, model (its
    combination) and repeat, and the record's `decode.rows` entry. Refused combinations are left out."""
    rows = []
    for _, run in data.runs(None, mode=DECODE).iterrows():
        section = data.record(run["path"]).get(DECODE) or {}
        for entry in section.get("rows") or []:
            if not entry.get("refused"):
                rows.append({"device": run["device_label"], "model": run["combination"], "run": run["path"],
                             **{key: value for key, value in entry.items() if key != "step_ms"}})
    return pd.DataFrame(rows)


def decode_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per device, model, batch and prompt length: `runs`, the median over runs of TTFT, TPOT (p50) and tokens/s with
    the interval's `_low`, `_high` and `_level` (none below 3 runs), the medians of MEDIANS, and whether every run's
    achieved GB/s stayed within the device's bandwidth (`within_bandwidth`: null where the bandwidth is unknown), and
    the most whole-cache copies any run's compiled step made (`compiler_cache_copies`: null where none was counted)."""
    out = []
    for (device, model, batch, prompt), runs in rows.groupby(["device", "model", "batch", "prompt_length"], sort=False):
        entry: dict[str, Any] = {"device": device, "model": model, "batch": batch, "prompt_length": prompt,
                                 "output_tokens": runs["output_tokens"].iloc[0], "runs": len(runs)}
        for field, name in WITH_INTERVALS.items():
            interval = median_ci(runs[field])
            entry.update({name: interval.estimate, f"{name}_low": interval.low, f"{name}_high": interval.high,
                          f"{name}_level": interval.confidence if interval.resolved else None})
        entry.update({name: float(np.median(runs[name].dropna())) if runs[name].notna().any() else None
                      for name in MEDIANS if name in runs})
        copies = runs["compiler_cache_copies"].dropna() if "compiler_cache_copies" in runs else []
        entry["compiler_cache_copies"] = int(max(copies)) if len(copies) else None
        checks = runs["within_bandwidth"].dropna()
        entry["within_bandwidth"] = bool(checks.all()) if len(checks) else None
        entry["check_passed"] = bool(runs["check_passed"].all())
        out.append(entry)
    return pd.DataFrame(out)


def _errorbar(ax: Any, rows: pd.DataFrame, x: str, y: str, label: str) -> None:
    """A line of `y` against `x` with its intervals' bars, from the rows with a value of `y` (none: nothing drawn,
    and no legend entry)."""
    rows = rows[rows[y].astype(float).notna()].sort_values(x)
    if not len(rows):
        return
    low, high = rows[f"{y}_low"].astype(float), rows[f"{y}_high"].astype(float)
    bounded = low.notna() & high.notna()
    values = rows[y].astype(float)
    yerr = np.array([np.where(bounded, values - low, 0.0), np.where(bounded, high - values, 0.0)])
    ax.errorbar(rows[x], values, yerr=yerr, marker="o", capsize=3, label=label)


def scaling_figure(table: pd.DataFrame) -> ReportFigure | None:
    """Left: TPOT against the prompt (the cache's length), a line per device, model and batch; right: output
    tokens/s against the batch, a line per device, model and prompt length; bars: the between-run intervals.
    None where no row has a TPOT or a tokens/s to draw."""
    table = table[table["tpot_ms"].astype(float).notna() | table["tokens_per_s"].astype(float).notna()]
    if not len(table):
        return None
    figure, (left, right) = plt.subplots(1, 2, figsize=(11.0, 4.2))
    several = table.groupby("device")["model"].nunique().max() > 1  # then each line names its model too

    def named(device: str, model: str) -> str:
        return f"{device}, {model}" if several else device

    for (device, model, batch), rows in table.groupby(["device", "model", "batch"], sort=False):
        _errorbar(left, rows, "prompt_length", "tpot_ms", f"{named(device, model)}, batch {batch}")
    for (device, model, prompt), rows in table.groupby(["device", "model", "prompt_length"], sort=False):
        _errorbar(right, rows, "batch", "tokens_per_s", f"{named(device, model)}, prompt {prompt}")
    left.set(xscale="log", yscale="log", xlabel="prompt length (tokens, log)", ylabel="TPOT, median step (ms, log)",
             title="Time per output token by cache length")
    right.set(xscale="log", yscale="log", xlabel="batch size (log)", ylabel="output tokens/s (log)",
              title="Output tokens/s by batch")
    for ax, column in ((left, "prompt_length"), (right, "batch")):
        values = sorted(set(table[column]))
        ax.set_xticks(values, [str(value) for value in values], minor=False)
        ax.minorticks_off()
        if ax.get_legend_handles_labels()[1]:  # a panel whose every value is missing lists nothing
            ax.legend(fontsize=7)
    figure.tight_layout()
    caption = ("Decode per device: TPOT (the median step) against the prompt length, and output tokens/s (batch x "
               "output tokens over the whole generation, prefill included) against the batch; each point the median "
               "over runs, its bar the distribution-free interval (75 % at 3 runs). A step attends over its whole "
               "fixed-size cache (prompt + output tokens), so its time follows the prompt")
    columns = ["device", "model", "batch", "prompt_length", "runs", "tpot_ms", "tpot_ms_low", "tpot_ms_high",
               "tokens_per_s", "tokens_per_s_low", "tokens_per_s_high"]
    return ReportFigure("decode_scaling", figure, table[columns], caption)


def roofline_figure(table: pd.DataFrame) -> ReportFigure | None:
    """Each device's roofline (its records' peak TFLOPS and bandwidth) with each combination's prefill (model FLOPs
    over TTFT) and decode step (over TPOT) at their arithmetic intensities: a panel per device with a point whose
    intensity and TFLOPS are both known, None where no device has one. The legend lists prefill and decode step
    only where a point of it is drawn."""
    phases = (("prefill", "prefill", "#1f77b4"), ("decode", "decode step", "#d62728"))
    points = [{"device": row["device"], "model": row["model"], "batch": row["batch"],
               "prompt_length": row["prompt_length"], "phase": kind,
               "intensity_flop_per_byte": row[f"{kind}_intensity"], "achieved_tflops": row[f"{kind}_tflops"]}
              for _, row in table.iterrows() for kind, _, _ in phases
              if known(row[f"{kind}_intensity"]) and known(row[f"{kind}_tflops"])]
    drawn = pd.DataFrame(points)
    if not len(drawn):
        return None
    devices = list(dict.fromkeys(drawn["device"]))
    figure, axes = plt.subplots(1, len(devices), figsize=(6.4 * len(devices), 4.4), squeeze=False)
    for ax, device in zip(axes[0], devices):
        rows, mine = table[table["device"] == device], drawn[drawn["device"] == device]
        marks = []
        for kind, name, color in phases:
            phase = mine[mine["phase"] == kind]
            marks += [(x, y, name if index == 0 else None, color)  # one legend entry per phase drawn
                      for index, (x, y) in enumerate(zip(phase["intensity_flop_per_byte"], phase["achieved_tflops"]))]
        peak, bandwidth = rows["peak_tflops"].dropna(), rows["bandwidth_gb_s"].dropna()
        draw_roofline(ax, marks, peak.median() if len(peak) else None, bandwidth.median() if len(bandwidth) else None)
        ax.set(xscale="log", yscale="log", xlabel="arithmetic intensity (FLOP/byte, log)",
               ylabel="achieved model TFLOPS (log)", title=device)
        ax.legend(fontsize=7)
    figure.tight_layout()
    caption = ("Prefill (blue: the prompt's model FLOPs over the time to first token) and decode steps (red: a "
               "step's model FLOPs over TPOT), each batch and prompt length at its arithmetic intensity (model FLOPs "
               "over the bytes the step reads: weights and the whole fixed-size cache), under the device's compute "
               "ceiling and its bandwidth's (a CPU's: the STREAM triad measured on the host)")
    return ReportFigure("decode_roofline", figure, drawn, caption)


def decode_section(data: ReportData) -> Section:
    """The report's section of decode runs (or why there is none)."""
    section = Section(DECODE, "Decode")
    rows = decode_rows(data)
    if not len(rows):
        section.empty = ("No run in decode mode (the ParaDnn Transformer's `mode = \"decode\"`, e.g. the "
                         "`decode_smoke` preset), so there are no times to first token or per output token to give.")
        return section
    table = decode_table(rows)
    section.text.append(
        "Greedy generation with a key-value cache (docs/decode.md): per batch size and prompt length, the time to "
        "first token (prefill and first token on the host), the time per output token (the median step; p90 beside "
        "it) and output tokens/s, each the median over independent runs with its distribution-free interval (75 % "
        "at 3 runs). Achieved GB/s is the bytes a step must read (the model's: weights and the whole cache) over its "
        "median time, held against the device's bandwidth; a cache within the last-level cache can beat memory's "
        "bandwidth. Beside them, the compiler's: the bytes XLA's cost analysis says the compiled step accesses "
        "(JAX; TensorFlow gives none), their ratio to the model's, and those bytes over the median step.")
    above = table[table["within_bandwidth"].eq(False)]
    if len(above):
        section.warnings.append("Achieved GB/s above the device's bandwidth at " + ", ".join(
            f"{row.device} batch {row.batch} prompt {row.prompt_length} ({row.achieved_gb_s:.3g} GB/s)"
            for row in above.itertuples()) + ": the step's bytes fit a cache level faster than memory.")
    heavy = table[table["compiler_bytes_ratio"].astype(float) > COMPILER_BYTES_WARN_RATIO] if (
        "compiler_bytes_ratio" in table) else table.iloc[:0]
    if len(heavy):
        section.warnings.append("The compiled step accesses more than the model must read at " + ", ".join(
            f"{row.device} batch {row.batch} prompt {row.prompt_length} ({row.compiler_bytes_ratio:.3g}x)"
            for row in heavy.itertuples()) + ": achieved GB/s counts the model's bytes only (docs/decode.md).")
    copied = table[table["compiler_cache_copies"].fillna(0).astype(int) > 0]
    if len(copied):
        section.warnings.append("The compiled step copies (or converts) a whole key or value cache at " + ", ".join(
            f"{row.device} batch {row.batch} prompt {row.prompt_length} ({row.compiler_cache_copies} copies)"
            for row in copied.itertuples()) + ": each step moves that cache again (docs/decode.md).")
    section.items.append(ReportTable("decode", table, "Decode per device, batch size and prompt length: TTFT, TPOT "
                                     "and tokens/s (medians over runs, their intervals), bytes and GB/s a step"))
    section.add_figure(scaling_figure(table), "No figure of TPOT and tokens/s: no batch size and prompt length has "
                                              "a median TPOT or tokens/s over its runs to draw.")
    section.add_figure(roofline_figure(table), "No roofline figure: no decode row gives both a phase's model TFLOPS "
                                               "and its arithmetic intensity (prefill_tflops, prefill_intensity, "
                                               "decode_tflops, decode_intensity in the records' decode.rows).")
    return section
