"""ParaDnn section: where each model sits on its device's roofline (its headline figure, as Wang, Wei & Brooks 2020
drew it), and in the appendix the speedups of one device over another as heat maps and the paper's claims."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from matplotlib.colors import to_hex, to_rgb

from colabkit.experiments.published import PARADNN_CLAIMS, PARADNN_SOURCE
from colabkit.plots import draw_roofline
from colabkit.report.common import column, device_head, metrics, pick, samples_column, speedups, work_key
from colabkit.report.figures import new_figure
from colabkit.report.headline import notebook_section
from colabkit.report.records import ReportData, in_report_order, sort_labels
from colabkit.report.section import ReportFigure, ReportTable, Section
from colabkit.report.writers import format_number

NOTEBOOK = "paradnn"
FAMILIES = ("fc", "cnn", "rnn")
FAMILY_COLORS = {"fc": "#1f77b4", "cnn": "#d62728", "rnn": "#2ca02c", "transformer": "#9467bd"}
FAMILY_MARKERS = {"fc": "o", "cnn": "s", "rnn": "^", "transformer": "D"}
MAX_DEVICE_PAIRS = 3
OVERHEAD_MARKERS = {"input": ("#d62728", "input-bound"), "host": ("#ff7f0e", "host-bound")}


def paradnn_table(data: ReportData) -> pd.DataFrame:
    """One row per ok ParaDnn combination: device, family, model, batch, throughput, FLOPS, MFU, roofline."""
    ok = data.ok(NOTEBOOK)
    table = pd.DataFrame({
        "device": ok["device_label"], "family": column(ok, "params.family"), "model": column(ok, "metrics.model"),
        "batch": pd.Series([asked if pd.isna(ran) else ran for ran, asked in  # no fillna: pandas 2.2 warns on object
                            zip(column(ok, "metrics.global_batch_size"), column(ok, "params.batch_size"))],
                           index=ok.index, dtype=object),
        "precision": column(ok, "params.mixed_precision"),
        "step_std_ms": column(ok, "timings.step_s_steady.std").astype(float) * 1e3,
        "throughput_runs": samples_column(ok, "samples_per_s"), "bound_by": column(ok, "metrics.bound_by", None),
        **metrics(ok, "params", "samples_per_s", "model_tflops", "mfu", "achievable_tflops", "mfu_achievable",
                  "mfu_achievable_high", "achievable_low_tflops", "peak_tflops", "peak_basis", "bound", "roofline_tflops",
                  "fraction_of_roofline", step_ms="step_time_steady_ms", intensity="arithmetic_intensity",
                  peak_source="peak_tflops_source", bandwidth_gb_s="peak_bandwidth_gb_s",
                  bandwidth_slowest_gb_s="peak_bandwidth_min_gb_s", bandwidth_measured_at="peak_bandwidth_measured_at",
                  bandwidth_source="peak_bandwidth_source"),
        "config": work_key(ok, ("device",)), "path": ok["path"]})
    return in_report_order(table, ["device", "family", "model", "batch"])


def point_colors(table: pd.DataFrame) -> pd.Series:
    """A colour per row: its family's hue, paler for smaller batches (one shade per batch size)."""
    batches = sorted({float(b) for b in table["batch"].dropna()})
    position = {b: (i / (len(batches) - 1) if len(batches) > 1 else 1.0) for i, b in enumerate(batches)}
    hues = table["family"].map(lambda family: np.array(to_rgb(FAMILY_COLORS.get(family, "#7f7f7f"))))
    return pd.Series([to_hex(rgb + (1 - rgb) * 0.65 * (1 - position.get(float(batch), 1.0)))  # pale at fraction 0
                      for rgb, batch in zip(hues, table["batch"])], index=table.index)


def device_roofs(table: pd.DataFrame) -> pd.DataFrame:
    """One roof per device and precision: the medians of its records' peak and bandwidth, the bandwidth's range (a
    CPU's measured passes) and `measurements` (distinct ones behind it), the sources."""
    numbers = ["peak_tflops", "achievable_tflops", "achievable_low_tflops", "bandwidth_gb_s", "bandwidth_slowest_gb_s"]
    table = table.astype(dict.fromkeys(numbers, float)).assign(precision=table["precision"].where(
        ~table["precision"].isin(["none"]) & table["precision"].notna(), "float32"))
    return table.assign(slowest=table["bandwidth_slowest_gb_s"].fillna(table["bandwidth_gb_s"])).groupby(
        ["device", "precision"], sort=False).agg(
        runs=("device", "size"), peak_tflops=("peak_tflops", "median"), peak_basis=("peak_basis", "first"),
        achievable_tflops=("achievable_tflops", "median"), achievable_low_tflops=("achievable_low_tflops", "min"),
        bandwidth_gb_s=("bandwidth_gb_s", "median"), bandwidth_min_gb_s=("slowest", "min"),
        bandwidth_max_gb_s=("bandwidth_gb_s", "max"), measurements=("bandwidth_measured_at", "nunique"),
        peak_source=("peak_source", "first"), bandwidth_source=("bandwidth_source", "first")).reset_index()


