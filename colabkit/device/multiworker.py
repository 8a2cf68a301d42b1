"""Training across machines with TensorFlow's MultiWorkerMirroredStrategy.

Each worker is one process with its own TF_CONFIG; the chief (task "chief", else worker 0) writes
the record and the notebook, the others nothing. Keras 3's `model.fit` does not run under this
strategy (keras-team/keras#20585), so `fit_multi_worker` trains with `strategy.run` on a distributed
dataset, losses averaged over the global batch, driving the same Keras callbacks as `fit`. Input is
sharded by tf.data's DATA policy (our datasets come from arrays, not files). See docs/multi-device.md.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from colabkit.device.probes import cpu_info, gpu_description, physical_devices
from colabkit.device.spec import DeviceSetup
from colabkit.errors import ClusterSpecError, DeviceNotFoundError

# Every worker reads the whole in-memory dataset and keeps its share of each global batch.
SHARDING_POLICY = "DATA"


def read_tf_config(environ: dict[str, str] | None = None) -> dict[str, Any]:
    """The parsed TF_CONFIG; raises DeviceNotFoundError saying how to get one when it is missing."""
    text = (environ if environ is not None else os.environ).get("TF_CONFIG", "")
    if not text.strip():
        raise DeviceNotFoundError(
            "device 'multiworker' needs TF_CONFIG (the cluster spec every worker gets); to try it on one "
            "machine run `python -m colabkit workers --count 2 NOTEBOOK`, on several see the README")
    try:
        config = json.loads(text)
        workers = config["cluster"]["worker"]
        task_type, task_index = config["task"]["type"], int(config["task"]["index"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ClusterSpecError(f"TF_CONFIG is not a cluster spec ({exc}): expected "
                            '{"cluster": {"worker": ["host:port", ...]}, "task": {"type": "worker", "index": 0}}') from exc
    if not isinstance(workers, list) or not workers:
        raise ClusterSpecError("TF_CONFIG's cluster has no workers: list them as cluster.worker [\"host:port\", ...]")
    return {"cluster": config["cluster"], "task_type": task_type, "task_index": task_index}


def is_chief(config: dict[str, Any]) -> bool:
    """The chief is task "chief" if the cluster has one, else worker 0 (TensorFlow's rule)."""
    if "chief" in config["cluster"]:
        return config["task_type"] == "chief"
    return config["task_type"] == "worker" and config["task_index"] == 0


def cluster_size(config: dict[str, Any]) -> int:
    """Workers that train (the chief counts as one when the cluster names one)."""
    return len(config["cluster"].get("worker", [])) + len(config["cluster"].get("chief", []))


def setup_multi_worker(requested: str, workers: int | None, collective_timeout_s: float | None = None):
    """A DeviceSetup for MultiWorkerMirroredStrategy over the cluster in TF_CONFIG.

    `workers`, when given (device "multiworker:N"), must match the cluster's size. Local devices:
    every GPU of the worker, else its CPU. `collective_timeout_s` bounds how long a collective waits
    for a peer (None: TensorFlow's default, with its peer health checks).
    """

    config = read_tf_config()
    size = cluster_size(config)
    if workers is not None and workers != size:
        raise DeviceNotFoundError(f"device '{requested}' asks for {workers} workers but TF_CONFIG's cluster "
                                  f"has {size}: {config['cluster']}")
    import tensorflow as tf

    options = tf.distribute.experimental.CommunicationOptions(timeout_seconds=collective_timeout_s)
    strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    gpus = physical_devices("GPU")
    kind = "gpu" if gpus else "cpu"
    description: dict[str, Any] = gpu_description(gpus) if gpus else {"name": cpu_info()["model"], **cpu_info()}
    description["multi_worker"] = {
        "workers": size,
        "task_type": config["task_type"],
        "task_index": config["task_index"],
        "is_chief": is_chief(config),
        "local_replicas": max(1, len(gpus)),
        "cluster": config["cluster"],
        "data_sharding": f"tf.data auto-shard, {SHARDING_POLICY} policy",
    }
    return DeviceSetup(requested, kind, strategy, strategy.num_replicas_in_sync, description)


def is_chief_setup(device: Any) -> bool:
    """False only for a non-chief worker of a multi-worker set-up (it must write nothing)."""
    multi = getattr(device, "multi_worker", None)
    return True if not multi else bool(multi["is_chief"])


def worker_path(path: str | Path, device: Any) -> Path:
    """`path` on the chief; on any other worker a private scratch path beside it, so that files
    every worker writes (checkpoints) never collide or overwrite the chief's."""
    path = Path(path)
    multi = getattr(device, "multi_worker", None)
    if not multi or multi["is_chief"]:
        return path
    return path.with_name(f".worker-{multi['task_index']}.{path.name}")
