"""What work a run did: the one identity by which runs are merged (colabkit.records.merging), paired
(the report, `compare`) and counted (`status`).

`run_work(record)` of an ok record: its notebook, the device found (kind, replicas, workers,
`device_model`), the backend that ran, `global_batch` in place of `batch_size` and `batch_size_is`
(128 per replica on 2 replicas is 256 on one), and every other parameter, "auto" sizes with the
values used. How a run was measured or recorded (NOT_WORK) is left out; `mode` is kept when it is
another than its experiment's default (`record_mode`: the declaration's, docs/inference.md) and left out when it
is that one, so inference and training runs never pair and training runs pair with those recorded before the
mode. A failed or skipped record is what it asked for. `work_key(work, leave_out)` pairs runs across one axis ("device",
"batch_size", or any parameter).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from colabkit.experiments import find

# How a run was measured or recorded, not what it did: never part of its identity.
NOT_WORK = frozenset({"results_path", "breakdown", "profile_steps", "plot_hours"})
BATCH_PARAMS = ("batch_size", "batch_size_is")
# What a name left out of a key stands for in the identity.
_STANDS_FOR = {"device": ("device", "device_model"), "batch_size": ("global_batch",), "batch_size_is": ("global_batch",)}


def asked_params(record: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters a run was asked for, as the sweep gave them (`fingerprint.params`) where it
    recorded them, else the record's `params`; without NOT_WORK."""
    fingerprint = record.get("fingerprint")
    if isinstance(fingerprint, dict) and isinstance(fingerprint.get("params"), dict):
        params = fingerprint["params"]
    else:
        params = record.get("params") or {}
    return {name: value for name, value in params.items() if name not in NOT_WORK}


def default_mode(record: Mapping[str, Any]) -> str | None:
    """The mode of `record`'s experiment when none is asked: its declaration's (None: no modes, or not declared)."""
    experiment = find(str(record.get("notebook")))
    return experiment.default_mode if experiment is not None else None


def record_mode(record: Mapping[str, Any]) -> str | None:
    """The mode a record ran in: its `params.mode`, else its experiment's default (default_mode)."""
    return str((record.get("params") or {}).get("mode") or "") or default_mode(record)


def _whole(value: Any, default: int = 1) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else default


def _backend(record: Mapping[str, Any]) -> str:
    asked = (record.get("params") or {}).get("backend")
    ran = (record.get("device") or {}).get("backend")
    return str(ran or (asked if asked not in (None, "auto") else "tensorflow"))


def _global_batch(params: Mapping[str, Any], metrics: Mapping[str, Any], replicas: int) -> Any:
    recorded = metrics.get("global_batch_size")
    if isinstance(recorded, (int, float)) and not isinstance(recorded, bool):
        return int(recorded) if float(recorded).is_integer() else recorded
    batch = params.get("batch_size")
    if params.get("batch_size_is", "per_replica") == "global" or not isinstance(batch, int):
        return batch
    return batch * replicas


def run_work(record: Mapping[str, Any]) -> dict[str, Any]:
    """What work the run of `record` did (see the module's docstring): equal for two records exactly
    when they are runs of the same work on the same device model."""
    default = default_mode(record)
    if record.get("status") != "ok":
        asked = asked_params(record)
        return {"notebook": record.get("notebook"), **{name: value for name, value in asked.items()
                                                       if not (name == "mode" and value == default)}}
    params = record.get("params") or {}
    device = record.get("device") or {}
    request = device.get("request") or {}
    replicas = _whole(device.get("replicas"), _whole(request.get("count")))
    sizes = record.get("sizes")
    used = sizes.get("used") if isinstance(sizes, dict) and isinstance(sizes.get("used"), dict) else {}
    work: dict[str, Any] = {"notebook": record.get("notebook")}
    for name, value in params.items():
        if name == "mode" and value == default:
            continue
        if name not in NOT_WORK and name not in BATCH_PARAMS and name not in ("device", "backend"):
            work[name] = used.get(name, value)
    if "batch_size" in params:
        work["global_batch"] = _global_batch(params, record.get("metrics") or {}, replicas)
    work["device"] = {"kind": str(device.get("kind") or request.get("kind") or "unknown").lower(),
                      "replicas": replicas, "workers": _whole(device.get("workers"))}
    work["device_model"] = device.get("name") or device.get("model")
    work["backend"] = _backend(record)
    return work


def work_key(work: Mapping[str, Any], leave_out: Iterable[str] = ()) -> str:
    """`work` (run_work's) as text, without the names in `leave_out` (see the module's docstring):
    two runs pair on a key exactly when they did the same work but for what was left out."""
    skipped = {field for name in leave_out for field in _STANDS_FOR.get(name, (name,))}
    return json.dumps({name: value for name, value in work.items() if name not in skipped}, sort_keys=True,
                      default=str)
