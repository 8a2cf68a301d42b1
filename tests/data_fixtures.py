"""Miniature data archives in each real source's exact layout, and a local HTTP server to serve them.

The archives are small but shaped like the real files (member names, folder structure, text
formats, npz keys), so that the loaders' real download -> verify -> extract -> parse path runs.
"""

from __future__ import annotations

import hashlib
import io
import socket
import tarfile
import threading
import zipfile
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pandas as pd

HAR_SIGNALS = [f"{kind}_{axis}" for kind in ("total_acc", "body_acc", "body_gyro") for axis in "xyz"]
HAR_ACTIVITY_LINES = "1 WALKING\n2 WALKING_UPSTAIRS\n3 WALKING_DOWNSTAIRS\n4 SITTING\n5 STANDING\n6 LAYING\n"


def sha256(payload: bytes) -> str:
    return hashlib.sha256(payload).hexdigest()


class FixtureServer:
    """Serves bytes at paths on 127.0.0.1; counts requests; can break the next responses on purpose.

    `truncate[path] = n`: the next n responses announce the full length but send half and close.
    `corrupt[path] = n`: the next n responses send the bytes with one flipped.
    """

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.requests: Counter[str] = Counter()
        self.truncate: Counter[str] = Counter()
        self.corrupt: Counter[str] = Counter()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                path = self.path
                server.requests[path] += 1
                if path not in server.files:
                    self.send_error(404)
                    return
                body = server.files[path]
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if server.truncate[path] > 0:
                    server.truncate[path] -= 1
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                if server.corrupt[path] > 0:
                    server.corrupt[path] -= 1
                    body = bytes([body[0] ^ 0xFF]) + body[1:]
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass  # keep test output clean

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}{path}"

    def serve(self, path: str, payload: bytes) -> str:
        self.files[path] = payload
        return self.url(path)

    def __enter__(self) -> FixtureServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def closed_port_url(path: str = "/missing") -> str:
    """A 127.0.0.1 URL nothing listens on: connecting is refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}{path}"


# --- MNIST: keras's mnist.npz -------------------------------------------------------------------

def mnist_arrays(n_train: int = 30, n_test: int = 10, seed: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "x_train": rng.integers(0, 256, size=(n_train, 28, 28), dtype=np.uint8),
        "y_train": (np.arange(n_train) % 10).astype(np.uint8),
        "x_test": rng.integers(0, 256, size=(n_test, 28, 28), dtype=np.uint8),
        "y_test": (np.arange(n_test)[::-1] % 10).astype(np.uint8),
    }


def mnist_npz(arrays: dict[str, np.ndarray] | None = None) -> bytes:
    """Like keras's mnist.npz: a compressed npz with x_train, y_train, x_test, y_test (uint8)."""
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **(arrays if arrays is not None else mnist_arrays()))
    return buffer.getvalue()


# --- UCI HAR: the outer zip holding 'UCI HAR Dataset.zip' ------------------------------------------

