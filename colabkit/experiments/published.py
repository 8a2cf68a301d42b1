"""Published figures of the works the suite rebuilds, so notebooks and reports can show them beside
our measurements.

Each table names its source by author and year (docs/sources.md lists them with their URLs). They are
other people's numbers on other hardware and software: shown for comparison, never mixed into our
results.
"""

from __future__ import annotations

from typing import Any

# Alyafeai 2018, GPUvsTPU notebook: K80 GPU vs TPU v2-8, Keras on TF 1.x, 10 epochs, first epoch
# left out. Per-sample time: old Keras printed microseconds per *sample*.
ALYAFEAI_2018_MNIST_CNN: dict[int, dict[str, dict[str, float]]] = {
    256: {"gpu": {"epoch_time_s": 6, "sample_time_us": 94}, "tpu": {"epoch_time_s": 6, "sample_time_us": 97}},
    512: {"gpu": {"epoch_time_s": 5, "sample_time_us": 82}, "tpu": {"epoch_time_s": 3, "sample_time_us": 58}},
    1024: {"gpu": {"epoch_time_s": 4, "sample_time_us": 79}, "tpu": {"epoch_time_s": 2, "sample_time_us": 37}},
}
ALYAFEAI_2018_SOURCE = "Alyafeai 2018, GPUvsTPU notebook: Tesla K80 vs TPU v2-8, Keras/TF 1.x, mean of epochs 2-10"

# Sarkar 2018 Cloud TPU blog (Colab's 2018 tpu.ipynb adapted; N=4096, COUNT=100). The author warns
# these hold errors: 15.70 TFLOPS exceeds a K80's datasheet peak.
SARKAR_2018_MATMUL: dict[str, dict[str, float]] = {
    "cpu": {"tflops": 0.53, "tflops_low": 0.47},
    "gpu": {"tflops": 15.70},  # "K80", 29x over CPU
    "tpu": {"tflops_cold": 35.47, "tflops_warm": 158.91},  # TPU v2-8: 75x cold, 338x warm over CPU
}
# Its warm speedups over its CPU (0.47-0.53 TFLOPS), as published: (device, kind, speedup).
SARKAR_2018_SPEEDUPS = (("K80", "gpu", 29.0), ("TPU v2-8", "tpu", 338.0))
SARKAR_2018_SOURCE = ("Sarkar 2018 Cloud TPU blog (Colab's 2018 tpu.ipynb adapted): N=4096, COUNT=100; "
                      "CPU 0.47-0.53, K80 15.70, TPU v2-8 35.47 cold / 158.91 warm")

# Ragab & Ragab, Acceleration of DNN: one CNN on MNIST, same hyperparameters, three frameworks;
# total training time, test accuracy.
RAGAB_FRAMEWORKS: dict[tuple[str, str], dict[str, float]] = {
    ("tensorflow", "cpu"): {"train_time_s": 1286.5, "test_accuracy": 0.9275},
    ("tensorflow", "gpu"): {"train_time_s": 77.8, "test_accuracy": 0.9294},
    ("tensorflow", "tpu"): {"train_time_s": 268.8, "test_accuracy": 0.964},
    ("torch", "cpu"): {"train_time_s": 3961.7, "test_accuracy": 0.9434},
    ("torch", "gpu"): {"train_time_s": 751.8, "test_accuracy": 0.9438},
    ("jax", "gpu"): {"train_time_s": 95.0, "test_accuracy": 0.979},
}
RAGAB_SOURCE = ("Ragab & Ragab, Acceleration of DNN: an MNIST CNN in TF, PyTorch, JAX whose model, batch size "
                "and epochs are not stated; empty cells were never run")

