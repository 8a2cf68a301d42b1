"""A tiny parameterized notebook for sweep tests and the sweep-overhead benchmark.

It runs in about a second (no TensorFlow unless asked for), writes a real record through
colabkit.start_run, and misbehaves on request: for the combination whose `value` equals
`fail_on` it raises, `exit_on` kills its own kernel with os._exit, `sleep_on` sleeps `sleep_s`
seconds, `oom_on` asks TensorFlow for an impossible tensor (a real ResourceExhaustedError). From
`hold_from` on, each combination waits until the file `hold_file` exists: a test's gate, so that what
has finished when the test acts is decided by the test, not by how fast the runs go.
"""

from __future__ import annotations

from pathlib import Path

import nbformat

PARAMETERS = '''device = "cpu"  # "cpu" only: this notebook does no device work
value = 1  # the swept value
label = "a"  # a second, string-valued parameter
fail_on = -1  # raise ValueError when value equals this
exit_on = -1  # os._exit(7) when value equals this (a dead kernel)
sleep_on = -1  # sleep sleep_s seconds when value equals this
sleep_s = 0.0  # how long
oom_on = -1  # allocate an impossible TensorFlow tensor when value equals this
write_record = True  # False: finish without writing the record
hold_from = -1  # from this value on (when not -1), wait until hold_file exists (at most 600 s: a hang guard)
hold_file = ""  # the test writes it to let the held combinations go on
results_path = ""  # the JSON record
'''

SETUP = '''import os, sys, time
import colabkit

run = colabkit.start_run("{name}", params=dict(device=device, value=value, label=label, fail_on=fail_on,
                         exit_on=exit_on, sleep_on=sleep_on, sleep_s=sleep_s, oom_on=oom_on,
                         write_record=write_record), results_path=results_path)
'''

WORK = '''print(f"value {value}", flush=True)
if hold_from != -1 and value >= hold_from:
    for _ in range(12000):
        if os.path.exists(hold_file):
            break
        time.sleep(0.05)
if value == exit_on:
    os._exit(7)
if value == sleep_on:
    time.sleep(sleep_s)
if value == fail_on:
    raise ValueError(f"value {value} is set to fail")
if value == oom_on:
    import tensorflow as tf
    tf.zeros((1 << 20, 1 << 20, 64))
'''

RECORD = '''if write_record:
    run.record(metrics={"double": 2 * value}, device={"requested": device, "kind": "cpu"},
               data={"name": "none", "source": "synthetic"})
'''


def write_tiny_notebook(path: str | Path) -> Path:
    """Write the tiny notebook to `path` (its stem names its records) and return the path."""
    path = Path(path)
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.cells = [
        nbformat.v4.new_markdown_cell(f"# {path.stem}: a tiny notebook for sweep tests"),
        nbformat.v4.new_code_cell(PARAMETERS, metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell(SETUP.format(name=path.stem)),
        nbformat.v4.new_code_cell(WORK),
        nbformat.v4.new_code_cell(RECORD),
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, str(path))
    return path
