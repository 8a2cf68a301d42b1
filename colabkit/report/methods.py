"""The Methods paragraph a paper can paste (hardware, software, runs, warm-up, intervals, data: all read
from the records), and references.bib: every published work the report compares with, the statistics
it rests on, and the suite itself (CITATION.cff at the repository's root says how to cite it)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from colabkit.io import write_atomic
from colabkit.report.common import SUBSTITUTES, column, distinct, title_of
from colabkit.report.records import ReportData, label_kind, sort_labels
from colabkit.report.section import Section
from colabkit.report.writers import format_number
from colabkit.statistics import EXACT_95_RUNS, MIN_RUNS, TOLERANCE, median_ci, percent
from colabkit.version import __version__

VERSIONS = [("software.python", "Python"), ("software.tensorflow", "TensorFlow"), ("software.keras", "Keras"),
            ("software.jax", "JAX"), ("software.jaxlib", "jaxlib"), ("software.torch", "PyTorch"),
            ("software.numpy", "NumPy"), ("software.tf_cuda_build", "CUDA (TensorFlow's build)"),
            ("software.tf_cudnn_build", "cuDNN (TensorFlow's build)"), ("software.libtpu", "libtpu")]
DRIVERS = ("device.driver", "device.driver_version", "device.cuda_driver")

REFERENCES = {  # BibTeX, by key; the facts as docs/sources.md gives them
    "sarkar2018": "@misc{sarkar2018,\n  author = {Sarkar},\n  title = {How to harness the powers of the Cloud TPU?},\n"
                  "  year = {2018},\n  note = {Blog post; a Colab matrix-multiply benchmark adapted from Colab's "
                  "tpu.ipynb}\n}",
    "alyafeai2018": "@misc{alyafeai2018,\n  author = {Alyafeai, Zaid},\n  title = {{GPUvsTPU.ipynb}: a CNN on MNIST "
                    "at three batch sizes on a GPU and a TPU},\n  year = {2018},\n  howpublished = "
                    "{\\url{https://github.com/zaidalyafeai/Notebooks}}\n}",
    "kimm2021": "@inproceedings{kimm2021,\n  author = {Kimm and Paik and Kimm},\n  title = {Performance Comparison of "
                "{TPU}, {GPU}, {CPU} on {Google Colaboratory} over Distributed Deep Learning},\n  booktitle = "
                "{IEEE International Symposium on Embedded Multicore/Many-core Systems-on-Chip (MCSoC)},\n"
                "  year = {2021}\n}",
    "wang2020": "@misc{wang2020,\n  author = {Wang, Yu Emma and Wei, Gu-Yeon and Brooks, David},\n  title = "
                "{Benchmarking {TPU}, {GPU}, and {CPU} Platforms for Deep Learning},\n  year = {2020},\n"
                "  eprint = {1907.10701},\n  archivePrefix = {arXiv},\n  note = {ParaDnn; code: "
                "\\url{https://github.com/Emma926/paradnn}}\n}",
    "ragab": "@misc{ragab,\n  author = {Ragab, M. A. and Ragab, A. A.},\n  title = {Acceleration of Deep Neural "
             "Network},\n  note = {Student report: one CNN on MNIST in TensorFlow, PyTorch and JAX}\n}",
    "hvass23": "@misc{hvass23,\n  author = {{Hvass-Labs}},\n  title = {{TensorFlow} Tutorial \\#23: Time-Series "
               "Prediction},\n  howpublished = {\\url{https://github.com/Hvass-Labs/TensorFlow-Tutorials}}\n}",
    "kalibera2013": "@inproceedings{kalibera2013,\n  author = {Kalibera, Tomas and Jones, Richard},\n  title = "
                    "{Rigorous Benchmarking in Reasonable Time},\n  booktitle = {International Symposium on Memory "
                    "Management (ISMM)},\n  year = {2013}\n}",
    "zou2008": "@article{zou2008,\n  author = {Zou, G. Y. and Donner, Allan},\n  title = {Construction of "
               "Confidence Limits about Effect Measures: A General Approach},\n  journal = {Statistics in "
               "Medicine},\n  volume = {27},\n  number = {10},\n  pages = {1693--1702},\n  year = {2008}\n}",
    "colabkit": "@software{colabkit,\n  title = {colabkit: CPU, GPU and TPU benchmarks on Google Colab},\n"
                f"  version = {{{__version__}}},\n  note = {{See CITATION.cff in its repository}}\n}}",
}


def write_references(folder: str | Path) -> Path:
    """Write references.bib (REFERENCES) into `folder`; return its path."""
    return write_atomic(Path(folder) / "references.bib", "\n\n".join(REFERENCES.values()) + "\n")


def _hardware(ok: pd.DataFrame) -> str:
    cpus = []
    for model, rows in ok.groupby(column(ok, "host.cpu_model", "unknown CPU").fillna("unknown CPU"), sort=True):
        cores = ", ".join(distinct(column(rows, "host.cpu_cores")))
        cpus.append(f"{model}" + (f" ({cores} logical cores available to the run)" if cores else ""))
    text = "Hardware: host CPU " + "; ".join(cpus) + "."
    accelerators = ok[ok["device_label"].map(label_kind) != "cpu"]
    if len(accelerators):
        names = []
        for label in sort_labels(accelerators["device_label"]):
            rows = accelerators[accelerators["device_label"] == label]
            drivers = [value for name in DRIVERS for value in distinct(column(rows, name))]
            names.append(f"{label}" + (f" (driver {', '.join(drivers)})" if drivers else ""))
        text += " Accelerators: " + "; ".join(names) + "."
    else:
        text += " No accelerator: every run used the CPU."
    return text


def _software(ok: pd.DataFrame) -> str:
    parts = [f"{label} {', '.join(values)}" for name, label in VERSIONS if (values := distinct(column(ok, name)))]
    return ("Software: " + "; ".join(parts) + f"; colabkit {__version__}.") if parts else ""


def _runs(data: ReportData, ok: pd.DataFrame) -> str:
    counted = data.runs()
    per = counted.groupby("combination_id").size() if len(counted) else pd.Series(dtype=int)
    spread = (format_number(per.min()) if per.min() == per.max() else
              f"{format_number(per.min())} to {format_number(per.max())}") if len(per) else "0"
    # warm kernels (`kernels: reuse`, as the smoke presets ask) are not fresh processes: say which ran
    fresh = set(distinct(column(ok, "kernel.mode"))) <= {"fresh"}
    kernels = ("a fresh process (its own notebook kernel)" if fresh else "a notebook run of its own, in a fresh "
               "process or in a warm kernel cleared between runs (never two runs of one combination in one kernel)")
    return (f"Each combination (one experiment's parameters on one device) ran {spread} times, each run {kernels}: "
            f"{len(counted)} successful runs of {len(per)} combinations of "
            f"{ok['notebook'].nunique()} experiments ({', '.join(map(title_of, dict.fromkeys(ok['notebook'])))}). "
            "The run, not the epoch, is the unit of evidence: epochs of one run share its process and host.")


def _intervals() -> str:
    levels = ", ".join(f"{percent(median_ci(range(n)).confidence)} at {n}" for n in range(MIN_RUNS, EXACT_95_RUNS + 1))
    return ("Warm-up is kept apart: a training run's first epoch (tracing, compilation) is reported on its own and "
            "its steady figures are the median over the later epochs; a matmul's first call is its cold figure, "
            "the median of the later calls its warm one. Each figure is the median over runs with a "
            "distribution-free interval between two of the runs' order statistics (no resampling; its exact level "
            f"follows from the binomial distribution: {levels} runs); a ratio of two configurations' medians gets "
            "an interval built from the two medians' own intervals joined end to end (the numerator's lower bound "
            "over the denominator's upper, and back), which assumes nothing about either side's distribution: its "
            "level is the lower of the two sides' levels (75 % when a side has 3 runs), the worst case over every "
            "pair of distributions, reached where one side's scatter dominates (the narrower square-and-add of "
            "Zou & Donner 2008 falls short of it where a side's runs fall in clusters). Every interval "
            "states the level it reaches and its runs. A verdict calls one configuration faster or slower only "
            f"where the whole interval of the ratio lies beyond +/- {100 * TOLERANCE:g} %, and says at what "
            "level (Kalibera & Jones 2013).")


def _data(ok: pd.DataFrame) -> str:
    parts = []
    for notebook, rows in ok.groupby("notebook", sort=False):
        names = distinct(column(rows, "data.dataset")) or distinct(column(rows, "data.name"))
        stand_in = [source.lower() for source in dict.fromkeys(column(rows, "data_used", "").fillna(""))
                    if source in SUBSTITUTES]  # "": the real data, or data the workload generates itself
        parts.append(f"{title_of(notebook)}: {', '.join(names) or 'generated by the workload'}"
                     + (f" ({' and '.join(stand_in)} stand-in, not the real data)" if stand_in else ""))
    return "Data: " + "; ".join(parts) + "." if parts else ""


def _cost(data: ReportData) -> str:
    """How costs were made and the sources and dates of the rates that priced runs; '' where no run has a cost."""
    runs = data.costed()
    if not len(runs):
        return ""
    priced = set(runs.loc[column(runs, "cost.usd_per_hour").notna(), "cost.runtime"])
    unpriced = sorted(set(runs.loc[column(runs, "cost.no_rate", None).notna(), "cost.runtime"]))
    text = ("Cost: each run's seconds per unit of work (1,000 training samples, an epoch, 1,000 offline inferences, "
            "a million generated tokens) at the hourly rate of the runtime it really had (its accelerator found, not "
            "the one asked for), in Colab compute units and dollars, the median over runs with the time's interval; "
            "joules from each run's own energy reading.")
    if priced:
        text += " Rates: " + "; ".join(data.rates.sources(priced)) + "."
    if unpriced:
        text += f" No rate was given for {', '.join(unpriced)}: no cost is computed for those runs."
    return text


def methods_section(data: ReportData) -> Section:
    """The Methods paragraph, generated from the records the report uses."""
    section = Section("methods", "Methods")
    ok = data.runs()
    if not len(ok):
        section.empty = "no successful run: no method to describe."
        return section
    section.text = [" ".join(part for part in (_hardware(ok), _software(ok)) if part),
                    *(part for part in (_runs(data, ok), _intervals(), _data(ok), _cost(data)) if part),
                    "References: references.bib beside this report (the published works compared with, the "
                    "statistics used, and colabkit; CITATION.cff in its repository says how to cite the suite)."]
    return section
