"""The `python -m colabkit` command line. Each verb is a thin wrapper over a module's function.

Every user error (a bad argument, grid, output folder, a folder locked by another sweep) is one
line on stderr and exit status 2, decided before any device is detected or anything runs; a
traceback means a bug in colabkit. Exit statuses are listed in EXIT_CODES (and `--help`).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path
from typing import Any, NoReturn

from colabkit.cli_arguments import percentage, positive_int, positive_seconds, seconds, timeout_seconds, tolerance
from colabkit.errors import ColabkitError

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
EXIT_CODES = """exit status:
  0    done: every combination ran ok, was kept, or was skipped because its device or backend
       is not here (sweep); a report built from every record found (report); every record ok or
       skipped, nothing unfinished or unreadable (status); no row failed, or no GPU to check
       (gpu-check)
  1    done, but something needs a look: a combination failed, was set aside, or was refused as
       too large for its device's memory, or a Colab runtime may still be running (sweep); some
       files were set aside, with why
       (report); a failed, unfinished or unreadable record,
       or no record at all (status); a row FAILED (gpu-check);
       a resolved regression beyond --fail-above (compare)
  2    nothing was done: a bad argument, grid, parameter or output folder, a folder another
       sweep is writing to, a missing folder or report notebook (one line on stderr)
  130  interrupted by Ctrl-C or SIGTERM: finished combinations are kept; unfinished ones are
       shown by `status` and run again by the same command
