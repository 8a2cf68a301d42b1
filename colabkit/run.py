"""The notebook's side of a run: `start_run` checks the parameters cell against the experiment's declaration,
then `Run` carries the run to its record: the memory check, the sizes "auto" chose, where its other products
go (`artifact`), an early end (`end_here`) and the record itself, written once (colabkit.records.record's
schema and paths).
"""

from __future__ import annotations

import ast
import warnings
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from colabkit.colab.install import install_for_run
from colabkit.device.host_state import HostMonitor
from colabkit.device.memory import setup_memory
from colabkit.device.multiworker import is_chief_setup, worker_path
from colabkit.errors import MeasurementError, ParameterError
from colabkit.experiments import check_values, find, get
from colabkit.experiments.declaration import Experiment, undeclared
from colabkit.io import write_json_atomic
from colabkit.phases import noted_phases, start_phases
from colabkit.records.plausibility import measurement_problems
from colabkit.records.record import default_results_path, final_base, make_record, utc_now
from colabkit.records.run_error import RunError
from colabkit.records.schema import ErrorKind
from colabkit.training.memory import check_fits

SIZED_FOR = {"cpu": "a CPU runtime", "gpu": "a free Colab T4 GPU", "tpu": "a Colab TPU"}  # what "auto" sizes fit


class Run:
    """One execution of a notebook: notes the start, then writes its record once at the end.

    >>> run = start_run("matmul_tflops", globals())  # right after the notebook's parameters cell
    >>> run.record(device=dev, metrics={...}, timings={...}, data={...})
    """

    def __init__(self, notebook: str, params: Mapping[str, Any], results_path: str | Path | None = None) -> None:
        self.notebook = notebook
        self.params = dict(params)
        self.started_at = utc_now()
        start_phases()  # this run's phases only (a warm kernel runs several)
        self.path = Path(results_path) if results_path else default_results_path(
            notebook, str(self.params.get("device", "auto")))
        self.written: dict[str, Any] | None = None
        self.sizes: dict[str, Any] | None = None  # the record's `sizes`, once auto_sizes chose them
        # The host's state from here to the record: other processes' CPU time, steal, clocks, GPUs.
        self.host_monitor = HostMonitor().start()
        weakref.finalize(self, self.host_monitor.close)

    def check_memory(self, device: Any) -> None:
        """Refuse (InsufficientMemoryError, one line naming the estimate and the device's memory) a run
        whose model clearly cannot fit `device` (the notebook's DeviceSetup): its experiment's memory
        estimate (colabkit.training.memory) above 90 % of what one model copy can use there. Call it
        right after setup_device, before building the model; nothing when the experiment declares no
        estimate or the device's memory is unknown."""
        if self.experiment is not None:
            check_fits(self.experiment, self.params, setup_memory(device))

    def auto_sizes(self, device: Any, table: Mapping[str, Mapping[str, Any]], **values: Any) -> tuple[Any, ...]:
        """`values` in order, each "auto" one replaced by `table[device kind][name]` (sizes that run a notebook by hand
        in minutes on the device it landed on); printed, and kept for the record's `sizes` (asked, used, which auto)."""
        kind, sizes = device.kind, table.get(device.kind, {})
        auto = [name for name, value in values.items() if isinstance(value, str) and value == "auto"]
        for name in (name for name in auto if name not in sizes):
            raise ParameterError(f"{name}='auto' has no size for a {kind} device: give {name} a value")
        used = {name: sizes[name] if name in auto else value for name, value in values.items()}
        self.sizes = {"device_kind": kind, "sized_for": SIZED_FOR.get(kind, kind), "auto": auto, "asked": dict(values),
                      "used": used}
        print(f'sizes chosen for {self.sizes["sized_for"]} (parameters left at "auto"): '
              f'{", ".join(f"{name}={used[name]}" for name in auto)}; give values explicitly (or use a grid\'s `paper` '
              "preset) for other sizes" if auto else 'sizes: as given (no parameter was "auto")')
        return tuple(used.values())

    def end_here(self) -> None:
        """End the run in this cell (an inference run, before the training sections): SystemExit(0), papermill's
        clean end and the last cell Colab's Run all runs."""
        print(f"this run ends here (mode = {self.params.get('mode')!r}); record: {self.written and self.path}")
        warnings.filterwarnings("ignore", "To exit: use 'exit'", UserWarning)  # IPython's note on SystemExit
        raise SystemExit(0)

    @property
    def experiment(self) -> Experiment | None:
        """The run's experiment declaration (colabkit.experiments.Experiment; None without one): its
        published `references` are what a notebook shows beside its own figures."""
        return find(self.notebook)

    def artifact(self, suffix: str, device: Any = None, *, fresh: bool = False) -> Path:
        """Where another product of this run goes (e.g. '.weights.h5'): beside the record and named
        after it, by its final name also while a sweep keeps the record under a temporary one. With the
        run's `device`, a non-chief worker of a multi-worker run gets a private scratch path beside it
        (colabkit.device.multiworker.worker_path: files every worker writes never collide). `fresh`: its
        folder made, and an earlier run's file there removed (it must never pass for this run's)."""
        path = worker_path(final_base(self.path).with_name(final_base(self.path).name + suffix), device)
        if fresh:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.unlink(missing_ok=True)
        return path

    def record(
        self,
        *,
        metrics: Mapping[str, Any],
        timings: Mapping[str, Any] | None = None,
        data: Mapping[str, Any] | None = None,
        device: Any = None,
        status: str = "ok",
        error: Mapping[str, Any] | None = None,
        **extra: Any,
    ) -> Path | None:
        """Write this run's record (atomically) and return its path.

        `device` is a DeviceSetup (or the dict of one). Extra keyword arguments become extra
        top-level fields of the record. On a non-chief worker of a multi-worker run nothing is
        written and None is returned: the chief's record is the run's only record.
        """
        if not is_chief_setup(device):
            return None
        device_section = device.as_record() if hasattr(device, "as_record") else dict(device or {})
        host_state = self.host_monitor.stop()
        extra = {"host_state": host_state, "host_quiet": host_state["quiet"],
                 **({"sizes": self.sizes} if self.sizes else {}), **extra}
        problems = measurement_problems(metrics, timings) if status == "ok" else []
        if problems:  # recorded as failed, with the reason, and the notebook stops here
            status = "failed"
            error = RunError("MeasurementError", ErrorKind.NOT_A_MEASUREMENT,
                             "not a measurement: " + "; ".join(problems)).as_record()
        extra.setdefault("phases", noted_phases())
        record = make_record(
            self.notebook, status, self.params, metrics=metrics, timings=timings, device=device_section,
            data=data, started_at=self.started_at, error=error, **extra,
        )
        write_json_atomic(self.path, record)
        self.written = record
        if problems:
            final = final_base(self.path)  # a sweep's temporary name undone: where the record ends up
            raise MeasurementError(f"{error['message']}; recorded as failed in {final.with_name(final.name + '.json')}")
        return self.path


