"""CNN-MNIST section: epoch time and per-sample step time per global batch size and device, with
Alyafeai 2018's published figures beside ours (matched on the global batch), and test accuracy.
Ragab & Ragab's framework table never states its model, so it is shown apart, as published figures
of an unknown model, never as a like-for-like comparison."""

from __future__ import annotations

import numpy as np
import pandas as pd

from colabkit.experiments.published import (
    ALYAFEAI_2018_MNIST_CNN,
    ALYAFEAI_2018_SOURCE,
    RAGAB_FRAMEWORKS,
    RAGAB_SOURCE,
)
from colabkit.plots import device_color
from colabkit.report.bottlenecks import bottleneck_items
from colabkit.report.common import (
    WORK_DIFFERS_NOTE,
    column,
    global_batch,
    has,
    interval_frame,
    levels,
    notebook_section,
    pick,
    repeats_std,
    run_config_key,
    samples_column,
    series_labels,
    timing_frame,
    train_samples,
)
from colabkit.report.figures import grouped_bars, new_figure, series_colors
from colabkit.report.records import ReportData, sort_labels
from colabkit.report.section import ReportFigure, ReportTable, Section
from colabkit.report.utilisation import utilisation_items
from colabkit.report.writers import format_number, span

NOTEBOOK = "cnn_mnist"
INTRO = ("The small convolutional network of Alyafeai 2018 (GPUvsTPU notebook) trained at several batch sizes. The "
         "first epoch (tracing, compilation) is reported apart; the later epochs are the steady state, with their "
         "spread. Epoch time is their median; per-sample time is their training time over the samples they "
         "trained on (slow epochs count at their cost), the unit the Keras of 2018 printed, so Alyafeai's two "
         "tables (K80 GPU and TPU v2-8) sit beside ours.")
PUBLISHED_SERIES = {"gpu": "Alyafeai 2018: K80 GPU", "tpu": "Alyafeai 2018: TPU v2-8"}
PUBLISHED_TRAIN_SAMPLES = 60_000


def cnn_table(data: ReportData) -> pd.DataFrame:
    """One row per ok CNN-MNIST record: device, global batch, timing figures with spread, accuracy."""
    ok = data.ok(NOTEBOOK)
    batch = global_batch(ok)
    table = pd.DataFrame({
        "device": ok["device_label"], "series": series_labels(ok, ["params.batch_size"], exclude=("batch_size_is",)),
        "batch": batch, "backend": column(ok, "params.backend"), "replicas": column(ok, "metrics.replicas"),
        "train_samples": train_samples(ok),
        **timing_frame(ok),
        "test_accuracy": column(ok, "metrics.test_accuracy"), "test_accuracy_std": repeats_std(ok, "test_accuracy"),
        "test_loss": column(ok, "metrics.test_loss"), "data": ok["data_used"], "config": run_config_key(ok),
        "runs": column(ok, "runs"), "busy_runs": column(ok, "busy_runs"),
        "between_run_cv": column(ok, "headline.between_cv"), "within_run_cv": column(ok, "headline.within_cv"),
        "path": ok["path"],
    })
    table = pd.concat([table, interval_frame(samples_column(ok, "epoch_time_steady_s"), "epoch_steady_s"),
                       interval_frame(samples_column(ok, "sample_time_steady_us"), "sample_us")
                       .drop(columns="sample_us_runs")], axis=1)
    order = {label: index for index, label in enumerate(sort_labels(table["device"]))}
    return table.sort_values(["device", "series", "batch"], key=lambda c: c.map(order) if c.name == "device" else c) \
        .reset_index(drop=True)


def epoch_samples(table: pd.DataFrame) -> pd.Series:
    """Training samples per epoch: the count the timer recorded, else the slice the run asked for."""
    recorded = table["samples_per_epoch"].astype(float) if "samples_per_epoch" in table else None
    return table["train_samples"].astype(float) if recorded is None else recorded.fillna(table["train_samples"])


def _published_rows() -> pd.DataFrame:
    return pd.DataFrame([{"series": PUBLISHED_SERIES[kind], "device": kind.upper(), "batch": batch,
                          "epoch_steady_s": figures["epoch_time_s"], "sample_us": figures["sample_time_us"]}
                         for batch, devices in ALYAFEAI_2018_MNIST_CNN.items() for kind, figures in devices.items()])


def _colors(table: pd.DataFrame) -> dict[str, str]:
    return {**series_colors(table), **{name: device_color(kind) for kind, name in PUBLISHED_SERIES.items()}}


