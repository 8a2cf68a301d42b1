"""Timing: the clock that forces device completion (clock), repeated runs summarised (repeats),
same-run baselines such as NumPy's BLAS (baseline), two measurements of the same work compared in
interleaved rounds (agreement), and the clock against a device's pipelined throughput (pipelined)."""
