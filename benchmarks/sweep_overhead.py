"""Where a sweep's time goes per combination (`breakdown`, the default), and the sweep runner's
overhead over papermill's own (`machinery`), each measured in one run.

`breakdown`: the smoke presets of ParaDnn, the CNN and matmul (`--experiments` adds the dBLSTM and
the weather GRU) on the CPU, swept with fresh kernels and with warm ones (`--kernels reuse`), the two
modes alternating round by round; or, with `--before DIR`, the smoke presets as the grid files in
DIR/parameters/ set them (say, a copy of an earlier commit's) against today's, each as its preset
says (its kernels, HTML, bottleneck passes). Each combination's wall
time is split into kernel start, imports, device set-up, host probes, data, model build, FLOP count,
first epoch, steady epochs, the rest of training, evaluation, results and plots, the record, papermill,
the HTML export, the sweep's bookkeeping and a warm kernel's clean-up (benchmarks/_sweep_phases.py:
from the executed notebooks' cell times, the records and clocks around the sweep's steps). Printed per
experiment and mode, with the ParaDnn verdicts: with reuse, at most 1 s per combination outside model
build and training, amortised over the sweep's wall time; and fresh / reuse wall time >= 3.

`machinery` (below):

N tiny combinations (a notebook that prints and writes its record, about a second each, almost all
of it kernel start-up) are executed (a) with papermill.execute_notebook directly, one after the
other, and (b) through colabkit's sweep (validation, fingerprints, temporary names and renames,
per-run log, record commit), once with its HTML export and once without (--no-html), which direct
papermill does not make. Rounds alternate the order of the three to spread drift in machine load.
Device detection (a child process importing TensorFlow) happens once per sweep, not per
combination: it is timed and reported apart, and left out of the per-combination figure.
Target: under 0.5 s per combination over papermill's own.

With the cluster extra installed, the same combinations also run (d) through a Dask cluster sweep
(`--cluster`, colabkit.sweep.runners.dask) on a LocalCluster of one worker process started once for the
benchmark (its start-up, like device detection, is once per sweep and reported apart): submission,
pickling, the worker's scratch folder and the products' trip back. Target: under 1 s per combination
over papermill's own.

On a shared machine the wall-clock difference is noisy (kernel start-up alone varies by more than
the overhead), so the sweep's own time outside papermill.execute_notebook is also measured inside
the same runs, as a cross-check with far less noise.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import papermill

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))  # the tiny notebook the sweep tests use

from _sweep_phases import PHASES, WORK, SweepClocks, breakdown, outside_work  # noqa: E402
from notebook_factory import write_tiny_notebook  # noqa: E402

from colabkit.sweep.devices import detect_devices
from colabkit.sweep.grids import load_grid
from colabkit.sweep.grids import parse_overrides
from colabkit.sweep.options import RunOptions
from colabkit.sweep.plan import plan
from colabkit.sweep.driver import run_sweep

TARGET_S = 0.5
CLUSTER_TARGET_S = 1.0


class PapermillClock:
    """Wraps papermill.execute_notebook (which the sweep calls) to sum the seconds spent inside it."""

    def __init__(self) -> None:
        self.inner = papermill.execute_notebook
        self.seconds = 0.0

    def __call__(self, *args, **kwargs):
        start = time.perf_counter()
        try:
            return self.inner(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start


def run_direct(notebook: Path, values: list[int], workdir: Path) -> float:
    """Seconds to execute the combinations with papermill directly, each writing its record."""
    workdir.mkdir(parents=True)
    with stderr_to(workdir / "kernels.log"):
        start = time.perf_counter()
        for value in values:
            papermill.execute_notebook(
                str(notebook), str(workdir / f"value-{value}.ipynb"), progress_bar=False, cwd=str(REPO),
                parameters={"device": "cpu", "value": value, "results_path": str(workdir / f"value-{value}.json")},
            )
        return time.perf_counter() - start


@contextmanager
def stderr_to(path: Path) -> Iterator[None]:
    """Send file descriptor 2 (which kernels inherit) to `path`, as the sweep sends it to each run's log."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(path, "w", encoding="utf-8") as log:
        os.dup2(log.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def run_through_sweep(grid: Path, out: Path, available: dict[str, int], html: bool, count: int) -> tuple[float, float]:
    """Seconds for the sweep to run every combination of `grid` into the (fresh) folder `out`, and
    of those the seconds spent outside papermill.execute_notebook."""
    clock = PapermillClock()
    papermill.execute_notebook = clock
    try:
        start = time.perf_counter()
        outcomes = run_sweep(plan([grid], out=out, html="all" if html else "none"), available=available,
                             echo=lambda line: None)
        seconds = time.perf_counter() - start
    finally:
        papermill.execute_notebook = clock.inner
    ran = [outcome for outcome in outcomes if outcome.status == "ok" and not outcome.resumed]
    if len(ran) != count:
        raise SystemExit(f"the sweep ran {len(ran)} of {count} combinations: {[o.message for o in outcomes]}")
    return seconds, seconds - clock.seconds


def run_on_cluster(grid: Path, out: Path, address: str, count: int) -> tuple[float, float]:
    """Seconds for a cluster sweep (HTML export included) to run every combination of `grid` into `out`,
    and of those the seconds outside the runs themselves (each run's own seconds on the worker,
    execute_combination from start to record, taken out): Dask's and the sweep's machinery."""
    start = time.perf_counter()
    outcomes = run_sweep(plan([grid], out=out, options=RunOptions(cluster=address, shared_out=False)),
                         echo=lambda line: None)
    seconds = time.perf_counter() - start
    ran = [outcome for outcome in outcomes if outcome.status == "ok" and not outcome.resumed]
    if len(ran) != count:
        raise SystemExit(f"the cluster sweep ran {len(ran)} of {count} combinations: {[o.message for o in outcomes]}")
    return seconds, seconds - sum(outcome.seconds for outcome in ran)


@contextmanager
def local_cluster(wanted: bool) -> Iterator[str | None]:
    """The address of a one-worker LocalCluster (None when not wanted or `distributed` is missing)."""
    try:
        from distributed import LocalCluster
    except ImportError:
        wanted = False
    if not wanted:
        yield None
        return
    cluster = LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None,
                           silence_logs=40)
    try:
        yield cluster.scheduler_address
    finally:
        cluster.close()


