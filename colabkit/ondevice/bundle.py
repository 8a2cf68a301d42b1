"""The run's closing: one zip of what it found (records, report, figures, tables, logs; no notebooks) under
16 MiB, named `colabkit-device-<gpu>-<date>.zip` in letters, digits, '.', '_' and '-' alone (what a device
call brings back), and the summary printed last: at most ten lines (the device and driver, each experiment's
best headline with its interval, the gpu-check's verdicts, the stages' times and what they measured, the
data, the zip). The zip is built in the run's folder and then moved into its place ($OUT), so that the place
takes at most the zip within its limit: the room the pre-flight checks $OUT has. The summary is written
(summary.txt) and printed whatever became of the zip, its last line the zip's: where the zip could not be
written, that line names the folder that holds the records.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import re
import shutil
import zipfile
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from colabkit.experiments import all_experiments
from colabkit.gpu_check.rows import NO_GPU_LINE
from colabkit.io import write_atomic
from colabkit.ondevice.preflight import ZIP_LIMIT_BYTES
from colabkit.stages import StageResult

META = "device.json"
SUMMARY = "summary.txt"
SUMMARY_LINES = 10
# What goes into the zip, by folder of the run: records and their logs, the report without its PDF and SVG
# copies of each figure (the PNG and the CSV behind it are kept), the gpu-check's table, the stages' logs.
KEPT_SUFFIXES = {"results": (".json", ".log"), "report": (".html", ".png", ".csv", ".md", ".txt"),
                 "gpu-check": (".txt", ".md", ".json", ".log"), "logs": (".log",), "plans": (".json",)}


@dataclass
class Bundle:
    """What the run hands the closing: its folder, where the zip goes, the GPUs, the pack and the stages."""

    out: Path
    zip_to: Path
    gpus: list[dict[str, str]]
    pack: Path
    results: list[StageResult]
    started: float
    on_gpu: bool
    preflight: dict[str, Any] = field(default_factory=dict)  # the pre-flight's findings (preflight.json)
    summary: list[str] = field(default_factory=list)
    zip_path: Path | None = None
    within_limit: bool = True
    measured: int = 0  # ok records and gpu-check rows that measured (not SKIP): 0 makes the run a failure


def slug(text: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3': a name a device call brings back."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "unknown"


def device_name(bundle: Bundle) -> str:
    return bundle.gpus[0]["name"] if bundle.on_gpu else "cpu-rehearsal"


def _best_headlines(records_csv: Path) -> list[str]:
    """Per experiment, its best combination's headline over the runs: median [interval] (level, runs)."""
    if not records_csv.is_file():
        return ["headlines: no report (see the report stage's log)"]
    with open(records_csv, encoding="utf-8", newline="") as stream:
        rows = [row for row in csv.DictReader(stream) if row.get("status") == "ok" and row.get("headline.median")]
    lines = []
    for experiment in all_experiments():
        headline = experiment.headline
        mine = [row for row in rows if row.get("notebook") == experiment.name  # its default mode's: the others have
                and (row.get("params.mode") or experiment.default_mode) == experiment.default_mode]  # their sections
        if not mine:
            lines.append(f"{experiment.name}: no ok run")
            continue
        best = (max if headline.higher_is_better else min)(mine, key=lambda row: float(row["headline.median"]))
        runs, level = best.get("headline.n") or "?", best.get("headline.level") or ""
        interval = (f" [{float(best['headline.ci_low']):.4g}, {float(best['headline.ci_high']):.4g}] "
                    f"({float(level):.0%}, {runs} runs)" if best.get("headline.ci_low") and level
                    else f" (no interval: {runs} run(s))")
        lines.append(f"{experiment.name}: {headline.label} {float(best['headline.median']):.4g} {headline.unit}"
                     f"{interval}, {best.get('combination', '?')} on {best.get('device_label') or best.get('device_kind')}")
    return lines


def _gpu_check_line(out: Path) -> str:
    tables = sorted((out / "gpu-check").glob("*/table.json"))
    if not tables:
        log = out / "logs" / "gpu-check.log"
        said = log.read_text(encoding="utf-8").strip().splitlines() if log.is_file() else []
        return NO_GPU_LINE if NO_GPU_LINE in said else "gpu-check: no table (the stage did not finish: see its log)"
    payload = json.loads(tables[-1].read_text(encoding="utf-8"))
    verdicts: dict[str, list[str]] = {}
    for row in payload["rows"]:
        verdicts.setdefault(row["verdict"], []).append(row["name"])
    return "gpu-check: " + "; ".join(f"{verdict} {', '.join(names)}" for verdict, names in verdicts.items())


def _datasets_line(pack: Path) -> str:
    manifest = pack / "manifest.json"
    carried = json.loads(manifest.read_text(encoding="utf-8")).get("datasets", []) if manifest.is_file() else []
    return ("data: real " + ", ".join(carried) + " from the pack; the rest offline substitutes (records say which)"
            if carried else "data: the offline substitutes (no real dataset in the pack; every record says so)")


def measured_count(out: Path) -> int:
    """How many things the run measured: ok records under results/, and gpu-check rows that are not SKIP."""
    count = 0
    for path in (out / "results").rglob("*.json") if (out / "results").is_dir() else []:
        try:
            count += not path.name.startswith(".") and json.loads(path.read_text(encoding="utf-8")).get("status") == "ok"
        except (OSError, ValueError, AttributeError):
            continue  # a half-written or foreign file is not a measurement
    for table in (out / "gpu-check").glob("*/table.json") if (out / "gpu-check").is_dir() else []:
        try:
            rows = json.loads(table.read_text(encoding="utf-8")).get("rows", [])
        except (OSError, ValueError, AttributeError):
            continue
        count += sum(row.get("verdict") != "SKIP" for row in rows)
    return count


