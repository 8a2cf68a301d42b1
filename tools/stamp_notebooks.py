"""Stamp every notebook (and the README and docs/colab.md) with the Colab header badge and the bootstrap cell:
`python tools/stamp_notebooks.py notebooks [--check]`; point every badge and the bootstrap at another repository
or ref: `python tools/stamp_notebooks.py badges --repo OWNER/NAME --ref REF` (docs/testing.md). Development
tooling, run in a checkout: it is not part of the installed package.

What the template owns, and what each notebook keeps:
- the first markdown cell: the notebook keeps its `# Title` line and its own paragraph; the template
  owns the Open-in-Colab badge line, placed right under the title and pointing at the notebook's
  path on the configured repository and ref (colabkit.colab);
- the bootstrap cell (id `colab-bootstrap`) right after the header, its source rendered from
  colabkit.colab.BOOTSTRAP_TEMPLATE;
- the cell tagged `parameters` of a declared experiment's notebook: one line per declared parameter, in
  the declaration's order, `name = default  # help` (`parameters_source`), so that the declaration
  (colabkit.experiments) is the one place a parameter is written;
- metadata: kernelspec python3 and language_info are the template's; Colab's accelerator hint
  (`accelerator`, `colab.gpuType`) is the notebook's own, kept as it is unless changed on purpose;
- every other cell, its id and its tags (`parameters` included) stay as they are, stored clean:
  no outputs, no execution counts, no papermill / Colab run metadata, no injected-parameters cell.

Three generated blocks live in the docs: the README's table of the notebooks with their badges
(between `<!-- experiments:start -->` and `<!-- experiments:end -->`: the declared experiments from
colabkit.experiments, then the notebooks that drive them), docs/colab.md's `colab-install`
block (between `<!-- colabkit:colab-install -->` and `<!-- /colabkit:colab-install -->`: the runtime
to choose per device and the exact commands the bootstrap issues), and docs/experiments.md's index of
where each experiment's pieces live (both tables: tools/experiment_tables.py).
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat

from colabkit.colab.coordinates import BADGE_IMAGE, COLAB_URL, Coordinates, configured
from colabkit.colab.install import (
    BOOTSTRAP_CELL_ID,
    BOOTSTRAP_MARKER,
    LIBTPU_INDEX,
    TENSORFLOW_VERSION,
    TPU_TENSORFLOW_VERSION,
    bootstrap_source,
    install_commands,
)
from colabkit.colab.runtime import RUNTIME_TYPES, runtime_type
from colabkit.errors import ColabkitError, CoordinatesError
from colabkit.experiments.declaration import Experiment, Parameter
from colabkit.experiments.registry import all_experiments, find
from colabkit.io import write_atomic
from colabkit.sweep.grids import read_grid_yaml
from experiment_tables import experiments_index, experiments_table

NOTEBOOKS_DIR = "notebooks"
README = "README.md"
COLAB_DOC = "docs/colab.md"

KERNELSPEC = {"display_name": "Python 3", "language": "python", "name": "python3"}
SWEEP_NOTEBOOK = "colab_sweep"
# colab_sweep.ipynb's form lines stamped from the grid files and the runtime types: `grid` offers each grid file's
# own presets, `runtime_asked` the runtime types (colabkit.colab.runtime.RUNTIME_TYPES, less the retired).
_SWEEP_FORM = {"grid": re.compile(r"^grid = .*$", re.M), "runtime_asked": re.compile(r"^runtime_asked = .*$", re.M)}
ACCELERATORS = ("GPU", "TPU")
_KEPT_COLAB_KEYS = ("gpuType", "toc_visible")
# Cell metadata written by a run (papermill, Colab, Jupyter's execution timing), never by an author.
_RUN_CELL_METADATA = ("papermill", "execution", "colab", "outputId", "executionInfo", "colab_type")
_RUN_NOTEBOOK_METADATA = ("papermill", "widgets")

# Any Open-in-Colab badge: Markdown, or HTML <a><img></a>.
_BADGE_MARKDOWN = re.compile(r"\[!\[[^\]]*\]\(" + re.escape(BADGE_IMAGE) + r"\)\]\([^)\s]*\)")
_BADGE_HTML = re.compile(r"<a\s[^>]*href=\"" + re.escape(COLAB_URL) + r"/[^\"]*\"[^>]*>\s*<img\s[^>]*"
                         + re.escape(BADGE_IMAGE) + r"[^>]*>\s*</a>", flags=re.IGNORECASE)
COORDINATES = "colabkit/colab/coordinates.py"  # the one place of the repository coordinates, in a checkout


class NotebookTemplateError(ColabkitError):
    """A notebook cannot be stamped with the Colab header and bootstrap (e.g. it has no title cell)."""


@dataclass(frozen=True)
class AcceleratorHint:
    """Colab's hint for which runtime a notebook opens with: accelerator GPU/TPU and gpuType, or none."""

    accelerator: str | None = None
    runtime_type: str | None = None

    @classmethod
    def parse(cls, text: str) -> AcceleratorHint:
        """'cpu' or 'none' (no hint), 'GPU', 'GPU:T4', 'TPU:V5E1'... (colabkit.colab.runtime.RUNTIME_TYPES)."""
        kind, _, type_name = text.strip().partition(":")
        if kind.lower() in ("cpu", "none", ""):
            if type_name:
                raise NotebookTemplateError(f"accelerator {text!r}: a CPU runtime takes no type")
            return cls()
        kind = kind.upper()
        if kind not in ACCELERATORS:
            raise NotebookTemplateError(f"accelerator {text!r}: expected cpu, GPU[:TYPE] or TPU[:TYPE]")
        runtime = runtime_type(type_name) if type_name else None
        if type_name and (runtime is None or runtime.retired or runtime.kind.upper() != kind):
            choices = ", ".join(f"{kind}:{known.metadata}" for known in RUNTIME_TYPES
                                if known.kind.upper() == kind and not known.retired)
            raise NotebookTemplateError(f"accelerator {text!r}: unknown {kind} runtime type (known: {choices})")
        return cls(kind, runtime.metadata if runtime else None)

    @classmethod
    def of(cls, metadata: dict[str, Any]) -> AcceleratorHint:
        """The hint a notebook's metadata carries (as Colab saves it)."""
        accelerator = metadata.get("accelerator")
        runtime_type = (metadata.get("colab") or {}).get("gpuType")
        return cls(accelerator if accelerator in ACCELERATORS else None, runtime_type if accelerator else None)

    def label(self) -> str:
        """What to pick in Colab's Runtime > Change runtime type dialog."""
        if self.accelerator is None:
            return "CPU"
        if self.runtime_type:
            runtime = runtime_type(self.runtime_type)
            return runtime.label if runtime else f"{self.runtime_type} {self.accelerator}"
        return f"any {self.accelerator}"