EXPERIMENTS = {"paradnn": "parameters/paradnn.yaml", "cnn": "parameters/cnn_mnist.yaml",
               "matmul": "parameters/matmul_tflops.yaml", "dblstm": "parameters/dblstm_har.yaml",
               "weather": "parameters/timeseries_rnn.yaml"}
DEFAULT_EXPERIMENTS = ("paradnn", "cnn", "matmul")
OVERHEAD_TARGET_S, SPEEDUP_TARGET = 1.0, 3.0


def grid_for(name: str, folder: Path, batches: list[int] | None, root: Path = REPO) -> Path:
    """The experiment's grid file under `root`; for ParaDnn with `batches`, a copy whose smoke preset runs
    its eight models at each of those batch sizes (a longer sweep over which once-per-sweep costs spread)."""
    grid = root / EXPERIMENTS[name]
    if name != "paradnn" or not batches:
        return grid
    text = grid.read_text().replace("notebook: notebooks/", f"notebook: {REPO}/notebooks/")
    smoke = text.index("  smoke:")
    text = text[:smoke] + text[smoke:].replace("      batch_size: [32]", f"      batch_size: {batches}", 1)
    copy = folder / "paradnn-batches.yaml"
    copy.write_text(text)
    return copy


def sweep_breakdown(name: str, mode: str | None, out: Path, html: str | None, overrides: dict,
                    batches: list[int] | None = None, root: Path = REPO) -> dict:
    """One smoke sweep of `name` on the CPU (its grid file under `root`) in kernels `mode` (None: as its
    preset says), with the `overrides` its notebook declares: its wall time and each combination's phases."""
    grid = grid_for(name, out.parent, batches, root)
    declared = load_grid(grid).parameters
    with SweepClocks().installed() as clocks:
        start = time.perf_counter()
        runs = plan([grid], "smoke", "cpu", {key: value for key, value in overrides.items() if key in declared}, out,
                    kernels=mode, html=html)
        outcomes = run_sweep(runs, echo=lambda line: None)
        wall = time.perf_counter() - start
    failed = [outcome.message for outcome in outcomes if outcome.status != "ok"]
    if failed:
        raise SystemExit(f"{name} ({mode}): {len(failed)} combination(s) failed: {failed[:2]}")
    runs = []
    for outcome in outcomes:
        path = outcome.record_path
        record = json.loads(path.read_text())
        runs.append({"runs_before": record["kernel"]["runs_before"],
                     "phases": breakdown(path, clocks.steps[str(path)])})
    work = sum(run["phases"][phase] for run in runs for phase in WORK)
    return {"wall": wall, "runs": runs, "outside_per_run": (wall - work) / len(runs)}


