"""`python -m colabkit.ondevice pack | preflight | run | import`: the device pack, the checks before anything
is spent on the device, the prepared run, the returned zip.

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

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m colabkit.ondevice", description=__doc__.splitlines()[0])
    verbs = parser.add_subparsers(dest="verb", required=True)
    pack = verbs.add_parser("pack", help="write the device pack (here, with a package registry)")
    pack.add_argument("--out", default=".device", help="the pack folder (default: .device)")
    pack.add_argument("--cache", default=None, help="where fetched wheels are kept between builds "
                                                    "(default: ~/.cache/colabkit/device-wheels)")
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
    imported = verbs.add_parser("import", help="bring a returned zip's records and tables into results/")
    imported.add_argument("zip", help="the zip the device run wrote")
    imported.add_argument("--results", default="results", help="the results folder (default: results)")
    return parser


def ondevice_main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.verb == "pack":
            from colabkit.ondevice.pack import DEFAULT_CACHE, build_pack, manifest_table
            from colabkit.suite import checkout_root

            root = checkout_root()
            if root is None:
                raise ColabkitError("device-pack builds from a checkout of colabkit: run it in a clone")
            manifest = build_pack(root, Path(args.out), Path(args.cache) if args.cache else DEFAULT_CACHE)
            print(manifest_table(manifest), end="")
            print(f"device-pack: {args.out} written ({manifest['total_bytes'] / 2**20:.1f} MiB, under "
                  f"{manifest['limit_bytes'] / 2**20:.0f} MiB)")
            return EXIT_OK
        if args.verb == "preflight":
            from colabkit.ondevice.preflight import announce, preflight

            announce(preflight(Path(args.pack), Path(args.out), os.environ.get("OUT")), Path(args.out))
            return EXIT_OK
        if args.verb == "run":
            from colabkit.ondevice.device_run import run_on_device
            from colabkit.ondevice.stages import DEADLINE_S

            started = args.started if args.started is not None else time.time()
            return run_on_device(Path(args.pack), Path(args.out), started, args.deadline or DEADLINE_S,
                                 zip_to=Path(args.zip_to) if args.zip_to else None)
        from colabkit.ondevice.results import import_zip

        folder = import_zip(Path(args.zip), Path(args.results))
        print(f"device-import: records and tables in {folder}; `python -m colabkit report {folder}` reads them")
        return EXIT_OK
    except ColabkitError as error:
        print(f"{'run.sh on-device' if args.verb == 'preflight' else 'error'}: {error}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(ondevice_main())