def har_arrays(seed: int = 2) -> dict[str, np.ndarray]:
    """Inertial signals whose channel s is offset by 10 * s, so a wrong stacking order shows."""
    rng = np.random.default_rng(seed)
    arrays = {}
    for split, windows, subjects in (("train", 12, (1, 3)), ("test", 6, (2,))):
        signals = rng.normal(size=(windows, 128, 9)).astype(np.float32) + 10 * np.arange(9, dtype=np.float32)
        arrays[f"x_{split}"] = signals
        arrays[f"y_{split}"] = (np.arange(windows) % 6) + 1  # labels 1-6 as in the archive
        arrays[f"subjects_{split}"] = np.repeat(subjects, windows // len(subjects))
    return arrays


def _text_matrix(values: np.ndarray) -> str:
    """UCI HAR's text layout: every value as ' %15.7e' (a leading space, exponent '-001' style)."""
    rows = []
    for row in np.atleast_2d(values):
        cells = []
        for value in row:
            mantissa, exponent = f"{value:.7e}".split("e")
            cells.append(f"{mantissa}e{int(exponent):+04d}".rjust(16))
        rows.append("".join(cells))
    return "\n".join(rows) + "\n"


def har_inner_zip(arrays: dict[str, np.ndarray] | None = None) -> bytes:
    """'UCI HAR Dataset.zip': UCI HAR Dataset/{train,test}/... plus macOS junk, as UCI ships it."""
    arrays = arrays if arrays is not None else har_arrays()
    buffer = io.BytesIO()
    root = "UCI HAR Dataset"
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(f"{root}/", "")
        archive.writestr(f"{root}/activity_labels.txt", HAR_ACTIVITY_LINES)
        archive.writestr(f"{root}/features.txt", "".join(f"{i} feature-{i}\n" for i in range(1, 562)))
        archive.writestr(f"{root}/README.txt", "Human Activity Recognition Using Smartphones Dataset\n")
        archive.writestr(f"__MACOSX/{root}/._activity_labels.txt", b"\x00\x05\x16\x07junk")
        for split in ("train", "test"):
            x = arrays[f"x_{split}"]
            archive.writestr(f"{root}/{split}/X_{split}.txt", _text_matrix(np.zeros((len(x), 561))))
            archive.writestr(f"{root}/{split}/y_{split}.txt", "".join(f"{v}\n" for v in arrays[f"y_{split}"]))
            archive.writestr(f"{root}/{split}/subject_{split}.txt",
                             "".join(f"{v}\n" for v in arrays[f"subjects_{split}"]))
            for index, signal in enumerate(HAR_SIGNALS):
                archive.writestr(f"{root}/{split}/Inertial Signals/{signal}_{split}.txt",
                                 _text_matrix(x[:, :, index]))
    return buffer.getvalue()


def har_nested_zip(inner: bytes | None = None) -> bytes:
    """UCI's current download: an outer zip holding 'UCI HAR Dataset.zip' and its description."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("UCI HAR Dataset.names", "Human Activity Recognition Using Smartphones\n")
        archive.writestr("__MACOSX/._UCI HAR Dataset.zip", b"\x00\x05\x16\x07junk")
        archive.writestr("UCI HAR Dataset.zip", inner if inner is not None else har_inner_zip())
    return buffer.getvalue()


# --- weather-denmark: a tarball with weather-denmark.csv and .pkl ---------------------------------

CITIES = ("Aalborg", "Aarhus", "Esbjerg", "Odense", "Roskilde")


def weather_long_frame() -> pd.DataFrame:
    """Observations at :20 and :50 of each hour, 2000-01-01 10:20 to 2000-01-03 09:50, with gaps.

    Odense's temperature at 10:50, 11:20, 11:50, 12:20 is 4, 7, NaN, 1, so the hourly series has
    5.0 at 11:00 and 3.0 at 12:00. Aalborg stops at 2000-01-02 20:20, so the inner join ends at 20:00.
    Esbjerg's pressure misses a whole day. Roskilde has an all-NaN row.
    """
    times = pd.date_range("2000-01-01 10:20", "2000-01-03 09:50", freq="30min")
    rng = np.random.default_rng(3)
    rows = []
    for number, city in enumerate(CITIES):
        city_times = times[times <= pd.Timestamp("2000-01-02 20:20")] if city == "Aalborg" else times
        n = len(city_times)
        frame = pd.DataFrame({
            "City": city, "DateTime": city_times,
            "Temp": np.round(rng.normal(5 + number, 2, n), 1),
            "Pressure": np.round(rng.normal(1010 + number, 5, n), 1),
            "WindSpeed": np.round(rng.uniform(0, 12, n), 1),
            "WindDir": np.round(rng.uniform(0, 360, n), 0),
        })
        if city == "Odense":
            frame.loc[1:4, "Temp"] = [4.0, 7.0, np.nan, 1.0]  # 10:50 to 12:20
            frame.loc[6, "WindSpeed"] = np.nan
        if city == "Esbjerg":
            frame.loc[10:58, "Pressure"] = np.nan
        if city == "Roskilde":
            frame.loc[20, ["Temp", "Pressure", "WindSpeed", "WindDir"]] = np.nan
        rows.append(frame)
    return pd.concat(rows, ignore_index=True)


def weather_weeks_frame(days: int = 30, seed: int = 4) -> pd.DataFrame:
    """Long enough to train on: `days` of observations at :20 and :50 for all five cities, with a
    daily temperature cycle, from 2001-03-01 00:20. The inner join is every hour from 01:00."""
    times = pd.date_range("2001-03-01 00:20", periods=days * 48, freq="30min")
    hours = (times - times[0]) / pd.Timedelta(hours=1)
    rng = np.random.default_rng(seed)
    frames = []
    for number, city in enumerate(CITIES):
        n = len(times)
        frames.append(pd.DataFrame({
            "City": city, "DateTime": times,
            "Temp": np.round(4 + number + 5 * np.sin(2 * np.pi * (hours - 9) / 24) + rng.normal(0, 0.5, n), 1),
            "Pressure": np.round(1012 + 8 * np.sin(2 * np.pi * hours / (24 * 6)) + rng.normal(0, 0.3, n), 1),
            "WindSpeed": np.round(np.abs(5 + 3 * np.sin(2 * np.pi * hours / (24 * 3)) + rng.normal(0, 1, n)), 1),
            "WindDir": np.round(rng.uniform(0, 360, n), 0),
        }))
    return pd.concat(frames, ignore_index=True)


def weather_tarball(long: pd.DataFrame | None = None, csv_name: str = "weather-denmark.csv") -> bytes:
    """Like Hvass's weather-denmark.tar.gz: weather-denmark.csv and weather-denmark.pkl at the top."""
    long = long if long is not None else weather_long_frame()
    indexed = long.set_index(["City", "DateTime"])
    members = {csv_name: indexed.to_csv().encode(), "weather-denmark.pkl": _pickle_bytes(indexed)}
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, payload in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            archive.addfile(info, io.BytesIO(payload))
    return buffer.getvalue()


def _pickle_bytes(frame: pd.DataFrame) -> bytes:
    buffer = io.BytesIO()
    frame.to_pickle(buffer)
    return buffer.getvalue()


# --- Jena climate: jena_climate_2009_2016.csv.zip -------------------------------------------------

JENA_HEADER = ('"Date Time","p (mbar)","T (degC)","Tpot (K)","Tdew (degC)","rh (%)","VPmax (mbar)",'
               '"VPact (mbar)","VPdef (mbar)","sh (g/kg)","H2OC (mmol/mol)","rho (g/m**3)","wv (m/s)",'
               '"max. wv (m/s)","wd (deg)"')


def jena_zip() -> bytes:
    """A day of 10-minute records from 01.01.2009 00:10:00. The 05:00 row is duplicated (the copy
    with p 1111); wv at 03:00 is the -9999 marker (its neighbours 1.16 and 1.18)."""
    times = pd.date_range("2009-01-01 00:10", periods=24 * 6, freq="10min")
    lines = [JENA_HEADER]
    for step, time in enumerate(times):
        wind = -9999.0 if step == 17 else 1.0 + step / 100
        values = [996.5 + step / 10, -8.0 + step / 20, 265.0, -9.0, 93.0, 3.3, 3.1, 0.2, 1.9, 3.1, 1300.0,
                  wind, 1.75, 152.3]
        lines.append(",".join([time.strftime("%d.%m.%Y %H:%M:%S"), *(f"{value:.2f}" for value in values)]))
        if step == 29:
            lines.append(lines[-1].replace(f"{values[0]:.2f}", "1111.00"))  # a duplicate timestamp
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("jena_climate_2009_2016.csv", "\n".join(lines) + "\n")
        archive.writestr("__MACOSX/._jena_climate_2009_2016.csv", b"\x00\x05\x16\x07junk")
    return buffer.getvalue()
