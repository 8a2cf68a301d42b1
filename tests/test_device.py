"""Device selection on fake GPU and TPU machines: right strategy, right description, no fallback."""

from __future__ import annotations

from pathlib import Path

import pytest

import colabkit
from colabkit.device.probes import tpu_chips_on_pci
from colabkit.device.setup import setup_device
from colabkit.device.spec import parse_device
from colabkit.errors import DeviceNotFoundError, UnknownDeviceError

T4 = {"name": "Tesla T4", "cc": (7, 5)}
A100 = {"name": "NVIDIA A100-SXM4-40GB", "cc": (8, 0)}


@pytest.mark.parametrize("text, kind, count", [("cpu", "cpu", None), ("GPU", "gpu", None), ("cpu:2", "cpu", 2),
                                               ("gpu:4", "gpu", 4), (" tpu ", "tpu", None), ("auto", "auto", None)])
def test_parse_device_accepts_kinds_and_replica_counts(text, kind, count):
    request = parse_device(text)
    assert (request.kind, request.count) == (kind, count)


@pytest.mark.parametrize("text", ["cuda", "gpu:0", "tpu:8", "cpu:x", "", "auto:2"])
def test_parse_device_rejects_unknown_names_with_the_choices(text):
    with pytest.raises(UnknownDeviceError, match="auto, cpu, gpu, tpu|only cpu and gpu take a replica count"):
        parse_device(text)


def test_gpu_requested_on_cpu_machine_names_what_it_has(fake_machine):
    fake_machine()
    with pytest.raises(DeviceNotFoundError) as info:
        setup_device("gpu")
    assert str(info.value) == "device 'gpu' requested but this machine has: CPU:0"


def test_the_tests_stand_in_makes_the_cpu_a_labelled_gpu_and_nothing_else(fake_machine, monkeypatch):
    """COLABKIT_TEST_STAND_IN (colabkit.device.stand_in): counted, named among the sweep's signs, set up as the
    CPU under the GPU's name with `stand_in: cpu`; a TPU asked for is still not there."""
    from colabkit.device.probes import available_devices
    from colabkit.sweep.devices import accelerator_signs

    fake_machine()
    monkeypatch.setenv("COLABKIT_TEST_STAND_IN", "gpu=Tesla T4")
    assert available_devices() == {"cpu": 1, "gpu": 1}
    assert "COLABKIT_TEST_STAND_IN=gpu=Tesla T4" in accelerator_signs()
    setup = setup_device("gpu")
    assert (setup.kind, setup.description["name"], setup.description["stand_in"]) == ("gpu", "Tesla T4", "cpu")
    with pytest.raises(DeviceNotFoundError):
        setup_device("tpu")
    monkeypatch.setenv("COLABKIT_TEST_STAND_IN", "cuda=Tesla T4")  # no such kind: no stand-in
    assert available_devices() == {"cpu": 1}


def test_one_gpu_runs_as_plain_keras_does_and_gets_its_description(fake_machine):
    fake_machine(gpus=[T4])
    setup = setup_device("gpu")
    assert setup.kind == "gpu" and setup.replicas == 1
    # The default strategy, not OneDeviceStrategy: that one costs time and turns off Keras's auto XLA.
    assert type(setup.strategy).__name__ == "_DefaultDistributionStrategy"
    assert setup.description["name"] == "Tesla T4"
    assert setup.description["compute_capability"] == "7.5"
    assert setup.description["tf32_active"] is False  # TF32 needs compute capability 8.0
    assert setup.peak("float32").tflops == pytest.approx(8.1)
    assert setup.peak("float16").tflops == pytest.approx(65.0)
    assert setup.peak("bfloat16") is None  # not in the T4's table: no guess
    record = setup.as_record()
    assert record["requested"] == "gpu" and record["strategy"] == "default strategy (one device, as plain Keras)"


def test_several_gpus_get_mirrored_strategy_and_tf32_peak(fake_machine):
    fake_machine(gpus=[A100, A100])
    setup = setup_device("gpu")
    assert type(setup.strategy).__name__ == "MirroredStrategy"
    assert setup.strategy.devices == ["/gpu:0", "/gpu:1"] and setup.replicas == 2
    # float32 matmuls run on TF32 tensor cores on Ampere: the peak must say so.
    peak = setup.peak("float32")
    assert peak.precision == "tf32" and peak.tflops == pytest.approx(2 * 156.0)


def test_more_gpus_than_present_is_an_error_listing_the_gpus(fake_machine):
    fake_machine(gpus=[T4, T4])
    with pytest.raises(DeviceNotFoundError, match=r"'gpu:4' requested but this machine has: CPU:0, GPU:0, GPU:1"):
        setup_device("gpu:4")


def test_cpu_on_a_gpu_machine_hides_the_gpus(fake_machine):
    fake = fake_machine(gpus=[T4])
    setup = setup_device("cpu")
    assert setup.kind == "cpu" and type(setup.strategy).__name__ == "_DefaultDistributionStrategy"
    assert ("set_visible_devices", [], "GPU") in fake.calls
    assert setup.description["gpus_hidden"] is True


def test_cpu_on_a_gpu_machine_too_late_to_hide_them_pins_the_model_to_the_cpu(fake_machine):
    fake_machine(gpus=[T4], initialised=True)
    setup = setup_device("cpu")
    assert setup.description["gpus_hidden"] is False
    assert type(setup.strategy).__name__ == "OneDeviceStrategy" and setup.strategy.args == ("/cpu:0",)


