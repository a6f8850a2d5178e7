"""Latency guards with intervals: is the candidate's TTFT / ITL p99 within the policy's cap, with confidence?

A p99 from a hundred requests per arm is nearly the second-largest value: a confirmation run of ~140
requests per arm had a round-bootstrap sd of 14.3% on the p99 ratio, so a point estimate passes
or fails near a +20% cap by chance. The guard is a non-inferiority decision instead, on an interval of the
ratio p99(candidate) / p99(baseline):

- the interval: a round-level (cluster) bootstrap. Rounds are the independent units (requests of one round
  share the servers' state, so they are not independent draws); each resample draws rounds with
  replacement, pools the drawn rounds' requests per arm, and takes each arm's p99; the interval is the
  percentile interval of the log-ratio at the policy's confidence (equal tails);
- `fail` when its lower end is beyond the cap (the increase is shown to exceed it: reject), `pass` when
  its upper end is within the cap (shown within it), `undecided` otherwise: a blocker, so a promotion never
  rests on a guard that passed by chance. benchmarks/decision_quality.py measures how many requests per arm
  a guard needs to decide at +5% and +35% against a +20% cap.

Fixed seed, so a verdict is reproducible.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Literal

import numpy as np

from sglab.schema.result import LevelResult, RequestSample

RESAMPLES = 1000
QUANTILE = 99.0
MIN_ROUNDS = 3  # fewer rounds than this cannot be resampled into an interval
GuardDecision = Literal["pass", "fail", "undecided"]


@dataclass(frozen=True)
class QuantileRatio:
    """The candidate's p99 over the baseline's (increase = ratio - 1) with its interval; None where unknown."""

    increase: float | None
    low: float | None
    high: float | None
    confidence: float
    rounds: int

    def decide(self, cap: float) -> GuardDecision | None:
        """pass / fail / undecided against `cap` (None: no interval)."""
        if self.low is None or self.high is None:
            return None
        if self.low > cap:
            return "fail"
        if self.high <= cap:
            return "pass"
        return "undecided"


def _values(request: RequestSample, which: str) -> list[float]:
    if which == "ttft":
        return [request.ttft_ms] if request.ttft_ms is not None else []
    return list(request.itl_ms)


def _weighted_quantiles(values: np.ndarray, groups: np.ndarray, counts: np.ndarray, q: float) -> np.ndarray:
    """The q-quantile of `values` when group g is drawn counts[b, g] times, for every resample b at once
    (resampling rounds with replacement = weighting each round's values by its draw count)."""
    order = np.argsort(values, kind="stable")
    v, g = values[order], groups[order]
    out = np.empty(counts.shape[0])
    for start in range(0, counts.shape[0], 100):  # chunks keep (resamples x values) small for ITL gaps
        w = counts[start:start + 100][:, g].astype(float)
        cum = np.cumsum(w, axis=1)
        target = q / 100.0 * cum[:, -1:]
        out[start:start + 100] = v[np.argmax(cum >= target, axis=1)]
    return out


def ratio_interval(base: list[np.ndarray], cand: list[np.ndarray], *, confidence: float = 0.95, seed: int = 0,
                   quantile: float = QUANTILE) -> QuantileRatio:
    """The interval from per-round value arrays of each arm (same rounds, in order): resample rounds, pool, take
    each arm's quantile, percentile interval of the log-ratio."""
    rounds = len(base)
    pooled = {"b": np.concatenate(base), "c": np.concatenate(cand)}
    estimate = float(np.percentile(pooled["c"], quantile, method="inverted_cdf")
                     / np.percentile(pooled["b"], quantile, method="inverted_cdf") - 1.0)
    if rounds < MIN_ROUNDS:
        return QuantileRatio(estimate, None, None, confidence, rounds)
    counts = np.zeros((RESAMPLES, rounds), dtype=np.int32)
    draws = np.random.default_rng(seed).integers(0, rounds, size=(RESAMPLES, rounds))
    np.add.at(counts, (np.arange(RESAMPLES)[:, None], draws), 1)
    p = {}
    for arm, per_round in (("b", base), ("c", cand)):
        groups = np.concatenate([np.full(len(v), k) for k, v in enumerate(per_round)])
        p[arm] = _weighted_quantiles(pooled[arm], groups, counts, quantile)
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = np.log(p["c"] / p["b"])
    logs = logs[np.isfinite(logs)]
    if logs.size < RESAMPLES // 2:
        return QuantileRatio(estimate, None, None, confidence, rounds)
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(logs, [tail, 100.0 - tail])
    return QuantileRatio(estimate, float(np.expm1(low)), float(np.expm1(high)), confidence, rounds)


def p99_ratio(level: LevelResult, base: str, cand: str, which: Literal["ttft", "itl"], *, confidence: float = 0.95,
              seed: int = 0) -> QuantileRatio:
    """Round-bootstrap interval of p99(cand) / p99(base) - 1 over the successful measured requests."""
    per_round: dict[int, dict[str, list[float]]] = defaultdict(lambda: {base: [], cand: []})
    for r in level.requests:
        if r.warmup or r.round_index < 0 or r.error is not None or r.arm not in (base, cand):
            continue
        per_round[r.round_index][r.arm].extend(_values(r, which))
    rounds = sorted(i for i, v in per_round.items() if v[base] and v[cand])
    if not rounds:
        return QuantileRatio(None, None, None, confidence, 0)
    return ratio_interval([np.asarray(per_round[i][base], dtype=float) for i in rounds],
                          [np.asarray(per_round[i][cand], dtype=float) for i in rounds], confidence=confidence,
                          seed=seed)