@dataclass
class NotebookInfo:
    """What the README's table says about one notebook."""

    name: str
    path: str
    title: str
    hint: AcceleratorHint


@dataclass
class StampResult:
    """What `stamp_repository` found or changed (paths relative to the repository root)."""

    changed: list[str] = field(default_factory=list)
    notebooks: list[NotebookInfo] = field(default_factory=list)


def discover(root: str | Path = ".") -> list[Path]:
    """Every notebook under ROOT/notebooks/ (not hidden files, not checkpoints), sorted by name."""
    folder = Path(root) / NOTEBOOKS_DIR
    return sorted(path for path in folder.glob("*.ipynb") if not path.name.startswith("."))


# --- one notebook ------------------------------------------------------------------------------

def _text(source: Any) -> str:
    return "".join(source) if isinstance(source, list) else str(source)


def _is_link_only(cell: Any) -> bool:
    """Colab's "include a link to Colab" cell: markdown holding nothing but an Open-in-Colab badge."""
    if cell.cell_type != "markdown":
        return False
    rest = _BADGE_HTML.sub("", _BADGE_MARKDOWN.sub("", _text(cell.source)))
    return rest.strip() == "" and rest != _text(cell.source)


def _is_bootstrap(cell: Any) -> bool:
    return cell.cell_type == "code" and (
        cell.get("id") == BOOTSTRAP_CELL_ID or _text(cell.source).startswith(BOOTSTRAP_MARKER))


