"""CNN on MNIST: epoch, step and per-sample time per batch size, device and Keras backend."""

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
from colabkit.experiments.inference import (
    inference_parameters,
    inference_rules,
    training_only,
)
from colabkit.experiments.published import (
    ALYAFEAI_2018_MNIST_CNN,
    ALYAFEAI_2018_SOURCE,
    RAGAB_FRAMEWORKS,
    RAGAB_SOURCE,
)
from colabkit.training.choices import BATCH_SIZE_MEANINGS, LR_SCALING_RULES, MIXED_PRECISION_CHOICES


EXPERIMENT = Experiment(
    name="cnn_mnist",
    notebook="notebooks/cnn_mnist.ipynb",
    docs="docs/sources.md#cnn-on-mnist-batch-size-on-gpu-vs-tpu-alyafeai-2018-gpuvstpu-notebook",
    title="CNN on MNIST",
    measures="Epoch, step and per-sample time of a small CNN per batch size and device; test accuracy",
    parameters=(
        device_parameter('"cpu", "gpu", "tpu", "auto"; "cpu:2", "gpu:4" for several replicas; "multiworker:N" '
                         "across machines"),
        backend_parameter(),
        *inference_parameters("1,32,256,max"),
        *training_only(Parameter("batch_size", int, 256, "Alyafeai 2018 swept 256, 512 and 1024", minimum=1),
        Parameter("batch_size_is", str, "per_replica", "how batch_size splits over replicas (global: a share each)",
                  choices=BATCH_SIZE_MEANINGS),
        Parameter("epochs", int, 10, "training epochs (the first is reported apart)", minimum=1),
        Parameter("learning_rate", float, 0.001, "Adam's default, as in Alyafeai 2018", minimum=0,
                  minimum_exclusive=True),
        Parameter("lr_scaling", str, "none", "linear: learning_rate x global batch / per-replica batch (an optional rule)",
                  choices=LR_SCALING_RULES),
        Parameter("target_accuracy", float, 0.98,
                  "time_to_accuracy_s: first epoch whose validation accuracy reaches this", minimum=0, maximum=1)),
        Parameter("mixed_precision", str, "none", "Keras dtype policy (none: float32)", choices=MIXED_PRECISION_CHOICES),
        Parameter("steps_per_execution", int, 1, "must stay 1 on the torch backend", minimum=1),
        Parameter("data_source", str, "auto", '"auto" (real, else the offline substitute), "real", "offline"',
                  choices=DATA_SOURCES),
        Parameter("seed", int, 0, "random seed of weights and shuffling", minimum=0),
        *training_only(Parameter("train_samples", int, "auto", 'training samples used; "auto": sized for the device '
                                 '(10,000 on a CPU, all elsewhere)', minimum=1, zero_means="the whole training set",
                                 auto="sized for the device")),
        Parameter("test_samples", int, "auto", 'test samples used; "auto": sized for the device (2,000 on a '
                  "CPU, all elsewhere)", minimum=1, zero_means="the whole test set", auto="sized for the device"),
        *breakdown_parameters(),
        results_path_parameter("cnn_mnist"),
    ),
    metrics=("epoch_time_first_s", "epoch_time_steady_s", "step_time_steady_ms", "sample_time_steady_us",
             "samples_per_s", "train_time_s", "global_batch_size", "replicas", "test_accuracy", "test_loss",
             *UTILISATION_METRICS, *BREAKDOWN_METRICS),
    headline=Headline("epoch_time_steady_s", "steady epoch time", "s", "lower"),
    references=(
        Reference("Alyafeai 2018, GPUvsTPU notebook", ALYAFEAI_2018_SOURCE, ALYAFEAI_2018_MNIST_CNN),
        Reference("Ragab & Ragab, Acceleration of DNN", RAGAB_SOURCE, RAGAB_FRAMEWORKS),
    ),
    constraints=(torch_runs_one_step_per_call, *PROFILE_RULES, inference_rules),
    # Alyafeai 2018's epoch times per batch size on a K80 and a TPU v2-8, of epochs of 60,000 samples.
    figures=Figures(("headline", "speedup", "fraction_of_peak", "accuracy", "where_time_goes"), bars=True,
                    published=tuple(PublishedPoint(f"Alyafeai 2018: {'K80' if kind == 'gpu' else 'TPU v2-8'}", kind,
                                                   batch, figures["epoch_time_s"], {"samples_per_epoch": 60_000})
                                    for batch, devices in ALYAFEAI_2018_MNIST_CNN.items()
                                    for kind, figures in devices.items())),
)
