"""The roofline's arithmetic (Williams, Waterman & Patterson 2009): where a training step sits under
its device's roof, and the bytes per value of each compute dtype that its intensity is counted in.

Plain numbers in, plain numbers out (no Keras): the ParaDnn notebook places its run with
`roofline_point`, the report draws the roofs its records name (colabkit.plots.draw_roofline), and
both use the same `ridge` and `attainable_tflops`.

    roofline = min(peak FLOPS, arithmetic intensity x memory bandwidth)
"""

from __future__ import annotations

import math
from typing import Any

from colabkit.errors import FlopCountError

# Bytes per value of a Keras compute dtype: what activations and (under float32) weights move.
DTYPE_BYTES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2}


def dtype_bytes(dtype: str) -> int:
    """Bytes per value of a Keras compute dtype ("float32" 4, "float16" and "bfloat16" 2)."""
    if dtype not in DTYPE_BYTES:
        raise FlopCountError(f"no byte size known for compute dtype {dtype!r} (known: {', '.join(DTYPE_BYTES)})")
    return DTYPE_BYTES[dtype]


def known(value: Any) -> bool:
    """Whether `value` is a figure a roofline can use: a finite number > 0 (not None, not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def ridge(peak_tflops: float, bandwidth_gb_s: float) -> float:
    """The ridge point in FLOPs per byte: peak FLOPS / bandwidth, where the two roofs meet."""
    return peak_tflops * 1e12 / (bandwidth_gb_s * 1e9)


def attainable_tflops(intensity: float, peak_tflops: float, bandwidth_gb_s: float) -> float:
    """The roof above an intensity (FLOPs per byte): min(peak, intensity x bandwidth), in TFLOPS."""
    return min(peak_tflops, intensity * bandwidth_gb_s / 1e3)


def roofline_point(intensity: float | None, achieved_tflops: float | None, peak_tflops: float | None,
                   bandwidth_gb_s: float | None) -> dict[str, Any]:
    """Where a measurement sits under its device's roofline.

    Returns `ridge_flops_per_byte` (peak FLOPS / bandwidth: the intensity where the two roofs meet),
    `roofline_tflops` (the attainable min(peak, intensity x bandwidth)), `fraction_of_roofline`
    (achieved / attainable) and `bound` ("memory" left of the ridge, "compute" right of it). A figure
    that needs an unknown input is None, and `bound_reason` then says which input is missing.
    """
    missing = [name for name, value in (("arithmetic intensity", intensity), ("peak TFLOPS", peak_tflops),
                                        ("bandwidth", bandwidth_gb_s)) if not known(value)]
    if missing:
        return {"ridge_flops_per_byte": None, "roofline_tflops": None, "fraction_of_roofline": None, "bound": None,
                "bound_reason": f"unknown {' and '.join(missing)}"}
    assert intensity is not None and peak_tflops is not None and bandwidth_gb_s is not None  # known() said so
    point = ridge(peak_tflops, bandwidth_gb_s)
    attainable = attainable_tflops(intensity, peak_tflops, bandwidth_gb_s)
    return {"ridge_flops_per_byte": point, "roofline_tflops": attainable,
            "fraction_of_roofline": achieved_tflops / attainable if known(achieved_tflops) else None,
            "bound": "memory" if intensity < point else "compute", "bound_reason": None}
