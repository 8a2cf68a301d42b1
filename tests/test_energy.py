"""Energy over timed windows (colabkit.device.energy, docs/cost.md), with a stand-in `pynvml` (tests/fake_nvml.py) and
a stand-in powercap tree: a GPU's total-energy counter read at the window's edges, its power sampled where a board has
no counter, a CPU's RAPL counters with their wrap-around, and "not measured" with the reason, each recorded as such,
for training (per epoch and sample), inference (per inference) and decode (per generated token)."""

from __future__ import annotations

import threading
import time
import types
from pathlib import Path

import numpy as np
import pytest
from fake_nvml import Board, fake_nvml, install

from colabkit.device import energy_source, nvml, rapl
from colabkit.device.energy import TPU_REASON, energy_metrics, open_energy_source, source_fields
from colabkit.device.energy_source import MIN_WINDOW_S, EnergyMethod, Mark
from colabkit.device.nvml import GpuEnergyCounter, PowerSampler, idle_power, visible_gpu_indices
from colabkit.device.rapl import RaplCounter, rapl_zones


class Clock:
    """A perf_counter the test moves: the boards' energy and the windows' edges both follow it."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def windows_follow(monkeypatch, perf_counter) -> None:
    """Every energy source's marks read `perf_counter` for the time."""
    for module in (energy_source, nvml, rapl):
        monkeypatch.setattr(module, "time", types.SimpleNamespace(perf_counter=perf_counter))


@pytest.fixture
def clock(monkeypatch) -> Clock:
    ticking = Clock()
    windows_follow(monkeypatch, ticking)
    return ticking


# --- the GPU's counter --------------------------------------------------------------------------------------------

def test_the_counter_gives_each_windows_energy_from_two_reads_and_samples_nothing(monkeypatch, clock):
    nvml = install(monkeypatch, fake_nvml([Board(150.0), Board(250.0), Board(999.0)], clock=clock))
    source = open_energy_source("gpu", [0, 1])  # NVML's indices 0 and 1; board 2 is not this run's
    assert isinstance(source, GpuEnergyCounter) and source.method == EnergyMethod.COUNTER
    begin = source.mark()
    clock.now += 2.5
    end = source.mark()
    source.stop()
    window = source.energy(begin, end)  # the counter's millijoules since the driver loaded, differenced
    assert window.joules == pytest.approx((150.0 + 250.0) * 2.5) and window.mean_power_w == pytest.approx(400.0)
    assert window.reason is None and window.seconds == pytest.approx(2.5)
    assert nvml.calls == ["init", "shutdown"] and nvml.initialised() == 0
    fields = source_fields(source)
    assert fields["energy_method"] == "counter" and fields["energy_reason"] is None
    assert fields["energy_source"].startswith("NVML total-energy counter of GPU 0, 1")
    assert "colabkit-power" not in {thread.name for thread in threading.enumerate()}


def test_a_window_shorter_than_the_counters_steps_allow_has_no_figure_and_says_why(monkeypatch, clock):
    install(monkeypatch, fake_nvml([Board(300.0)], clock=clock, update_s=0.1))
    source = open_energy_source("gpu", [0])
    begin = source.mark()
    clock.now += 0.4
    short = source.energy(begin, source.mark())
    assert short.joules is None and f"shorter than {MIN_WINDOW_S:g} s" in short.reason
    begin = source.mark()
    clock.now += 3.0
    long = source.energy(begin, source.mark())
    assert long.joules == pytest.approx(900.0, abs=300.0 * 0.1)  # one 100 ms step at most
    still = GpuEnergyCounter([0], min_window_s=0.0).start()
    clock.now += 0.05  # halfway through one of the counter's 100 ms steps
    begin = still.mark()
    clock.now += 0.02  # still within it: the counter did not move
    assert "did not advance" in still.energy(begin, still.mark()).reason
    still.stop()
    source.stop()


