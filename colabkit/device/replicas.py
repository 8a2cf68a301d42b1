"""One function's work on every replica of a run, each replica on inputs of its own drawn where they are used
(the matmul notebook's workload): on TensorFlow `strategy.run` inside a `tf.function` over the DeviceSetup's
tf.distribute strategy; on JAX one `jax.jit` over a one-axis mesh of the run's devices (`shard_map`, so no
data moves between devices)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


def on_every_replica(device: Any, work: Callable[[Any, Any], Any], inputs: Callable[[Any], tuple[Any, Any]],
                     jit_compile: bool = False) -> tuple[Callable[[], Any], Callable[[Any], list[float]]]:
    """(call, replica_values): `call()` runs `work(x, y)` on every replica of `device` (a DeviceSetup), where
    `inputs(replica)` gives that replica's (x, y), and returns what each work returned (a scalar);
    `replica_values(result)` turns that into one float per replica. `jit_compile`: XLA on TensorFlow (JAX
    always compiles with it)."""
    if device.backend == "jax":
        import jax
        from jax.sharding import Mesh, NamedSharding, PartitionSpec

        mesh, per_replica = Mesh(np.array(device.devices), ("replica",)), PartitionSpec("replica")
        x, y = jax.jit(jax.vmap(inputs), out_shardings=NamedSharding(mesh, per_replica))(np.arange(device.replicas))
        blocks = jax.jit(jax.shard_map(lambda x, y: work(x[0], y[0])[None], mesh=mesh, in_specs=(per_replica,) * 2,
                                       out_specs=per_replica))  # each device: its own (1, ...) block of x and y
        return (lambda: blocks(x, y)), (lambda result: [float(value) for value in np.asarray(result)])
    import tensorflow as tf

    strategy, replica_work = device.strategy, tf.function(work, jit_compile=jit_compile)
    x, y = (strategy.experimental_distribute_values_from_function(
        lambda context, part=part: inputs(context.replica_id_in_sync_group)[part]) for part in (0, 1))

    @tf.function
    def every_replica(x: Any, y: Any) -> Any:
        return strategy.run(replica_work, args=(x, y))

    return (lambda: every_replica(x, y)), (lambda result: [float(value) for value in
                                                           strategy.experimental_local_results(result)])
