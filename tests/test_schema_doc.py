"""docs/records.md is rendered from the code, and describes every key the record's producers write."""

from __future__ import annotations

import enum
import inspect
import re

from conftest import REPO

import colabkit.sweep.execution as execution
from colabkit.maintenance import schema_doc
from colabkit.records.provenance import host_info, software_versions
from colabkit.records.record import FIELD_DOCS, REQUIRED_FIELDS
from colabkit.sweep.fingerprint import fingerprint


def test_docs_records_md_is_up_to_date():
    assert (REPO / schema_doc.RECORDS_DOC).read_text(encoding="utf-8") == schema_doc.render(), (
        "docs/records.md is out of date: run `python -m colabkit.maintenance.schema_doc` and commit")


def test_check_mode_reports_a_stale_page(tmp_path, capsys):
    assert schema_doc.main(["--check", "--root", str(tmp_path)]) == 1
    assert "out of date" in capsys.readouterr().err
    assert schema_doc.main(["--root", str(tmp_path)]) == 0
    assert schema_doc.main(["--check", "--root", str(tmp_path)]) == 0


def test_every_field_a_record_can_have_is_described():
    assert set(REQUIRED_FIELDS) <= set(FIELD_DOCS)
    # The sweep adds these to the records it commits.
    source = inspect.getsource(execution)
    added = set(re.findall(r"record\.update\((\w+)=\w+, (\w+)=", source)[0])
    assert added == {"fingerprint", "sweep"} and added <= set(FIELD_DOCS)


def test_every_key_the_producers_write_is_described():
    assert set(host_info()) <= set(schema_doc.HOST_KEYS)
    assert set(software_versions()) <= set(schema_doc.SOFTWARE_KEYS) | set(schema_doc.SOFTWARE_PACKAGES)
    assert set(fingerprint(REPO / "notebooks" / "matmul_tflops.ipynb", {"n": 64})) == set(schema_doc.FINGERPRINT_KEYS)


def test_every_error_kind_the_sweep_writes_is_described():
    source = inspect.getsource(execution)
    kinds = (set(re.findall(r'kind(?:"\s*:\s*|\s*=\s*)"(\w+)"', source))
             | set(re.findall(r'"(\w+)" if _is_out_of_memory\([^)]*\) else "(\w+)"', source)[0]))
    # Where the kinds become an enum, its values are the vocabulary.
    for value in vars(execution).values():
        if isinstance(value, type) and issubclass(value, enum.Enum) and "Kind" in value.__name__:
            kinds |= {str(member.value) for member in value}
    assert {"exception", "oom", "timeout", "dead_kernel", "kernel_start", "missing_record"} <= kinds
    assert kinds <= set(schema_doc.ERROR_KINDS), kinds - set(schema_doc.ERROR_KINDS)
    error_keys = set(re.findall(r'error\.update\((\w+)=', source)) | set(re.findall(r'error\["(\w+)"\]', source))
    assert error_keys <= set(schema_doc.ERROR_KEYS)
