"""What a result costs (docs/cost.md): the rates (shipped, a user's file, which one a run gets), a run's cost per
unit of work, the report's cost section and `compare --by cost`."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import report_fixtures as fx

from colabkit.cli import main
from colabkit.cost.per_unit import SECONDS_PER_HOUR, record_costs, record_rate
from colabkit.cost.rates import NoRate, Rate, load_rates
from colabkit.errors import RatesFileError
from colabkit.report import load_report_data
from colabkit.report.cost import cost_section, pareto_front

CPU_RATE = """rates:
  cpu:
    usd_per_hour: 0.36
    source: "a test's figure"
    read: 2026-11-29
"""


def rates_file(tmp_path: Path, text: str = CPU_RATE, name: str = "rates.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_the_shipped_rates_are_the_2024_04_table_and_nothing_else():
    table = load_rates()
    assert {rate.runtime: rate.compute_units_per_hour for rate in table.rates} == {
        "T4": 1.84, "V100": 4.91, "L4": 4.82, "A100": 11.77}
    assert all("McCormick" in rate.source and rate.read == "2024-04" for rate in table.rates)
    assert table.compute_unit.usd == pytest.approx(0.10) and "pricing page" in table.compute_unit.source
    assert table.rate_for("Tesla T4").usd_per_hour == pytest.approx(0.184)  # type: ignore[union-attr]
    for found, runtime in (("NVIDIA H100 80GB HBM3", "H100"), ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "G4"),
                           ("TPU v5 lite", "v5e-1"), ("none", "cpu"), ("NVIDIA H200", "NVIDIA H200")):
        missing = table.rate_for(found)
        assert isinstance(missing, NoRate) and missing.runtime == runtime and f"no rate given for {runtime}" in \
            missing.reason


def test_a_run_is_priced_by_the_accelerator_it_got_not_the_one_asked_for():
    record = {**fx.cnn("gpu", 256), "accelerator_asked": "A100", "accelerator_found": "NVIDIA L4"}
    assert record_rate(record, load_rates()).runtime == "L4"  # type: ignore[union-attr]
    on_gpu_runtime = {**fx.cnn("cpu", 256), "accelerator_found": "Tesla T4"}  # a CPU run on a T4 runtime: billed as T4
    assert record_rate(on_gpu_runtime, load_rates()).runtime == "T4"  # type: ignore[union-attr]
    unknown = {key: value for key, value in fx.cnn("gpu", 256).items() if key != "accelerator_found"}
    assert "accelerator_found" in record_rate(unknown, load_rates()).reason  # type: ignore[union-attr]
    workers = {**fx.cnn("gpu", 256), "device": {**fx.GPU, "workers": 2}}
    assert isinstance(record_rate(workers, load_rates()), NoRate)


def test_a_users_file_replaces_and_adds_rates_and_the_most_specific_gpu_model_wins(tmp_path):
    table = load_rates(rates_file(tmp_path, """
compute_unit: {usd: 0.2, source: "a test's price", read: 2026-11}
rates:
  t4: {usd_per_hour: 0.5, source: "Colab's Resources panel", read: 2026-11-29}
  A100-SXM4-80GB: {compute_units_per_hour: 5, usd_per_hour: 1.0, source: "a lender", read: 2026-11-29}
  v5e1: {compute_units_per_hour: 4, source: "Colab's Resources panel", read: "2026-11-29"}
