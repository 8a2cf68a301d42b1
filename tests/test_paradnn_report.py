"""The ParaDnn report section from hand-made records: roofline per device, table, speedups, claims."""

from __future__ import annotations

import pytest
from report_fixtures import CPU, GPU, write

from colabkit.experiments.published import PARADNN_SOURCE
from colabkit.records.record import make_record
from colabkit.report import load_report_data, paradnn_section
from colabkit.training.roofline import roofline_point

# Roofs: CPU 0.2 TFLOPS and 20 GB/s (ridge at 10 FLOPs/byte); GPU 8 TFLOPS and 320 GB/s (ridge 25).
ROOFS = {"cpu": (0.2, 20.0), "gpu": (8.0, 320.0)}
DEVICES = {"cpu": CPU, "gpu": GPU}
# (family, knobs, train FLOPs per sample, arithmetic intensity at batch 64)
MODELS = [
    ("fc", {"layers": 4, "nodes": 32}, 1e5, 2.0),
    ("fc", {"layers": 8, "nodes": 4096}, 8e8, 60.0),
    ("cnn", {"blocks": 1, "filters": 16}, 3e9, 40.0),
    ("rnn", {"layers": 1, "cell": "lstm"}, 2e7, 5.0),
]
# Samples/s of a 1 GFLOP model (others in proportion): the GPU is 10x the CPU at batch 64 and 20x at
# batch 256; every model then runs at 0.005-0.006 TFLOPS on the CPU and 0.05-0.12 on the GPU, under both roofs.
SAMPLES_PER_S = {("cpu", 64): 5.0, ("cpu", 256): 6.0, ("gpu", 64): 50.0, ("gpu", 256): 120.0}


def paradnn_record(device: str, family: str, knobs: dict, train_flops: float, intensity: float, batch: int) -> dict:
    params = {"device": device, "family": family, "batch_size": batch, "steps": 20, "epochs": 6,
              "mixed_precision": "none", **knobs}
    samples = SAMPLES_PER_S[(device, batch)] * (1e9 / train_flops)
    peak, bandwidth = ROOFS[device]
    model_tflops = train_flops * samples / 1e12
    metrics = {"samples_per_s": samples, "global_batch_size": batch, "step_time_steady_ms": batch / samples * 1e3,
               "model_flops_train_per_sample": train_flops, "model_flops_forward_per_sample": train_flops / 3,
               "model_tflops": model_tflops, "mfu": model_tflops / peak, "family": family,
               "model": f"{family}: " + ", ".join(f"{k}={v}" for k, v in knobs.items()), "params": 1000,
               "arithmetic_intensity": intensity, "peak_tflops": peak, "peak_tflops_source": f"{device} datasheet",
               "peak_bandwidth_gb_s": bandwidth, "peak_bandwidth_source": f"{device} bandwidth source",
               **roofline_point(intensity, model_tflops, peak, bandwidth)}
    return make_record("paradnn", "ok", params, metrics=metrics, device=dict(DEVICES[device]),
                       data={"name": "synthetic", "source": "synthetic"})


def write_records(root, devices=("cpu", "gpu")) -> None:
    for device in devices:
        for family, knobs, flops, intensity in MODELS:
            for batch in (64, 256):
                slug = f"{family}-{'-'.join(map(str, knobs.values()))}-{batch}"
                write(root, paradnn_record(device, family, knobs, flops, intensity, batch), slug)


def test_roofline_point_is_min_of_peak_and_bandwidth_slope():
    memory = roofline_point(2.0, 0.01, peak_tflops=0.1, bandwidth_gb_s=10.0)
    assert memory["ridge_flops_per_byte"] == pytest.approx(10.0)
    assert memory["bound"] == "memory" and memory["roofline_tflops"] == pytest.approx(0.02)
    assert memory["fraction_of_roofline"] == pytest.approx(0.5)
    compute = roofline_point(40.0, 0.05, peak_tflops=0.1, bandwidth_gb_s=10.0)
    assert compute["bound"] == "compute" and compute["roofline_tflops"] == pytest.approx(0.1)
    unknown = roofline_point(40.0, 0.05, peak_tflops=None, bandwidth_gb_s=10.0)
    assert unknown["bound"] is None and "peak TFLOPS" in unknown["bound_reason"]


