"""The report's decode section (docs/decode.md): per device, model, batch and prompt length, TTFT, TPOT and tokens/s
(medians over runs with their intervals), the bytes a step reads, and each device's roofline with its phases."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from colabkit.plots import draw_roofline
from colabkit.report.common import column
from colabkit.report.figures import new_figure, plot_lines, powers_of_two_axis
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
    """One row per counted decode run and measured (not refused) batch size x prompt length: `decode.rows`' entry."""
    rows = []
    for _, run in data.runs(None, mode=DECODE).iterrows():
        section = data.record(run["path"]).get(DECODE) or {}
        for entry in section.get("rows") or []:
            if not entry.get("refused"):
                rows.append({"device": run["device_label"], "model": run["combination"], "run": run["path"],
                             **{key: value for key, value in entry.items() if key != "step_ms"}})
    return pd.DataFrame(rows)


def decode_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per device, model, batch and prompt length: the median over runs of TTFT, TPOT and tokens/s with their
    intervals, the medians of MEDIANS, whether every run stayed within the bandwidth and the most cache copies."""
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


# The panels of the scaling figure: (y, x, what a line holds fixed, the y axis, the panel's title)
PANELS = (("tpot_ms", "prompt_length", "batch", "TPOT, median step (ms, log)", "Time per output token by cache length"),
          ("tokens_per_s", "batch", "prompt_length", "output tokens/s (log)", "Output tokens/s by batch"))


def scaling_figure(table: pd.DataFrame, palette: dict[str, str]) -> ReportFigure | None:
    """TPOT against the prompt length, tokens/s against the batch: a panel where a line joins two points (or None)."""
    panels = [panel for panel in PANELS if table[table[panel[0]].astype(float).notna()]
              .groupby(["device", "model", panel[2]])[panel[1]].nunique().max() > 1]
    if not panels:
        return None
    figure, axes = new_figure(ncols=len(panels), width=5.5, height=4.0)
    several = table.groupby("device")["model"].nunique().max() > 1  # then each line names its model too
    for ax, (y, x, fixed, ylabel, title) in zip(axes, panels):
        lines = table.astype({y: float, f"{y}_low": float, f"{y}_high": float})
        lines = lines[lines[y].notna()]
        named = lines["device"] + (", " + lines["model"] if several else "")
        lines = lines.assign(series=named + f", {fixed.replace('_length', '')} " + lines[fixed].astype(str))
        plot_lines(ax, lines, x, y, low=f"{y}_low", high=f"{y}_high", colors=palette)
        powers_of_two_axis(ax, table[x])
        ax.set(yscale="log", xlabel=f"{x.replace('_', ' ')} (log)", ylabel=ylabel, title=title)
        ax.legend(fontsize="small")
    caption = ("Decode per device: the median over runs of TPOT (a step attends over its whole fixed-size cache) and "
               "of output tokens/s (prefill included); bars: the interval over runs (Methods).")
    columns = ["device", "model", "batch", "prompt_length", "runs", "tpot_ms", "tpot_ms_low", "tpot_ms_high",
               "tokens_per_s", "tokens_per_s_low", "tokens_per_s_high"]
    return ReportFigure("decode_scaling", figure, table[columns], caption, body=True)


def roofline_figure(table: pd.DataFrame) -> ReportFigure | None:
    """Each device's roofline with each combination's prefill and decode step (None without a point)."""
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
    figure, axes = new_figure(ncols=len(devices), width=6.4, height=4.4)
    for ax, device in zip(axes, devices):
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
        ax.legend(fontsize="small")
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
        section.empty = "no run in decode mode (ParaDnn's decode_smoke preset makes some)."
        return section
    table = decode_table(rows)
    if len(table) < 2:
        section.empty = "one device, batch size and prompt length: nothing to set side by side (appendix)."
    section.notes.append("Achieved GB/s: the bytes a step must read (weights and the whole cache) over its median "
                         "time; beside them the bytes XLA's compiled step accesses (JAX only; docs/decode.md).")
    for rows, shown, start, end in (  # what the report warns of: which rows, what each shows, the sentence
            (table["within_bandwidth"].eq(False), "{row.achieved_gb_s:.3g} GB/s", "Achieved GB/s above the device's "
             "bandwidth at ", ": the step's bytes fit a cache level faster than memory."),
            (column(table, "compiler_bytes_ratio").astype(float) > COMPILER_BYTES_WARN_RATIO,
             "{row.compiler_bytes_ratio:.3g}x", "The compiled step accesses more than the model must read at ",
             ": achieved GB/s counts the model's bytes only (docs/decode.md)."),
            (table["compiler_cache_copies"].fillna(0).astype(int) > 0, "{row.compiler_cache_copies} copies",
             "The compiled step copies (or converts) a whole key or value cache at ",
             ": each step moves that cache again (docs/decode.md).")):
        if rows.any():
            section.warnings.append(start + ", ".join(f"{row.device} batch {row.batch} prompt {row.prompt_length} ("
                                                      + shown.format(row=row) + ")" for row in table[rows].itertuples())
                                    + end)
    section.items.append(ReportTable("decode_headline", pd.DataFrame({
        "device": table["device"], "batch": table["batch"], "prompt": table["prompt_length"], "TTFT (ms)": table["ttft_ms"],
        "TPOT (ms)": table["tpot_ms"], "tokens/s": table["tokens_per_s"], "level": table["tpot_ms_level"].map(
            lambda level: f"{100 * level:g} %" if pd.notna(level) else None), "runs": table["runs"]}),
        "Per device, batch size and prompt length: the medians over runs (their intervals: the appendix's table).",
        body=True))
    section.items.append(ReportTable("decode", table, "Decode per device, batch size and prompt length: TTFT, TPOT "
                                     "and tokens/s (medians over runs, their intervals), bytes and GB/s a step"))
    section.add_figure(scaling_figure(table, data.palette),
                       "No figure of TPOT and tokens/s: no line of them joins two batch sizes or prompt lengths.")
    section.add_figure(roofline_figure(table), "No roofline figure: no decode row gives both a phase's model TFLOPS "
                                               "and its arithmetic intensity (prefill_tflops, prefill_intensity, "
                                               "decode_tflops, decode_intensity in the records' decode.rows).")
    return section
