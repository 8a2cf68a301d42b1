"""What an experiment is, declared once: its notebook, typed parameters, metrics, headline and published
references. The sweep's validator, the notebook's own parameter check
(`colabkit.start_run(name, globals())`), the report and the README's table all read it.

A parameter's value is checked by `Parameter.problem`, which answers one line naming what is allowed
("expected an int >= 1", "expected one of float32, float16, bfloat16"); `check_values` gathers every
problem of a dict of values at once.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, get_args

from colabkit.device.backends import BACKEND_CHOICES
from colabkit.device.spec import parse_device
from colabkit.errors import ExperimentDeclarationError, UnknownDeviceError
from colabkit.training.shares import BREAKDOWN_METRICS  # what bounds each training run: its experiments record it

# What a run of an experiment does: train (every experiment but matmul), or, where its declaration offers them (its
# `mode` parameter's choices), inference or decode (experiments/inference.py: the parameters and rules they bring).
Mode = Literal["train", "inference", "decode"]
MODES: tuple[Mode, ...] = get_args(Mode)
TRAIN, INFERENCE, DECODE = MODES

if TYPE_CHECKING:
    from colabkit.training.memory import MemoryEstimate

# int, float, str or bool in a declaration; a parameter the sweep reads from a notebook's parameters
# cell (colabkit.sweep.grids) may also take list, dict, NoneType, or `object`: anything.
ValueType = type
TYPE_NAMES: dict[type, str] = {int: "int", float: "float", str: "str", bool: "bool"}


def _type_name(kind: type) -> str:
    return TYPE_NAMES.get(kind, kind.__name__)


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


def _shown(value: Any) -> str:
    """A choice as a message lists it: strings bare (float32), anything else as Python writes it."""
    return value if isinstance(value, str) else repr(value)


def is_float_text(text: str) -> bool:
    """Whether `text` reads as a float (YAML 1.1 reads 1e-3 as a string: a hint names that case)."""
    try:
        float(text)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class Parameter:
    """One parameter of an experiment's notebook, as its `parameters` cell assigns it.

    `type`: int, float, str, bool, or a tuple of them (jit_compile: "auto" | True | False). Bounds:
    `minimum`/`maximum` (`minimum_exclusive` for "> 0"); `choices`: every value allowed; `zero_means`:
    what 0 below the minimum stands for ("all"); `auto`: what "auto" means where it is taken; `check`:
    a further test returning what is allowed, or None when the value fits (e.g. the device syntax).
    `used_when`: (parameter, values) pairs that must all hold for this one to shape a run (ParaDnn's
    `nodes` only for `family` "fc"); otherwise it is left out of the run's name, fingerprint and record
    (Experiment.relevant). `declared_as`: for a notebook without a declaration, the line the rule
    comes from ("the notebook's `n = 1024`"), named when a value is refused.
    """

    name: str
    type: ValueType | tuple[ValueType, ...]
    default: Any
    help: str
    minimum: float | None = None
    maximum: float | None = None
    minimum_exclusive: bool = False
    choices: tuple[Any, ...] | None = None
    zero_means: str | None = None
    auto: str | None = None  # what "auto" means where the parameter also takes it ("sized for the device")
    check: Callable[[Any], str | None] | None = field(default=None, compare=False)
    declared_as: str | None = None  # read from a parameters cell: "the notebook's `n = 1024`"
    used_when: tuple[tuple[str, tuple[Any, ...]], ...] = ()  # (parameter, values): when this one shapes a run

    def __post_init__(self) -> None:
        problem = self.problem(self.default)
        if problem:
            raise ExperimentDeclarationError(f"parameter {self.name}: its default does not fit its own rule: {problem}")

    @property
    def types(self) -> tuple[ValueType, ...]:
        return self.type if isinstance(self.type, tuple) else (self.type,)

    def allowed(self) -> str:
        """What this parameter takes, in words: 'an int >= 1', 'one of none, linear'."""
        if self.choices is not None:
            return "one of " + ", ".join(_shown(choice) for choice in self.choices)
        names = " or ".join(_type_name(kind) for kind in self.types)
        text = f"{_article(names)} {names}"
        bounds = []
        if self.minimum is not None:
            bounds.append(f"{'>' if self.minimum_exclusive else '>='} {self.minimum:g}")
        if self.maximum is not None:
            bounds.append(f"<= {self.maximum:g}")
        if bounds:
            text += " " + " and ".join(bounds)
        if self.zero_means is not None:
            text += f" (0: {self.zero_means})"
        if self.auto is not None:
            text += f', or "auto" ({self.auto})'
        return text

    def applies(self, values: Mapping[str, Any]) -> bool:
        """Whether this parameter shapes a run with `values` (every parameter's value, defaults filled in)."""
        return all(values.get(name) in allowed for name, allowed in self.used_when)

    def _type_fits(self, value: Any) -> bool:
        kind = type(value)
        if kind in self.types or object in self.types:
            return True
        return kind is int and float in self.types  # a grid may write 2 for 2.0; a bool is never an int

    def problem(self, value: Any) -> str | None:
        """None if `value` fits, else one line: "n = 'abc': expected an int >= 1"."""
        stated = f"{self.name} = {value!r}"
        if self.auto is not None and value == "auto":
            return None
        if self.choices is not None:
            if any(type(value) is type(choice) and value == choice for choice in self.choices):
                return None
            return f"{stated}: expected {self.allowed()}"
        if not self._type_fits(value):
            hint = " (YAML reads 1e-3 as a string: write 1.0e-3)" if (
                isinstance(value, str) and float in self.types and is_float_text(value)) else ""
            if self.declared_as:
                given = type(value).__name__
                names = " or ".join(sorted(_type_name(kind) for kind in self.types))
                return f"{value!r} is {_article(given)} {given}, but {self.declared_as} takes {names}{hint}"
            return f"{stated}: expected {self.allowed()}{hint}"
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if value != value:  # NaN fits no range
                return f"{stated}: expected {self.allowed()}"
            zero_ok = self.zero_means is not None and value == 0
            too_low = self.minimum is not None and (
                value <= self.minimum if self.minimum_exclusive else value < self.minimum)
            too_high = self.maximum is not None and value > self.maximum
            if (too_low and not zero_ok) or too_high:
                return f"{stated}: expected {self.allowed()}"
        if self.check is not None:
            reason = self.check(value)
            if reason:
                return f"{stated}: expected {reason}"
        return None


def replicas_of(values: Mapping[str, Any]) -> int:
    """The replicas a run's `device` value names ('cpu:2': 2); 1 where it gives no count ('gpu': every GPU
    there is, which the sweep cannot tell)."""
    return parse_device(str(values.get("device", "auto"))).count or 1


def device_syntax(value: Any) -> str | None:
    """Why `value` is not a device name colabkit.device.spec.parse_device understands (None if it is)."""
    try:
        parse_device(str(value))
    except UnknownDeviceError:
        return "one of auto, cpu, gpu, tpu, multiworker; cpu and gpu may take a replica count (cpu:2, gpu:4), " \
               "multiworker a worker count (multiworker:2)"
    return None


def device_parameter(help: str = '"cpu", "gpu", "tpu", "auto"; "cpu:2", "gpu:4" for several replicas') -> Parameter:
    """The `device` parameter every experiment has (its help may say more for one notebook)."""
    return Parameter("device", str, "auto", help, check=device_syntax)


def backend_parameter(choices: tuple[str, ...] = BACKEND_CHOICES,
                      help: str = 'Keras backend: "tensorflow", "jax", "torch" or "auto" (JAX on a TPU, TensorFlow '
                                  "elsewhere)") -> Parameter:
    """The `backend` parameter: "auto" by default, which colabkit.device.setup.setup_device resolves (JAX on
    a TPU, TensorFlow elsewhere) and records as `device.backend`."""
    return Parameter("backend", str, "auto", help, choices=choices)


def torch_runs_one_step_per_call(values: Mapping[str, Any]) -> str | None:
    """A rule for experiments with `backend` and `steps_per_execution`: Keras runs one step per call on torch (in
    training: an inference or decode run takes no training steps)."""
    if values["backend"] == "torch" and values["steps_per_execution"] != 1 and values.get("mode", TRAIN) == TRAIN:
        return (f"steps_per_execution = {values['steps_per_execution']}: expected 1 on the torch backend "
                "(Keras runs one step per call there)")
    return None


def breakdown_parameters() -> tuple[Parameter, Parameter]:
    """`breakdown` and `profile_steps`, which every training experiment has (colabkit.training.breakdown):
    short extra passes that say what bounds the run, and a profile of a few steps on request. A training
    experiment lists PROFILE_RULES among its constraints."""
    return (Parameter("breakdown", bool, True, "after training, measure what bounds the run: input pipeline, host "
                      "or device (seconds; docs/bottlenecks.md)"),
            Parameter("profile_steps", int, 0, "profile this many steady steps with the framework's profiler, the "
                      "trace beside the record (0: no profile; needs breakdown)", minimum=0))


def profile_needs_breakdown(values: Mapping[str, Any]) -> str | None:
    """The profile is taken with the bottleneck passes: asked for without them, it would be skipped unsaid."""
    if values["profile_steps"] > 0 and not values["breakdown"]:
        return (f"profile_steps = {values['profile_steps']}: expected 0 with breakdown = False (the profile is taken "
                "with the bottleneck passes); set breakdown = True or profile_steps = 0")
    return None


def profile_needs_steady_training(values: Mapping[str, Any]) -> str | None:
    """The profile is of steady training steps, taken after the run with the bottleneck passes: a run that has
    none (inference mode, one epoch, several machines) would drop a requested profile; it is refused instead,
    before anything runs, since the profile is the reason it was asked for."""
    steps = values["profile_steps"]
    if steps <= 0:
        return None
    epochs = values.get("epochs")
    if values.get("mode") in ("inference", "decode"):
        why = f"mode = {values['mode']!r} (the profile is of training steps)"
    elif type(epochs) is int and epochs < 2:
        why = f"epochs = {epochs} (the profile is of steady steps, after the first epoch: give epochs >= 2)"
    elif str(values.get("device", "")).startswith("multiworker"):
        why = f"device = {values['device']!r} (the bottleneck passes and the profile are not taken across machines)"
    else:
        return None
    return f"profile_steps = {steps}: expected 0 with {why}"


# What every training experiment lists among its constraints: a requested profile must be able to happen.
PROFILE_RULES = (profile_needs_breakdown, profile_needs_steady_training)


def results_path_parameter(notebook: str) -> Parameter:
    """The `results_path` parameter every experiment has: where its record goes (the sweep sets it)."""
    return Parameter("results_path", str, "",
                     f"the JSON record (empty: outputs/{notebook}/<device>/manual-<time>.json)")


COMMON_PARAMETERS = ("device", "results_path")
# What every training notebook records about how well it used its device (colabkit.training.flops).
UTILISATION_METRICS = ("model_flops_forward_per_sample", "model_flops_train_per_sample", "model_tflops", "mfu",
                       "arithmetic_intensity")


@dataclass(frozen=True)
class Headline:
    """The one figure the summary compares across devices: `metric` is a key of the record's
    metrics, `better` says which way is an improvement."""

    metric: str
    label: str
    unit: str
    better: Literal["higher", "lower"]

    @property
    def higher_is_better(self) -> bool:
        return self.better == "higher"


@dataclass(frozen=True)
class Reference:
    """Published figures an experiment is compared with: who published them (author and year, e.g.
    "Alyafeai 2018, GPUvsTPU notebook"), what they are in one line, and the figures themselves."""

    citation: str
    summary: str
    figures: Mapping[Any, Any] | tuple[Any, ...] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class PublishedPoint:
    """A published value measured as ours is: whose (`series`, 'Sarkar 2018: K80'), on which kind of device, at
    which value of the figures' axis, the `work` it did where only runs that did the same may stand beside it
    ({"samples_per_epoch": 60000}), and the common figure it stands in: the headline's, or the speedup over the CPU."""

    series: str
    kind: str
    at: float
    value: float
    work: Mapping[str, Any] = field(default_factory=dict, compare=False)
    figure: Literal["headline", "speedup"] = "headline"


# The report's common figures (colabkit.report.headline draws them, for every experiment alike); any other name in
# an experiment's `Figures` is one of its own, which its report module draws.
COMMON_FIGURES = ("headline", "speedup", "fraction_of_peak", "accuracy", "where_time_goes")


@dataclass(frozen=True)
class Figures:
    """The figures the report draws of an experiment, named here as data (this layer draws nothing): `names`, its
    headline figure first (the body of its section), the others in the appendix; common figures (COMMON_FIGURES)
    draw along the parameter `axis` (batch_size: the global batch), as bars per device where its source paper drew
    bars, else lines; `label`, a metric that names each row where its parameters are too many to print (ParaDnn's
    model); `published`, the published values of the headline set beside ours."""

    names: tuple[str, ...] = ("headline",)
    axis: str = "batch_size"
    bars: bool = False
    label: str | None = None
    published: tuple[PublishedPoint, ...] = ()


@dataclass(frozen=True)
class Experiment:
    """One experiment of the suite, declared once.

    `notebook` is relative to the suite's root (notebooks/NAME.ipynb); `parameters` lists every
    assignment of its `parameters` cell, in order, `device` and `results_path` included; `metrics`
    the keys the record's metrics carry that the report reads (its report section is
    colabkit.report.experiment_sections', so that declaring an experiment imports no plotting library).
    """

    name: str
    notebook: str
    title: str
    measures: str
    parameters: tuple[Parameter, ...]
    metrics: tuple[str, ...]
    headline: Headline
    references: tuple[Reference, ...] = ()
    # Rules tying several parameters together (e.g. steps a multiple of steps_per_execution): each
    # takes the full set of values (defaults filled in) and returns what is wrong in one line, or None.
    constraints: tuple[Callable[[Mapping[str, Any]], str | None], ...] = field(default=(), compare=False)
    # The memory one replica needs to train with a full set of values (colabkit.training.memory), where
    # the declaration knows the model's shape: a run that clearly cannot fit its device is refused
    # before it builds anything (the notebook's Run.check_memory, the sweep's memory_problem).
    memory_estimate: Callable[[Mapping[str, Any]], MemoryEstimate] | None = field(default=None, compare=False)
    # The FLOPs one run computes in all (every replica, every epoch or call) from a full set of values,
    # where the declaration knows them: the work in `sweep --dry-run`'s time estimate (colabkit.sweep.estimate).
    work_flops: Callable[[Mapping[str, Any]], float] | None = field(default=None, compare=False)
    # The docs page that says what it rebuilds and how (relative to the suite's root, an #anchor allowed).
    docs: str | None = None
    # What the report draws of it, and in what form (its source paper's).
    figures: Figures = Figures()

    def __post_init__(self) -> None:
        names = [parameter.name for parameter in self.parameters]
        problems = []
        if len(set(names)) != len(names):
            problems.append("a parameter is declared twice")
        missing = [name for name in COMMON_PARAMETERS if name not in names]
        if missing:
            problems.append(f"every experiment declares {', '.join(COMMON_PARAMETERS)}; missing {', '.join(missing)}")
        if self.headline.metric not in self.metrics:
            problems.append(f"the headline metric {self.headline.metric!r} is not among its metrics")
        for parameter in self.parameters:
            conditions = [name for name, _ in parameter.used_when]
            if parameter.name in conditions or not set(conditions) <= set(names):
                problems.append(f"parameter {parameter.name}: used_when names {', '.join(conditions)}; it may name "
                                "only the experiment's other parameters")
        if problems:
            raise ExperimentDeclarationError(f"experiment {self.name}: " + "; ".join(problems))

    @property
    def parameter_names(self) -> tuple[str, ...]:
        return tuple(parameter.name for parameter in self.parameters)

    def parameter(self, name: str) -> Parameter:
        for parameter in self.parameters:
            if parameter.name == name:
                return parameter
        raise KeyError(name)

    @property
    def defaults(self) -> dict[str, Any]:
        return {parameter.name: parameter.default for parameter in self.parameters}

    @property
    def default_mode(self) -> Mode | None:
        """The mode its runs take when none is asked (its `mode` parameter's default); None where it has no modes."""
        return self.defaults.get("mode")

    def unused(self, values: Mapping[str, Any]) -> tuple[str, ...]:
        """The names among `values` of parameters that do not shape a run with `values` (their
        `used_when` does not hold, the missing values taken from the defaults), in `values`' order."""
        merged = {**self.defaults, **values}
        conditional = {parameter.name: parameter for parameter in self.parameters if parameter.used_when}
        return tuple(name for name in values if name in conditional and not conditional[name].applies(merged))

    def relevant(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """`values` without those of parameters that do not shape the run (see `unused`): what names a
        run, its fingerprint and its record. Names the experiment does not declare are kept."""
        unused = set(self.unused(values))
        return {name: value for name, value in values.items() if name not in unused}


def undeclared(experiment: Experiment, name: str) -> str:
    """One line for a parameter name `experiment` does not declare, naming the declared ones closest to it."""
    closest = difflib.get_close_matches(name, experiment.parameter_names, n=3, cutoff=0.6)
    hint = f"did you mean {' or '.join(closest)}?" if closest else f"it has: {', '.join(experiment.parameter_names)}"
    return f"{name}: {experiment.name} declares no such parameter ({hint})"


def check_values(experiment: Experiment, values: Mapping[str, Any], *, complete: bool = False) -> list[str]:
    """Every problem with `values` for `experiment`, one line each: a name it does not declare, a value
    its parameter does not take, and (with `complete`) a declared parameter with no value."""
    problems = []
    declared = experiment.parameter_names
    for name, value in values.items():
        if name not in declared:
            problems.append(undeclared(experiment, name))
            continue
        problem = experiment.parameter(name).problem(value)
        if problem:
            problems.append(problem)
    if complete:
        problems += [f"{name}: not set (the notebook's parameters cell must assign it)"
                     for name in declared if name not in values]
    if not problems:  # the rules between parameters only make sense once each value fits its own
        problems += rule_problems(experiment, values)
    return problems


def rule_problems(experiment: Experiment, values: Mapping[str, Any]) -> list[str]:
    """What `values` (each already fitting its own parameter; the missing ones take their defaults) break
    among `experiment`'s rules between parameters (its `constraints`), one line each. The one check of
    those rules: the notebook's (`start_run`, through check_values) and the sweep's plan, per combination."""
    merged = {**experiment.defaults, **values}
    return [problem for rule in experiment.constraints if (problem := rule(merged))]
