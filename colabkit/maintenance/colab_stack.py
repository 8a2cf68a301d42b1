"""The Colab set (requirements-colab.txt, requirements-colab-test.txt, constraints-colab.txt) refreshed from
Colab's published pip freeze.

Colab publishes what its runtimes hold in googlecolab/backend-info (pip-freeze.txt: the CPU and GPU
runtimes' common packages). When it publishes a new list:

    python -m colabkit.maintenance.colab_stack                 # from backend-info's main branch
    python -m colabkit.maintenance.colab_stack FILE_OR_URL     # from a saved or pinned pip-freeze.txt
    python -m colabkit.maintenance.colab_stack --check FILE    # exit 1 if the set differs from FILE

It rewrites the version of every package in the first block of each requirements file (Colab's own
packages: the core's in requirements-colab.txt, the extras' and pytest's in requirements-colab-test.txt) to
the list's, keeps each second block (what the set-up cell and the tests add, which Colab lacks) as it is,
and writes the whole list, less the lines that are not `name==version`, to constraints-colab.txt: `./run.sh` installs with `-c constraints-colab.txt`, so every package pulled
in on the way also gets Colab's version. A package of the first block missing from the list
(Colab dropped it) is refused: a person decides whether it moves to the second block.
"""

from __future__ import annotations

import argparse
import re
import sys
import urllib.request
from pathlib import Path

from colabkit.errors import ColabkitError
from colabkit.io import write_atomic

DEFAULT_SOURCE = "https://raw.githubusercontent.com/googlecolab/backend-info/main/pip-freeze.txt"
REQUIREMENTS = ("requirements-colab.txt", "requirements-colab-test.txt")  # the core, then the test set
CONSTRAINTS = "constraints-colab.txt"
ADDED_MARKER = "# Not in Colab's image"
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)\s*$")


def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_freeze(text: str) -> dict[str, tuple[str, str]]:
    """{normalised name: (name as written, version)} of every `name==version` line."""
    pins = {}
    for line in text.splitlines():
        if match := _PIN.match(line.strip()):
            pins[_key(match[1])] = (match[1], match[2])
    return pins


def refresh(requirements: tuple[str, ...], freeze: str, source: str) -> tuple[str, ...]:
    """(each new requirements file of REQUIREMENTS, then the new constraints-colab.txt) for the freeze list
    `freeze`; `requirements` holds the files' texts in REQUIREMENTS' order."""
    pins = parse_freeze(freeze)
    texts, missing = [], []
    for text in requirements:
        texts.append(_rewrite_colab_block(text, pins, source, missing))
    if missing:
        raise ColabkitError(f"Colab's list has no {', '.join(missing)}: move them below '{ADDED_MARKER}' "
                            "with a version, or drop them")
    constraints = [f"# Colab's pip freeze ({source}): pip's -c keeps every installed package at Colab's version",
                   *(f"{name}=={version}" for name, version in sorted(pins.values(), key=lambda p: _key(p[0])))]
    return (*texts, "\n".join(constraints) + "\n")


def _rewrite_colab_block(requirements: str, pins: dict[str, tuple[str, str]], source: str, missing: list[str]) -> str:
    """One requirements file with its first block's versions at Colab's; the names Colab lacks go to `missing`."""
    lines, colab_block = [], True
    for line in requirements.splitlines():
        if line.startswith(ADDED_MARKER):
            colab_block = False
        elif line.startswith("# Source: "):
            line = f"# Source: {source}"
        elif colab_block and (match := _PIN.match(line)):
            if _key(match[1]) not in pins:
                missing.append(match[1])
            else:
                line = f"{match[1]}=={pins[_key(match[1])][1]}"
        lines.append(line)
    return "\n".join(lines) + "\n"


def _pins_only(text: str) -> list[str]:
    """The lines that matter to --check: all but where the list came from."""
    return [line for line in text.splitlines() if not line.startswith(("# Source: ", "# Colab's pip freeze ("))]


def _read(source: str) -> str:
    if re.match(r"https?://", source):
        with urllib.request.urlopen(source, timeout=60) as response:  # noqa: S310 (a URL the maintainer gives)
            return response.read().decode()
    return Path(source).read_text()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", nargs="?", default=DEFAULT_SOURCE, help="pip-freeze.txt: a file or URL")
    parser.add_argument("--root", default=".", help="the repository (where the requirements-colab files lie)")
    parser.add_argument("--check", action="store_true", help="exit 1 if the set differs from the list")
    args = parser.parse_args(argv)
    root = Path(args.root)
    try:
        new = refresh(tuple((root / name).read_text() for name in REQUIREMENTS), _read(args.source), args.source)
    except (OSError, ColabkitError) as error:
        print(f"colab_stack: {error}", file=sys.stderr)
        return 2
    written = (*REQUIREMENTS, CONSTRAINTS)
    stale = [name for name, text in zip(written, new)
             if not (root / name).exists() or _pins_only((root / name).read_text()) != _pins_only(text)]
    if args.check:
        print(f"colab_stack: {'out of date: ' + ', '.join(stale) if stale else 'up to date'}")
        return 1 if stale else 0
    for name, text in zip(written, new):
        write_atomic(root / name, text)
    print(f"colab_stack: wrote {', '.join(written)} from {args.source}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
