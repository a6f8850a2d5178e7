"""Metric registry: one declaration per metric (sglab/metrics/builtin.py), used by load, analysis and reports."""

from sglab.metrics import builtin  # noqa: F401  (declares the built-in metrics)
from sglab.metrics.registry import (Metric, RoundWindow, SloTargets, all_metrics, fill_request_metrics,
                                    gate_metric_names, get, label, register, registered, round_metrics, unregister)

__all__ = ["Metric", "RoundWindow", "SloTargets", "all_metrics", "fill_request_metrics", "gate_metric_names", "get",
           "label", "register", "registered", "round_metrics", "unregister"]
