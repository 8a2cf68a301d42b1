"""ParaDnn (Wang, Wei & Brooks 2020): generated FC, CNN and RNN models, and a decoder-only Transformer
family beyond the paper, timed per step, placed on the roofline by their model FLOPs and arithmetic intensity.

Each family's model is shaped by its own knobs only (FAMILY_KNOBS, read by the notebook, the memory
estimate and, through each parameter's `used_when`, the sweep and the records): an FC run's name,
fingerprint and record carry no `cell`, and two FC runs that differ only in `cell` are one run.
"""

from collections.abc import Mapping
from typing import Any

from colabkit.experiments.declaration import (
    BREAKDOWN_METRICS,
    DECODE,
    MODES,
    PROFILE_RULES,
    Experiment,
    Figures,
    Headline,
    Parameter,
    Reference,
    backend_parameter,
    breakdown_parameters,
    device_parameter,
    replicas_of,
    results_path_parameter,
    torch_runs_one_step_per_call,
)
from colabkit.experiments.inference import (
    batch_sizes_syntax,
    inference_parameters,
    inference_rules,
    syntax_check,
    training_only,
)
from colabkit.experiments.published import PARADNN_CLAIMS, PARADNN_SOURCE
from colabkit.training.choices import MIXED_PRECISION_CHOICES
from colabkit.inference.scenarios import DECODE_BACKENDS, parse_batch_sizes, parse_lengths
from colabkit.training.memory import (
    palm_forward_flops,
    paradnn_decode_memory,
    paradnn_forward_flops,
    paradnn_memory,
    transformer_weights,
)

FAMILIES = ("fc", "cnn", "rnn", "transformer")
BLOCKS = ("residual", "bottleneck")
CELLS = ("rnn", "lstm", "gru")
# The parameters that shape each family's model, in the order a model's name lists them.
FAMILY_KNOBS: dict[str, tuple[str, ...]] = {
    "fc": ("layers", "nodes", "input_size", "output_size"),
    "cnn": ("blocks", "filters", "block", "input_size", "output_size"),
    "rnn": ("layers", "cell", "hidden", "length", "vocab"),
    "transformer": ("layers", "width", "heads", "length", "vocab", "mlp_ratio"),
}


def _knob(name: str, kind: type, default: Any, help: str, **rules: Any) -> Parameter:
    """A family knob: a parameter that shapes only the models of the families FAMILY_KNOBS gives it
    (its `used_when`)."""
    families = tuple(family for family, knobs in FAMILY_KNOBS.items() if name in knobs)
    return Parameter(name, kind, default, help, used_when=(("family", families),), **rules)


def _run_flops(values: Mapping[str, Any]) -> float:
    """FLOPs of one run: training = 3 x forward per sample (colabkit.training.flops' convention), x the
    global batch, x steps x epochs (the first epoch included); decode: three generations (warm-up, timed, checked)
    of every batch size x prompt, each about a forward pass over prompt + output tokens, and the full pass."""
    if values["mode"] == DECODE:
        weights = transformer_weights(values["layers"], values["width"], values["vocab"], values["mlp_ratio"],
                                      values["length"])[0]
        batches = sum(int(size) for size in parse_batch_sizes(values["decode_batch_sizes"]) if size != "max")
        return 4.0 * batches * sum(palm_forward_flops(weights, values["layers"] * values["width"],
                                                      prompt + values["output_tokens"])
                                   for prompt in parse_lengths(values["prompt_lengths"]))
    return (3.0 * paradnn_forward_flops(values) * values["batch_size"] * replicas_of(values) * values["steps"]
            * values["epochs"])


def _heads_divide_width(values: Mapping[str, Any]) -> str | None:
    if values["family"] == "transformer" and values["width"] % values["heads"]:
        return f"width = {values['width']}: expected a multiple of heads ({values['heads']}), each head width / heads wide"
    return None