"""))
    t4 = table.rate_for("Tesla T4")
    assert isinstance(t4, Rate) and t4.usd_per_hour == 0.5 and t4.compute_units_per_hour == pytest.approx(2.5)
    assert t4.given_in == "dollars" and t4.origin == "rates.yaml"
    assert table.rate_for("NVIDIA A100-SXM4-80GB").runtime == "A100-SXM4-80GB"  # type: ignore[union-attr]
    shipped = table.rate_for("NVIDIA A100-SXM4-40GB")  # the shipped A100, re-priced at the file's compute unit
    assert isinstance(shipped, Rate) and shipped.usd_per_hour == pytest.approx(11.77 * 0.2)
    assert table.rate_for("TPU v5 lite").compute_units_per_hour == 4  # type: ignore[union-attr]
    assert table.rate_for("Tesla V100-SXM2-16GB").runtime == "V100"  # type: ignore[union-attr]


@pytest.mark.parametrize("text, says", [
    ("rates: [cpu]", "expected a mapping with `rates:`"),
    ("rates:\n  cpu: {usd_per_hour: 0.1, source: x}", "`read` must be the date"),
    ("rates:\n  cpu: {usd_per_hour: 0.1, read: 2026-11-29}", "cpu: `source` must say"),
    ("rates:\n  cpu: {usd_per_hour: -1, source: x, read: 2026-11-29}", "usd_per_hour must be a number above 0"),
    ("rates:\n  cpu: {source: x, read: 2026-11-29}", "give compute_units_per_hour or usd_per_hour"),
    ("rates:\n  cpu: {usd_per_hour: 1, source: x, read: 2026-13}", "2026-13' is no date"),
    ("rates:\n  cpu: {usd_per_hour: 1, cost: 2, source: x, read: 2026-11}", "unknown field(s) cost"),
    ("rates:\n  T4: {usd_per_hour: 1, source: x, read: 2026-11}\n  t4: {usd_per_hour: 2, source: x, read: 2026-11}",
     "name the same runtime"),
    ("rates: {cpu: {usd_per_hour: 1, source: x, read: 2026-11}", "not YAML or JSON at line"),
    ("rate:\n  cpu: {usd_per_hour: 1, source: x, read: 2026-11}", "unknown top-level key(s) rate"),
])
def test_a_rates_file_that_cannot_be_used_is_one_line_naming_the_entry(tmp_path, text, says):
    with pytest.raises(RatesFileError) as raised:
        load_rates(rates_file(tmp_path, text))
    assert says in str(raised.value) and "\n" not in str(raised.value)


ISSUE_58_REFUSALS = [  # each case of issue 58: the file, and the line it gets
    ("rates:\n  t4: {usd_per_hour: 0.5, source: x, read: 2026-11}\n"
     "  Tesla T4: {usd_per_hour: 0.6, source: x, read: 2026-11}",
     "rates: t4 and Tesla T4 name the same runtime (both are T4): give it once"),
    ("rates:\n  A100: {usd_per_hour: 1, source: x, read: 2026-11}\n"
     "  NVIDIA A100-SXM4-40GB: {usd_per_hour: 2, source: x, read: 2026-11}",
     "rates: A100 and NVIDIA A100-SXM4-40GB name the same runtime (A100's GPU is NVIDIA A100-SXM4-40GB): give it once"),
    ("rates:\n  cpu: {usd_per_hour: 0.5, source: x, read: 2026-11}\n  cpu: {usd_per_hour: 0.7, source: x, read: 2026-11}",
     "`cpu` is given twice (line 3, column 3): the last would win without a word; give each key once"),
    ("rates:\n  cpu:\n    usd_per_hour: 0.5\n    source: x\n    usd_per_hour: 0.7\n    read: 2026-11",
     "`usd_per_hour` is given twice (line 5, column 5)"),
    ("compute_unit: {usd: 1e-10, source: x, read: 2026-11}\nrates:\n  cpu: {usd_per_hour: 1e300, source: x, read: 2026-11}",
     "rates: cpu: usd_per_hour must be a number above 0 and at most 1e+06, not 1e+300"),
    ("compute_unit: {usd: 1e-10, source: x, read: 2026-11}\nrates:\n  cpu: {usd_per_hour: 1e5, source: x, read: 2026-11}",
     "rates: cpu: 1e+15 compute units an hour at $1e-10 a compute unit is no rate (it must be above 0 and at most 1e+06)"),
    ('{"rates": {"cpu": {"usd_per_hour": 1e300, "source": "x", "read": "2026-11"}}}',
     "rates: cpu: usd_per_hour must be a number above 0 and at most 1e+06, not 1e+300"),  # JSON
    ("rates:\n  cpu: {usd_per_hour: 0.5, source: x, read: 2026-13-45}", "rates: cpu: `read` '2026-13-45' is no date"),
    ("rates:\n  cpu: {usd_per_hour: 6.9, compute_units_per_hour: 1, source: x, read: 2026-11}",
     "rates: cpu: usd_per_hour and compute_units_per_hour disagree: 1 compute units at $0.1 a compute unit are $0.1 an "
     "hour, not $6.9 (69x; rounding allows 5%): give one of them"),
]


@pytest.mark.parametrize("text, says", ISSUE_58_REFUSALS)
def test_report_and_compare_refuse_a_rates_file_with_one_line_and_exit_2(tmp_path, capsys, text, says):
    _runs(tmp_path / "results", "cpu", 256, [1.0, 1.1, 0.9])
    bad = rates_file(tmp_path, text)
    assert main(["report", str(tmp_path / "results"), "--out", str(tmp_path / "report"), "--rates", str(bad)]) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "report").exists()
    results = str(tmp_path / "results")
    assert main(["compare", results, results, "--by", "cost", "--rates", str(bad)]) == 2
    out, err = capsys.readouterr()
    assert says in err and len(err.strip().splitlines()) == 1 and not out


def test_the_vendors_words_are_no_part_of_a_name_and_numbers_may_be_written_as_json_writes_them(tmp_path):
    table = load_rates(rates_file(tmp_path, """
