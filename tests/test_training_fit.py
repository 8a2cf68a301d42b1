"""colabkit's fit: a finite pipeline trains one pass per epoch through one input iterator."""

from __future__ import annotations

import numpy as np


def ids_dataset(count: int, batch: int, seen: list[list[int]]):
    """make_dataset over samples whose feature is their id; every batch fit pulls is appended to `seen`."""
    import tensorflow as tf

    from colabkit.training.setup import make_dataset

    x = np.arange(count, dtype="float32")[:, None]
    y = (np.arange(count) % 2).astype("int64")

    def record(features):
        seen.append([int(value) for value in features.numpy()[:, 0]])
        return features

    def recorded(features, labels):
        kept = tf.py_function(record, [features], tf.float32)
        kept.set_shape(features.shape)
        return kept, labels

    return make_dataset(x, y, batch_size=batch, shuffle=True, seed=3).map(recorded)


def test_one_pass_per_epoch_repeats_a_finite_pipeline_and_counts_its_batches():
    import tensorflow as tf

    from colabkit.training.fit import one_pass_per_epoch

    seen: list[list[int]] = []
    data, steps = one_pass_per_epoch(ids_dataset(10, 4, seen), None)
    assert steps == 3  # 4 + 4 + 2
    assert int(data.cardinality()) == int(tf.data.INFINITE_CARDINALITY)
    passes = [[index for batch in list(data.take(3 * 3).as_numpy_iterator())[start:start + 3]
               for index in batch[0][:, 0].astype(int)] for start in (0, 3, 6)]
    assert all(sorted(one) == list(range(10)) for one in passes)  # each pass: every sample once
    assert len({tuple(one) for one in passes}) > 1  # reshuffled between passes


def test_one_pass_per_epoch_leaves_other_inputs_alone():
    import tensorflow as tf

    from colabkit.training.fit import one_pass_per_epoch

    finite = tf.data.Dataset.range(10).batch(4)
    assert one_pass_per_epoch(finite, 2) == (finite, 2)  # steps_per_epoch given: the caller's choice
    endless = finite.repeat()
    assert one_pass_per_epoch(endless, None) == (endless, None)
    empty = finite.take(0)
    assert one_pass_per_epoch(empty, None) == (empty, None)  # fit must still report that nothing ran
    arrays = np.zeros((10, 1))
    assert one_pass_per_epoch(arrays, None) == (arrays, None)
    assert one_pass_per_epoch(finite, None, steps_per_execution=2) == (finite, None)  # 3 batches: would straddle
    assert one_pass_per_epoch(finite, None, steps_per_execution=3)[1] == 3


def test_fit_with_executions_that_do_not_divide_a_pass_still_trains_one_pass_per_epoch():
    import keras

    from colabkit.training.fit import fit
    from colabkit.training.timer import TrainingTimer

    seen: list[list[int]] = []
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(2, activation="softmax")])
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy", steps_per_execution=2)
    timer = TrainingTimer(global_batch_size=4, dataset_size=10)
    fit(model, ids_dataset(10, 4, seen), epochs=3, callbacks=[timer], verbose=0)
    assert [len(batch) for batch in seen[:9]] == [4, 4, 2] * 3
    assert [(epoch.steps, epoch.samples) for epoch in timer.epochs] == [(3, 10)] * 3


def test_fit_trains_each_epoch_on_one_pass_and_the_timer_counts_it():
    import keras

    from colabkit.training.fit import fit
    from colabkit.training.timer import TrainingTimer

    seen: list[list[int]] = []
    epochs = 3
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(2, activation="softmax")])
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    timer = TrainingTimer(global_batch_size=4, dataset_size=10)
    history = fit(model, ids_dataset(10, 4, seen), epochs=epochs, callbacks=[timer], verbose=0)

    assert len(history["loss"]) == epochs
    trained, read_ahead = seen[:3 * epochs], seen[3 * epochs:]
    assert len(read_ahead) < 3  # the iterator may have fetched ahead into the next pass, never a whole pass
    assert [len(batch) for batch in trained] == [4, 4, 2] * epochs  # the partial batch ends each pass
    for epoch in range(epochs):
        assert sorted(sum(trained[3 * epoch:3 * epoch + 3], [])) == list(range(10))
    assert [(epoch.steps, epoch.samples) for epoch in timer.epochs] == [(3, 10)] * epochs