def header_title(cell: Any, where: str) -> str:
    """The title of a header cell ('# Title' on its first non-empty line); NotebookTemplateError if none."""
    lines = [line for line in _text(cell.source).splitlines() if line.strip()]
    if cell.cell_type != "markdown" or not lines or not re.match(r"# \S", lines[0]):
        raise NotebookTemplateError(
            f"{where}: the first cell must be a markdown cell whose first line is '# <title>' "
            "(the notebook's own title and paragraph; the stamp adds the Colab badge under the title)")
    return lines[0][2:].strip()


def stamp_header(source: str, badge: str) -> str:
    """The header text with every Open-in-Colab badge removed and `badge` placed under the title.

    The notebook's own lines are kept as they are; only lines that held nothing but a badge go
    (with the blank line they leave behind).
    """
    kept: list[str] = []
    dropped_line = False
    for line in source.splitlines():
        cleaned = _BADGE_HTML.sub("", _BADGE_MARKDOWN.sub("", line))
        if cleaned != line and not cleaned.strip():
            dropped_line = True
            continue
        if dropped_line and not line.strip() and kept and not kept[-1].strip():
            continue  # the blank line that followed the dropped badge
        dropped_line = False
        kept.append(line if cleaned == line else cleaned.rstrip())
    while kept and not kept[0].strip():
        kept.pop(0)
    title, body = kept[0], "\n".join(kept[1:]).strip("\n")
    return f"{title}\n\n{badge}" + (f"\n\n{body}" if body else "")


def _clean_cell(cell: Any) -> None:
    for key in _RUN_CELL_METADATA:
        cell.metadata.pop(key, None)
    if cell.cell_type == "code":
        cell.outputs = []
        cell.execution_count = None


def _unique_id(wanted: str, taken: set[str]) -> str:
    candidate, suffix = wanted, 1
    while candidate in taken:
        suffix += 1
        candidate = f"{wanted}-{suffix}"
    taken.add(candidate)
    return candidate


def _literal(value: Any) -> str:
    """A default as Python source: strings in double quotes, as the notebooks write them."""
    return json.dumps(value) if isinstance(value, str) else repr(value)


def parameter_line(parameter: Parameter) -> str:
    """One line of a parameters cell: `name = default  # help`, with an annotation where the parameter takes
    several types (papermill then reports both); what 0 means, and the choices, where the help does not say."""
    types = [*parameter.types, *([str] if parameter.auto is not None and str not in parameter.types else [])]
    names = ", ".join(kind.__name__ for kind in types)
    annotation = f': "Union[{names}]"' if len(types) > 1 else ""
    comment = parameter.help
    if parameter.zero_means and "0:" not in comment:
        comment += f"; 0: {parameter.zero_means}"
    if parameter.choices and not all(str(choice) in comment for choice in parameter.choices):
        comment += "; one of " + ", ".join(_literal(choice) for choice in parameter.choices)
    return f"{parameter.name}{annotation} = {_literal(parameter.default)}  # {comment}"


def parameters_source(experiment: Experiment) -> str:
    """The parameters cell `python tools/stamp_notebooks.py notebooks` stamps from an experiment's declaration."""
    return "\n".join(parameter_line(parameter) for parameter in experiment.parameters)


def sweep_form(root: Path) -> dict[str, str]:
    """colab_sweep.ipynb's form lines: every grid file's presets as `NAME: PRESET` choices (smoke first), and the
    runtime types a user may say they picked."""
    # the presets' names alone, read as the sweep reads grid files but without checking their notebooks: a notebook
    # being stamped may not have its parameters cell yet
    choices = [f"{path.stem}: {preset}" for path in sorted((root / "parameters").glob("*.yaml"))
               for preset in sorted((read_grid_yaml(path) or {}).get("presets") or {},
                                    key=lambda name: (name != "smoke", str(name)))]
    if not choices:
        raise NotebookTemplateError(f"no grid file with presets under {root / 'parameters'}: the sweep form needs them")
    default = next((choice for choice in choices if choice.startswith("cnn_mnist: smoke")), choices[0])
    asked = ["", *(runtime.dialog for runtime in RUNTIME_TYPES if not runtime.retired)]
    return {"grid": f"grid = {json.dumps(default)}  # @param {json.dumps(choices)} - a grid file "
                    "(parameters/NAME.yaml) and one of its presets",
            "runtime_asked": f'runtime_asked = ""  # @param {json.dumps(asked)} - what you picked in Runtime > Change '
                             "runtime type: records compare it with what ran"}


