"""`python -m colabkit.ondevice preflight | run`: on the device, the checks before anything is spent there, and the
prepared run (the pack is built, and the returned zip imported, by tools/device_pack.py and tools/device_import.py).

Each verb prints one line on stderr and exits 2 on a user error (a DevicePackError, a bad folder, a refused
pre-flight); the run's exit status is 0 when no stage failed and something was measured, else 1 (see
colabkit.ondevice.device_run and docs/device.md). This module imports only the standard library before its verb is
known: the pre-flight runs on the device before the pack is installed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from colabkit.errors import ColabkitError

EXIT_OK, EXIT_USAGE = 0, 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m colabkit.ondevice", description=__doc__.splitlines()[0])
    verbs = parser.add_subparsers(dest="verb", required=True)
    preflight = verbs.add_parser("preflight", help="the checks before the pack is installed (on the device): $OUT, "
                                                   "the pack's sha256s, the image's versions")
    preflight.add_argument("--pack", default=".device", help="the pack's folder (default: .device)")
    preflight.add_argument("--out", required=True, help="the run's folder (created; preflight.json goes there)")
    run = verbs.add_parser("run", help="the prepared run (on the device; on a CPU, its rehearsal)")
    run.add_argument("--pack", default=".device", help="the installed pack's folder (default: .device)")
    run.add_argument("--out", required=True, help="folder for everything the run writes (the zip goes into it)")
    run.add_argument("--zip-to", default=None, help="folder the zip goes into (default: --out; on a device, $OUT)")
    run.add_argument("--started", type=float, default=None,
                     help="the run's start (seconds since the epoch) that its deadline counts from (default: now)")
    run.add_argument("--deadline", type=float, default=None, metavar="SECONDS",
                     help="the whole run's time, install included (default: 540, the 9 minutes of one device call)")
    return parser


def ondevice_main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.verb == "preflight":
            from colabkit.ondevice.preflight import announce, preflight

            announce(preflight(Path(args.pack), Path(args.out), os.environ.get("OUT")), Path(args.out))
            return EXIT_OK
        from colabkit.ondevice.device_run import run_on_device
        from colabkit.ondevice.stages import DEADLINE_S

        started = args.started if args.started is not None else time.time()
        return run_on_device(Path(args.pack), Path(args.out), started, args.deadline or DEADLINE_S,
                             zip_to=Path(args.zip_to) if args.zip_to else None)
    except ColabkitError as error:
        print(f"{'run.sh on-device' if args.verb == 'preflight' else 'error'}: {error}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(ondevice_main())
