"""Where one combination's wall time goes, from what a sweep leaves and a few clocks around its steps.

`SweepClocks` wraps, in the sweep's own process, the steps colabkit.sweep.runners.execute takes per
combination (the whole of execute_combination, papermill's execute_notebook, the HTML export, taking
a warm kernel and giving it back); the host probe, once per sweep, is in the run that measured it.
`breakdown` then splits each combination's time into PHASES from its executed notebook (papermill's
start time and each cell's start and duration), its record (the epochs' times, and the phases
colabkit noted: device_setup, host_probes, flop_count, each placed in the cell it ran in) and those
clocks. Which cell is which is read from its code (CELL_KINDS): the notebooks carry no timing code.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

PHASES = ("kernel start", "imports", "device set-up", "host probes", "data", "model build", "FLOP count",
          "first epoch", "steady epochs", "training, other", "bottleneck passes", "evaluation", "results and plots",
          "record", "papermill", "HTML export", "sweep bookkeeping", "kernel clean-up")
# What "model build and training" is, for the done-when figure: everything else is fixed cost. The
# bottleneck passes (colabkit.training.breakdown: more training steps, measuring what bounds the run)
# are measurement work, counted with the training.
WORK = ("model build", "first epoch", "steady epochs", "training, other", "bottleneck passes")
# A code cell's kind, from its code: the first pattern found decides (checked in this order).
CELL_KINDS = (
    ("start_run(", "imports"),  # the set-up cell: imports, start_run, setup_device (its phase taken out)
    ("run.record(", "record"),
    ("colabkit.measure(", "training"),  # matmul: the cold call, the warm calls
    ("model.fit(", "training"),  # Keras's fit with the trainer's callbacks, then the bottleneck passes (taken out below)
    ("model.compile(", "model build"),
    ("def build_tensorflow_matmul", "model build"),  # matmul: the chained product and its inputs
    ("classification_report(", "evaluation"),
    ("forecast.evaluate(", "evaluation"),
    ("numpy_matmul_baseline", "evaluation"),  # matmul: the same-run BLAS baseline
    ("load_mnist(", "data"),
    ("load_uci_har(", "data"),
    ("load_weather_series(", "data"),
    ("default_rng(", "data"),  # ParaDnn's synthetic batch
    ("auto_sizes(", "data"),
)
NOTED = {"device_setup": "device set-up", "host_probes": "host probes", "flop_count": "FLOP count"}


def _when(stamp: str) -> float:
    return dt.datetime.fromisoformat(stamp).timestamp()


class SweepClocks:
    """Seconds of each sweep step, per combination (by its record's path), while `installed`."""

    def __init__(self) -> None:
        self.steps: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self.current: str | None = None

    def _timed(self, step: str, function: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                if self.current is not None:
                    self.steps[self.current][step] += time.perf_counter() - start
        return wrapper

    @contextmanager
    def installed(self) -> Iterator[SweepClocks]:
        from colabkit.sweep.runners import execute as execution
        from colabkit.sweep.runners import local as executors
        from colabkit.sweep.runners.kernels import KernelPool

        saved = [(execution, "execute_notebook"), (execution, "export_run_html"), (executors, "execute_combination"),
                 (KernelPool, "take"), (KernelPool, "give_back")]
        originals = [(owner, name, getattr(owner, name)) for owner, name in saved]
        inner = executors.execute_combination

        def combination(chosen: Any, out: Any, *args: Any, **kwargs: Any) -> Any:
            self.current = str(execution.RunFiles.of(chosen, out).record)
            start = time.perf_counter()
            try:
                return inner(chosen, out, *args, **kwargs)
            finally:
                self.steps[self.current]["total"] += time.perf_counter() - start
                self.current = None

        execution.execute_notebook = self._timed("papermill", execution.execute_notebook)
        execution.export_run_html = self._timed("html", execution.export_run_html)
        executors.execute_combination = combination
        KernelPool.take = self._timed("take", KernelPool.take)
        KernelPool.give_back = self._timed("clean", KernelPool.give_back)
        try:
            yield self
        finally:
            for owner, name, original in originals:
                setattr(owner, name, original)


def cell_kind(source: str) -> str:
    return next((kind for pattern, kind in CELL_KINDS if pattern in source), "results and plots")


def training_split(record: dict[str, Any]) -> tuple[float, float]:
    """(first epochs or cold call, steady epochs or the other calls) in seconds, from the record."""
    timings = record["timings"]
    if "repeats" in timings:  # the dBLSTM: fresh models one after another, each with its epochs
        splits = [training_split({"timings": repeat}) for repeat in timings["repeats"]]
        return sum(first for first, _ in splits), sum(steady for _, steady in splits)
    if "epochs" in timings:
        epochs = [epoch["epoch_s"] for epoch in timings["epochs"]]
        return epochs[0], sum(epochs[1:])
    matmul = timings["matmul"]
    warmup = matmul.get("warmup_calls_discarded", 0)
    return matmul["cold_s"], sum(matmul["warm_s"]) + warmup * matmul["median_s"]


def breakdown(record_path: Path, steps: dict[str, float]) -> dict[str, float]:
    """One combination's seconds per phase (PHASES), from its executed notebook, record and clocks."""
    record = json.loads(record_path.read_text())
    notebook = json.loads(record_path.with_suffix(".ipynb").read_text())
    seconds = dict.fromkeys(PHASES, 0.0)
    cells = [(cell, cell["metadata"].get("papermill", {})) for cell in notebook["cells"] if cell["cell_type"] == "code"]
    timed = [(cell, meta) for cell, meta in cells if meta.get("start_time") and meta.get("duration") is not None]
    windows = []
    for cell, meta in timed:
        kind = cell_kind("".join(cell["source"]))
        start = _when(meta["start_time"])
        windows.append((start, start + meta["duration"], kind))
        if kind == "training":
            first, steady = training_split(record)
            passes = ((record.get("breakdown") or {}).get("seconds") or {}).get("total", 0.0)
            seconds["first epoch"] += first
            seconds["steady epochs"] += steady
            seconds["bottleneck passes"] += passes
            seconds["training, other"] += meta["duration"] - first - steady - passes
        else:
            seconds[kind] += meta["duration"]
    for noted in record.get("phases", []):  # the phases colabkit noted, taken out of the cell they ran in
        start = _when(noted["started_at"])
        kind = next((kind for begin, end, kind in windows if begin <= start <= end), "results and plots")
        kind = "training, other" if kind == "training" else kind
        seconds[kind] -= noted["seconds"]
        seconds[NOTED.get(noted["phase"], "results and plots")] += noted["seconds"]
    first_cell = min(start for start, _, _ in windows)
    to_first_cell = first_cell - _when(notebook["metadata"]["papermill"]["start_time"])
    seconds["kernel start"] = steps.get("take", 0.0) + to_first_cell
    cell_sum = sum(meta["duration"] for _, meta in timed)
    seconds["papermill"] = steps["papermill"] - cell_sum - to_first_cell
    seconds["HTML export"] = steps.get("html", 0.0)
    seconds["kernel clean-up"] = steps.get("clean", 0.0)
    seconds["sweep bookkeeping"] = (steps["total"] - steps["papermill"] - steps.get("html", 0.0)
                                    - steps.get("take", 0.0) - steps.get("clean", 0.0))
    return seconds


def outside_work(seconds: dict[str, float]) -> float:
    """A combination's seconds outside model build and training: its fixed cost."""
    return sum(value for phase, value in seconds.items() if phase not in WORK)
