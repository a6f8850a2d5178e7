"""Anytime-valid decisions on the paired per-round log-ratio: a confidence sequence you may watch.

A fixed-n t interval recomputed after every round and acted on when it first clears the line promotes far
more often than its nominal rate (benchmarks/decision_quality.py measures it). The bench's interval is a
*confidence sequence*: with probability >= confidence it covers the true mean at every round at once, so a
run may stop at the first look that clears the threshold, and a later run of the same pair may extend the
same sequence (sglab/analysis/accumulate.py), without raising the error rate.

The rule (`sequential_test`, vectorised in `look_codes`), docs/verdict.md "The rule" with its measurements:

- bounds: mean +- b_n sd / sqrt(n), b_n from a mixture of Wald/Rushton sequential-t likelihood ratios
  (sglab/analysis/sequence_bounds.py): exact at every look for i.i.d. Gaussian rounds of any spread;
- checks of that assumption (sglab/analysis/assumptions.py), which only ever widen or hold: dependent rounds
  widen both bounds by the AR(1) long-run variance and, strongly dependent, refuse a promotion; left skew
  lowers the lower bound; a falling gain holds a promotion; no promotion before the checks' floor (policy.checks:
  standard from 10 rounds, strict from 20 and a stricter dependence hold).

This is the one sequence sglab decides and draws on: the verdict, the bench's stop, the web UI's live band,
the canary judge, `sglab watch` and the sweep's race all read `bounds` or `sequential_test`, so what is drawn
is what decides. Lai's i.i.d. t-mixture sequence is kept in benchmarks/retired_rules.py, to compare against.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel

from sglab.analysis import assumptions, sequence_bounds
from sglab.analysis.assumptions import HELD_NAMES, HELD_NONE, STANDARD, Checks, RoundStats, checks_named, round_stats

Decision = Literal["promote", "reject", "futile", "continue", "inconclusive"]
"""promote: the lower bound clears log(1 + min-gain) and no check holds it; reject: the upper bound is below it
(short of the minimum with confidence: cannot promote); futile (only with `futility` and max-rounds, from
FUTILITY_MIN_ROUNDS on): even a true gain at the current upper bound would leave the lower bound at max-rounds
(same spread) short of the minimum, and a reject is not within reach either; continue: none yet;
inconclusive: none by max-rounds. Stopping early without promoting never raises the false-promotion rate."""
PROMOTE, REJECT, FUTILE, NONE = 1, -1, -2, 0
_NAMES: dict[int, Decision] = {PROMOTE: "promote", REJECT: "reject", FUTILE: "futile"}

METHOD = "robust-t-sequence"
FUTILITY_MIN_ROUNDS = 12  # a loser's estimate is still too noisy before this to give up on its reject
REACH_SES = 1.0  # a reject counts as within reach unless an estimate this many standard errors lower misses it


def _finite_rounds(values: Sequence[float] | np.ndarray) -> np.ndarray:
    x = np.asarray(values, dtype=float)
    if x.ndim == 0:
        raise ValueError("values must be a sequence of per-round log-ratios")
    if not np.isfinite(x).all():
        raise ValueError("per-round log-ratios must be finite (a round with a zero or missing rate?)")
    return x


def _spread(sd: np.ndarray, factor: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return np.where(np.isinf(factor), np.inf, factor * sd)  # inf * 0 (a zero-spread run) stays unbounded


def bounds(values: np.ndarray, *, confidence: float = 0.95) -> tuple[RoundStats, np.ndarray, np.ndarray]:
    """The bench's (statistics, lower, upper) after each round along the last axis, checks applied."""
    x = _finite_rounds(values)
    stats = round_stats(x)
    b = sequence_bounds.boundary_t(x.shape[-1], confidence=confidence)
    with np.errstate(divide="ignore", invalid="ignore"):
        root_n = np.sqrt(stats.n)
        spread = stats.sd * stats.widen / root_n  # sd of the mean, dependence included
        lower_b = np.where(np.isinf(b), np.inf, b - stats.skew_excess() * (1.0 + 2.0 * b * b) / (6.0 * root_n))
    return stats, stats.mean - _spread(spread, lower_b), stats.mean + _spread(spread, np.broadcast_to(b, x.shape))