def stamp_notebook(notebook: Any, path: str, coordinates: Coordinates | None = None,
                   hint: AcceleratorHint | None = None, form: dict[str, str] | None = None) -> Any:
    """A stamped copy of `notebook` (an nbformat v4 node) whose repository path is `path`.

    `hint` replaces the notebook's Colab accelerator hint; None keeps the one it has.
    Raises NotebookTemplateError if the notebook has no title cell.
    """
    coordinates = coordinates or configured()
    stamped = copy.deepcopy(notebook)
    cells = [cell for cell in stamped.cells
             if not _is_bootstrap(cell) and not _is_link_only(cell)
             and "injected-parameters" not in cell.get("metadata", {}).get("tags", [])]
    if not cells:
        raise NotebookTemplateError(f"{path}: the notebook has no cells; it needs at least a '# <title>' markdown cell")
    header_title(cells[0], path)
    experiment = find(Path(path).stem)
    for cell in cells:
        if experiment is not None and "parameters" in cell.get("metadata", {}).get("tags", []):
            cell.source = parameters_source(experiment)
        elif form and "parameters" in cell.get("metadata", {}).get("tags", []):
            for name, line in form.items():
                if not _SWEEP_FORM[name].search(_text(cell.source)):
                    raise NotebookTemplateError(f"{path}: its parameters cell has no `{name} = ...` line to stamp")
                cell.source = _SWEEP_FORM[name].sub(lambda _: line, _text(cell.source))
    cells[0].source = stamp_header(_text(cells[0].source), coordinates.badge(path))
    bootstrap = nbformat.v4.new_code_cell(bootstrap_source(coordinates))  # the template owns all of it
    cells.insert(1, bootstrap)

    # nbformat 4.5 gives every cell an id; cells without one get a stable id from their position.
    stamped.nbformat, stamped.nbformat_minor = 4, max(int(stamped.get("nbformat_minor", 5)), 5)
    taken = {BOOTSTRAP_CELL_ID}
    for index, cell in enumerate(cells):
        if cell is bootstrap:
            cell.id = BOOTSTRAP_CELL_ID
        else:
            cell.id = _unique_id(cell.get("id") or f"cell-{index}", taken)
        _clean_cell(cell)
    stamped.cells = cells

    metadata = stamped.metadata
    for key in _RUN_NOTEBOOK_METADATA:
        metadata.pop(key, None)
    metadata["kernelspec"] = dict(KERNELSPEC)
    metadata["language_info"] = {"name": "python"}
    hint = hint if hint is not None else AcceleratorHint.of(metadata)
    colab = {key: value for key, value in (metadata.get("colab") or {}).items() if key in _KEPT_COLAB_KEYS}
    colab.pop("gpuType", None)
    metadata.pop("accelerator", None)
    if hint.accelerator:
        metadata["accelerator"] = hint.accelerator
        if hint.runtime_type:
            colab["gpuType"] = hint.runtime_type
    if colab or hint.accelerator:
        metadata["colab"] = {"provenance": [], **colab}
    else:
        metadata.pop("colab", None)
    return stamped


def notebook_text(notebook: Any) -> str:
    """A notebook as stored in the repository: nbformat's JSON layout and a final newline."""
    return nbformat.writes(notebook) + "\n"


# --- the README and docs/colab.md --------------------------------------------------------------