def epoch_time_figure(table: pd.DataFrame) -> ReportFigure:
    """Two panels of bars per global batch size: steady epoch time and per-sample time, ours (medians over
    runs, with their intervals over runs) beside Alyafeai 2018's (hatched): their epoch times only where
    our epochs covered the same 60,000 samples (same_epoch_work), their per-sample times always."""
    both = pd.concat([table, _published_rows()], ignore_index=True)
    samples = sorted({int(n) for n in epoch_samples(table) if np.isfinite(n)})
    same_work = samples == [PUBLISHED_TRAIN_SAMPLES]
    figure, axes = new_figure(ncols=2, width=5.2, height=4.2)
    for ax, value, label in [(axes[0], "epoch_steady_s", "steady epoch time (s)"),
                             (axes[1], "sample_us", "time per sample (us)")]:
        drawn = both if same_work or value != "epoch_steady_s" else table
        grouped_bars(ax, drawn, "batch", value, low=f"{value}_low", high=f"{value}_high", colors=_colors(table),
                     hatched=PUBLISHED_SERIES.values())
        ax.set_xlabel("global batch size")
        ax.set_ylabel(label)
    axes[0].set_title("Epoch time (validation included)")
    axes[1].set_title("Per-sample step time")
    handles, labels = axes[1].get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside lower center", ncols=min(3, len(labels)))
    behind = both[["series", "device", "batch", "runs", "epoch_steady_s", "epoch_steady_s_low", "epoch_steady_s_high",
                   "epoch_steady_std_s", "sample_us", "sample_us_low", "sample_us_high"]]
    caption = ("Bars side by side share a global batch (samples per step over all replicas), as the published "
               "rows do. Steady state, the epochs after the first: epoch time their median, per-sample time their "
               "training time over their samples, each run's figure, then the median over runs; error bars: the "
               f"interval of that median over runs at the level its runs reach ({levels(table['epoch_steady_s_level'])}; "
               "none with fewer than 3 runs; the spread of "
               "epochs inside one run is in the table, not drawn: epochs of one run are not independent runs). "
               f"Hatched: {ALYAFEAI_2018_SOURCE}.")
    if samples and samples != [PUBLISHED_TRAIN_SAMPLES]:
        caption += (f" Work per epoch differs: our epochs covered {', '.join(f'{n:,}' for n in samples)} training "
                    "samples, the published 60,000, so the published epoch times are not drawn (the table "
                    "cnn_epoch_time_vs_published says why); compare per-sample times.")
    elif len(samples) > 1:
        caption += " Work per epoch differs between our runs: compare per-sample times, not epoch times."
    return ReportFigure("cnn_epoch_and_sample_time", figure, behind.copy(), caption)


def accuracy_figure(table: pd.DataFrame) -> ReportFigure:
    """Test accuracy per global batch size and device."""
    figure, (ax,) = new_figure(width=6.5, height=3.8)
    grouped_bars(ax, table, "batch", "test_accuracy", err="test_accuracy_std", colors=series_colors(table))
    ax.set_ylim(0, 1)
    ax.set_xlabel("global batch size")
    ax.set_ylabel("test accuracy")
    ax.set_title("CNN on MNIST: test accuracy")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5))
    epochs = sorted({int(e) for e in table["epochs_run"].astype(float) if np.isfinite(e)})
    return ReportFigure("cnn_accuracy", figure, table[["series", "device", "batch", "epochs_run", "test_accuracy",
                                                      "test_accuracy_std", "data"]].copy(),
                        "Accuracy on the whole test set, computed on the host, after "
                        f"{', '.join(map(str, epochs))} epoch(s).")


def published_comparison(table: pd.DataFrame, value: str) -> pd.DataFrame:
    """Alyafeai 2018's table layout: a row per batch size, a column per device: ours, then theirs."""
    both = pd.concat([table[["series", "batch", value]], _published_rows()[["series", "batch", value]]], ignore_index=True)
    pivot = both.pivot_table(index="batch", columns="series", values=value, aggfunc="first", sort=False)
    ordered = [*dict.fromkeys(table["series"]), *PUBLISHED_SERIES.values()]
    pivot = pivot[[name for name in ordered if name in pivot.columns]]
    return pivot.reset_index().rename(columns={"batch": "global batch"}).rename_axis(columns=None)


def epoch_time_comparison(table: pd.DataFrame) -> ReportTable:
    """Our steady epoch times beside Alyafeai 2018's where our epochs covered the same 60,000 samples;
    otherwise a table that says, per batch, why they are not compared."""
    samples = sorted({int(n) for n in epoch_samples(table) if np.isfinite(n)})
    if samples == [PUBLISHED_TRAIN_SAMPLES]:
        return ReportTable("cnn_epoch_time_vs_published", published_comparison(table, "epoch_steady_s"),
                           f"Steady epoch time (s) per global batch size: ours and {ALYAFEAI_2018_SOURCE}.")
    why = pd.DataFrame({"global batch": table["batch"], "series": table["series"],
                        "our samples per epoch": epoch_samples(table), "published samples per epoch":
                        PUBLISHED_TRAIN_SAMPLES, "epoch times compared": "no: other work per epoch"})
    return ReportTable("cnn_epoch_time_vs_published", why.drop_duplicates().reset_index(drop=True),
                       f"Why our epoch times are not set beside {ALYAFEAI_2018_SOURCE}: an epoch time is comparable "
                       "only at the same samples per epoch; compare the per-sample times instead (next table).")


FRAMEWORKS_PUBLISHED = "published, model unknown"