def _steps_fill_executions(values: Mapping[str, Any]) -> str | None:
    if values["mode"] == "train" and values["steps"] % values["steps_per_execution"]:  # inference runs no steps
        return (f"steps = {values['steps']}: expected a multiple of steps_per_execution "
                f"({values['steps_per_execution']}), so every epoch runs whole executions")
    return None


_IN_DECODE = (("family", ("transformer",)), ("mode", (DECODE,)))


def _decode_parameter(name: str, kind: type, default: Any, help: str, **rules: Any) -> Parameter:
    return Parameter(name, kind, default, f"decode: {help}", used_when=_IN_DECODE, **rules)


_lengths_syntax = syntax_check(parse_lengths, "whole numbers >= 1, separated by commas (e.g. '128,512,2048')")


def _two_tokens_at_least(value: int) -> str | None:
    return None if value >= 2 else ("2 tokens or more: the time per output token (TPOT) is taken over the tokens after "
                                     "the first, and one token has none")


def _decode_rules(values: Mapping[str, Any]) -> str | None:
    """Decode is the decoder-only Transformer's (a key-value cache), built on JAX and TensorFlow only, and its
    longest prompt and output must fit the model's position table (`length`)."""
    if values["mode"] != DECODE:
        return None
    if values["family"] != "transformer":
        return (f"mode = 'decode' with family = {values['family']!r}: expected family = 'transformer' (decode "
                "generates tokens with a key-value cache, which only the decoder-only Transformer has)")
    if values["backend"] not in DECODE_BACKENDS:
        return (f"mode = 'decode' with backend = {values['backend']!r}: expected backend = "
                f"{' or '.join(repr(name) for name in DECODE_BACKENDS)} (decode on Keras's PyTorch backend is not built: "
                "its slice_update copies the whole cache every step)")
    longest = max(parse_lengths(values["prompt_lengths"])) + values["output_tokens"]
    if longest > values["length"]:
        return (f"prompt_lengths = {values['prompt_lengths']!r} with output_tokens = {values['output_tokens']}: the "
                f"longest prompt and its output ({longest} tokens) exceed the model's length ({values['length']} "
                "positions); raise length or shorten them")
    return None


def _memory(values: Mapping[str, Any]) -> Any:
    """Training's estimate; a decode run's (the cache included) at its smallest batch and longest prompt, the
    combination every other one is at least as large as (each larger one is checked before it is built)."""
    if values.get("mode") != DECODE:
        return paradnn_memory(values, FAMILY_KNOBS)
    longest = max(parse_lengths(values["prompt_lengths"]))
    batches = [int(size) for size in parse_batch_sizes(values["decode_batch_sizes"]) if size != "max"]
    return paradnn_decode_memory(values, batch=min(batches, default=1), max_length=longest + values["output_tokens"],
                                 prompt_length=longest)


