"""The suite can be cited: CITATION.cff at the root holds what the Citation File Format 1.2.0 requires,
the README names it, and the report's references.bib lists the works the report compares with."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from colabkit.report.methods import REFERENCES, write_references

ROOT = Path(__file__).resolve().parents[1]


def test_citation_cff_has_the_required_keys_and_the_readme_names_it():
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert citation["cff-version"] == "1.2.0" and citation["message"] and citation["title"]
    assert citation["authors"] and all("name" in a or "family-names" in a for a in citation["authors"])
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", str(citation["date-released"]))
    assert "CITATION.cff" in (ROOT / "README.md").read_text()


def test_references_bib_lists_every_published_work_compared_with(tmp_path):
    text = write_references(tmp_path).read_text()
    for author in ("Sarkar", "Alyafeai", "Kimm and Paik and Kimm", "Wang, Yu Emma and Wei, Gu-Yeon and Brooks",
                   "Ragab, M. A. and Ragab", "Kalibera", "Zou, G. Y. and Donner"):
        assert author in text, author
    assert text.count("@") == len(REFERENCES) and text.count("{") == text.count("}")  # balanced entries
