"""The package's shape: every module imports by itself, no import circle, no private name borrowed
across modules."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO

PACKAGE = REPO / "colabkit"


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def is_type_checking_block(node: ast.stmt) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def top_level_imports(path: Path) -> list[ast.Import | ast.ImportFrom]:
    """The import statements that run when the module is imported: at module level, also inside
    top-level if/try blocks, but not in functions, classes or `if TYPE_CHECKING:` blocks."""
    found: list[ast.Import | ast.ImportFrom] = []
    pending = list(ast.parse(path.read_text(encoding="utf-8")).body)
    while pending:
        node = pending.pop(0)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif isinstance(node, (ast.If, ast.Try)) and not is_type_checking_block(node):
            for field in ("body", "orelse", "finalbody", "handlers"):
                for child in getattr(node, field, []):
                    pending.extend(child.body if isinstance(child, ast.ExceptHandler) else [child])
    return found


def imported_modules(path: Path) -> set[str]:
    """The colabkit modules `path` imports at import time (`from pkg import submodule` counts as
    importing the submodule; a package's parents are not counted)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in top_level_imports(path):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
            continue
        base = node.module or ""
        if node.level:  # a relative import
            anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
            base = ".".join(anchor + ([base] if base else []))
        targets.add(base)
        targets.update(f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in MODULES)
    return {target for target in targets if target in MODULES and target != name}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle in `graph` (as a path that starts and ends at the same module), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return path[path.index(target):] + [target]
            if target not in state:
                cycle = visit(target)
                if cycle:
                    return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def test_the_cycle_finder_finds_a_circle_and_clears_a_tree():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_no_module_imports_form_a_circle():
    graph = {name: imported_modules(path) for name, path in MODULES.items()}
    assert graph["colabkit.sweep.runners.execute"] >= {"colabkit.sweep.runners.notebook", "colabkit.io"}  # the graph is real
    assert find_cycle(graph) is None


def test_no_circle_either_counting_the_imports_inside_functions_and_type_checking_blocks():
    """An import moved into a function (or under TYPE_CHECKING) to step around a circle is still a circle."""
    def modules(path: Path) -> set[str]:
        named = {target if target in MODULES else target.rpartition(".")[0] for target in every_import(path)}
        return {target for target in named if target in MODULES and target != module_name(path)}

    graph = {name: modules(path) for name, path in MODULES.items()}
    assert "colabkit.sweep.command" in graph["colabkit.cli"]  # imported inside `_sweep`: the graph counts it
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


def test_no_private_name_is_imported_across_modules():
    borrowed = []
    for name, path in MODULES.items():
        for node in top_level_imports(path) + [node for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                                               if isinstance(node, ast.ImportFrom)]:
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("colabkit"):
                borrowed += [f"{name}: from {node.module} import {alias.name}" for alias in node.names
                             if alias.name.startswith("_") and not alias.name.startswith("__")]
            elif isinstance(node, ast.Import):
                borrowed += [f"{name}: import {alias.name}" for alias in node.names
                             if any(part.startswith("_") and not part.startswith("__") for part in alias.name.split("."))]
    assert not borrowed, "\n".join(sorted(set(borrowed)))


# `python -m colabkit` runs the command line when imported: checked by running it instead.
IMPORTABLE = sorted(name for name in MODULES if not name.endswith(".__main__"))

# In one fresh interpreter: for each module, forget every colabkit module imported so far, then import
# that module first. Third-party packages stay loaded (cheap), colabkit starts from nothing each time.
def python(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=REPO, timeout=timeout,
                          env={**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3"})


def test_every_module_imports_under_this_set():
    """Every module imports, in one interpreter, under this set's Python and packages (Colab's too: a name a newer
    library dropped fails here). Whether each imports when it is the first: tests/test_import_order.py."""
    completed = python("-c", "import importlib, sys\nfor name in sys.argv[1:]: importlib.import_module(name)",
                       *IMPORTABLE)
    assert completed.returncode == 0, completed.stderr[-3000:]


def test_the_command_line_module_runs():
    completed = python("-m", "colabkit", "--help", timeout=120)
    assert completed.returncode == 0 and "sweep" in completed.stdout, completed.stderr[-2000:]


# --- layers that do not reach across -----------------------------------------------------------------

def every_import(path: Path) -> set[str]:
    """Every colabkit module or package `path` names in an import, at any depth (also the imports
    inside functions): `from pkg import name` counts as importing pkg (and pkg.name where that is a module)."""
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            targets.add(node.module)
            targets.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {target for target in targets if target == "colabkit" or target.startswith("colabkit.")}


# The package's layers, lowest first. A module may import from its own layer and the layers below it,
# never from one above: at module level, inside functions and in `if TYPE_CHECKING:` blocks alike.
# Each entry names a subpackage or a top-level module of colabkit; "colabkit" is the package root
# (`import colabkit`: the names the notebooks use), which sits on top of everything.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "version", "extras", "io", "suite", "statistics", "scores", "phases", "stages"),  # foundation
    ("device",),  # what the hardware is, its set-up and probes; installs nothing, notes its phases below
    ("colab",),  # the Colab runtime: what it is, the bootstrap and what it installs
    ("data",),
    ("timing",),  # clocks, repeats, baselines, agreement
    ("training",),  # what a training run measures: timer, fit, FLOPs, memory, bottleneck passes
    ("inference",),  # what an inference run measures: LoadGen's settings, its scenarios, latency percentiles
    ("plots",),
    ("experiments",),  # the declarations (their parameters, estimates and published figures)
    ("records",),  # a run's record: made, checked, read, merged, and where its files go
    ("cost",),  # what a run's work costs: the runtimes' rates, and the cost per unit of work of a record
    ("run",),  # the notebook's side of a run: its parameters checked, then its record written
    ("report",),
    ("sweep",),  # grids to a plan, its decisions, its runners (here, Dask, Colab sessions: runners/), the console
    ("compare",),
    ("gpu_check",),
    ("ondevice",),  # the device pack and the prepared run on a lent GPU: gpu-check, sweeps, report, zip
    ("cli_arguments", "cli", "__main__"),
    ("colabkit",),
)
# Upward imports not yet removed, each one named: none may be added.
PENDING_UPWARD: set[tuple[str, str]] = set()


def layer_of(module: str) -> int:
    """The index in LAYERS of `module`'s subpackage or top-level module ('colabkit.sweep.plan' -> sweep's)."""
    parts = module.split(".")
    name = parts[1] if len(parts) > 1 else "colabkit"
    return next(index for index, layer in enumerate(LAYERS) if name in layer)


def upward_imports() -> set[tuple[str, str]]:
    """(importer, imported) for every import of a module from a layer above the importer's."""
    found = set()
    for name, path in MODULES.items():
        for target in every_import(path):
            module = target if target in MODULES else target.rpartition(".")[0]  # a name imported from a module
            if module in MODULES and layer_of(module) > layer_of(name):
                found.add((name, module))
    return found


def test_every_subpackage_and_top_level_module_has_a_layer():
    named = {name for layer in LAYERS for name in layer}
    assert len(named) == sum(len(layer) for layer in LAYERS)  # each in one layer only
    actual = {name.split(".")[1] if "." in name else name for name in MODULES}
    assert actual == named, f"not in LAYERS: {sorted(actual - named)}; gone: {sorted(named - actual)}"


def test_no_module_imports_from_a_layer_above_its_own():
    assert layer_of("colabkit.device.setup") < layer_of("colabkit.colab.install")  # the check can fail
    upward = upward_imports()
    assert upward - PENDING_UPWARD == set(), "\n".join(f"{a} imports {b}" for a, b in sorted(upward - PENDING_UPWARD))
    assert PENDING_UPWARD <= upward, f"gone, remove from PENDING_UPWARD: {sorted(PENDING_UPWARD - upward)}"


def test_the_report_imports_nothing_from_the_sweep_nor_runs_a_notebook():
    reaching = {name: sorted(t for t in every_import(path) if t.startswith("colabkit.sweep")
                             or t == "colabkit.sweep.runners.notebook")
                for name, path in MODULES.items() if name.startswith("colabkit.report")}
    assert every_import(MODULES["colabkit.report.build"]) >= {"colabkit.records.loading"}  # the scan is real
    assert {name: found for name, found in reaching.items() if found} == {}


def test_data_imports_nothing_from_records_or_the_package_root():
    reaching = {name: sorted(t for t in every_import(path) if t == "colabkit" or t.startswith("colabkit.records"))
                for name, path in MODULES.items() if name.startswith("colabkit.data")}
    assert every_import(MODULES["colabkit.data.download"]) >= {"colabkit.colab.runtime"}  # in_colab, from colab/
    assert {name: found for name, found in reaching.items() if found} == {}


def test_the_tests_stand_in_is_read_in_its_one_module_and_asked_by_the_three_that_use_it():
    """COLABKIT_TEST_STAND_IN (the CPU standing in for a GPU or TPU) is the tests' seam: one module reads it, the
    device count, the device set-up and the sweep's accelerator signs ask it; the report reads the record's field."""
    reading = {name for name, path in MODULES.items() if "COLABKIT_TEST_STAND_IN" in path.read_text(encoding="utf-8")}
    assert reading == {"colabkit.device.stand_in"}
    asking = {name for name, path in MODULES.items() if "colabkit.device.stand_in" in every_import(path)}
    assert asking == {"colabkit.device.probes", "colabkit.device.setup", "colabkit.sweep.devices"}


REPORT_NOTEBOOKS = ("report.ipynb", "colab_sweep.ipynb")  # the notebooks that make reports


def test_no_experiment_notebook_imports_the_report():
    reaching = {}
    for notebook in sorted((REPO / "notebooks").glob("*.ipynb")):
        cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
        code = "\n".join("".join(cell["source"]) for cell in cells if cell["cell_type"] == "code")
        if "colabkit.report" in code or "from colabkit import report" in code:
            reaching[notebook.name] = True
    assert set(reaching) <= set(REPORT_NOTEBOOKS) and "report.ipynb" in reaching


def test_every_name_a_notebook_imports_from_colabkit_exists():
    """A rename in colabkit that a notebook's cell still uses fails here, in a second, rather than in the one kernel
    run of that notebook (colab_sweep's `summary_table`, renamed `outcomes_table`, broke its Colab run)."""
    import importlib

    missing = []
    for notebook in sorted((REPO / "notebooks").glob("*.ipynb")):
        cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
        for cell in cells:
            if cell["cell_type"] != "code":
                continue
            source = "\n".join(line for line in "".join(cell["source"]).splitlines()
                               if not line.lstrip().startswith(("!", "%")))  # shell and magic lines are not Python
            for node in ast.walk(ast.parse(source)):
                if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "colabkit":
                    module = importlib.import_module(node.module)
                    missing += [f"{notebook.name}: from {node.module} import {alias.name}" for alias in node.names
                                if not hasattr(module, alias.name)
                                and importlib.util.find_spec(f"{node.module}.{alias.name}") is None]
    assert missing == []



# --- names that say what a module does ----------------------------------------------------------------

# Module (and package) names that more than one place in colabkit uses: each the one subject seen from
# the layers named, which the package before it tells apart (`device.memory`: what a device has;
# `training.memory`: what a training run needs of it). A name shared for two different jobs reads as one
# thing where it is two (the old `colab.sweep` beside `sweep.colab`): rename one rather than add it here.
SHARED_NAMES: dict[str, tuple[str, str]] = {
    "__main__": ("colabkit ondevice", "`python -m` of the package"),
    **{experiment: ("experiments report", "an experiment: its declaration and its report section")
       for experiment in ("cnn_mnist", "dblstm_har", "matmul_tflops", "paradnn", "timeseries_rnn")},
    "inference": ("colabkit experiments report", "the inference mode: measured (colabkit/inference/), declared, reported"),
    "decode": ("inference report", "greedy decode with a key-value cache: measured, reported"),
    "backends": ("device report", "Keras backends: chosen and set up; TensorFlow against JAX in the report"),
    "cost": ("colabkit report", "cost: the rates and a run's cost per unit of work (cost/); the report's section on it"),
    "common": ("data report", "what the package's modules share: the datasets', the report sections'"),
    "energy": ("device training", "energy: a run's way to measure it; per steady epoch of a fit"),
    "estimate": ("sweep training", "time ahead: of a sweep's plan; of a fit from its first steps"),
    "memory": ("device training", "memory: what a device has; what a training run needs of it"),
    "multiworker": ("device runners training", "training across machines: the strategy; launching its worker "
                                               "processes; the custom loop"),
    "colab": ("colabkit runners", "Colab: the runtime seen from inside (colab/); its sessions driven from outside "
                                  "(sweep/runners/colab/)"),
    "provenance": ("records report", "where numbers came from: a record's; the report's section on it"),
    "records": ("colabkit report", "the records: the package; the report's view of them (labels, the one used)"),
    "setup": ("device training", "set-up: a device's strategy; a training run's dtype, batches and input"),
    "stages": ("colabkit gpu_check ondevice", "a run in stages: the one runner; the GPU check's stages' work; the "
                                              "prepared device run's table"),
    "command": ("sweep colab", "`sweep` once its plan is made: any plan's; a plan for Colab, cut into shares"),
    "sweep": ("colabkit colab", "a sweep: the package; the colab_sweep notebook's helpers inside a runtime"),
    "training": ("colabkit gpu_check", "training: the package; the GPU check's training rows"),
}


def test_a_name_two_modules_share_is_one_subject_written_down():
    sharing: dict[str, set[str]] = {}
    for name in MODULES:
        parent, _, last = name.rpartition(".")
        sharing.setdefault(last, set()).add(parent.rpartition(".")[2] or parent)
    shared = {last: parents for last, parents in sharing.items() if len(parents) > 1}
    assert shared["sweep"] == {"colabkit", "colab"}  # the scan sees packages and modules alike
    written = {last: set(parents.split()) for last, (parents, _) in SHARED_NAMES.items()}
    assert shared == written, "a name shared anew: rename the module, or write down in SHARED_NAMES why it is one subject"


# The modules that are command lines (each parses its own arguments in its `main`): argparse stays in them.
COMMAND_LINES = {"colabkit.cli", "colabkit.cli_arguments", "colabkit.ondevice.__main__"}


def test_argparse_stays_in_the_command_lines():
    """The command line turns its arguments into typed values once (sweep: RunOptions); nothing below it
    takes an argparse.Namespace."""
    using = {name for name, path in MODULES.items() if "argparse" in every_import_name(path)}
    assert "colabkit.cli" in using  # the scan is real
    assert using <= COMMAND_LINES, f"argparse below the command line: {sorted(using - COMMAND_LINES)}"


def every_import_name(path: Path) -> set[str]:
    """Every module name `path` imports, at any depth, colabkit's or not."""
    nodes = list(ast.walk(ast.parse(path.read_text(encoding="utf-8"))))
    return ({alias.name for node in nodes if isinstance(node, ast.Import) for alias in node.names}
            | {node.module for node in nodes if isinstance(node, ast.ImportFrom) and node.module})

# --- the measurable shape of the sweep (issue: "a house the next person can live in") -----------

SWEEP = sorted((PACKAGE / "sweep").rglob("*.py"))


def calls_to(path: Path, name: str) -> list[int]:
    """The lines of `path` that call a function named `name` (plainly or as an attribute)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Call)
            and name in (getattr(node.func, "id", None), getattr(node.func, "attr", None))]


def test_a_device_name_is_parsed_at_most_twice_in_the_sweep():
    """A combination carries its typed request (Combination.request); the sweep does not parse the string again."""
    calls = {path.name: lines for path in SWEEP if (lines := calls_to(path, "parse_device"))}
    assert calls, "the sweep parses device names somewhere: the check is looking at the wrong files"
    assert sum(len(lines) for lines in calls.values()) <= 2, calls


def error_dicts(source: str) -> list[int]:
    """The lines of `source` that build a run's error key by key: a dict literal or dict(...) with a
    `kind`, an `x["kind"] = ...` or an `x.update(kind=...)`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        keys = []
        if isinstance(node, ast.Dict):
            keys = [key.value for key in node.keys if isinstance(key, ast.Constant)]
        elif isinstance(node, ast.Call) and (getattr(node.func, "id", None) == "dict"
                                             or getattr(node.func, "attr", None) == "update"):
            keys = [keyword.arg for keyword in node.keywords]
        elif isinstance(node, ast.Assign):
            keys = [target.slice.value for target in node.targets
                    if isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant)]
        if "kind" in keys:
            found.append(node.lineno)
    return sorted(found)


def test_a_failed_runs_error_is_one_typed_value_built_where_runs_fail():
    definitions = [name for name, path in MODULES.items()
                   for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                   if isinstance(node, ast.ClassDef) and node.name == "RunError"]
    assert definitions == ["colabkit.records.run_error"]
    # The check can fail: the ways the sweep built error dicts before RunError are all found.
    sample = 'e = {"type": "X", "kind": "oom"}\ne["kind"] = "oom"\ne.update(kind="x")\ne = dict(kind=1)\n'
    assert error_dicts(sample) == [1, 2, 3, 4]
    built = {path.name: lines for path in SWEEP if (lines := error_dicts(path.read_text(encoding="utf-8")))}
    assert built == {}
    for module in ("execute", "local", "dask", "multiworker", "notebook"):
        assert calls_to(PACKAGE / "sweep" / "runners" / f"{module}.py", "RunError"), module


def test_import_colabkit_loads_no_data_table_or_plotting_library_and_every_name_resolves():
    """`import colabkit` is what every notebook's set-up cell pays: its names load when first used."""
    completed = python("-c", "import sys, colabkit; heavy = [m for m in ('pandas', 'matplotlib', 'tensorflow', "
                             "'keras', 'jax', 'yaml', 'papermill') if m in sys.modules]; print(heavy); "
                             "missing = [n for n in colabkit.__all__ if getattr(colabkit, n, None) is None]; "
                             "print(missing)", timeout=120)
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert completed.stdout.split("\n")[:2] == ["[]", "[]"], completed.stdout
