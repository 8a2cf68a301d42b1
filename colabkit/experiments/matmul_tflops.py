"""Matmul TFLOPS: chained n x n matrix products per device, size, dtype and backend."""

from collections.abc import Mapping
from typing import Any

from colabkit.experiments.declaration import (
    Experiment,
    Figures,
    Headline,
    Parameter,
    PublishedPoint,
    Reference,
    backend_parameter,
    device_parameter,
    replicas_of,
    results_path_parameter,
)
from colabkit.experiments.published import SARKAR_2018_MATMUL, SARKAR_2018_SOURCE, SARKAR_2018_SPEEDUPS

DTYPES = ("float32", "bfloat16", "float16")
# The notebook holds the chained product twice, in TensorFlow and in JAX (no PyTorch version).
MATMUL_BACKENDS = ("auto", "tensorflow", "jax")


def _jax_always_compiles(values: Mapping[str, Any]) -> str | None:
    if values["backend"] == "jax" and values["jit_compile"] is False:
        return "jit_compile = False: expected \"auto\" or True on the jax backend (jax.jit always compiles with XLA)"
    return None


def _tf32_needs_a_gpu(values: Mapping[str, Any]) -> str | None:
    kind = str(values["device"]).partition(":")[0]
    if values["tf32"] is True and kind in ("cpu", "tpu"):
        return f"tf32 = True: TF32 tensor cores exist on GPUs only (compute capability 8.0 on), not on {kind}"
    return None


def _run_flops(values: Mapping[str, Any]) -> float:
    """FLOPs of one run: count chained n x n products (2 n^3 each) per call, per replica, for the cold
    call, the discarded warm-up calls and the timed ones (the CPU's BLAS baseline not counted)."""
    calls = 1 + values["warmup"] + values["timed_calls"]
    return 2.0 * values["n"] ** 3 * values["count"] * replicas_of(values) * calls


EXPERIMENT = Experiment(
    name="matmul_tflops",
    notebook="notebooks/matmul_tflops.ipynb",
    docs="docs/sources.md#matmul-tflops-sarkar-2018-cloud-tpu-blog",
    title="Matmul TFLOPS",
    measures="Matrix-multiply throughput (TFLOPS), cold and warm, per device, matrix size and dtype",
    parameters=(
        device_parameter('"cpu", "gpu", "tpu", "auto" (TPU, else GPU, else CPU); "cpu:2", "gpu:4" for several '
                         "replicas"),
        backend_parameter(MATMUL_BACKENDS, '"tensorflow", "jax" or "auto" (JAX on a TPU, TensorFlow elsewhere)'),
        Parameter("n", int, 1024, "matrix size (n x n): this notebook's batch-size axis", minimum=1),
        Parameter("count", int, 10, "products chained inside one compiled call (Sarkar 2018 used 100)", minimum=1),
        Parameter("dtype", str, "float32", "element type of the matrices", choices=DTYPES),
        Parameter("tf32", (str, bool), "auto",
                  'float32 products on TF32 tensor cores (GPUs of compute capability 8.0 on): "auto" (the framework\'s '
                  'default: on in TensorFlow and in JAX\'s default precision), True, False (true float32: TF32 off, '
                  'JAX precision "highest")',
                  choices=("auto", True, False)),
        Parameter("jit_compile", (str, bool), "auto",
                  'XLA on TensorFlow: "auto" (on for GPU and TPU, off on CPU where oneDNN graphs are faster), True, '
                  "False; JAX always compiles",
                  choices=("auto", True, False)),
        Parameter("timed_calls", int, 5, "warm calls timed inside this run (the sweep's `repeats` are separate runs)",
                  minimum=1),
        Parameter("warmup", int, 1, "calls after the cold one that are discarded", minimum=0),
        Parameter("blas_baseline", bool, True, "on CPU, also time NumPy's BLAS on the same n in the same run"),
        results_path_parameter("matmul_tflops"),
    ),
    metrics=("tflops_cold", "tflops_warm", "tflops_warm_min", "tflops_warm_max", "replicas", "xla", "precision"),
    headline=Headline("tflops_warm", "warm matmul TFLOPS", "TFLOPS", "higher"),
    references=(Reference("Sarkar 2018 Cloud TPU blog", SARKAR_2018_SOURCE, SARKAR_2018_MATMUL),),
    # Sarkar 2018's bars of TFLOPS per device, warm, at n = 4096 (100 chained products per call), and its speedups.
    figures=Figures(("headline", "speedup", "fraction_of_peak"), axis="n", bars=True, published=(
        *(PublishedPoint(f"Sarkar 2018: {name}", kind, 4096, SARKAR_2018_MATMUL[kind][key])
          for name, kind, key in (("CPU", "cpu", "tflops"), ("K80", "gpu", "tflops"), ("TPU v2-8", "tpu", "tflops_warm"))),
        *(PublishedPoint(f"Sarkar 2018: {name}", kind, 4096, value, figure="speedup")
          for name, kind, value in SARKAR_2018_SPEEDUPS))),
    constraints=(_jax_always_compiles, _tf32_needs_a_gpu),
    work_flops=_run_flops,
)