see docs/cli.md"""


def _given(kind: type, args: argparse.Namespace, **values: Any) -> Any:
    """`kind` (a dataclass of options) from the arguments named as its fields, and `values`."""
    return kind(**{**{field.name: getattr(args, field.name) for field in dataclasses.fields(kind)
                      if hasattr(args, field.name)}, **values})


def _sweep(args: argparse.Namespace) -> int:
    from colabkit.sweep.command import sweep_command
    from colabkit.sweep.options import PlanRequest, Repetition, RunOptions
    from colabkit.sweep.plan import plan_requested, read_plan
    from colabkit.sweep.runners.colab.client import accelerators

    # The arguments become typed values here, once, in two parts (what runs; how, and when to stop repeating),
    # checked together for the dry run and the real run alike; nothing below the command line sees `args`.
    request = _given(PlanRequest, args, grids=tuple(args.grids), overrides=tuple(args.overrides or ()))
    options = _given(RunOptions, args, colab=tuple(accelerators(args.colab)) if args.colab is not None else (),
                     repetition=Repetition.asked(args.target_ci, args.max_repeats))
    out = Path(args.out) if args.out else None
    if args.save_plan and (args.plan or not args.dry_run):
        raise ColabkitError("--save-plan FILE goes with grid files and --dry-run: it writes the plan the dry run "
                            "shows, for `sweep --plan FILE` to run (plan here, run there)")
    if args.plan:
        if request != PlanRequest() or options != RunOptions():
            raise ColabkitError(f"--plan {args.plan} holds what runs and how: give it alone (with --out, --dry-run, "
                                "--progress), without grid files, --preset, --device, -p or run options")
        runs = read_plan(args.plan, out)
    elif not request.grids:
        raise ColabkitError("give the grid files to sweep (e.g. parameters/matmul_tflops.yaml), or --plan FILE")
    else:
        runs = plan_requested(request, options, out)
    return sweep_command(runs, args.dry_run, args.progress, Path(args.save_plan) if args.save_plan else None)


def _status(args: argparse.Namespace) -> int:
    from colabkit.sweep.console import format_status
    from colabkit.sweep.folder import collect_status

    folder = Path(args.out)
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "does not exist"
        raise ColabkitError(f"output folder {folder} {what}: give the --out folder of a sweep")
    status = collect_status(folder)
    print(format_status(status))
    attention = (status.total("failed") + status.total("unfinished") + len(status.unreadable)
                 or not status.groups)
    return EXIT_FAILED if attention else EXIT_OK


def _report(args: argparse.Namespace) -> int:
    from colabkit.errors import NoRecordsError
    from colabkit.report import build_report

    # build_report checks the folders and that some record is readable (one file read), then reads
    # every record once and builds the report in this process; `records` says what it read.
    dirs = args.results_dirs or ["outputs"]
    try:
        outputs = build_report(dirs, args.out, exclude_busy=args.exclude_busy, rates_file=args.rates)
    except NoRecordsError as empty:
        _print_records_read(dirs, {"records": 0, "statuses": {}, "rejected": empty.rejected})
        raise
    _print_records_read(dirs, outputs.records)
    files = outputs.files()
    print(f"report: {outputs.html}")
    print(f"        {outputs.html_with_code} (with code)")
    print(f"{len(files)} files under {outputs.folder}: "
          f"{sum(p.parent == outputs.figures for p in files)} in figures/, "
          f"{sum(p.parent == outputs.tables for p in files)} in tables/, records.csv, report.ipynb")
    return EXIT_FAILED if outputs.records["rejected"] else EXIT_OK


def _print_records_read(dirs: list[str], summary: dict[str, Any]) -> None:
    """How many records the report found per status (stdout), and each file set aside (stderr)."""
    statuses = summary["statuses"]
    counts = ", ".join(f"{statuses.get(status, 0)} {status}" for status in ("ok", "failed", "skipped"))
    print(f"found {summary['records']} record(s) below {', '.join(dirs)}: {counts}")
    for path, why in summary["rejected"]:  # read below the folders as the user named them
        print(f"rejected {path}: {why}", file=sys.stderr)
    if summary["rejected"]:
        print(f"{len(summary['rejected'])} file(s) set aside (not readable records, not measurements, or runs their "
              "experiment no longer offers) and left out of the report (they are listed in it too)", file=sys.stderr)


def _compare(args: argparse.Namespace) -> int:
    from colabkit.compare import run_compare

    by = [name.strip() for item in args.by or [] for name in item.split(",") if name.strip()]
    from colabkit.statistics import TOLERANCE

    return run_compare(args.baseline, args.candidate, by, markdown=args.markdown, csv_path=args.csv,
                       fail_above=args.fail_above, tolerance=TOLERANCE if args.tolerance is None else args.tolerance,
                       exclude_busy=args.exclude_busy, rates_file=args.rates)


def _workers(args: argparse.Namespace) -> int:
    from colabkit.records.record import running_path
    from colabkit.sweep.runners.multiworker import run_multiworker_notebook
    from colabkit.sweep.grids import parse_overrides

    notebook = Path(args.notebook)
    if not notebook.is_file():
        print(f"error: notebook not found: {notebook}", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else Path("outputs") / "workers" / notebook.stem / f"multiworker-{args.count}"
    out.mkdir(parents=True, exist_ok=True)
    record = out / f"{notebook.stem}.json"
    # The chief writes under the sweep's temporary name; the record gets its final name only once
    # every worker has finished, so a run that lost a worker never leaves a record behind.
    pending = running_path(out / notebook.stem, ".json").resolve()
    pending.unlink(missing_ok=True)
    parameters = {**parse_overrides(args.param), "results_path": str(pending)}
    run = run_multiworker_notebook(notebook, args.count, parameters, out / f"{notebook.stem}.ipynb", out / ".workers",
                                   cwd=Path.cwd(), timeout_s=args.timeout, grace_s=args.grace)
    if run.error is not None:
        pending.unlink(missing_ok=True)
        print(f"error: {run.error.message}; no record written", file=sys.stderr)
        return 1
    for outcome in run.outcomes:
        print(outcome.describe())
    if pending.exists():
        os.replace(pending, record)
        print(f"record: {record}")
    else:
        print("record: none (the notebook wrote no record)")
    print(f"chief's notebook: {out / f'{notebook.stem}.ipynb'}")
    return 0


def _export_html(args: argparse.Namespace) -> int:
    from colabkit.sweep.runners.notebook import export_html_below

    folder = Path(args.out)
    if not folder.is_dir():
        raise ColabkitError(f"output folder {folder} {'is not a folder' if folder.exists() else 'does not exist'}: "
                            "give the --out folder of a sweep")
    written, failed = export_html_below(folder, force=args.force)
    for notebook, why in failed:
        print(f"could not export {notebook}: {why}", file=sys.stderr)
    print(f"{len(written)} HTML file(s) written below {folder}" + (f", {len(failed)} failed" if failed else ""))
    return EXIT_FAILED if failed else EXIT_OK


def _gpu_check(args: argparse.Namespace) -> int:
    from colabkit.gpu_check import run_check

    return run_check(args.out, fast=args.fast, rounds=args.rounds, on_cpu=args.rehearse_on_cpu)


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage error as one line on stderr (exit 2) rather than the usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"error: {self.prog}: {message} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m colabkit", description=__doc__.split("\n\n")[0], epilog=EXIT_CODES,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = parser.add_subparsers(dest="verb", required=True)
    sweep = verbs.add_parser("sweep", help="run notebooks once per grid combination through papermill",
                             epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    sweep.add_argument("grids", nargs="*", help="grid files, e.g. parameters/matmul_tflops.yaml")
    sweep.add_argument("--plan", metavar="FILE",
                       help="run the runs a plan holds (JSON, as a sweep planned them: what a Colab session and the "
                            "device run's stages are given), planned nowhere else; instead of grid files")
    sweep.add_argument("--save-plan", metavar="FILE",
                       help="with --dry-run: also write the plan it shows as JSON, which `sweep --plan FILE` runs "
                            "(plan here, run there)")
    sweep.add_argument("--preset", help="a preset named in the grid files, e.g. smoke or paper")
    sweep.add_argument("--device", help="run only this device's combinations (cpu, gpu, tpu, cpu:2, ...)")
    sweep.add_argument("--out", help="output folder (default: outputs/<preset>)")
    sweep.add_argument("-p", "--param", dest="overrides", action="append", metavar="KEY=VALUE",
                       help="set a parameter for every combination (typed like papermill's -p); repeatable")
    sweep.add_argument("--force", action="store_true", help="rerun combinations that finished earlier")
    sweep.add_argument("--rerun", dest="rerun_unreadable", action="store_true",
                       help="also rerun combinations whose record file cannot be read (bad encoding or JSON, a "
                            "newer schema), replacing that file; without it such files are kept and set aside")
    sweep.add_argument("--dry-run", action="store_true",
                       help="list the combinations and what would run, be kept or skipped; run nothing")
    sweep.add_argument("--timeout", dest="timeout_s", type=timeout_seconds, metavar="SECONDS",
                       help="fail a run whose cells take longer than this (> 0; default and 'none': no limit)")
    sweep.add_argument("--jobs", type=positive_int, default=1, metavar="N",
                       help="run N combinations at once, each in its own kernel (default 1; distorts timings)")
    sweep.add_argument("--html", choices=("all", "failed", "none"),
                       help="which runs get an HTML export of their executed notebook (default: what the grid file "
                            "or preset says, else all; `export-html OUT` exports the rest later)")
    sweep.add_argument("--no-html", dest="html", action="store_const", const="none", help="the same as --html none")
    sweep.add_argument("--kernel", dest="kernel_name",
                       help="Jupyter kernel to run the notebooks in (default: the notebook's own)")
    sweep.add_argument("--kernels", choices=("fresh", "reuse"),
                       help="fresh: a new kernel per combination; reuse: warm kernels, cleared between runs and "
                            "replaced after any failure (default: what the grid file or preset says, else fresh; "
                            "docs/sweep.md)")
    sweep.add_argument("--kernel-runs", dest="max_kernel_runs", type=positive_int, default=100, metavar="N",
                       help="with reuse: runs per kernel before a fresh one (default 100)")
    sweep.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                       help="show a progress bar (default: when the terminal is interactive, or in Colab)")
    sweep.add_argument("--cluster", metavar="ADDRESS",
                       help="run the combinations on a Dask cluster: a scheduler's address (tcp://host:8786) or "
                            "local:N for N worker processes here; needs colabkit[cluster] (see docs/cluster.md)")
    sweep.add_argument("--shared-out", action=argparse.BooleanOptionalAction, default=None,
                       help="with --cluster: every worker sees --out at the same path and writes there "
                            "(--no-shared-out: results always come back to this machine; default: each task "
                            "writes there when it sees the folder)")
    sweep.add_argument("--colab", metavar="ACCELERATORS",
                       help="run each accelerator's combinations in a Colab session of its own, side by side, "
                            "through the Colab CLI (T4,L4,A100,H100,G4,v5e1,v6e1; docs/colab.md); results in OUT/colab-X")
    sweep.add_argument("--colab-timeout", dest="colab_timeout_s", type=positive_seconds, metavar="SECONDS",
                       help="with --colab: the most time each accelerator's sessions may take in all; then the "
                            "session is stopped and the combinations not finished fail")
    sweep.add_argument("--colab-session-limit", dest="colab_session_limit_s", type=positive_seconds, metavar="SECONDS",
                       help="with --colab: the longest one session runs (default 3000); its work is cut to fit, and "
                            "a fresh session continues the rest (the Colab CLI loses a session after 3600 s)")
    sweep.add_argument("--repeats", type=positive_int, metavar="R",
                       help="run each combination R times, each in its own kernel, in interleaved rounds (default: "
                            "the grid's `repeats:`, else 1); see docs/statistics.md")
    sweep.add_argument("--target-ci", type=percentage, metavar="PCT",
                       help="add rounds until each headline's interval is within +/- PCT of its median (3%%)")
    sweep.add_argument("--max-repeats", type=positive_int, metavar="N",
                       help="with --target-ci: at most N runs of a combination (default 10)")
    sweep.add_argument("--wait-quiet", dest="wait_quiet_s", type=seconds, metavar="SECONDS",
                       help="before each run, wait up to SECONDS for a quiet host (no other process busy); each "
                            "record says how long it waited and whether the host was quiet")
    sweep.set_defaults(handler=_sweep)
    report = verbs.add_parser("report", help="turn records into report.html, figures/ and tables/, and "
                                             "report.ipynb to re-run them",
                              epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    report.add_argument("results_dirs", nargs="*", metavar="RESULTS_DIR",
                        help="folders of records; several merge (default: outputs)")
    report.add_argument("--out", default="outputs/report", help="output folder (default: outputs/report)")
    report.add_argument("--exclude-busy", action="store_true",
                        help="leave runs made on a busy host (host_quiet false) out of the figures and intervals; "
                             "they are still listed")
    report.add_argument("--rates", metavar="FILE", help="hourly rates of runtimes (YAML or JSON, docs/cost.md) over "
                                                        "the ones colabkit ships, to price each unit of work")
    report.set_defaults(handler=_report)
    compare = verbs.add_parser("compare", help="two results folders side by side: per combination, the headline's "
                                               "ratio with its interval (and the level it reaches) and a verdict (docs/statistics.md)",
                               epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    compare.add_argument("baseline", metavar="BASELINE", help="results folder to compare against (before)")
    compare.add_argument("candidate", metavar="CANDIDATE", help="results folder to compare (after)")
    compare.add_argument("--by", action="append", metavar="PARAM",
                         help="leave this out of the pairing, to compare across it: device (its kind, replicas "
                              "and model), batch_size (the global batch) or another parameter; repeatable. `cost` "
                              "judges on dollars per unit of work instead of the headline (docs/cost.md)")
    compare.add_argument("--markdown", metavar="FILE", help="also write the comparison as Markdown")
    compare.add_argument("--csv", metavar="FILE", help="also write the comparison as CSV")
    compare.add_argument("--fail-above", type=percentage, metavar="PCT",
                         help="exit 1 when a combination is resolved slower (with --by cost: costlier) by more than "
                              "PCT (5%%): for CI")
    compare.add_argument("--exclude-busy", action="store_true",
                         help="leave out runs made on a busy host (host_quiet false), as the report can")
    compare.add_argument("--tolerance", type=tolerance, default=None, metavar="PCT",
                         help="ratios whose interval stays within +/- PCT of 1 are no difference (default 2%%)")
    compare.add_argument("--rates", metavar="FILE", help="with --by cost: hourly rates of runtimes (YAML or JSON, "
                                                         "docs/cost.md) over the ones colabkit ships")
    compare.set_defaults(handler=_compare)
    status = verbs.add_parser("status", help="what has run, failed, been skipped, per notebook and device",
                              epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    status.add_argument("out", nargs="?", default="outputs", help="output folder (default: outputs)")
    status.set_defaults(handler=_status)
    export_html = verbs.add_parser("export-html", help="export the executed notebooks of a sweep that have no HTML "
                                                       "yet (after sweep --html failed) to HTML")
    export_html.add_argument("out", help="the sweep's output folder")
    export_html.add_argument("--force", action="store_true", help="export every run again, HTML or not")
    export_html.set_defaults(handler=_export_html)
    workers = verbs.add_parser("workers", help="run a notebook on N local worker processes (MultiWorkerMirroredStrategy)")
    workers.add_argument("notebook", help="the notebook, e.g. notebooks/cnn_mnist.ipynb")
    workers.add_argument("--count", type=positive_int, required=True, help="how many worker processes")
    workers.add_argument("-p", "--param", action="append", metavar="KEY=VALUE", help="a notebook parameter; repeatable")
    workers.add_argument("--out", help="output folder (default: outputs/workers/<notebook>/multiworker-<N>)")
    workers.add_argument("--timeout", type=timeout_seconds, metavar="SECONDS",
                         help="stop every worker after this long (> 0; default and 'none': no limit)")
    workers.add_argument("--grace", type=seconds, default=60.0, metavar="SECONDS",
                         help="after a worker dies, how long the others may take to fail by themselves (default 60)")
    workers.set_defaults(handler=_workers)
    gpu_check = verbs.add_parser("gpu-check", help="check this machine's GPU path in minutes: one table of PASS, FAIL "
                                                    "and SKIP rows (docs/benchmarks.md)")
    gpu_check.add_argument("--out", default="outputs/gpu-check",
                           help="output folder; each check writes a new <UTC time>/ folder in it (default: "
                                "outputs/gpu-check)")
    gpu_check.add_argument("--fast", action="store_true",
                           help="only the rows that run no notebook: device, peaks, bandwidth, clock, matmul")
    gpu_check.add_argument("--rounds", type=positive_int, default=3, metavar="N",
                           help="interleaved rounds of the agreement rows (default 3; each side's median counts)")
    gpu_check.add_argument("--rehearse-on-cpu", action="store_true",
                           help="the device run's CPU rehearsal (docs/device.md): the JAX and PyTorch clock rows on "
                                "the CPU at n = 1024, shown as RAN and not judged (their rules are a GPU's)")
    gpu_check.set_defaults(handler=_gpu_check)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except ColabkitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:  # Ctrl-C before a sweep started, or in another verb
        print("\ninterrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
