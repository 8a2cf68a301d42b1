"""`python -m colabkit gpu-check`: one command that proves the GPU path on a real GPU.

Rows (rows.py) are typed values with a PASS/FAIL/SKIP verdict, their figure, rule and reason; the
verdict rules and their thresholds (rules.py) are pure functions of measurements; the stages
(stages.py, training.py) measure in worker processes (worker.py, tasks.py) and through the sweep
(notebook_runs.py); check.py runs them, writes the outputs and the table. docs/benchmarks.md describes
every row and its time budget.
"""

from colabkit.gpu_check.check import DEFAULT_OUT, DEFAULT_ROUNDS, run_check
from colabkit.gpu_check.rows import NO_GPU_LINE, CheckRow, CheckVerdict

__all__ = ["DEFAULT_OUT", "DEFAULT_ROUNDS", "NO_GPU_LINE", "CheckRow", "CheckVerdict", "run_check"]
