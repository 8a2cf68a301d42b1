"""Training across machines: Keras 3's fit does not run under MultiWorkerMirroredStrategy, so a custom loop does."""

from __future__ import annotations

from typing import Any

from colabkit.errors import MultiWorkerError


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
                     validation_steps: int | None = None) -> Any:
    """Train `model` (built and compiled in `strategy`'s scope) like model.fit; return Keras's History.

    Supports what the suite's notebooks compile: one loss (a Keras loss name or function) and the
    `accuracy` metric; validation data with optional sample weights (padded batches).
    """
    import keras
    import tensorflow as tf

    compiled_metrics = [str(name) for name in (model.get_compile_config() or {}).get("metrics") or []]
    unsupported = [name for name in compiled_metrics if name not in ("accuracy", "acc")]
    if unsupported:
        raise MultiWorkerError(f"the multi-worker loop computes loss and accuracy only; drop {unsupported} from compile")
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
    return model.history
