"""Training across machines with TensorFlow's MultiWorkerMirroredStrategy.

Each worker is one process with its own TF_CONFIG (the standard cluster spec: every worker's
host:port and this process's index); the strategy all-reduces gradients across workers with
collective ops, one replica per local device. The chief (task "chief", else worker 0) writes the
record and the output notebook; the other workers write nothing that could overwrite them.

Keras 3's `model.fit` does not run under this strategy (keras-team/keras#20585,
tensorflow/tensorflow#72388: "Attempt to convert a value (PerReplica...)"), so `fit_multi_worker`
trains with TensorFlow's own distribution engine directly: `strategy.run` on batches of
`strategy.experimental_distribute_dataset`, per-example losses averaged over the GLOBAL batch
(`tf.nn.compute_average_loss`), gradients applied by the model's Keras optimizer. It drives the same
Keras callbacks as `fit` (TrainingTimer, History, EarlyStopping, ...), so notebooks do not change.

Input data is sharded across workers by tf.data auto-sharding with the DATA policy: every worker
reads the whole (in-memory) dataset and keeps its 1/N share of each global batch's elements. (The
FILE policy needs a dataset read from at least as many files as workers; ours come from arrays.)
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from colabkit.errors import ColabkitError, DeviceNotFoundError

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
        raise ColabkitError(f"TF_CONFIG is not a cluster spec ({exc}): expected "
                            '{"cluster": {"worker": ["host:port", ...]}, "task": {"type": "worker", "index": 0}}') from exc
    if not isinstance(workers, list) or not workers:
        raise ColabkitError("TF_CONFIG's cluster has no workers")
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
    from colabkit.device import DeviceSetup, _gpu_description, _physical_devices, cpu_info

    config = read_tf_config()
    size = cluster_size(config)
    if workers is not None and workers != size:
        raise DeviceNotFoundError(f"device '{requested}' asks for {workers} workers but TF_CONFIG's cluster "
                                  f"has {size}: {config['cluster']}")
    import tensorflow as tf

    options = tf.distribute.experimental.CommunicationOptions(timeout_seconds=collective_timeout_s)
    strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    gpus = _physical_devices("GPU")
    kind = "gpu" if gpus else "cpu"
    description: dict[str, Any] = _gpu_description(gpus) if gpus else {"name": cpu_info()["model"], **cpu_info()}
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
    multi = (getattr(device, "description", None) or {}).get("multi_worker") if device is not None else None
    return True if not multi else bool(multi["is_chief"])


def worker_path(path: str | Path, device: Any) -> Path:
    """`path` on the chief; on any other worker a private scratch path beside it, so that files
    every worker writes (checkpoints) never collide or overwrite the chief's."""
    path = Path(path)
    multi = (getattr(device, "description", None) or {}).get("multi_worker")
    if not multi or multi["is_chief"]:
        return path
    return path.with_name(f".worker-{multi['task_index']}.{path.name}")


def shard_by_data(dataset: Any) -> Any:
    """The dataset with tf.data's auto-sharding set to the DATA policy (see the module's doc)."""
    import tensorflow as tf

    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return dataset.with_options(options)


def _unpack(batch: tuple) -> tuple[Any, Any, Any]:
    import tensorflow as tf

    x, y = batch[0], batch[1]
    weights = batch[2] if len(batch) > 2 else tf.ones(tf.shape(y)[:1], dtype=tf.float32)
    return x, y, tf.cast(weights, tf.float32)


def per_example_loss(loss: Any, y: Any, prediction: Any) -> Any:
    """The loss of each example of a batch, shape [batch]: a Keras Loss object's unreduced `call`, or a
    loss function's values, averaged over any further axes (e.g. time steps)."""
    import keras
    import tensorflow as tf

    values = loss.call(y, prediction) if isinstance(loss, keras.losses.Loss) else loss(y, prediction)
    values = tf.cast(values, tf.float32)
    if values.shape.rank and values.shape.rank > 1:
        values = tf.reduce_mean(values, axis=list(range(1, values.shape.rank)))
    return values


def _step_sums(model: Any, loss: Any, x: Any, y: Any, weights: Any, training: bool,
               accuracy: bool) -> tuple[Any, Any, Any]:
    """(per-example losses, weighted correct count, weight sum) of one replica's batch."""
    import tensorflow as tf

    prediction = model(x, training=training)
    per_example = per_example_loss(loss, y, prediction)
    correct = tf.constant(0.0)
    if accuracy:
        labels = (tf.argmax(y, axis=-1) if y.shape.rank == prediction.shape.rank
                  else tf.cast(tf.reshape(y, [-1]), tf.int64))
        correct = tf.reduce_sum(tf.cast(tf.equal(labels, tf.argmax(prediction, axis=-1)), tf.float32) * weights)
    return per_example, correct, tf.reduce_sum(weights)


