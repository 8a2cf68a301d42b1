"""The report's cost section (docs/cost.md): per combination and unit of work its seconds, compute units, dollars
and joules (medians over runs), the Pareto front, and each runtime's dollars against the fastest one's."""

from __future__ import annotations

from typing import Any

import pandas as pd

from matplotlib.ticker import FuncFormatter

from colabkit.cost.per_unit import HEADLINE_UNITS, UNITS, Figure, UnitOfWork
from colabkit.report.common import column, comparison_fields, interval_texts, title_of, work_key
from colabkit.report.figures import error_bars, label_colors, label_markers, levels, new_figure, state_levels, wide
from colabkit.report.records import ReportData, run_modes, sort_labels
from colabkit.report.section import ReportFigure, ReportTable, Section
from colabkit.report.writers import format_number
from colabkit.report.runs import interval_fields
from colabkit.statistics import finite

FIGURES: tuple[Figure, ...] = ("s", "usd", "cu", "j")


def cost_rows(data: ReportData) -> pd.DataFrame:
    """Per combination and unit of work its runs timed: runtime, rate, runs, each figure's median over runs."""
    runs = data.costed()
    if not len(runs):
        return pd.DataFrame()
    configuration = work_key(runs, ("device", "backend"))
    rows = []
    for _, group in runs.groupby("combination_id", sort=False):
        last = group.iloc[-1]
        for unit in UNITS:
            times = finite(column(group, unit.column("s")))
            if not times or run_modes(group).iloc[-1] != unit.mode:
                continue
            dollars = finite(column(group, unit.column("usd")))
            row: dict[str, Any] = {
                "notebook": last["notebook"], "mode": unit.mode, "unit": unit.key, "per": unit.label,
                "combination": last["combination"], "configuration": configuration[last.name],
                "device": last["device_label"], "runtime": last["cost.runtime"],
                "usd_per_hour": last.get("cost.usd_per_hour"), "cu_per_hour": last.get("cost.cu_per_hour"),
                "no_rate": last.get("cost.no_rate"), "runs": len(group), "usd_samples": dollars}
            for figure in FIGURES:
                row |= interval_fields(finite(column(group, unit.column(figure))), figure)
            rows.append(row)
    return pd.DataFrame(rows)


def pareto_front(times: list[float], costs: list[float]) -> list[bool]:
    """Which points are the cheapest for their speed: no other point is as fast and as cheap, and faster or cheaper."""
    points = list(zip(times, costs))
    return [not any(t <= time and c <= cost and (t < time or c < cost) for t, c in points) for time, cost in points]


def fronts_and_ratios(rows: pd.DataFrame) -> tuple[pd.Series, pd.DataFrame]:
    """Among the priced runtimes that did the same work: whether each row is on their Pareto front of seconds and
    dollars (None unpriced); and each one's dollars over the fastest one's, the ratio's interval and verdict."""
    front, ratios = pd.Series(None, index=rows.index, dtype=object), []
    for _, group in rows[rows["usd"].notna()].groupby(["notebook", "unit", "configuration"], sort=False):
        front.loc[group.index] = pareto_front(list(group["s"]), list(group["usd"]))
        fastest = group.loc[group["s"].idxmin()]
        for _, row in group.drop(index=fastest.name).iterrows():
            fields = comparison_fields(row["usd_samples"], fastest["usd_samples"], False, "ratio", oriented=False,
                                       words="cost")
            ratios.append({"experiment": title_of(row["notebook"]), "per": row["per"],
                           "combination": row["combination"], "device": row["device"],
                           "against (fastest)": fastest["device"], "$ ratio": fields["ratio"],
                           "ratio low": fields["ratio_low"], "ratio high": fields["ratio_high"],
                           "verdict": fields["ratio_verdict"]})
    return front, pd.DataFrame(ratios)


def cost_figure(rows: pd.DataFrame, notebook: str, unit: UnitOfWork, palette: dict[str, str]) -> ReportFigure | None:
    """Seconds against dollars per `unit` of `notebook`'s priced combinations; the Pareto front filled."""
    drawn = rows[(rows["notebook"] == notebook) & (rows["unit"] == unit.key) & rows["usd"].notna()]
    if not len(drawn):
        return None
    figure, (ax,) = new_figure(width=7.0, height=4.5)
    colors, markers = label_colors(drawn["device"], palette), label_markers(drawn["device"])
    for _, group in drawn.groupby("configuration", sort=False):
        if len(group) > 1:
            ordered = group.sort_values("s")
            ax.plot(ordered["s"], ordered["usd"], color="#bbbbbb", linewidth=0.8, zorder=1)
    for device in sort_labels(drawn["device"]):
        points = drawn[drawn["device"] == device]
        for on_front, subset in points.groupby(points["pareto"].astype(bool)):
            ax.errorbar(subset["s"], subset["usd"], xerr=error_bars(subset, "s", "s_low", "s_high"),
                        yerr=error_bars(subset, "usd", "usd_low", "usd_high"), fmt=markers[device],
                        color=colors[device], markerfacecolor=colors[device] if on_front else "white", capsize=2,
                        linewidth=1, zorder=2, label=device if on_front or not points["pareto"].astype(bool).any() else None)
    if wide(drawn["s"]) or wide(drawn["usd"]):  # both, so that each runtime's rate is a straight line
        ax.set(xscale="log", yscale="log")
    state_levels(ax, drawn, "usd_low")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: format_number(value, 3)))
    ax.set(xlabel=f"seconds per {unit.label}", ylabel=f"$ per {unit.label}",
           title=f"{title_of(notebook)}: time and cost per {unit.label}")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), title="filled: cheapest for its speed")
    data = drawn[["combination", "device", "runtime", "usd_per_hour", "runs", "s", "s_low", "s_high", "usd",
                  "usd_low", "usd_high", "usd_level", "pareto"]].reset_index(drop=True)
    return ReportFigure(f"cost_{notebook}_{unit.key}", figure, data,
                        f"{title_of(notebook)}: seconds and dollars per {unit.label} of each combination on each "
                        f"priced runtime, medians over runs with their intervals ({levels(drawn['usd_level'])}); a grey "
                        "line joins the runtimes that did the same work, filled points are the cheapest for their "
                        "speed among them (the Pareto front).")


