"""Pull the numbers the statistics need out of a RunResult.

Rounds are the independent units: both arms run inside each round, so every comparison is paired
by round. Per-request decode tok/s is averaged per (round, arm); warm-up is always excluded.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sglab import metrics
from sglab.schema.result import ArmLevelSummary, LevelResult, RequestSample, RunResult

RoundMetric = str  # a registered metric name (sglab.metrics)


def comparison_arms(result: RunResult) -> tuple[str, str]:
    """(baseline, candidate) arm names: the named pair when present, else the first two arms (A/A)."""
    names = [a.name for a in result.arms]
    if "baseline" in names and "candidate" in names:
        return "baseline", "candidate"
    baselines = [a.name for a in result.arms if a.role == "baseline"]
    others = [n for n in names if n not in baselines[:1]]
    if baselines and others:
        return baselines[0], others[0]
    if len(names) >= 2:
        return names[0], names[1]
    raise ValueError(f"result {result.run_id} has fewer than two arms ({names}); nothing to compare")


def _measured_requests(level: LevelResult, arm: str) -> list[RequestSample]:
    return [r for r in level.requests if r.arm == arm and not r.warmup and r.round_index >= 0]


def _slo_rounds(level: LevelResult, declared: metrics.Metric, slo: metrics.SloTargets | None
                ) -> dict[int, dict[str, float]]:
    """A metric that depends on the SLO, recomputed per (round, arm) from the request samples and the round's
    time window; nothing without an SLO or without kept requests."""
    out: dict[int, dict[str, float]] = {}
    if slo is None or not level.requests:
        return out
    for sample in level.rounds:
        if sample.warmup or sample.round_index < 0:
            continue
        requests = [r for r in level.requests if r.arm == sample.arm and r.round_index == sample.round_index
                    and not r.warmup]
        window = metrics.RoundWindow(requests=requests, started_at_s=sample.started_at_s,
                                     duration_s=sample.duration_s, window_s=sample.window_s, slo=slo)
        value = declared.compute_round(window)
        if value is not None and value > 0:
            out.setdefault(sample.round_index, {})[sample.arm] = float(value)
    return out


def per_round(level: LevelResult, metric: RoundMetric, slo: metrics.SloTargets | None = None
              ) -> dict[int, dict[str, float]]:
    """round_index -> arm -> value of `metric` (a registered metric, sglab/metrics) in that round, measured
    rounds only. A metric averaged over requests is recomputed from the request samples when they are kept;
    otherwise (or without samples) the recorded round values are used. A metric that depends on the SLO
    is always recomputed, with `slo`."""
    declared = metrics.get(metric)
    if declared.uses_slo:
        return _slo_rounds(level, declared, slo)
    out: dict[int, dict[str, float]] = {}
    if declared.from_requests and level.requests:
        grouped: dict[tuple[int, str], list[float]] = {}
        for req in level.requests:
            if req.warmup or req.round_index < 0 or req.error is not None:
                continue
            value = declared.request_value(req)
            if value is None:
                continue
            grouped.setdefault((req.round_index, req.arm), []).append(value)
        for (round_index, arm), values in grouped.items():
            out.setdefault(round_index, {})[arm] = float(np.mean(values))
        if out:
            return out
    for sample in level.rounds:
        if sample.warmup or sample.round_index < 0:
            continue
        value = declared.round_value(sample)
        if value is not None and value > 0:
            out.setdefault(sample.round_index, {})[sample.arm] = float(value)
    return out


def paired(level: LevelResult, metric: RoundMetric, arms: list[str], slo: metrics.SloTargets | None = None
           ) -> tuple[list[int], np.ndarray]:
    """Round indices where every arm in `arms` has a value, and a (rounds x arms) array of those values."""
    table = per_round(level, metric, slo)
    rounds = sorted(i for i, values in table.items() if all(values.get(a, 0) > 0 for a in arms))
    data = np.array([[table[i][a] for a in arms] for i in rounds], dtype=float).reshape(len(rounds), len(arms))
    return rounds, data


@dataclass(frozen=True)
class ArmLevelStats:
    """One arm at one level: counts, tail latencies and the per-token step time."""

    attempted: int
    succeeded: int
    errors: int
    ttft_p99_ms: float | None
    itl_p99_ms: float | None
    itl_mean_ms: float | None
    accept_length: float | None
    accept_length_source: str | None

    @property
    def error_rate(self) -> float:
        return self.errors / self.attempted if self.attempted else 0.0


def _summary_accept(summary: ArmLevelSummary | None) -> tuple[float | None, str | None]:
    if summary is None or summary.accept_length is None:
        return None, None
    if summary.accept_length.server_mean is not None:
        return summary.accept_length.server_mean, "server"
    if summary.accept_length.client_mean is not None:
        return summary.accept_length.client_mean, "client"
    return None, None


def arm_stats(level: LevelResult, arm: str) -> ArmLevelStats:
    """Prefer raw request samples; fall back to the arm's summary when a producer kept none."""
    requests = _measured_requests(level, arm)
    summary = level.arms.get(arm)
    accept, source = _summary_accept(summary)
    if requests:
        ok = [r for r in requests if r.error is None]
        ttfts = [r.ttft_ms for r in ok if r.ttft_ms is not None]
        gaps = [g for r in ok for g in r.itl_ms]
        if accept is None:
            accepts = [r.accept_length for r in ok if r.accept_length is not None]
            if accepts:
                accept, source = float(np.mean(accepts)), "client"
        itl_mean = float(np.mean(gaps)) if gaps else None
        if itl_mean is None:
            decode = [r.decode_tok_per_s for r in ok if r.decode_tok_per_s]
            itl_mean = 1000.0 / float(np.mean(decode)) if decode else None
        return ArmLevelStats(
            attempted=len(requests),
            succeeded=len(ok),
            errors=len(requests) - len(ok),
            ttft_p99_ms=float(np.percentile(ttfts, 99)) if ttfts else None,
            itl_p99_ms=float(np.percentile(gaps, 99)) if gaps else None,
            itl_mean_ms=itl_mean,
            accept_length=accept,
            accept_length_source=source,
        )
    rounds = [s for s in level.rounds if s.arm == arm and not s.warmup and s.round_index >= 0]
    if summary is not None:
        # `requests` counts every measured request, failed ones included (sglab/load/summary.py).
        itl_mean = summary.itl_ms.mean or summary.itl_ms.p50
        if itl_mean is None and summary.decode_tok_per_s.mean:
            itl_mean = 1000.0 / summary.decode_tok_per_s.mean
        return ArmLevelStats(summary.requests, summary.requests - summary.errors, summary.errors,
                             summary.ttft_ms.p99, summary.itl_ms.p99, itl_mean, accept, source)
    if rounds:
        attempted = sum(s.requests for s in rounds)
        errors = sum(s.errors for s in rounds)
        accepts = [s.server_accept_length or s.client_accept_length for s in rounds]
        accepts = [a for a in accepts if a is not None]
        decode = [s.decode_tok_per_s_mean for s in rounds if s.decode_tok_per_s_mean]
        return ArmLevelStats(attempted, attempted - errors, errors, None, None,
                             1000.0 / float(np.mean(decode)) if decode else None,
                             float(np.mean(accepts)) if accepts else None, "rounds" if accepts else None)
    return ArmLevelStats(0, 0, 0, None, None, None, None, None)
