"""Weather forecast GRU: epoch and step time per batch size and device, errors against persistence."""

from colabkit.data.common import DATA_SOURCES
from colabkit.experiments.declaration import (
    BREAKDOWN_METRICS,
    PROFILE_RULES,
    UTILISATION_METRICS,
    Experiment,
    Figures,
    Headline,
    Parameter,
    Reference,
    backend_parameter,
    breakdown_parameters,
    device_parameter,
    results_path_parameter,
)
from colabkit.experiments.inference import inference_parameters, inference_rules, training_only
from colabkit.experiments.published import (
    HVASS_SOURCE,
    HVASS_WEATHER,
    WEATHER_GRU_EPOCHS,
    WEATHER_GRU_SOURCE,
)

from colabkit.training.choices import BATCH_SIZE_MEANINGS, WEATHER_DATASETS

EXPERIMENT = Experiment(
    name="timeseries_rnn",
    notebook="notebooks/timeseries_rnn.ipynb",
    docs="docs/timeseries.md",
    title="Weather time series (GRU)",
    measures="Epoch and step time of a weather-forecast GRU per batch size and device; errors beside a "
             "persistence forecast",
    parameters=(
        device_parameter(),
        backend_parameter(),
        *inference_parameters("1,32,256"),
        *training_only(Parameter("batch_size", int, 256, "windows per step, as in the tutorial", minimum=1),
                       Parameter("batch_size_is", str, "per_replica", "how batch_size splits over replicas (global: a "
                                 "share each)", choices=BATCH_SIZE_MEANINGS)),
        Parameter("sequence_length", int, "auto", 'hours per training window (the tutorial: 1344, 8 weeks); '
                  '"auto": 168 on a CPU, 672 on a GPU or TPU', minimum=1, auto="sized for the device"),
        Parameter("units", int, "auto", 'GRU units (the tutorial: 512); "auto": 32 on a CPU, 128 on a GPU or TPU',
                  minimum=1, auto="sized for the device"),
        *training_only(
            Parameter("epochs", int, "auto", 'training epochs, early stopping may end sooner (the tutorial: 20); '
                      '"auto": 5 on a CPU, 10 on a GPU or TPU', minimum=1, auto="sized for the device"),
            Parameter("steps_per_epoch", int, "auto", 'training steps per epoch (the tutorial: 100); "auto": 20 on '
                      "a CPU, 100 on a GPU or TPU", minimum=1, auto="sized for the device")),
        Parameter("warmup_steps", int, 50, "the first hours of every window are left out of the loss", minimum=0),
        Parameter("shift_hours", int, 24, "how far ahead the targets are forecast", minimum=1),
        *training_only(Parameter("learning_rate", float, 0.001, "RMSprop", minimum=0, minimum_exclusive=True),
                       Parameter("patience", int, 5, "EarlyStopping on val_loss", minimum=0)),
        Parameter("dataset", str, "weather_denmark", "the tutorial's data, or Jena's climate series",
                  choices=WEATHER_DATASETS),
        Parameter("data_source", str, "auto", '"auto" (real, else the offline substitute), "real", "offline"',
                  choices=DATA_SOURCES),
        Parameter("seed", int, 0, "random seed of weights and windows", minimum=0),
        Parameter("max_hours", int, 0, "smoke runs may keep only the series' first hours", minimum=1,
                  zero_means="the whole series"),
        Parameter("plot_hours", int, 500, "hours of the test part drawn, and kept in the record", minimum=1),
        *breakdown_parameters(),
        results_path_parameter("timeseries_rnn"),
    ),
    constraints=(*PROFILE_RULES, inference_rules),
    metrics=("epoch_time_first_s", "epoch_time_steady_s", "step_time_steady_ms", "global_batch_size", "val_loss",
             "best_epoch", "test_loss", "persistence_test_loss", *UTILISATION_METRICS, *BREAKDOWN_METRICS),
    headline=Headline("epoch_time_steady_s", "steady epoch time", "s", "lower"),
    references=(
        Reference("Hvass-Labs tutorial #23", HVASS_SOURCE, HVASS_WEATHER),
        Reference("Sarkar 2018 Cloud TPU blog", WEATHER_GRU_SOURCE, WEATHER_GRU_EPOCHS),
    ),
    # Epoch time per batch size and device; then the loss curves and forecasts as Hvass-Labs #23 drew them.
    figures=Figures(("headline", "loss_curves", "predictions", "speedup", "fraction_of_peak", "where_time_goes"),
                    bars=True),
)
