"""Inference as a mode of a training experiment (docs/inference.md): the declared `mode` parameter, the
parameters only an inference run has, the training parameters it does without, and the headline its
runs are compared on (MLPerf scores SingleStream by the 90th percentile's latency).

A declaration adds `*inference_parameters("1,32,256,max")` (with `modes=MODES` where it also decodes: ParaDnn's
Transformer), `inference_rules` to its constraints, and wraps its training-only parameters in `training_only(...)`:
their values then leave an inference run's name, fingerprint and record (two inference runs that differ only in
epochs are one run), and `mode` separates inference runs from training runs in every identity
(colabkit.records.identity). A mode the declaration does not offer is refused as any other value its `mode`
parameter does not take: by the sweep's plan and by the notebook's `start_run`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

from colabkit.errors import ParameterError
from colabkit.experiments.declaration import DECODE, INFERENCE, TRAIN, Headline, Mode, Parameter, replicas_of
from colabkit.inference.scenarios import parse_batch_sizes

INFERENCE_HEADLINE = Headline("latency_p90_ms", "single-stream p90 latency", "ms", "lower")
# A decode run's (docs/decode.md): the median step at its smallest batch and longest prompt (colabkit.inference.
# generation), as MLPerf's LLM benchmarks bound time per output token.
DECODE_HEADLINE = Headline("decode_tpot_p50_ms", "median time per output token", "ms", "lower")
LATENCY_FIGURES = (Headline("latency_p50_ms", "single-stream p50 latency", "ms", "lower"), INFERENCE_HEADLINE,
                   Headline("latency_p99_ms", "single-stream p99 latency", "ms", "lower"))
OFFLINE_PREFIX = "offline_samples_per_s_b"  # one metric per offline batch size: offline_samples_per_s_b256
_IN_INFERENCE = (("mode", (INFERENCE,)),)
# What each mode does, as the `mode` parameter's help lists those an experiment offers.
MODE_HELP: dict[Mode, str] = {TRAIN: "train", DECODE: "decode: a decoder's generation (docs/decode.md)",
                              INFERENCE: "inference: single-stream latency and offline throughput of the model as "
                                         "built, no training (docs/inference.md)"}


def syntax_check(parse: Callable[[Any], Any], expected: str) -> Callable[[Any], str | None]:
    """A Parameter's `check`: None where `parse` takes the value, else `expected` (what the value should look like)."""
    def check(value: Any) -> str | None:
        try:
            parse(value)
        except ParameterError:
            return expected
        return None
    return check


batch_sizes_syntax = syntax_check(parse_batch_sizes, "whole numbers >= 1 and 'max', separated by commas "
                                                     "(e.g. '1,32,256,max')")


def inference_parameters(batch_sizes: str, modes: tuple[Mode, ...] = (TRAIN, INFERENCE)) -> tuple[Parameter, ...]:
    """`mode`, taking `modes` only (train and inference; decode where the experiment has a decoder), and the settings
    that count in inference runs only (colabkit.inference.InferenceSettings): `queries`, `min_duration_s`,
    `max_duration_s` and `offline_batch_sizes` (default `batch_sizes`)."""
    def inference_only(name: str, kind: type, default: Any, text: str, **bounds: Any) -> Parameter:
        return Parameter(name, kind, default, f"inference: {text}", used_when=_IN_INFERENCE, **bounds)

    return (Parameter("mode", str, TRAIN, "; ".join(MODE_HELP[mode] for mode in modes), choices=modes),
            inference_only("queries", int, 1000, "the fewest single-stream queries at batch 1, LoadGen's min_query_count "
                           "(p99's 95 % interval takes 368 or more)", minimum=1),
            inference_only("min_duration_s", float, 10.0, "each scenario's measurement also lasts this long at least "
                           "(LoadGen's min_duration)", minimum=0),
            inference_only("max_duration_s", float, 600.0, "and stops here, valid only if both minimums were met",
                           minimum=0, minimum_exclusive=True),
            inference_only("offline_batch_sizes", (str, int), batch_sizes, "offline batch sizes, commas (one: a whole "
                           "number); max: the largest that fits by the memory estimate", check=batch_sizes_syntax))


def training_only(*parameters: Parameter) -> tuple[Parameter, ...]:
    """`parameters`, each counting in training runs only (used_when mode is train)."""
    return tuple(replace(parameter, used_when=(*parameter.used_when, ("mode", (TRAIN,)))) for parameter in parameters)


def is_inference(params: Mapping[str, Any] | None) -> bool:
    """Whether a run's parameters ask for inference mode."""
    return (params or {}).get("mode") == INFERENCE


def headline_for(experiment: Any, params: Mapping[str, Any] | None) -> Headline:
    """The figure a run with `params` is compared on: INFERENCE_HEADLINE in inference mode, DECODE_HEADLINE in decode
    mode, else the experiment's."""
    mode = (params or {}).get("mode")
    return INFERENCE_HEADLINE if mode == INFERENCE else DECODE_HEADLINE if mode == DECODE else experiment.headline


def inference_figures(metric_names: Iterable[str]) -> list[Headline]:
    """What an inference combination is given and compared on, each the median over its runs (docs/inference.md):
    the single-stream p50, p90 (its headline) and p99 latency, then the offline samples/s at every batch size among
    `metric_names` (`offline_samples_per_s_b<batch>`), smallest batch first."""
    names = set(metric_names)
    batches = sorted(int(name[len(OFFLINE_PREFIX):]) for name in names
                     if name.startswith(OFFLINE_PREFIX) and name[len(OFFLINE_PREFIX):].isdigit())
    return [*(figure for figure in LATENCY_FIGURES if figure.metric in names),
            *(Headline(f"{OFFLINE_PREFIX}{batch}", f"offline samples/s at batch {batch}", "samples/s", "higher")
              for batch in batches)]


def voided_by(metric: str) -> str | None:
    """The metric whose absence voids a run's `metric`: a latency percentile's lower bound (`latency_p99_ms` counts
    only where `latency_p99_low_ms` has a value: below the queries its interval takes, the estimate is little more
    than the slowest query); None for a figure that always counts."""
    return f"{metric[:-3]}_low_ms" if metric in (figure.metric for figure in LATENCY_FIGURES) else None


def inference_rules(values: Mapping[str, Any]) -> str | None:
    """Inference takes one device (a batch of 1 does not split over replicas), and a minimum duration a scenario can
    reach before it is stopped (min_duration_s <= max_duration_s)."""
    one_device = replicas_of(values) <= 1 and not str(values.get("device", "")).startswith("multiworker")
    if values.get("mode") in (INFERENCE, DECODE) and not one_device:
        return (f"device = {values['device']!r} with mode = {values['mode']!r}: expected one device ('cpu', 'gpu'); "
                "a batch of 1 does not split over replicas")
    if is_inference(values) and values.get("min_duration_s", 0) > values.get("max_duration_s", float("inf")):
        return (f"min_duration_s = {values['min_duration_s']} with max_duration_s = {values['max_duration_s']}: "
                "expected min_duration_s <= max_duration_s")
    return None
