"""The README and docs/: short README, links that resolve, sources named by author and year."""

from __future__ import annotations

import re

import pytest
from conftest import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# A Markdown link or image target that is a path in the repository (not a URL, not an anchor).
LOCAL_LINK = re.compile(r"\]\((?!https?://|#|mailto:)([^)\s#]+)(?:#[^)\s]*)?\)")
# Wording that points readers at the project's private notes instead of a named source.
PRIVATE_WORDING = re.compile(r"\bseeds? ?0\d\d\b|(?-i:SOURCES\.md)|\.\./shared|\bthe seed'?s?\b", re.IGNORECASE)


def test_the_readme_is_short():
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines; move details to docs/"


@pytest.mark.parametrize("page", PAGES, ids=lambda path: path.name)
def test_every_local_link_resolves(page):
    text = page.read_text(encoding="utf-8")
    broken = [target for target in LOCAL_LINK.findall(text) if not (page.parent / target).exists()]
    assert broken == [], f"{page.relative_to(REPO)} links to missing files: {broken}"


@pytest.mark.parametrize("path", [*PAGES, REPO / "requirements.txt", REPO / "run.sh",
                                  *sorted((REPO / "parameters").glob("*.yaml"))], ids=lambda path: path.name)
def test_sources_are_named_by_author_and_year(path):
    found = [match.group(0) for match in PRIVATE_WORDING.finditer(path.read_text(encoding="utf-8"))]
    assert found == [], f"{path.relative_to(REPO)} says {found}: name the source by author and year (docs/sources.md)"