def _mean(runs: list[dict], phase: str) -> float | None:
    return statistics.fmean(run["phases"][phase] for run in runs) if runs else None


def print_breakdown(name: str, results: dict[str, list[dict]]) -> None:
    """Per side (fresh, reuse; or before, after): the mean seconds per phase of its runs, and where
    some ran in warm kernels, of its runs in a new kernel and in a warm one apart."""
    columns = []
    for label, sweeps in results.items():
        runs = [run for sweep in sweeps for run in sweep["runs"]]
        if any(run["runs_before"] > 0 for run in runs):
            columns += [(f"{label}: new kernel", [r for r in runs if r["runs_before"] == 0]),
                        (f"{label}: warm", [r for r in runs if r["runs_before"] > 0])]
        columns.append((f"{label}: all" if len(columns) else label, runs))
    counts = ", ".join(f"{len([r for s in sweeps for r in s['runs']])} {label}" for label, sweeps in results.items())
    print(f"\n{name}: seconds per combination (mean over {counts} runs)")
    print(f"{'phase':<20}" + "".join(f"{label:>19}" for label, _ in columns))
    for phase in (*PHASES, "total", "outside build+training"):
        cells = []
        for _, runs in columns:
            if phase == "total":
                value = statistics.fmean(sum(run["phases"].values()) for run in runs) if runs else None
            elif phase == "outside build+training":
                value = statistics.fmean(outside_work(run["phases"]) for run in runs) if runs else None
            else:
                value = _mean(runs, phase)
            cells.append(f"{value:>19.2f}" if value is not None else f"{'-':>19}")
        print(f"{phase:<20}" + "".join(cells))
    (first, first_sweeps), (second, second_sweeps) = results.items()
    walls = {label: [sweep["wall"] for sweep in sweeps] for label, sweeps in results.items()}
    outside = {label: [sweep["outside_per_run"] for sweep in sweeps] for label, sweeps in results.items()}
    ratios = [a / b for a, b in zip(walls[first], walls[second])]
    print(f"sweep wall time: {first} {spread(walls[first])} s, {second} {spread(walls[second])} s; {first} / "
          f"{second} per round {spread(ratios)} (median {statistics.median(ratios):.2f})")
    print(f"outside model build and training, amortised over the sweep's wall time: {first} "
          f"{spread(outside[first])} s, {second} {spread(outside[second])} s per combination")
    if name == "paradnn" and (first, second) == ("fresh", "reuse"):  # the verdicts (on the smoke's models)
        overhead, speedup = statistics.median(outside["reuse"]), statistics.median(ratios)
        print(f"verdict: reuse outside build+training {overhead:.2f} s per combination (target <= "
              f"{OVERHEAD_TARGET_S:g}): {'PASS' if overhead <= OVERHEAD_TARGET_S else 'FAIL'}; fresh / reuse wall "
              f"{speedup:.2f}x (target >= {SPEEDUP_TARGET:g}): {'PASS' if speedup >= SPEEDUP_TARGET else 'FAIL'}")


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def breakdown_main(args: argparse.Namespace) -> int:
    load_before = os.getloadavg()
    # (label, kernels: None as the preset says, the folder holding parameters/)
    sides = ([("before", None, Path(args.before)), ("after", None, REPO)] if args.before
             else [("fresh", "fresh", REPO), ("reuse", "reuse", REPO)])
    results: dict[str, dict[str, list[dict]]] = {name: {label: [] for label, _, _ in sides}
                                                 for name in args.experiments}
    with tempfile.TemporaryDirectory() as folder:
        for round_index in range(args.rounds):
            for label, mode, root in sides if round_index % 2 == 0 else sides[::-1]:
                for name in args.experiments:
                    sweep = sweep_breakdown(name, mode, Path(folder) / f"{round_index}-{label}-{name}", args.html,
                                            parse_overrides(args.param), args.paradnn_batches, root)
                    results[name][label].append(sweep)
                    print(f"round {round_index + 1} {label:<6} {name:<8} {len(sweep['runs'])} runs in "
                          f"{sweep['wall']:.1f} s (load average {os.getloadavg()[0]:.2f})", flush=True)
    print(f"\nload average before {', '.join(f'{x:.2f}' for x in load_before)}, after "
          f"{', '.join(f'{x:.2f}' for x in os.getloadavg())} (1, 5, 15 min; 2 cores; other work may share the "
          "machine: compare sides within this run only)")
    for name in args.experiments:
        print_breakdown(name, results[name])
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    verbs = parser.add_subparsers(dest="verb")
    split = verbs.add_parser("breakdown", help="where a combination's time goes, fresh vs warm kernels (default)")
    split.add_argument("--rounds", type=int, default=2, help="rounds, each sweeping every experiment in both modes")
    split.add_argument("--experiments", nargs="+", choices=list(EXPERIMENTS), default=list(DEFAULT_EXPERIMENTS))
    split.add_argument("--before", metavar="DIR",
                       help="compare the smoke presets of DIR/parameters/*.yaml (before) with today's (after), each "
                            "as its preset says, rather than fresh with warm kernels")
    split.add_argument("--html", choices=("all", "failed", "none"), help="override the grids' html setting")
    split.add_argument("-p", "--param", action="append", metavar="KEY=VALUE",
                       help="a parameter for the notebooks that declare it, e.g. breakdown=False")
    split.add_argument("--paradnn-batches", type=int, nargs="+", metavar="B",
                       help="run ParaDnn's smoke models at each of these batch sizes (default: the preset's 32)")
    machinery = verbs.add_parser("machinery", help="the sweep's overhead over papermill's own (tiny notebook)")
    machinery.add_argument("--n", type=int, default=10, help="combinations per sweep")
    machinery.add_argument("--rounds", type=int, default=5)
    machinery.add_argument("--no-cluster", dest="cluster", action="store_false",
                           help="leave out the Dask cluster path (local:1)")
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if args.verb in (None, "breakdown"):
        if args.verb is None:
            args = split.parse_args([])
        return breakdown_main(args)
    return machinery_main(args)


