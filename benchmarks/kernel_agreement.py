"""Do warm kernels measure what fresh ones do? The same combinations swept with `--kernels fresh` and
`--kernels reuse`, interleaved round by round, and each headline's ratio fresh / reuse.

A sibling of benchmarks/agreement.py, on its rule (docs/like-for-like.md): the two sides run in turns
(fresh, reuse, fresh, reuse, ...), each side's figure per combination is the median of its rounds, the
verdict the ratio of the medians (target 0.95-1.05, on a quiet machine), printed with every round's
value and the paired ratios' spread. Each round is a whole sweep (colabkit.sweep.driver.run_sweep) of
the experiment's combinations into a new folder, so in a reuse round every combination after the
first runs in a kernel that has served the ones before it (its record's `kernel.runs_before`).

- paradnn: the smoke preset's eight models (FC, CNN and RNN), with longer epochs (`--steps`) so that
  the steady epochs hold more than dispatch noise; headline: achieved model TFLOPS.
- cnn: the MNIST CNN at batch 256 and 512 on 4,000 offline samples, 4 epochs (>= 10 s of steady work
  per run here; CNN_GRID); headline: steady epoch time.

`--repeats N` adds the repeats question (independent repeats in reused kernels, docs/sweep.md): one
combination run N times in fresh kernels and N times in ONE warm kernel, interleaved, and the spread
(coefficient of variation) of its headline across the runs of each kind.

Run: python benchmarks/kernel_agreement.py [--experiments paradnn cnn] [--rounds 5] [--repeats 5]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

from colabkit.experiments import get
from colabkit.sweep.runners.execute import execute_combination
from colabkit.sweep.decide import fingerprint
from colabkit.sweep.runners.kernels import close_warm_kernels
from colabkit.sweep.options import RunOptions
from colabkit.sweep.plan import plan
from colabkit.sweep.driver import run_sweep
from colabkit.timing.agreement import Agreement, interleave, spread

REPO = Path(__file__).resolve().parent.parent
LOW, HIGH = 0.95, 1.05
CNN_GRID = """notebook: {repo}/notebooks/cnn_mnist.ipynb
grid: {{device: [cpu], batch_size: [256, 512]}}
fixed: {{epochs: 4, train_samples: 4000, test_samples: 500, data_source: offline, target_accuracy: 0.0}}
"""
SWEEPS = {  # experiment -> (grid file, preset, -p values); the CNN's grid is CNN_GRID
    "paradnn": ("parameters/paradnn.yaml", "smoke", {"steps": 60, "epochs": 4}),
    "cnn": ("cnn.yaml", None, {}),
}
NOTEBOOKS = {"paradnn": "paradnn", "cnn": "cnn_mnist"}


def grid_file(name: str, workdir: Path) -> Path:
    if name != "cnn":
        return REPO / SWEEPS[name][0]
    path = workdir / SWEEPS[name][0]
    path.write_text(CNN_GRID.format(repo=REPO))
    return path


def sweep_round(name: str, mode: str, out: Path) -> dict[str, tuple[float, int]]:
    """One sweep of `name`'s combinations with kernels `mode`: {slug: (headline, runs_before)}."""
    _, preset, overrides = SWEEPS[name]
    runs = plan([grid_file(name, out.parent)], preset, "cpu", overrides, out, kernels=mode, html="none")
    outcomes = run_sweep(runs, echo=lambda line: None)
    metric = get(NOTEBOOKS[name]).headline.metric
    found = {}
    for outcome in outcomes:
        record = json.loads(outcome.record_path.read_text())
        if record["status"] != "ok":
            raise SystemExit(f"{outcome.combination.label} ({mode}) failed: {outcome.message}")
        found[outcome.combination.slug] = (float(record["metrics"][metric]), record["kernel"]["runs_before"])
    return found


def agreement_of(name: str, rounds: int, workdir: Path) -> list[float]:
    fresh, reuse = interleave(
        [lambda index: sweep_round(name, "fresh", workdir / f"{name}-{index}-fresh"),
         lambda index: sweep_round(name, "reuse", workdir / f"{name}-{index}-reuse")],
        rounds, on_round=lambda index, pair: print(f"  {name} round {index + 1} done", flush=True))
    headline = get(NOTEBOOKS[name]).headline
    print(f"{name}: {headline.label} ({headline.unit}), median of {rounds} interleaved rounds per combination")
    print(f"  {'combination':<72}{'fresh':>11}{'reuse':>11}{'ratio':>7}  warm  paired ratios")
    ratios = []
    for slug in fresh[0]:
        agreement = Agreement(tuple(r[slug][0] for r in fresh), tuple(r[slug][0] for r in reuse))
        warm = min(r[slug][1] for r in reuse)
        ratios.append(agreement.ratio)
        print(f"  {slug[:70]:<72}{agreement.ours_median:>11.4g}{agreement.theirs_median:>11.4g}"
              f"{agreement.ratio:>7.3f}  {'yes' if warm else 'no ':<4}  {spread(agreement.paired)}")
    median = statistics.median(ratios)
    verdict = "within" if LOW <= median <= HIGH else "OUTSIDE"
    print(f"  {name}: median ratio fresh / reuse {median:.3f} ({spread(ratios)} over {len(ratios)} combinations) "
          f"{verdict} {LOW}-{HIGH}", flush=True)
    return ratios


def repeats_spread(name: str, count: int, workdir: Path) -> None:
    """The same combination `count` times in fresh kernels and `count` times in one warm kernel."""
    _, preset, overrides = SWEEPS[name]
    combination = plan([grid_file(name, workdir)], preset, "cpu", overrides)[0]
    digest = fingerprint(combination.notebook, combination.params)
    metric = get(combination.name).headline.metric
    options = RunOptions(cwd=str(Path.cwd()))
    values: dict[str, list[float]] = {"fresh": [], "reuse": []}
    for index in range(count):
        for mode in ("fresh", "reuse"):
            settings = dataclasses.replace(combination.settings, kernels=mode, html="none")
            outcome = execute_combination(dataclasses.replace(combination, settings=settings),
                                          workdir / f"repeat-{name}-{mode}-{index}", digest, options)
            record = json.loads(outcome.record_path.read_text())
            if record["status"] != "ok":
                raise SystemExit(f"repeat {index} ({mode}) failed: {outcome.message}")
            values[mode].append(float(record["metrics"][metric]))
    close_warm_kernels()
    print(f"{name} repeats of {combination.slug}: {metric} over {count} runs each, interleaved")
    for mode, found in values.items():
        mean = statistics.fmean(found)
        cv = statistics.stdev(found) / mean if len(found) > 1 else 0.0
        label = "fresh kernels " if mode == "fresh" else "one warm kernel"
        print(f"  {label}: median {statistics.median(found):.4g}, CV {cv:.1%}, values "
              + ", ".join(f"{value:.4g}" for value in found))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiments", nargs="+", choices=list(SWEEPS), default=list(SWEEPS))
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (>= 5 for a verdict)")
    parser.add_argument("--repeats", type=int, default=0, help="also run one combination N times each way")
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    print(f"load average {os.getloadavg()[0]:.2f} (2 cores; other work on the host widens the spread)", flush=True)
    summary = {}
    with tempfile.TemporaryDirectory() as folder:
        for name in args.experiments:
            summary[name] = statistics.median(agreement_of(name, args.rounds, Path(folder)))
            if args.repeats:
                repeats_spread(name, args.repeats, Path(folder))
    print("summary (median ratio fresh / reuse): " + ", ".join(f"{name} {ratio:.3f}" for name, ratio in summary.items())
          + f"; load average now {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
