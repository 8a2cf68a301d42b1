"""Was the host quiet? The host read right (through psutil), the verdict's thresholds, NVML through a stand-in, waiting for
quiet, and a sweep run beside two busy loops: its record says host_quiet false and why, and the report
marks it."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import astuple
from pathlib import Path
import textwrap
from types import SimpleNamespace

import psutil
import pytest
from notebook_factory import write_tiny_notebook

from colabkit import report
from colabkit.device.nvml import GpuSampler, throttle_names
from colabkit.device.host_state import (
    OTHER_CPU_SHARE_MAX,
    CpuTimes,
    HostMonitor,
    Snapshot,
    cpu_clocks_mhz,
    cpu_times,
    cpu_window,
    load_average,
    process_cpu_s,
    quiet_verdict,
    wait_for_quiet,
)
from colabkit.records.record import read_record
from colabkit.sweep.options import RunOptions
from colabkit.sweep.plan import plan
from colabkit.sweep.driver import run_sweep

PROC_STAT = """cpu  1000 20 300 5000 40 5 6 70 0 0
cpu0 500 10 150 2500 20 2 3 35 0 0
cpu1 500 10 150 2500 20 3 3 35 0 0
intr 12345
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="psutil reads a /proc elsewhere only on Linux")
def test_cpu_times_and_clocks_are_read_as_linux_writes_them(tmp_path, monkeypatch):
    (tmp_path / "stat").write_text(PROC_STAT)
    (tmp_path / "cpuinfo").write_text("processor\t: 0\ncpu MHz\t\t: 2600.000\n\nprocessor\t: 1\ncpu MHz\t\t: 1800.5\n")
    monkeypatch.setattr(psutil, "PROCFS_PATH", str(tmp_path))
    ticks = os.sysconf("SC_CLK_TCK")
    # busy: user + nice + system + irq + softirq; total adds idle, iowait and steal (1331 + 5000 + 40 + 70 ticks)
    assert astuple(cpu_times()) == pytest.approx((1331 / ticks, 70 / ticks, 6441 / ticks, 2))  # busy, steal, total, cpus
    if not Path("/sys/devices/system/cpu/cpu0/cpufreq").exists():  # else psutil may read cpufreq's clocks
        assert cpu_clocks_mhz() == [2600.0, 1800.5]
    monkeypatch.setattr(psutil, "PROCFS_PATH", str(tmp_path / "absent"))
    assert cpu_times() is None and cpu_clocks_mhz() == []


def test_a_process_cpu_time_and_the_load_are_this_hosts():
    mine = os.times()
    assert process_cpu_s(os.getpid()) == pytest.approx(mine.user + mine.system, abs=0.05)
    assert process_cpu_s(2**31 - 1) is None  # no such process
    load = load_average()
    assert load is not None and len(load) == 3 and all(value >= 0 for value in load)


def snapshot(at: float, busy: float, steal: float, total: float, own: float, parent: float = 0.0) -> Snapshot:
    return Snapshot(at, CpuTimes(busy, steal, total, 2), own, 0.0, parent, [0.5, 0.4, 0.3])


def test_other_processes_time_is_all_busy_time_but_ours_and_our_parents():
    window = cpu_window(snapshot(0, 100, 1, 1000, 10, 5), snapshot(10, 116, 1.2, 1020, 14, 6))
    # 16 CPU-s busy, of which 4 ours and 1 the sweep's: 11 CPU-s of others over 10 s x 2 CPUs
    assert window["other_cpu_s"] == pytest.approx(11.0) and window["other_cpu_share"] == pytest.approx(0.55)
    assert window["steal_share"] == pytest.approx(0.2 / 20)
    busy, reasons = quiet_verdict(window)
    assert busy is False and "other processes took 55 % of the CPUs' time" in reasons[0]
    quiet = cpu_window(snapshot(0, 100, 1, 1000, 10), snapshot(10, 111, 1, 1020, 20))
    assert quiet_verdict(quiet) == (True, [])
    assert quiet_verdict({**quiet, "steal_share": 0.2})[1] == ["the hypervisor stole 20 % of the CPU time "
                                                              "(threshold 5 %)"]
    assert "the CPU clock varied from 1200 to 2600 MHz" in quiet_verdict({**quiet, "cpu_mhz": {"min": 1200,
                                                                                                "max": 2600}})[1][0]
    assert quiet_verdict({"other_cpu_share": None, "gpu": {"available": False}}) == (None, [])


class FakeNvml:
    """pynvml's functions as HostMonitor calls them, for two GPUs: one throttled by heat, another
    process on the second (installed as `pynvml`, which colabkit.device.nvml opens)."""

    NVML_CLOCK_SM = 1
    NVMLError = type("NVMLError", (Exception,), {})

    def __init__(self) -> None:
        self.clocks = iter([1590.0, 1410.0, 1200.0, 1530.0])
        self.shut = False

    def nvmlInit(self) -> None: ...

    def nvmlShutdown(self) -> None:
        self.shut = True

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetClockInfo(self, handle: int, clock: int) -> float:
        return next(self.clocks)

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: int) -> int:
        return 0x4 if handle == 0 else 0x20  # the software power cap (normal at load), a thermal slowdown

    def nvmlDeviceGetComputeRunningProcesses(self, handle: int) -> list:
        return [SimpleNamespace(pid=4242)] if handle == 1 else []