def test_nvml_ignores_cuda_visible_devices_so_the_counter_reads_the_board_cuda_calls_gpu_0(monkeypatch, clock):
    install(monkeypatch, fake_nvml([Board(100.0), Board(200.0), Board(300.0)], clock=clock))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2")
    source = open_energy_source("gpu", visible_gpu_indices(1))
    begin = source.mark()
    clock.now += 1.0
    assert source.energy(begin, source.mark()).joules == pytest.approx(300.0)  # board 2's, not board 0's
    source.stop()


def test_visible_devices_map_to_nvml_indices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert visible_gpu_indices(1) == [2]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert visible_gpu_indices(2) == [0, 1]
    for hides_all in ("", "-1"):  # set but empty, or CUDA's "none": a CPU job's kernel sees no GPU
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", hides_all)
        assert visible_gpu_indices(2) == []
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,x,0")  # CUDA stops at the first invalid entry
    assert visible_gpu_indices(3) == [1]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-5d3c")  # UUIDs: not mapped, NVML's order
    assert visible_gpu_indices(1) == [0]


def test_a_board_lost_mid_run_keeps_the_method_and_gives_no_figure_with_why(monkeypatch, clock):
    nvml = install(monkeypatch, fake_nvml([Board(200.0)], clock=clock))
    source = open_energy_source("gpu", [0])
    begin = source.mark()
    clock.now += 2.0
    nvml.lost = True
    window = source.energy(begin, source.mark())
    source.stop()
    assert window.joules is None and window.reason == "NVML stopped answering: GPU is lost"
    assert source_fields(source) == {"energy_method": "counter", "energy_source": source.source,
                                     "energy_reason": "NVML stopped answering: GPU is lost"}


def counter_jumps(monkeypatch, clock, before_mj: int, after_mj: int, board: Board) -> str | None:
    """The reason the counter's window gives when NVML's counter reads `before_mj`, then `after_mj` 1.1 s later."""
    board.watts, board.at_driver_load_mj = 0.0, before_mj
    install(monkeypatch, fake_nvml([board], clock=clock))
    source = open_energy_source("gpu", [0])
    begin = source.mark()
    clock.now += 1.1
    board.at_driver_load_mj = after_mj
    end = source.mark()
    source.stop()
    window = source.energy(begin, end)
    if window.reason is None:
        return None
    metrics = energy_metrics(source, [(begin, end)], [100])  # a training record: no figure, and why
    assert window.joules is None and metrics["energy_j_per_epoch"] is None and metrics["mean_power_w"] is None
    assert metrics["energy_reason"] == f"a steady epoch has no energy figure: {window.reason}"
    return window.reason


def test_a_counter_reading_more_power_than_the_board_can_draw_is_not_a_measurement(monkeypatch, clock):
    """Issue 58: 1,000 mJ to 2^64-1 mJ over 1.1 s gave 1.84e16 J (1.68e16 W); 0 to 2^32-1 mJ gave 3.9 MW."""
    assert counter_jumps(monkeypatch, clock, 1_000, 2**64 - 1, Board(0.0)) == (
        "the energy counter of GPU 0 gave 1.845e+16 J over the 1.1 s window, 1.677e+16 W: more than 1.5x its 400 W "
        "power limit (NVML's enforced power limit): not a measurement")
    assert counter_jumps(monkeypatch, clock, 0, 4_294_967_295, Board(0.0, limit_w=70.0)) == (
        "the energy counter of GPU 0 gave 4.295e+06 J over the 1.1 s window, 3.905e+06 W: more than 1.5x its 70 W "
        "power limit (NVML's enforced power limit): not a measurement")
    # a board without power management: 2 kW per GPU
    assert counter_jumps(monkeypatch, clock, 0, 4_294_967_295, Board(0.0, limit_w=None)) == (
        "the energy counter of GPU 0 gave 4.295e+06 J over the 1.1 s window, 3.905e+06 W: more than 1.5x its 2000 W "
        "power limit (NVML gives none: the most colabkit takes one GPU to draw): not a measurement")
    assert counter_jumps(monkeypatch, clock, 1_000, 1_000 + 400 * 1100, Board(0.0)) is None  # 400 W on 400 W
    # the counter's steps at a window's edges: a board at its limit may read above it, up to the margin
    install(monkeypatch, fake_nvml([Board(560.0, limit_w=400.0), Board(610.0, limit_w=400.0)], clock=clock))
    source = open_energy_source("gpu", [0])
    begin = source.mark()
    clock.now += 2.0
    assert source.energy(begin, source.mark()).joules == pytest.approx(560.0 * 2.0)  # 1.4x: kept
    source.stop()
    source = open_energy_source("gpu", [0, 1])
    begin = source.mark()
    clock.now += 2.0
    assert source.energy(begin, source.mark()).reason.startswith(
        "the energy counter of GPU 1 gave 1220 J over the 2 s window, 610 W: more than 1.5x its 400 W")
    source.stop()


