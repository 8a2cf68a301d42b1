"""What XLA made of a decode program (docs/decode.md, *What the compiler moves*): its optimized HLO, the compiler's own
cost analysis of it (bytes accessed, FLOPs) where the backend gives one, and the instructions in it that transpose,
copy or convert a whole key or value cache (each moves the cache again). JAX: the executable
`jax.jit(...).lower(...).compile()` made, the very one the decode runs, and its `cost_analysis()` (as
colabkit/training/compiler_flops.py reads the training step's FLOPs). TensorFlow: the optimized HLO of the same
tf.function compiled again (`experimental_get_compiler_ir`, stage optimized_hlo); TensorFlow exposes no cost analysis,
so its bytes and FLOPs are None."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from colabkit.errors import MeasurementError

JAX_COST_SOURCE = ("XLA's cost analysis of the compiled step (jax.jit(...).lower(...).compile().cost_analysis(): "
                   "'bytes accessed', 'flops'), the executable the steps run")
TENSORFLOW_COST_SOURCE = ("none: TensorFlow exposes no cost analysis of an XLA program; the step's optimized HLO "
                          "(tf.function(jit_compile=True).experimental_get_compiler_ir, stage optimized_hlo) is read "
                          "for whole-cache copies only")
# 'ROOT %copy.25 = f32[16,4,64,544]{3,2,1,0} copy(%transpose.40), ...': an instruction's output shape and opcode
# (TensorFlow's HLO and a compiled module's text name with '%', a lowered module's without)
_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*\w+\[([\d,]*)\]\S*\s+([\w\-]+)\(")


@dataclass(frozen=True)
class CompiledProgram:
    """A compiled program as XLA made it: `hlo_text` (optimized HLO, every computation, fused ones included), the
    compiler's `bytes_accessed` and `flops` per call (None where the backend gives no cost analysis), and `source`
    (how they were read, in words)."""

    hlo_text: str
    bytes_accessed: float | None
    flops: float | None
    source: str

    def whole_copies(self, shape: tuple[int, ...]) -> list[str]:
        """The instructions that transpose, copy or convert (to another dtype) an array of as many elements as `shape`
        (a whole cache): each line, cut at 200 characters. A step that reads its cache where it lies, as it is, and
        updates it in place has none. (On a CPU under mixed bfloat16 XLA converts each cache to float32 for its
        products: counted, docs/decode.md.)"""
        elements = math.prod(shape)
        found = []
        for line in self.hlo_text.splitlines():
            match = _INSTRUCTION.match(line)
            if match and match.group(2) in ("transpose", "copy", "convert") and math.prod(
                    int(d) for d in match.group(1).split(",") if d) == elements:
                found.append(line.strip()[:200])
        return found


def jax_program(compiled: Any) -> CompiledProgram:
    """`compiled` (a jax.stages.Compiled) as CompiledProgram: its text and XLA's cost analysis; MeasurementError (one
    line) where the cost analysis lacks bytes or FLOPs."""
    cost = compiled.cost_analysis()
    if isinstance(cost, (list, tuple)):  # older JAX: one dict per computation
        cost = cost[0]
    if not isinstance(cost, dict) or "bytes accessed" not in cost or "flops" not in cost:
        raise MeasurementError(f"XLA's cost analysis of the compiled step gave no 'bytes accessed' and 'flops' (got "
                               f"{sorted(cost) if isinstance(cost, dict) else type(cost).__name__})")
    return CompiledProgram(compiled.as_text(), float(cost["bytes accessed"]), float(cost["flops"]), JAX_COST_SOURCE)


def tensorflow_program(function: Any, *args: Any) -> CompiledProgram:
    """The optimized HLO of `function` (a tf.function with jit_compile=True) on `args`, no cost analysis;
    MeasurementError (one line) where XLA could not compile it for its HLO."""
    import tensorflow as tf

    try:
        text = function.experimental_get_compiler_ir(*args)(stage="optimized_hlo")
    except tf.errors.OpError as error:
        raise MeasurementError("XLA could not compile the step for its HLO: "
                               + str(error).strip().splitlines()[0]) from error
    return CompiledProgram(text, None, None, TENSORFLOW_COST_SOURCE)