def test_gpus_through_nvml_give_the_clock_range_throttles_and_other_processes(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)  # both GPUs visible
    nvml = FakeNvml()
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    sampler = GpuSampler().start()
    sampler.sample()
    sampler.sample()
    state = sampler.stop()
    assert state["available"] and state["gpus"] == 2 and state["readings"] == 2 and nvml.shut
    assert state["sm_mhz"] == {"min": 1200.0, "max": 1590.0}
    assert state["throttle_reasons"] == ["sw_power_cap", "sw_thermal_slowdown"] and state["other_pids"] == [4242]
    assert state["busy_reasons"] == ["a GPU was throttled (sw thermal slowdown)",
                                     "1 other process(es) used a GPU (pids 4242)"]
    assert quiet_verdict({"other_cpu_share": 0.0, "gpu": state})[0] is False
    assert throttle_names(0x41) == ["gpu_idle", "hw_thermal_slowdown"]
    monkeypatch.setitem(sys.modules, "pynvml", None)  # not installed
    missing = GpuSampler().start().stop()
    assert missing["available"] is False and missing["reason"].startswith("NVML is not installed")


def test_only_the_gpus_cuda_visible_devices_names_are_read(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")  # a job on GPU 0 while GPU 1 is hot and used by another
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml())
    sampler = GpuSampler().start()
    sampler.sample()
    state = sampler.stop()
    assert state["available"] and state["gpus"] == 1 and state["sm_mhz"] == {"min": 1590.0, "max": 1590.0}
    assert state["throttle_reasons"] == ["sw_power_cap"] and state["other_pids"] == [] and state["busy_reasons"] == []


def test_a_monitor_reports_every_field_and_a_verdict():
    state = HostMonitor(interval_s=0.05, gpus=False).start().stop()
    assert {"wall_s", "own_cpu_s", "other_cpu_share", "load_before", "quiet", "busy_reasons", "thresholds"} <= set(state)
    assert state["thresholds"]["other_cpu_share_max"] == OTHER_CPU_SHARE_MAX
    assert state["quiet"] in (True, False)  # /proc is readable here: a verdict, never a guess


@pytest.fixture
def busy_loops():
    """Two CPU-bound processes competing for this 2-core machine; stopped by their pids afterwards."""
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        yield loops
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()


def test_waiting_for_quiet_gives_up_after_its_time_and_says_why(busy_loops):
    wait = wait_for_quiet(0.5, window_s=0.5)
    assert wait["quiet"] is False and wait["waited_s"] < 2
    assert "other processes took" in wait["busy_reasons"][0]


@pytest.mark.notebook
def test_a_sweep_beside_busy_processes_records_host_quiet_false_and_the_report_marks_it(tmp_path, busy_loops):
    notebook = write_tiny_notebook(tmp_path / "tiny.ipynb")
    grid = tmp_path / "grid.yaml"
    grid.write_text(textwrap.dedent(f"""
        notebook: {notebook}
        grid: {{device: [cpu], value: [1]}}
        fixed: {{sleep_on: 1, sleep_s: 1.5}}
    """))
    lines: list[str] = []
    (outcome,) = run_sweep(plan([grid], out=tmp_path / "out", options=RunOptions(wait_quiet_s=0.5)),
                           available={"cpu": 1},
                           echo=lines.append)
    # the console says it measured on a busy host: on the run's line (and in the summary table's note)
    assert outcome.status == "ok" and outcome.message.startswith("measured on a busy host: still busy after waiting")
    assert any(line.startswith("[1/1] ok") and "measured on a busy host" in line for line in lines), lines
    record = read_record(outcome.record_path)
    assert record["status"] == "ok" and record["host_quiet"] is False
    assert any("other processes took" in reason for reason in record["host_state"]["busy_reasons"])
    assert record["host_state"]["other_cpu_share"] > OTHER_CPU_SHARE_MAX
    assert record["sweep"]["quiet_wait"]["quiet"] is False  # it waited, and the host never got quiet
    data = report.load_report_data([tmp_path / "out"])
    summary = report.summary_section(data)  # one line in the Summary, the table in the appendix
    assert any(text.startswith("1 of the 1 ok run(s) were made on a busy host") for text in summary.text)
    assert not summary.warnings and "runs_on_a_busy_host" not in summary.tables
    busy = report.overview_section(data).table("runs_on_a_busy_host")
    assert busy["counted"].tolist() == [True] and "other processes took" in busy["why"].item()
    left_out = report.load_report_data([tmp_path / "out"], exclude_busy=True)
    assert left_out.runs("tiny").empty and "busy host" in left_out.merges["not counted"].item()
