"""Training helpers notebooks call after `setup_device`: the timer callback (timer), set-up of
precision, batch sizes and datasets (setup), fit and predictions (fit), the multi-worker loop
(multiworker), model FLOPs and MFU (flops) and the weather forecast's windows and loss (timeseries):
these import Keras. Plain arithmetic that imports no Keras, for the sweep and the report too: the
roofline (roofline), the memory a training run needs (memory), "auto" sizes (sizing).

Importing this package imports none of them: the names below load their module when first used,
so that `colabkit.training.memory` or `.roofline` can be imported where Keras must not be.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    # `fit` the function is not among them: `colabkit.training.fit` is its module (from .fit import fit).
    "predict_all": "fit", "weights_digest": "fit",
    "BATCH_SIZE_MEANINGS": "setup", "LR_SCALING_RULES": "setup", "MIXED_PRECISION_CHOICES": "setup",
    "batch_sizes": "setup", "make_dataset": "setup", "scaled_learning_rate": "setup", "set_precision": "setup",
    "subsample": "setup",
    "EpochTiming": "timer", "TrainingTimer": "timer", "describe_timing": "timer",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """`colabkit.training.fit` and the other exports, imported from their module on first use."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'colabkit.training' has no attribute {name!r}")
    return getattr(importlib.import_module(f"colabkit.training.{module}"), name)