compute_unit: {usd: 1e-1, source: x, read: 2026-11}
rates:
  NVIDIA T4: {usd_per_hour: 5e-1, source: "Colab's Resources panel", read: 2026-11-29}
  Tesla V100-SXM2-16GB: {usd_per_hour: 2, source: x, read: 2026-11}
"""))
    t4 = table.rate_for("Tesla T4")  # the driver's name: the file's NVIDIA T4, not the shipped T4
    assert isinstance(t4, Rate) and t4.runtime == "NVIDIA T4" and t4.usd_per_hour == 0.5
    assert [rate.runtime for rate in table.rates].count("T4") == 0  # replaced: one runtime, one rate
    assert table.rate_for("Tesla V100-SXM2-16GB").runtime == "Tesla V100-SXM2-16GB"  # type: ignore[union-attr]
    assert table.rate_for("Tesla V100-PCIE-32GB").runtime == "V100"  # type: ignore[union-attr]


def test_the_report_and_compare_name_each_rate_of_the_file_that_priced_no_run(tmp_path, capsys):
    for side in ("before", "after"):
        _runs(tmp_path / side, "cpu", 256, [1.0, 1.1, 0.9])
    rates = rates_file(tmp_path, CPU_RATE + """  H100: {usd_per_hour: 9, source: x, read: 2026-11}
  NVIDIA H200: {usd_per_hour: 9, source: x, read: 2026-11}