def test_roofline_per_device_table_speedups_and_claims(tmp_path):
    write_records(tmp_path)
    section = paradnn_section(load_report_data([tmp_path]))
    assert section.empty is None

    table = section.table("paradnn_models")
    assert len(table) == 2 * len(MODELS) * 2
    assert set(table["bound"]) == {"memory", "compute"}

    roofline = section.figure("paradnn_roofline")
    axes = roofline.figure.axes
    assert [ax.get_title() for ax in axes] == ["CPU: AMD EPYC", "GPU: Tesla T4"]
    for ax, device in zip(axes, ("cpu", "gpu")):
        assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
        peak, bandwidth = ROOFS[device]
        roof = [line for line in ax.get_lines() if line.get_label().startswith("roof")]
        assert len(roof) == 1
        x, y = roof[0].get_xdata(), roof[0].get_ydata()
        assert max(y) == pytest.approx(peak)  # the flat compute roof
        assert y[0] == pytest.approx(x[0] * bandwidth / 1e3)  # the bandwidth slope, left of the ridge
        assert min(x) <= min(i for *_, i in MODELS) and max(x) >= max(i for *_, i in MODELS)  # under every point
        # one scatter per (family, batch): 3 families x 2 batches, every model drawn once
        points = sum(len(collection.get_offsets()) for collection in ax.collections)
        assert points == len(MODELS) * 2
        assert len(ax.collections) == len({family for family, *_ in MODELS}) * 2
    assert set(roofline.data["device"]) == {"CPU: AMD EPYC", "GPU: Tesla T4"}

    speedup = section.figure("paradnn_speedup")
    ratios = speedup.data.set_index(["model", "batch"])["speedup"]
    assert ratios.xs(64, level="batch").tolist() == pytest.approx([10.0] * len(MODELS))
    assert ratios.xs(256, level="batch").tolist() == pytest.approx([20.0] * len(MODELS))

    claims = section.table("paradnn_claims")
    assert set(claims["source"]) == {PARADNN_SOURCE}
    assert {2.3, 1.5, 6.0} <= set(claims["theirs (x)"])
    cnn_max = claims[claims["claim"].str.startswith("CNNs")].iloc[0]
    assert cnn_max["ours (x)"] == pytest.approx(20.0) and "GPU" in cnn_max["our devices"]
    roofs = section.table("paradnn_roofs")
    assert set(roofs["peak TFLOPS: source"]) == {"cpu datasheet", "gpu datasheet"}
    assert roofs["runs"].tolist() == [len(MODELS) * 2] * 2 and roofs["precision"].tolist() == ["float32"] * 2


def test_a_cpu_measuring_its_bandwidth_per_run_gets_one_roof_at_the_median(tmp_path):
    for index, bandwidth in enumerate((10.0, 20.0, 40.0)):
        record = paradnn_record("cpu", "fc", {"layers": 4, "nodes": 32 * (index + 1)}, 1e5, 2.0, 64)
        record["metrics"]["peak_bandwidth_gb_s"] = bandwidth
        write(tmp_path, record, f"fc-{index}")
    section = paradnn_section(load_report_data([tmp_path]))
    (ax,) = section.figure("paradnn_roofline").figure.axes
    (roof,) = [line for line in ax.get_lines() if line.get_label().startswith("roof")]
    assert "20 GB/s" in roof.get_label()
    roofs = section.table("paradnn_roofs")
    assert roofs[["bandwidth (GB/s, median)", "min", "max", "runs"]].values.tolist() == [[20.0, 10.0, 40.0, 3]]


def test_a_bandwidth_measured_once_per_host_keeps_its_range_in_the_roofs_table(tmp_path):
    """A sweep hands one measurement to every run: the range is that measurement's passes."""
    for index in range(3):
        record = paradnn_record("cpu", "fc", {"layers": 4, "nodes": 32 * (index + 1)}, 1e5, 2.0, 64)
        record["metrics"].update(peak_bandwidth_gb_s=20.0, peak_bandwidth_min_gb_s=16.0,
                                 peak_bandwidth_measured_at="2026-11-25T06:00:00+00:00")
        write(tmp_path, record, f"fc-{index}")
    roofs = paradnn_section(load_report_data([tmp_path])).table("paradnn_roofs")
    assert roofs[["bandwidth (GB/s, median)", "min", "max", "bandwidth measurements"]].values.tolist() == \
        [[20.0, 16.0, 20.0, 1]]


def test_one_device_draws_its_roofline_without_speedups(tmp_path):
    write_records(tmp_path, devices=("gpu",))
    section = paradnn_section(load_report_data([tmp_path]))
    assert "paradnn_roofline" in section.figures and "paradnn_speedup" not in section.figures
    claims = section.table("paradnn_claims")
    assert claims["ours (x)"].isna().all() and (claims["our basis"] == "one device only: no speedup").all()


def test_no_records_says_so(tmp_path):
    section = paradnn_section(load_report_data([tmp_path]))
    assert section.empty == "no record in these results." and not section.items
