"""The report's TensorFlow / JAX section: the headline on each backend where both ran the same
configuration on the same device, the ratio, and nothing where no pair exists."""

from __future__ import annotations

import report_fixtures as fx

from colabkit.report.backends import backend_table, backends_section
from colabkit.report.common import run_backend
from colabkit.report.matmul_tflops import matmul_table
from colabkit.report.records import load_report_data
from colabkit.report.section import write_section
from colabkit.report.summary import configuration_speedups, speedup_table


def on_backend(record: dict, backend: str, asked: str | None = None) -> dict:
    """`record` as run on `backend` (device.backend), asked for as `asked` (params.backend)."""
    record["device"]["backend"] = backend
    record["params"]["backend"] = asked or backend
    return record


def test_pairs_of_the_same_work_give_the_headline_per_backend_and_the_ratio(tmp_path):
    for repeat, (tf_value, jax_value) in enumerate([(50.0, 60.0), (51.0, 61.0), (49.0, 59.0)], start=1):
        suffix = "" if repeat == 1 else f"_repeat-{repeat}"  # three runs of each: an interval, and a verdict
        fx.write(tmp_path, on_backend(fx.matmul("tpu", 512, tf_value), "tensorflow"), f"n-512_backend-tensorflow{suffix}")
        fx.write(tmp_path, on_backend(fx.matmul("tpu", 512, jax_value), "jax", asked="auto"), f"n-512_backend-auto{suffix}")
    fx.write(tmp_path, on_backend(fx.matmul("cpu", 512, 0.5), "tensorflow"), "n-512_backend-tensorflow")  # no pair
    tf_cnn = on_backend(fx.cnn("cpu", 256), "tensorflow")
    jax_cnn = on_backend(fx.cnn("cpu", 256), "jax")
    jax_cnn["metrics"]["epoch_time_steady_s"] = 40.0  # the CPU's TensorFlow run took 10 s per epoch
    fx.write(tmp_path, tf_cnn, "batch_size-256_backend-tensorflow")
    fx.write(tmp_path, jax_cnn, "batch_size-256_backend-jax")
    data = load_report_data([tmp_path])
    assert len(data.ok()) == 5  # the TPU's TensorFlow and JAX runs are two combinations, never merged
    assert list(data.merges["runs counted"]) == [3, 3]
    table = backend_table(data).set_index("notebook")
    assert list(table.index) == ["cnn_mnist", "matmul_tflops"]
    matmul, cnn = table.loc["matmul_tflops"], table.loc["cnn_mnist"]
    assert (matmul["device"], matmul["tensorflow"], matmul["jax"]) == ("TPU x8: TPU v2-8", 50.0, 60.0)
    assert matmul["jax_over_tensorflow"] == 1.2 and matmul["faster"] == "JAX"  # more TFLOPS, resolved
    assert matmul["verdict"].startswith("faster (") and 59 / 51 <= matmul["ratio_low"] < 1.2 < matmul["ratio_high"] <= 61 / 49
    # one run a side: the ratio is printed (4x the seconds per epoch), but nothing is called faster
    assert cnn["jax_over_tensorflow"] == 4.0 and cnn["verdict"] == "too few runs"
    assert cnn["faster"] == "neither resolved" and (cnn["runs_tensorflow"], cnn["runs_jax"]) == (1, 1)
    section = backends_section(data)
    assert section.empty is None and not section.figures  # a short table says it
    short = section.table("backends")  # the body's: one row per pair, 7 columns
    assert list(short.columns) == ["experiment", "device", "TensorFlow", "JAX", "JAX / TensorFlow", "interval",
                                   "verdict on JAX"]
    assert short["experiment"].tolist() == ["CNN on MNIST: steady epoch time (s)", "Matmul TFLOPS: warm matmul TFLOPS "
                                                                                   "(TFLOPS)"]
    written = write_section(section, tmp_path / "report")
    assert {path.suffix for path in written} == {".csv", ".tex", ".md"}


