"""How well each training run used its device: model FLOPs, achieved GFLOPS, fraction of peak (MFU), arithmetic
intensity and energy per sample, as a table in each training section's appendix."""

from __future__ import annotations

import pandas as pd

from colabkit.report.common import has
from colabkit.report.records import ReportData
from colabkit.report.section import ReportTable

# record metric -> (column name, scale: None for text): what the utilisation table prints
COLUMNS = {"global_batch_size": ("global batch", 1.0), "model_flops_forward_per_sample": ("forward MFLOP/sample", 1e-6),
           "model_tflops": ("achieved GFLOPS", 1e3), "peak_tflops": ("peak TFLOPS", 1.0),
           "peak_precision": ("peak precision", None), "peak_basis": ("peak basis", None),
           "mfu": ("fraction of peak (MFU)", 1.0), "achievable_tflops": ("achievable TFLOPS (matmul scan)", 1.0),
           "mfu_achievable": ("fraction of achievable peak", 1.0),
           "mfu_achievable_high": ("fraction of achievable peak: slowest scan pass", 1.0),
           "arithmetic_intensity": ("FLOPs/byte", 1.0), "energy_j_per_sample": ("J/sample", 1.0),
           "mean_power_w": ("mean power (W)", 1.0)}


def utilisation_items(data: ReportData, notebook: str, name: str) -> list[ReportTable]:
    """The utilisation table of `notebook`'s runs, one row per ok run that carries model FLOPs (nothing where none
    does, e.g. records from before they were counted); the fraction of peak is drawn with the common figures."""
    ok = data.ok(notebook)
    if not has(ok, "metrics.model_tflops"):
        return []
    ok = ok[ok["metrics.model_tflops"].notna()]
    table = pd.DataFrame({"device": ok["device_label"], **{
        label: ok[f"metrics.{metric}"] if scale is None else pd.to_numeric(ok[f"metrics.{metric}"], errors="coerce")
        * scale for metric, (label, scale) in COLUMNS.items() if f"metrics.{metric}" in ok},
        "MFU unknown because": ok.get("metrics.mfu_reason")})
    return [ReportTable(f"{name}_utilisation", table.sort_values(["device", "global batch"]).reset_index(drop=True),
                        "How well each run used its device: analytic model FLOPs, achieved GFLOPS, fraction of the "
                        "device's peak (MFU), arithmetic intensity of a training step per replica (docs/roofline.md) "
                        "and, on NVIDIA GPUs, energy per sample.")]
