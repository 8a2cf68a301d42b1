"""Repeated experiments: train a fresh model several times, time the whole, summarise the spread.

As Kimm, Paik & Kimm 2021's `run_experiment(repeats)` (a fresh model built, trained and scored per
repeat, 'Accuracy: 91.234% (+/-1.234)' at the end), with a seed per repeat. `run_repeats` keeps every
repeat's scores, timings and history and turns them into one record's metrics: scores as the mean,
`<name>_std` (NumPy's population std, as they printed it) and `<name>_per_repeat`; timing figures
as the median over repeats and `<name>_per_repeat` (`epoch_time_steady_std_s` pools every repeat's
steady epochs); `experiment_time_s` the perf_counter around every repeat.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from colabkit.errors import ExperimentError
from colabkit.scores import headline_scores, scores_from_confusion
from colabkit.statistics import mean_std, summarize

SCORE_STD_IS = "population standard deviation over repeats (ddof=0, numpy.std, as Kimm, Paik & Kimm 2021 printed it)"
# TrainingTimer figures that are settings, the same in every repeat: copied, not aggregated.
SETTING_KEYS = ("epochs_run", "global_batch_size", "target_accuracy")


@dataclass
class RepeatResult:
    """What one repeat produced.

    scores: host-side test scores by name (e.g. test_accuracy, f1_macro), each a float.
    timing: TrainingTimer.metrics() of the repeat's fit; timings: TrainingTimer.timings().
    history: Keras's History.history (per-epoch logs); evaluation: a colabkit.scores classification_report
    of the test predictions; training: the fit's Training (`of`). `repeat` and `seed` are set by run_repeats.
    """

    scores: dict[str, float]
    timing: dict[str, Any]
    timings: dict[str, Any] = field(default_factory=dict)
    history: dict[str, list[float]] = field(default_factory=dict)
    evaluation: dict[str, Any] = field(default_factory=dict)
    repeat: int = 0
    seed: int = 0
    training: Any = None

    @classmethod
    def of(cls, training: Any, evaluation: dict[str, Any]) -> RepeatResult:
        """One repeat from its fit's Training (colabkit.training.Trainer.timed) and its classification report."""
        return cls(headline_scores(evaluation), training.metrics, training.record_fields["timings"], training.history,
                   evaluation, training=training)


def _median_or_none(values: list[Any]) -> Any:
    """Median of the finite numbers among `values`; without any (e.g. one-epoch fits), the value every
    repeat gave where they agree (a flag, the reason a figure is unknown), else None."""
    numbers = [float(value) for value in values
               if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)]
    if numbers:
        return statistics.median(numbers)
    return values[0] if values and all(value == values[0] for value in values) else None


