"""The metric registry: each metric sglab compares between arms is declared once, as a `Metric`.

A declaration says what the metric is (name, unit, direction, label), how one request's value and
one round's value are computed, and whether the promotion policy may gate on it. The collector
fills per-request values, the summary per-round values, the verdict pairs arms by round on them,
tables and plots take the label from here. Built-in metrics are in `sglab/metrics/builtin.py`;
adding one is one `register(Metric(...))` call. This package imports only `sglab.schema.result`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

from sglab.schema.result import RequestSample, RoundSample

Direction = Literal["higher", "lower"]


@dataclass(frozen=True)
class SloTargets:
    """The bounds a good request meets (the policy's `slo`, read by the goodput metrics); None = no bound."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    itl_ms: float | None = None
    itl_quantile: float = 0.99


@dataclass(frozen=True)
class RoundWindow:
    """One arm's share of one round: its requests (failed ones included), its time window and the SLO."""

    requests: Sequence[RequestSample]
    started_at_s: float
    duration_s: float
    window_s: float | None = None
    slo: SloTargets | None = None

    @property
    def ok(self) -> list[RequestSample]:
        return [r for r in self.requests if r.error is None]


@dataclass(frozen=True)
class Metric:
    """One comparable quantity. Without `per_round`, a round's value is the mean of its successful
    requests' values, and the verdict recomputes it from the request samples when they are kept."""

    name: str
    unit: str
    label: str
    direction: Direction = "higher"
    per_request: Callable[[RequestSample], float | None] | None = None
    per_round: Callable[[RoundWindow], float | None] | None = None
    can_gate: bool = False
    # Where the result stores the values: a built-in field, else the `metrics` dict under `name`.
    request_field: str | None = None
    round_field: str | None = None
    # How a recorded round is read back (default: `round_field`, else `metrics[name]`).
    from_round: Callable[[RoundSample], float | None] | None = None
    description: str = ""
    # True when a round's value depends on the policy's SLO: the verdict recomputes it from the request
    # samples with the SLO it judges under (the recorded round values, if any, are not used).
    uses_slo: bool = False

    @property
    def from_requests(self) -> bool:
        """True when a round's value is the mean of its requests' values (so it can be recomputed)."""
        return self.per_round is None and self.per_request is not None

    def request_value(self, sample: RequestSample) -> float | None:
        """The value recorded with a request sample."""
        if self.request_field is not None:
            return getattr(sample, self.request_field)
        return sample.metrics.get(self.name)

    def compute_round(self, window: RoundWindow) -> float | None:
        if self.per_round is not None:
            return self.per_round(window)
        values = [v for v in (self.request_value(r) for r in window.ok) if v is not None]
        return sum(values) / len(values) if values else None

    def round_value(self, sample: RoundSample) -> float | None:
        """The value recorded with a round sample."""
        if self.from_round is not None:
            return self.from_round(sample)
        if self.round_field is not None:
            return getattr(sample, self.round_field)
        return sample.metrics.get(self.name)

    def improvement(self, baseline: float, candidate: float) -> tuple[float, float]:
        """(from, to) so that to / from - 1 > 0 means the candidate is better, whatever the direction."""
        return (baseline, candidate) if self.direction == "higher" else (candidate, baseline)


_REGISTRY: dict[str, Metric] = {}


def register(metric: Metric) -> Metric:
    """Declare a metric (its name must be new)."""
    if metric.name in _REGISTRY:
        raise ValueError(f"metric {metric.name!r} is already declared")
    _REGISTRY[metric.name] = metric
    return metric


def unregister(name: str) -> None:
    _REGISTRY.pop(name, None)


@contextmanager
def registered(metric: Metric) -> Iterator[Metric]:
    """Declare a metric for the duration of a block (tests, plug-ins)."""
    register(metric)
    try:
        yield metric
    finally:
        unregister(metric.name)


def get(name: str) -> Metric:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown metric {name!r}; declared: {', '.join(_REGISTRY)}") from None


def all_metrics() -> list[Metric]:
    """Every declared metric, in declaration order."""
    return list(_REGISTRY.values())


def gate_metric_names() -> list[str]:
    """Names the promotion policy may gate on (`sglab:policy.metric`)."""
    return [m.name for m in _REGISTRY.values() if m.can_gate]


def label(name: str) -> str:
    return get(name).label


def fill_request_metrics(sample: RequestSample) -> RequestSample:
    """Compute the per-request values of metrics stored in `sample.metrics` (not in a built-in field)."""
    for metric in _REGISTRY.values():
        if metric.per_request is not None and metric.request_field is None:
            value = metric.per_request(sample)
            if value is not None:
                sample.metrics[metric.name] = float(value)
    return sample


def round_metrics(window: RoundWindow) -> dict[str, float]:
    """Per-round values of metrics stored in `RoundSample.metrics` (not in a built-in field)."""
    out: dict[str, float] = {}
    for metric in _REGISTRY.values():
        if metric.round_field is None and metric.from_round is None:
            value = metric.compute_round(window)
            if value is not None:
                out[metric.name] = float(value)
    return out
