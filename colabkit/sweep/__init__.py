"""Sweeps: grid files expanded and validated (grid, parameters), combinations fingerprinted
(fingerprint), executed by papermill one kernel each (execution; multi-worker runs: workers; the
notebook runner the report shares: notebook_runner), driven with a folder lock and progress
(runner), and summarised from the records on disk (status)."""