def _image_phrase(preflight: dict[str, Any]) -> str:
    differences = preflight.get("image_differences") or []
    if not preflight:
        return ""
    return ("; image as device/image.txt lists it" if not differences
            else f"; image NOT as listed: {', '.join(differences)}")


def _write_zip(target: Path, root: Path, files: list[Path]) -> int:
    """The zip of `files` (named from `root`) at `target`, written atomically (no half a zip under its name); its
    size."""
    def write(scratch: Path) -> None:
        with zipfile.ZipFile(scratch, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in files:
                archive.write(path, str(path.relative_to(root)))

    return write_atomic(target, write, suffix=".part").stat().st_size


def _zip(bundle: Bundle, name: str) -> tuple[Path, list[str]]:
    """The zip, built in the run's folder, the figures left out where it would pass its limit, then copied into its
    place and removed here: its place only ever takes the finished zip."""
    built = bundle.out / name
    files = [path for folder, suffixes in KEPT_SUFFIXES.items() if (bundle.out / folder).is_dir()
             for path in sorted((bundle.out / folder).rglob("*")) if path.is_file() and path.suffix in suffixes
             and not path.name.endswith("-with-code.html")]  # report.html alone: the same report, its code folded
    files += [bundle.out / META, bundle.out / SUMMARY]
    figures: list[Path] = []
    if _write_zip(built, bundle.out, files) > ZIP_LIMIT_BYTES:
        figures = [path for path in files if path.suffix == ".png"]  # the CSV behind each figure stays
        _write_zip(built, bundle.out, [path for path in files if path.suffix != ".png"])
    target = bundle.zip_to / name
    if target.resolve() != built.resolve():
        write_atomic(target, partial(shutil.copyfile, built), suffix=".part")  # never half a zip where the call looks
        built.unlink()
    return target, [str(path.relative_to(bundle.out)) for path in figures]


def _summary(lines: list[str]) -> list[str]:
    """The summary's lines, at most SUMMARY_LINES: the zip's line, the last, always kept."""
    return lines[:SUMMARY_LINES - 1] + lines[-1:] if len(lines) > SUMMARY_LINES else lines


def write_bundle(bundle: Bundle) -> Bundle:
    """Write device.json, summary.txt and the zip; fill in the bundle's summary, zip and whether it fits."""
    now = dt.datetime.now(dt.timezone.utc)
    name = f"colabkit-device-{slug(device_name(bundle))}-{now:%Y%m%d}.zip"
    gpu = bundle.gpus[0] if bundle.gpus else {}
    device = (f"device: {gpu['name']} x{len(bundle.gpus)}, {float(gpu['memory.total']) / 1024:.0f} GiB, driver "
              f"{gpu['driver_version']}" if bundle.on_gpu else "device: no GPU (the CPU rehearsal of the device run)")
    device += _image_phrase(bundle.preflight)
    elapsed = now.timestamp() - bundle.started
    bundle.measured = measured_count(bundle.out)
    stages = "stages: " + ", ".join(f"{result.name} {result.status} {result.seconds:.0f}s" for result in bundle.results)
    measured = (f"{bundle.measured} measurement(s)" if bundle.measured
                else "NOTHING MEASURED (every stage skipped, stopped before a run or failed)")
    summary = [device, *_best_headlines(bundle.out / "report" / "records.csv"), _gpu_check_line(bundle.out),
               f"{stages}; {elapsed:.0f} s in all; {measured}", _datasets_line(bundle.pack)]
    meta: dict[str, Any] = {"device": device_name(bundle), "slug": slug(device_name(bundle)), "on_gpu": bundle.on_gpu,
                            "gpus": bundle.gpus, "date": now.date().isoformat(), "finished": now.isoformat(),
                            "seconds": elapsed, "measured": bundle.measured, "preflight": bundle.preflight,
                            "stages": [vars(result) for result in bundle.results]}
    write_atomic(bundle.out / META, json.dumps(meta, indent=2) + "\n")
    in_zip = f"zip: {bundle.zip_to / name} (the zip this summary came in)"
    write_atomic(bundle.out / SUMMARY, "\n".join(_summary([*summary, in_zip])) + "\n")
    try:
        bundle.zip_path, left_out = _zip(bundle, name)
    except OSError as error:  # the records stay in the run's folder: say where, never a traceback instead
        bundle.zip_path, bundle.within_limit = None, False
        built = bundle.out / name
        summary.append(f"zip: NOT written into {bundle.zip_to} ({error.strerror or error}); everything measured is "
                       f"in {bundle.out}" + (f", the zip too ({built.name})" if built.is_file() else ""))
    else:
        size = bundle.zip_path.stat().st_size
        bundle.within_limit = size <= ZIP_LIMIT_BYTES
        fits = "under" if bundle.within_limit else "OVER"
        summary.append(f"zip: {bundle.zip_path} ({size / 2**20:.2f} MiB, {fits} the {ZIP_LIMIT_BYTES / 2**20:.0f} "
                       "MiB limit" + (f"; {len(left_out)} figure(s) left out to fit)" if left_out else ")"))
    bundle.summary = _summary(summary)
    try:
        write_atomic(bundle.out / SUMMARY, "\n".join(bundle.summary) + "\n")  # now with the zip's own line
    except OSError:
        pass  # the run's folder is full too: the summary is still printed, its last line saying where things are
    return bundle
