"""The repository coordinates (GitHub OWNER/NAME and ref) that badges and the bootstrap install from.

The ref is pinned: the release tag of this version (`v` + colabkit.__version__), or a commit that
`python tools/stamp_notebooks.py badges --ref COMMIT` stamped. A notebook opened from a badge then runs with the
colabkit of the same release, and installing it again tomorrow gives the same code (a branch such
as `main` moves under the records made from it). Both a tag and a commit are browsable on GitHub,
so the badges keep opening. `python tools/stamp_notebooks.py badges --ref main` still works, with a warning.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from colabkit.errors import CoordinatesError

# The one place for the repository coordinates (rewritten by `python tools/stamp_notebooks.py badges`).
REPOSITORY = "colabkit/colabkit"
REF = "v0.1.0"
COLAB_URL = "https://colab.research.google.com/github"
BADGE_IMAGE = "https://colab.research.google.com/assets/colab-badge.svg"
_OWNER = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})")
_NAME = re.compile(r"[A-Za-z0-9._-]{1,100}")
_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,199}")
# What counts as pinned: a release tag (v1, v0.1.0, v2.0.0rc1) or a commit id (7 to 40 hex digits).
_RELEASE_TAG = re.compile(r"v\d+(?:\.\d+)*(?:(?:a|b|rc)\d+)?(?:\.post\d+)?")
_COMMIT = re.compile(r"[0-9a-f]{7,40}")


@dataclass(frozen=True)
class Coordinates:
    """Where the suite lives on GitHub: `repository` is OWNER/NAME, `ref` a branch, tag or commit."""

    repository: str
    ref: str

    def __post_init__(self) -> None:
        owner, slash, name = self.repository.partition("/")
        if not (slash and _OWNER.fullmatch(owner) and _NAME.fullmatch(name) and name not in (".", "..")):
            raise CoordinatesError(
                f"repository {self.repository!r} is not OWNER/NAME as GitHub spells it (e.g. 'colabkit/colabkit')")
        if (not _REF.fullmatch(self.ref) or ".." in self.ref or "//" in self.ref
                or self.ref.endswith(("/", ".", ".lock"))):
            raise CoordinatesError(f"ref {self.ref!r} is not a usable git branch, tag or commit name (e.g. 'main', 'v0.1.0')")

    def notebook_url(self, path: str) -> str:
        """The Open-in-Colab URL of `path` (relative to the repository root, e.g. notebooks/x.ipynb)."""
        return f"{COLAB_URL}/{self.repository}/blob/{self.ref}/{path}"

    def badge(self, path: str) -> str:
        """The Markdown Open-in-Colab badge linking to `path`."""
        return f"[![Open In Colab]({BADGE_IMAGE})]({self.notebook_url(path)})"

    @property
    def pinned(self) -> bool:
        """Whether the ref names fixed code: a release tag (`v0.1.0`) or a commit id, not a branch."""
        return bool(_RELEASE_TAG.fullmatch(self.ref) or _COMMIT.fullmatch(self.ref))

    @property
    def pip_requirement(self) -> str:
        """What `pip install` takes to install colabkit from this repository at this ref."""
        return f"git+https://github.com/{self.repository}@{self.ref}"


def configured() -> Coordinates:
    """The coordinates this copy of colabkit is configured with."""
    return Coordinates(REPOSITORY, REF)
