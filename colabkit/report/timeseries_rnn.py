"""Time-series section (weather forecast with a recurrent network): its figures are the declaration's
(report.headline), its own the loss curves and the predictions against the truth; in the appendix the errors beside
the persistence baseline's and Hvass-Labs #23's."""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.dates import AutoDateLocator, ConciseDateFormatter
from matplotlib.ticker import MaxNLocator

from colabkit.experiments.published import HVASS_SOURCE, HVASS_WEATHER
from colabkit.report.common import (column, comparison_fields, experiment_frame, global_batch, has, interval_spec,
                                    metrics, pick, samples_column, timing_frame)
from colabkit.report.figures import new_figure, series_colors, wide
from colabkit.report.headline import notebook_section
from colabkit.report.records import ReportData
from colabkit.report.section import ReportFigure, ReportTable, Section
from colabkit.report.writers import format_number

NOTEBOOK = "timeseries_rnn"
# Where a record says when EarlyStopping stopped training (None or absent: it did not fire).
STOP_EPOCH_METRICS = ["metrics.early_stopping_epoch", "metrics.stopped_epoch"]
_TIME_KEYS = ("timestamps", "timestamp", "times", "time", "datetime", "index")
_TRUE_KEYS = ("true", "y_true", "truth", "actual", "observed")
_PREDICTED_KEYS = ("predicted", "y_pred", "prediction", "pred", "forecast")
_NAME_KEYS = ("targets", "target_names", "columns", "names")


def timeseries_table(data: ReportData) -> pd.DataFrame:
    """One row per ok time-series combination: device, batch size, timing with spread, early-stopping epoch, losses,
    and every `mae_*` / `persistence_mae_*` the records hold (with `runs_<name>`, each run's)."""
    ok = data.ok(NOTEBOOK)
    stop = next((name for name in STOP_EPOCH_METRICS if has(ok, name)), None)
    errors = [name[len("metrics."):] for name in ok.columns
              if re.fullmatch(r"metrics\.(persistence_)?mae_.+", name) and has(ok, name)]
    return experiment_frame(ok, ["params.batch_size"], ["device", "series", "batch"], {
        "batch": global_batch(ok), **timing_frame(ok), "stop_epoch": column(ok, stop) if stop else np.nan,
        **metrics(ok, "best_epoch", "val_loss", "test_loss", "persistence_test_loss", *errors),
        **{f"runs_{name}": samples_column(ok, name) for name in errors}}, {"epoch_time_steady_s": "epoch_steady_s"})


def loss_curves_figure(table: pd.DataFrame, data: ReportData) -> ReportFigure | None:
    """Validation (solid) and training (dashed) loss per epoch of each combination's latest run."""
    rows = []
    for row in table.itertuples():
        history = data.record(row.path).get("history") or {}
        for key in ("val_loss", "loss"):
            for epoch, value in enumerate(history.get(key) or [], start=1):
                rows.append({"series": f"{row.series}, batch {format_number(row.batch)}", "device": row.device,
                             "run": Path(row.path).name, "curve": key, "epoch": epoch, "loss": value})
    if not rows:
        return None
    curves = pd.DataFrame(rows)
    figure, (ax,) = new_figure(width=7.5, height=4.2)
    colors = series_colors(curves, palette=data.palette)
    for (series, run, curve), group in curves.groupby(["series", "run", "curve"], sort=False):
        ax.plot(group["epoch"], group["loss"], color=colors[series], marker="o", markersize=3,
                linestyle="-" if curve == "val_loss" else "--", alpha=1.0 if curve == "val_loss" else 0.6,
                label=f"{series}, {run} ({'validation' if curve == 'val_loss' else 'training'})")
    ax.set_yscale("log" if wide(curves["loss"], ratio=20) else "linear")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set(xlabel="epoch", ylabel="loss (MSE, scaled targets)", title="Validation (solid) and training (dashed) loss")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5))
    return ReportFigure("timeseries_loss_curves", figure, curves,
                        "Loss per epoch as Keras logged it, in each combination's most recent run (its record named in "
                        f"the legend). Published for comparison: {HVASS_SOURCE}.")


def _first(mapping: dict[str, Any], keys: tuple[str, ...]) -> Any:
    return next((mapping[key] for key in keys if key in mapping), None)


