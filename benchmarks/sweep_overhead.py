"""The sweep runner's overhead per combination over papermill's own, measured in the same run.

N tiny combinations (a notebook that prints and writes its record, about a second each, almost all
of it kernel start-up) are executed (a) with papermill.execute_notebook directly, one after the
other, and (b) through colabkit's sweep (validation, fingerprints, temporary names and renames,
per-run log, record commit), once with its HTML export and once without (--no-html), which direct
papermill does not make. Rounds alternate the order of the three to spread drift in machine load.
Device detection (a child process importing TensorFlow) happens once per sweep, not per
combination: it is timed and reported apart, and left out of the per-combination figure.
Target: under 0.5 s per combination over papermill's own.
"""

from __future__ import annotations

import argparse
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

from notebook_factory import write_tiny_notebook  # noqa: E402

from colabkit.sweep import detect_devices, run_sweep  # noqa: E402

TARGET_S = 0.5


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


def run_through_sweep(grid: Path, out: Path, available: dict[str, int], html: bool, count: int) -> float:
    """Seconds for the sweep to run every combination of `grid` into the (fresh) folder `out`."""
    start = time.perf_counter()
    outcomes = run_sweep([grid], out=out, available=available, echo=lambda line: None, html=html)
    seconds = time.perf_counter() - start
    ran = [outcome for outcome in outcomes if outcome.status == "ok" and not outcome.resumed]
    if len(ran) != count:
        raise SystemExit(f"the sweep ran {len(ran)} of {count} combinations: {[o.message for o in outcomes]}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10, help="combinations per sweep")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    values = list(range(1, args.n + 1))
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as folder:
        workdir = Path(folder)
        notebook = write_tiny_notebook(workdir / "tiny.ipynb")
        grid = workdir / "grid.yaml"
        grid.write_text(f"notebook: {notebook}\ngrid: {{device: [cpu], value: {values}}}\n")
        start = time.perf_counter()
        available = detect_devices()
        detect_s = time.perf_counter() - start
        # Warm-up, untimed: imports, nbconvert's templates, the OS's file cache for the kernel.
        run_direct(notebook, values[:1], workdir / "warm-direct")
        run_sweep([grid], out=workdir / "warm-sweep", available=available, echo=lambda line: None,
                  device="cpu", overrides={"value": 1})
        print(f"sweep overhead: {args.n} tiny combinations per run, {args.rounds} rounds, same process; "
              f"load average {load_before[0]:.2f} (other work shares this machine)")
        print(f"{'round':<7}{'papermill s':>13}{'sweep s':>10}{'no-html s':>11}{'overhead/comb s':>17}{'no-html':>9}")
        overheads, bare_overheads = [], []
        for round_index in range(args.rounds):
            timings: dict[str, float] = {}
            order = ["direct", "sweep", "bare"]
            for kind in order[round_index % 3:] + order[:round_index % 3]:
                target = workdir / f"round{round_index}-{kind}"
                if kind == "direct":
                    timings[kind] = run_direct(notebook, values, target)
                else:
                    timings[kind] = run_through_sweep(grid, target, available, html=kind == "sweep", count=args.n)
            overhead = (timings["sweep"] - timings["direct"]) / args.n
            bare = (timings["bare"] - timings["direct"]) / args.n
            overheads.append(overhead)
            bare_overheads.append(bare)
            print(f"{round_index + 1:<7}{timings['direct']:>13.2f}{timings['sweep']:>10.2f}{timings['bare']:>11.2f}"
                  f"{overhead:>17.3f}{bare:>9.3f}")
    median, bare_median = statistics.median(overheads), statistics.median(bare_overheads)
    verdict = "PASS" if median < TARGET_S else "FAIL"
    print(f"overhead per combination over papermill: median {median:.3f} s (min {min(overheads):.3f}, "
          f"max {max(overheads):.3f}) with HTML export; {bare_median:.3f} s without; target < {TARGET_S} s: {verdict}")
    print(f"once per sweep, not per combination: device detection in a child process {detect_s:.1f} s; "
          f"load average now {os.getloadavg()[0]:.2f}")
    return 0 if median < TARGET_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
