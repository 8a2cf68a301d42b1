"""CNN-MNIST section: its headline figure (steady epoch time per global batch and device, Alyafeai 2018's beside it
where our epochs did the same work) is the declaration's; in the appendix every figure per combination, the
per-sample times beside Alyafeai 2018's (matched on the global batch), and runs on several Keras backends. Ragab &
Ragab's framework table never states its model, so it is shown apart, never as a like-for-like comparison."""

from __future__ import annotations

import pandas as pd

from colabkit.experiments.published import ALYAFEAI_2018_MNIST_CNN, ALYAFEAI_2018_SOURCE, RAGAB_FRAMEWORKS, RAGAB_SOURCE
from colabkit.report.common import (WORK_DIFFERS_NOTE, column, global_batch, interval_frame, pick, repeats_std,
                                    run_config_key, samples_column, series_labels, timing_frame, train_samples)
from colabkit.report.headline import notebook_section
from colabkit.report.records import ReportData, sort_labels
from colabkit.report.section import ReportTable, Section

NOTEBOOK = "cnn_mnist"
PUBLISHED_SERIES = {"gpu": "Alyafeai 2018: K80 GPU", "tpu": "Alyafeai 2018: TPU v2-8"}


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


def _published_rows() -> pd.DataFrame:
    return pd.DataFrame([{"series": PUBLISHED_SERIES[kind], "device": kind.upper(), "batch": batch,
                          "epoch_steady_s": figures["epoch_time_s"], "sample_us": figures["sample_time_us"]}
                         for batch, devices in ALYAFEAI_2018_MNIST_CNN.items() for kind, figures in devices.items()])


def published_comparison(table: pd.DataFrame, value: str) -> pd.DataFrame:
    """Alyafeai 2018's table layout: a row per batch size, a column per device: ours, then theirs."""
    both = pd.concat([table[["series", "batch", value]], _published_rows()[["series", "batch", value]]], ignore_index=True)
    pivot = both.pivot_table(index="batch", columns="series", values=value, aggfunc="first", sort=False)
    ordered = [*dict.fromkeys(table["series"]), *PUBLISHED_SERIES.values()]
    pivot = pivot[[name for name in ordered if name in pivot.columns]]
    return pivot.reset_index().rename(columns={"batch": "global batch"}).rename_axis(columns=None)


FRAMEWORKS_PUBLISHED = "published, model unknown"


def published_frameworks_table() -> pd.DataFrame:
    """Ragab & Ragab's table as published: whole training time and test accuracy per framework and
    device, of a CNN on MNIST whose layers, batch size and epochs the source never states."""
    return pd.DataFrame([{"framework": framework, "device": device.upper(), "training time (s)": figures["train_time_s"],
                          "test accuracy": figures["test_accuracy"], "model": FRAMEWORKS_PUBLISHED}
                         for (framework, device), figures in RAGAB_FRAMEWORKS.items()])


def frameworks_table(table: pd.DataFrame) -> pd.DataFrame | None:
    """Our runs on several Keras backends (None with fewer than two): time and accuracy per framework and device.
    Ragab & Ragab's are apart: their model is unknown."""
    if table["backend"].dropna().nunique() < 2:
        return None
    rows = [{"framework": row.backend, "device": row.device, "global batch": row.batch, "epochs": row.epochs_run,
             "train samples": row.train_samples, "training time (s)": row.train_time_s,
             "samples/s": row.samples_per_s, "test accuracy": row.test_accuracy}
            for row in table[table["backend"].notna()].itertuples()]
    return pd.DataFrame(rows).sort_values(["framework", "device", "global batch"]).reset_index(drop=True)


def _fill(section: Section, table: pd.DataFrame, data: ReportData) -> None:
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
    section.items += [
        ReportTable("cnn_mnist", printed, "CNN-MNIST timing and accuracy per device and global batch size: medians "
                    "over runs; the steady epoch time's interval over runs with the level it reaches (none below 3 "
                    "runs), its spread between runs (CV) beside its spread inside one run (CV of the steady epochs). "
                    + WORK_DIFFERS_NOTE),
        ReportTable("cnn_sample_time_vs_published", published_comparison(table, "sample_us"),
                    f"Time per sample (us) per global batch size: ours and {ALYAFEAI_2018_SOURCE}.")]
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


def cnn_section(data: ReportData) -> Section:
    """The CNN-MNIST section (or why it is not in the report)."""
    return notebook_section(data, NOTEBOOK, "CNN on MNIST", "cnn", cnn_table, _fill)