def fit_multi_worker(model: Any, train_data: Any, *, epochs: int, strategy: Any, validation_data: Any = None,
                     callbacks: list[Any] | tuple = (), verbose: int = 2, steps_per_epoch: int | None = None,
                     validation_steps: int | None = None) -> dict[str, list[float]]:
    """Train `model` (built and compiled in `strategy`'s scope) like model.fit; return the history.

    Supports what the suite's notebooks compile: one loss (a Keras loss name or function) and the
    `accuracy` metric; validation data with optional sample weights (padded batches).
    """
    import keras
    import tensorflow as tf

    compiled_metrics = [str(name) for name in (model.get_compile_config() or {}).get("metrics") or []]
    unsupported = [name for name in compiled_metrics if name not in ("accuracy", "acc")]
    if unsupported:
        raise ColabkitError(f"the multi-worker loop computes loss and accuracy only; drop {unsupported} from compile")
    accuracy = bool(compiled_metrics)
    loss_fn = model.loss if isinstance(model.loss, keras.losses.Loss) else keras.losses.get(model.loss)
    optimizer = model.optimizer
    train = strategy.experimental_distribute_dataset(shard_by_data(train_data))
    validation = (strategy.experimental_distribute_dataset(shard_by_data(validation_data))
                  if validation_data is not None else None)

    @tf.function
    def train_step(batch):
        def replica_step(*batch):
            x, y, weights = _unpack(batch)
            with tf.GradientTape() as tape:
                per_example, correct, count = _step_sums(model, loss_fn, x, y, weights, True, accuracy)
                loss = tf.nn.compute_average_loss(per_example, sample_weight=weights)  # over the GLOBAL batch
                if model.losses:
                    loss += tf.nn.scale_regularization_loss(tf.add_n(model.losses))
                scaled = optimizer.scale_loss(loss)
            gradients = tape.gradient(scaled, model.trainable_variables)
            optimizer.apply_gradients(zip(gradients, model.trainable_variables))
            return tf.reduce_sum(per_example * weights), correct, count

        sums = strategy.run(replica_step, args=tuple(batch))
        return [strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None) for value in sums]

    @tf.function
    def test_step(batch):
        def replica_step(*batch):
            x, y, weights = _unpack(batch)
            per_example, correct, count = _step_sums(model, loss_fn, x, y, weights, False, accuracy)
            return tf.reduce_sum(per_example * weights), correct, count

        sums = strategy.run(replica_step, args=tuple(batch))
        return [strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None) for value in sums]

    def run_epoch(step_fn, iterator, steps, on_begin, on_end):
        totals = [tf.constant(0.0)] * 3
        step = 0
        for batch in iterator:
            on_begin(step)
            totals = [total + value for total, value in zip(totals, step_fn(batch))]
            on_end(step)
            step += 1
            if steps is not None and step >= steps:
                break
        loss, correct, count = (float(value) for value in totals)
        logs = {"loss": loss / max(count, 1.0)}
        if accuracy:
            logs["accuracy"] = correct / max(count, 1.0)
        return logs, step

    callback_list = keras.callbacks.CallbackList(list(callbacks), add_history=True, add_progbar=verbose != 0,
                                                 verbose=verbose, epochs=epochs, steps=steps_per_epoch, model=model)
    model.stop_training = False
    persistent = iter(train) if steps_per_epoch is not None else None  # repeated data: one iterator
    callback_list.on_train_begin()
    for epoch in range(epochs):
        callback_list.on_epoch_begin(epoch)
        logs, _ = run_epoch(train_step, persistent if persistent is not None else iter(train), steps_per_epoch,
                            callback_list.on_train_batch_begin, callback_list.on_train_batch_end)
        if validation is not None:
            callback_list.on_test_begin()
            validation_logs, _ = run_epoch(test_step, iter(validation), validation_steps,
                                           callback_list.on_test_batch_begin, callback_list.on_test_batch_end)
            callback_list.on_test_end(validation_logs)
            logs.update({f"val_{name}": value for name, value in validation_logs.items()})
        callback_list.on_epoch_end(epoch, logs)
        if model.stop_training:
            break
    callback_list.on_train_end(logs)
    return model.history.history
