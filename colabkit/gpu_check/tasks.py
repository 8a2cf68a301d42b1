"""What a GPU-check worker measures (run in the worker process, colabkit.gpu_check.worker).

Each task takes and returns JSON-able values; one that cannot run here returns {"unavailable": why}.
Tasks: facts (TensorFlow's GPUs), power (NVML idle power and limit), bandwidth (a triad on the GPU,
12 bytes per element), matmul and clock (colabkit.measure against the pipelined clock on TensorFlow,
JAX or PyTorch), fit (a bare Keras fit of a notebook's model with FLOPs, TFLOPS, MFU, energy).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

BYTES_PER_TRIAD_ELEMENT = 12  # read x, read c, write x: 4 bytes each (float32)
ENERGY_MIN_WINDOW_S = 0.25  # the energy fit's epochs (about 0.5 s: training.FC_EPOCH_S) are measured, coarse as they are


def facts() -> dict[str, Any]:
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    details = [tf.config.experimental.get_device_details(gpu) for gpu in gpus]
    capability = details[0].get("compute_capability") if details else None
    return {"names": [detail.get("device_name", "") for detail in details],
            "compute_capability": list(capability) if capability else None,
            "tf32_enabled": bool(tf.config.experimental.tensor_float_32_execution_enabled()),
            "tensorflow": tf.__version__, "built_with_cuda": bool(tf.test.is_built_with_cuda())}


def power() -> dict[str, Any]:
    """The first used GPU's board power at rest and its limit (colabkit.device.nvml.idle_power)."""
    from colabkit.device.nvml import idle_power

    return idle_power()


def bandwidth(elements: int = 2 ** 26, iterations: int = 20, repeats: int = 5) -> dict[str, Any]:
    """GB/s of `iterations` passes of x = x + q*c over float32 arrays of `elements`, in one XLA call
    (x carries from pass to pass, so no pass can be skipped or hoisted out of the loop)."""
    import tensorflow as tf

    from colabkit.timing.clock import measure

    with tf.device("/GPU:0"):
        x = tf.random.uniform((elements,), seed=1)
        c = tf.random.uniform((elements,), seed=2)

    @tf.function(jit_compile=True)
    def triad(x: Any, c: Any) -> Any:
        _, out = tf.while_loop(lambda step, _: step < iterations, lambda step, a: (step + 1, a + 0.001 * c),
                               (tf.constant(0), x))
        return out[:1]  # one element comes back to the host: the loop is done, nothing large is copied

    timing = measure(lambda: triad(x, c), repeats=repeats, warmup=1)
    credited = BYTES_PER_TRIAD_ELEMENT * elements * iterations
    return {"gb_per_s": credited / timing.median_s / 1e9, "best_gb_per_s": credited / timing.min_s / 1e9,
            "elements": elements, "iterations": iterations, "seconds": list(timing.warm_s),
            "method": f"x = x + q*c over 2 float32 arrays of {elements * 4 / 2**20:.0f} MiB, {iterations} passes in "
                      "one XLA call, 12 bytes credited per element and pass, median of "
                      f"{repeats} calls (colabkit.measure)"}


def _comparison(backend: str, n: int, dtype: str, tf32_capable: bool, rounds: int, repeats: int,
                chain: int, on_gpu: bool = True) -> dict[str, Any]:
    from colabkit.timing.pipelined import calibrated_workload, compare_clock

    workload = calibrated_workload(backend, n, dtype, on_gpu=on_gpu, tf32_capable=tf32_capable)
    return compare_clock(workload, repeats=repeats, chain=chain, rounds=rounds).as_dict()


def matmul(n: int, dtype: str, tf32: bool, tf32_capable: bool, rounds: int = 3, repeats: int = 5,
           chain: int = 5) -> dict[str, Any]:
    """The chained product on TensorFlow at `dtype`, TF32 on or off for this measurement only."""
    import tensorflow as tf

    tf.config.experimental.enable_tensor_float_32_execution(tf32)
    try:
        return _comparison("tensorflow", n, dtype, tf32_capable, rounds, repeats, chain)
    finally:
        tf.config.experimental.enable_tensor_float_32_execution(True)  # TensorFlow's default


def clock(backend: str, n: int, dtypes: list[str], tf32_capable: bool, rounds: int = 3, repeats: int = 5,
          chain: int = 5, device: str = "gpu") -> dict[str, Any]:
    """colabkit's clock on JAX or PyTorch at each dtype, where that backend sees a GPU (`device` "cpu": on the
    CPU, the device run's rehearsal)."""
    if device == "cpu":
        return {"device": "CPU", "comparisons": [_comparison(backend, n, dtype, False, rounds, repeats, chain,
                                                             on_gpu=False) for dtype in dtypes]}
    if backend == "jax":
        import jax

        try:
            gpus = jax.devices("gpu")
        except RuntimeError as error:  # JAX raises this for a platform it does not have
            first_line = str(error).splitlines()[0] if str(error) else type(error).__name__
            return {"unavailable": f"JAX here sees no GPU ({first_line}): pip install 'jax[cuda12]'"}
        name = gpus[0].device_kind
    else:
        import torch

        if not torch.cuda.is_available():
            return {"unavailable": f"PyTorch {torch.__version__} sees no CUDA GPU "
                                   f"(built for CUDA {torch.version.cuda})"}
        name = torch.cuda.get_device_name(0)
    return {"device": name, "comparisons": [_comparison(backend, n, dtype, tf32_capable, rounds, repeats, chain)
                                            for dtype in dtypes]}