""")
    line = ("rates file rates.yaml: H100, NVIDIA H200 priced no run: no run had that runtime, or a GPU model named more "
            "closely priced it (docs/cost.md says how names are matched)")
    assert line in cost_section(load_report_data([tmp_path / "before"], rates_file=rates)).notes
    assert main(["compare", str(tmp_path / "before"), str(tmp_path / "after"), "--by", "cost", "--rates",
                 str(rates)]) == 0
    footer = [text for text in capsys.readouterr().out.splitlines() if text.startswith("rates")]
    assert footer[0] == "rates: cpu: a test's figure, read 2026-11-29" and footer[-1] == line  # no shipped rate:
    assert footer[1].startswith("rates: one compute unit = $0.1") and len(footer) == 3  # none priced a run
    assert load_rates(rates).unused(["cpu", "H100", "NVIDIA H200"]) is None
    assert load_rates().unused([]) is None  # the shipped rates are not the user's to account for


def test_json_is_read_as_a_rates_file_and_a_missing_file_is_named(tmp_path):
    path = rates_file(tmp_path, json.dumps({"rates": {"cpu": {"usd_per_hour": 0.1, "source": "x", "read": "2026-11"}}}),
                      "rates.json")
    assert load_rates(path).rate_for("none").usd_per_hour == 0.1  # type: ignore[union-attr]
    with pytest.raises(RatesFileError, match="not found"):
        load_rates(tmp_path / "absent.yaml")


def test_a_runs_cost_is_its_seconds_per_unit_at_its_rate_and_its_joules_its_own():
    record = fx.cnn("gpu", 256)  # 256 x 100 samples in a steady epoch of 1 s: 25,600 samples/s
    record["metrics"] |= {"energy_j_per_sample": 0.002, "energy_j_per_epoch": 51.2}
    costs = record_costs(record, load_rates())
    seconds = 1000 / 25600
    assert costs["cost.runtime"] == "T4" and costs["cost.no_rate"] is None
    assert costs["cost.s_per_1k_samples"] == pytest.approx(seconds)
    assert costs["cost.cu_per_1k_samples"] == pytest.approx(seconds / SECONDS_PER_HOUR * 1.84)
    assert costs["cost.usd_per_1k_samples"] == pytest.approx(seconds / SECONDS_PER_HOUR * 0.184)
    assert costs["cost.j_per_1k_samples"] == pytest.approx(2.0)
    assert costs["cost.usd_per_epoch"] == pytest.approx(1.0 / SECONDS_PER_HOUR * 0.184)
    assert costs["cost.j_per_epoch"] == pytest.approx(51.2)
    cpu = record_costs(fx.cnn("cpu", 256), load_rates())
    assert cpu["cost.usd_per_1k_samples"] is None and cpu["cost.s_per_1k_samples"] == pytest.approx(1000 / 2560)
    assert "no rate given for cpu" in cpu["cost.no_rate"]
    assert record_costs(fx.cnn("gpu", 256, status="failed"), load_rates()) == {}
    assert record_costs(fx.matmul("cpu", 256, 0.5), load_rates()) == {}  # no unit of work


def test_inference_and_decode_runs_are_priced_per_thousand_inferences_and_million_tokens(tmp_path):
    table = load_rates(rates_file(tmp_path))
    inference = fx.inference("cpu")
    rate = inference["metrics"]["offline_samples_per_s"]
    assert record_costs(inference, table)["cost.usd_per_1k_inferences"] == pytest.approx(
        1000 / rate / SECONDS_PER_HOUR * 0.36)
    decode = fx.decode("cpu")
    decode["metrics"] |= {"decode_tokens_per_s": 4000.0, "decode_energy_j_per_token_best": 0.001}
    costs = record_costs(decode, table)
    assert costs["cost.s_per_1m_tokens"] == pytest.approx(250.0) and costs["cost.usd_per_1m_tokens"] == pytest.approx(
        0.025) and costs["cost.j_per_1m_tokens"] == pytest.approx(1000.0)


def test_the_pareto_front_keeps_the_points_nothing_beats_on_both_time_and_cost():
    assert pareto_front([1.0, 2.0, 3.0, 2.5], [5.0, 2.0, 3.0, 2.0]) == [True, True, False, False]


def _runs(root: Path, device: str, batch: int, scale: list[float]) -> None:
    """Three runs of the CNN at `batch` on `device`, each's throughput scaled by one of `scale`."""
    def make(run: int) -> dict:
        record = fx.cnn(device, batch)
        record["metrics"]["samples_per_s"] *= scale[run]
        return record

    fx.repeats(root, make, 3, f"batch_size-{batch}")


def test_the_report_prices_every_ok_run_marks_the_front_and_judges_against_the_fastest(tmp_path):
    results = tmp_path / "results"
    _runs(results, "cpu", 256, [1.0, 1.1, 0.9])
    _runs(results, "gpu", 256, [1.0, 1.02, 0.98])  # 10x faster than the CPU at 0.184 $/h against 0.36
    data = load_report_data([results], rates_file=rates_file(tmp_path))
    section = cost_section(data)
    table = section.table("cost_per_unit")
    samples = table[table["per"] == "1,000 training samples"].set_index("runtime")
    assert samples.loc["T4", "cheapest for its speed"] and not samples.loc["cpu", "cheapest for its speed"]
    assert samples.loc["T4", "$"] == pytest.approx(1000 / 25600 / SECONDS_PER_HOUR * 0.184)
    assert samples.loc["cpu", "level"] == "75 %, n = 3" and samples.loc["cpu", "$ low"] < samples.loc["cpu", "$"]
    (ratio,) = section.table("cost_ratios").query("per == '1,000 training samples'").to_dict("records")
    assert ratio["device"].startswith("CPU") and ratio["against (fastest)"].startswith("GPU")
    assert ratio["verdict"] == "costlier (75 %, n = 3)" and ratio["$ ratio"] == pytest.approx(10 * 0.36 / 0.184)
    figure = section.figure("cost_cnn_mnist_1k_samples")
    assert set(figure.data["runtime"]) == {"cpu", "T4"} and list(figure.data["pareto"]).count(True) == 1
    assert data.frame.loc[data.frame["status"] == "ok", "cost.usd_per_1k_samples"].notna().all()


