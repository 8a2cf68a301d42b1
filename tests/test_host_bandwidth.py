"""The CPU bandwidth probe measured once per host and handed to every run (COLABKIT_HOST_FACTS), with
its passes and the time it was taken; a figure from another host is never used."""

from __future__ import annotations

import json

from colabkit.device import bandwidth
from colabkit.device.bandwidth import HOST_FACTS_ENV, BandwidthMeasurement, cpu_bandwidth, handed_bandwidth
from colabkit.device.spec import DeviceSetup

MEASURED = BandwidthMeasurement(20.0, 18.0, 64 * 2**20, 16 * 2**20, 3, "measured lower bound: NumPy STREAM-triad",
                                (18.0, 20.0, 16.0), "2026-11-25T06:00:00+00:00")


def test_the_first_run_of_a_sweep_measures_and_the_others_on_its_host_read_it(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(bandwidth, "triad_bandwidth", lambda: calls.append(1) or MEASURED)  # a sweep's first run
    monkeypatch.setattr(bandwidth, "measure_cpu_bandwidth", lambda: calls.append(1) or MEASURED)  # a run by hand
    facts = tmp_path / "host.json"
    monkeypatch.setenv(HOST_FACTS_ENV, str(facts))  # what the sweep gives every kernel
    first = cpu_bandwidth()
    assert len(calls) == 1 and facts.exists() and first.measured_by.startswith("this run, for the sweep")
    handed = cpu_bandwidth()
    assert len(calls) == 1  # not measured again
    assert (handed.gb_per_s, handed.samples_gb_s, handed.min_gb_s, handed.measured_at) == \
        (20.0, (18.0, 20.0, 16.0), 16.0, "2026-11-25T06:00:00+00:00")
    assert handed.measured_by == "an earlier run of the sweep on this host"
    peak = DeviceSetup("cpu", "cpu", None, 1, {"name": "a CPU"}).peak_bandwidth()
    assert (peak.gb_per_s, peak.min_gb_s, peak.measured_at, peak.quality) == \
        (20.0, 16.0, "2026-11-25T06:00:00+00:00", "measured")
    assert peak.source.endswith("(an earlier run of the sweep on this host)")

    stored = json.loads(facts.read_text())
    stored["host"]["hostname"] = "another-host"  # a Dask worker elsewhere: measures its own
    facts.write_text(json.dumps(stored))
    assert handed_bandwidth(facts) is None  # and the next run measures (and writes) its own
    assert cpu_bandwidth().gb_per_s == 20.0 and len(calls) == 2
    monkeypatch.setenv(HOST_FACTS_ENV, str(facts / "host.json"))  # a folder this host cannot write into
    assert cpu_bandwidth() == MEASURED and len(calls) == 3
    facts.write_text("{")
    assert handed_bandwidth(facts) is None and handed_bandwidth(tmp_path / "none.json") is None


def test_a_real_measurement_keeps_every_pass_and_its_time(monkeypatch):
    monkeypatch.setattr(bandwidth, "last_level_cache_bytes", lambda: (1 * 2**20, "test"))  # 64 MiB arrays
    measured = bandwidth.triad_bandwidth(repeats=3)
    assert len(measured.samples_gb_s) == 3 and max(measured.samples_gb_s) == measured.gb_per_s
    assert measured.min_gb_s <= measured.median_gb_per_s <= measured.gb_per_s
    assert measured.measured_at.endswith("+00:00") and measured.measured_by == "this process"