def _cnn(keras: Any, batch_size: int, samples: int, **_: Any) -> tuple[Any, dict[str, Any], int]:
    import numpy as np

    from colabkit.suite import notebook_function
    from colabkit.training.bare_fit import shuffled_batches

    rng = np.random.default_rng(0)
    x = rng.random((samples, 28, 28, 1), dtype=np.float32)
    y = keras.utils.to_categorical(rng.integers(0, 10, samples), 10)
    model = notebook_function("cnn_mnist", "build_cnn", keras=keras)()
    # The notebook's compile arguments: Adam(1e-3), categorical cross-entropy, accuracy.
    compile_args = {"optimizer": keras.optimizers.Adam(1e-3), "loss": "categorical_crossentropy",
                    "metrics": ["accuracy"]}
    return model, {"compile": compile_args, **shuffled_batches(x, y, batch_size)}, samples


def _fc(keras: Any, batch_size: int, steps: int, knobs: dict[str, int], **_: Any) -> tuple[Any, dict[str, Any], int]:
    import numpy as np
    import tensorflow as tf

    from colabkit.suite import notebook_function

    rng = np.random.default_rng(0)  # ParaDnn's data: one synthetic batch, repeated every step
    x = rng.uniform(-0.5, 0.5, size=(batch_size, knobs["input_size"])).astype("float32")
    y = rng.integers(0, knobs["output_size"], size=(batch_size,)).astype("int32")
    model = notebook_function("paradnn", "build_fc", keras=keras)(**knobs)
    # The notebook's optimiser and loss (ParaDnn's RMSProp settings).
    compile_args = {"optimizer": keras.optimizers.RMSprop(learning_rate=0.1, rho=0.9, momentum=0.9, epsilon=1.0),
                    "loss": keras.losses.SparseCategoricalCrossentropy(from_logits=True)}
    return model, {"compile": compile_args, "x": tf.data.Dataset.from_tensors((x, y)).repeat(),
                   "steps_per_epoch": steps}, steps * batch_size


_MODELS: dict[str, Callable[..., tuple[Any, dict[str, Any], int]]] = {"cnn": _cnn, "fc": _fc}


def fit_model(model: str, jit_compile: str | bool, policy: str, batch_size: int, epochs: int, gpu_name: str,
        tf32_capable: bool, samples: int = 0, steps: int = 0, knobs: dict[str, int] | None = None,
        energy: bool = False) -> dict[str, Any]:
    """One bare fit of the notebook's `model` ("cnn" or "fc") under dtype `policy`: steady samples/s
    (SteadyClock), model TFLOPS and MFU against `gpu_name`'s peak at the compute precision."""
    import keras
    import tensorflow as tf

    from colabkit.device.peaks import gpu_peak
    from colabkit.training.bare_fit import steady_rate
    from colabkit.training.energy import EnergyMeter
    from colabkit.training.flops import model_flops, utilisation_metrics

    keras.mixed_precision.set_global_policy(policy)
    keras.utils.set_random_seed(0)
    try:
        network, fit_args, samples_per_epoch = _MODELS[model](keras, batch_size=batch_size, samples=samples,
                                                              steps=steps, knobs=knobs or {})
        network.compile(**fit_args.pop("compile"), jit_compile=jit_compile)
        # The energy fit's epochs are sized for about FC_EPOCH_S (0.5 s): each is measured, though the counter's steps
        # (about 100 ms) make one epoch's figure coarse; power is sampled beside the counter, to compare the two.
        meters = [EnergyMeter("gpu", 1, batch_size, min_window_s=ENERGY_MIN_WINDOW_S),
                  EnergyMeter("gpu", 1, batch_size, min_window_s=ENERGY_MIN_WINDOW_S, sampled=True)] if energy else []
        rate, epoch_s = steady_rate(network, samples_per_epoch, epochs, meters, **fit_args)
        compute_dtype = str(network.dtype_policy.compute_dtype)
        tf32 = tf32_capable and bool(tf.config.experimental.tensor_float_32_execution_enabled())
        precision = "tf32" if compute_dtype == "float32" and tf32 else compute_dtype
        peak = gpu_peak(gpu_name, precision, 1)
        flops = model_flops(network)
        fields = utilisation_metrics(flops, rate, peak.tflops if peak else None,
                                     peak_reason=None if peak else f"no {precision} peak for {gpu_name}")
        return {"samples_per_s": rate, "epoch_s": epoch_s[0], "model_tflops": fields["model_tflops"],
                "mfu": fields["mfu"], "mfu_reason": fields["mfu_reason"], "precision": precision,
                "compute_dtype": compute_dtype, "jit_compile": bool(network.jit_compile),
                "train_flops_per_sample": flops.train_per_sample, "samples_per_epoch": samples_per_epoch,
                "energy": meters[0].metrics() if meters else None,
                "energy_sampled": meters[1].metrics() if meters else None}
    finally:
        keras.mixed_precision.set_global_policy("float32")
        keras.backend.clear_session()


TASKS: dict[str, Callable[..., dict[str, Any]]] = {"facts": facts, "power": power, "bandwidth": bandwidth,
                                                   "matmul": matmul, "clock": clock, "fit": fit_model}


def run_task(request: dict[str, Any]) -> dict[str, Any]:
    """Run the task a request names with the request's other fields as arguments."""
    arguments = dict(request)
    task = arguments.pop("task", None)
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r} (known: {', '.join(TASKS)})")
    return TASKS[task](**arguments)