def test_a_counter_that_went_backwards_says_so_not_that_it_moves_in_steps(monkeypatch, clock):
    assert counter_jumps(monkeypatch, clock, 9_000_000, 2_000, Board(0.0)) == (
        "the energy counter of GPU 0 went backwards over the 1.1 s window, from 9000 J to 2 J: not a measurement")


# --- sampling, where a board has no counter ----------------------------------------------------------------------

def test_a_board_without_the_counter_has_its_power_sampled_and_the_record_says_why(monkeypatch):
    # board 1 is a Pascal: NVML refuses its counter (NotSupported), so both boards are sampled, summed
    nvml = install(monkeypatch, fake_nvml([Board(100.0), Board(100.0, has_counter=False)]))
    source = open_energy_source("gpu", [0, 1], interval_s=0.01, min_window_s=0.0)
    assert isinstance(source, PowerSampler) and source.method == EnergyMethod.SAMPLED
    begin = source.mark()
    deadline = time.monotonic() + 60  # a guard against a hang only: three samples taken are the event waited for
    while len(source.samples) < 3:
        assert time.monotonic() < deadline, "the sampler took fewer than 3 samples in 60 s"
        time.sleep(0.01)
    end = source.mark()
    source.stop()
    assert len(source.samples) >= 3 and {watts for _, watts in source.samples} == {200.0}
    window = source.energy(begin, end)  # constant power: the trapezoids are exact
    assert window.joules == pytest.approx(200.0 * (end.at_s - begin.at_s)) and window.reason is None
    assert nvml.initialised() == 0  # the counter's probe and the sampler each shut NVML down
    fields = source_fields(source)
    assert fields["energy_method"] == "sampled" and fields["energy_reason"] is None
    assert "sampled every 0.01 s (no total-energy counter: nvmlDeviceGetTotalEnergyConsumption: Not Supported)" \
        in fields["energy_source"]


def test_sampling_can_be_asked_for_beside_a_counter_to_compare_the_two(monkeypatch):
    install(monkeypatch, fake_nvml([Board(80.0)]))
    source = open_energy_source("gpu", [0], sampled=True, interval_s=0.01, min_window_s=0.0)
    assert source.method == EnergyMethod.SAMPLED and "no total-energy counter" not in source.source
    source.stop()


def test_sampled_power_beyond_the_boards_limit_is_not_a_measurement(monkeypatch, clock):
    install(monkeypatch, fake_nvml([Board(50_000.0, has_counter=False, limit_w=250.0)], clock=clock))
    source = open_energy_source("gpu", [0], interval_s=0.01)
    begin = source.mark()
    clock.now += 2.0
    end = source.mark()
    source.stop()
    assert source.energy(begin, end).reason == (
        "the sampled power of GPU 0 gave 1e+05 J over the 2 s window, 5e+04 W: more than 1.5x its 250 W power limit "
        "(NVML's enforced power limit): not a measurement")


