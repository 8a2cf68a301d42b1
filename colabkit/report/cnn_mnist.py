"""CNN-MNIST section: its figures are the declaration's (report.headline); in the appendix every figure per
combination, the per-sample times beside Alyafeai 2018's, and runs on several Keras backends. Ragab & Ragab's
framework table never states its model, so it is shown apart, never as a like-for-like comparison."""

from __future__ import annotations

import pandas as pd

from colabkit.experiments.published import ALYAFEAI_2018_MNIST_CNN, ALYAFEAI_2018_SOURCE, RAGAB_FRAMEWORKS, RAGAB_SOURCE
from colabkit.report.common import (WORK_DIFFERS_NOTE, column, experiment_frame, global_batch, interval_spec, metrics,
                                    pick, repeats_std, timing_frame)
from colabkit.report.headline import notebook_section
from colabkit.report.records import ReportData
from colabkit.report.section import ReportTable, Section

NOTEBOOK = "cnn_mnist"
PUBLISHED_SERIES = {"gpu": "Alyafeai 2018: K80 GPU", "tpu": "Alyafeai 2018: TPU v2-8"}


def cnn_table(data: ReportData) -> pd.DataFrame:
    """One row per ok CNN-MNIST combination: device, global batch, timing figures with spread, accuracy."""
    ok = data.ok(NOTEBOOK)
    asked, full = column(ok, "params.train_samples").astype(float), column(ok, "data.sizes.train").astype(float)
    return experiment_frame(ok, ["params.batch_size"], ["device", "series", "batch"], {
        "batch": global_batch(ok), "backend": column(ok, "params.backend"), "train_samples": asked.where(asked > 0, full),
        **timing_frame(ok), **metrics(ok, "replicas", "test_accuracy", "test_loss"),
        "test_accuracy_std": repeats_std(ok, "test_accuracy"), "busy_runs": column(ok, "busy_runs"),
        "between_run_cv": column(ok, "headline.between_cv"), "within_run_cv": column(ok, "headline.within_cv")},
        {"epoch_time_steady_s": "epoch_steady_s", "sample_time_steady_us": "sample_us"}, exclude=("batch_size_is",))


def published_comparison(table: pd.DataFrame) -> pd.DataFrame:
    """The time per sample in Alyafeai 2018's layout: a row per batch, a column per device."""
    theirs = pd.DataFrame([{"series": PUBLISHED_SERIES[kind], "batch": batch, "sample_us": figures["sample_time_us"]}
                           for batch, devices in ALYAFEAI_2018_MNIST_CNN.items() for kind, figures in devices.items()])
    both = pd.concat([table[["series", "batch", "sample_us"]], theirs], ignore_index=True)
    pivot = both.pivot_table(index="batch", columns="series", values="sample_us", aggfunc="first", sort=False)
    pivot = pivot[[name for name in [*dict.fromkeys(table["series"]), *PUBLISHED_SERIES.values()] if name in pivot]]
    return pivot.reset_index().rename(columns={"batch": "global batch"}).rename_axis(columns=None)


def _fill(section: Section, table: pd.DataFrame, data: ReportData) -> None:
    printed = pick(table, ["device", "batch", "replicas", ("train_samples", "train samples"), "samples_per_epoch",
                           "epochs_run", "runs", "busy_runs", "epoch_first_s", "steady_s", "epoch_steady_s",
                           *interval_spec("epoch_steady_s"), "between_run_cv", "within_run_cv", "epoch_steady_std_s",
                           "step_ms", ("sample_us", "per sample (us)"), "samples_per_s", "test_accuracy",
                           ("test_accuracy_std", "accuracy std"), "test_loss", "data"])
    section.items += [
        ReportTable("cnn_mnist", printed, "CNN-MNIST timing and accuracy per device and global batch size: medians "
                    "over runs; the steady epoch time's interval over runs with the level it reaches (none below 3 "
                    "runs), its spread between runs (CV) beside its spread inside one run (CV of the steady epochs). "
                    + WORK_DIFFERS_NOTE),
        ReportTable("cnn_sample_time_vs_published", published_comparison(table),
                    f"Time per sample (us) per global batch size: ours and {ALYAFEAI_2018_SOURCE}.")]
    if table["backend"].dropna().nunique() > 1:  # ours per framework and device; Ragab & Ragab's as published
        ours = pd.DataFrame([{"framework": row.backend, "device": row.device, "global batch": row.batch,
                              "epochs": row.epochs_run, "train samples": row.train_samples,
                              "training time (s)": row.train_time_s, "samples/s": row.samples_per_s,
                              "test accuracy": row.test_accuracy}
                             for row in table[table["backend"].notna()].itertuples()])
        theirs = pd.DataFrame([{"framework": framework, "device": device.upper(),
                                "training time (s)": figures["train_time_s"], "test accuracy": figures["test_accuracy"],
                                "model": "published, model unknown"}
                               for (framework, device), figures in RAGAB_FRAMEWORKS.items()])
        section.items += [
            ReportTable("cnn_frameworks", ours.sort_values(["framework", "device", "global batch"], ignore_index=True),
                        "One CNN (Alyafeai 2018's) on several Keras backends: whole-fit time, throughput and test "
                        "accuracy at one global batch. Where epochs or train samples differ between rows, compare "
                        "samples/s, not training times."),
            ReportTable("cnn_frameworks_published", theirs, f"Published, model unknown: {RAGAB_SOURCE}. The source "
                        "states neither the model nor its batch size or epochs, so these figures are shown apart from "
                        "ours, not as a like-for-like comparison; cells it left empty are absent.")]


def cnn_section(data: ReportData) -> Section:
    """The CNN-MNIST section (or why it is not in the report)."""
    return notebook_section(data, NOTEBOOK, "CNN on MNIST", "cnn", cnn_table, _fill)
