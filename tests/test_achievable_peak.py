"""The achievable peak (colabkit.device.achievable): each shape timed for a minimum duration, passes
repeated until two in a row agree (bounded), the best kept with its passes' spread; kept per host for the
sweep's runs and for later sweeps, reused only while the host, device, driver and backend are unchanged;
MFU against it with the range its passes give. Fake timers and scans here; the paradnn notebook's tests
run a real scan, and benchmarks/achievable_peak.py checks it against an independent NumPy and TensorFlow
best (docs/peaks.md gives the figures)."""

from __future__ import annotations

import dataclasses
import json
import time

import pytest
from helpers import REPO

from colabkit.device import achievable, bandwidth
from colabkit.device.bandwidth import HOST_CACHE_ENV, HOST_FACTS_ENV
from colabkit.errors import MeasurementError

FAKE = achievable.AchievablePeak(
    per_precision={"float32": {"tflops": 0.5, "shape": [1024, 1024, 1024], "passes": [0.45, 0.5], "low_tflops": 0.45,
                               "spread": 0.1}},
    scanned=[{"pass": 1, "shape": [512, 512, 512], "precision": "float32", "tflops": 0.4},
             {"pass": 2, "shape": [1024, 1024, 1024], "precision": "float32", "tflops": 0.5}],
    backend="jax", device="cpu:cpu", method="fake scan", measured_at="2026-11-26T00:00:00+00:00", seconds=0.1,
    passes=2, agreed=False)


def fake_timer(rates_per_pass: list[float], fail_above: int | None = None):
    """A timer whose every shape runs at rates_per_pass[p] TFLOPS on pass p (counted by the first shape's calls),
    failing shapes with M above `fail_above`."""
    calls = {"passes": 0}

    def timer(kind):
        def time_one(m, n, k, precision, min_seconds):
            if fail_above is not None and m > fail_above:
                raise RuntimeError("RESOURCE_EXHAUSTED: out of memory")
            if (m, n, k) == achievable.SHAPES["cpu"][0]:
                calls["passes"] += 1
            rate = rates_per_pass[min(calls["passes"], len(rates_per_pass)) - 1] * (1 + m / 1e5)  # bigger: faster
            return [2.0 * m * n * k / (rate * 1e12)] * 3
        return time_one, "fake:0"

    return timer, calls


def test_each_shape_is_timed_back_to_back_for_the_minimum_duration():
    started = time.perf_counter()
    times = achievable._timed_calls(lambda: time.sleep(0.001), 0.05)
    assert time.perf_counter() - started >= 0.05 and len(times) >= achievable.MIN_CALLS and min(times) >= 0.001
    assert len(achievable._timed_calls(lambda: None, 0.0)) == achievable.MIN_CALLS  # a floor of calls, however short


def test_passes_repeat_until_two_in_a_row_agree_and_the_best_keeps_its_spread(monkeypatch):
    timer, _ = fake_timer([0.10, 0.20, 0.205, 0.5])  # a busy first pass, then two that agree within 5 %
    monkeypatch.setattr(achievable, "_jax_timer", timer)
    peak = achievable.scan("cpu", "jax", min_seconds=0.0)
    best = peak.best("float32")
    assert peak.passes == 3 and peak.agreed and {row["pass"] for row in peak.scanned} == {1, 2, 3}
    assert best["shape"] == [2048, 2048, 2048] and best["tflops"] == pytest.approx(0.205 * 1.02048)
    assert best["passes"] == pytest.approx([0.1 * 1.02048, 0.2 * 1.02048, 0.205 * 1.02048])
    assert best["low_tflops"] == pytest.approx(0.1 * 1.02048) and best["spread"] == pytest.approx(1 - 0.1 / 0.205)
    assert "3 pass(es) until two in a row agreed within 5%" in peak.method

    timer, _ = fake_timer([0.1, 0.2, 0.3, 0.4, 0.5, 0.6])  # never agreeing: bounded, and said
    monkeypatch.setattr(achievable, "_jax_timer", timer)
    restless = achievable.scan("cpu", "jax", min_seconds=0.0, max_passes=4)
    assert restless.passes == 4 and not restless.agreed and "without two in a row agreeing" in restless.method
    fields = _fields(monkeypatch, restless, model_tflops=0.1, datasheet_tflops=None)
    assert "did not agree within 5%" in fields["achievable_note"] and fields["achievable_agreed"] is False


def test_a_shape_that_fails_is_named_skipped_in_later_passes_and_a_scan_where_none_ran_is_refused(monkeypatch):
    timer, _ = fake_timer([0.1], fail_above=512)
    monkeypatch.setattr(achievable, "_jax_timer", timer)
    peak = achievable.scan("cpu", "jax", min_seconds=0.0)
    failed = [row for row in peak.scanned if row["tflops"] is None]
    assert [row["shape"] for row in failed] == [[1024, 1024, 1024], [2048, 2048, 2048]]  # named once, in pass 1
    assert all(row["pass"] == 1 for row in failed) and "out of memory" in failed[0]["error"]
    assert peak.best("float32")["tflops"] == pytest.approx(0.1 * 1.00512) and peak.agreed  # the 512-wide shapes
    monkeypatch.setattr(achievable, "SHAPES", {"cpu": ((1024, 1024, 1024),)})
    with pytest.raises(MeasurementError, match="no product of the scan ran"):
        achievable.scan("cpu", "jax", min_seconds=0.0)