@dataclass(frozen=True)
class GeneratedBlock:
    """A block of a Markdown file that the stamp rewrites, between a start and an end marker line."""

    name: str
    file: str
    start: str
    end: str

    def pattern(self) -> re.Pattern[str]:
        return re.compile(rf"({re.escape(self.start)}[^\n]*\n)(.*?)({re.escape(self.end)})", flags=re.DOTALL)


NOTEBOOKS_BLOCK = GeneratedBlock("notebooks", README, "<!-- experiments:start", "<!-- experiments:end -->")
INSTALL_BLOCK = GeneratedBlock("colab-install", COLAB_DOC, "<!-- colabkit:colab-install", "<!-- /colabkit:colab-install -->")
INDEX_BLOCK = GeneratedBlock("experiments-index", "docs/experiments.md", "<!-- experiments-index:start",
                             "<!-- experiments-index:end -->")


def notebooks_table(notebooks: list[NotebookInfo], coordinates: Coordinates) -> str:
    """The README's table of notebooks: name, title, badge, runtime it opens with."""
    rows = ["| notebook | what it is | open | Colab runtime it asks for |", "|---|---|---|---|"]
    for info in notebooks:
        rows.append(f"| [`{info.name}`]({info.path}) | {info.title.replace('|', '/')} | "
                    f"{coordinates.badge(info.path)} | {info.hint.label()} |")
    return "\n".join(rows) + "\n"


def install_section(coordinates: Coordinates) -> str:
    """docs/colab.md's runtime table and the exact commands the bootstrap issues on each runtime."""
    commands = install_commands(coordinates)  # CPU and GPU runtimes get the same commands
    colabkit_line = commands["cpu"][0]
    return "\n".join([
        "| device | pick in Runtime > Change runtime type | backend (`backend = \"auto\"`) | the set-up installs, "
        "only what is missing |",
        "|---|---|---|---|",
        f"| CPU | CPU (older menus: None) | TensorFlow | colabkit; `tensorflow=={TENSORFLOW_VERSION}` if the image "
        "has no TensorFlow |",
        f"| GPU | T4 GPU (free tier), L4, A100, H100 or G4 GPU | TensorFlow | colabkit; `tensorflow=={TENSORFLOW_VERSION}` "
        "if the image has no TensorFlow |",
        "| TPU | v5e-1 TPU or v6e-1 TPU (TPU VM runtimes; v2-8 retired) | JAX | colabkit only: the image has `jax[tpu]` |",
        f"| TPU, `backend = \"tensorflow\"` | as above | TensorFlow | colabkit; then, when the run starts, "
        f"`tensorflow=={TPU_TENSORFLOW_VERSION}` and `tensorflow-tpu=={TPU_TENSORFLOW_VERSION}`, with a warning |",
        "",
        "The exact commands (`python` is the notebook's own interpreter, `sys.executable`):",
        "",
        "```bash",
        "# every runtime, when colabkit is not installed (the cell itself does this)",
        colabkit_line,
        "# CPU and GPU runtimes, when the image has no TensorFlow (Colab's CPU/GPU images ship one)",
        *commands["cpu"][1:],
        "# TPU runtimes: nothing more for JAX. Only a run that asks for TensorFlow on a TPU, when",
        "# tensorflow-tpu is not installed: tensorflow first, then the TPU build over it",
        *commands["tpu-tensorflow"][1:],
        "```",
        "",
        f"tensorflow-tpu's newest release is {TPU_TENSORFLOW_VERSION}, so TensorFlow TPU runs use TensorFlow "
        f"{TPU_TENSORFLOW_VERSION}",
        f"while CPU and GPU runs use the tested {TENSORFLOW_VERSION}; every record's `software` section "
        "says which ran.",
        f"The `-f` index ({LIBTPU_INDEX}) is where Google publishes the libtpu builds for TensorFlow.",
        "",
    ])


def readme_table(notebooks: list[NotebookInfo], coordinates: Coordinates) -> str:
    """The README's notebooks block: the table of declared experiments (colabkit.experiments, with
    the Colab runtime each notebook asks for), then the other notebooks (report, sweep drivers)."""
    experiments = {experiment.name for experiment in all_experiments()}
    runtimes = {info.name: info.hint.label() for info in notebooks}
    others = [info for info in notebooks if info.name not in experiments]
    text = experiments_table(coordinates=coordinates, runtimes=runtimes)
    if others:
        text += "\nThe notebooks that sweep and report them:\n\n" + notebooks_table(others, coordinates)
    return text


