"""How well each training run used its device: model FLOPs, achieved GFLOPS, fraction of peak (MFU),
arithmetic intensity and energy per sample, as a table and a "fraction of peak" figure per device and
global batch size. The training sections (CNN, dBLSTM, weather GRU) add these items to their own."""

from __future__ import annotations

import pandas as pd

from colabkit.report.common import has
from colabkit.report.figures import grouped_bars, label_colors, new_figure
from colabkit.report.records import ReportData
from colabkit.report.section import ReportFigure, ReportTable

# record metric -> (column name, scale): what the utilisation table prints
COLUMNS = {
    "global_batch_size": ("global batch", 1.0),
    "model_flops_forward_per_sample": ("forward MFLOP/sample", 1e-6),
    "model_tflops": ("achieved GFLOPS", 1e3),
    "peak_tflops": ("peak TFLOPS", 1.0),
    "peak_precision": ("peak precision", None),
    "peak_basis": ("peak basis", None),
    "mfu": ("fraction of peak (MFU)", 1.0),
    "achievable_tflops": ("achievable TFLOPS (matmul scan)", 1.0),
    "mfu_achievable": ("fraction of achievable peak", 1.0),
    "mfu_achievable_high": ("fraction of achievable peak: slowest scan pass", 1.0),
    "arithmetic_intensity": ("FLOPs/byte", 1.0),
    "energy_j_per_sample": ("J/sample", 1.0),
    "mean_power_w": ("mean power (W)", 1.0),
}


def utilisation_table(data: ReportData, notebook: str) -> pd.DataFrame | None:
    """One row per ok run of `notebook` that carries model FLOPs (None when no run does)."""
    ok = data.ok(notebook)
    if not has(ok, "metrics.model_tflops"):
        return None
    ok = ok[ok["metrics.model_tflops"].notna()]
    table = pd.DataFrame({"device": ok["device_label"]})
    for metric, (name, scale) in COLUMNS.items():
        column = f"metrics.{metric}"
        if column in ok:
            table[name] = ok[column] if scale is None else pd.to_numeric(ok[column], errors="coerce") * scale
    table["MFU unknown because"] = ok.get("metrics.mfu_reason")
    return table.sort_values(["device", "global batch"]).reset_index(drop=True)


def fraction_of_peak_figure(table: pd.DataFrame, name: str) -> ReportFigure | None:
    """Bars of MFU (%) per global batch size, one colour per device; None when no run has a peak."""
    known = table[table["fraction of peak (MFU)"].notna()].copy()
    if known.empty:
        return None
    known["MFU (%)"] = known["fraction of peak (MFU)"].astype(float) * 100
    known = known.groupby(["device", "global batch"], as_index=False)["MFU (%)"].median()
    figure, axes = new_figure(width=6.4, height=4.0)
    grouped_bars(axes[0], known, "global batch", "MFU (%)", series="device", colors=label_colors(known["device"]))
    axes[0].set_xlabel("global batch size")
    axes[0].set_ylabel("model FLOPs utilisation (% of peak)")
    handles, labels = axes[0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside lower center", ncols=min(3, len(labels)))
    return ReportFigure(f"{name}_fraction_of_peak", figure, known,
                        "Achieved model TFLOPS (training FLOPs per sample x steady samples/s; one multiply-add = 2 "
                        "FLOPs, training = 3 x forward) over the device's peak at the run's compute precision, median "
                        "over the runs of a device and global batch. A CPU's peak is an estimate: its physical cores x "
                        "the FP32 FLOPs per cycle its microarchitecture executes x a clock the table's peak basis "
                        "names (nominal, maximum boost, or the one a measurement on the host implies: never below "
                        "a measured rate; docs/peaks.md); runs without a known peak are left out.")


def utilisation_items(data: ReportData, notebook: str, name: str) -> list[ReportTable | ReportFigure]:
    """The utilisation table and the fraction-of-peak figure of `notebook`'s runs (nothing if none
    of its records carries model FLOPs, e.g. records from before they were counted)."""
    table = utilisation_table(data, notebook)
    if table is None:
        return []
    items: list[ReportTable | ReportFigure] = [ReportTable(
        f"{name}_utilisation", table,
        "How well each run used its device: analytic model FLOPs, achieved GFLOPS, fraction of the device's peak "
        "(MFU), arithmetic intensity of a training step per replica (docs/roofline.md) and, on NVIDIA GPUs, "
        "energy per sample.")]
    figure = fraction_of_peak_figure(table, name)
    if figure is not None:
        items.append(figure)
    return items
