"""Result records: one JSON file per run, the contract between notebooks and everything after; made
(`make_record`), checked (`validate_record`), read (`read_record`), and where a run's files go (`running_path`,
`final_base`). The notebook's side of a run, which writes one, is colabkit.run.

Schema version 1 fields (later versions add fields, never rename these):
schema_version, notebook, status ("ok" | "failed" | "skipped"), params, metrics, timings, device,
software, host, data, started_at, finished_at, git_commit, and error when the status is "failed"
(or the reason when "skipped").
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from colabkit.colab.runtime import accelerator_asked, accelerator_found, accelerator_mismatch, colab_runtime_version
from colabkit.errors import RecordError
from colabkit.io import is_name, json_value
from colabkit.records.provenance import git_commit, host_info, software_versions
from colabkit.records.schema import RecordStatus

SCHEMA_VERSION = 1
STATUSES = tuple(status.value for status in RecordStatus)  # "ok", "failed", "skipped"
REQUIRED_FIELDS = (
    "schema_version", "notebook", "status", "params", "metrics", "timings", "device",
    "software", "host", "data", "started_at", "finished_at", "git_commit",
)
RECORD_SECTIONS = ("params", "metrics", "timings", "device", "software", "host", "data")  # JSON objects, always
# What each top-level field holds: the required ones, then those only some records have.
# docs/records.md is rendered from these (python tools/schema_doc.py; a test keeps it current).
FIELD_DOCS: dict[str, str] = {
    "schema_version": f"the record format's version ({SCHEMA_VERSION}); readers refuse versions they do not know",
    "notebook": "the notebook's name, e.g. `matmul_tflops`",
    "status": "`ok` (a finished measurement), `failed` (see `error`) or `skipped` (never ran; `error` says why)",
    "params": "every parameter the notebook ran with, defaults included",
    "metrics": "the results: the headline figures and scores, flat name -> number (or string); "
               "which names depends on the notebook",
    "timings": "what was timed and how: raw samples (cold, warm, per epoch or per repeat) and their "
               "summaries (min, median, mean, std), so every headline figure can be recomputed",
    "device": "what ran the work: the device asked for and found, its model, replicas, distribution "
              "strategy, Keras backend",
    "software": "Python and library versions (TensorFlow, Keras, NumPy, JAX, PyTorch...), "
                "TensorFlow's CUDA/cuDNN build, the Keras backend",
    "host": "the machine: OS, CPU model and cores, memory, and the Colab runtime when there is one",
    "data": "which data was used: dataset, `source` (`real`, `offline` or `synthetic`), URL, sha256, shapes, "
            "and a note when it is not the real data",
    "started_at": "when the run started (UTC, ISO 8601)",
    "finished_at": "when the record was written (UTC, ISO 8601)",
    "git_commit": "the commit of colabkit's code: from its git checkout (`-dirty` when modified), else the "
                  "commit pip installed it from (direct_url.json); null when neither says",
    "error": "only when not ok: `type`, `kind`, `message`, and where a cell failed its index (`cell`), "
             "`exec_count` and `source`",
    "fingerprint": "written by the sweep: what the result depends on (notebook code, parameters, colabkit's "
                   "version and code, TensorFlow's version) and their `digest`; a resumed sweep keeps a "
                   "record whose digest matches",
    "sweep": "written by the sweep: how the run was made (`jobs` side by side, `cuda_visible_devices`, `wall_s`: an ok "
             "run's whole wall time on the sweep's clock, from before its kernel to after its HTML export; on a "
             "Dask cluster `cluster`: the `scheduler` and whether the products came back or were written "
             "into a shared `out`; a run a Colab session (`--colab`) failed to bring back: `colab`, the "
             "accelerator asked, and `session`)",
    "phases": "the run's fixed phases as colabkit noted them, in order: `phase` (`device_setup`: the strategy and "
              "device description, after the backend's import; `host_probes`: the CPU bandwidth, measured or "
              "handed over by the sweep; `flop_count`: counting the model's FLOPs), `started_at` (UTC) and "
              "`seconds`; with the executed notebook's cell times they break a run's fixed cost down "
              "(benchmarks/sweep_overhead.py)",
    "kernel": "written by the sweep: the kernel that ran it, `mode` `fresh` (started for this run) or `reuse` (a "
              "warm kernel, cleared between runs and replaced after any failure: `sweep --kernels reuse`), "
              "`runs_before` (how many runs that kernel had made before this one), and for `reuse` when the "
              "kernel `started_at`, its `max_runs` and its `key` (the backend, device and mixed-precision "
              "policy its runs share)",
    "breakdown": "training notebooks: what bounds the run (colabkit.training.breakdown): the throughputs of its "
                 "input pipeline alone, of the same steps fed from memory and of the device alone, how each was "
                 "measured, what a CPU \"device\" means, and how long the extra passes took; the shares and "
                 "`bound_by` are in `metrics`",
    "flops": "training notebooks: the model FLOPs per sample the utilisation figures come from (colabkit.training."
             "flops): `forward_per_sample`, `train_per_sample`, the `convention`, and `by_layer`",
    "achievable_peak": "training notebooks: the matmul scan behind `metrics.achievable_tflops` (colabkit.device."
                       "achievable, kept per host): every pass, shape and precision timed (`scanned`: the best and "
                       "median call, calls, seconds), the best per precision with its shape, every pass's best and "
                       "their spread (`per_precision`), how many `passes` and whether the last two `agreed`, the "
                       "backend and device, what it was measured on (`identity`), how, when and by which run",
    "op_breakdown": "training notebooks run with `profile_steps` > 0: the profiler, where its trace is (TensorBoard "
                    "opens it), the time per operation category (shares summing to 1, idle its own) and the top "
                    "operations, or why the trace was not summarised",
    "worker": "written by a sweep on a Dask cluster (`--cluster`): the worker that ran it (`host`, `address`, "
              "`name`, its declared `resources`, `cuda_visible_devices`)",
    "repeat": "written by the sweep: which independent run of its combination this is (1, 2, ...), each in its own "
              "kernel; repeat 1 is `<slug>.json`, repeat r `<slug>_repeat-r.json`",
    "host_state": "what else the host did from `start_run` to the record (colabkit.device.host_state): load "
                  "averages, other processes' CPU time and share, steal share, CPU clock range, NVIDIA GPUs' SM "
                  "clocks, throttle reasons and other processes; the reasons and thresholds of `host_quiet`",
    "accelerator_found": "the accelerator the runtime really has: the GPU's name from the driver, the TPU's "
                         "`device_kind` (or accelerator type), `none` on a machine without one (colabkit.colab.runtime)",
    "accelerator_asked": "the runtime type the run was asked for (`T4`, `H100`, `G4`, `v5e-1`...): the "
                         "COLABKIT_ACCELERATOR_ASKED environment variable (set by colab_sweep.ipynb and a Colab "
                         "CLI executor), null where nobody said",
    "accelerator_mismatch": "null, or a sentence when `accelerator_found` is not what `accelerator_asked` names "
                            "(Colab may grant another GPU); the record describes what ran",
    "colab_runtime_version": "Colab's runtime version, its COLAB_RELEASE_TAG (the image's dated release); null "
                             "outside Colab",
    "inference": "runs in inference mode (`params.mode` `inference`, docs/inference.md): the single-stream latencies "
                 "at batch 1 with their percentiles and order-statistic intervals, the offline throughput per batch "
                 "size with its interval over the run's timed passes (both within this run: the report's figures "
                 "and verdicts are over runs), and how the largest batch was found",
    "decode": "runs in decode mode (`params.mode` `decode`, docs/decode.md): per batch size and prompt length "
              "(`rows`) time to first token, time per output token (p50, p90, MLPerf's mean), tokens/s, FLOPs and "
              "bytes per step, achieved GB/s against the device's bandwidth, the full-pass check; and how",
    "host_quiet": "whether the host was quiet during the run: false when another process, the hypervisor, a clock "
                  "or a GPU disturbed it (`host_state.busy_reasons` names which); null where nothing could be read",
}


def utc_now() -> str:
    """The current UTC time, ISO 8601 with microseconds and an explicit offset."""
    return dt.datetime.now(dt.timezone.utc).isoformat()


def make_record(
    notebook: str,
    status: RecordStatus | str,
    params: Mapping[str, Any],
    *,
    metrics: Mapping[str, Any] | None = None,
    timings: Mapping[str, Any] | None = None,
    device: Mapping[str, Any] | None = None,
    data: Mapping[str, Any] | None = None,
    started_at: str | None = None,
    finished_at: str | None = None,
    error: Mapping[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A complete record of schema version 1, with software, host and git commit filled in."""
    if status not in STATUSES:
        raise RecordError(f"status must be one of {', '.join(STATUSES)}, got {status!r}")
    status = RecordStatus(status)
    if status != RecordStatus.OK and not error:
        raise RecordError(f"a {status.value!r} record needs an `error` saying why")
    record: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "notebook": notebook,
        "status": status.value,  # the plain string: the record schema's value
        "params": dict(params),
        "metrics": dict(metrics or {}),
        "timings": dict(timings or {}),
        "device": dict(device or {}),
        "software": software_versions(),
        "host": host_info(),
        "data": dict(data or {}),
        "started_at": started_at or utc_now(),
        "finished_at": finished_at or utc_now(),
        "git_commit": git_commit(),
    }
    found, asked = accelerator_found(device), accelerator_asked()
    mismatch = accelerator_mismatch(asked, found)
    record.update(accelerator_found=found, accelerator_asked=asked, accelerator_mismatch=mismatch,
                  colab_runtime_version=colab_runtime_version())
    if mismatch and status == RecordStatus.OK:
        print(f"colabkit: WARNING: {mismatch}", file=sys.stderr)
    if error:
        record["error"] = dict(error)
    record.update(extra)
    return json_value(record)