def stamp_block(text: str, block: GeneratedBlock, body: str) -> str:
    """`text` with `block`'s content replaced by `body`; NotebookTemplateError if its markers are missing."""
    pattern = block.pattern()
    if not pattern.search(text):
        raise NotebookTemplateError(
            f"{block.file}: no generated block '{block.name}': add the lines `{block.start} -->` and "
            f"`{block.end}` where it belongs")
    return pattern.sub(lambda match: match.group(1) + body + match.group(3), text, count=1)


# --- the repository ------------------------------------------------------------------------------

def stamp_repository(root: str | Path = ".", coordinates: Coordinates | None = None, check: bool = False,
                     hints: dict[str, AcceleratorHint] | None = None) -> StampResult:
    """Stamp every notebook under ROOT/notebooks/, the README's notebooks table, docs/colab.md's install block and
    docs/experiments.md's index.

    With `check`, nothing is written: `changed` lists the files that differ from the template
    (drifted). `hints` maps a notebook name to a new Colab accelerator hint. Every notebook is
    stamped in memory before anything is written, so one bad notebook changes nothing.
    """
    root, coordinates, hints = Path(root), coordinates or configured(), dict(hints or {})
    paths = discover(root)
    if not paths:
        raise NotebookTemplateError(f"no notebooks under {root / NOTEBOOKS_DIR}")
    unknown = sorted(set(hints) - {path.stem for path in paths})
    if unknown:
        raise NotebookTemplateError(f"no notebook named {', '.join(unknown)} under {root / NOTEBOOKS_DIR}")
    result, writes = StampResult(), []
    for path in paths:
        relative = path.relative_to(root).as_posix()
        original = path.read_text(encoding="utf-8")
        try:
            notebook = nbformat.reads(original, as_version=4)
        except Exception as exc:  # noqa: BLE001 - nbformat raises several unrelated types for bad JSON
            raise NotebookTemplateError(f"{relative}: not a readable notebook ({exc})") from exc
        form = sweep_form(root) if path.stem == SWEEP_NOTEBOOK else None
        stamped = stamp_notebook(notebook, relative, coordinates, hints.get(path.stem), form)
        result.notebooks.append(NotebookInfo(path.stem, relative, header_title(stamped.cells[0], relative),
                                             AcceleratorHint.of(stamped.metadata)))
        text = notebook_text(stamped)
        if text != original:
            result.changed.append(relative)
            writes.append((path, text))
    for block, body in ((NOTEBOOKS_BLOCK, readme_table(result.notebooks, coordinates)),
                        (INSTALL_BLOCK, install_section(coordinates)), (INDEX_BLOCK, experiments_index(root))):
        path = root / block.file
        if not path.exists():
            raise NotebookTemplateError(f"{path}: missing; the generated block '{block.name}' lives there")
        original = path.read_text(encoding="utf-8")
        text = stamp_block(original, block, body)
        if text != original:
            result.changed.append(block.file)
            writes.append((path, text))
    if not check:
        for path, text in writes:
            write_atomic(path, text)
    return result


# --- the coordinates in a checkout ---------------------------------------------------------------------

def _assignment(variable: str) -> re.Pattern[str]:
    return re.compile(rf'^{variable} = "([^"\n]*)"$', flags=re.MULTILINE)


def read_coordinates(module_path: str | Path) -> Coordinates:
    """The coordinates written in `module_path` (colabkit/colab/coordinates.py in a checkout, which may differ from the
    imported copy); CoordinatesError if the REPOSITORY and REF lines are not there exactly once."""
    path = Path(module_path)
    text = path.read_text(encoding="utf-8")
    values = []
    for variable in ("REPOSITORY", "REF"):
        found = _assignment(variable).findall(text)
        if len(found) != 1:
            raise CoordinatesError(f'{path}: expected exactly one line `{variable} = "..."`')
        values.append(found[0])
    return Coordinates(*values)


