"""docs/records.md is rendered from the code, and describes every key the record's producers write."""

from __future__ import annotations

import inspect
import re

from helpers import REPO

import colabkit.sweep.runners.execute as execution
import schema_doc
from colabkit.records.provenance import host_info, software_versions
from colabkit.records.record import FIELD_DOCS, REQUIRED_FIELDS
from colabkit.sweep.decide import fingerprint


def test_docs_records_md_is_up_to_date():
    assert (REPO / schema_doc.RECORDS_DOC).read_text(encoding="utf-8") == schema_doc.render(), (
        "docs/records.md is out of date: run `python tools/schema_doc.py` and commit")


def test_check_mode_reports_a_stale_page(tmp_path, capsys):
    assert schema_doc.main(["--check", "--root", str(tmp_path)]) == 1
    assert "out of date" in capsys.readouterr().err
    assert schema_doc.main(["--root", str(tmp_path)]) == 0
    assert schema_doc.main(["--check", "--root", str(tmp_path)]) == 0


def test_every_field_a_record_can_have_is_described():
    assert set(REQUIRED_FIELDS) <= set(FIELD_DOCS)
    # The sweep adds these to the records it commits.
    source = inspect.getsource(execution)
    added = set(re.findall(r"record\.update\((\w+)=[\w.]+, (\w+)=[\w.]+, (\w+)=[\w.]+, (\w+)=", source)[0])
    assert added == {"fingerprint", "sweep", "kernel", "repeat"} and added <= set(FIELD_DOCS)
    assert {"host_state", "host_quiet"} <= set(FIELD_DOCS)  # Run.record adds them to every record


def test_every_key_the_producers_write_is_described():
    assert set(host_info()) <= set(schema_doc.HOST_KEYS)
    assert set(software_versions()) <= set(schema_doc.SOFTWARE_KEYS) | set(schema_doc.SOFTWARE_PACKAGES)
    assert set(fingerprint(REPO / "notebooks" / "matmul_tflops.ipynb", {"n": 64})) == set(schema_doc.FINGERPRINT_KEYS)
    from colabkit.device.host_state import HostMonitor

    assert set(HostMonitor(interval_s=60).start().stop()) == set(schema_doc.HOST_STATE_KEYS)


def test_every_error_kind_and_key_a_failed_record_can_have_is_described():
    from dataclasses import fields

    from colabkit.records.run_error import RunError
    from colabkit.records.schema import ErrorKind

    assert {kind.value for kind in ErrorKind} == set(schema_doc.ERROR_KINDS)
    # The error section is written in one place (RunError.as_record): each field is a key it may write.
    assert {field.name for field in fields(RunError)} == set(schema_doc.ERROR_KEYS)
    chief = RunError("RuntimeError", ErrorKind.EXCEPTION, "collective aborted", cell=3, exec_count=4, source="fit()")
    everything = RunError("WorkersFailed", ErrorKind.MULTI_WORKER, "worker 1 failed", cell=3, exec_count=4,
                          source="fit()", exit_code=-9, chief_error=chief)
    assert set(everything.as_record()) == set(schema_doc.ERROR_KEYS)
    assert RunError.from_record(everything.as_record()) == everything
    # The sweep's execution builds its errors from the vocabulary, never from bare strings.
    assert not re.findall(r'kind(?:"\s*:\s*|\s*=\s*)"(\w+)"', inspect.getsource(execution))


def test_every_energy_field_the_measurements_write_is_described():
    from colabkit.device.energy import NotMeasured, energy_metrics
    from colabkit.device.energy_source import WindowEnergy

    described = {key for keys in schema_doc.ENERGY_METRIC_DOCS for key in keys.split(", ")}
    assert set(energy_metrics(NotMeasured("none here"), [], [])) <= described
    window_keys = {key for keys in schema_doc.ENERGY_WINDOW_KEYS for key in keys.split(", ")}
    for unit in ("inference", "token"):
        assert set(WindowEnergy(2.0, 10.0).per_unit(5, unit)) <= window_keys
    row_keys = {key for keys in schema_doc.DECODE_ROW_KEYS for key in keys.split(", ")}
    assert set(WindowEnergy(2.0, 10.0).per_unit(5, "token")) <= row_keys
