"""Sweeps: grid files expanded and validated (grid, parameters), combinations fingerprinted
(fingerprint), executed by papermill one kernel each (execution, through colabkit.notebook_runner, which the report
shares; multi-worker runs: workers), driven with a folder lock and progress
(runner), and summarised from the records on disk (status)."""