def published_frameworks_table() -> pd.DataFrame:
    """Ragab & Ragab's table as published: whole training time and test accuracy per framework and
    device, of a CNN on MNIST whose layers, batch size and epochs the source never states."""
    return pd.DataFrame([{"framework": framework, "device": device.upper(), "training time (s)": figures["train_time_s"],
                          "test accuracy": figures["test_accuracy"], "model": FRAMEWORKS_PUBLISHED}
                         for (framework, device), figures in RAGAB_FRAMEWORKS.items()])


def frameworks_table(table: pd.DataFrame) -> pd.DataFrame | None:
    """Our runs on several Keras backends: training time and test accuracy per framework and device,
    one model (Alyafeai 2018's CNN) at one global batch (None with one backend or none). Ragab &
    Ragab's figures are not put beside them: their model is unknown, so the pair would not compare
    like with like (see `published_frameworks_table`)."""
    if table["backend"].dropna().nunique() < 2:
        return None
    rows = [{"framework": row.backend, "device": row.device, "global batch": row.batch, "epochs": row.epochs_run,
             "train samples": row.train_samples, "training time (s)": row.train_time_s,
             "samples/s": row.samples_per_s, "test accuracy": row.test_accuracy}
            for row in table[table["backend"].notna()].itertuples()]
    return pd.DataFrame(rows).sort_values(["framework", "device", "global batch"]).reset_index(drop=True)


def _findings(table: pd.DataFrame) -> str:
    sentences = []
    for series, rows in table.groupby("series", sort=False):
        fastest = rows.loc[rows["sample_us"].idxmin()] if rows["sample_us"].notna().any() else None
        if fastest is None:
            sentences.append(f"**{series}**: no steady-state time in its records (one epoch only, or not recorded).")
            continue
        sentences.append(
            f"**{series}**: fastest at batch {format_number(fastest['batch'])}, "
            f"{format_number(fastest['sample_us'], 3)} us per "
            f"sample ({format_number(fastest['epoch_steady_s'], 3)} s per steady epoch; first epoch "
            f"{format_number(fastest['epoch_first_s'], 3)} s); test accuracy {span(rows['test_accuracy'])}.")
    return " ".join(sentences)


def _fill(section: Section, table: pd.DataFrame, data: ReportData) -> None:
    section.text.append(_findings(table))
    timed = has(table, "epoch_steady_s") or has(table, "sample_us")
    epoch_figure = epoch_time_figure(table) if timed else None
    accuracy = accuracy_figure(table) if has(table, "test_accuracy") else None
    printed = pick(table, [("device", "device"), ("batch", "global batch"), ("replicas", "replicas"),
                           ("train_samples", "train samples"), ("samples_per_epoch", "samples/epoch"),
                           ("epochs_run", "epochs"), ("runs", "runs"), ("busy_runs", "busy runs"),
                           ("epoch_first_s", "first epoch (s)"), ("steady_s", "steady part (s)"),
                           ("epoch_steady_s", "steady epoch (s)"),
                           ("epoch_steady_s_low", "low (s)"), ("epoch_steady_s_high", "high (s)"), ("epoch_steady_s_level", "level"),
                           ("between_run_cv", "between-run CV"), ("within_run_cv", "within-run CV"),
                           ("epoch_steady_std_s", "std over epochs (s)"), ("step_ms", "step (ms)"),
                           ("sample_us", "per sample (us)"),
                           ("samples_per_s", "samples/s"), ("test_accuracy", "test accuracy"),
                           ("test_accuracy_std", "accuracy std"), ("test_loss", "test loss"), ("data", "data")])
    section.items = [
        ReportTable("cnn_mnist", printed, "CNN-MNIST timing and accuracy per device and global batch size: medians "
                    "over runs; the steady epoch time's interval over runs with the level it reaches (none below 3 runs), its "
                    "spread between runs (CV) beside its spread inside one run (CV of the steady epochs). "
                    + WORK_DIFFERS_NOTE),
        *([epoch_figure] if epoch_figure else []),
        epoch_time_comparison(table),
        ReportTable("cnn_sample_time_vs_published", published_comparison(table, "sample_us"),
                    f"Time per sample (us) per global batch size: ours and {ALYAFEAI_2018_SOURCE}."),
        *([accuracy] if accuracy else []),
    ]
    frameworks = frameworks_table(table)
    if frameworks is not None:
        section.items.append(ReportTable(
            "cnn_frameworks", frameworks,
            "One CNN (Alyafeai 2018's) on several Keras backends: whole-fit time, throughput and test accuracy "
            "at one global batch. Where epochs or train samples differ between rows, compare samples/s, not "
            "training times."))
        section.items.append(ReportTable(
            "cnn_frameworks_published", published_frameworks_table(),
            f"Published, model unknown: {RAGAB_SOURCE}. The source states neither the model nor its batch "
            "size or epochs, so these figures are shown apart from ours, not as a like-for-like comparison; cells "
            "it left empty are absent."))
    section.items += utilisation_items(data, NOTEBOOK, "cnn")
    section.items += bottleneck_items(data, NOTEBOOK, "cnn")


def cnn_section(data: ReportData) -> Section:
    """The CNN-MNIST section (or one that says why it has nothing to show)."""
    return notebook_section(data, NOTEBOOK, "CNN on MNIST", "cnn", cnn_table, _fill, INTRO)
