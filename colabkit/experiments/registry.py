"""Where experiment declarations are found: the suite's own, and any named by COLABKIT_EXPERIMENTS
(comma-separated module paths or .py files, each declaring module-level `Experiment` objects);
`register` adds one from anywhere. Kernels papermill starts inherit the environment, so a swept
notebook finds the same declarations as the sweep.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from colabkit.errors import ExperimentDeclarationError, UnknownExperimentError
from colabkit.experiments.declaration import Experiment

ENVIRONMENT_VARIABLE = "COLABKIT_EXPERIMENTS"
BUILTIN_MODULES = (
    "colabkit.experiments.matmul_tflops",
    "colabkit.experiments.cnn_mnist",
    "colabkit.experiments.dblstm_har",
    "colabkit.experiments.timeseries_rnn",
    "colabkit.experiments.paradnn",
)
_BUILTIN = "colabkit"
_DIRECT = "register()"  # declared by a direct call (e.g. in a notebook), not by a listed module

_by_source: dict[str, dict[str, Experiment]] = {}
_loading: list[str] = []


@contextlib.contextmanager
def _source(name: str) -> Iterator[None]:
    _loading.append(name)
    try:
        yield
    finally:
        _loading.pop()


def register(experiment: Experiment) -> Experiment:
    """Register `experiment` (as its module is imported) and return it.

    Registering the same name twice with a different declaration raises ExperimentDeclarationError:
    two experiments would then write records the report could not tell apart.
    """
    for source, experiments in _by_source.items():
        known = experiments.get(experiment.name)
        if known is not None and known != experiment and (source != _DIRECT or _loading):
            raise ExperimentDeclarationError(
                f"experiment {experiment.name!r} is declared twice ({source} and "
                f"{_loading[-1] if _loading else _DIRECT}); give one of them another name")
    _by_source.setdefault(_loading[-1] if _loading else _DIRECT, {})[experiment.name] = experiment
    return experiment


def _import_entry(entry: str) -> object:
    if entry.endswith(".py"):
        path = Path(entry).expanduser().resolve()
        if not path.is_file():
            raise ExperimentDeclarationError(f"{ENVIRONMENT_VARIABLE}: {entry} is not a file")
        digest = hashlib.sha1(str(path).encode()).hexdigest()[:10]
        name = f"colabkit_declared_{path.stem}_{digest}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ExperimentDeclarationError(f"{ENVIRONMENT_VARIABLE}: cannot load {entry}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(name, None)
            raise
        return module
    try:
        return importlib.import_module(entry)
    except ImportError as exc:
        raise ExperimentDeclarationError(
            f"{ENVIRONMENT_VARIABLE}: cannot import {entry!r} ({exc}); is its folder on PYTHONPATH?") from exc


def _load(source: str, modules: tuple[str, ...]) -> dict[str, Experiment]:
    if source not in _by_source:
        with _source(source):
            for name in modules:
                module = importlib.import_module(name) if source == _BUILTIN else _import_entry(name)
                for value in vars(module).values():  # its module-level declarations
                    if isinstance(value, Experiment):
                        register(value)
        _by_source.setdefault(source, {})
    return _by_source[source]


def listed_modules() -> list[str]:
    """The entries of COLABKIT_EXPERIMENTS, in order."""
    return [entry.strip() for entry in os.environ.get(ENVIRONMENT_VARIABLE, "").split(",") if entry.strip()]


def all_experiments() -> tuple[Experiment, ...]:
    """Every declared experiment: the suite's own, in the order of its report, then those of the
    modules COLABKIT_EXPERIMENTS lists now, then any registered directly."""
    found: dict[str, Experiment] = dict(_load(_BUILTIN, BUILTIN_MODULES))
    for entry in listed_modules():
        for name, experiment in _load(entry, (entry,)).items():
            found.setdefault(name, experiment)
    for name, experiment in _by_source.get(_DIRECT, {}).items():
        found.setdefault(name, experiment)
    return tuple(found.values())


def find(name: str) -> Experiment | None:
    """The experiment declared as `name`, or None."""
    return next((experiment for experiment in all_experiments() if experiment.name == name), None)


def get(name: str) -> Experiment:
    """The experiment declared as `name`; UnknownExperimentError naming the known ones otherwise."""
    experiment = find(name)
    if experiment is None:
        known = ", ".join(experiment.name for experiment in all_experiments())
        raise UnknownExperimentError(
            f"no experiment is declared as {name!r} (known: {known}); declare it and list its module in "
            f"{ENVIRONMENT_VARIABLE} (docs/adding-an-experiment.md)")
    return experiment