# Kimm, Paik & Kimm 2021 (MCSoC): claims, not a table of numbers.
KIMM_2021_CLAIMS = (
    "CPU 25x slower than GPU/TPU at 128 units; 55x at 256 units",
    "TPU better with large batches and many units; GPU better with small ones",
)
KIMM_2021_SOURCE = "Kimm, Paik & Kimm 2021 (MCSoC): dBLSTM on UCI HAR, batch 64/128, 30 epochs"
# The paper's claims as points: CPU time / GPU-or-TPU time at 128 and 256 units per layer.
KIMM_2021_RATIOS = {128: 25.0, 256: 55.0}
# The "LSTM for HAR" tutorial whose layout the paper's code follows: LSTM(100) on the 9 inertial
# signals of the real UCI HAR, test accuracy as mean (+/- std) over repeats.
HAR_LSTM_TUTORIAL = {"test_accuracy": 0.897, "test_accuracy_std": 0.014}
HAR_LSTM_TUTORIAL_SOURCE = ("the 'LSTM for HAR' tutorial the code of Kimm, Paik & Kimm 2021 follows: LSTM(100) on "
                            "real UCI HAR inertial signals, about 89.7% (+/-1.4) test accuracy")

# Hvass-Labs tutorial #23 (the weather GRU that Sarkar 2018 ran on Colab): GTX 1070.
HVASS_WEATHER = {"test_loss": 0.0022, "epoch_time_s": 150.0}
HVASS_SOURCE = "Hvass-Labs TensorFlow tutorial #23: test loss ~0.0022, ~2.5 min/epoch on a GTX 1070"

# The weather GRU's published epoch times: Hvass's (100 steps of batch 256 x 1344 per epoch) and
# Sarkar 2018's Colab runs (10 epochs x 10 steps, no validation data; the CPU run ran out of
# memory, so it has no figure).
WEATHER_GRU_EPOCHS: tuple[dict[str, Any], ...] = (
    {"source": "Hvass-Labs tutorial #23, GPU (GTX 1070)", "steps_per_epoch": 100, "epoch_time_s": 150.0},
    {"source": "Sarkar 2018, Colab GPU", "steps_per_epoch": 10, "epoch_time_s": 43.0,
     "note": "42-44 s per epoch, 7 min 12 s wall for 10 epochs"},
    {"source": "Sarkar 2018, Colab TPU v2-8", "steps_per_epoch": 10, "epoch_time_s": 5.0,
     "epoch_time_first_s": 14.0, "note": "first epoch 14 s, then about 5 s"},
)
WEATHER_GRU_SOURCE = ("Hvass-Labs tutorial #23 (GTX 1070, ~2.5 min per 100-step epoch) and Sarkar 2018 Cloud TPU "
                      "blog's Colab runs (10 steps per epoch, no validation); step time = epoch time / steps")


# Wang, Wei & Brooks 2020 (ParaDnn; arXiv 1907.10701 and its 2020 slides): headline speedups on
# TPU v2/v3 and a V100 GPU, TF 1.x, their own models and precisions (bf16 TPU, fp16 GPU).
PARADNN_SOURCE = "Wang, Wei & Brooks 2020, ParaDnn"
PARADNN_CLAIMS: list[dict[str, Any]] = [
    {"claim": "TPU v3 over TPU v2, compute-bound FC models", "kind": "median_compute_bound", "family": "fc",
     "devices": ("TPU v2", "TPU v3"), "theirs": 2.3},
    {"claim": "TPU v3 over TPU v2, memory-bound FC models", "kind": "median_memory_bound", "family": "fc",
     "devices": ("TPU v2", "TPU v3"), "theirs": 1.5},
    {"claim": "CNNs: TPU over GPU, up to", "kind": "max", "family": "cnn", "devices": ("GPU", "TPU"), "theirs": 6.0},
    {"claim": "FC: TPU over GPU, lowest (GPU better below 1)", "kind": "min", "family": "fc",
     "devices": ("GPU", "TPU"), "theirs": 0.35},
    {"claim": "FC: TPU over GPU, highest", "kind": "max", "family": "fc", "devices": ("GPU", "TPU"), "theirs": 9.0},
]