def _fields(monkeypatch, peak, model_tflops, datasheet_tflops, kind="cpu", replicas=1):
    monkeypatch.setattr(achievable, "achievable_peak", lambda kind, backend: peak)
    return achievable.achievable_fields(kind, "jax", replicas, "float32", model_tflops, datasheet_tflops)


def test_mfu_against_the_achievable_peak_gets_the_range_of_the_scan_s_passes(monkeypatch):
    fields = _fields(monkeypatch, dataclasses.replace(FAKE, agreed=True), model_tflops=0.1, datasheet_tflops=0.4)
    assert (fields["achievable_tflops"], fields["achievable_low_tflops"]) == (0.5, 0.45)
    assert fields["achievable_spread"] == pytest.approx(0.1) and fields["achievable_passes"] == 2
    assert fields["mfu_achievable"] == pytest.approx(0.2) and fields["mfu_achievable_low"] == pytest.approx(0.2)
    assert fields["mfu_achievable_high"] == pytest.approx(0.1 / 0.45)
    assert fields["achievable_over_datasheet"] == pytest.approx(1.25)
    assert "so that peak is wrong" in fields["achievable_note"] and "stated clock" in fields["achievable_note"]
    gpus = _fields(monkeypatch, dataclasses.replace(FAKE, agreed=True), 0.1, 10.0, kind="gpu", replicas=2)
    assert gpus["achievable_tflops"] == 1.0 and gpus["achievable_note"] is None  # per GPU x 2, below the datasheet


def test_the_peak_is_scanned_once_kept_for_the_sweep_and_later_sweeps_and_rescanned_when_the_host_changes(
        monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(achievable, "scan", lambda kind, backend, min_seconds: calls.append(min_seconds) or FAKE)
    monkeypatch.setattr(achievable, "_SCANNED", {})
    monkeypatch.setattr(achievable, "_LAST", {})
    versions = {"jax": "jax 0.7.2, jaxlib 0.7.2"}
    monkeypatch.setattr(achievable, "_backend_version", lambda backend: versions[backend])
    sweep, cache = tmp_path / "sweep" / "host.json", tmp_path / "cache" / "host-facts.json"
    monkeypatch.setenv(HOST_FACTS_ENV, str(sweep))
    monkeypatch.setenv(HOST_CACHE_ENV, str(cache))
    monkeypatch.setenv(achievable.SCAN_SECONDS_ENV, "0.25")

    first = achievable.achievable_peak("cpu", "jax")
    assert calls == [0.25] and first.measured_by == "this run, kept for the sweep's runs and later sweeps on this host"
    assert first.identity == {"kind": "cpu", "backend": "jax", "backend_version": "jax 0.7.2, jaxlib 0.7.2"}
    kept = json.loads(cache.read_text())
    assert kept["achievable_peak"]["jax:cpu"]["per_precision"] == FAKE.per_precision
    assert kept["host"] == bandwidth.host_identity() and "logical_cpus" in kept["host"]

    monkeypatch.setattr(achievable, "_SCANNED", {})  # a later run of the sweep, in another process
    again = achievable.achievable_peak("cpu", "jax")
    assert len(calls) == 1 and again.measured_by == "an earlier run of the sweep on this host"
    assert dataclasses.replace(again, measured_by=FAKE.measured_by, identity={}) == FAKE
    monkeypatch.delenv(HOST_FACTS_ENV)  # a later sweep: the sweep's file is gone, the host's cache is not
    later = achievable.achievable_peak("cpu", "jax")
    assert len(calls) == 1 and later.measured_by == "an earlier sweep on this host (the host's cache)"
    assert achievable.achievable_record("cpu", "jax")["measured_by"] == later.measured_by

    versions["jax"] = "jax 0.8.0, jaxlib 0.8.0"  # a new library: another stack, so another peak
    assert achievable.achievable_peak("cpu", "jax").identity["backend_version"] == "jax 0.8.0, jaxlib 0.8.0"
    assert len(calls) == 2
    stored = json.loads(cache.read_text())
    assert stored["achievable_peak"]["jax:cpu"]["identity"]["backend_version"] == "jax 0.8.0, jaxlib 0.8.0"
    stored["host"]["logical_cpus"] += 1  # another core count (or host name, CPU model, cache): nothing kept is used
    cache.write_text(json.dumps(stored))
    monkeypatch.setattr(achievable, "_SCANNED", {})
    achievable.achievable_peak("cpu", "jax")
    assert len(calls) == 3

    monkeypatch.setattr(achievable, "_SCANNED", {})
    monkeypatch.setenv(HOST_CACHE_ENV, "off")  # no cache: scanned in every process, nothing written
    assert achievable.achievable_peak("cpu", "jax").measured_by == "this process" and len(calls) == 4
    torch = achievable.achievable_fields("cpu", "torch", 1, "float32", 0.1, 0.4)
    assert torch["mfu_achievable"] is None and "torch" in torch["achievable_note"]


def test_a_gpu_s_identity_names_every_gpu_and_its_driver(monkeypatch):
    from colabkit.device import probes

    monkeypatch.setattr(probes, "nvidia_smi", lambda: [{"name": "Tesla T4", "driver_version": "550.54"}])
    identity = achievable.scan_identity("gpu", "tensorflow")
    assert identity["gpus"] == [["Tesla T4", "550.54"]] and identity["backend_version"].startswith("tensorflow ")


def test_the_bandwidth_probe_keeps_the_achievable_peak_in_the_host_facts(tmp_path):
    facts = tmp_path / "host.json"
    facts.write_text(json.dumps({"host": bandwidth.host_identity(), "achievable_peak": {"jax:cpu": {}}}))
    bandwidth.write_host_facts(facts, bandwidth.BandwidthMeasurement(10.0, 9.0, 1, 1, 1, "fake"))
    written = json.loads(facts.read_text())
    assert written["achievable_peak"] == {"jax:cpu": {}} and written["cpu_bandwidth"]["gb_per_s"] == 10.0


@pytest.mark.parametrize("place, said", [
    ("garbage", "is not a host-facts file colabkit wrote (JSONDecodeError): left as it is"),
    ("folder", "is a folder, not a file"),
    ("under a file", "cannot be written ("),
])
def test_a_host_cache_that_cannot_keep_the_scan_is_said_in_one_line_and_never_overwritten(monkeypatch, tmp_path,
                                                                                          capsys, place, said):
    monkeypatch.setattr(achievable, "scan", lambda kind, backend, min_seconds: FAKE)
    monkeypatch.setattr(achievable, "_SCANNED", {})
    monkeypatch.setattr(achievable, "_SAID", set())
    monkeypatch.setattr(achievable, "_backend_version", lambda backend: "jax 0.7.2")
    monkeypatch.delenv(HOST_FACTS_ENV, raising=False)
    cache = {"garbage": tmp_path / "facts.json", "folder": tmp_path / "folder",
             "under a file": tmp_path / "a-file" / "facts.json"}[place]
    (tmp_path / "facts.json").write_text("not json at all")
    (tmp_path / "folder").mkdir()
    (tmp_path / "a-file").write_text("a file where the cache's folder would be")
    monkeypatch.setenv(HOST_CACHE_ENV, str(cache))
    peak = achievable.achievable_peak("cpu", "jax")
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"colabkit: {HOST_CACHE_ENV}={cache}: {said}")
    assert line.endswith("the scan is not kept for later sweeps") and said in peak.measured_by
    assert (tmp_path / "facts.json").read_text() == "not json at all"  # never overwritten
    achievable.achievable_peak("cpu", "jax")
    assert capsys.readouterr().err == ""  # once per process


