"""The tests' seam, and the only one in colabkit's device code: this machine's CPU standing in for a GPU or TPU.

COLABKIT_TEST_STAND_IN="gpu=Tesla T4" (or "tpu=...") is set by the tests only (tests/fake_colab.py: a fake Colab
session on this host), so that the `sweep --colab` path runs end to end without an accelerator. It may do three
things and no more: `available_devices` counts one device of its kind, the sweep's `accelerator_signs` names it
(the devices are then asked in a child process), and `setup_device` asked for its kind builds the CPU's set-up
labelled with that kind and name, its description saying `stand_in: "cpu"`. Every record of such a run says a CPU
ran it, and the report reads that field of the record, never this variable. Nothing in colabkit sets it.
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
        """How the sweep names it among the machine's signs of an accelerator: the variable as set."""
        return f"{STAND_IN_ENV}={self.kind}={self.name}"


def stand_in() -> StandIn | None:
    """The stand-in a test asked for (STAND_IN_ENV), or None: always None outside colabkit's tests."""
    asked, _, name = os.environ.get(STAND_IN_ENV, "").partition("=")
    return next((StandIn(kind, name) for kind in get_args(StandInKind) if kind == asked and name), None)
