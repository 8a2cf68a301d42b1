"""Training helpers notebooks call after `setup_device` (importing this imports Keras): the timer
callback (timer), set-up of precision, batch sizes and datasets (setup), fit and predictions (fit),
the multi-worker loop (multiworker) and the weather forecast's windows and loss (timeseries)."""

from colabkit.training.fit import fit, predict_all, weights_digest
from colabkit.training.setup import (
    BATCH_SIZE_MEANINGS,
    LR_SCALING_RULES,
    MIXED_PRECISION_CHOICES,
    batch_sizes,
    make_dataset,
    scaled_learning_rate,
    set_precision,
    subsample,
)
from colabkit.training.timer import EpochTiming, TrainingTimer, describe_timing

__all__ = ["BATCH_SIZE_MEANINGS", "LR_SCALING_RULES", "MIXED_PRECISION_CHOICES", "EpochTiming", "TrainingTimer",
           "batch_sizes", "describe_timing", "fit", "make_dataset", "predict_all", "scaled_learning_rate",
           "set_precision", "subsample", "weights_digest"]
