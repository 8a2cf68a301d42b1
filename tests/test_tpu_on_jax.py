"""The TPU on JAX: "auto" resolves to JAX on a TPU and TensorFlow elsewhere, TPU facts come from JAX's
devices (fake ones here: "TPU v5 lite", "TPU v6e", a v2-8's eight cores), a TPU that JAX does not see
is refused with what it does see, the grids' TPU rows run on JAX, and the NumPy input pipelines keep
tf.data's semantics (passes, reshuffles, exact counts, one iterator for all epochs)."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest
from helpers import REPO

import colabkit.device.backends as backends
import colabkit.device.probes as probes
from colabkit.device.backends import resolve_backend, setup_jax, unsupported_reason
from colabkit.device.peaks import tpu_peak
from colabkit.errors import BackendError, DeviceNotFoundError
from colabkit.experiments import check_values, get
from colabkit.training.batches import ArrayBatches, RandomWindows, RepeatedBatch


@pytest.fixture
def no_tpu_host(monkeypatch):
    for name in ("COLAB_TPU_ADDR", "TPU_NAME", "TPU_ACCELERATOR_TYPE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(probes, "_TPU_DEVICE_GLOBS", ())
    monkeypatch.setattr(probes, "_PCI_DEVICES", "/nonexistent-pci-devices")


@pytest.fixture
def jax_in_this_process(monkeypatch, no_tpu_host):
    """setup_jax in the test process without keeping TensorFlow out of it for the tests that follow,
    and with TensorFlow (loaded by other tests) not counted as loaded."""
    monkeypatch.setattr(backends, "keep_tensorflow_out", lambda: True)
    monkeypatch.delitem(sys.modules, "tensorflow", raising=False)


def fake_tpu(kind: str, index: int = 0, chip: int = 0) -> types.SimpleNamespace:
    return types.SimpleNamespace(device_kind=kind, platform="tpu", id=index, coords=(chip, 0, 0),
                                 core_on_chip=index % 2)


# --- which backend ----------------------------------------------------------------------------------

def test_auto_is_jax_on_a_tpu_and_tensorflow_everywhere_else(no_tpu_host, monkeypatch):
    assert [resolve_backend("auto", device) for device in ("tpu", "cpu", "cpu:2", "gpu:4", "auto", "multiworker:2")] \
        == ["jax", "tensorflow", "tensorflow", "tensorflow", "tensorflow", "tensorflow"]
    assert resolve_backend("tensorflow", "tpu") == "tensorflow" and resolve_backend("jax", "cpu") == "jax"
    monkeypatch.setenv("TPU_ACCELERATOR_TYPE", "v5litepod-1")  # a TPU runtime: device "auto" is its TPU
    assert resolve_backend("auto", "auto") == "jax"
    assert unsupported_reason("auto", "tpu") is None  # JAX is installed here


def test_every_experiment_takes_auto_and_records_the_backend_choices_of_the_cnn():
    for name in ("matmul_tflops", "cnn_mnist", "dblstm_har", "timeseries_rnn", "paradnn"):
        parameter = get(name).parameter("backend")
        assert parameter.default == "auto" and {"auto", "tensorflow", "jax"} <= set(parameter.choices)
        assert check_values(get(name), {"backend": "mxnet"}) == [
            f"backend = 'mxnet': expected one of {', '.join(parameter.choices)}"]
    assert get("dblstm_har").parameter("backend").choices == get("cnn_mnist").parameter("backend").choices
    assert "torch" not in get("matmul_tflops").parameter("backend").choices  # no PyTorch matmul in the notebook
    assert check_values(get("matmul_tflops"), {"backend": "jax", "jit_compile": False}) == [
        'jit_compile = False: expected "auto" or True on the jax backend (jax.jit always compiles with XLA)']
    assert check_values(get("dblstm_har"), {"backend": "torch", "steps_per_execution": 2}) == [
        "steps_per_execution = 2: expected 1 on the torch backend (Keras runs one step per call there)"]


# --- TPU facts from JAX ----------------------------------------------------------------------------

@pytest.mark.parametrize("device_kind, generation, per_chip_tflops, per_chip_gb_s", [
    ("TPU v5 lite", "v5e", 197.0, 819.0),
    ("TPU v6e", "v6e", 918.0, 1640.0),
    ("TPU v6 lite", "v6e", 918.0, 1640.0),
])
def test_fake_jax_tpu_devices_name_the_chip_and_take_their_peaks_from_the_table(
        jax_in_this_process, monkeypatch, device_kind, generation, per_chip_tflops, per_chip_gb_s):
    import jax

    monkeypatch.setattr(backends, "_jax_devices", lambda kind: [fake_tpu(device_kind)] if kind == "tpu" else [])
    monkeypatch.setattr(jax.config, "update", lambda *args: None)  # a fake device cannot become the default
    dev = setup_jax("tpu", "tpu", None)
    assert (dev.kind, dev.backend, dev.replicas, dev.name) == ("tpu", "jax", 1, device_kind)
    record = dev.as_record()
    assert record["tpu_generation"] == generation and record["device_kind"] == device_kind
    assert record["tpu_chips"] == 1 and record["cores"] == 1 and record["backend"] == "jax"
    assert device_kind in dev.summary()
    peak = dev.peak("float32")
    assert peak.tflops == per_chip_tflops == tpu_peak(generation, 1).tflops and peak.precision == "bfloat16"
    assert f"{per_chip_tflops:g} bf16 TFLOPS per {generation} chip" in peak.source
    assert dev.peak("bfloat16").tflops == per_chip_tflops and dev.peak("float16") is None
    assert dev.peak_bandwidth().gb_per_s == per_chip_gb_s and dev.peak_bandwidth().quality == "vendor"
    assert dev.static_shapes  # a TPU compiles for one batch shape


def test_a_v2_8_seen_by_jax_is_four_chips_of_two_cores_named_by_its_accelerator_type(monkeypatch, no_tpu_host):
    monkeypatch.setenv("TPU_ACCELERATOR_TYPE", "v2-8")
    devices = [fake_tpu("TPU v2", index, chip=index // 2) for index in range(8)]
    description = probes.jax_tpu_description(devices)
    assert description == {"name": "TPU v2-8", "device_kind": "TPU v2", "accelerator_type": "v2-8",
                           "tpu_generation": "v2", "tpu_chips": 4, "cores": 8, "runtime": "tpu-vm (JAX)"}
    assert tpu_peak(description["accelerator_type"], 8).tflops == 4 * 45.0  # 45 per chip, 22.5 per core


@pytest.mark.parametrize("text, generation", [("TPU v5 lite", "v5e"), ("TPU v5", "v5p"), ("TPU v6 lite", "v6e"),
                                              ("TPU v4", "v4"), ("TPU v2", "v2"), ("TPU v4 lite", None),
                                              ("TPU7x", None)])
def test_jax_device_kinds_map_to_the_generations_of_the_peaks_table(text, generation):
    from colabkit.device.peaks import tpu_generation

    assert tpu_generation(text) == generation


def test_a_tpu_jax_does_not_see_is_refused_with_what_it_sees(jax_in_this_process, monkeypatch):
    monkeypatch.setenv("TPU_ACCELERATOR_TYPE", "v5litepod-1")  # a TPU runtime, but JAX here has only the CPU
    monkeypatch.setattr(backends, "tensorflow_tpu_installed", lambda: True)
    with pytest.raises(DeviceNotFoundError) as refused:
        setup_jax("auto", "auto", None)  # "auto" on a TPU runtime means the TPU, never the CPU
    message = str(refused.value)
    assert message.startswith("device 'auto' requested but JAX on this machine has: CPU:0")
    assert "TPU_ACCELERATOR_TYPE is set" in message and "jax-ml/jax #29989" in message


def test_jax_on_a_tpu_refuses_a_kernel_where_tensorflow_is_loaded(jax_in_this_process, monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorflow", types.ModuleType("tensorflow"))
    with pytest.raises(BackendError, match="TensorFlow is already loaded in this kernel"):
        setup_jax("tpu", "tpu", None)


def test_devices_are_counted_without_tensorflow_where_it_is_not_installed(monkeypatch, no_tpu_host):
    monkeypatch.delitem(sys.modules, "tensorflow", raising=False)
    real_find_spec = probes.importlib.util.find_spec
    monkeypatch.setattr(probes.importlib.util, "find_spec",
                        lambda name, *args: None if name == "tensorflow" else real_find_spec(name, *args))
    monkeypatch.setattr(probes, "nvidia_smi", lambda: [{"index": "0"}, {"index": "1"}])
    monkeypatch.setattr(probes, "physical_devices", lambda kind: pytest.fail("asked TensorFlow"))
    assert probes.available_devices() == {"cpu": 1, "gpu": 2}


# --- grids -----------------------------------------------------------------------------------------

GRIDS = ("matmul_tflops", "cnn_mnist", "dblstm_har", "timeseries_rnn", "paradnn")


@pytest.mark.parametrize("name", GRIDS)
def test_every_grid_runs_its_tpu_rows_on_jax_and_names_every_backend(name):
    from colabkit.sweep.expand import expand
    from colabkit.sweep.grids import load_grid

    every_row = {("cpu", "tensorflow"), ("gpu", "tensorflow"), ("tpu", "jax")}
    # presets that leave devices out on purpose (their grid files say why): inference has no TPU row, the
    # Transformers no CPU row; what rows they have still pair each device with its backend
    narrower = {("cnn_mnist", "inference_smoke"), ("cnn_mnist", "inference"), ("paradnn", "transformer")}
    # decode runs on JAX alone (its cache donated to the compiled step; TensorFlow's decode is tested in test_decode)
    jax_only = {("paradnn", "decode_smoke"): {("cpu", "jax")}, ("paradnn", "decode"): {("gpu", "jax")}}
    spec = load_grid(REPO / "parameters" / f"{name}.yaml")
    # the frameworks presets cross every backend; the device presets are a lent GPU's, on JAX and PyTorch
    # (tests/test_ondevice.py checks them); the gpu_check presets gpu-check's rows on TensorFlow (tests/test_gpu_check.py)
    for preset in [None, *(p for p in spec.presets if not p.startswith(("frameworks", "device", "gpu_check")))]:
        pairs = {(combination.device, combination.params["backend"]) for combination in expand(spec, preset)}
        if (name, preset) in jax_only:
            assert pairs == jax_only[name, preset], preset
        elif (name, preset) in narrower:
            assert pairs and pairs <= every_row, preset
        else:
            assert pairs == every_row, preset


def test_the_colab_sweep_on_a_tpu_runtime_sweeps_with_jax_and_one_device_keeps_both_backends_once(tmp_path):
    from colabkit.colab.sweep import best_device
    from colabkit.sweep.plan import plan

    grid = REPO / "parameters" / "cnn_mnist.yaml"
    on_tpu = plan([grid], preset="smoke", device=best_device({"cpu": 1, "tpu": 1}), out=tmp_path, repeats=1)
    assert {c.params["backend"] for c in on_tpu} == {"jax"} and len(on_tpu) == 3
    assert len({c.output_base(tmp_path) for c in on_tpu}) == 3
    # the device's folder names the backend of its row, as it names the device: no backend in the file names
    assert [c.slug for c in on_tpu] == ["mode-train_batch_size-256", "mode-train_batch_size-512", "mode-inference"]
    # rows told apart by device (training only: inference runs on one device, the plan refuses it on cpu:2)
    pinned = plan([grid], preset="smoke", overrides={"device": "cpu:2", "mode": "train"}, out=tmp_path, repeats=1)
    assert sorted({(c.device, c.params["backend"]) for c in pinned}) == [("cpu:2", "jax"), ("cpu:2", "tensorflow")]
    assert len(pinned) == 4  # 2 batch sizes x 2 backends, none twice


# --- NumPy input pipelines -------------------------------------------------------------------------

def rows_of(batches: ArrayBatches, start: int, count: int) -> list[list[int]]:
    return [[int(v) for v in batches[index][0][:, 0]] for index in range(start, start + count)]


def test_array_batches_pass_over_every_row_once_reshuffled_each_pass_the_partial_batch_last():
    x = np.arange(10, dtype="float32")[:, None]
    batches = ArrayBatches((x, x[:, 0] % 2), batch_size=4, shuffle=True, seed=3)
    assert batches.num_batches == len(batches) == 3
    endless = batches.endless()
    assert endless.num_batches is None and endless.batches_per_pass == 3
    passes = [rows_of(endless, start, 3) for start in (0, 3, 6)]
    assert all([len(batch) for batch in one] == [4, 4, 2] for one in passes)
    assert all(sorted(sum(one, [])) == list(range(10)) for one in passes)
    assert len({tuple(sum(one, [])) for one in passes}) == 3  # every pass its own order
    assert rows_of(ArrayBatches((x,), batch_size=4, shuffle=True, seed=3).endless(), 0, 6) == passes[0] + passes[1]
    finite = ArrayBatches((x,), batch_size=4, shuffle=True, seed=3)
    first = rows_of(finite, 0, 3)
    finite.on_epoch_end()  # Keras ends the epoch: the next finite pass is reshuffled as the endless one is
    assert first == passes[0] and rows_of(finite, 0, 3) == passes[1]
    dropped = ArrayBatches((x,), batch_size=4, shuffle=True, drop_remainder=True)
    assert dropped.batches_per_pass == 2 and all(len(batch) == 4 for batch in rows_of(dropped.endless(), 0, 4))


def test_evaluation_batches_pad_to_one_shape_with_zero_weights_and_predictions_drop_nothing():
    from colabkit.training.setup import array_batches

    x, y = np.ones((10, 2), "float32"), np.ones((10, 3), "float32")
    padded = array_batches(x, y, batch_size=4, static_shapes=True)
    assert [len(padded[index][0]) for index in range(3)] == [4, 4, 4]
    assert padded[2][2].tolist() == [1.0, 1.0, 0.0, 0.0]  # two real samples, two that count for nothing
    assert sum(float(padded[index][2].sum()) for index in range(3)) == 10
    plain = array_batches(x, None, batch_size=4)
    assert [len(plain[index][0]) for index in range(3)] == [4, 4, 2]


def test_one_pass_per_epoch_makes_array_batches_endless_and_leaves_what_it_cannot_divide():
    from colabkit.training.fit import one_pass_per_epoch

    batches = ArrayBatches((np.zeros((10, 1)),), batch_size=4)
    data, steps = one_pass_per_epoch(batches, None)
    assert steps == 3 and data.is_endless and data.batches_per_pass == 3
    assert one_pass_per_epoch(batches, None, steps_per_execution=2) == (batches, None)  # would straddle passes
    assert one_pass_per_epoch(batches, 5) == (batches, 5)
    assert one_pass_per_epoch(data, None) == (data, None)  # endless already


def test_random_windows_and_the_repeated_batch_never_end_and_repeat_with_their_seed():
    x, y = np.arange(100, dtype="float32")[:, None], np.arange(100, dtype="float32")[:, None] * 2
    windows = RandomWindows(x, y, sequence_length=24, batch_size=8, seed=5)
    assert windows.num_batches is None
    inputs, targets = windows[7]
    assert inputs.shape == (8, 24, 1) and targets.shape == (8, 24, 1)
    assert np.array_equal(np.diff(inputs[:, :, 0], axis=1), np.ones((8, 23))) and np.array_equal(targets, inputs * 2)
    assert np.array_equal(RandomWindows(x, y, sequence_length=24, batch_size=8, seed=5)[7][0], inputs)
    assert not np.array_equal(windows[8][0], inputs)
    repeated = RepeatedBatch(x[:4], y[:4])
    assert repeated.num_batches is None and repeated[0][0] is repeated[999][0]