def write_coordinates(module_path: str | Path, coordinates: Coordinates) -> bool:
    """Rewrite the REPOSITORY and REF assignments in `module_path`; whether the file changed. CoordinatesError if
    either assignment is not there exactly once (the file was edited into a shape this function does not read)."""
    path = Path(module_path)
    read_coordinates(path)  # both lines are there, once each
    text = original = path.read_text(encoding="utf-8")
    for variable, value in (("REPOSITORY", coordinates.repository), ("REF", coordinates.ref)):
        text = _assignment(variable).sub(f'{variable} = "{value}"', text)
    if text == original:
        return False
    write_atomic(path, text)
    return True


# --- the command line ----------------------------------------------------------------------------------

def _stamp(root: str, coordinates: Coordinates, check: bool, hints: dict[str, AcceleratorHint] | None = None) -> int:
    """Stamp (or with `check`, compare) the notebooks and README; print what changed or drifted."""
    result = stamp_repository(root, coordinates, check=check, hints=hints)
    where = f"{coordinates.repository}@{coordinates.ref}"
    if check:
        if result.changed:
            print(f"drifted from the template ({where}); run `python tools/stamp_notebooks.py notebooks` to restamp:")
            print("\n".join(f"  {path}" for path in result.changed))
            return 1
        print(f"{len(result.notebooks)} notebook(s) and the README match the template ({where})")
        return 0
    for path in result.changed:
        print(f"stamped {path}")
    print(f"{len(result.notebooks)} notebook(s), {len(result.changed)} file(s) changed ({where})")
    return 0


def main(argv: list[str] | None = None) -> int:
    """`notebooks [--check] [--accelerator NAME=SPEC]` and `badges --repo OWNER/NAME --ref REF`; 2 on a user error."""
    parser = argparse.ArgumentParser(prog="python tools/stamp_notebooks.py", description=__doc__.splitlines()[0])
    verbs = parser.add_subparsers(dest="verb", required=True)
    notebooks = verbs.add_parser("notebooks", help="stamp every notebook and the README with the badge and bootstrap")
    notebooks.add_argument("--check", action="store_true", help="change nothing; exit 1 listing files that drifted")
    notebooks.add_argument("--accelerator", action="append", metavar="NAME=SPEC",
                           help="set a notebook's Colab runtime hint: cpu, GPU, GPU:T4|L4|A100, TPU:V28|V5E1")
    badges = verbs.add_parser("badges", help="point every badge and the bootstrap at another repository or ref")
    badges.add_argument("--repo", required=True, help="GitHub OWNER/NAME")
    badges.add_argument("--ref", required=True, help="release tag (v0.1.0) or commit; a branch works but is not pinned")
    for verb in (notebooks, badges):
        verb.add_argument("--root", default=".", help="repository root (default: .)")
    args = parser.parse_args(argv)
    module = Path(args.root) / COORDINATES
    try:
        if not module.is_file():
            raise ColabkitError(f"{module} not found: run this from the repository root (or give --root)")
        if args.verb == "notebooks":
            hints = {}
            for item in args.accelerator or []:
                name, sep, spec = item.partition("=")
                if not sep:
                    raise ColabkitError(f"--accelerator {item!r}: expected NAME=SPEC, e.g. matmul_tflops=GPU:T4")
                hints[name] = AcceleratorHint.parse(spec)
            # The coordinates of the checkout being stamped, which need not be the colabkit imported here.
            return _stamp(args.root, read_coordinates(module), args.check, hints)
        coordinates = Coordinates(args.repo, args.ref)
        if not coordinates.pinned:
            print(f"warning: ref {args.ref!r} is not a release tag (v0.1.0) or a commit id: if it is a branch, the "
                  "bootstrap installs whatever it holds on the day, not the code the records were made with",
                  file=sys.stderr)
        if write_coordinates(module, coordinates):
            print(f"coordinates set in {module}: {coordinates.repository}@{coordinates.ref}")
        return _stamp(args.root, coordinates, check=False)
    except ColabkitError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
