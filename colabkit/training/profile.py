"""A profile of a few steady training steps, on request (`profile_steps=N`), with the framework's own
profiler, summarised into the record's `op_breakdown`.

The run's own model, pipeline and steps_per_execution; one warm-up epoch of the same steps first,
then one epoch of N steps profiled, stopped after the device finished. The trace is in TensorBoard's
layout beside the record (a Chrome trace on PyTorch). The summary uses the profiler's own converter
(xprof's `framework_op_stats`; torch's `key_averages()`), never a hand parse. See docs/bottlenecks.md.
"""

from __future__ import annotations

import importlib.metadata
import json
import math
import os
import time
from pathlib import Path
from typing import Any

import keras

from colabkit.errors import ProfileSummaryUnavailable
from colabkit.extras import needs
from colabkit.training.fit import fit, one_pass_per_epoch
from colabkit.training.shares import summarise_ops

PROFILERS = {"tensorflow": "tf.profiler.experimental", "jax": "jax.profiler", "torch": "torch.profiler"}
IDLE_IS = {
    "host": ("IDLE (host threads): summed over the threads that ran operations, from each thread's first to its "
             "last operation in the window, the time it ran none: threads waiting on each other (an operation "
             "waits for its inputs; the thread pools hold more threads than there are cores), on the host's "
             "Python (Keras's loop, callbacks) and on input"),
    "device": ("IDLE (device): the time the device ran no kernel in the window: waiting on the host (Python, "
               "Keras's loop, launching work) or on input"),
}


class ProfileWindow(keras.callbacks.Callback):
    """Starts the profiler when the second epoch begins and stops it when that epoch's steps are done
    (device work finished first); the first epoch is the warm-up. `wall_s`: the window's length."""

    def __init__(self, start: Any, stop: Any) -> None:
        super().__init__()
        self._start, self._stop = start, stop
        self.running = False
        self.wall_s: float | None = None
        self._began = 0.0

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        if epoch == 1:
            self._start()
            self.running = True
            self._began = time.perf_counter()

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        if epoch == 1 and self.running:
            keras.ops.convert_to_numpy(self.model.optimizer.iterations)  # copying the counter out waits for the steps
            self.wall_s = time.perf_counter() - self._began
            self.close()

    def close(self) -> None:
        """Stop the profiler if it runs (also after a failed fit: a profiler left on slows what follows)."""
        if self.running:
            self.running = False
            self._stop()