@dataclass
class RepeatedTraining:
    """Every repeat of a repeated training (fresh model, own seed) and the wall time of all of them
    together. (An experiment's declaration is colabkit.experiments.Experiment; this is one run of
    one of them, repeated.)"""

    results: list[RepeatResult]
    experiment_time_s: float
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.results:
            raise ExperimentError("an experiment needs at least one repeat")
        names = [sorted(result.scores) for result in self.results]
        if any(keys != names[0] for keys in names):
            raise ExperimentError(f"repeats reported different scores: {names}")

    @property
    def repeats(self) -> int:
        return len(self.results)

    def per_repeat(self, name: str) -> list[float]:
        """One score of every repeat, in order."""
        return [float(result.scores[name]) for result in self.results]

    def score(self, name: str) -> tuple[float, float]:
        """(mean, population std) of a score over the repeats."""
        return mean_std(self.per_repeat(name))

    def score_line(self, name: str, label: str, scale: float = 100.0, unit: str = "%") -> str:
        """The paper's summary line, e.g. 'Accuracy: 91.234% (+/-1.234)' (scale 100: percent)."""
        mean, std = self.score(name)
        return f"{label}: {mean * scale:.3f}{unit} (+/-{std * scale:.3f})"

    def metrics(self) -> dict[str, Any]:
        """A record's metrics: scores as mean, _std and _per_repeat; timing figures as the median
        over repeats and _per_repeat; settings (epochs_run, global_batch_size) as they were."""
        metrics: dict[str, Any] = {"repeats": self.repeats, "experiment_time_s": self.experiment_time_s}
        for name in self.results[0].scores:
            mean, std = self.score(name)
            metrics.update({name: mean, f"{name}_std": std, f"{name}_per_repeat": self.per_repeat(name)})
        metrics["score_std_is"] = SCORE_STD_IS
        timing_names = [name for name in self.results[0].timing if name not in SETTING_KEYS]
        for name in timing_names:
            values = [result.timing.get(name) for result in self.results]
            metrics[name] = _median_or_none(values)
            metrics[f"{name}_per_repeat"] = values
        for name in SETTING_KEYS:
            if name in self.results[0].timing:
                metrics[name] = self.results[0].timing[name]
        if "epoch_time_steady_std_s" in metrics:  # the spread of every steady epoch, not a median of spreads
            metrics["epoch_time_steady_std_s"] = self.timings()["epoch_s_steady_all_repeats"]["std"]
        metrics["timing_over_repeats_is"] = ("median over repeats of each repeat's figure; epoch_time_steady_std_s: "
                                             "std of the steady epochs of all repeats pooled")
        return metrics

    def timings(self) -> dict[str, Any]:
        """A record's timings: the experiment's wall time, every repeat's raw times, and the steady
        epochs of all repeats pooled (their spread)."""
        steady = [epoch["epoch_s"] for result in self.results
                  for epoch in result.timings.get("epochs", [])[1:]]
        return {
            "experiment_time_s": self.experiment_time_s,
            "experiment_time_is": "perf_counter around all repeats: build, fit, predict and score each",
            "repeats": [{"repeat": result.repeat, "seed": result.seed, **result.timings} for result in self.results],
            "epoch_s_steady_all_repeats": summarize(steady),
        }

    def record_fields(self) -> dict[str, Any]:
        """The record's fields beside `metrics`: timings, the mean history and every repeat's, the first fit's estimate
        (it covers every repeat), the pooled evaluation and every repeat's."""
        return {"timings": self.timings(), "history": self.mean_history(),
                "estimate": getattr(self.results[0].training, "record_fields", {}).get("estimate"),
                "history_is": "per-epoch mean over the repeats; histories: every repeat's", "histories": self.histories,
                "evaluation": self.pooled_evaluation(), "evaluations": [result.evaluation for result in self.results]}

    @property
    def histories(self) -> list[dict[str, list[float]]]:
        return [result.history for result in self.results]

    def mean_history(self) -> dict[str, list[float]]:
        """Every logged metric's per-epoch mean over the repeats (keys all repeats logged)."""
        keys = [key for key in self.results[0].history if all(key in h for h in self.histories)]
        return {key: np.mean([h[key] for h in self.histories], axis=0).tolist() for key in keys}

    def pooled_evaluation(self) -> dict[str, Any]:
        """Scores of the confusion matrices of all repeats summed: every test prediction of every
        repeat counted once. (Per-repeat means are in metrics(); this is the pooled picture.)"""
        first = self.results[0].evaluation
        counts = np.sum([result.evaluation["confusion_matrix"] for result in self.results], axis=0)
        pooled = scores_from_confusion(counts, first.get("class_names"))
        pooled.update(confusion_matrix=counts.tolist(), class_names=first.get("class_names"),
                      pooled_over_repeats=self.repeats)
        return pooled


def run_repeats(evaluate: Callable[[int, int], RepeatResult], repeats: int, seed: int = 0,
                *, score: str | None = None, echo: Callable[[str], None] | None = print) -> RepeatedTraining:
    """Call `evaluate(repeat, seed + repeat)` for repeat = 0 .. repeats-1, timing all of it.

    Each call must build its own fresh model (the seed is for that). Each repeat is announced ('model 1 of 3
    (seed 0)'); with `score`, its value is echoed after each repeat ('>#1: 91.234', in percent), then the summary
    line and the time of all ('Accuracy: 91.234% (+/-1.234)', 'Elapsed 12.345 seconds.'), as the paper's code did.
    """
    if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 1:
        raise ExperimentError(f"repeats must be a whole number >= 1, got {repeats!r}")
    results = []
    say = echo or (lambda line: None)
    start = time.perf_counter()
    for repeat in range(repeats):
        say(f"model {repeat + 1} of {repeats} (seed {seed + repeat})")
        result = evaluate(repeat, seed + repeat)
        if not isinstance(result, RepeatResult):
            raise ExperimentError(f"evaluate() must return a RepeatResult, got {type(result).__name__}")
        result.repeat, result.seed = repeat, seed + repeat
        results.append(result)
        if score is not None:
            say(f">#{repeat + 1}: {100.0 * float(result.scores[score]):.3f}")
    experiment = RepeatedTraining(results, time.perf_counter() - start, seed)
    if score is not None:
        say(experiment.score_line(score, score.removeprefix("test_").capitalize()))
        say(f"Elapsed {experiment.experiment_time_s:.3f} seconds.")
    return experiment
