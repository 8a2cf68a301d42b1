"""The `python -m colabkit` command line. Each verb is a thin wrapper over a module's function."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from colabkit.errors import ColabkitError


def _sweep(args: argparse.Namespace) -> int:
    from colabkit.sweep import run_sweep, summary_table

    out = Path(args.out) if args.out else Path("outputs") / (args.preset or "default")
    outcomes = run_sweep(args.grids, preset=args.preset, device=args.device, out=out)
    print()
    print(summary_table(outcomes))
    print(f"\noutputs: {out}")
    return 1 if any(outcome.status == "failed" for outcome in outcomes) else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m colabkit", description=__doc__)
    verbs = parser.add_subparsers(dest="verb", required=True)
    sweep = verbs.add_parser("sweep", help="run notebooks once per grid combination through papermill")
    sweep.add_argument("grids", nargs="+", help="grid files, e.g. parameters/matmul_tflops.yaml")
    sweep.add_argument("--preset", help="a preset named in the grid files, e.g. smoke or paper")
    sweep.add_argument("--device", help="run only this device's combinations (cpu, gpu, tpu, cpu:2, ...)")
    sweep.add_argument("--out", help="output folder (default: outputs/<preset>)")
    sweep.set_defaults(handler=_sweep)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except ColabkitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