def test_the_host_cache_is_named_by_the_environment_or_the_user_s_cache_folder(monkeypatch, tmp_path):
    monkeypatch.setenv(HOST_CACHE_ENV, str(tmp_path / "facts.json"))
    assert bandwidth.host_cache_path() == tmp_path / "facts.json"
    monkeypatch.setenv(HOST_CACHE_ENV, "off")
    assert bandwidth.host_cache_path() is None
    monkeypatch.delenv(HOST_CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert bandwidth.host_cache_path() == tmp_path / "colabkit" / "host-facts.json"


def test_a_sweep_says_before_its_runs_that_the_first_one_scans_once_per_host(monkeypatch, tmp_path):
    from colabkit.sweep.decide import decide
    from colabkit.sweep.options import RunOptions
    from colabkit.sweep.plan import plan
    from colabkit.sweep.runners.local import SerialExecutor

    monkeypatch.setattr(achievable, "scan", lambda kind, backend, min_seconds: FAKE)
    monkeypatch.setattr(achievable, "_SCANNED", {})
    monkeypatch.setattr(achievable, "_LAST", {})
    cache = tmp_path / "host-facts.json"
    monkeypatch.setenv(HOST_CACHE_ENV, str(cache))
    monkeypatch.delenv(HOST_FACTS_ENV, raising=False)
    runs = plan([str(REPO / "parameters" / "cnn_mnist.yaml")], "smoke", "cpu", {}, tmp_path / "out", 1)
    executor = SerialExecutor(tmp_path / "out", RunOptions(), {"cpu": 1})
    to_run = [decision for decision in decide(runs, tmp_path / "out", {"cpu": 1}) if decision.action == "run"]
    [note] = executor.notes(to_run)  # one line for the kind and backend, however many runs share them
    assert "first cpu training run on tensorflow also scans the achievable matmul peak" in note
    assert "once per host" in note and str(cache) in note
    achievable.achievable_peak("cpu", "tensorflow")  # the first run scans, and keeps it in the host's cache
    assert executor.notes(to_run) == []  # a later sweep reuses it: nothing to explain
