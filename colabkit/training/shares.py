"""Where a training step's time goes, as plain arithmetic (no Keras): the shares of a step spent
waiting on input, lost to the host and spent on the device, what bounds the run, and the sentence a
reader gets. The report calls the same functions on records alone.

Per sample, with t = 1 / throughput of the run as trained (t_run), fed from memory (t_memory) and on
the device alone (t_device), and t = max of the three:
    device share = t_device / t,  host share = (t_memory - t_device) / t,  input wait = (t_run - t_memory) / t
A pass faster than the one it is part of (noise) gives a share of 0, not a negative one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from colabkit.training.roofline import known

SHARES = ("input_wait_share", "host_share", "device_share")
# What every training record's metrics carry from the breakdown (None, with the reason in the
# record's `breakdown` section, when it was not measured).
BREAKDOWN_METRICS = ("input_samples_per_s", "device_samples_per_s", *SHARES, "bound_by")


def step_shares(run_rate: float, memory_rate: float, device_rate: float) -> dict[str, float]:
    """The shares of a step (input wait, host, device) from three throughputs in samples/s: the run's,
    the same steps fed from memory at the run's steps_per_execution, and the device alone. They sum
    to 1 (formula in the module's docstring). Raises ValueError for a rate that is not a number > 0."""
    rates = {"run": run_rate, "memory": memory_rate, "device": device_rate}
    bad = [f"{name} = {value!r}" for name, value in rates.items() if not known(value)]
    if bad:
        raise ValueError(f"every throughput must be a finite number > 0, got {', '.join(bad)}")
    t_run, t_memory, t_device = 1 / run_rate, 1 / memory_rate, 1 / device_rate
    fed = max(t_memory, t_device)  # fed from memory includes the device's work: never below it
    total = max(t_run, fed)
    return {"input_wait_share": (total - fed) / total, "host_share": (fed - t_device) / total,
            "device_share": t_device / total}


def bound_by(shares: Mapping[str, float], roofline_bound: str | None = None) -> str:
    """What bounds the run: the largest of its shares ("input", "host"); where the device's share is
    the largest, the roofline's answer ("compute" or "memory"), else "device" (no roofline known).
    Ties go to input, then host: the cheaper things to fix come first."""
    parts = [("input", shares["input_wait_share"]), ("host", shares["host_share"]), ("device", shares["device_share"])]
    largest = max(parts, key=lambda part: part[1])[0]
    if largest != "device":
        return largest
    return roofline_bound if roofline_bound in ("compute", "memory") else "device"


def as_percent(share: float) -> str:
    """A share as a reader reads it: '38 %', '< 1 %'."""
    return "< 1 %" if 0 < share < 0.005 else f"{share:.0%}".replace("%", " %")


def describe_shares(where: str, shares: Mapping[str, Any], bound: str | None) -> str:
    """One sentence from the numbers: 'on GPU: Tesla T4 at batch 256, 38 % of each step waits for
    input, 12 % is host overhead and 50 % device time: bound by input.'"""
    if any(not isinstance(shares.get(name), (int, float)) or shares.get(name) != shares.get(name)
           for name in SHARES):
        return f"{where}: no breakdown was measured."
    text = (f"{where}, {as_percent(shares['input_wait_share'])} of each step waits for input, "
            f"{as_percent(shares['host_share'])} is host overhead and {as_percent(shares['device_share'])} device time")
    return text + (f": bound by {bound}." if bound else ".")


# --- operation categories of a profile -----------------------------------------------------------

CATEGORIES = ("matmul", "convolution", "elementwise", "reduction", "optimizer", "copy", "input", "other", "idle")
CATEGORY_LABELS = {"matmul": "matrix products", "convolution": "convolutions", "elementwise": "element-wise",
                   "reduction": "reductions and pooling", "optimizer": "optimizer update",
                   "copy": "host-device copies", "input": "input pipeline", "other": "other", "idle": "idle"}
_OPTIMIZER_NAMES = ("adam", "adamw", "rmsprop", "sgd", "adagrad", "adadelta", "adamax", "nadam", "ftrl", "lion",
                    "optimizer")
# Matched against the lower-cased op type, in this order (the first that matches wins).
_TYPE_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("copy", re.compile(r"memcpy|^_?(host)?(send|recv)$|copytodevice|copyfromdevice|infeed|outfeed|transfer")),
    ("input", re.compile(r"^dataset|iterator|^prefetch")),
    ("optimizer", re.compile(r"^(resource)?apply|^resourcesparseapply")),
    ("convolution", re.compile(r"conv")),
    ("matmul", re.compile(r"matmul|einsum|^dot|gemm|cudnnrnn|cublas")),
    ("reduction", re.compile(r"pool|^(sum|mean|max|min|prod|all|any|argmax|argmin)$|reduce|softmax|crossentropy"
                             r"|biasaddgrad|l2loss|norm|topk|cumsum")),
    ("elementwise", re.compile(r"relu|sigmoid|tanh|elu|gelu|softplus|swish|^(add|addv2|addn|sub|mul|realdiv|div"
                               r"|divnonan|sqrt|rsqrt|square|squareddifference|pow|exp|log|log1p|neg|abs|sign"
                               r"|maximum|minimum|cast|select|selectv2|greater|greaterequal|less|lessequal|equal"
                               r"|notequal|logicaland|logicalor|logicalnot|biasadd|floor|ceil|round|reciprocal"
                               r"|clipbyvalue|onehot)$|grad$|fusion")),
)