def _profiler(backend: str, trace_dir: Path) -> tuple[Any, Any, Any]:
    """(start, stop, torch's profile object or None) for the backend's own profiler."""
    if backend == "tensorflow":
        import tensorflow as tf

        return (lambda: tf.profiler.experimental.start(str(trace_dir))), tf.profiler.experimental.stop, None
    if backend == "jax":
        import jax

        options = jax.profiler.ProfileOptions()
        options.python_tracer_level = 0  # Python's own frames would slow the very steps profiled

        def start() -> None:
            jax.profiler.start_trace(str(trace_dir), profiler_options=options)

        return start, jax.profiler.stop_trace, None
    if backend == "torch":
        import torch

        activities = [torch.profiler.ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        profiler = torch.profiler.profile(activities=activities,
                                          on_trace_ready=torch.profiler.tensorboard_trace_handler(str(trace_dir)))
        return profiler.start, profiler.stop, profiler
    raise ValueError(f"no profiler known for the {backend!r} backend (known: {', '.join(PROFILERS)})")


def trace_files(trace_dir: Path) -> list[Path]:
    """The files of the newest profiling run under `trace_dir` (TensorBoard's plugins/profile/<run>/)."""
    runs = sorted(path for path in (trace_dir / "plugins" / "profile").glob("*") if path.is_dir())
    if runs:
        return sorted(runs[-1].glob("*.xplane.pb"))
    return sorted(trace_dir.glob("*.pt.trace.json*"))  # torch.profiler's tensorboard_trace_handler


def converter_version() -> str | None:
    """The installed xprof's version (the TensorBoard profile plugin's converters), or None."""
    try:
        return importlib.metadata.version("xprof")
    except importlib.metadata.PackageNotFoundError:
        return None


def read_op_stats(paths: list[Path]) -> tuple[list[dict[str, Any]], str]:
    """Every operation's self time in a trace, by xprof's `framework_op_stats` converter: (rows of
    {type, operation, occurrences, self_time_us}, "device" or "host": whose time they are). Device rows
    where the trace has them; else the host's (on a CPU, the op threads). Raises ProfileSummaryUnavailable
    without xprof, or for a trace whose op statistics hold no operation."""
    if converter_version() is None:
        raise ProfileSummaryUnavailable(f"the summary {needs('profile')}: the trace was "
                                        "written and TensorBoard opens it, but it was not summarised here")
    from xprof.convert import raw_to_tool_data

    data, _ = raw_to_tool_data.xspace_to_tool_data([str(path) for path in paths], "framework_op_stats", {})
    tables = json.loads(data)
    table = tables[0] if isinstance(tables, list) else tables  # the first table counts IDLE, the second does not
    columns = [column["id"] for column in table["cols"]]
    rows = [dict(zip(columns, [(cell or {}).get("v") for cell in row["c"]])) for row in table["rows"]]
    device = [row for row in rows if row.get("host_or_device") == "Device"]
    chosen, basis = (device, "device") if device else ([r for r in rows if r.get("host_or_device") == "Host"], "host")
    if not any(str(row["type"]).upper() != "IDLE" and row["total_self_time"] for row in chosen):
        raise ProfileSummaryUnavailable("the converter's op statistics hold no operation for this backend on this "
                                        "device (JAX on a CPU records its XLA work as trace events only): open the "
                                        "trace in TensorBoard's trace viewer")
    return [{"type": row["type"], "operation": row["operation"], "occurrences": row["occurrences"],
             "self_time_us": row["total_self_time"]} for row in chosen], basis


def _torch_rows(profiler: Any, wall_s: float) -> tuple[list[dict[str, Any]], str]:
    """torch.profiler's own per-operation averages, with the window's time no operation filled as IDLE."""
    events = list(profiler.key_averages())
    on_device = any(getattr(event, "self_device_time_total", 0) for event in events)
    key = "self_device_time_total" if on_device else "self_cpu_time_total"
    rows = [{"type": event.key, "operation": event.key, "occurrences": event.count,
             "self_time_us": float(getattr(event, key, 0.0))} for event in events]
    busy_us = sum(row["self_time_us"] for row in rows)
    rows.append({"type": "IDLE", "operation": "IDLE", "occurrences": 0,
                 "self_time_us": max(0.0, wall_s * 1e6 - busy_us)})
    return rows, "device" if on_device else "host"


def capture_profile(model: Any, train_data: Any, steps: int, trace_dir: str | Path) -> dict[str, Any]:
    """Profile `steps` steady training steps of `model` on the run's own `train_data`, write the trace
    under `trace_dir`, and return the record's `op_breakdown`: the profiler, the trace's files, the
    window's wall time, and (where it can be summarised) the shares per operation category, which sum
    to 1 with idle its own share, the busy time's shares and the top operations; else `reason`."""
    backend = keras.backend.backend()
    per_execution = max(1, int(getattr(model, "steps_per_execution", 1) or 1))
    steps = per_execution * math.ceil(max(1, int(steps)) / per_execution)  # whole executions only
    trace_dir = Path(trace_dir)
    trace_dir.mkdir(parents=True, exist_ok=True)
    start, stop, torch_profiler = _profiler(backend, trace_dir)
    data, _ = one_pass_per_epoch(train_data, None, per_execution)
    window = ProfileWindow(start, stop)
    began = time.perf_counter()
    try:
        fit(model, data, epochs=2, steps_per_epoch=steps, callbacks=[window], verbose=0)
    finally:
        window.close()
    files = trace_files(trace_dir)
    record: dict[str, Any] = {
        "profiler": PROFILERS[backend], "steps": steps, "trace_dir": str(trace_dir),
        "trace_files": [str(path.relative_to(trace_dir)) for path in files],
        "open_with": f"tensorboard --logdir {trace_dir}", "wall_s": window.wall_s,
        "converter": None, "reason": None, "cores": os.cpu_count(),
    }
    try:
        if torch_profiler is not None:
            rows, basis = _torch_rows(torch_profiler, window.wall_s or 0.0)
            record["converter"] = "torch.profiler key_averages"
        else:
            rows, basis = read_op_stats(files)
            record["converter"] = f"xprof {converter_version()} framework_op_stats"
        optimizer = getattr(getattr(model, "optimizer", None), "name", None)
        record.update(summarise_ops(rows, optimizer=optimizer), basis=basis, idle_is=IDLE_IS[basis])
        if basis == "host" and window.wall_s:
            record["busy_cores"] = record["busy_s"] / window.wall_s  # cores kept busy by operations, on average
    except ProfileSummaryUnavailable as why:
        record["reason"] = str(why)
    record["seconds"] = time.perf_counter() - began  # the profiling pass, summary included
    return record