def machinery_main(args: argparse.Namespace) -> int:
    values = list(range(1, args.n + 1))
    load_before = os.getloadavg()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder, local_cluster(args.cluster) as address:
        cluster_start_s = time.perf_counter() - start
        workdir = Path(folder)
        notebook = write_tiny_notebook(workdir / "tiny.ipynb")
        grid = workdir / "grid.yaml"
        grid.write_text(f"notebook: {notebook}\ngrid: {{device: [cpu], value: {values}}}\n")
        start = time.perf_counter()
        available = detect_devices()
        detect_s = time.perf_counter() - start
        # Warm-up, untimed: imports, nbconvert's templates, the OS's file cache for the kernel.
        run_direct(notebook, values[:1], workdir / "warm-direct")
        run_sweep(plan([grid], device="cpu", out=workdir / "warm-sweep", overrides={"value": 1}), available=available,
                  echo=lambda line: None)
        if address:
            run_on_cluster(grid, workdir / "warm-cluster", address, args.n)
        print(f"sweep overhead: {args.n} tiny combinations per run, {args.rounds} rounds, same process; "
              f"load average {load_before[0]:.2f} (other work shares this machine)")
        print(f"{'':<7}{'wall clock, s':^34}{'overhead per combination, s':^40}")
        print(f"{'round':<7}{'papermill':>11}{'sweep':>9}{'no-html':>10}{'sweep-papermill':>17}{'no-html':>9}"
              f"{'outside papermill':>19}")
        overheads, bare_overheads, inside, cluster_overheads, machinery = [], [], [], [], []
        for round_index in range(args.rounds):
            timings: dict[str, float] = {}
            outside: dict[str, float] = {}
            order = ["direct", "sweep", "bare"] + (["cluster"] if address else [])
            for kind in order[round_index % len(order):] + order[:round_index % len(order)]:
                target = workdir / f"round{round_index}-{kind}"
                if kind == "direct":
                    timings[kind] = run_direct(notebook, values, target)
                elif kind == "cluster":
                    timings[kind], outside[kind] = run_on_cluster(grid, target, address, args.n)
                else:
                    timings[kind], outside[kind] = run_through_sweep(grid, target, available, html=kind == "sweep",
                                                                     count=args.n)
            overheads.append((timings["sweep"] - timings["direct"]) / args.n)
            bare_overheads.append((timings["bare"] - timings["direct"]) / args.n)
            inside.append(outside["sweep"] / args.n)
            line = (f"{round_index + 1:<7}{timings['direct']:>11.2f}{timings['sweep']:>9.2f}{timings['bare']:>10.2f}"
                    f"{overheads[-1]:>17.3f}{bare_overheads[-1]:>9.3f}{inside[-1]:>19.3f}")
            if address:
                cluster_overheads.append((timings["cluster"] - timings["direct"]) / args.n)
                machinery.append(outside["cluster"] / args.n)
                line += (f"   cluster {timings['cluster']:.2f} s: {cluster_overheads[-1]:.3f} s per combination, "
                         f"{machinery[-1]:.3f} s outside the runs")
            print(line)
    median = statistics.median(overheads)
    verdict = "PASS" if median < TARGET_S else "FAIL"
    print(f"overhead per combination over papermill (wall clock, same run): median {median:.3f} s "
          f"(min {min(overheads):.3f}, max {max(overheads):.3f}) with HTML export, "
          f"{statistics.median(bare_overheads):.3f} s without; target < {TARGET_S} s: {verdict}")
    print(f"the sweep's own time outside papermill.execute_notebook (HTML export included): median "
          f"{statistics.median(inside):.3f} s per combination (min {min(inside):.3f}, max {max(inside):.3f})")
    passed = median < TARGET_S
    if cluster_overheads:
        cluster_median = statistics.median(cluster_overheads)
        passed = passed and cluster_median < CLUSTER_TARGET_S
        print(f"Dask cluster sweep (--cluster, one local worker process, products returned as bytes, HTML "
              f"export included) over papermill: median {cluster_median:.3f} s per combination (min "
              f"{min(cluster_overheads):.3f}, max {max(cluster_overheads):.3f}); target < {CLUSTER_TARGET_S} s: "
              f"{'PASS' if cluster_median < CLUSTER_TARGET_S else 'FAIL'}; starting the LocalCluster "
              f"(once) took {cluster_start_s:.1f} s")
        print(f"the cluster path's own time outside the runs on the worker (connect, submit, results back, files "
              f"written; each run's own time is the local sweep's, above): median {statistics.median(machinery):.3f} s "
              f"per combination (min {min(machinery):.3f}, max {max(machinery):.3f})")
    print(f"once per sweep, not per combination: device detection in a child process {detect_s:.1f} s; "
          f"load average now {os.getloadavg()[0]:.2f}")
    return 0 if passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
