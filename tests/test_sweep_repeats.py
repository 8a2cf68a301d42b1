"""Repeats in the sweep: `repeats:` in a grid or preset and `--repeats`, interleaved rounds, one record
and file name per run (repeat 1 keeps the old name, so earlier results resume), resume, status and the
dry run counting runs, a device that is absent skipped once, and `--target-ci` adding rounds."""

from __future__ import annotations

import argparse
import dataclasses
import json
import textwrap

import pytest
from helpers import REPO
from notebook_factory import write_tiny_notebook

import colabkit.sweep.driver as target
from colabkit.cli import main
from colabkit.cli_arguments import share
from colabkit.errors import GridError
from colabkit.experiments import Headline
from colabkit.records.record import read_record
from colabkit.sweep.options import Repetition, RunOptions
from colabkit.sweep.plan import plan
from colabkit.sweep.decide import decide
from colabkit.sweep.driver import run_sweep
from colabkit.sweep.console import format_status
from colabkit.sweep.folder import collect_status


def quiet(line: str) -> None:
    """An `echo` that keeps test output clean."""


@pytest.fixture
def tiny(tmp_path):
    return write_tiny_notebook(tmp_path / "tiny.ipynb")


def grid_file(tmp_path, body: str):
    path = tmp_path / "grid.yaml"
    path.write_text(textwrap.dedent(body))
    return path


def test_runs_come_in_interleaved_rounds_per_device_and_repeats_come_from_grid_preset_or_command(tmp_path, tiny):
    grid = grid_file(tmp_path, f"""
        notebook: {tiny}
        grid: {{device: [cpu, gpu], value: [1, 2]}}
        repeats: 2
        presets: {{three: {{repeats: 3}}}}
    """)
    runs = plan([grid], out=tmp_path / "out")
    assert [(c.device, c.params["value"], c.repeat) for c in runs] == [
        ("cpu", 1, 1), ("cpu", 2, 1), ("cpu", 1, 2), ("cpu", 2, 2),  # round 1 of every cpu combination, then round 2
        ("gpu", 1, 1), ("gpu", 2, 1), ("gpu", 1, 2), ("gpu", 2, 2)]
    assert [c.run_slug for c in runs[:3]] == ["value-1", "value-2", "value-1_repeat-2"]
    assert len(plan([grid], preset="three", out=tmp_path / "out")) == 12
    assert len(plan([grid], preset="three", out=tmp_path / "out", repeats=1)) == 4  # --repeats wins
    decisions = decide(runs, tmp_path / "out", {"cpu": 1})
    assert [d.action for d in decisions].count("skip") == 2  # the absent gpu's two combinations, once each
    with pytest.raises(GridError, match="repeats = 0: expected a whole number >= 1"):
        plan([grid_file(tmp_path, f"notebook: {tiny}\ngrid: {{device: [cpu]}}\nrepeats: 0\n")])


def test_a_repeat_that_cannot_run_here_costs_no_fingerprint(tmp_path, tiny, monkeypatch):
    import colabkit.sweep.decide as plan_module

    grid = grid_file(tmp_path, f"notebook: {tiny}\ngrid: {{device: [gpu], value: [1]}}\nrepeats: 3\n")
    runs = plan([grid], out=tmp_path / "out")
    taken = []
    counted = plan_module.fingerprint
    monkeypatch.setattr(plan_module, "fingerprint", lambda *args: taken.append(args) or counted(*args))
    decisions = decide(runs, tmp_path / "out", {"cpu": 1})
    assert [d.action for d in decisions] == ["skip"] and len(taken) == 1  # repeat 1's skip, repeats 2 and 3 left out


def test_every_committed_preset_says_how_many_runs_and_smoke_stays_small():
    smoke = {path.stem: len(plan([path], preset="smoke", device="cpu")) for path in (REPO / "parameters").glob("*.yaml")}
    combinations = {path.stem: len(plan([path], preset="smoke", device="cpu", repeats=1))
                    for path in (REPO / "parameters").glob("*.yaml")}
    assert smoke["matmul_tflops"] == 3 * combinations["matmul_tflops"]
    assert smoke["cnn_mnist"] == 3 * combinations["cnn_mnist"]
    assert sum(smoke.values()) <= 40  # seconds each on a 2-core CPU: a few minutes in all