def roofline_figure(table: pd.DataFrame, data: ReportData) -> ReportFigure | None:
    """Per device, each model's TFLOPS against its intensity under the roofs (None without one)."""
    if not (table["intensity"].notna() & table["model_tflops"].notna()).any():
        return None
    devices = sort_labels(table["device"])
    colors = point_colors(table)

    def draw(width: float) -> Any:
        figure, axes = new_figure(ncols=len(devices), width=width / len(devices), height=min(4.4, 0.75 * width))
        for ax, device in zip(axes, devices):
            rows = table[table["device"] == device]
            for (family, batch), group in rows.groupby(["family", "batch"], sort=True):
                ax.scatter(group["intensity"], group["model_tflops"], color=colors[group.index[0]],
                           marker=FAMILY_MARKERS.get(family, "o"), edgecolor="#333333", linewidth=0.5, zorder=3,
                           label=f"{family}, batch {format_number(batch)}")
            for bound, (color, label) in OVERHEAD_MARKERS.items():  # ringed: the roofline does not explain them
                marked = rows[rows["bound_by"] == bound]
                if len(marked):
                    ax.scatter(marked["intensity"], marked["model_tflops"], s=180, facecolors="none", edgecolors=color,
                               linewidths=2, zorder=4, label=label)
            for roof in device_roofs(rows).itertuples():
                draw_roofline(ax, [], roof.peak_tflops, roof.bandwidth_gb_s, roof_label=f"roof ({roof.precision})",
                              span=rows["intensity"].dropna().astype(float), achievable_tflops=roof.achievable_tflops)
            ax.set_title(device, fontsize="medium")
        handles, labels = axes[0].get_legend_handles_labels()
        figure.legend(handles, labels, loc="outside lower center", ncols=1 if width < 5 else 2)
        return figure

    behind = table[["device", "family", "model", "batch", "precision", "intensity", "model_tflops", "peak_tflops",
                    "peak_source", "bandwidth_gb_s", "bandwidth_source", "roofline_tflops", "bound", "bound_by"]]
    caption = ("Achieved model TFLOPS against arithmetic intensity (training FLOPs per byte moved) per device: colour "
               "the family, paler the smaller batch. Roof: the peak and bandwidth the records name (a CPU's "
               "measured); dashed: the achievable peak. Ringed: bound by input (red) or host (orange).")
    return ReportFigure("paradnn_roofline", draw(5.6 * len(devices)), behind.copy(), caption, paper=draw)


def device_pairs(table: pd.DataFrame) -> list[tuple[str, str]]:
    """At most MAX_DEVICE_PAIRS device pairs with models in common, the earlier in report order first."""
    devices = sort_labels(table["device"])
    pairs = [(a, b) for i, a in enumerate(devices) for b in devices[i + 1:]
             if set(table.loc[table["device"] == a, "config"]) & set(table.loc[table["device"] == b, "config"])]
    return pairs[:MAX_DEVICE_PAIRS]


def speedup_frame(table: pd.DataFrame, baseline: str, other: str) -> pd.DataFrame:
    """Per model run on both devices: `other`'s samples/s over `baseline`'s (common.speedups)."""
    both = table[table["device"].isin([baseline, other])].drop_duplicates(["device", "config"])
    both = pd.concat([both, speedups(both, "throughput_runs", True, baseline)], axis=1)
    bound = both[both["device"] == baseline].set_index("config")["bound"]
    rows = both[(both["device"] == other) & both["config"].isin(bound.index)]
    return rows.assign(baseline=baseline, baseline_bound=rows["config"].map(bound))[[
        "baseline", "device", "family", "model", "batch", "bound", "baseline_bound", "speedup", "speedup_low",
        "speedup_high", "speedup_verdict"]].reset_index(drop=True)


def speedup_heat_map(table: pd.DataFrame, data: ReportData) -> ReportFigure | None:
    """ParaDnn's heat maps: per device pair and family, each model's speedup at each batch (None with one device)."""
    pairs = device_pairs(table)
    if not pairs:
        return None
    both = pd.concat([speedup_frame(table, a, b) for a, b in pairs], ignore_index=True)
    families = [family for family in (*FAMILIES, "transformer") if family in set(both["family"])]
    figure, axes = new_figure(ncols=len(families), nrows=len(pairs), width=4.6, height=3.6)
    axes = axes.reshape(len(pairs), len(families))
    reach = max(np.log10(both["speedup"].astype(float)).abs().max(), 0.1)
    size = table.drop_duplicates("model").set_index("model")["params"]
    for row, (a, b) in enumerate(pairs):
        for col, family in enumerate(families):
            ax, rows = axes[row, col], both[(both["baseline"] == a) & (both["device"] == b) & (both["family"] == family)]
            grid = rows.pivot_table(index="model", columns="batch", values="speedup", aggfunc="median")
            grid = grid.loc[sorted(grid.index, key=lambda model: (size.get(model, np.nan), model))]
            image = ax.imshow(np.log10(grid.to_numpy(float)), cmap="RdBu", vmin=-reach, vmax=reach, aspect="auto")
            for (i, j), value in np.ndenumerate(grid.to_numpy(float)):
                ax.text(j, i, f"{value:.2g}", ha="center", va="center", fontsize="small")
            ax.set_xticks(range(len(grid.columns)), [format_number(batch) for batch in grid.columns])
            ax.set_yticks(range(len(grid.index)), [str(model).split(": ", 1)[-1] for model in grid.index],
                          fontsize="small")
            ax.set(xlabel="batch", title=f"{device_head(b)} over {device_head(a)}: {family}")
    figure.colorbar(image, ax=list(axes.ravel()), label="speedup (log10)")
    return ReportFigure("paradnn_speedup", figure, both, "Speedup per model and batch of one device over another "
                        "(steady samples/s, same model, batch and precision; medians over runs, each interval and "
                        f"verdict in the figure's data), as ParaDnn's heat maps. Devices: "
                        f"{'; '.join(f'{b} over {a}' for a, b in pairs)}.")


