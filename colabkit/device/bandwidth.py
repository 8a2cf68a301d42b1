"""A CPU's memory bandwidth, measured in the run: a STREAM-triad-style NumPy measurement; and the one
reader and writer of the files of facts measured once per host (`host_facts`, `update_host_facts`).

The triad a = b + q*c is credited 24 bytes per element as in McCalpin's STREAM; NumPy moves 40 (it
cannot fuse), so the figure is a LOWER BOUND on STREAM's (by up to 5/3). The probe takes 1-5 s, so a
sweep measures it once per host (COLABKIT_HOST_FACTS, `write_host_facts`; others read it through
`cpu_bandwidth`); by hand, once per process. Every figure keeps its passes and when it was taken.

Two files of host facts: the sweep's (COLABKIT_HOST_FACTS, removed when the sweep ends: the bandwidth,
and the achievable peak for the sweep's runs) and the host's cache (`host_cache_path`: COLABKIT_HOST_CACHE,
else ~/.cache/colabkit/host-facts.json), which keeps the achievable peak for later sweeps and runs on
the same host (colabkit.device.achievable). Either is read only where `host_identity` matches.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import glob
import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from colabkit.errors import MeasurementError
from colabkit.io import write_json_atomic

HOST_FACTS_ENV = "COLABKIT_HOST_FACTS"  # the file of facts a sweep measured once for its host
HOST_CACHE_ENV = "COLABKIT_HOST_CACHE"  # the host's own file, kept between sweeps; "off" keeps none

_BYTES_PER_ELEMENT = 24  # STREAM's credit for the triad: two 8-byte reads and one 8-byte write
_FALLBACK_CACHE_BYTES = 32 * 2**20  # when the machine does not say: a large server L3
_MIN_ARRAY_BYTES = 64 * 2**20
_MAX_ARRAY_BYTES = 512 * 2**20  # keeps 3 arrays within 1.5 GiB on hosts with huge caches


@dataclass(frozen=True)
class BandwidthMeasurement:
    """A measured memory bandwidth (GB/s = 1e9 bytes/s), with how it was measured."""

    gb_per_s: float  # the best repeat, as STREAM reports
    median_gb_per_s: float
    array_bytes: int  # each of the three arrays
    cache_bytes: int  # the last level cache the arrays were sized against
    repeats: int
    method: str
    samples_gb_s: tuple[float, ...] = ()  # every timed pass, in order: the figure's spread
    measured_at: str = ""  # when (UTC, ISO 8601)
    measured_by: str = "this process"  # in a sweep: measured by this run, or an earlier one (cpu_bandwidth)

    @property
    def min_gb_s(self) -> float:
        """The slowest pass (with `gb_per_s`, the best, the range the figure spans)."""
        return min(self.samples_gb_s) if self.samples_gb_s else self.gb_per_s


def last_level_cache_bytes() -> tuple[int, str]:
    """Size of the largest CPU cache the OS reports (Linux sysfs), else a 32 MiB assumption."""
    largest = 0
    for path in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*/size"):
        try:
            text = open(path).read().strip().upper()
        except OSError:
            continue
        scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            largest = max(largest, int(digits) * scale)
    if largest:
        return largest, "sysfs"
    return _FALLBACK_CACHE_BYTES, "assumed (not reported by the OS)"


def triad_bandwidth(repeats: int = 5) -> BandwidthMeasurement:
    """STREAM-triad-style bandwidth of this host's memory with NumPy, a lower bound (module doc),
    measured now (measure_cpu_bandwidth: once per process).

    Each array is at least 4x the last level cache (STREAM's rule; capped at 512 MiB per array,
    which the method text then says), the first pass only warms the pages, the best of `repeats`
    timed passes is the figure and the median is kept beside it. 1-5 s on a small VM.
    """
    cache, cache_source = last_level_cache_bytes()
    wanted = max(4 * cache, _MIN_ARRAY_BYTES)
    array_bytes = min(wanted, _MAX_ARRAY_BYTES)
    n = array_bytes // 8
    b = np.full(n, 1.0)
    c = np.full(n, 2.0)
    a = np.empty(n)
    q = 3.0
    seconds = []
    for _ in range(repeats + 1):
        start = time.perf_counter()
        np.multiply(c, q, out=a)
        np.add(a, b, out=a)
        seconds.append(time.perf_counter() - start)
    if a[0] != 7.0 or a[-1] != 7.0:
        raise MeasurementError(f"the triad computed {a[0]} instead of 7.0: the measurement cannot be trusted")
    timed = sorted(seconds[1:])
    if timed[0] <= 0:
        raise MeasurementError("the triad took no measurable time: the clock or the arrays are wrong")
    credited = _BYTES_PER_ELEMENT * n
    best, median = credited / timed[0] / 1e9, credited / timed[len(timed) // 2] / 1e9
    capped = "" if array_bytes >= 4 * cache else " (capped below 4x the cache)"
    method = (f"measured lower bound: NumPy STREAM-triad a = b + q*c over 3 arrays of {array_bytes / 2**20:.0f} MiB"
              f"{capped}, last level cache {cache / 2**20:.0f} MiB ({cache_source}), 24 bytes credited per "
              f"element (NumPy moves 40), best of {repeats} passes after a warm-up (median {median:.1f} GB/s)")
    samples = tuple(credited / seconds / 1e9 for seconds in seconds[1:])
    return BandwidthMeasurement(best, median, int(array_bytes), int(cache), repeats, method, samples,
                                dt.datetime.now(dt.timezone.utc).isoformat())


@functools.lru_cache(maxsize=1)
def measure_cpu_bandwidth(repeats: int = 5) -> BandwidthMeasurement:
    """This host's bandwidth (triad_bandwidth), measured once per process and then remembered."""
    return triad_bandwidth(repeats)


