"""Timing: the clock that forces device completion (clock), repeated runs summarised (repeats), and
same-run baselines such as NumPy's BLAS (baseline)."""

from colabkit.timing.clock import Measurement, block_until_ready, measure, summarize, timed

__all__ = ["Measurement", "block_until_ready", "measure", "summarize", "timed"]
