"""Result records: one JSON file per run with a versioned schema (record) and its fixed vocabularies
(schema: RecordStatus, ErrorKind), a failed run's error as one typed value (run_error: RunError), and
the provenance every record carries: software versions, host, git commit (provenance)."""

from colabkit.records.record import Run, load_results, read_record, start_run

__all__ = ["Run", "load_results", "read_record", "start_run"]
