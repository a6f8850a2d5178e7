"""The numbers the statistics need, out of a RunResult, and their confidence intervals, paired by round.

Rounds are the independent units: both arms run inside each round, so every comparison is paired
by round. Per-request decode tok/s is averaged per (round, arm); warm-up is always excluded.

Each round gives one log-ratio log(candidate / baseline). `paired-t` is a one-sample t interval on those
log-ratios (scipy.stats.ttest_1samp): honest with the handful of rounds a benchmark affords. `bootstrap`
resamples the rounds (scipy.stats.bootstrap, BCa); with few rounds it is too narrow, which
benchmarks/decision_quality.py measures. `sequential` is the bench's confidence sequence
(sglab/analysis/sequential.py) at its last look.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats

from sglab import metrics
from sglab.analysis.sequential import HELD_NAMES, STANDARD, bounds, checks_named, held_sentence, widen_sentence
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


CiMethod = Literal["paired-t", "bootstrap", "sequential"]  # sequential: the confidence sequence


@dataclass(frozen=True)
class MeanCI:
    """Mean of per-round values with its interval (None below two rounds)."""

    n: int
    mean: float
    sd: float
    low: float | None
    high: float | None
    confidence: float
    method: CiMethod
    held: str | None = None  # sequential: the check that keeps a clearing lower bound from promoting
    notes: tuple[str, ...] = ()  # sequential: what the checks did, in words

    def as_gain(self) -> tuple[float, float | None, float | None]:
        """For log-ratios: (gain, low, high) as relative gains, exp(.) - 1."""
        def back(x: float | None) -> float | None:
            return None if x is None else math.expm1(x)
        return math.expm1(self.mean), back(self.low), back(self.high)


def log_ratio_ci(baseline: np.ndarray, candidate: np.ndarray, *, confidence: float = 0.95,
                 method: CiMethod = "paired-t", seed: int = 0) -> MeanCI:
    """Interval for the mean per-round log(candidate / baseline); no interval below two rounds."""
    baseline = np.asarray(baseline, dtype=float)
    candidate = np.asarray(candidate, dtype=float)
    if baseline.shape != candidate.shape:
        raise ValueError("baseline and candidate must be paired round by round")
    d = np.log(candidate / baseline)
    return mean_ci(d, confidence=confidence, method=method, seed=seed)


def mean_ci(values: np.ndarray, *, confidence: float = 0.95, method: CiMethod = "paired-t",
            seed: int = 0, checks: str | None = None) -> MeanCI:
    """Interval for the mean of per-round values (already differences or log-ratios). `checks`: the sequence's
    floor and holds (policy.checks; None: sequential.STANDARD), for method sequential."""
    d = np.asarray(values, dtype=float)
    n = int(d.size)
    if n == 0:
        return MeanCI(0, 0.0, 0.0, None, None, confidence, method)
    mean = float(d.mean())
    sd = float(d.std(ddof=1)) if n > 1 else 0.0
    if n < 2:
        return MeanCI(n, mean, sd, None, None, confidence, method)
    if method == "sequential":  # anytime-valid: the run may have stopped at this look (analysis/sequential.py)
        return _sequence_ci(d, confidence, checks)
    if sd == 0.0:
        return MeanCI(n, mean, sd, mean, mean, confidence, method)
    if method == "paired-t":
        ci = stats.ttest_1samp(d, 0.0).confidence_interval(confidence_level=confidence)
        low, high = float(ci.low), float(ci.high)
    elif method == "bootstrap":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = stats.bootstrap((d,), np.mean, confidence_level=confidence, n_resamples=2000,
                                  method="BCa", random_state=np.random.default_rng(seed))
        low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
        if not (math.isfinite(low) and math.isfinite(high)):
            res = stats.bootstrap((d,), np.mean, confidence_level=confidence, n_resamples=2000,
                                  method="percentile", random_state=np.random.default_rng(seed))
            low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    else:
        raise ValueError(f"unknown CI method {method!r}")
    return MeanCI(n, mean, sd, low, high, confidence, method)


def _sequence_ci(d: np.ndarray, confidence: float, checks: str | None) -> MeanCI:
    """The bench's confidence sequence at its last look, checks applied; a side the sequence cannot bound yet
    is None (a zero-spread run too: no spread is no evidence of bounds before the sequence has any)."""
    stats, lower, upper = bounds(d, confidence=confidence)
    rule = checks_named(checks or STANDARD)
    held = int(rule.held(stats)[-1])
    notes = tuple(s for s in (held_sentence(held, stats, checks=rule), widen_sentence(stats))
                  if s)
    low, high = float(lower[-1]), float(upper[-1])
    return MeanCI(int(d.size), float(stats.mean[-1]), float(stats.sd[-1]), low if math.isfinite(low) else None,
                  high if math.isfinite(high) else None, confidence, "sequential",
                  held=HELD_NAMES.get(held), notes=notes)


def relative_delta(baseline: float | None, candidate: float | None) -> float | None:
    """candidate / baseline - 1, or None when either is missing."""
    if baseline is None or candidate is None or baseline <= 0:
        return None
    return candidate / baseline - 1.0