def _columns(values: Any, names: list[str] | None) -> dict[str, list[float]] | None:
    """Series of one kind as {target: values}: from a mapping, rows of values or a flat list."""
    if isinstance(values, dict):
        return {str(name): list(series) for name, series in values.items() if isinstance(series, list)}
    if not isinstance(values, list) or not values:
        return None
    if all(isinstance(row, (list, tuple)) for row in values):
        width = len(values[0])
        labels = names if names and len(names) == width else [f"target {i + 1}" for i in range(width)]
        return {labels[i]: [row[i] if i < len(row) else None for row in values] for i in range(width)}
    return {(names or ["value"])[0]: list(values)}


def prediction_frame(record: dict[str, Any]) -> pd.DataFrame | None:
    """A record's `predictions` as a long table (time, target, true, predicted, persistence), targets with their
    units; None without them or in a layout it does not know."""
    predictions = record.get("predictions")
    if not isinstance(predictions, dict):
        return None
    names = _first(predictions, _NAME_KEYS)
    true, predicted = _first(predictions, _TRUE_KEYS), _first(predictions, _PREDICTED_KEYS)
    if true is None and predicted is None:  # {target: {true: [...], predicted: [...]}}
        per_target = {name: value for name, value in predictions.items() if isinstance(value, dict)}
        true = {name: _first(value, _TRUE_KEYS) for name, value in per_target.items()}
        predicted = {name: _first(value, _PREDICTED_KEYS) for name, value in per_target.items()}
    true, predicted = _columns(true, names), _columns(predicted, names)
    if not true or not predicted:
        return None
    times = _first(predictions, _TIME_KEYS)
    persistence = _columns(predictions.get("persistence"), names) or {}
    units = dict(zip(names or [], predictions.get("units") or []))
    frames = []
    for target in [name for name in true if name in predicted]:
        length = min(len(true[target]), len(predicted[target]))
        stamps = times[:length] if isinstance(times, list) and len(times) >= length else list(range(length))
        baseline = persistence.get(target, [])
        frames.append(pd.DataFrame({
            # 'hPa (mbar, station level)' -> 'hPa': the axis label needs the unit, not its gloss
            "time": stamps, "target": f"{target} ({units[target].split(' (')[0]})" if units.get(target) else target,
            "true": true[target][:length], "predicted": predicted[target][:length],
            "persistence": baseline[:length] if len(baseline) >= length else [np.nan] * length}))
    if not frames:
        return None
    frame = pd.concat(frames, ignore_index=True)
    if frame["time"].map(lambda v: isinstance(v, str)).all():
        frame["time"] = pd.to_datetime(frame["time"], errors="coerce", utc=True)
    return frame