@pytest.mark.notebook
def test_each_repeat_is_its_own_run_and_record_and_resume_status_and_dry_run_count_them(tmp_path, tiny, capsys):
    grid = grid_file(tmp_path, f"""
        notebook: {tiny}
        grid: {{device: [cpu, tpu], value: [1]}}
        repeats: 2
    """)
    out = tmp_path / "out"
    outcomes = run_sweep(plan([grid], out=out), available={"cpu": 1}, echo=quiet)
    assert [(o.combination.device, o.combination.repeat, o.status) for o in outcomes] == [
        ("cpu", 1, "ok"), ("cpu", 2, "ok"), ("tpu", 1, "skipped")]
    first, second = (read_record(out / "tiny" / "cpu" / name) for name in ("value-1.json", "value-1_repeat-2.json"))
    assert (first["repeat"], second["repeat"]) == (1, 2) and first["started_at"] != second["started_at"]
    assert first["fingerprint"]["digest"] == second["fingerprint"]["digest"]  # one combination, two runs
    assert "host_quiet" in first and first["host_state"]["wall_s"] > 0
    assert not (out / "tiny" / "tpu" / "value-1_repeat-2.json").exists()  # skipped once, not per repeat
    # a third repeat runs only the new run; the dry run and status count runs and combinations
    assert main(["sweep", str(grid), "--out", str(out), "--repeats", "3", "--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert "value-1_repeat-3  run" in printed and "4 runs of 2 combinations" in printed
    assert "would run 1 (0 of them again), keep 2 finished earlier, skip 1" in printed
    outcomes = run_sweep(plan([grid], out=out, repeats=3), available={"cpu": 1}, echo=quiet)
    assert [o.resumed for o in outcomes if o.status == "ok"] == [True, True, False]
    status = collect_status(out)
    assert status.groups[("tiny", "cpu")].counts["ok"] == 3 and len(status.groups[("tiny", "cpu")].combinations) == 1
    assert "ok combinations" in format_status(status)


@pytest.mark.notebook
def test_target_ci_adds_rounds_until_the_interval_is_narrow_or_max_repeats(tmp_path, tiny, monkeypatch):
    grid = grid_file(tmp_path, f"""
        notebook: {tiny}
        grid: {{device: [cpu], value: [1]}}
    """)
    lines: list[str] = []
    declared = type("Declared", (), {"headline": Headline("double", "double", "", "higher")})
    monkeypatch.setattr(target, "find", lambda name: declared)  # the tiny notebook's `double` as its headline
    outcomes = run_sweep(plan([grid], out=tmp_path / "met"),
                         RunOptions(), Repetition(0.03, 5), available={"cpu": 1}, echo=lines.append)
    assert [o.combination.repeat for o in outcomes] == [1, 2, 3]  # 3 equal runs: an interval of width 0
    assert read_record(tmp_path / "met" / "tiny" / "cpu" / "value-1_repeat-3.json")["sweep"]["target_ci"] == 0.03
    assert not any("did not reach" in line for line in lines)
    never = type("Never", (), {"headline": Headline("absent", "absent", "", "higher")})
    monkeypatch.setattr(target, "find", lambda name: never)  # no value to make an interval of
    lines.clear()
    outcomes = run_sweep(plan([grid], out=tmp_path / "missed"),
                         RunOptions(), Repetition(0.03, 2), available={"cpu": 1}, echo=lines.append)
    assert [o.combination.repeat for o in outcomes] == [1, 2]
    assert "1 combination(s) did not reach +/- 3 % within 2 runs:" in lines
    assert any("value-1: no interval after 2 run(s)" in line for line in lines)


@pytest.mark.notebook
def test_target_ci_over_planned_repeats_adds_each_repeat_once_and_a_failing_combination_gets_no_more(
        tmp_path, tiny, monkeypatch):
    grid = grid_file(tmp_path, f"""
        notebook: {tiny}
        repeats: 2
        fixed: {{fail_on: 2}}
        grid: {{device: [cpu], value: [1, 2]}}
    """)
    lines: list[str] = []
    never = type("Never", (), {"headline": Headline("absent", "absent", "", "higher")})
    monkeypatch.setattr(target, "find", lambda name: never)  # no interval: every ok combination goes on
    outcomes = run_sweep(plan([grid], out=tmp_path / "o"),
                         RunOptions(), Repetition(0.03, 4), available={"cpu": 1}, echo=lines.append)
    runs = sorted((o.combination.params["value"], o.combination.repeat, o.status) for o in outcomes)
    # value 1: its 2 planned runs and one more per round up to 4, each once; value 2 fails and stops there
    assert runs == [(1, 1, "ok"), (1, 2, "ok"), (1, 3, "ok"), (1, 4, "ok"), (2, 1, "failed"), (2, 2, "failed")]
    assert any("value-2: no interval after 2 run(s) (0 ok)" in line and "latest run failed" in line for line in lines)


@pytest.mark.notebook
def test_target_counts_only_the_runs_of_todays_code_and_proposes_no_run_twice(tmp_path, tiny, monkeypatch):
    grid = grid_file(tmp_path, f"""
        notebook: {tiny}
        repeats: 3
        grid: {{device: [cpu], value: [1]}}
    """)
    run_sweep(plan([grid], out=tmp_path / "o"), available={"cpu": 1}, echo=quiet)
    third = tmp_path / "o" / "tiny" / "cpu" / "value-1_repeat-3.json"
    record = json.loads(third.read_text())
    record["fingerprint"]["digest"] = "0" * 64  # as if older code had made it
    third.write_text(json.dumps(record))
    declared = type("Declared", (), {"headline": Headline("double", "double", "", "higher")})
    monkeypatch.setattr(target, "find", lambda name: declared)
    first = plan([grid])[0]
    proposed: set = set()
    more, (state,) = target.next_round([first], tmp_path / "o", 0.03, 10, proposed)
    assert state.runs == 2 and state.interval.n == 2  # repeat 3 is another code's: run again, not counted
    assert [c.repeat for c in more] == [3]
    more, _ = target.next_round([first], tmp_path / "o", 0.03, 10, proposed)
    assert more == []  # repeat 3 still has no record of today's code: proposing it again would loop forever


def test_target_and_wait_options_are_refused_plainly(tmp_path, tiny, capsys):
    assert share("3%") == pytest.approx(0.03) and share("0.05") == 0.05
    with pytest.raises(argparse.ArgumentTypeError, match="expected a share between 0 and 100 %"):
        share("150%")
    grid = grid_file(tmp_path, f"notebook: {tiny}\ngrid: {{device: [cpu], value: [1]}}\n")
    assert main(["sweep", str(grid), "--out", str(tmp_path / "o"), "--max-repeats", "4"]) == 2
    assert "--max-repeats goes with --target-ci" in capsys.readouterr().err
    assert main(["sweep", str(grid), "--out", str(tmp_path / "o"), "--wait-quiet", "5", "--jobs", "2"]) == 2
    assert "--wait-quiet" in capsys.readouterr().err
    with pytest.raises(SystemExit) as usage:  # argparse's own one-line usage error
        main(["sweep", str(grid), "--out", str(tmp_path / "o"), "--target-ci", "abc"])
    assert usage.value.code == 2 and "'abc' is not a percentage (3%)" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def with_breakdown(tiny):
    """The tiny notebook with a `breakdown` parameter, recorded as the training notebooks record theirs."""
    import nbformat

    notebook = nbformat.read(str(tiny), as_version=4)
    notebook.cells[1].source += "breakdown = True  # the bottleneck passes\n"
    notebook.cells[2].source = notebook.cells[2].source.replace("write_record=write_record)",
                                                                "write_record=write_record, breakdown=breakdown)")
    nbformat.write(notebook, str(tiny))
    return tiny


def test_bottlenecks_first_is_read_from_grid_or_preset_and_refused_where_nothing_has_them(tmp_path, tiny):
    grid = grid_file(tmp_path, f"""
        notebook: {with_breakdown(tiny)}
        grid: {{device: [cpu], value: [1]}}
        repeats: 3
        bottlenecks: first
        presets: {{every: {{bottlenecks: all}}, bad: {{bottlenecks: sometimes}}}}
    """)
    with pytest.raises(GridError, match="presets.bad.bottlenecks: 'sometimes': expected one of all, first"):
        plan([grid])
    good = grid_file(tmp_path, grid.read_text().replace(", bad: {bottlenecks: sometimes}", ""))
    runs = plan([good])
    assert [c.settings.bottlenecks for c in runs] == ["first"] * 3
    assert [c.notebook_params.get("breakdown") for c in runs] == [None, False, False]  # repeat 1: as declared
    assert all("breakdown" not in c.params for c in runs)  # the combination itself is the same for every repeat
    profiled = dataclasses.replace(runs[1], params={**runs[1].params, "profile_steps": 5})
    assert profiled.notebook_params["profile_steps"] == 0  # a profile needs the passes: off with them
    assert dataclasses.replace(runs[0], params=profiled.params).notebook_params["profile_steps"] == 5
    assert [c.settings.bottlenecks for c in plan([good], "every")] == ["all"] * 3
    plain = write_tiny_notebook(tmp_path / "plain" / "tiny.ipynb")  # no `breakdown` parameter
    refused = grid_file(tmp_path, f"notebook: {plain}\ngrid: {{device: [cpu]}}\nbottlenecks: first\n")
    with pytest.raises(GridError, match="bottlenecks: the notebook .* declares no `breakdown` parameter"):
        plan([refused])


@pytest.mark.notebook
def test_the_bottleneck_passes_once_per_combination_leave_its_repeats_one_combination(tmp_path, tiny):
    """`bottlenecks: first`: repeats 2 and 3 run with breakdown=False, and stay runs of the same combination
    (one fingerprint, the same `fingerprint.params`: the report's intervals take all three)."""
    from colabkit.records.identity import asked_params, run_work, work_key

    grid = grid_file(tmp_path, f"""
        notebook: {with_breakdown(tiny)}
        grid: {{device: [cpu], value: [1]}}
        repeats: 3
        bottlenecks: first
    """)
    outcomes = run_sweep(plan([grid], out=tmp_path / "o", kernels="reuse"), available={"cpu": 1}, echo=quiet)
    records = [read_record(outcome.record_path) for outcome in outcomes]
    assert [record["params"]["breakdown"] for record in records] == [True, False, False]
    assert {record["fingerprint"]["digest"] for record in records} == {records[0]["fingerprint"]["digest"]}
    assert all(asked_params(record) == asked_params(records[0]) for record in records)
    assert len({work_key(run_work(record)) for record in records}) == 1  # one run identity: the report pairs all three
    assert [record["sweep"]["bottlenecks"] for record in records] == ["first"] * 3
    assert [record["kernel"]["key"]["repeat"] for record in records] == [1, 2, 3]  # warm, yet a kernel per repeat


def test_a_run_that_needs_an_absent_extra_is_skipped_and_its_reason_names_the_extra(tmp_path, monkeypatch):
    import importlib.util

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *args: None if name in ("xprof", "jax")
                        else real_find_spec(name, *args))  # a core install: neither the profile nor the jax extra
    grid = REPO / "parameters" / "cnn_mnist.yaml"
    profiled = plan([grid], "paper", "cpu", {"profile_steps": 2, "breakdown": True}, tmp_path / "out", 1)[:1]
    on_jax = plan([grid], "smoke", "cpu", {"backend": "jax"}, tmp_path / "out", 1)[:1]
    plain = plan([grid], "smoke", "cpu", {}, tmp_path / "out", 1)[:1]
    [profile, jax, core] = decide([*profiled, *on_jax, *plain], tmp_path / "out", {"cpu": 1})
    assert (profile.action, profile.skip_type) == ("skip", "ExtraNotInstalledError")
    assert "needs the profile extra" in profile.reason and "pip install 'colabkit[profile]'" in profile.reason
    assert (jax.action, jax.skip_type) == ("skip", "BackendUnsupportedError")
    assert "needs the jax extra" in jax.reason and "pip install 'colabkit[jax]'" in jax.reason
    assert core.action == "run"  # the core runs what needs no extra