def test_a_record_without_a_resolved_backend_ran_tensorflow_or_what_its_parameter_says(tmp_path):
    fx.write(tmp_path, fx.cnn("cpu", 256), "old")  # before the backend parameter: TensorFlow
    fx.write(tmp_path, fx.cnn("cpu", 512, backend="jax"), "asked")
    ok = load_report_data([tmp_path]).ok("cnn_mnist").sort_values("params.batch_size")
    assert run_backend(ok).tolist() == ["tensorflow", "jax"]


def test_without_a_configuration_on_both_backends_the_section_says_why(tmp_path):
    fx.write(tmp_path, on_backend(fx.cnn("cpu", 256), "tensorflow"), "a")
    fx.write(tmp_path, on_backend(fx.cnn("tpu", 256), "jax"), "b")  # another device: not a pair
    section = backends_section(load_report_data([tmp_path]))
    assert section.empty == "no configuration ran on both on one device (the CNN's frameworks preset runs both)."


def test_the_summary_compares_a_tpu_on_jax_with_the_cpu_on_tensorflow_and_like_with_like_where_both_ran(tmp_path):
    """The grids run the TPU rows on JAX and the CPU rows on TensorFlow: the speedup over the CPU pairs
    them; where the CPU also ran a backend (a frameworks sweep), a run on it is compared with that run."""
    fx.write(tmp_path, on_backend(fx.matmul("cpu", 512, 0.5), "tensorflow"), "cpu-tf")
    fx.write(tmp_path, on_backend(fx.matmul("tpu", 512, 50.0), "jax"), "tpu-jax")
    fx.write(tmp_path, on_backend(fx.matmul("cpu", 256, 0.5), "tensorflow"), "cpu-tf-256")
    fx.write(tmp_path, on_backend(fx.matmul("cpu", 256, 0.25), "jax"), "cpu-jax-256")
    fx.write(tmp_path, on_backend(fx.matmul("gpu", 256, 5.0), "jax"), "gpu-jax-256")
    rows = speedup_table(load_report_data([tmp_path])).set_index("device")
    assert rows.loc["TPU x8: TPU v2-8", "speedup"] == 100.0  # JAX on the TPU over TensorFlow on the CPU
    assert rows.loc["GPU: Tesla T4", "speedup"] == 20.0  # JAX on the GPU over JAX on the CPU, not 10


def test_sections_and_the_summary_pair_runs_by_the_backend_that_ran_not_the_word_asked(tmp_path):
    """A CPU run asked for "auto" that ran TensorFlow and a GPU run asked for "tensorflow" did the same
    work: the matmul and dBLSTM sections compare them as the summary does; a JAX run is another series."""
    fx.write(tmp_path, on_backend(fx.matmul("cpu", 512, 0.5), "tensorflow", asked="auto"), "cpu-auto")
    fx.write(tmp_path, on_backend(fx.matmul("gpu", 512, 5.0), "tensorflow"), "gpu-tf")
    for device in ("cpu", "gpu"):
        fx.write(tmp_path, on_backend(fx.dblstm(device, 1, 32), "tensorflow", "auto" if device == "cpu" else None),
                 f"{device}-dblstm")
    data = load_report_data([tmp_path])
    gpu = matmul_table(data).set_index("device").loc["GPU: Tesla T4"]
    assert gpu["speedup_vs_cpu"] == 10.0
    assert speedup_table(data).set_index(["notebook", "device"]).loc[("matmul_tflops", "GPU: Tesla T4"), "speedup"] == 10.0
    (ratio,) = configuration_speedups(data, "dblstm_har").to_dict("records")
    assert ratio["measure"] == "training time" and ratio["speedup"] == 10.0  # 10 s on the CPU, 1 s on the GPU
    fx.write(tmp_path, on_backend(fx.matmul("gpu", 512, 6.0), "jax"), "gpu-jax")
    rows = matmul_table(load_report_data([tmp_path]))
    assert rows["config"].nunique() == 2 and sorted(rows["series"]) == sorted(set(rows["series"]))