def test_without_a_rate_the_section_names_what_is_missing_and_computes_no_cost(tmp_path):
    _runs(tmp_path, "cpu", 256, [1.0, 1.1, 0.9])
    section = cost_section(load_report_data([tmp_path]))
    assert any("No rate given for: cpu (3 run(s) of CNN on MNIST)" in text for text in section.notes)
    assert section.empty == "no rate for cpu (--rates FILE gives one)."  # not in the body: nothing to set side by side
    assert not section.figures and section.table("cost_per_unit")["$"].isna().all()
    assert section.table("cost_per_unit")["s"].notna().all()  # the times are still given


def test_the_report_command_refuses_a_bad_rates_file_before_writing_anything(tmp_path, capsys):
    _runs(tmp_path / "results", "cpu", 256, [1.0, 1.1, 0.9])
    bad = rates_file(tmp_path, "rates:\n  cpu: {usd_per_hour: 0.1, source: x}")
    assert main(["report", str(tmp_path / "results"), "--out", str(tmp_path / "report"), "--rates", str(bad)]) == 2
    assert "`read` must be the date" in capsys.readouterr().err and not (tmp_path / "report").exists()


def test_compare_by_cost_prints_a_ratio_its_interval_level_and_verdict(tmp_path, capsys):
    _runs(tmp_path / "t4", "gpu", 256, [1.0, 1.02, 0.98])
    _runs(tmp_path / "a100", "gpu", 256, [4.0, 4.1, 3.9])
    for path in (tmp_path / "a100").rglob("*.json"):  # the same work on an A100 runtime, 4x as fast
        record = json.loads(path.read_text())
        record["accelerator_found"] = record["device"]["name"] = "NVIDIA A100-SXM4-40GB"
        path.write_text(json.dumps(record))
    csv_path = tmp_path / "cost.csv"
    assert main(["compare", str(tmp_path / "t4"), str(tmp_path / "a100"), "--by", "cost", "--csv", str(csv_path)]) == 0
    out = capsys.readouterr().out
    assert "$ per 1,000 training samples" in out and "costlier (75 %, n = 3)" in out  # 11.77 / 1.84 / 4 = 1.6x
    (row,) = list(csv.DictReader(csv_path.open()))
    assert float(row["ratio"]) == pytest.approx(11.77 / 1.84 / 4) and row["verdict"] == "costlier"
    assert float(row["ratio_ci_low"]) < float(row["ratio"]) < float(row["ratio_ci_high"])
    assert float(row["ratio_ci_level"]) == pytest.approx(0.75)
    assert "rates: T4, A100: Chris McCormick" in out  # only the rates that priced a run


def test_compare_by_cost_names_the_pairs_it_cannot_judge(tmp_path, capsys):
    _runs(tmp_path / "before", "cpu", 256, [1.0, 1.1, 0.9])
    _runs(tmp_path / "after", "cpu", 256, [1.0, 1.1, 0.9])
    assert main(["compare", str(tmp_path / "before"), str(tmp_path / "after"), "--by", "cost"]) == 2
    assert "has a cost on both sides: no rate given for cpu" in capsys.readouterr().err
    assert main(["compare", str(tmp_path / "before"), str(tmp_path / "after"), "--rates",
                 str(rates_file(tmp_path))]) == 2
    assert "--rates prices runs for --by cost" in capsys.readouterr().err
    for side in ("before", "after"):  # a second pair, run on a T4 runtime's CPU: priced on both sides
        _runs(tmp_path / side, "cpu", 512, [1.0, 1.1, 0.9])
        for path in (tmp_path / side / "cnn_mnist" / "cpu").glob("batch_size-512*.json"):
            record = json.loads(path.read_text())
            record["accelerator_found"] = "Tesla T4"
            path.write_text(json.dumps(record))
    assert main(["compare", str(tmp_path / "before"), str(tmp_path / "after"), "--by", "cost"]) == 0
    out = capsys.readouterr().out
    assert "1 combination(s) in common" in out and "batch_size=512" in out
    assert "not judged on cost: cnn_mnist" in out and "batch_size=256" in out and "no rate given for cpu" in out
