"""Result records: one JSON file per run with a versioned schema (record: made, checked, read, its paths) and its
fixed vocabularies (schema: RecordStatus, ErrorKind); a failed run's error as one typed value (run_error: RunError);
whether its figures can be a measurement (plausibility); the provenance every record carries:
software versions, host, git commit (provenance); and the one way to read them back (loading: each
record read, checked and set aside once) and to merge those of one combination (merging)."""

from colabkit.records.loading import LoadedRecords, load_records, load_results
from colabkit.records.record import read_record

__all__ = ["LoadedRecords", "load_records", "load_results", "read_record"]