# --- not measured -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("where, expected", [
    ("no nvidia-ml-py", "NVML is not installed (pip install nvidia-ml-py)"),
    ("no driver", "NVML is not available: NVML Shared Library Not Found"),
    ("CUDA_VISIBLE_DEVICES hides every GPU", "no GPU is visible to this process (CUDA_VISIBLE_DEVICES hides them)"),
    ("a TPU", TPU_REASON),
])
def test_where_nothing_can_be_read_the_record_says_not_measured_and_why(monkeypatch, where, expected):
    kind, gpus = "gpu", [0]
    if where == "no nvidia-ml-py":
        install(monkeypatch, None)
    elif where == "no driver":
        install(monkeypatch, fake_nvml([Board(100.0)], init_fails="LIBRARY_NOT_FOUND"))
    elif where == "CUDA_VISIBLE_DEVICES hides every GPU":
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
        gpus = visible_gpu_indices(1)
    else:
        kind = "tpu"
    source = open_energy_source(kind, gpus)
    source.stop()
    assert source.method == EnergyMethod.NOT_MEASURED
    assert energy_metrics(source, [(Mark(0.0), Mark(5.0))], [100]) == {
        "energy_j_per_epoch": None, "energy_j_per_sample": None, "mean_power_w": None,
        "energy_method": "not measured", "energy_source": None, "energy_reason": expected}


def test_on_this_cpu_the_record_says_whether_rapl_was_read_and_if_not_why():
    source = open_energy_source("cpu")
    source.stop()
    fields = source_fields(source)
    if not any(Path("/sys/class/powercap").glob("intel-rapl:*")):  # this VM: no powercap at all
        assert fields["energy_method"] == "not measured" and fields["energy_source"] is None
        assert fields["energy_reason"].startswith("RAPL is not exposed here: no /sys/class/powercap/intel-rapl:* zones")
    else:  # a host that has RAPL: read, or (not root) refused with the fix
        assert (fields["energy_method"], fields["energy_reason"] is None) in (("rapl", True), ("not measured", False))


# --- RAPL -------------------------------------------------------------------------------------------------------

RANGE_UJ = 262_143_328_850  # a Xeon package's max_energy_range_uj


def powercap(root: Path, zones: dict[str, tuple[str, int]]) -> Path:
    """A /sys/class/powercap tree: folder -> (name, energy_uj)."""
    for folder, (name, energy_uj) in zones.items():
        (root / folder).mkdir(parents=True)
        (root / folder / "name").write_text(name + "\n")
        (root / folder / "energy_uj").write_text(f"{energy_uj}\n")
        (root / folder / "max_energy_range_uj").write_text(f"{RANGE_UJ}\n")
    return root


def set_energy(root: Path, folder: str, energy_uj: int) -> None:
    (root / folder / "energy_uj").write_text(f"{energy_uj}\n")


def test_rapl_sums_the_packages_and_dram_once_and_undoes_a_wrap(tmp_path, clock):
    root = powercap(tmp_path, {"intel-rapl:0": ("package-0", RANGE_UJ - 10_000_000), "intel-rapl:0:0": ("core", 5),
                               "intel-rapl:0:1": ("dram", 1_000_000), "intel-rapl:1": ("psys", 9),
                               "intel-rapl-mmio:0": ("package-0", 7)})
    assert [zone.name for zone in rapl_zones(root)] == ["package-0", "dram"]  # core, psys, mmio: counted twice
    source = open_energy_source("cpu", powercap=root)
    assert isinstance(source, RaplCounter) and source.method == EnergyMethod.RAPL
    begin = source.mark()
    clock.now += 2.0
    set_energy(root, "intel-rapl:0", 90_000_000)  # wrapped: 10 J to the top, then 90 J
    set_energy(root, "intel-rapl:0:1", 21_000_000)  # DRAM: 20 J
    window = source.energy(begin, source.mark())
    source.stop()
    assert window.joules == pytest.approx(10.0 + 90.0 + 20.0) and window.mean_power_w == pytest.approx(60.0)
    fields = source_fields(source)
    assert fields["energy_method"] == "rapl" and fields["energy_reason"] is None
    assert fields["energy_source"] == ("RAPL package-0 (intel-rapl:0), dram (intel-rapl:0:1): the CPU packages, "
                                       "not the rest of the machine")


