"""What a sweep was asked, in two parts typed once by the command line and checked once (for the dry run and the
real run alike):

- `PlanRequest`, what runs: the grid files, preset, device, `-p` overrides and the settings a combination
  carries (repeats, kernels, HTML), which colabkit.sweep.plan turns into a SweepPlan, once;
- `RunOptions`, how the plan's runs run, which the plan carries (`SweepPlan.options`, in its JSON too): which
  runner (by name: RUNNERS, colabkit.sweep.driver) and its settings (jobs, a Dask cluster, Colab accelerators and
  their sessions' limits), each run's timeout and kernel, whether finished runs are kept, and when to stop
  repeating (`Repetition`: further rounds until each headline's interval is narrow enough).

Each option's own type and range is the command line's to check (colabkit.cli_arguments); what is checked
here is how options go together. The vocabularies of the settings each combination carries (its HTML
export, its kernel, its bottleneck passes) are here too (colabkit.sweep.plan).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Literal, get_args

from colabkit.errors import ColabkitError

# Which runs get their executed notebook exported to HTML: every one, the failed ones only (a big sweep:
# `python -m colabkit export-html OUT` exports the rest on demand), or none. Every run keeps its notebook.
HtmlMode = Literal["all", "failed", "none"]
# A fresh kernel per run, or warm kernels cleared between runs (colabkit.sweep.runners.kernels).
KernelMode = Literal["fresh", "reuse"]
# The bottleneck passes (colabkit.training.breakdown) in every run, or in the first run of each
# combination only: its later repeats run with `breakdown=False` (their training is measured the same).
BottleneckMode = Literal["all", "first"]
# The grid-file keys of those settings and the values each takes.
SETTING_CHOICES: dict[str, tuple[str, ...]] = {"kernels": get_args(KernelMode), "html": get_args(HtmlMode),
                                     "bottlenecks": get_args(BottleneckMode)}
# The runners a plan can run on (colabkit.sweep.runners.RUNNERS): one run after another here, `jobs` side by
# side here, a Dask cluster's workers, Colab sessions per accelerator.
RunnerName = Literal["serial", "pool", "dask", "colab"]

DEFAULT_MAX_RUNS = 100  # runs per warm kernel before a fresh one: bounds what slow leaks can add up to
DEFAULT_MAX_REPEATS = 10  # --target-ci without --max-repeats


@dataclass(frozen=True)
class PlanRequest:
    """What runs: the inputs the plan is made from (colabkit.sweep.plan.plan)."""

    grids: tuple[str, ...] = ()  # the grid files
    preset: str | None = None
    device: str | None = None  # only this device's combinations ('cpu', 'cpu:2', 'cpu,gpu')
    overrides: tuple[str, ...] = ()  # -p KEY=VALUE, as given (colabkit.sweep.grids parses them)
    repeats: int | None = None  # None, as for kernels and html: what the grid file or its preset says
    kernels: KernelMode | None = None
    html: HtmlMode | None = None


@dataclass(frozen=True)
class RunOptions:
    """How a plan's runs run; raises ColabkitError (one line) on creation when two options do not go
    together, so a dry run refuses exactly what the real run refuses. Its JSON form (`as_json`, `from_json`)
    holds every field but those the sweep sets as it runs (RUN_STATE)."""

    jobs: int = 1  # runs side by side, each in its own worker process (written into each record)
    cluster: str | None = None  # a Dask scheduler's address, or local:N (colabkit.sweep.runners.dask)
    shared_out: bool | None = None  # with cluster: see colabkit.sweep.runners.dask.DaskExecutor
    # Each accelerator's runs in Colab sessions of its own (colabkit.sweep.runners.colab):
    colab: tuple[str, ...] = ()  # the accelerators, in the Colab client's spelling
    colab_timeout_s: float | None = None  # each accelerator's sessions, in all
    colab_session_limit_s: float | None = None  # one session at most (None: its default)
    timeout_s: float | None = None  # wall-clock limit of one run's cells; None: no limit
    kernel_name: str | None = None  # None: the notebook's own kernelspec
    max_kernel_runs: int = DEFAULT_MAX_RUNS  # warm kernels: runs per kernel before a fresh one
    wait_quiet_s: float | None = None  # before each run, wait up to this long for a quiet host
    force: bool = False  # rerun runs that finished earlier
    rerun_unreadable: bool = False  # rerun (and replace) record files that cannot be read
    # Set by the sweep as it runs (RUN_STATE), not by its user:
    cwd: str | None = None  # the kernels' working directory; None: the sweep's
    host_facts: str | None = None  # the file of facts measured once for the host (COLABKIT_HOST_FACTS)
    repetition: Repetition | None = None  # further rounds to a target interval; every record names it
    worker_grace_s: float = 60  # multi-worker runs: after a worker dies, how long the others may take to fail
    start_attempts: int = 3  # tries to start a kernel (ports can race between parallel jobs)
    start_timeout_s: float = 60

    def __post_init__(self) -> None:
        if self.cluster and self.jobs != 1:
            raise ColabkitError("--jobs does not apply with --cluster: each Dask worker thread runs one combination")
        if self.wait_quiet_s is not None and self.jobs != 1:
            raise ColabkitError("--wait-quiet waits for an idle host before each run; with --jobs the other runs "
                                "keep it busy: use --jobs 1")
        if self.colab and (self.cluster or self.jobs != 1):
            raise ColabkitError("--colab runs each accelerator's combinations in its own sessions, one at a time: "
                                "drop --cluster and --jobs")
        given = [flag for flag, value in (("--colab-timeout", self.colab_timeout_s),
                                          ("--colab-session-limit", self.colab_session_limit_s)) if value is not None]
        if given and not self.colab:
            raise ColabkitError(f"{' and '.join(given)} go{'es' if len(given) == 1 else ''} with --colab (the Colab "
                                "sessions' limits); this sweep runs here")

    @property
    def runner(self) -> RunnerName:
        """The runner these options name (colabkit.sweep.runners.RUNNERS)."""
        return "colab" if self.colab else "dask" if self.cluster else "pool" if self.jobs > 1 else "serial"

    def sweep_section(self, env: dict[str, str] | None = None) -> dict[str, Any]:
        """What every record of the sweep says about how it ran (its `sweep` section, before the run)."""
        return {"jobs": self.jobs, "cuda_visible_devices": (env or {}).get("CUDA_VISIBLE_DEVICES"),
                **(self.repetition.section() if self.repetition else {})}

    def as_json(self) -> dict[str, Any]:
        """The options as a plan file holds them: every field but RUN_STATE."""
        return {key: value for key, value in dataclasses.asdict(self).items() if key not in RUN_STATE}

    @classmethod
    def from_json(cls, data: Any) -> RunOptions:
        """The options `as_json` wrote, each checked as the command line checks it (OPTION_VALUES): ColabkitError, one
        line, for a field it does not know, a value of another type or out of range, or options that do not go
        together."""
        if not isinstance(data, dict):
            raise ColabkitError(f"{data!r}: expected a mapping of option -> value")
        for name, value in data.items():
            if name not in OPTION_VALUES:
                raise ColabkitError(f"unknown option `{name}`; a plan's options are {', '.join(OPTION_VALUES)}")
            kinds, least, above = OPTION_VALUES[name]
            fits = (value is None and None in kinds) or any(type(value) is kind for kind in kinds if kind is not None)
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not fits or (number and not (math.isfinite(value) and (value > least if above else value >= least))):
                bound = f" {'>' if above else '>='} {least:g}" if least is not None else ""
                shown = [kind for kind in kinds if not (kind is int and float in kinds)]  # a float takes an int
                what = " or ".join(dict.fromkeys(KIND_WORDS[kind] for kind in shown))
                raise ColabkitError(f"{name} = {value!r}: expected {what.replace('number', 'number' + bound, 1)}")
        repetition = data.get("repetition")
        if repetition is not None:
            target, most = repetition.get("target_ci"), repetition.get("max_repeats")
            if set(repetition) != {"target_ci", "max_repeats"} or not (
                    type(target) is float and 0 < target < 1 and type(most) is int and most >= 1):
                raise ColabkitError(f"repetition = {repetition!r}: expected target_ci (a share between 0 and 1) and "
                                    "max_repeats (a whole number >= 1)")
        if any(not isinstance(name, str) for name in data.get("colab") or ()):
            raise ColabkitError(f"colab = {data['colab']!r}: expected a list of accelerators' names")
        return cls(**{**data, "colab": tuple(data.get("colab") or ()),
                      "repetition": Repetition(**repetition) if repetition is not None else None})


RUN_STATE = ("cwd", "host_facts")  # the fields the sweep sets as it runs: never in a plan file
# What each option of a plan file may be, as the command line's types allow it (colabkit.cli_arguments): its types
# (None: null), and for a number its least value and whether it must be above it.
OPTION_VALUES: dict[str, tuple[tuple[type | None, ...], float | None, bool]] = {
    "jobs": ((int,), 1, False), "cluster": ((str, None), None, False), "shared_out": ((bool, None), None, False),
    "colab": ((list, tuple), None, False), "colab_timeout_s": ((float, int, None), 0, True),
    "colab_session_limit_s": ((float, int, None), 0, True), "timeout_s": ((float, int, None), 0, True),
    "kernel_name": ((str, None), None, False), "max_kernel_runs": ((int,), 1, False),
    "wait_quiet_s": ((float, int, None), 0, False), "force": ((bool,), None, False),
    "rerun_unreadable": ((bool,), None, False), "repetition": ((dict, None), None, False),
    "worker_grace_s": ((float, int), 0, False), "start_attempts": ((int,), 1, False),
    "start_timeout_s": ((float, int), 0, True)}
KIND_WORDS = {int: "a whole number", float: "a number", str: "text", bool: "true or false", list: "a list",
              tuple: "a list", dict: "a mapping", None: "null"}


@dataclass(frozen=True)
class Repetition:
    """When to stop repeating: rounds of one more run of each combination whose headline interval is wider
    than `target_ci` (a share of its median), until none is or each has `max_repeats` runs."""

    target_ci: float
    max_repeats: int = DEFAULT_MAX_REPEATS

    @classmethod
    def asked(cls, target_ci: float | None, max_repeats: int | None) -> Repetition | None:
        """The command line's --target-ci and --max-repeats as a Repetition (None without --target-ci)."""
        if target_ci is None:
            if max_repeats is not None:
                raise ColabkitError("--max-repeats goes with --target-ci (it caps the runs made to reach the target)")
            return None
        return cls(target_ci, DEFAULT_MAX_REPEATS if max_repeats is None else max_repeats)

    def section(self) -> dict[str, Any]:
        """What each record of a sweep with this rule says of it (its `sweep` section)."""
        return {"target_ci": self.target_ci, "max_repeats": self.max_repeats}
