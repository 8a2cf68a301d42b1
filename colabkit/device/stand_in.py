"""The tests' seam, the one in colabkit's product code: this machine's CPU standing in for a GPU or TPU.

COLABKIT_TEST_STAND_IN="gpu=Tesla T4" (or "tpu=NAME"), set by tests/fake_colab.py and read here alone, lets the
`sweep --colab` path run end to end on a CPU host. It may do three things and no more: `available_devices` counts
one device of that kind, the sweep's `accelerator_signs` names it, and `setup_device` asked for that kind builds the
CPU's set-up under its kind and name, described `stand_in: "cpu"`: every record says a CPU ran it, and the report
reads that field of the record, never this variable. Nothing in colabkit sets it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal, get_args

STAND_IN_ENV = "COLABKIT_TEST_STAND_IN"
StandInKind = Literal["gpu", "tpu"]


@dataclass(frozen=True)
class StandIn:
    """The device a test asked the CPU to stand in for: its kind and the name its records give it."""

    kind: StandInKind
    name: str

    @property
    def sign(self) -> str:
        """How the sweep names it among a machine's signs of an accelerator."""
        return f"{STAND_IN_ENV}={self.kind}={self.name}"


def stand_in() -> StandIn | None:
    """The stand-in a test asked for, or None (always, outside colabkit's tests)."""
    asked, _, name = os.environ.get(STAND_IN_ENV, "").partition("=")
    return next((StandIn(kind, name) for kind in get_args(StandInKind) if kind == asked and name), None)