def look_codes(values: np.ndarray, *, threshold_log: float, confidence: float = 0.95, min_rounds: int = 2,
               max_rounds: int | np.ndarray | None = None, futility: bool = False, method: str = METHOD,
               checks: Checks = STANDARD) -> tuple[RoundStats, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(stats, lower, upper, code, held) after each round: code PROMOTE, REJECT, FUTILE or NONE; held the check
    (assumptions.HELD_*) that keeps a lower bound above the threshold from promoting. `max_rounds` may differ
    per sequence (an array over the leading axes: continued sequences whose runs end at different rounds).
    `checks`: the holds (assumptions.STANDARD or assumptions.STRICT, as policy.checks names them)."""
    if method != METHOD:
        raise ValueError(f"unknown sequence method {method!r} (the one sequence is {METHOD!r})")
    stats, lower, upper = bounds(values, confidence=confidence)
    held = np.where(lower > threshold_log, checks_named(checks).held(stats), HELD_NONE)
    n = stats.n
    allowed = n >= min_rounds
    code = np.where(allowed & (lower > threshold_log) & (held == HELD_NONE), PROMOTE,
                    np.where(allowed & (upper < threshold_log), REJECT, NONE))
    if futility and max_rounds is not None:
        limit = np.asarray(max_rounds)[..., None] if np.ndim(max_rounds) else max_rounds
        at_max = sequence_bounds.radius_factor(np.maximum(limit, 2), confidence=confidence)
        widen = stats.widen
        with np.errstate(invalid="ignore"):
            hopeless = (allowed & (n >= FUTILITY_MIN_ROUNDS) & (n < limit)
                        & (upper < threshold_log + at_max * stats.sd * widen))
            # a loser is not given up on: at its estimate and spread it would be rejected by max-rounds were the
            # rounds as independent as they may be (a noisy autocorrelation must not turn a reject into "futile")
            reject_in_reach = stats.mean - REACH_SES * stats.sd / np.sqrt(n) + at_max * stats.sd < threshold_log
        code = np.where((code == NONE) & hopeless & ~reject_in_reach, FUTILE, code)
    return stats, lower, upper, code, held


class Look(BaseModel):
    """One look at the sequence, after `rounds` paired rounds (round_index = rounds - 1)."""

    round_index: int
    rounds: int
    mean_log: float
    lower_log: float | None  # None: unbounded
    upper_log: float | None
    estimate: float  # exp(mean_log) - 1
    low: float | None
    high: float | None
    decision: Decision
    held: str | None = None  # the check that keeps a clearing lower bound from promoting (assumptions.HELD_NAMES)
    autocorrelation: float | None = None  # bias-corrected lag-1 (assumptions.round_stats)
    widen: float | None = None
    skewness: float | None = None
    trend_t: float | None = None


class SequentialRecord(BaseModel):
    """Every look of one sequential test, up to and including the one that decided."""

    method: str = METHOD
    confidence: float
    min_gain: float
    threshold_log: float
    min_rounds: int
    max_rounds: int | None
    futility: bool = False
    checks: str = STANDARD.name  # assumptions.CHECKS: the floor and holds it was judged with
    decision: Decision
    rounds: int
    looks: list[Look]
    earlier_rounds: int = 0  # rounds of earlier runs this sequence continues (sglab/analysis/accumulate.py)
    notes: list[str] = []  # what the checks did at the last look, in words

    @property
    def last(self) -> Look | None:
        return self.looks[-1] if self.looks else None


def _finite(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def sequential_test(log_ratios: Sequence[float] | np.ndarray, *, min_gain: float, confidence: float = 0.95,
                    min_rounds: int = 2, max_rounds: int | None = None, futility: bool = False,
                    earlier_rounds: int = 0, method: str = METHOD, checks: Checks | str = STANDARD
                    ) -> SequentialRecord:
    """Look after every round of `log_ratios` (log(candidate / baseline) per paired round) and stop at the
    first decision; fewer rounds than needed end `continue`. A pure function of its arguments.

    `earlier_rounds`: the first rounds are earlier runs' of the same sequence (sglab/analysis/accumulate.py);
    they were looked at then, so decisions start after them, and `max_rounds` counts this run's rounds only.
    Rounds beyond the limit are ignored. Recomputing from all rounds at each call is cheap (n <= a few
    hundred), so a caller can simply call this again after each new round. `checks`:
    the floor and holds (policy.checks: a name of assumptions.CHECKS, or a Checks)."""
    checks = checks_named(checks)
    x = np.asarray(log_ratios, dtype=float).ravel()
    if earlier_rounds < 0:
        raise ValueError(f"earlier_rounds must be >= 0, got {earlier_rounds}")
    limit = None
    if max_rounds is not None:
        if max_rounds < 1:
            raise ValueError(f"max_rounds must be >= 1, got {max_rounds}")
        limit = earlier_rounds + max_rounds
        x = x[:limit]
    threshold = math.log1p(min_gain)
    looks: list[Look] = []
    decision: Decision = "continue"
    notes: list[str] = []
    if x.size:
        stats, lower, upper, code, held = look_codes(x, threshold_log=threshold, confidence=confidence,
                                                     min_rounds=min_rounds, max_rounds=limit, futility=futility,
                                                     method=method, checks=checks)
        for i in range(x.size):
            decision = _NAMES.get(int(code[i]), "continue") if i >= earlier_rounds else "continue"
            if decision == "continue" and limit is not None and i + 1 >= limit:
                decision = "inconclusive"
            lo, hi = _finite(float(lower[i])), _finite(float(upper[i]))
            looks.append(Look(round_index=i, rounds=i + 1, mean_log=float(stats.mean[i]), lower_log=lo,
                              upper_log=hi, estimate=math.expm1(float(stats.mean[i])),
                              low=None if lo is None else math.expm1(lo), high=None if hi is None else math.expm1(hi),
                              decision=decision, held=HELD_NAMES.get(int(held[i])),
                              autocorrelation=float(stats.rho[i]), widen=float(stats.widen[i]),
                              skewness=float(stats.skew[i]), trend_t=float(stats.slope_t[i])))
            if decision != "continue":
                break
        last = len(looks) - 1
        notes = [s for s in (assumptions.held_sentence(int(held[last]), stats, last, checks),
                             assumptions.widen_sentence(stats, last)) if s]
    return SequentialRecord(method=method,
                            confidence=confidence, min_gain=min_gain, threshold_log=threshold,
                            min_rounds=min_rounds, max_rounds=max_rounds, futility=futility, checks=checks.name,
                            decision=decision,
                            rounds=len(looks), looks=looks, earlier_rounds=earlier_rounds, notes=notes)


def first_decision(values: np.ndarray, *, threshold_log: float, confidence: float = 0.95, min_rounds: int = 2,
                   max_rounds: int | None = None, futility: bool = False, checks: Checks = STANDARD
                   ) -> tuple[np.ndarray, np.ndarray]:
    """For many sequences at once (trials x rounds): the round count at the first decision (0 = none by
    the last round) and its code (PROMOTE, REJECT, FUTILE; NONE). For benchmarks and tests."""
    *_, code, _ = look_codes(values, threshold_log=threshold_log, confidence=confidence, min_rounds=min_rounds,
                             max_rounds=max_rounds, futility=futility, checks=checks)
    hit = code != NONE
    any_hit = hit.any(axis=-1)
    first = np.where(any_hit, hit.argmax(axis=-1), 0)
    picked = np.take_along_axis(code, first[..., None], axis=-1)[..., 0]
    return np.where(any_hit, first + 1, 0), np.where(any_hit, picked, NONE)


def method_phrase(method: str) -> str:
    """How a verdict's intervals were computed, for its table and report (`paired-t interval` as before)."""
    if method == "sequential":
        return "sequential: anytime-valid confidence sequence at the gated levels, paired-t at the others"
    return f"{method} interval"


def method_sentence(method: str, confidence: float) -> str:
    """The same for the report's prose: `paired-t 95% interval over paired rounds` as before."""
    if method == "sequential":
        return (f"{confidence:.0%} anytime-valid confidence sequence over paired rounds at the gated levels (a "
                "sequential run stops there at its decision; its checks widen it for dependent or skewed rounds), "
                "paired-t over the fixed rounds of the others")
    return f"{method} {confidence:.0%} interval over paired rounds"
