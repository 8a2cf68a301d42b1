"""Each module imports when it is the first colabkit module an interpreter imports: an import circle that only
bites in one order, or a module leaning on another's side effect, shows up only then. colabkit's own structure, the
same under either set: today's set runs it (tests/colab_set.py); every module's import under Colab's versions is
tests/test_package_structure.py's."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from test_package_structure import IMPORTABLE, python

PURGE_AND_IMPORT = """
import importlib, sys, traceback
failed = []
for name in sys.argv[1:]:
    for loaded in [key for key in sys.modules if key == "colabkit" or key.startswith("colabkit.")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except BaseException:
        failed.append(name + ":\\n" + traceback.format_exc(limit=-3))
print("\\n\\n".join(failed))
sys.exit(1 if failed else 0)
"""


@pytest.mark.long("every module imported first in turn: each re-imports its colabkit dependencies, about 170 times")
def test_every_module_imports_first_with_no_other_colabkit_module_loaded():
    """Each module in turn, with every colabkit module purged from the interpreter before it."""
    completed = python("-c", PURGE_AND_IMPORT, *IMPORTABLE)
    assert completed.returncode == 0, completed.stdout[-6000:] + completed.stderr[-2000:]


def import_alone(module: str) -> tuple[str, int, str]:
    completed = python("-c", f"import {module}", timeout=300)
    return module, completed.returncode, completed.stderr.strip()[-2000:]


@pytest.mark.slow
def test_every_module_imports_by_itself_in_a_fresh_interpreter():
    """The strict form of the test above, one interpreter per module (a few minutes on 2 cores)."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        failures = [result for result in pool.map(import_alone, IMPORTABLE) if result[1] != 0]
    assert not failures, "\n\n".join(f"{module}:\n{stderr}" for module, _, stderr in failures)
