"""The training parameters' vocabularies, each defined once and importing nothing heavy: the experiment
declarations (colabkit.experiments, which must not import Keras) and the code that acts on the values
(colabkit.training.setup, .memory, .timeseries) read the same tuples."""

MIXED_PRECISION_CHOICES = ("none", "mixed_float16", "mixed_bfloat16")  # Keras dtype policies ("none": float32)
COMPUTE_DTYPES = {"none": "float32", "mixed_float16": "float16", "mixed_bfloat16": "bfloat16"}  # of each policy
BATCH_SIZE_MEANINGS = ("per_replica", "global")  # what a notebook's batch_size counts
LR_SCALING_RULES = ("none", "linear")  # learning rate x global batch / per-replica batch, or not
WEATHER_DATASETS = ("weather_denmark", "jena_climate")  # the weather GRU's series