def op_category(op_type: str, op_name: str = "", optimizer: str | None = None) -> str:
    """The category of one profiled operation, from its type (TensorFlow's op type, an XLA op's name)
    and its name's scopes (ops under the optimizer's name scope, e.g. 'adam/Mul_3', are its update)."""
    kind = op_type.strip().lower()
    if kind == "idle":
        return "idle"
    scopes = {part.lower() for part in re.split(r"[/:]", op_name)}
    if (optimizer and optimizer.lower() in scopes) or scopes & set(_OPTIMIZER_NAMES):
        return "optimizer"
    for category, pattern in _TYPE_RULES:
        if pattern.search(kind):
            return category
    return "other"


def summarise_ops(rows: Iterable[Mapping[str, Any]], optimizer: str | None = None, top: int = 10) -> dict[str, Any]:
    """Shares per category (summing to 1, idle its own) and the top operations by self time, from
    rows of {type, operation, occurrences, self_time_us} (one per operation, IDLE among them)."""
    seconds = dict.fromkeys(CATEGORIES, 0.0)
    ops = []
    for row in rows:
        self_s = float(row["self_time_us"]) / 1e6
        category = op_category(str(row["type"]), str(row.get("operation", "")), optimizer)
        seconds[category] += self_s
        ops.append({"type": row["type"], "operation": row.get("operation", ""), "category": category,
                    "occurrences": row.get("occurrences"), "self_s": self_s})
    total = sum(seconds.values())
    if total <= 0:
        raise ValueError("the profile holds no operation time: nothing to break down")
    busy = total - seconds["idle"]
    ranked = sorted((op for op in ops if op["category"] != "idle"), key=lambda op: -op["self_s"])[:top]
    return {
        "categories": {name: value / total for name, value in seconds.items()},
        "busy_categories": {name: (value / busy if busy > 0 else 0.0) for name, value in seconds.items()
                            if name != "idle"},
        "category_seconds": seconds,
        "total_s": total,
        "busy_s": busy,
        "idle_s": seconds["idle"],
        "top_ops": [{**op, "share": op["self_s"] / total} for op in ranked],
    }


def explain_idle(profile: Mapping[str, Any], shares: Mapping[str, float] | None) -> str | None:
    """What a profile's idle share holds, from its numbers and the breakdown's shares of a step (None
    when the profile was not summarised)."""
    categories = profile.get("categories")
    if not categories:
        return None
    steps = f"the {profile.get('steps')} profiled steps"
    parts = ""
    if shares:
        parts = (f" By the breakdown's passes, {as_percent(shares['input_wait_share'])} of a step waits for input and "
                 f"{as_percent(shares['host_share'])} is host overhead")
    if profile.get("basis") == "device":
        return (f"The device ran no kernel for {as_percent(categories['idle'])} of {steps}: it waited on the host or on "
                f"input.{parts + '.' if parts else ''}")
    wall, busy, idle = profile.get("wall_s"), profile.get("busy_s", 0.0), profile.get("idle_s", 0.0)
    if not wall:
        return f"IDLE is {idle:.2f} s summed over the op threads.{parts + '.' if parts else ''}"
    return (f"IDLE is {idle:.2f} s summed over the op threads: in the {wall:.2f} s {steps} took, the threads that ran "
            f"operations spanned {(busy + idle) / wall:.1f} times the window (several threads at once) while "
            f"operations kept {busy / wall:.2f} of the {profile.get('cores')} cores busy on average.{parts}; the rest "
            "of the idle time is threads waiting on each other (an operation waits for its inputs, and the pools "
            "hold more threads than there are cores).")