EXPERIMENT = Experiment(
    name="paradnn",
    notebook="notebooks/paradnn.ipynb",
    docs="docs/paradnn.md",
    title="ParaDnn (FC, CNN, RNN, Transformer)",
    measures="Steady training throughput, model TFLOPS, fraction of peak and roofline position of generated "
             "FC, CNN, RNN and decoder-only Transformer models per size, batch size and device",
    parameters=(
        Parameter("family", str, "fc", '"fc" (fully connected), "cnn" (ResNet-v1), "rnn" (stacked recurrent cells) '
                  'or "transformer" (decoder-only)', choices=FAMILIES),
        _knob("layers", int, 4, "fc: hidden Dense layers; rnn: stacked recurrent layers; transformer: blocks",
              minimum=1),
        _knob("nodes", int, 256, "fc: units of each hidden Dense layer", minimum=1),
        _knob("input_size", int, 2000, "fc: input features; cnn: image side in pixels (square RGB images)",
              minimum=1),
        _knob("output_size", int, 200, "fc, cnn: classes", minimum=1),
        _knob("blocks", int, 1, "cnn: residual or bottleneck blocks in each of the 4 groups", minimum=1),
        _knob("filters", int, 16, "cnn: filters F of the first group (then 2F, 4F, 8F)", minimum=1),
        _knob("block", str, "residual", 'cnn: "residual" (two 3x3 convs) or "bottleneck" (1x1, 3x3, 1x1 with 4F)',
              choices=BLOCKS),
        _knob("cell", str, "lstm", 'rnn: "rnn", "lstm" or "gru"', choices=CELLS),
        _knob("hidden", int, 100, "rnn: units of each recurrent layer, also the embedding size", minimum=1),
        _knob("length", int, 10, "rnn, transformer: time steps (tokens) per sequence", minimum=1),
        _knob("vocab", int, 1024, "rnn, transformer: vocabulary size (ParaDnn's default)", minimum=2),
        _knob("width", int, 256, "transformer: model width d (embedding and residual stream)", minimum=1),
        _knob("heads", int, 4, "transformer: attention heads, each width / heads wide", minimum=1),
        _knob("mlp_ratio", int, 4, "transformer: the MLP's hidden width over the model width", minimum=1),
        Parameter("batch_size", int, 64, "per replica", minimum=1),
        *training_only(Parameter("steps", int, 20, "training steps per epoch", minimum=1),
                       Parameter("epochs", int, 6, "the first (tracing, compiling) is reported apart; steady figures "
                                 "come from the others", minimum=2)),
        Parameter("steps_per_execution", int, 1, 'ParaDnn\'s "iterations per loop" (steps per host round trip); '
                  "1 on the torch backend", minimum=1),
        Parameter("mixed_precision", str, "none", "Keras dtype policy (none: float32)",
                  choices=MIXED_PRECISION_CHOICES),
        device_parameter(),
        backend_parameter(),
        *inference_parameters("1,64", modes=MODES),  # decode: the Transformer family's greedy generation
        # A list of one is a whole number (`-p prompt_lengths=64`, YAML's `decode_batch_sizes: 1`): taken as such.
        _decode_parameter("prompt_lengths", (str, int), "128", "prompt lengths in tokens, commas (each a decoder of "
                          "its own)", check=_lengths_syntax),
        _decode_parameter("output_tokens", int, 32, "tokens generated after each prompt (TPOT: over all but the first)",
                          check=_two_tokens_at_least),
        _decode_parameter("decode_batch_sizes", (str, int), "1,8", "batch sizes, commas; max: the largest power of two "
                          "the memory estimate allows at the longest prompt", check=batch_sizes_syntax),
        Parameter("seed", int, 0, "random seed of the synthetic data and the weights", minimum=0),
        *breakdown_parameters(),
        results_path_parameter("paradnn"),
    ),
    metrics=("samples_per_s", "step_time_steady_ms", "model_flops_train_per_sample", "model_tflops", "mfu",
             "arithmetic_intensity", "params", "family", "model", "peak_tflops", "peak_bandwidth_gb_s",
             "roofline_tflops", "fraction_of_roofline", "bound", "achievable_tflops", "mfu_achievable",
             "compiler_flops_ratio", *BREAKDOWN_METRICS),
    headline=Headline("model_tflops", "achieved model TFLOPS", "TFLOPS", "higher"),
    references=(Reference("Wang, Wei & Brooks 2020, ParaDnn", PARADNN_SOURCE, PARADNN_CLAIMS),),
    constraints=(_steps_fill_executions, _heads_divide_width, torch_runs_one_step_per_call, *PROFILE_RULES,
                 inference_rules, _decode_rules),
    memory_estimate=_memory,
    work_flops=_run_flops,
    # Wang, Wei & Brooks 2020: a roofline per device, and speedups as heat maps over batch and model size.
    figures=Figures(("roofline", "speedup_heat_map", "where_time_goes"), label="model"),
)
