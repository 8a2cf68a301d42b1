"""What a unit of work costs on a run's runtime: compute units, dollars and joules per 1,000 training samples, per
epoch, per 1,000 inferences (offline) and per million generated tokens (decode), from a record's own figures.

A run's seconds per unit come from its steady figures (UNITS says which); its cost is those seconds at its
runtime's hourly rate (colabkit.cost.rates: the accelerator the runtime really had); its joules are its own energy
figure (docs/cost.md), measured apart from the time. A combination's figure is the median over its runs with the
runs' order-statistic interval (colabkit.statistics.median_ci): a rate is a constant, so a cost's interval is its
time's between-run interval times the rate, at the same level; joules have their own runs. Nothing is computed
for a run without a rate (its NoRate says why) nor from a figure its record lacks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from colabkit.cost.rates import NoRate, Rate, RateTable
from colabkit.experiments.declaration import DECODE, INFERENCE, TRAIN, Mode
from colabkit.records.identity import record_mode
from colabkit.statistics import finite

Figure = Literal["s", "cu", "usd", "j"]  # seconds, compute units, dollars, joules per unit of work
SECONDS_PER_HOUR = 3600.0


@dataclass(frozen=True)
class UnitOfWork:
    """A unit of work runs of one `mode` are priced by: `count` of what `time_metric` counts, its seconds from the
    metric (`throughput`: per second, so count / value; else the seconds of one unit), its joules `energy_metric`
    times `energy_count` (what window each spans: the comments in UNITS)."""

    key: str
    label: str
    mode: Mode
    time_metric: str
    throughput: bool
    count: float
    energy_metric: str
    energy_count: float

    def column(self, figure: Figure) -> str:
        """The report's column of this figure: 'cost.usd_per_1k_samples'."""
        return f"cost.{figure}_per_{self.key}"

    def seconds(self, metrics: dict[str, Any]) -> float | None:
        """A run's seconds for one unit, from its `metrics`; None where the figure is missing or not above 0."""
        value = finite([metrics.get(self.time_metric)])
        if not value or value[0] <= 0:
            return None
        return self.count / value[0] if self.throughput else self.count * value[0]

    def joules(self, metrics: dict[str, Any]) -> float | None:
        """A run's joules for one unit (None where energy was not measured: energy_reason says why)."""
        value = finite([metrics.get(self.energy_metric)])
        return self.energy_count * value[0] if value else None


UNITS = (
    # the steady epochs' training steps, validation left out
    UnitOfWork("1k_samples", "1,000 training samples", TRAIN, "samples_per_s", True, 1000.0, "energy_j_per_sample",
               1000.0),
    # time and cost: the median steady epoch, its validation included (the runtime bills it); joules: its training
    # steps only (the energy window ends before validation)
    UnitOfWork("epoch", "epoch", TRAIN, "epoch_time_steady_s", False, 1.0, "energy_j_per_epoch", 1.0),
    # the offline scenario at the batch of its highest throughput (offline_batch)
    UnitOfWork("1k_inferences", "1,000 inferences (offline)", INFERENCE, "offline_samples_per_s", True, 1000.0,
               "offline_energy_j_per_inference", 1000.0),
    # the decode combination of the highest tokens/s (decode_tokens_per_s_batch), prefill included
    UnitOfWork("1m_tokens", "million generated tokens", DECODE, "decode_tokens_per_s", True, 1e6,
               "decode_energy_j_per_token_best", 1e6),
)
# The unit each mode's runs are compared on (the report's figure, `compare --by cost`): per epoch follows per sample.
HEADLINE_UNITS: dict[Mode, str] = {TRAIN: "1k_samples", INFERENCE: "1k_inferences", DECODE: "1m_tokens"}
RATE_COLUMNS = ("cost.runtime", "cost.cu_per_hour", "cost.usd_per_hour", "cost.rate_source", "cost.rate_read",
                "cost.no_rate")


def units_of(mode: str | None) -> tuple[UnitOfWork, ...]:
    """The units of work runs of `mode` are priced by (none for a mode that is no training, inference or decode)."""
    return tuple(unit for unit in UNITS if unit.mode == mode)


def headline_unit(mode: str | None) -> UnitOfWork | None:
    """The unit runs of `mode` are compared on (HEADLINE_UNITS); None for a mode without one."""
    return next((unit for unit in UNITS if mode in HEADLINE_UNITS and unit.key == HEADLINE_UNITS[mode]), None)


def record_rate(record: dict[str, Any], table: RateTable) -> Rate | NoRate:
    """The rate of the runtime a record ran on: that of the accelerator it really had (`accelerator_found`); NoRate
    for a multi-worker run, whose workers are several machines."""
    workers = (record.get("device") or {}).get("workers")
    if isinstance(workers, int) and workers > 1:
        return NoRate("several machines", f"a run over {workers} workers: one runtime's rate does not price it")
    return table.rate_for(record.get("accelerator_found"))


def record_costs(record: dict[str, Any], table: RateTable) -> dict[str, Any]:
    """An ok training, inference or decode record's cost columns: its rate (RATE_COLUMNS: the runtime, compute units
    and dollars per hour, source, date read, or `cost.no_rate` why there is none) and, per unit of its mode whose
    time it has, seconds, compute units, dollars and joules (`UnitOfWork.column`), each None where it cannot be
    had. {} for any other record (not ok, or no unit of work: a matmul)."""
    metrics = record.get("metrics") or {}
    units = [unit for unit in units_of(record_mode(record)) if unit.seconds(metrics) is not None]
    if record.get("status") != "ok" or not units:
        return {}
    rate = record_rate(record, table)
    if isinstance(rate, Rate):
        fields: dict[str, Any] = dict(zip(RATE_COLUMNS, (rate.runtime, rate.compute_units_per_hour, rate.usd_per_hour,
                                                         rate.source, rate.read, None)))
    else:
        fields = dict(zip(RATE_COLUMNS, (rate.runtime, None, None, None, None, rate.reason)))
    for unit in units:
        seconds = unit.seconds(metrics)
        fields[unit.column("s")] = seconds
        for figure, per_hour in (("cu", fields["cost.cu_per_hour"]), ("usd", fields["cost.usd_per_hour"])):
            fields[unit.column(figure)] = None if per_hour is None else seconds / SECONDS_PER_HOUR * per_hour
        fields[unit.column("j")] = unit.joules(metrics)
    return fields