def test_a_window_longer_than_the_counters_range_is_counted_whole_by_the_reads_between(tmp_path, clock):
    root = powercap(tmp_path, {"intel-rapl:0": ("package-0", 0)})
    source = open_energy_source("cpu", powercap=root)
    begin = source.mark()
    for reading in (RANGE_UJ // 2, RANGE_UJ - 1, RANGE_UJ // 4):  # what the watching thread reads between marks
        clock.now += 100.0
        set_energy(root, "intel-rapl:0", reading)
        source.mark()
    end = source.mark()
    source.stop()
    assert source.energy(begin, end).joules == pytest.approx((RANGE_UJ + RANGE_UJ // 4) / 1e6)


def test_a_rapl_counter_reset_read_as_a_wrap_is_beyond_the_packages_limit_and_not_a_measurement(tmp_path, clock):
    root = powercap(tmp_path, {"intel-rapl:0": ("package-0", 200_000_000), "intel-rapl:0:0": ("dram", 0)})
    package = root / "intel-rapl:0"
    (package / "enabled").write_text("1\n")
    (package / "constraint_0_power_limit_uw").write_text("65000000\n")  # long term (PL1)
    (package / "constraint_1_power_limit_uw").write_text("90000000\n")  # short term (PL2)
    assert [(zone.name, zone.limit.watts) for zone in rapl_zones(root)] == [("package-0", 90.0), ("dram", 1000.0)]
    source = open_energy_source("cpu", powercap=root)
    begin = source.mark()
    clock.now += 2.0
    set_energy(root, "intel-rapl:0", 1_000_000)  # reset, not wrapped: read as a wrap, 262 kJ in 2 s
    set_energy(root, "intel-rapl:0:0", 30_000_000)
    window = source.energy(begin, source.mark())
    source.stop()
    assert window.joules is None and window.reason == (
        "the RAPL counter of package-0 gave 2.619e+05 J over the 2 s window, 1.31e+05 W: more than 1.5x its 90 W "
        "power limit (the highest of RAPL's power limits of the zone): not a measurement")
    (package / "enabled").write_text("0\n")  # limits not enforced: 1 kW, the most a package is taken to draw
    assert rapl_zones(root)[0].limit.watts == 1000.0


def test_rapl_readable_by_root_only_or_absent_is_not_measured_with_the_fix(tmp_path, monkeypatch):
    absent = open_energy_source("cpu", powercap=tmp_path / "none")
    assert absent.method == EnergyMethod.NOT_MEASURED
    assert absent.reason.startswith(f"RAPL is not exposed here: no {tmp_path / 'none'}/intel-rapl:* zones")
    root = powercap(tmp_path / "powercap", {"intel-rapl:0": ("package-0", 5)})
    read_text = Path.read_text

    def root_only(path: Path, *args, **kwargs) -> str:  # Linux >= 5.10: energy_uj is mode 0400
        if path.name == "energy_uj":
            raise PermissionError(13, "Permission denied", str(path))
        return read_text(path, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", root_only)
    refused = open_energy_source("cpu", powercap=root)
    assert refused.method == EnergyMethod.NOT_MEASURED
    assert refused.reason == (f"RAPL's {root / 'intel-rapl:0' / 'energy_uj'} is readable by root only (as Linux has it "
                              "since 5.10): run as root, or let this user read the energy_uj files (chmod o+r)")


# --- per unit of work ---------------------------------------------------------------------------------------------

def test_the_training_meter_gives_joules_per_epoch_and_per_sample_over_the_steady_epochs_only(monkeypatch, clock):
    from colabkit.training.energy import EnergyMeter

    install(monkeypatch, fake_nvml([Board(50.0)], clock=clock))
    meter = EnergyMeter("gpu", replicas=1, global_batch_size=32)
    for epoch, seconds in enumerate((9.0, 2.0, 3.0)):  # the first: tracing and compilation, left out
        meter.on_epoch_begin(epoch)
        for step in range(4):
            meter.on_train_batch_begin(step)
            clock.now += seconds / 4
            meter.on_train_batch_end(step)
        meter.on_epoch_end(epoch)
    meter.on_train_end()
    assert meter.samples == [128, 128] and meter.intervals == [(1009.0, 1011.0), (1011.0, 1014.0)]
    metrics = meter.metrics()
    assert metrics["energy_method"] == "counter" and metrics["energy_reason"] is None
    assert metrics["energy_j_per_epoch"] == pytest.approx((100.0 + 150.0) / 2)  # the median of 100 J and 150 J
    assert metrics["energy_j_per_sample"] == pytest.approx(250.0 / 256)
    assert metrics["mean_power_w"] == pytest.approx(50.0)


def test_the_training_meter_counts_a_partial_last_batch_as_what_it_holds(monkeypatch, clock):
    from colabkit.training.energy import EnergyMeter

    install(monkeypatch, fake_nvml([Board(50.0)], clock=clock))
    # 100 samples in batches of 32: 32 + 32 + 32 + 4 per epoch, not 4 x 32 = 128.
    meter = EnergyMeter("gpu", replicas=1, global_batch_size=32, dataset_size=100)
    for epoch in range(2):
        meter.on_epoch_begin(epoch)
        for step in range(4):
            meter.on_train_batch_begin(step)
            clock.now += 0.5
            meter.on_train_batch_end(step)
        meter.on_epoch_end(epoch)
    meter.on_train_end()
    assert meter.samples == [100] and meter.metrics()["energy_j_per_sample"] == pytest.approx(100.0 / 100)


def test_a_one_epoch_fit_names_the_method_and_why_it_has_no_figure(monkeypatch):
    from colabkit.training.energy import EnergyMeter

    install(monkeypatch, fake_nvml([Board(50.0)]))
    meter = EnergyMeter("gpu", replicas=1, global_batch_size=32)
    meter.on_epoch_begin(0)
    meter.on_epoch_end(0)
    meter.on_train_end()
    metrics = meter.metrics()
    assert (metrics["energy_method"], metrics["energy_reason"]) == ("counter", "no steady-state epoch (only one "
                                                                               "epoch ran)")
    assert metrics["energy_j_per_sample"] is None
    assert EnergyMeter("tpu", 8, 128).metrics()["energy_reason"] == TPU_REASON


class Server:
    """A model's predict_on_batch that takes 2 ms + 0.1 ms a sample on the test's clock, which the boards follow."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    def __call__(self, batch: np.ndarray) -> np.ndarray:
        self.clock.now += 2e-3 + 1e-4 * len(batch)
        return np.zeros((len(batch), 10))


def test_inference_records_joules_per_inference_for_each_scenario(monkeypatch, clock):
    from colabkit.inference import InferenceSettings, measure_inference

    install(monkeypatch, fake_nvml([Board(200.0)], clock=clock))
    model = types.SimpleNamespace(layers=[], weights=[], dtype_policy="float32")
    device = types.SimpleNamespace(kind="gpu", replicas=1, name="a stand-in GPU")
    inference = measure_inference(model, np.zeros((16, 4), np.float32), device, InferenceSettings(100, 1.5, 60, "1,8"),
                                  call=Server(clock), clock=clock)
    metrics, section = inference.metrics, inference.record_fields["inference"]
    assert metrics["energy_method"] == "counter" and metrics["energy_reason"] is None
    single = section["single_stream"]["energy"]
    # 200 W x (2.1 ms a query): 0.42 J per inference at batch 1; 200 W x (2.8 ms / 8 samples) at batch 8
    assert metrics["single_stream_energy_j_per_inference"] == pytest.approx(0.42) == single["energy_j_per_inference"]
    assert single["energy_j"] == pytest.approx(200.0 * single["energy_window_s"])
    batch8 = section["offline"][1]
    assert batch8["energy_j_per_inference"] == pytest.approx(200.0 * 2.8e-3 / 8)
    assert batch8["energy_j"] == pytest.approx(batch8["energy_j_per_inference"] * batch8["inferences"])
    assert metrics["offline_energy_j_per_inference_b8"] == batch8["energy_j_per_inference"]
    assert metrics["offline_energy_j_per_inference"] == batch8["energy_j_per_inference"]  # offline_batch's: 8
    assert "energy (counter), J per inference: single-stream 0.42" in inference.describe()


def test_inference_on_this_cpu_says_why_it_has_no_energy(clock):
    from colabkit.inference import InferenceSettings, measure_inference

    model = types.SimpleNamespace(layers=[], weights=[], dtype_policy="float32")
    device = types.SimpleNamespace(kind="cpu", replicas=1, name="this CPU")
    rapl = RaplCounter(Path("/sys/class/powercap")).start()
    rapl.stop()
    inference = measure_inference(model, np.zeros((4, 4), np.float32), device, InferenceSettings(10, 0, 60, "2"),
                                  call=Server(clock), clock=clock)
    metrics = inference.metrics
    if rapl.method == EnergyMethod.NOT_MEASURED:
        assert metrics["energy_method"] == "not measured" and metrics["energy_reason"] == rapl.reason
        assert metrics["single_stream_energy_j_per_inference"] is None
        assert metrics["offline_energy_j_per_inference_b2"] is None
    else:  # RAPL is read here: the test clock's windows (milliseconds of real time) are too short for a figure
        assert metrics["energy_method"] == "rapl" and "shorter than" in metrics["energy_reason"]


def test_decode_records_joules_per_generated_token_over_each_timed_generation(monkeypatch):
    from helpers import notebook_builders

    from colabkit.device.memory import DeviceMemory
    from colabkit.inference.generation import measure_decode

    ticks = Clock()

    def tick() -> float:  # every read moves 1 s on: each window is two reads wide, 2 s, whatever the host's load
        ticks.now += 1.0
        return ticks.now

    windows_follow(monkeypatch, tick)
    install(monkeypatch, fake_nvml([Board(120.0)], clock=tick))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    model = notebook_builders()["build_transformer"](2, 64, 4, 48, 97, 4)
    device = types.SimpleNamespace(kind="gpu", replicas=1, name="a stand-in GPU", gpu_precision=lambda dtype: dtype,
                                   peak=lambda dtype: None, peak_bandwidth=lambda: None)
    decoded = measure_decode(model, device, prompt_lengths="8", output_tokens=4, batch_sizes="1,2",
                             memory=DeviceMemory(2**30, "a stand-in GPU"))
    rows, metrics = decoded.record_fields["decode"]["rows"], decoded.metrics
    assert metrics["energy_method"] == "counter" and metrics["energy_reason"] is None
    for row in rows:  # the window is the timed generation: its energy over batch x output tokens
        assert row["energy_window_s"] == 2.0 and row["energy_j"] == pytest.approx(120.0 * 2.0)
        assert row["energy_j_per_token"] == pytest.approx(240.0 / (row["batch"] * 4))
    assert metrics["decode_energy_j_per_token"] == rows[0]["energy_j_per_token"] == pytest.approx(60.0)  # batch 1
    best = max(rows, key=lambda row: row["tokens_per_s"])
    assert metrics["decode_energy_j_per_token_best"] == best["energy_j_per_token"]
    assert "energy (counter), J per token: batch 1, prompt 8 60" in decoded.describe()


def test_a_record_whose_energy_cannot_be_a_measurement_is_not_one():
    from colabkit.records.plausibility import measurement_problems

    assert measurement_problems({"energy_method": "not measured", "energy_j_per_sample": None}) == []
    assert measurement_problems({"energy_method": "counter", "decode_energy_j_per_token": 0.2}) == []
    assert measurement_problems({"energy_j_per_sample": 0.0, "mean_power_w": -3.0}) == [
        "energy_j_per_sample = 0.0, mean_power_w = -3.0 (must be a finite number > 0)"]
    assert measurement_problems({"energy_method": "estimated"}) == [
        "energy_method = estimated (must be one of 'counter', 'sampled', 'rapl', 'not measured')"]


def test_idle_power_is_sampled_by_the_one_power_sampler_with_the_boards_limit(monkeypatch):
    """The GPU check's idle power: NVML opened and power read through colabkit.device.nvml alone."""
    nvml = install(monkeypatch, fake_nvml([Board(55.0, limit_w=300.0), Board(999.0)]))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    found = idle_power(seconds=0.05, interval_s=0.01)
    assert found["idle_w"] == 55.0 and found["limit_w"] == 300.0 and found["readings_w"][0] == 55.0
    assert nvml.initialised() == 0  # NVML closed again
    install(monkeypatch, None)
    assert idle_power(seconds=0.01) == {"unavailable": "NVML is not installed (pip install nvidia-ml-py)"}