def _ours(frame: pd.DataFrame, kind: str, family: str) -> tuple[float | None, str]:
    rows = frame[frame["family"] == family]
    bound = {"median_compute_bound": "compute", "median_memory_bound": "memory"}.get(kind)
    rows = rows[(rows["bound"] == bound) & (rows["baseline_bound"] == bound)] if bound else rows
    values = rows["speedup"].dropna()
    if not len(values):
        return None, f"no {family} models of that kind measured on both devices"
    value = {"max": values.max, "min": values.min}.get(kind, values.median)()
    return float(value), f"{'median' if kind.startswith('median') else kind} over {len(values)} {family} model(s)"


def claims_table(table: pd.DataFrame, pairs: list[tuple[str, str]]) -> pd.DataFrame:
    """ParaDnn's published speedups, each beside the same statistic of our device pairs (a comparison of kind)."""
    rows, frames = [], {(a, b): speedup_frame(table, a, b) for a, b in pairs}
    for claim in PARADNN_CLAIMS:
        slow, fast = claim["devices"]
        base = {"claim": claim["claim"], "theirs (x)": claim["theirs"], "their devices": f"{fast} over {slow}",
                "source": PARADNN_SOURCE}
        if not pairs:
            rows.append({**base, "ours (x)": None, "our devices": "", "our basis": "one device only: no speedup"})
        for a, b in pairs:
            value, basis = _ours(frames[(a, b)], claim["kind"], claim["family"])
            rows.append({**base, "ours (x)": value, "our devices": f"{b} over {a}", "our basis": basis})
    return pd.DataFrame(rows)


def _fill(section: Section, table: pd.DataFrame, data: ReportData) -> None:
    printed = pick(table, ["device", "family", "model", "batch", "precision", ("params", "parameters"), "step_ms",
                           ("step_std_ms", "std (ms)"), "samples_per_s", ("model_tflops", "achieved TFLOPS"),
                           ("mfu", "MFU"), ("mfu_achievable", "MFU (achievable)"),
                           ("mfu_achievable_high", "MFU (achievable): slowest scan pass"), ("intensity", "FLOPs/byte"),
                           "bound", ("fraction_of_roofline", "of roofline"), ("peak_tflops", "peak TFLOPS"),
                           ("bandwidth_gb_s", "bandwidth (GB/s)")])
    roofs = device_roofs(table).rename(columns={
        "peak_tflops": "peak TFLOPS", "peak_basis": "peak basis", "achievable_tflops": "achievable TFLOPS (matmul scan)",
        "achievable_low_tflops": "achievable: slowest pass",
        "bandwidth_gb_s": "bandwidth (GB/s, median)", "bandwidth_min_gb_s": "min",
        "bandwidth_max_gb_s": "max", "measurements": "bandwidth measurements", "peak_source": "peak TFLOPS: source",
        "bandwidth_source": "bandwidth: source (first run)"})
    section.items += [
        ReportTable("paradnn_models", printed, "ParaDnn models per device: steady step time and throughput, achieved "
                    "model TFLOPS, MFU against the datasheet peak and against the achievable peak (a matmul scan's "
                    "best on the device, docs/peaks.md; beside it, against the scan's slowest pass), and position on "
                    "the roofline."),
        ReportTable("paradnn_roofs", roofs, "Each device's roof: the peak and bandwidth its records used (median over "
                    "the runs; min and max: the bandwidth's range, from the slowest pass of a CPU's measurements to the "
                    "best figure) and where they come from."),
        ReportTable("paradnn_claims", claims_table(table, device_pairs(table)),
                    f"{PARADNN_SOURCE}: their published speedups (theirs: TF 1.x, TPU v2/v3 and a V100, bf16/fp16) "
                    "beside the same statistic of our device pairs, which are other devices, models and software.")]


def paradnn_section(data: ReportData) -> Section:
    """The ParaDnn section (or why it is not in the report)."""
    return notebook_section(data, NOTEBOOK, "ParaDnn: roofline and speedups", "paradnn", paradnn_table, _fill,
                            own={"roofline": roofline_figure, "speedup_heat_map": speedup_heat_map})
