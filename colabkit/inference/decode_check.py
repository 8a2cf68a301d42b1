"""The decode's correctness check (docs/decode.md, *Correctness*): the cached logits of a greedy generation
(colabkit.inference.decode) against the model's own full forward pass over the same tokens."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import keras
import numpy as np

from colabkit.errors import ParameterError

if TYPE_CHECKING:
    from colabkit.inference.decode import Generation

# The cached logits against the full pass's: |difference| <= RELATIVE_TOLERANCE[arithmetic] x (1 + max |logit|),
# in units of the arithmetic's unit roundoff u: 256 u in float32, 16 u in half precision and TF32 (the evidence:
# docs/decode.md). A real fault (a position off by one, another layer's keys, no mask) moves logits by 1e-2 or more.
RELATIVE_TOLERANCE = {"float32": 256 * 2.0**-24, "tensorfloat32": 16 * 2.0**-11, "float16": 16 * 2.0**-11,
                      "bfloat16": 16 * 2.0**-8}


@dataclass(frozen=True)
class DecodeCheck:
    """Cached decode against the model's full forward pass over the same tokens: the largest |logit difference| over
    the generated positions, the tolerance it is held to (RELATIVE_TOLERANCE[arithmetic] x (1 + max |logit|)), and
    whether every greedy token is the full pass's argmax, or within twice the tolerance of its top logit (a tie to
    rounding: `ties` counts those)."""

    max_abs_difference: float
    tolerance: float
    arithmetic: str
    tokens_agree: bool
    ties: int
    positions: int

    @property
    def passed(self) -> bool:
        return self.max_abs_difference <= self.tolerance and self.tokens_agree


def check_against_full_pass(model: Any, prompt: Any, generation: Generation,
                            arithmetic: str | None = None) -> DecodeCheck:
    """Run `model` (its own call, training=False) once over each prompt followed by the generated tokens but the
    last (padded with zeros to the model's input length: causal, so the padding changes no earlier position) and
    compare its logits at the positions that chose the generated tokens with the decode's (kept logits needed).
    `arithmetic` (a RELATIVE_TOLERANCE key) defaults to the model's compute dtype; name the narrower one a device's
    products use ('tensorfloat32' on a recent GPU, 'bfloat16' for float32 on a TPU)."""
    arithmetic = arithmetic or str(model.dtype_policy.compute_dtype)
    if generation.logits is None or arithmetic not in RELATIVE_TOLERANCE:
        raise ParameterError(f"check_against_full_pass needs a generation made with keep_logits=True and an arithmetic "
                             f"among {', '.join(RELATIVE_TOLERANCE)} (got {arithmetic!r})")
    prompt = np.asarray(prompt, np.int32)
    fed = np.concatenate([prompt, generation.tokens[:, :-1]], axis=1)
    length = model.inputs[0].shape[1] or fed.shape[1]
    padded = np.zeros((fed.shape[0], length), np.int32)
    padded[:, :fed.shape[1]] = fed
    full = np.asarray(keras.ops.convert_to_numpy(model(padded, training=False)), np.float64)
    chosen = full[:, prompt.shape[1] - 1:fed.shape[1]]
    tolerance = RELATIVE_TOLERANCE[arithmetic] * (1.0 + float(np.max(np.abs(chosen))))
    picked = np.take_along_axis(chosen, generation.tokens[..., None].astype(np.int64), axis=-1)[..., 0]
    exact = chosen.argmax(-1) == generation.tokens
    close = chosen.max(-1) - picked <= 2 * tolerance
    return DecodeCheck(float(np.max(np.abs(chosen - generation.logits))), tolerance, arithmetic,
                       bool(np.all(exact | close)), int(np.sum(~exact & close)), int(chosen.shape[1]))