def test_fit_hands_keras_one_endless_iterator_with_the_steps_of_a_pass():
    """The stall this avoids (a new input iterator every epoch) shows only in timings: check the wiring."""
    import tensorflow as tf

    from colabkit.training.fit import fit

    class RecordingModel:
        def fit(self, data, **kwargs):
            self.data, self.kwargs = data, kwargs
            return type("History", (), {"history": {"loss": [0.0]}})()

    model = RecordingModel()
    fit(model, tf.data.Dataset.range(10).batch(4), epochs=1)
    assert int(model.data.cardinality()) == int(tf.data.INFINITE_CARDINALITY)
    assert model.kwargs["steps_per_epoch"] == 3


TWO_REPLICAS_IN_EXECUTIONS = """
import numpy as np
import colabkit
dev = colabkit.setup_device("cpu:2", backend="tensorflow")
import keras, tensorflow as tf
from colabkit.errors import ExperimentError
from colabkit.training.fit import fit
from colabkit.training.setup import repeated_batch
from colabkit.training.timer import TrainingTimer

def build(spe):
    keras.utils.set_random_seed(0)
    with dev.strategy.scope():
        model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(4)])
        model.compile(optimizer="rmsprop", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      steps_per_execution=spe)
    return model

rng = np.random.default_rng(0)
x, y = rng.normal(size=(96, 8)).astype("float32"), rng.integers(0, 4, 96).astype("int32")
steps = {}
for spe in (1, 3):  # Keras's own one-step loop, and three steps per execution (colabkit's on two replicas)
    model, timer = build(spe), TrainingTimer(global_batch_size=96)
    fit(model, repeated_batch(x, y), epochs=2, steps_per_epoch=6, callbacks=[timer], verbose=0)
    steps[spe] = (int(model.optimizer.iterations.value.numpy()), [epoch.steps for epoch in timer.epochs],
                  model.get_weights())
assert steps[1][:2] == steps[3][:2] == (12, [6, 6]), (steps[1][:2], steps[3][:2])
assert all(np.allclose(a, b, atol=1e-5) for a, b in zip(steps[1][2], steps[3][2]))  # the same 12 steps
passes = tf.data.Dataset.from_tensor_slices((x, y)).batch(32)  # 3 batches a pass: 3 divides it, 2 does not
model = build(3)
fit(model, passes, epochs=2, verbose=0)
assert int(model.optimizer.iterations.value.numpy()) == 6
try:
    fit(build(2), passes, epochs=2, verbose=0)
except ExperimentError as exc:
    print("refused:", exc)
# What a notebook does: Keras's own fit, handed the trainer's callbacks (ReplicaSteps among them)
from colabkit.training.trainer import Trainer
trainer, model = Trainer(None, dev, 12), build(2)
train_ds, steps_per_epoch = trainer.training_batches(model, x, y)  # 96 samples, global batch 24: 4 steps a pass
history = model.fit(train_ds, epochs=2, steps_per_epoch=steps_per_epoch, callbacks=trainer.callbacks(len(x)), verbose=0)
timed = trainer.timed(history, train_ds)
print(f"Keras's own fit with the trainer's callbacks: {timed.metrics['epochs_run']} epochs of "
      f"{timed.record_fields['timings']['epochs'][0]['steps']} steps, {int(model.optimizer.iterations.value.numpy())} steps")
try:
    trainer.timed(build(1).fit(train_ds, epochs=1, steps_per_epoch=4, verbose=0), train_ds)
except ExperimentError as exc:
    print("unmeasured:", exc)
"""


def test_two_replicas_train_several_steps_per_execution_as_one_step_each_would():
    """Keras 3's own multi-step loop fails on a MirroredStrategy (keras-team/keras#19246): colabkit's fit runs
    the same steps (the same weights as Keras's one-step loop), and refuses in one line an input whose passes
    the executions would straddle."""
    import subprocess
    import sys

    from helpers import REPO

    completed = subprocess.run([sys.executable, "-c", TWO_REPLICAS_IN_EXECUTIONS], capture_output=True, text=True,
                               timeout=300, cwd=REPO)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert ("refused: steps_per_execution = 2 on 2 replicas needs epochs of whole executions, but an epoch is 3 "
            "steps, which 2 does not divide") in completed.stdout
    assert "Keras's own fit with the trainer's callbacks: 2 epochs of 4 steps, 8 steps" in completed.stdout
    assert "unmeasured: model.fit ran without this trainer's measurements" in completed.stdout
