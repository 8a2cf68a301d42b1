"""The command line's argument types: each turns one option's text into a value, or raises
argparse.ArgumentTypeError with a line saying what the option takes."""

from __future__ import annotations

import argparse
import math

from colabkit.errors import ColabkitError


def timeout_seconds(text: str) -> float | None:
    """--timeout: seconds > 0, or 'none' for no limit (0 is refused: it reads as 'no time at all')."""
    if text.strip().lower() in ("none", "no", "off"):
        return None
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds (or 'none' for no limit)") from None
    if not (math.isfinite(seconds) and seconds > 0):
        raise argparse.ArgumentTypeError(f"{text!r}: give a number of seconds > 0, or 'none' for no limit")
    return seconds


def positive_int(text: str) -> int:
    """--jobs, --count, --repeats...: a whole number >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: must be 1 or more")
    return value


def seconds(text: str) -> float:
    """--grace, --wait-quiet: seconds >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"{text!r}: must be 0 or more seconds")
    return value


def share(text: str, allow_zero: bool = False) -> float:
    """--target-ci, --fail-above: '3%' or 0.03 (and 0, however written, with `allow_zero`)."""
    from colabkit.sweep.target import parse_fraction

    try:
        return parse_fraction(text, allow_zero)
    except ColabkitError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def tolerance(text: str) -> float:
    """--tolerance: '2%' or 0.02 (0 allowed: resolve any difference whose interval excludes 1)."""
    return share(text, allow_zero=True)