def validate_record(record: Any, source: str = "record") -> dict[str, Any]:
    """Return `record` if it is a readable record of a known schema version, else raise RecordError."""
    if not isinstance(record, dict):
        raise RecordError(f"{source}: a record is a JSON object, got {type(record).__name__}")
    if "schema_version" not in record:
        raise RecordError(f"{source}: not a record (a JSON object with no schema_version)")
    version = record.get("schema_version")
    if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
        raise RecordError(f"{source}: schema_version {version} was written by a newer colabkit (this one reads "
                          f"{SCHEMA_VERSION}): upgrade colabkit to read it")
    if version != SCHEMA_VERSION:
        raise RecordError(f"{source}: schema_version {version!r} is not one this colabkit reads ({SCHEMA_VERSION})")
    missing = [name for name in REQUIRED_FIELDS if name not in record]
    if missing:
        raise RecordError(f"{source}: missing field(s) {', '.join(missing)}")
    if record["status"] not in STATUSES:
        raise RecordError(f"{source}: status {record['status']!r} is not one of {', '.join(STATUSES)}")
    if not isinstance(record["notebook"], str) or not is_name(record["notebook"]):  # it names files and folders
        raise RecordError(f"{source}: notebook {record['notebook']!r} is not a notebook's name (a name, never a path)")
    wrong = [f"{name} is {type(record[name]).__name__}" for name in RECORD_SECTIONS if not isinstance(record[name], dict)]
    if wrong:  # every reader takes these for objects: a list or a number there is a damaged record
        raise RecordError(f"{source}: {', '.join(wrong)}, expected a JSON object")
    return record


