"""Inference mode (docs/inference.md): the percentiles' order-statistic intervals (exact ranks, the coverage
they claim and reach, the minimum of queries), the measurement with a fake model and clock, the declaration,
identity, compare and the report on inference records, and the CNN notebook in inference mode (papermill)."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import report_fixtures as fx

from colabkit.compare import summary_line
from colabkit.errors import ParameterError
from colabkit.experiments import check_values, get
from colabkit.experiments.inference import INFERENCE_HEADLINE
from colabkit.records.identity import run_work, work_key
from colabkit.records.record import make_record
from colabkit.statistics import min_samples, order_ranks, quantile_ci
from colabkit.inference import InferenceSettings, measure_inference, parse_batch_sizes
from colabkit.inference.scenarios import largest_batch
from colabkit.records.plausibility import measurement_problems

# --- the intervals ------------------------------------------------------------------------------------


def exact_coverage(n: int, q: float, low: int, high: int) -> float:
    """P(low <= B < high), B ~ Binomial(n, q), summed term by term with integers (math.comb)."""
    return sum(math.comb(n, k) * q**k * (1 - q) ** (n - k) for k in range(low, high))


@pytest.mark.parametrize("percentile, needed", [(50, 6), (90, 36), (99, 368)])
def test_the_fewest_queries_for_an_interval_are_where_q_to_the_n_falls_under_the_tail(percentile, needed):
    q = percentile / 100
    assert min_samples(q) == needed
    assert max(q, 1 - q) ** needed <= 0.025 < max(q, 1 - q) ** (needed - 1)
    assert order_ranks(needed, q) is not None and order_ranks(needed - 1, q) is None


@pytest.mark.parametrize("n, percentile", [(6, 50), (40, 90), (200, 50), (400, 99), (1000, 90), (1000, 99)])
def test_the_ranks_are_equal_tailed_and_their_stated_coverage_is_the_exact_binomial_one(n, percentile):
    q = percentile / 100
    low, high, coverage = order_ranks(n, q)
    assert 1 <= low < high <= n
    assert coverage == pytest.approx(exact_coverage(n, q, low, high), abs=1e-9) and coverage >= 0.95
    below, above = exact_coverage(n, q, 0, low), exact_coverage(n, q, high, n + 1)
    assert below <= 0.025 + 1e-12 and above <= 0.025 + 1e-12  # each tail at most 2.5 %
    # and the ranks are the tightest such: one rank further in breaks a tail
    assert exact_coverage(n, q, 0, low + 1) > 0.025 or low + 1 == high
    assert exact_coverage(n, q, high - 1, n + 1) > 0.025 or high - 1 == low


def test_the_interval_covers_the_true_p90_and_p99_at_least_95_percent_of_the_time():
    rng = np.random.default_rng(7)
    trials, hits90, hits99 = 1500, 0, 0
    for _ in range(trials):
        latencies = rng.lognormal(0.0, 0.5, size=400)
        p90, p99 = quantile_ci(latencies, 0.90), quantile_ci(latencies, 0.99)
        hits90 += p90.low <= math.exp(0.5 * 1.2815516) <= p90.high
        hits99 += p99.low <= math.exp(0.5 * 2.3263479) <= p99.high
    assert hits90 / trials >= 0.935 and hits99 / trials >= 0.935  # 95 % less three standard errors of 1500


def test_too_few_queries_give_the_estimate_without_an_interval_and_say_how_many_it_takes():
    point = quantile_ci(np.linspace(1, 2, 100), 0.99)
    assert point.estimate == pytest.approx(np.percentile(np.linspace(1, 2, 100), 99))
    assert point.low is None and point.high is None and "368" in point.note
    with pytest.raises(ValueError):
        quantile_ci([], 0.5)
    with pytest.raises(ValueError):
        quantile_ci([1.0, float("nan")], 0.5)


def test_batch_sizes_read_numbers_and_max_and_refuse_anything_else():
    assert parse_batch_sizes("1, 32,256,max,32") == [1, 32, 256, "max"]
    for bad in ("", "0", "1,x", "-4", "1.5"):
        with pytest.raises(ParameterError):
            parse_batch_sizes(bad)


# --- the measurement, with a fake model and clock -----------------------------------------------------


class FakeServer:
    """A model's predict_on_batch on a fake clock: each call takes 1 ms + 0.01 ms a sample, one call in 50 at
    batch 1 5 ms more: a tail. The first call of each batch shape takes 100 ms (compilation)."""

    def __init__(self) -> None:
        self.now, self.calls, self.shapes = 0.0, 0, set()

    def clock(self) -> float:
        return self.now

    def __call__(self, batch: np.ndarray) -> np.ndarray:
        self.calls += 1
        first = len(batch) not in self.shapes
        self.shapes.add(len(batch))
        tail = 5e-3 if self.calls % 50 == 0 and len(batch) == 1 else 0.0
        self.now += 0.1 if first else 1e-3 + 1e-5 * len(batch) + tail
        return np.zeros((len(batch), 10))


def fake_model(output_values: int = 1000) -> SimpleNamespace:
    layer = SimpleNamespace(output=SimpleNamespace(shape=(None, output_values)))
    return SimpleNamespace(layers=[layer], weights=[SimpleNamespace(shape=(100, 10))], dtype_policy="float32")


CPU_SETUP = SimpleNamespace(kind="cpu", replicas=1, description={}, multi_worker=None)  # a DeviceSetup


def test_measure_inference_times_each_query_apart_from_compilation_and_orders_its_percentiles():
    server = FakeServer()
    settings = InferenceSettings(500, 0.0, 600.0, [1, 32], offline_runs=3)
    inference = measure_inference(fake_model(), np.zeros((64, 8), np.float32), CPU_SETUP, settings, call=server,
                                  clock=server.clock)
    metrics, section = inference.metrics, inference.record_fields["inference"]
    latencies_s = [ms / 1e3 for ms in section["single_stream"]["latencies_ms"]]
    assert len(latencies_s) == metrics["latency_queries"] == 500
    assert metrics["latency_first_call_ms"] == pytest.approx(100)  # compilation, kept out of the percentiles
    assert max(latencies_s) == pytest.approx(6.01e-3) and min(latencies_s) == pytest.approx(1.01e-3)
    assert metrics["latency_p50_ms"] <= metrics["latency_p90_ms"] <= metrics["latency_p99_ms"]
    assert metrics["latency_p50_ms"] == pytest.approx(1.01) and metrics["latency_p99_ms"] == pytest.approx(6.01)
    for name in ("p50", "p90", "p99"):  # 500 queries: every percentile has its interval
        assert metrics[f"latency_{name}_low_ms"] <= metrics[f"latency_{name}_ms"] <= metrics[f"latency_{name}_high_ms"]
    assert [row["batch"] for row in section["offline"]] == [1, 32]
    batch32 = section["offline"][1]
    assert batch32["samples_per_s"] == pytest.approx(32 / (1e-3 + 32e-5))
    assert metrics["offline_samples_per_s_b32"] == batch32["samples_per_s"] and batch32["runs"] == 3
    assert batch32["low"] <= batch32["samples_per_s"] <= batch32["high"]
    assert len(section["single_stream"]["latencies_ms"]) == 500 and section["max_batch"] is None
    assert "offline_tokens_per_s" not in metrics and "tokens_per_s" not in batch32


def test_a_sequence_model_gets_tokens_per_second_the_samples_rate_times_its_tokens():
    server = FakeServer()
    inference = measure_inference(fake_model(), np.zeros((8, 4), np.float32), CPU_SETUP, InferenceSettings(40, 0, 9, "8"),
                                  call=server, clock=server.clock, tokens_per_sample=128)
    row = inference.record_fields["inference"]["offline"][0]
    assert row["tokens_per_s"] == pytest.approx(128 * row["samples_per_s"]) == inference.metrics["offline_tokens_per_s"]
    assert row["tokens_low"] == pytest.approx(128 * row["low"])
    assert row["tokens_high"] == pytest.approx(128 * row["high"])


def test_queries_go_on_until_both_minimums_are_met_and_the_record_says_which_bound():
    server = FakeServer()  # ~1 ms a query: 500 queries take ~0.55 s
    by_count = measure_inference(fake_model(), np.zeros((8, 4), np.float32), CPU_SETUP,
                                 InferenceSettings(500, 0.1, 60, "1"), call=server, clock=server.clock)
    single = by_count.record_fields["inference"]["single_stream"]
    assert single["queries"] == 500 and single["binding"] == "min_query_count" and single["valid"]
    assert single["settings"] == {"min_query_count": 500, "min_duration_s": 0.1, "max_duration_s": 60}
    by_time = measure_inference(fake_model(), np.zeros((8, 4), np.float32), CPU_SETUP,
                                InferenceSettings(50, 2.0, 60, "1"), call=server, clock=server.clock)
    metrics, offline = by_time.metrics, by_time.record_fields["inference"]["offline"][0]
    assert metrics["latency_binding"] == "min_duration" and metrics["latency_duration_s"] >= 2.0
    assert 1800 < metrics["latency_queries"] < 2100 and metrics["inference_valid"] is True
    assert offline["duration_s"] >= 2.0 and offline["runs"] > 6 and offline["binding"] == "min_duration"
    assert measurement_problems(metrics) == []


def test_a_scenario_stopped_at_max_duration_short_of_its_queries_is_not_a_measurement():
    server = FakeServer()
    cut = measure_inference(fake_model(), np.zeros((8, 4), np.float32), CPU_SETUP, InferenceSettings(5000, 0, 1.0, "1"),
                            call=server, clock=server.clock)
    single = cut.record_fields["inference"]["single_stream"]
    assert not single["valid"] and single["binding"] is None and single["queries"] < 5000
    assert cut.metrics["inference_valid"] is False
    assert "inference_valid = False (must be true" in measurement_problems(cut.metrics)[0]
    for bad in ((0, 1, 2), (10, 5, 2), (10, 1, 0)):
        with pytest.raises(ParameterError, match="inference settings"):
            InferenceSettings(*bad)
    with pytest.raises(ParameterError, match="one device"):
        measure_inference(fake_model(), np.zeros((8, 4)), SimpleNamespace(kind="cpu", replicas=2, name="cpu:2"),
                          InferenceSettings(5, 0, 1))


def test_max_is_the_largest_power_of_two_the_memory_estimate_allows_and_the_cap_bounds_it():
    model = fake_model(output_values=1_000_000)  # 4 MB a sample at float32
    setup = SimpleNamespace(kind="gpu", replicas=1, description={"name": "Tesla T4", "memory_gib": 16.0}, multi_worker=None)
    found = largest_batch(model, setup, np.zeros((1, 8), np.float32), cap=1 << 20)
    per_sample, weights = 4_000_000 + 32, 4000
    assert found["per_sample_bytes"] == per_sample and found["weights_bytes"] == weights
    expected = 2 ** int(math.log2((0.5 * 16 * 2**30 - weights) / per_sample))
    assert found["estimate"] == found["batch"] == expected == 2048
    assert largest_batch(model, setup, np.zeros((1, 8), np.float32), cap=256)["batch"] == 256


# --- declaration, identity, compare, report ----------------------------------------------------------


def test_the_cnn_declares_the_mode_and_training_knobs_leave_an_inference_run():
    cnn = get("cnn_mnist")
    inference = cnn.relevant({**cnn.defaults, "mode": "inference", "epochs": 3})
    assert "epochs" not in inference and "batch_size" not in inference and inference["queries"] == 1000
    training = cnn.relevant({**cnn.defaults, "epochs": 3})
    assert "queries" not in training and training["epochs"] == 3
    assert any("one device" in problem for problem in check_values(cnn, {"mode": "inference", "device": "cpu:2"}))
    assert any("offline_batch_sizes" in problem for problem in check_values(cnn, {"offline_batch_sizes": "1,big"}))
    assert not check_values(cnn, {"mode": "inference", "device": "cpu", "offline_batch_sizes": "1,8,max"})


def inference_record(p90_ms: float, device: str = "cpu", seed: int = 0, queries: int = 400) -> dict:
    """A CNN inference record as the notebook writes one: latencies around p90_ms from measure_inference."""
    rng = np.random.default_rng(seed)
    latencies = iter(rng.lognormal(math.log(p90_ms / 1.9), 0.5, size=2000) / 1e3)
    clock = SimpleNamespace(now=0.0)

    def call(batch):
        clock.now += next(latencies) if len(batch) == 1 else 1e-3 * len(batch) / 100
        return None

    settings = InferenceSettings(queries, 0.0, 600.0, "1,8", warmup_queries=2, offline_runs=3)
    inference = measure_inference(fake_model(), np.zeros((16, 4)), CPU_SETUP, settings, call=call, clock=lambda: clock.now)
    params = {"device": device, "backend": "tensorflow", "mode": "inference", "queries": queries,
              "offline_batch_sizes": "1,8", "seed": 0, "test_samples": 512}
    return make_record("cnn_mnist", "ok", params, metrics=inference.metrics, device=fx.DEVICES[device],
                       data=fx.REAL_MNIST, **inference.record_fields)


def test_identity_keeps_inference_runs_apart_and_training_runs_pair_with_those_written_before_the_mode():
    training = fx.cnn("cpu", 256)
    with_mode = fx.cnn("cpu", 256)
    with_mode["params"]["mode"] = "train"
    assert work_key(run_work(training)) == work_key(run_work(with_mode))
    inference = inference_record(2.0)
    assert run_work(inference)["mode"] == "inference"
    assert work_key(run_work(inference), ("batch_size",)) != work_key(run_work(training), ("batch_size",))


def test_compare_works_on_inference_runs_by_their_p90_latency(tmp_path):
    for repeat in range(3):
        slug = "inference" if repeat == 0 else f"inference_repeat-{repeat + 1}"
        fx.write(tmp_path / "before", inference_record(2.0, seed=repeat), slug)
        fx.write(tmp_path / "after", inference_record(3.0, seed=10 + repeat), slug)
        fx.write(tmp_path / "before", fx.cnn("cpu", 256), "batch_size-256" + slug[9:])
        fx.write(tmp_path / "after", fx.cnn("cpu", 256), "batch_size-256" + slug[9:])
    rows = fx.compare_folders(tmp_path / "before", tmp_path / "after")
    measures = sorted(row.measure for row in rows)  # an inference combination: a row per figure, each over its runs
    assert measures == sorted([get("cnn_mnist").headline.label, "single-stream p50 latency", INFERENCE_HEADLINE.label,
                               "single-stream p99 latency", "offline samples/s at batch 1",
                               "offline samples/s at batch 8"])
    latency = next(row for row in rows if row.measure == INFERENCE_HEADLINE.label)
    assert not latency.higher_is_better and latency.comparison.ratio.estimate == pytest.approx(1.5, rel=0.15)
    assert latency.comparison.verdict == "slower" and latency.comparison.ratio.confidence == 0.75
    assert summary_line(rows).startswith("2 combination(s) in common, 6 figures compared: ")


def test_the_report_shows_inference_runs_in_their_own_section_and_keeps_them_out_of_training_figures(tmp_path):
    from colabkit.report import cnn_table, inference_section, load_report_data

    fx.write(tmp_path, fx.cnn("cpu", 256), "batch_size-256")
    fx.write(tmp_path, inference_record(2.0), "mode-inference")
    data = load_report_data([tmp_path])
    assert len(data.ok("cnn_mnist")) == 1 and len(data.ok("cnn_mnist", inference=True)) == 1
    assert len(cnn_table(data)) == 1  # the training section's table: the training run only
    section = inference_section(data)
    assert section.empty is None
    latency = section.table("inference_latency")
    assert len(latency) == 1 and latency["queries"].iloc[0] == 400
    assert latency["p50_ms"].iloc[0] <= latency["p90_ms"].iloc[0] <= latency["p99_ms"].iloc[0]
    assert latency["p99_low_ms"].iloc[0] <= latency["p99_ms"].iloc[0] <= latency["p99_high_ms"].iloc[0]
    figure = section.figure("inference_latency_distribution")
    assert set(figure.data["percentile"].dropna()) == {50, 90, 99}
    assert list(section.table("inference_offline")["batch"]) == [1, 8]
    assert inference_section(load_report_data([fx.write(tmp_path / "none", fx.cnn("cpu", 256), "b").parent])).empty


def test_the_report_reads_inference_records_written_before_the_minimums_existed(tmp_path):
    from colabkit.report import inference_section, load_report_data

    old = inference_record(2.0)
    for entry in [old["inference"]["single_stream"], *old["inference"]["offline"]]:
        for key in ("settings", "duration_s", "valid", "binding"):
            entry.pop(key)
    for key in ("latency_duration_s", "latency_binding", "inference_valid"):
        old["metrics"].pop(key)
    fx.write(tmp_path, old, "mode-inference")
    fx.write(tmp_path, inference_record(2.0, seed=1), "mode-inference_seed-1")
    section = inference_section(load_report_data([tmp_path]))
    latency = section.table("inference_latency")
    assert len(latency) == 2 and latency["p90_ms"].notna().all()
    assert sorted(latency["binding"].fillna("(none)")) == ["(none)", "min_query_count"]
    assert len(section.table("inference_offline")) == 4


def test_a_percentile_its_queries_cannot_give_is_said_too_few_and_not_drawn(tmp_path):
    """p99 of 5 queries is the slowest of 5, with no interval: neither tabled nor drawn as if measured."""
    from colabkit.report import inference_section, load_report_data

    fx.write(tmp_path, inference_record(2.0, queries=5), "mode-inference")
    fx.write(tmp_path, inference_record(2.0, queries=40, seed=1), "mode-inference_queries-40")
    section = inference_section(load_report_data([tmp_path]))
    latency = section.table("inference_latency").set_index("queries")
    assert latency.loc[5, ["p50_ms", "p90_ms", "p99_ms"]].isna().all()
    assert latency.loc[5, "not_given"] == ("too few queries for p50 (5 of the 6 its 95 % interval takes); too few "
                                           "queries for p90 (5 of the 36 its 95 % interval takes); too few queries "
                                           "for p99 (5 of the 368 its 95 % interval takes)")
    assert latency.loc[40, ["p50_ms", "p90_ms"]].notna().all() and pd.isna(latency.loc[40, "p99_ms"])
    assert latency.loc[40, "not_given"] == "too few queries for p99 (40 of the 368 its 95 % interval takes)"
    figure = section.figure("inference_latency_distribution")
    assert sorted(figure.data["percentile"].dropna()) == [50, 90]  # the 40-query run's: no dot without its interval
    assert "too few queries for p99 (its 95 % interval takes 368), not drawn for cnn_mnist" in figure.caption
    assert "mode-inference.json (5); cnn_mnist" in figure.caption and figure.caption.endswith("(40)")
    # the legend lists p50 and p90, whose dots are drawn, never p99, drawn for neither run
    legend = [text.get_text() for text in figure.figure.axes[0].get_legend().get_texts()]
    assert [text for text in legend if text.startswith("p")] == ["p50 and its interval (within the run)",
                                                                 "p90 and its interval (within the run)"]


# --- the notebook, through papermill ------------------------------------------------------------------


@pytest.mark.notebook
@pytest.mark.long("the CNN notebook in inference mode, three runs: timed queries, then offline batches")
def test_the_cnn_notebook_in_inference_mode_writes_ordered_percentiles_with_intervals_and_offline_throughput(
        tmp_path, warm_kernels):
    from helpers import execute_notebook

    from colabkit.records.record import read_record

    _, record_path = execute_notebook("cnn_mnist", tmp_path, warm_kernels, device="cpu", mode="inference",
                                      queries=400, min_duration_s=0.0,
                                      offline_batch_sizes="1,16,max", test_samples=64, data_source="offline")
    record = read_record(Path(record_path))
    assert record["status"] == "ok" and record["params"]["mode"] == "inference"
    assert "epochs" not in record["params"] and "history" not in record  # nothing trained
    metrics = record["metrics"]
    assert metrics["latency_queries"] == 400 and metrics["params"] == 412_778
    assert 0 < metrics["latency_p50_ms"] <= metrics["latency_p90_ms"] <= metrics["latency_p99_ms"]
    for name in ("p50", "p90", "p99"):
        assert metrics[f"latency_{name}_low_ms"] <= metrics[f"latency_{name}_ms"] <= metrics[f"latency_{name}_high_ms"]
    offline = record["inference"]["offline"]
    maximum = record["inference"]["max_batch"]
    assert [row["batch"] for row in offline] == sorted({1, 16, maximum["batch"]})
    assert all(row["samples_per_s"] > 0 and row["runs"] == 6 and row["valid"] for row in offline)
    assert record["inference"]["single_stream"]["binding"] == "min_query_count" and metrics["inference_valid"]
    assert maximum["batch"] >= 16 and maximum["how"]


TINY_INFERENCE = {  # the other families in inference mode, as small as they build
    "dblstm_har": {"data_source": "offline", "test_samples": 32, "units": 8, "head_units": 4, "bilstm_layers": 1,
                   "offline_batch_sizes": "1,8"},
    "timeseries_rnn": {"data_source": "offline", "units": 8, "sequence_length": 96, "max_hours": 3000,
                       "warmup_steps": 10, "offline_batch_sizes": "1,4"},
    "paradnn": {"layers": 2, "nodes": 32, "input_size": 64, "output_size": 10, "batch_size": 16,
                "offline_batch_sizes": "1,16"},
    "paradnn transformer": {"family": "transformer", "layers": 1, "width": 32, "heads": 2, "length": 16, "vocab": 64,
                            "mlp_ratio": 2, "batch_size": 8, "offline_batch_sizes": "1,8"},
}


@pytest.mark.notebook
@pytest.mark.parametrize("case", sorted(TINY_INFERENCE))
def test_every_other_family_runs_in_inference_mode_and_trains_nothing(tmp_path, case, warm_kernels):
    from helpers import execute_notebook

    from colabkit.records.record import read_record

    name = case.split()[0]
    _, record_path = execute_notebook(name, tmp_path, warm_kernels, device="cpu", mode="inference", queries=60,
                                      min_duration_s=0.0, **TINY_INFERENCE[case])
    record = read_record(Path(record_path))
    assert record["status"] == "ok" and "epochs" not in record["params"] and "history" not in record
    metrics = record["metrics"]
    assert metrics["latency_queries"] == 60
    assert 0 < metrics["latency_p50_ms"] <= metrics["latency_p90_ms"] <= metrics["latency_p99_ms"]
    assert metrics["latency_p99_low_ms"] is None and metrics["latency_p90_low_ms"] is not None  # 60 < 368, >= 36
    wanted = [int(size) for size in TINY_INFERENCE[case]["offline_batch_sizes"].split(",")]
    offline = record["inference"]["offline"]
    assert [row["batch"] for row in offline] == wanted
    if case == "paradnn transformer":  # prefill: every sample is a prompt of `length` tokens
        assert all(row["tokens_per_s"] == pytest.approx(16 * row["samples_per_s"]) for row in offline)
        assert metrics["offline_tokens_per_s"] == pytest.approx(16 * metrics["offline_samples_per_s"])
    else:
        assert "offline_tokens_per_s" not in metrics
