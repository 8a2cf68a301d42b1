"""The README and docs/: short README, links that resolve, sources named by author and year."""

from __future__ import annotations

import re

import pytest
from helpers import REPO

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


@pytest.mark.parametrize("path", [*PAGES, REPO / "requirements.txt", REPO / "requirements-test.txt", REPO / "run.sh",
                                  *sorted((REPO / "parameters").glob("*.yaml"))], ids=lambda path: path.name)
def test_sources_are_named_by_author_and_year(path):
    found = [match.group(0) for match in PRIVATE_WORDING.finditer(path.read_text(encoding="utf-8"))]
    assert found == [], f"{path.relative_to(REPO)} says {found}: name the source by author and year (docs/sources.md)"


# --- the README's Layout and the modules the pages name ------------------------------------------------

PACKAGE = REPO / "colabkit"
SUBPACKAGES = {path.parent.relative_to(PACKAGE).as_posix() for path in PACKAGE.rglob("__init__.py")} - {"."}


def layout_entries() -> dict[str, str]:
    """The README Layout's entries under colabkit/: each entry's head ('device/', 'sweep/runners/colab/',
    '__init__.py', 'cli.py, cli_arguments.py, ...') and its text (the rest of its line and the deeper lines)."""
    block = (REPO / "README.md").read_text(encoding="utf-8").split("## Layout", 1)[1].split("```")[1]
    lines = block.split("colabkit/", 1)[1].splitlines()[1:]
    entries: dict[str, str] = {}
    head = ""
    for line in lines:
        if not line.startswith("  "):  # tests/, docs/, ...: past colabkit/
            break
        if line[2] != " ":
            head, _, text = line[2:].partition("  ")
            entries[head.strip()] = text
        else:
            entries[head.strip()] += " " + line.strip()
    return entries


def named_modules(text: str) -> list[str]:
    """The module names a package's entry lists: the first word of each item, items separated by ',' or ';'
    outside parentheses (what a parenthesis says about a module is prose)."""
    while re.search(r"\([^()]*\)", text):
        text = re.sub(r"\([^()]*\)", "", text)
    return [item.split()[0] for item in re.split(r"[,;]", text) if item.split()]


def test_every_module_the_readmes_layout_names_exists_and_every_subpackage_is_named():
    entries = layout_entries()
    packages = {head.rstrip("/") for head in entries if head.endswith("/")}
    assert {"device", "sweep/runners/colab"} <= packages  # the Layout is read
    assert packages == SUBPACKAGES, f"named but absent: {sorted(packages - SUBPACKAGES)}; " \
                                    f"not named: {sorted(SUBPACKAGES - packages)}"
    missing = [f"{package}/{name}" for package in packages for name in named_modules(entries[f"{package}/"])
               if not (PACKAGE / package / f"{name}.py").is_file()]
    missing += [name for head, text in entries.items() if not head.endswith("/")
                for name in re.findall(r"\b(\w+)\.py\b", f"{head} {text}") if not (PACKAGE / f"{name}.py").is_file()]
    assert missing == [], f"README's Layout names modules colabkit does not have: {missing}"


MODULE_PATH = re.compile(r"\bcolabkit/[\w/]+\.py\b")
DOTTED = re.compile(r"(?<![\w/.])colabkit(?:\.[a-z_0-9]+)+")


@pytest.mark.parametrize("page", PAGES, ids=lambda path: path.name)
def test_every_colabkit_module_a_page_names_exists(page):
    """`colabkit/x/y.py` and `colabkit.x.y` (or `colabkit.x.y.name`: a module and a name it has) are real."""
    text = page.read_text(encoding="utf-8")
    missing = [path for path in MODULE_PATH.findall(text) if not (REPO / path).is_file()]
    for dotted in set(DOTTED.findall(text)):
        *module, name = dotted.split(".")
        files = [REPO.joinpath(*module, name).with_suffix(".py"), REPO.joinpath(*module, name, "__init__.py")]
        if not any(path.is_file() for path in files):  # else a name in a module: defined or imported there
            source = next((path for path in (REPO.joinpath(*module).with_suffix(".py"),
                                             REPO.joinpath(*module, "__init__.py")) if path.is_file()), None)
            if source is None or not re.search(rf"\b{name}\b", source.read_text(encoding="utf-8")):
                missing.append(dotted)
    assert missing == [], f"{page.relative_to(REPO)} names modules colabkit does not have: {missing}"