def test_auto_prefers_tpu_then_gpu_then_cpu(fake_machine, monkeypatch):
    fake_machine()
    assert setup_device("auto").kind == "cpu"
    import colabkit.device.setup as device_setup

    monkeypatch.setattr(device_setup, "_SETUPS", {})
    fake_machine(gpus=[T4])
    assert setup_device("auto").kind == "gpu"
    monkeypatch.setattr(device_setup, "_SETUPS", {})
    fake = fake_machine(gpus=[T4])
    monkeypatch.setenv("TPU_ACCELERATOR_TYPE", "v2-8")
    setup = setup_device("auto")
    assert setup.kind == "tpu" and setup.requested == "auto"
    assert ("TPUClusterResolver", "local") in fake.calls


def test_tpu_vm_uses_local_resolver_and_reports_type_and_peak(fake_machine, monkeypatch):
    fake = fake_machine()
    monkeypatch.setenv("TPU_ACCELERATOR_TYPE", "v2-8")
    setup = setup_device("tpu")
    assert fake.calls[:2] == [("TPUClusterResolver", "local"), ("initialize_tpu_system", "local")]
    assert not any(call[0] == "connect" for call in fake.calls)  # a local TPU needs no remote connection
    assert setup.replicas == 8 and setup.description["accelerator_type"] == "v2-8"
    assert setup.peak("float32").tflops == pytest.approx(180.0)  # 4 chips x 45 TFLOPS


def test_legacy_colab_tpu_address_is_used_only_when_set(fake_machine, monkeypatch):
    fake = fake_machine()
    monkeypatch.setenv("COLAB_TPU_ADDR", "10.0.0.2:8470")
    setup_device("tpu")
    assert ("TPUClusterResolver", "grpc://10.0.0.2:8470") in fake.calls
    assert ("connect", "grpc://10.0.0.2:8470") in fake.calls


def test_tpu_without_runtime_fails_fast_without_touching_tensorflow(fake_machine):
    fake = fake_machine()
    with pytest.raises(DeviceNotFoundError, match=r"'tpu' requested but this machine has: CPU:0 \(no TPU runtime"):
        setup_device("tpu")
    assert not any(call[0] == "initialize_tpu_system" for call in fake.calls)


def test_tpu_that_fails_to_initialise_is_an_error_not_a_cpu_run(fake_machine, monkeypatch):
    fake_machine(tpu_fails=True)
    monkeypatch.setenv("TPU_NAME", "local")
    with pytest.raises(DeviceNotFoundError, match="TPU did not initialise \\(No TPU devices found\\)"):
        setup_device("tpu")


def test_setup_is_reused_within_a_process(fake_machine):
    fake_machine(gpus=[T4])
    assert setup_device("gpu") is setup_device("gpu")


def test_available_devices_reports_kinds_present(fake_machine, monkeypatch):
    fake_machine(gpus=[T4, T4])
    assert colabkit.available_devices() == {"cpu": 1, "gpu": 2}
    monkeypatch.setenv("TPU_ACCELERATOR_TYPE", "v5litepod-8")
    assert colabkit.available_devices()["tpu"] == 1


def test_cpu_description_of_this_machine_is_real():
    from colabkit.device.probes import cpu_info

    info = cpu_info()
    assert info["cores"] >= 1 and info["model"]


# --- TPU generation from PCI ids --------------------------------------------------------------------

def fake_pci(root: Path, devices: list[tuple[str, str]]) -> Path:
    for index, (vendor, device_id) in enumerate(devices):
        folder = root / f"0000:00:{index:02x}.0"
        folder.mkdir(parents=True)
        (folder / "vendor").write_text(vendor + "\n")
        (folder / "device").write_text(device_id + "\n")
    return root


def test_tpu_chips_are_counted_and_named_from_pci_ids(tmp_path):
    pci = fake_pci(tmp_path / "v5e", [("0x8086", "0x1237"), ("0x1ae0", "0x0063"), ("0x10de", "0x1eb8")])
    assert tpu_chips_on_pci(str(pci)) == {"generation": "v5e", "chips": 1, "pci_device_id": "0x0063"}
    v2 = fake_pci(tmp_path / "v2", [("0x1ae0", "0x0027")] * 4)
    assert tpu_chips_on_pci(str(v2))["generation"] == "v2 or v3"
    assert tpu_chips_on_pci(str(fake_pci(tmp_path / "none", [("0x1ae0", "0x9999")]))) is None


def test_tpu_without_accelerator_type_is_named_from_pci_and_gets_its_peak(fake_machine, monkeypatch, tmp_path):
    fake_machine(tpu_cores=1)
    monkeypatch.setenv("TPU_NAME", "local")
    monkeypatch.setattr(colabkit.device.probes, "_PCI_DEVICES", str(fake_pci(tmp_path / "pci", [("0x1ae0", "0x0063")])))
    setup = setup_device("tpu")
    assert setup.name == "TPU v5e (1 chip, from PCI ids)"
    assert setup.description["accelerator_type"] is None and setup.description["tpu_generation"] == "v5e"
    assert setup.peak("float32").tflops == pytest.approx(197.0)


def test_tpu_v2_or_v3_from_pci_alone_gets_no_peak(fake_machine, monkeypatch, tmp_path):
    fake_machine()
    monkeypatch.setenv("TPU_NAME", "local")
    monkeypatch.setattr(colabkit.device.probes, "_PCI_DEVICES", str(fake_pci(tmp_path / "pci", [("0x1ae0", "0x0027")] * 4)))
    setup = setup_device("tpu")
    assert setup.name == "TPU v2 or v3 (4 chips, from PCI ids)"
    assert setup.peak("float32") is None  # a v2 peak for a v3 (or the reverse) would be a guess
