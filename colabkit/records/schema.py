"""The fixed vocabularies of a record: its `status`, and the `kind` of a failed record's `error`.

Both are `StrEnum`s: a member is the plain string it stands for (`RecordStatus.OK == "ok"`), so it
is written into a JSON record as that string, and a record read back compares equal to members.
The values are part of the record schema: add members, never rename one.
"""

from __future__ import annotations

from enum import StrEnum


class RecordStatus(StrEnum):
    """How a run ended, as its record says."""

    OK = "ok"  # the run finished and measured what it promises
    FAILED = "failed"  # it raised, died, ran out of time or memory; `error` says how
    SKIPPED = "skipped"  # it was not run: the device it needs is absent; `error` says why


class ErrorKind(StrEnum):
    """The `kind` in a failed (or skipped) record's `error` section: what went wrong, in one word."""

    EXCEPTION = "exception"  # a cell raised
    OOM = "oom"  # a cell ran out of memory (ResourceExhaustedError and its kin)
    TIMEOUT = "timeout"  # the run exceeded its time limit
    DEAD_KERNEL = "dead_kernel"  # the kernel process died (os._exit, a segfault, the OOM killer)
    KERNEL_START = "kernel_start"  # no kernel would start, even after retries
    MISSING_RECORD = "missing_record"  # the notebook finished without writing a readable record
    HTML_EXPORT = "html_export"  # the run finished but its HTML export failed
    MULTI_WORKER = "multi_worker"  # a worker of a multi-worker run did not finish
    WORKER_DIED = "worker_died"  # the sweep's own worker process (--jobs N) died while running it
    SKIPPED = "skipped"  # the run's device is absent from this machine
    SWEEP = "sweep"  # the sweep machinery itself failed around the run
    NOT_A_MEASUREMENT = "not_a_measurement"  # it finished, but its figures cannot be a measurement (0 FLOPs, NaN loss)
    CLUSTER = "cluster"  # a sweep on a Dask cluster: the task could not run on its worker
    COLAB = "colab"  # a sweep on Colab (--colab): its session refused, lost, or out of time
    FILESYSTEM = "filesystem"  # the output folder failed it: a full disk, no permission, a file where a folder goes