def rates_table(data: ReportData) -> pd.DataFrame:
    """Each runtime the runs had: its rate, source, date read and runs priced, or why it has none."""
    runs = data.costed()
    rates = {rate.runtime: rate for rate in data.rates.rates}
    out = []
    for runtime, group in runs.groupby("cost.runtime", sort=True):
        rate = rates.get(str(runtime))
        reason = column(group, "cost.no_rate", None).dropna()
        out.append({"runtime": runtime, "runs": len(group),
                    "compute units per hour": rate.compute_units_per_hour if rate else None,
                    "$ per hour": rate.usd_per_hour if rate else None, "given in": rate.given_in if rate else None,
                    "source": rate.source if rate else (reason.iloc[0] if len(reason) else None),
                    "read": rate.read if rate else None})
    return pd.DataFrame(out)


def missing_rates(data: ReportData) -> str | None:
    """The sentence naming each runtime whose runs have no rate, and how many; None when every run is priced."""
    runs = data.costed()
    runs = runs[column(runs, "cost.no_rate", None).notna()]
    if not len(runs):
        return None
    named = [f"{runtime} ({len(group)} run(s) of {', '.join(dict.fromkeys(map(title_of, group['notebook'])))})"
             for runtime, group in runs.groupby("cost.runtime", sort=True)]
    return ("No rate given for: " + "; ".join(named) + ". Their compute units and dollars are not computed (their "
            "times and joules are shown). A rates file gives them: `python -m colabkit report ... --rates FILE` "
            "(docs/cost.md says its form and where Colab shows a runtime's rate).")


def cost_section(data: ReportData) -> Section:
    """Dollars against the fastest runtime's in the body; rates, figures and costs in the appendix."""
    section = Section("cost", "Cost")
    runs = data.used()
    unused = data.rates.unused(column(runs, "cost.runtime", None)[column(runs, "cost.usd_per_hour").notna()])
    section.notes.extend([unused] if unused else [])  # a rates file's entry that priced no run
    rows = cost_rows(data)
    if not len(rows):
        section.empty = "no ok run with a time per unit of work."
        return section
    rows["pareto"], ratios = fronts_and_ratios(rows)
    missing = missing_rates(data)
    if len(ratios):
        section.items.append(ReportTable("cost", ratios.drop(columns=["combination", "ratio low", "ratio high"]).assign(
            interval=interval_texts(ratios, "ratio low", "ratio high")), "Each runtime's dollars per unit of work over "
            "those of the fastest runtime that did the same work: the ratio of the medians, its interval and verdict "
            "(docs/cost.md).", body=True))
    else:
        section.empty = ("no rate for " + ", ".join(sorted(set(rows.loc[rows["usd"].isna(), "runtime"]))) +
                         " (--rates FILE gives one)." if missing else "no work ran on two priced runtimes.")
    section.notes.append("Seconds per unit of work at the hourly rate of the runtime each run really had, in compute "
                         "units and dollars, and joules (docs/cost.md); medians over runs with the time's interval.")
    if missing:
        section.notes.append(missing)
    section.items.append(ReportTable("cost_rates", rates_table(data), "The runtimes the runs had: each one's rate "
                                     "per hour, its source and the date it was read, and the runs it priced (or why "
                                     "a runtime has no rate)."))
    section.items += [figure for notebook in dict.fromkeys(rows["notebook"]) for unit in UNITS
                      if unit.key in set(rows.loc[rows["notebook"] == notebook, "unit"])
                      and HEADLINE_UNITS[unit.mode] == unit.key
                      and (figure := cost_figure(rows, notebook, unit, data.palette)) is not None]
    names: dict[Figure, str] = {"s": "s", "usd": "$", "cu": "compute units", "j": "J"}
    printed = pd.DataFrame({"experiment": rows["notebook"].map(title_of), "per": rows["per"],
                            "combination": rows["combination"], "device": rows["device"], "runtime": rows["runtime"],
                            "$ per hour": rows["usd_per_hour"], "runs": rows["runs"],
                            **{f"{name}{end}": rows[f"{figure}{suffix}"] for figure, name in names.items()
                               for end, suffix in (("", ""), (" low", "_low"), (" high", "_high"))},
                            "level": rows["s_level"], "J level": rows["j_level"],  # joules: their own runs
                            "cheapest for its speed": rows["pareto"]})
    section.items.append(ReportTable("cost_per_unit", printed, "Per combination and unit of work: seconds, "
                                     "dollars, compute units and joules per unit, medians over runs with their "
                                     "intervals (low, high) and the level they reach; `cheapest for its speed`: on the "
                                     "Pareto front of time and dollars among the runtimes that did the same work."))
    if len(ratios):
        section.items.append(ReportTable("cost_ratios", ratios, "Each runtime's dollars per unit against those of "
                                         "the fastest runtime that did the same work: the ratio of the medians, its "
                                         "interval (each side's median interval end to end) and the verdict at the "
                                         "level it reaches (docs/statistics.md)."))
    return section