def read_record(path: str | Path) -> dict[str, Any]:
    """Load and validate one record file; RecordError (naming the file) for anything that is not a
    readable record: not UTF-8 text, not JSON, not a record of a schema this colabkit reads."""
    try:
        with open(path, encoding="utf-8") as stream:
            record = json.load(stream)
    except UnicodeDecodeError as exc:
        raise RecordError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    except json.JSONDecodeError as exc:
        raise RecordError(f"{path}: not valid JSON ({exc})") from exc
    return validate_record(record, str(path))


def default_results_path(notebook: str, device: str, root: str | Path = "outputs") -> Path:
    """Where a notebook run by hand writes its record: outputs/<notebook>/<device>/manual-<UTC>.json."""
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    return Path(root) / notebook / device.replace(":", "-") / f"manual-{stamp}.json"


RUNNING_SUFFIX = ".running"  # a sweep writes a run's products as .<slug>.running.<ext> until it is done


def running_path(final: Path, extension: str) -> Path:
    """The temporary name a sweep gives a run's product while it runs: .<slug>.running<extension>."""
    return final.with_name(f".{final.name}{RUNNING_SUFFIX}{extension}")


def final_base(record_path: Path) -> Path:
    """The base path (no extension) of the run a record path belongs to, temporary names undone:
    'dir/.slug.running.json' and 'dir/slug.json' both give 'dir/slug'."""
    name = record_path.name
    marker = f"{RUNNING_SUFFIX}.json"
    if name.startswith(".") and name.endswith(marker):
        return record_path.with_name(name[1:-len(marker)])
    return record_path.with_name(name[:-len(".json")] if name.endswith(".json") else name)
