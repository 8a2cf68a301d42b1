"""Result records: one JSON file per run with a versioned schema (record) and its fixed vocabularies
(schema: RecordStatus, ErrorKind); whether its figures can be a measurement (plausibility); the
provenance every record carries: software versions, host, git commit (provenance); and the one way
to read them back (loading: each record read, checked and set aside once) and to merge those of one
combination (merging)."""

from colabkit.records.loading import LoadedRecords, load_records, load_results
from colabkit.records.record import Run, read_record, start_run

__all__ = ["LoadedRecords", "Run", "load_records", "load_results", "read_record", "start_run"]
