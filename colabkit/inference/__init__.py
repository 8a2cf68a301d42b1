"""Inference, apart from training (docs/inference.md), its scenario, settings and system under test kept apart as
MLPerf Inference's LoadGen keeps them. scenarios: single-stream latency and offline throughput on one device, each
under the settings (a minimum count of queries AND a minimum duration, and where it stops), and the largest batch
by the memory estimate; measure: one inference run, its latency percentiles (their intervals from
colabkit.statistics.quantile_ci), metrics and record fields."""

from colabkit.inference.measure import Inference, measure_inference
from colabkit.inference.scenarios import InferenceSettings, parse_batch_sizes

__all__ = ["Inference", "InferenceSettings", "measure_inference", "parse_batch_sizes"]
