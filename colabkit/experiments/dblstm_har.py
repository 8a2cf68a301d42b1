"""dBLSTM on UCI HAR: training time and test scores per units, layers, batch size and device.

Every parameter of the dBLSTM notebook is declared here, and only here (`python tools/stamp_notebooks.py notebooks`
stamps its parameters cell from this).
"""

from colabkit.data.common import DATA_SOURCES
from colabkit.experiments.declaration import (
    BREAKDOWN_METRICS,
    PROFILE_RULES,
    UTILISATION_METRICS,
    Experiment,
    Figures,
    Headline,
    Parameter,
    PublishedPoint,
    Reference,
    backend_parameter,
    breakdown_parameters,
    device_parameter,
    results_path_parameter,
    torch_runs_one_step_per_call,
)
from colabkit.experiments.inference import inference_parameters, inference_rules, training_only
from colabkit.experiments.published import (
    HAR_LSTM_TUTORIAL,
    HAR_LSTM_TUTORIAL_SOURCE,
    KIMM_2021_CLAIMS,
    KIMM_2021_RATIOS,
    KIMM_2021_SOURCE,
)

from colabkit.training.choices import BATCH_SIZE_MEANINGS, MIXED_PRECISION_CHOICES

EXPERIMENT = Experiment(
    name="dblstm_har",
    notebook="notebooks/dblstm_har.ipynb",
    docs="docs/sources.md#dblstm-on-human-activity-recognition-kimm-paik--kimm-2021",
    title="dBLSTM on UCI HAR",
    measures="Training time and accuracy, precision, recall, F1 of a stacked bidirectional LSTM per units, "
             "bidirectional layers, LSTM head, batch size and device",
    parameters=(
        device_parameter(),
        backend_parameter(),
        *inference_parameters("1,64,128,max"),
        *training_only(Parameter("batch_size", int, 64, "the paper's (it also ran 128)", minimum=1),
                       Parameter("batch_size_is", str, "global", "as model.fit(batch_size) under a strategy: split "
                                 "over the replicas", choices=BATCH_SIZE_MEANINGS)),
        Parameter("bilstm_layers", int, 2, "Bidirectional(LSTM) layers, each returning its whole sequence (the paper "
                  "printed 2)", minimum=1),
        Parameter("units", int, 128, "units of each bidirectional LSTM layer, per direction (the paper: 128)",
                  minimum=1),
        Parameter("head_units", int, 64, "units of the LSTM head after them (the paper: 64)", minimum=1,
                  zero_means="no head"),
        *training_only(
            Parameter("epochs", int, "auto", 'the paper\'s 30; "auto": 30 on a GPU or TPU, 3 on a CPU', minimum=1,
                      auto="sized for the device"),
            Parameter("models_per_run", int, "auto", 'fresh models trained one after another in this run (the '
                      'paper\'s "repeats"), each seeded with seed + its index; "auto": 3 (the paper\'s), 1 on a CPU',
                      minimum=1, auto="sized for the device"),
            Parameter("learning_rate", float, 0.001, "Adam's default, as in the paper", minimum=0,
                      minimum_exclusive=True)),
        Parameter("mixed_precision", str, "none", "Keras dtype policy (none: float32)", choices=MIXED_PRECISION_CHOICES),
        Parameter("steps_per_execution", int, 1, "training steps per compiled call", minimum=1),
        Parameter("data_source", str, "auto", '"auto" (real, else the synthetic stand-in), "real", "offline"',
                  choices=DATA_SOURCES),
        Parameter("seed", int, 0, "seed of the first repeat", minimum=0),
        *training_only(Parameter("train_samples", int, "auto", 'training windows used; "auto": all, 1,024 on a CPU',
                                 minimum=1, zero_means="all 7,352 training windows", auto="sized for the device")),
        Parameter("test_samples", int, 0, "test windows used", minimum=1, zero_means="all 2,947 test windows"),
        *breakdown_parameters(),
        results_path_parameter("dblstm_har"),
    ),
    metrics=("train_time_s", "epoch_time_first_s", "epoch_time_steady_s", "step_time_steady_ms", "global_batch_size",
             "test_accuracy", "precision", "recall", "f1_macro", "f1_weighted", "params", *UTILISATION_METRICS,
             *BREAKDOWN_METRICS),
    headline=Headline("train_time_s", "training time", "s", "lower"),
    references=(
        Reference("Kimm, Paik & Kimm 2021", KIMM_2021_SOURCE, KIMM_2021_CLAIMS),
        Reference("LSTM for HAR tutorial", HAR_LSTM_TUTORIAL_SOURCE, HAR_LSTM_TUTORIAL),
    ),
    constraints=(torch_runs_one_step_per_call, *PROFILE_RULES, inference_rules),
    # Kimm, Paik & Kimm 2021: training time against LSTM units, per runtime; its claims of CPU time over GPU or TPU
    # time as points beside the speedups over the CPU.
    figures=Figures(("headline", "speedup", "accuracy", "fraction_of_peak", "where_time_goes"), axis="units",
                    published=tuple(PublishedPoint("Kimm, Paik & Kimm 2021: CPU / GPU or TPU", "gpu", units, ratio,
                                                   figure="speedup") for units, ratio in KIMM_2021_RATIOS.items())),
)
