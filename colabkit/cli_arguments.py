"""The command line's argument types: each turns one option's text into a value, or raises
argparse.ArgumentTypeError with a line saying what the option takes."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T", int, float)


def _number(text: str, parse: Callable[[str], T], noun: str, valid: Callable[[T], bool], needs: str) -> T:
    """`text` parsed by `parse` (int, float); ArgumentTypeError "'x' is not NOUN" or "'x': NEEDS"."""
    try:
        value = parse(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {noun}") from None
    if not valid(value):
        raise argparse.ArgumentTypeError(f"{text!r}: {needs}")
    return value


def timeout_seconds(text: str) -> float | None:
    """--timeout: seconds > 0, or 'none' for no limit (0 is refused: it reads as 'no time at all')."""
    if text.strip().lower() in ("none", "no", "off"):
        return None
    return _number(text, float, "a number of seconds (or 'none' for no limit)",
                   lambda value: math.isfinite(value) and value > 0,
                   "give a number of seconds > 0, or 'none' for no limit")


def positive_int(text: str) -> int:
    """--jobs, --count, --repeats...: a whole number >= 1."""
    return _number(text, int, "a whole number", lambda value: value >= 1, "must be 1 or more")


def seconds(text: str) -> float:
    """--grace, --wait-quiet: seconds >= 0."""
    return _number(text, float, "a number of seconds", lambda value: math.isfinite(value) and value >= 0,
                   "must be 0 or more seconds")


def positive_seconds(text: str) -> float:
    """--colab-timeout, --colab-session-limit: seconds > 0 (0 would start a session that can do nothing)."""
    return _number(text, float, "a number of seconds", lambda value: math.isfinite(value) and value > 0,
                   "must be more than 0 seconds")


def percentage(text: str, allow_zero: bool = False) -> float:
    """--target-ci, --fail-above: '3%' or 0.03 -> 0.03, a share between 0 and 1 (and 0, however written,
    with `allow_zero`)."""
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a percentage (3%) or a fraction (0.03)") from None
    if allow_zero and value == 0:
        return 0.0
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a share between 0 and 100 %, e.g. 3%")
    return value


def tolerance(text: str) -> float:
    """--tolerance: '2%' or 0.02 (0 allowed: resolve any difference whose interval excludes 1)."""
    return percentage(text, allow_zero=True)