def predictions_figure(table: pd.DataFrame, data: ReportData) -> ReportFigure | None:
    """Truth, persistence and each device's best run's predictions, a panel per target (None where none is read)."""
    best = table.sort_values("val_loss", na_position="last").drop_duplicates("device")
    frames = [frame.assign(series=row.series, device=row.device, run=Path(row.path).name) for row in best.itertuples()
              if (frame := prediction_frame(data.record(row.path))) is not None]
    if not frames:
        return None
    long = pd.concat(frames, ignore_index=True)
    targets = list(dict.fromkeys(long["target"]))
    figure, axes = new_figure(nrows=len(targets), width=9.0, height=2.6)
    colors = series_colors(long, palette=data.palette)
    truth = frames[0]
    for ax, target in zip(axes, targets):
        reference = truth[truth["target"] == target]
        ax.plot(reference["time"], reference["true"], color="black", linewidth=1.4, label="truth")
        if reference["persistence"].notna().any():
            ax.plot(reference["time"], reference["persistence"], color="#999999", linewidth=1.0, linestyle=":",
                    label="persistence forecast")
        for (series, run), rows in long[long["target"] == target].groupby(["series", "run"], sort=False):
            ax.plot(rows["time"], rows["predicted"], color=colors[series], linewidth=1.1,
                    label=f"{series}, {run}: predicted")
        ax.set_ylabel(target)
        if pd.api.types.is_datetime64_any_dtype(reference["time"]):
            locator = AutoDateLocator()
            ax.xaxis.set_major_locator(locator)
            ax.xaxis.set_major_formatter(ConciseDateFormatter(locator))
    axes[0].set_title("Predictions against the truth (test period)")
    axes[-1].set_xlabel("time")
    handles, labels = axes[0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside lower center", ncols=min(3, len(labels)))
    return ReportFigure("timeseries_predictions", figure, long,
                        "For each device, the run with the lowest validation loss; targets in their physical units "
                        "as the records hold them.")


def error_table(table: pd.DataFrame) -> pd.DataFrame | None:
    """Model MAE beside the persistence forecast's per target: skill = 1 - model / persistence, interval, verdict."""
    targets = [name[len("mae_"):] for name in table.columns if name.startswith("mae_")]
    if not targets:
        return None
    rows = []
    for (_, row), target in itertools.product(table.iterrows(), targets):
        model, persistence = row[f"mae_{target}"], row.get(f"persistence_mae_{target}", np.nan)
        ratio = comparison_fields(*(runs if isinstance(runs, list) else [] for runs in (
            row[f"runs_mae_{target}"], row.get(f"runs_persistence_mae_{target}"))), False, "r", False, "measure")
        rows.append({"series": row["series"], "batch": row["batch"], "target": target, "model MAE": model,
                     "persistence MAE": persistence,
                     "skill": 1 - model / persistence if pd.notna(persistence) and persistence else np.nan,
                     "skill low": 1 - ratio["r_high"], "skill high": 1 - ratio["r_low"],
                     "vs persistence": ratio["r_verdict"]})
    return pd.DataFrame(rows)


def timeseries_section(data: ReportData) -> Section:
    """The time-series section (or why it is not in the report)."""
    return notebook_section(data, NOTEBOOK, "Weather forecasting with a recurrent network", "timeseries",
                            timeseries_table, _fill, own={"loss_curves": loss_curves_figure,
                                                          "predictions": predictions_figure})


def _fill(section: Section, table: pd.DataFrame, data: ReportData) -> None:
    errors, records = error_table(table), [data.record(path) for path in table["path"]]
    if not any(record.get("history") for record in records):
        section.notes.append("No record holds a training history, so there are no loss curves.")
    unreadable = [path for path, record in zip(table["path"], records)
                  if "predictions" in record and prediction_frame(record) is None]
    if unreadable or not any("predictions" in record for record in records):
        section.notes.append(f"Predictions in a layout this report does not read: {', '.join(unreadable)}." if
                             unreadable else "No record holds predictions, so there is no forecast plot.")
    spec = ["device", ("batch", "batch"), "epochs_run", ("stop_epoch", "early stop at"), ("best_epoch", "best epoch"),
            "runs", "epoch_first_s", "epoch_steady_s", *interval_spec("epoch_steady_s"), "epoch_steady_std_s", "step_ms",
            "samples_per_s", ("val_loss", "val loss"), "test_loss", ("persistence_test_loss", "persistence test loss"),
            *[(name, name.replace("persistence_mae_", "persistence MAE ").replace("mae_", "MAE "))
              for name in table.columns if name.startswith(("mae_", "persistence_mae_"))], "data"]
    section.items.append(ReportTable("timeseries_rnn", pick(table, spec), "Weather model per device and batch size: "
                                     "timing, losses on scaled targets, mean absolute errors in physical units."))
    if errors is not None:
        section.items.append(ReportTable("timeseries_mae_vs_persistence", errors,
                                         "Mean absolute error of the model and of the persistence forecast (the value "
                                         "24 hours earlier), medians over runs; skill above 0: the model is better; "
                                         "its interval over runs and the verdict on the model, with its level and runs."))
    hvass = pd.DataFrame([*({"source": f"ours: {row.series}, batch {format_number(row.batch)}", "test loss": row.test_loss,
                             "steady epoch (s)": row.epoch_steady_s} for row in table.itertuples()),
                          {"source": "Hvass-Labs #23: GTX 1070 (published)", "test loss": HVASS_WEATHER["test_loss"],
                           "steady epoch (s)": HVASS_WEATHER["epoch_time_s"]}])
    section.items.append(ReportTable("timeseries_vs_hvass", hvass, f"Ours beside {HVASS_SOURCE}; their epochs ran 100 "
                                     "steps of batch 256 x 1,344 hours, ours as the parameters say."))