PAPERMILL_CELL = "# Parameters\n"  # how papermill's injected cell starts (its Python translator's comment)


def passed_parameters(namespace: Mapping[str, Any]) -> list[str]:
    """The names papermill passed to this run (`-p NAME VALUE`): those its injected cell assigns, read back
    from IPython's input history (`In`); [] outside IPython. Only those: a kernel also holds IPython's own
    names, the set-up cell's imports and, after a Run all in the same kernel, every name of the last run."""
    history = namespace.get("In")
    injected = [cell for cell in history if isinstance(cell, str) and cell.startswith(PAPERMILL_CELL)] if isinstance(
        history, list) else []
    try:
        body = ast.parse(injected[-1]).body if injected else []
    except SyntaxError:  # a cell of the user's that only starts like papermill's
        body = []
    return [target.id for node in body if isinstance(node, ast.Assign) for target in node.targets
            if isinstance(target, ast.Name)]


def start_run(notebook: str, namespace: Mapping[str, Any] | None = None, *,
              params: Mapping[str, Any] | None = None, results_path: str | Path | None = None) -> Run:
    """Begin a run of `notebook`, after checking its parameters.

    `start_run("cnn_mnist", globals())`, right after a notebook's parameters cell: reads every
    parameter the experiment's declaration names from `namespace`, checks them all against it and
    raises ParameterError listing every problem ("n = 'abc': expected an int >= 1"; a name papermill
    passed that the declaration lacks, with the closest declared ones: `passed_parameters`) before any work;
    the record's params are those values (less those the declaration says do not shape this run:
    Experiment.relevant), its path `results_path` (empty: the default path). Then, in Colab, what the run's
    `device` and `backend` need beyond the set-up cell's installs (colabkit.colab.install.install_for_run:
    TensorFlow's TPU build for TensorFlow on a TPU), before the notebook's `setup_device` imports a framework.

    `start_run(name, params=..., results_path=...)` is for a notebook that has no declaration; where
    `name` has one, `params` are checked against it all the same.
    """
    if namespace is not None:
        if params is not None:
            raise TypeError("start_run takes a namespace (globals()) or params=, not both")
        experiment = get(notebook)
        values = {name: namespace[name] for name in experiment.parameter_names if name in namespace}
        problems = [undeclared(experiment, name) for name in passed_parameters(namespace)
                    if name not in experiment.parameter_names]
        problems += check_values(experiment, values, complete=True)
        if problems:
            raise ParameterError(problems)
        results_path = values.pop("results_path")
        # The record keeps what shapes the run: the other families' knobs of a ParaDnn run are left out.
        params = experiment.relevant(values)
    elif params is None:
        raise TypeError(f'start_run("{notebook}", globals()) reads the parameters cell; or pass params=')
    elif (experiment := find(notebook)) is not None:
        problems = check_values(experiment, dict(params), complete=False)
        if problems:
            raise ParameterError(problems)
        params = experiment.relevant(params)
    install_for_run(str(params.get("device", "auto")), params.get("backend"))
    return Run(notebook, params, results_path)
