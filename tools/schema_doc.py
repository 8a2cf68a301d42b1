"""docs/records.md, rendered from the code that writes records, so the page cannot drift from it.

The top-level fields, which of them are required and the statuses come from colabkit.records.record
(FIELD_DOCS, REQUIRED_FIELDS, STATUSES, SCHEMA_VERSION); the sections below describe the nested
parts whose keys the code fixes (a test checks every key the producers write is described here).

    python tools/schema_doc.py           # rewrite docs/records.md
    python tools/schema_doc.py --check   # exit 1 if it is out of date
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from colabkit.io import write_atomic
from colabkit.records.record import FIELD_DOCS, REQUIRED_FIELDS, SCHEMA_VERSION, STATUSES
from colabkit.records.schema import ErrorKind

RECORDS_DOC = "docs/records.md"

# error.kind: how a run failed, or why it was skipped (the ErrorKind vocabulary the sweep writes).
ERROR_KINDS: dict[str, str] = {
    ErrorKind.EXCEPTION: "a cell raised an exception (`type` and `message` are the exception's)",
    ErrorKind.OOM: "out of memory: ResourceExhaustedError, CUDA/TPU out-of-memory messages",
    ErrorKind.TIMEOUT: "the run took longer than the sweep's `--timeout`",
    ErrorKind.DEAD_KERNEL: "the kernel process died while a cell ran (`exit_code`: e.g. -9, the OOM killer)",
    ErrorKind.KERNEL_START: "no kernel came up (unknown kernel name, or start-up failed on every try)",
    ErrorKind.SWEEP: "the sweep's own machinery failed around the run (the message says what)",
    ErrorKind.WORKER_DIED: "the process running it died: a sweep worker (`--jobs N`), or a Dask worker on every try (`--cluster`)",
    ErrorKind.MULTI_WORKER: "a worker of a multi-worker run failed; the message names it",
    ErrorKind.MISSING_RECORD: "the notebook finished but wrote no readable record",
    ErrorKind.HTML_EXPORT: "the run finished but its HTML export failed",
    ErrorKind.SKIPPED: "never ran: the device is not on this machine, or the combination is not supported",
    ErrorKind.NOT_A_MEASUREMENT: "the run finished but a figure cannot be a measurement (0 FLOPs, no samples, a NaN loss)",
    ErrorKind.FILESYSTEM: "the output folder failed the run: a full disk, no permission, a file where a folder goes",
    ErrorKind.CLUSTER: "a sweep on a Dask cluster: the task could not run on its worker (the message says why)",
    ErrorKind.COLAB: "a sweep on Colab (`--colab`): its session was refused, lost or out of time, or its record "
                     "did not come back (the message says which)",
}
ERROR_KEYS: dict[str, str] = {
    "type": "the exception's class name (`DeviceNotAvailable` for skipped runs)",
    "kind": "one of the kinds below",
    "message": "what went wrong, in words (cut at a few thousand characters)",
    "cell": "the failing cell's index in the notebook as stored (0-based)",
    "exec_count": "its `In [n]` in the executed notebook",
    "source": "its code",
    "exit_code": "the dead kernel's exit status (negative: the signal)",
    "chief_error": "a failed multi-worker run: the chief's own exception, with the same keys (type, kind, message, "
                   "cell, exec_count, source)",
}
FINGERPRINT_KEYS: dict[str, str] = {
    "digest": "SHA-256 of every part below but `git_commit`; equal digests mean the same result",
    "notebook_sha256": "the notebook's cell types and sources (not outputs or metadata)",
    "params": "the combination's parameters",
    "colabkit": "colabkit's version",
    "code_sha256": "colabkit's code: every .py file of the package, so uncommitted edits count too",
    "tensorflow": "the installed TensorFlow's version (read from package metadata)",
    "git_commit": "the commit of that code (as in the record's `git_commit`), to say which it was; not in the digest",
}
SWEEP_KEYS: dict[str, str] = {
    "jobs": "how many combinations ran side by side (`--jobs`); 1 for published numbers",
    "cuda_visible_devices": "the GPUs this run was given, when the sweep chose them",
    "target_ci": "with `--target-ci`: the half-width of the headline's 95 % interval, relative to its median, that "
                 "the sweep ran repeats for (0.03: +/- 3 %), and `max_repeats`, where it stopped trying",
    "max_repeats": "with `--target-ci`: the most runs of one combination it would make",
    "quiet_wait": "with `--wait-quiet`: the most it was to wait (`max_wait_s`, the option's seconds), how long the "
                  "sweep waited for a quiet host before the run (`waited_s`), whether it got one (`quiet`) and, if "
                  "not, why (`busy_reasons`)",
    "bottlenecks": "`first` where the grid asked for the bottleneck passes in each combination's first run only "
                   "(`bottlenecks: first`): the later repeats ran with `params.breakdown` false",
}
HOST_STATE_KEYS: dict[str, str] = {
    "wall_s": "the run's wall time, from `start_run` to the record",
    "own_cpu_s": "CPU time of the notebook's process and the children it waited for (the NumPy baseline's)",
    "parent_cpu_s": "CPU time of the process that started it (the sweep or Jupyter, which waits for it)",
    "other_cpu_s": "CPU time every other process took meanwhile (from /proc/stat)",
    "other_cpu_share": "`other_cpu_s` over wall time x logical CPUs",
    "steal_share": "time the hypervisor took from the VM's CPUs, over all CPU time",
    "cpus": "the logical CPUs /proc/stat counts",
    "load_before": "the 1, 5 and 15 minute load averages when the run started",
    "load_after": "the same when it wrote its record",
    "cpu_mhz": "the range (`min`, `max`) of every CPU's clock read during the run",
    "gpu": "NVIDIA GPUs through NVML: `available` (else `reason`), `gpus`, `readings`, `sm_mhz` range, "
           "`throttle_reasons` seen, `other_pids` of other processes on them, `busy_reasons`",
    "quiet": "the verdict, as `host_quiet` repeats it",
    "busy_reasons": "each threshold passed, in words; empty when quiet",
    "thresholds": "the thresholds applied: `other_cpu_share_max`, `steal_share_max`, `cpu_clock_spread_max`",
}
HOST_KEYS: dict[str, str] = {
    "hostname": "the machine's name",
    "platform": "OS and kernel, as Python's platform module says",
    "cpu_model": "the CPU's model name",
    "cpu_cores": "logical cores this process may use",
    "cpu_physical_cores": "physical cores behind them (hyperthreads counted once; null when the machine does not say)",
    "memory_gib": "physical memory",
    "colab": "whether this is a Google Colab runtime",
    "colab_runtime": "on Colab: its release tag, accelerator, TPU type and chips; null elsewhere",
}
SOFTWARE_KEYS: dict[str, str] = {
    "python": "the interpreter's version",
    "colabkit": "installed versions, for each package present: colabkit, tensorflow, keras, numpy, pandas, "
                "papermill, jax, jaxlib, torch",
    "tf_cuda_build": "the CUDA version TensorFlow was built with (when TensorFlow was imported)",
    "tf_cudnn_build": "the cuDNN version TensorFlow was built with",
    "tf_is_cuda_build": "whether TensorFlow is a CUDA build",
    "keras_backend": "the Keras backend that ran (tensorflow, jax, torch), when Keras was imported",
}
# Package versions are listed under "colabkit" above (one line for all of them).
SOFTWARE_PACKAGES = ("colabkit", "tensorflow", "keras", "numpy", "pandas", "papermill", "jax", "jaxlib", "torch")
DEVICE_KEYS: dict[str, str] = {
    "requested": "the `device` parameter as given (`auto`, `cpu`, `gpu:2`, `tpu`, `multiworker:2`...)",
    "request": "the same, parsed once: `kind` (auto, cpu, gpu, tpu, multiworker) and `count` (null where the name "
               "gives none); readers use it rather than parsing `requested` (records written before it have none: "
               "colabkit.records derives it when loading them)",
    "kind": "what it resolved to: cpu, gpu, tpu or multiworker",
    "replicas": "how many replicas the strategy runs (GPUs, TPU cores, logical CPUs, workers x devices)",
    "strategy": "the tf.distribute strategy (the default strategy on one device, MirroredStrategy, TPUStrategy...), or the "
                "other backend's equivalent",
    "backend": "the backend that ran: tensorflow, jax or torch, never `auto` (`params.backend` keeps what was asked; "
               "`auto` is JAX on a TPU, TensorFlow elsewhere); runs on two backends are two results",
    "name": "the device model (`Tesla T4`, `TPU v2-8`, the CPU's model name)",
}

BREAKDOWN_KEYS: dict[str, str] = {
    "measured": "whether the passes ran (false with `breakdown=False`, without a steady throughput, across machines)",
    "reason": "why not, when not measured",
    "backend": "the Keras backend the passes ran on",
    "device_kind": "cpu, gpu or tpu",
    "device_is": "what \"device\" means here: on a CPU the host's own cores, which also run the input pipeline and "
                 "Python",
    "samples_per_s": "the run's own steady throughput (as `metrics.samples_per_s`)",
    "memory_samples_per_s": "the same steps at the run's steps_per_execution on one batch repeated from memory",
    "global_batch_size": "samples per step",
    "steps_per_execution": "the run's",
    "input": "the input pass: `samples_per_s`, `batches`, `samples`, `seconds`, `warmup_batches`, `batches_per_pass`",
    "memory": "the fed-from-memory pass: `samples_per_s`, `steps_per_epoch`, `epochs`, `first_epoch_s`, `step_ms`",
    "device": "the device pass, the same keys",
    "roofline_bound": "compute or memory by the roofline, asked only when the device's share is the largest",
    "roofline_from": "where that answer came from (or why there is none)",
    "method": "how each figure was measured, in words: `input`, `memory`, `device`, `shares`",
    "seconds": "what the extra measurement cost: `input`, `memory`, `device`, `profile`, `roofline`, `total`",
}
# `metrics` gains from it (colabkit.training.shares.BREAKDOWN_METRICS):
BREAKDOWN_METRIC_DOCS: dict[str, str] = {
    "input_samples_per_s": "the run's input pipeline iterated alone, no model",
    "device_samples_per_s": "the same training step on one batch on the device, many steps per execution",
    "input_wait_share": "share of a step spent waiting on input: (t_run - t_memory) / t",
    "host_share": "share of a step lost to the host (dispatch, callbacks, Python): (t_memory - t_device) / t",
    "device_share": "share of a step the device computes: t_device / t (t = 1/throughput per sample; shares sum to 1)",
    "bound_by": "input, host, or by the roofline compute or memory (device when the roofline is unknown): the "
                "largest share",
}
OP_BREAKDOWN_KEYS: dict[str, str] = {
    "profiler": "tf.profiler.experimental, jax.profiler or torch.profiler",
    "steps": "training steps in the profiled window (whole executions), after one warm-up epoch of as many",
    "trace_dir": "the trace, beside the record: `tensorboard --logdir` it (with `pip install xprof`)",
    "trace_files": "the trace's files under it",
    "open_with": "the command that opens it",
    "wall_s": "the window's wall time, device work finished",
    "converter": "what summarised the trace (`xprof <version> framework_op_stats`; torch.profiler's key_averages)",
    "reason": "why the trace was not summarised (xprof absent; JAX on a CPU), else null",
    "cores": "the host's logical cores",
    "basis": "`device` (a GPU's or TPU's kernels) or `host` (a CPU: the op threads' time)",
    "categories": "shares of the window's time per category: matmul, convolution, elementwise, reduction, optimizer, "
                  "copy (host-device), input, other, idle; they sum to 1",
    "busy_categories": "the same without idle, as shares of the busy time",
    "category_seconds": "the seconds behind `categories`",
    "total_s": "all time counted (on a CPU summed over the op threads)",
    "busy_s": "time in operations",
    "idle_s": "the idle time",
    "idle_is": "what the converter counts as idle",
    "idle_explained": "what the idle time holds, from the numbers and the breakdown's shares",
    "busy_cores": "on a CPU: cores kept busy by operations on average (busy_s / wall_s)",
    "top_ops": "the operations with the most self time: type, operation, category, occurrences, self_s, share",
    "shares_of_a_step": "the breakdown's input wait, host and device shares, beside the profile",
    "seconds": "what the profiling pass took, summary included",
}

INFERENCE_KEYS: dict[str, str] = {
    "confidence": "the level every interval aims at (0.95); each percentile states the coverage its ranks reach",
    "single_stream": "`queries` timed at batch 1 after `warmup_queries` and the first call (`first_call_s`), every "
                     "latency (`latencies_ms`, in order), the `method`, and `percentiles`: per percentile (50, 90, 99) "
                     "its `estimate_ms`, the interval `low_ms`-`high_ms` from order statistics (null below "
                     "`min_queries`, with a `note`) and the `coverage` those ranks reach; the `settings` it had to reach "
                     "(`min_query_count`, `min_duration_s`, `max_duration_s`), the `duration_s` it ran, whether it met "
                     "both (`valid`) and the one met last (`binding`); `energy`: the energy of its timed queries "
                     "(an energy window's keys, under Energy; per inference: per query)",
    "offline": "per batch size: `samples_per_s` (the median over `runs`, this run's timed passes) with its interval `low`-`high` (within this run) and `note`, "
               "`samples_per_s_runs`, `calls_per_run`, `first_call_s` (tracing, compilation); for a sequence model "
               "given `tokens_per_sample`, `tokens_per_s` with `tokens_low`-`tokens_high` (a decoder's prefill); "
               "`settings`, `duration_s`, `valid` and `binding` as single-stream's (its queries: runs); "
               "`inferences`, the samples its timed runs inferred, and the energy of those runs (an energy window's "
               "keys, under Energy)",
    "offline_method": "how the offline figures were measured, in words",
    "max_batch": "where `max` was asked: the largest power-of-two `batch` the memory estimate allows (`estimate`, "
                 "`cap`, `per_sample_bytes`, `weights_bytes`, `device_memory_bytes`, `fraction`) and `how`; else null",
}
INFERENCE_METRIC_DOCS: dict[str, str] = {
    "latency_p50_ms, latency_p90_ms, latency_p99_ms": "the single-stream percentiles (NumPy's linear interpolation)",
    "latency_pNN_low_ms, latency_pNN_high_ms": "their order-statistic interval within this run, from its queries (null with too few queries)",
    "latency_queries": "the latencies behind them; `latency_min_queries_p99` the fewest that give p99 an interval",
    "latency_mean_ms, latency_first_call_ms": "the mean latency; the first call's (tracing, compilation)",
    "latency_duration_s, latency_binding": "how long the single-stream queries ran; the minimum that bound them "
                                           "(`min_query_count` or `min_duration`)",
    "inference_valid": "every scenario met both its minimums (false: the record is failed, not a measurement)",
    "offline_samples_per_s, offline_batch": "the highest offline throughput and the batch that reached it",
    "offline_samples_per_s_bN": "the offline throughput at batch N",
    "offline_tokens_per_s": "a sequence model's: `offline_samples_per_s` x its tokens per sample",
}

DECODE_KEYS: dict[str, str] = {
    "rows": "one per prompt length and batch size (DECODE_ROW_KEYS)",
    "method, flop_convention, bytes_convention": "how the times were taken, the FLOPs and the bytes counted, in words",
    "seed": "the random prompts' seed (`params.seed`)",
    "max_batch": "where `max` was asked: the largest power-of-two batch the memory estimate allows; else null",
    "peak_tflops_source, bandwidth_source": "where the device's peak FLOPS and bandwidth come from",
    "compiler_source": "how the compiler's count of a step was read (XLA's cost analysis on JAX; none on TensorFlow)",
}
DECODE_ROW_KEYS: dict[str, str] = {
    "batch, prompt_length, output_tokens, max_length": "the combination; max_length = prompt + output, the cache's "
                                                       "positions",
    "refused": "only where the memory estimate refused the combination before building it: its one line",
    "prefill_first_call_s, step_first_call_s": "the programs' first calls (tracing, compilation), apart",
    "ttft_ms": "time to first token: the prompt handed over to the first tokens on the host",
    "tpot_ms": "time per output token, MLPerf's: (total - TTFT) / (output tokens - 1)",
    "tpot_p50_ms, tpot_p90_ms, step_ms": "the per-step times' (inter-token latencies') median and p90, and each step",
    "total_s, tokens_per_s": "the whole generation; batch x output tokens over it",
    "flops_per_token, step_flops": "model FLOPs per decoded token and per step (DECODE_FLOP_CONVENTION), mean over "
                                   "the steps",
    "step_bytes, step_bytes_needed, cache_bytes": "bytes a step reads (weights and the whole fixed-size cache), "
                                                  "those it must (the positions attended only), the cache allocated",
    "achieved_gb_s, within_bandwidth": "step_bytes over the median step; whether that is within `bandwidth_gb_s`",
    "compiler_step_bytes, compiler_step_flops": "XLA's cost analysis of the compiled step: bytes accessed and FLOPs "
                                                "(null on TensorFlow, which gives none)",
    "compiler_bytes_ratio, compiler_gb_s": "compiler_step_bytes over step_bytes, and over the median step",
    "compiler_cache_copies": "instructions of the compiled step's optimized HLO that transpose, copy or convert a "
                             "whole key or value cache (0: read in place, as it is)",
    "compiler_note": "only where the compiler could not be asked: why",
    "decode_tflops, decode_intensity": "a step's model FLOPs over the median step, and over step_bytes",
    "prefill_flops, prefill_bytes, prefill_tflops, prefill_intensity": "the prefill's, its FLOPs over TTFT",
    "peak_tflops, bandwidth_gb_s": "the device's ceilings the roofline draws",
    "energy_j, energy_j_per_token, mean_power_w, energy_window_s, energy_reason": "the energy of the timed "
    "generation, prefill included (an energy window's keys, under Energy; per token: per batch x output "
    "tokens)",
    "check_passed, check_max_abs_difference, check_tolerance, check_arithmetic, check_ties, check_tokens, "
    "check_rows, tokens_agree": "the cached logits against the model's full pass: the first `check_tokens` tokens "
                                "of the batch's first `check_rows` sequences",
}
DECODE_METRIC_DOCS: dict[str, str] = {
    "decode_tpot_p50_ms, decode_tpot_p90_ms, decode_tpot_ms, decode_ttft_ms, decode_achieved_gb_s": "at the "
    "smallest batch and longest prompt (`decode_batch`, `decode_prompt_length`): the headline is decode_tpot_p50_ms",
    "decode_tokens_per_s, decode_tokens_per_s_batch": "the highest output tokens/s and its batch",
    "decode_valid": "every combination's full-pass check passed (false: the record is failed)",
    "decode_refused": "combinations the memory estimate refused",
}

ENERGY_METRIC_DOCS: dict[str, str] = {
    "energy_method": "how the energy was measured (colabkit.device.energy): `counter` (the GPUs' total-energy "
                     "counters, NVML, read at each window's edges), `sampled` (the GPUs' power read every 50 ms and "
                     "integrated, where a board has no counter), `rapl` (the CPU's RAPL package and DRAM counters) or "
                     "`not measured`",
    "energy_source": "what was read, in words: the GPUs by NVML index, or the RAPL zones; null when not measured",
    "energy_reason": "why a figure is missing (nothing to read here, a window under 1 s, a reading that failed); null "
                     "when none is",
    "energy_j_per_epoch, energy_j_per_sample, mean_power_w": "training runs, over the steady epochs' training "
                                                            "steps (the first epoch left out): the median epoch's "
                                                            "joules, all their joules per training sample, their mean "
                                                            "watts",
    "single_stream_energy_j_per_inference": "inference runs: joules per query of the single-stream scenario (batch 1)",
    "offline_energy_j_per_inference, offline_energy_j_per_inference_bN": "inference runs: joules per sample inferred "
                                                                        "offline, at `offline_batch` and at batch N",
    "decode_energy_j_per_token, decode_energy_j_per_token_best": "decode runs: joules per generated token at the "
                                                                  "headline's combination (`decode_batch`, "
                                                                  "`decode_prompt_length`) and at that of "
                                                                  "`decode_tokens_per_s`",
}
ENERGY_WINDOW_KEYS: dict[str, str] = {
    "energy_j": "the joules of the window (the timed queries, runs or generation)",
    "energy_j_per_inference, energy_j_per_token": "those joules over the window's inferences or generated tokens",
    "mean_power_w": "the joules over the window's seconds",
    "energy_window_s": "the window's seconds, edge to edge",
    "energy_reason": "why the window has no figure; null when it has one",
}


def _table(header: tuple[str, str], rows: dict[str, str]) -> list[str]:
    lines = [f"| {header[0]} | {header[1]} |", "|---|---|"]
    lines += [f"| `{key}` | {text.replace('|', '/')} |" for key, text in rows.items()]
    return lines


def render() -> str:
    """The text of docs/records.md."""
    required = [name for name in FIELD_DOCS if name in REQUIRED_FIELDS]
    optional = [name for name in FIELD_DOCS if name not in REQUIRED_FIELDS]
    lines = [
        "# Records",
        "",
        "<!-- generated by `python tools/schema_doc.py` from colabkit/records/record.py; "
        "do not edit by hand -->",
        "",
        f"Every run writes one JSON record, schema version {SCHEMA_VERSION}: the contract between the notebooks and",
        "everything after them (the sweep's resume, `python -m colabkit status`, the report,",
        "`colabkit.load_results`). Records are written atomically (a temporary file, then a rename), so a",
        "killed run never leaves a half file that looks like a result. Later schema versions add fields and",
        "never rename these; a reader refuses a version it does not know.",
        "",
        f"`status` is one of {', '.join(f'`{status}`' for status in STATUSES)}. A record that is not `ok` has an",
        "`error` saying why; only `ok` records are plotted, the others are listed.",
        "",
        "## Fields every record has",
        "",
        *_table(("field", "what it holds"), {name: FIELD_DOCS[name] for name in required}),
        "",
        "## Fields some records have",
        "",
        *_table(("field", "what it holds"), {name: FIELD_DOCS[name] for name in optional}),
        "",
        "Notebooks may add further top-level fields of their own (the weather GRU adds `history`,",
        "`evaluation`, `predictions` and `windows`); readers ignore fields they do not know.",
        "",
        "## `device`",
        "",
        *_table(("key", "what it holds"), DEVICE_KEYS),
        "",
        "plus what the probe found: for a CPU its `model`, `vendor`, `family` and `model_number` (what tells its",
        "microarchitecture, docs/peaks.md), `cores`, `clock_mhz`, `clock_source`, ISA `flags` (`hypervisor`: a VM)",
        "and `arch`; for GPUs `count`, `memory_gib`, `compute_capability`, `driver` and `tf32_active`; for a",
        "TPU `accelerator_type`, `tpu_generation`, `tpu_chips`, `cores`, `hosts` and `runtime`. On JAX also",
        "`jax_devices` (the devices used), `tensorflow_in_kernel` (`kept out`: TensorFlow was never imported) and,",
        "for a TPU, `device_kind` (JAX's name of the chip, e.g. `TPU v5 lite`).",
        "",
        "## `software`",
        "",
        *_table(("key", "what it holds"), SOFTWARE_KEYS),
        "",
        "## `host`",
        "",
        *_table(("key", "what it holds"), HOST_KEYS),
        "",
        "## `error`",
        "",
        *_table(("key", "what it holds"), ERROR_KEYS),
        "",
        *_table(("kind", "when"), ERROR_KINDS),
        "",
        "## `fingerprint` (sweep runs)",
        "",
        *_table(("key", "what it holds"), FINGERPRINT_KEYS),
        "",
        "## `breakdown` (training runs)",
        "",
        "What bounds the run: docs/bottlenecks.md says how it is measured.",
        "",
        *_table(("key", "what it holds"), BREAKDOWN_KEYS),
        "",
        "and the record's `metrics` gain:",
        "",
        *_table(("metric", "what it holds"), BREAKDOWN_METRIC_DOCS),
        "",
        "## `inference` (inference runs)",
        "",
        "Runs with `params.mode` `inference` (docs/inference.md) train nothing; their record has no training",
        "figures. Its `timings` hold `single_stream_latency_s` (a summary) and `offline_samples_per_s` (per batch,",
        "each run's).",
        "",
        *_table(("key", "what it holds"), INFERENCE_KEYS),
        "",
        "and the record's `metrics` hold:",
        "",
        *_table(("metric", "what it holds"), INFERENCE_METRIC_DOCS),
        "",
        "## `decode` (decode runs)",
        "",
        "Runs with `params.mode` `decode` (docs/decode.md), the ParaDnn Transformer's, train nothing.",
        "",
        *_table(("key", "what it holds"), DECODE_KEYS),
        "",
        "Each of `rows`:",
        "",
        *_table(("key", "what it holds"), DECODE_ROW_KEYS),
        "",
        "and the record's `metrics` hold:",
        "",
        *_table(("metric", "what it holds"), DECODE_METRIC_DOCS),
        "",
        "## Energy (training, inference and decode runs)",
        "",
        "What was measured, how, and what a figure covers (the GPU board, or the CPU packages; never the whole",
        "machine): [cost.md](cost.md). The record's `metrics` hold:",
        "",
        *_table(("metric", "what it holds"), ENERGY_METRIC_DOCS),
        "",
        "and each energy window an inference or decode record measured (`inference.single_stream.energy`, each",
        "`inference.offline` row, each `decode.rows` row) holds:",
        "",
        *_table(("key", "what it holds"), ENERGY_WINDOW_KEYS),
        "",
        "## `op_breakdown` (training runs with `profile_steps` > 0)",
        "",
        *_table(("key", "what it holds"), OP_BREAKDOWN_KEYS),
        "",
        "## `sweep` (sweep runs)",
        "",
        *_table(("key", "what it holds"), SWEEP_KEYS),
        "",
        "## `host_state`",
        "",
        *_table(("key", "what it holds"), HOST_STATE_KEYS),
        "",
        "How `host_quiet` is decided, and why a busy host matters: [statistics.md](statistics.md).",
        "",
        "## Reading records",
        "",
        "```python",
        "import colabkit",
        'runs = colabkit.load_results("outputs/smoke")   # one row per record; nested fields flattened with dots',
        'ok = runs[runs["status"] == "ok"]                # e.g. ok["metrics.tflops_warm"], ok["device.name"]',
        "```",
        "",
        "Every reader (the report, `status`, `load_results`) goes through `colabkit.records.load_records`,",
        "which reads each file once. Files that are not readable records are not dropped silently: not UTF-8",
        "JSON, not a JSON object, no or an unknown `schema_version`, a missing field or a section of the wrong",
        "type, and an `ok` record whose metrics cannot be a measurement (the checks a notebook runs before it",
        "writes one: `colabkit.records.plausibility`) are set aside with the reason; a warning names them and",
        "`runs.attrs[\"rejected\"]` lists them. Records written before `device.request` existed get it there,",
        "derived once from `device.requested` or `params.device`.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tools/schema_doc.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if the page is out of date")
    parser.add_argument("--root", default=".", help="repository root (default: .)")
    args = parser.parse_args(argv)
    path = Path(args.root) / RECORDS_DOC
    text = render()
    current = path.read_text(encoding="utf-8") if path.exists() else None
    if args.check:
        if current != text:
            print(f"{path} is out of date: run `python tools/schema_doc.py`", file=sys.stderr)
            return 1
        return 0
    if current != text:
        write_atomic(path, text)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