def host_identity() -> dict[str, Any]:
    """What tells this host from another for a handed-over figure: its name, CPU model, cache and the
    logical CPUs this process may use (a run confined to fewer cores is another machine for a peak)."""
    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            model = next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), "")
    except OSError:
        pass  # not Linux: the host name and cache still tell
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"hostname": socket.gethostname(), "cpu_model": model, "cache_bytes": last_level_cache_bytes()[0],
            "logical_cpus": usable}


def host_cache_path() -> Path | None:
    """The host's file of facts kept between sweeps: COLABKIT_HOST_CACHE, else
    $XDG_CACHE_HOME/colabkit/host-facts.json (~/.cache/...); None when COLABKIT_HOST_CACHE is "off"."""
    named = os.environ.get(HOST_CACHE_ENV)
    if named is not None:
        return None if named.strip().lower() in ("", "off") else Path(named)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "colabkit" / "host-facts.json"


def host_cache_problem(path: Path) -> str | None:
    """Why the file `path` cannot keep a host's facts without losing something: a folder, or a file that is not
    one colabkit wrote (it is left as it is, never overwritten); None where it can (or is not there yet)."""
    if path.is_dir():
        return "is a folder, not a file"
    if not path.exists():
        return None
    try:
        facts = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        return f"is not a host-facts file colabkit wrote ({type(error).__name__}): left as it is"
    return None if isinstance(facts, dict) and "host" in facts else (
        "is not a host-facts file colabkit wrote (no host in it): left as it is")


def host_facts(path: str | Path) -> dict[str, Any]:
    """The facts in a sweep's host-facts file (COLABKIT_HOST_FACTS) when they were written on this host; {}
    when the file is missing, unreadable, or from another host (a Dask worker elsewhere)."""
    try:
        facts = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return facts if isinstance(facts, dict) and facts.get("host") == host_identity() else {}


def update_host_facts(path: str | Path, **entries: Any) -> None:
    """Add `entries` to this host's facts in `path` (JSON, atomically; its folder made where missing),
    keeping the others. OSError where the file cannot be written."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, {**host_facts(path), **entries, "host": host_identity()})


def write_host_facts(path: str | Path, measured: BandwidthMeasurement | None = None) -> BandwidthMeasurement:
    """Write this host's bandwidth (`measured`, else measured now) to `path`: what the other runs of a sweep
    on this host read (COLABKIT_HOST_FACTS)."""
    measured = measured or triad_bandwidth()  # this sweep's own figure, not one an earlier sweep in this process took
    update_host_facts(path, cpu_bandwidth=dataclasses.asdict(measured))
    return measured


def handed_bandwidth(path: str | Path) -> BandwidthMeasurement | None:
    """The bandwidth written to `path` by `write_host_facts` when it was measured on this host; None
    when the file is missing, unreadable, or from another host (a Dask worker elsewhere)."""
    try:
        fields = dict(host_facts(path)["cpu_bandwidth"])
        fields["samples_gb_s"] = tuple(fields.get("samples_gb_s") or ())
        fields["measured_by"] = "an earlier run of the sweep on this host"
        return BandwidthMeasurement(**fields)
    except (KeyError, TypeError, ValueError):
        return None


def cpu_bandwidth() -> BandwidthMeasurement:
    """This host's memory bandwidth, once per sweep and host: in a sweep (COLABKIT_HOST_FACTS names the
    sweep's file) the figure an earlier run on this host measured, or, for the first run that needs
    it, measured now and written there for the others; outside a sweep (or where the file cannot be
    written) measured now, once per process."""
    path = os.environ.get(HOST_FACTS_ENV)
    if path:
        handed = handed_bandwidth(path)
        if handed is not None:
            return handed
        measured = triad_bandwidth()
        try:
            write_host_facts(path, measured)
        except OSError:  # a folder of another host (a Dask worker elsewhere): this run's figure alone
            return measured
        return dataclasses.replace(measured, measured_by="this run, for the sweep's runs on this host")
    return measure_cpu_bandwidth()
