"""Anytime-valid decisions on the paired per-round log-ratio: a confidence sequence you may watch.

A fixed-n t interval recomputed after every round and acted on when it first clears the line
promotes far more often than its nominal rate (benchmarks/decision_quality.py measures it). This
module's interval is a *confidence sequence* (CS): with probability >= confidence it covers the true
mean at every round simultaneously, so stopping at the first look that clears the threshold keeps
the error rate, however often it is looked at.

Method: the scale-invariant t-mixture CS (Lai 1976, "On confidence sequences", Ann. Statist. 4(2),
265-280; in the form of Wang & Ramdas 2023, "Anytime-valid t-tests and confidence sequences for
Gaussian means with unknown variance", arXiv:2310.03722). For a candidate mean mu0 the rounds seen
only up to scale (the maximal invariant of x - mu0 under x -> c x) have a likelihood ratio that
depends only on the standardised effect delta = (mu - mu0) / sigma. Mixing it over delta ~ N(0, g)
gives, with n rounds, nu = n - 1 and T the one-sample t statistic at mu0,

    M_n(mu0) = (1 + n g)^(-1/2) * [(1 + T^2 / nu) / (1 + T^2 / (nu (1 + n g)))]^(n / 2),

a nonnegative martingale with mean 1 under mu = mu0 for EVERY sigma (Perez-Ortiz, Lardy, de Heide,
Grunwald 2024, "E-statistics, group invariance and anytime-valid testing", Ann. Statist.). Ville's
inequality gives P(exists n: M_n(mu0) >= 1/alpha) <= alpha, so {mu0 : M_n(mu0) < 1/alpha} is a CS.
M_n grows with T^2, hence the CS is the interval mean +- radius_factor(n) * sd, in closed form.

Assumptions (stated, the same as the paired-t's): the per-round log-ratios are independent draws of
N(mu, sigma^2) with sigma unknown. No bound on the data and no guess of sigma is needed; the price is
that the CS is unbounded until sqrt(1 + n g)^(n - 1) > 1/alpha (n = 5 rounds at g = 1, alpha = 0.05)
and about 1.65x the fixed-n t half-width at 16 rounds. g = 1 is the unit-information prior on delta.
Gains are reported as exp(.) - 1 of the bounds, like sglab.analysis.stats.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel

Decision = Literal["promote", "reject", "futile", "continue", "inconclusive"]
"""promote: the lower bound clears log(1 + min-gain); reject: the upper bound is below it (the gain is
short of the minimum with confidence: cannot promote); futile (only with `futility` and max-rounds):
even a true gain at the current upper bound would leave the lower bound at max-rounds (same spread)
short of the minimum, so stop without promoting (unless, at the current estimate and spread, the upper bound
would fall below the minimum by max-rounds: then the run goes on to that reject); continue: none yet;
inconclusive: none by max-rounds.
Stopping early without promoting never raises the false-promotion rate; futility only costs power."""
PROMOTE, REJECT, FUTILE, NONE = 1, -1, -2, 0
_NAMES: dict[int, Decision] = {PROMOTE: "promote", REJECT: "reject", FUTILE: "futile"}

METHOD = "t-mixture-cs"
DEFAULT_MIXTURE_G = 1.0


def radius_factor(rounds: np.ndarray | int, *, confidence: float = 0.95,
                  mixture_g: float = DEFAULT_MIXTURE_G) -> np.ndarray:
    """CS half-width in units of the sample sd (ddof=1) after `rounds` rounds; inf where unbounded."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if mixture_g <= 0.0:
        raise ValueError(f"mixture_g must be > 0, got {mixture_g}")
    n = np.asarray(rounds, dtype=float)
    out = np.full(n.shape, np.inf)
    ok = n >= 2
    if not ok.any():
        return out
    nn = n[ok]
    a = 1.0 + nn * mixture_g
    log_k = (0.5 * np.log(a) + math.log(1.0 / (1.0 - confidence))) * 2.0 / nn
    k = np.exp(log_k)
    bounded = k < a
    u = np.full(nn.shape, np.inf)
    u[bounded] = (k[bounded] - 1.0) / (1.0 - k[bounded] / a[bounded])
    # |mean - mu0| >= sd * sqrt(nu * u / n)  <=>  M_n(mu0) >= 1 / alpha
    factor = np.sqrt((nn - 1.0) * u / nn)
    out[ok] = factor
    return out


def cs_bounds(values: np.ndarray, *, confidence: float = 0.95,
              mixture_g: float = DEFAULT_MIXTURE_G) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean, lower, upper) after each round along the last axis (leading axes: independent sequences).

    Unbounded sides are -inf/+inf. Vectorised so the benchmark can run many sequences at once."""
    x = np.asarray(values, dtype=float)
    if x.ndim == 0:
        raise ValueError("values must be a sequence of per-round log-ratios")
    if not np.isfinite(x).all():
        raise ValueError("per-round log-ratios must be finite (a round with a zero or missing rate?)")
    n = np.arange(1, x.shape[-1] + 1, dtype=float)
    shift = x[..., :1]  # sums about the first round keep the running variance free of cancellation
    y = x - shift
    mean_y = np.cumsum(y, axis=-1) / n
    var = (np.cumsum(y * y, axis=-1) - n * mean_y * mean_y) / np.maximum(n - 1.0, 1.0)
    mean = mean_y + shift
    sd = np.sqrt(np.clip(var, 0.0, None))
    factor = radius_factor(n, confidence=confidence, mixture_g=mixture_g)
    with np.errstate(invalid="ignore"):
        radius = np.where(np.isinf(factor), np.inf, factor * sd)
    return mean, mean - radius, mean + radius


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


class SequentialRecord(BaseModel):
    """Every look of one sequential test, up to and including the one that decided."""

    method: str = METHOD
    confidence: float
    mixture_g: float
    min_gain: float
    threshold_log: float
    min_rounds: int
    max_rounds: int | None
    futility: bool = False
    decision: Decision
    rounds: int
    looks: list[Look]

    @property
    def last(self) -> Look | None:
        return self.looks[-1] if self.looks else None


def _finite(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def look_codes(values: np.ndarray, *, threshold_log: float, confidence: float = 0.95, min_rounds: int = 2,
               max_rounds: int | None = None, futility: bool = False, mixture_g: float = DEFAULT_MIXTURE_G
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(mean, lower, upper, code) after each round: code PROMOTE, REJECT, FUTILE or NONE (the rule, once)."""
    mean, lower, upper = cs_bounds(values, confidence=confidence, mixture_g=mixture_g)
    n = np.arange(1, lower.shape[-1] + 1)
    allowed = n >= min_rounds
    code = np.where(allowed & (lower > threshold_log), PROMOTE,
                    np.where(allowed & (upper < threshold_log), REJECT, NONE))
    if futility and max_rounds is not None:
        factor = radius_factor(n, confidence=confidence, mixture_g=mixture_g)
        at_max = float(radius_factor(max_rounds, confidence=confidence, mixture_g=mixture_g))
        with np.errstate(invalid="ignore"):
            sd = np.where(np.isfinite(factor), (upper - mean) / np.where(np.isfinite(factor), factor, 1.0), np.inf)
            hopeless = allowed & (n < max_rounds) & (upper < threshold_log + at_max * sd)
            # a clear loser is not given up on: at its estimate and spread it would be rejected (upper bound
            # below the threshold) by max-rounds, and a reject says more than "futile" (an inconclusive verdict)
            reject_in_reach = mean + at_max * sd < threshold_log
        code = np.where((code == NONE) & hopeless & ~reject_in_reach, FUTILE, code)
    return mean, lower, upper, code


def sequential_test(log_ratios: Sequence[float] | np.ndarray, *, min_gain: float, confidence: float = 0.95,
                    min_rounds: int = 2, max_rounds: int | None = None, futility: bool = False,
                    mixture_g: float = DEFAULT_MIXTURE_G) -> SequentialRecord:
    """Look after every round of `log_ratios` (log(candidate / baseline) per paired round) and stop at
    the first decision. With fewer rounds than needed the last look says `continue`.

    Rounds beyond `max_rounds` are ignored. Recomputing from all rounds at each call is cheap (n <= a
    few hundred), so a caller can simply call this again after each new round."""
    x = np.asarray(log_ratios, dtype=float).ravel()
    if max_rounds is not None:
        if max_rounds < 1:
            raise ValueError(f"max_rounds must be >= 1, got {max_rounds}")
        x = x[:max_rounds]
    threshold = math.log1p(min_gain)
    looks: list[Look] = []
    decision: Decision = "continue"
    if x.size:
        mean, lower, upper, code = look_codes(x, threshold_log=threshold, confidence=confidence,
                                              min_rounds=min_rounds, max_rounds=max_rounds, futility=futility,
                                              mixture_g=mixture_g)
        for i in range(x.size):
            decision = _NAMES.get(int(code[i]), "continue")
            if decision == "continue" and max_rounds is not None and i + 1 >= max_rounds:
                decision = "inconclusive"
            lo, hi = _finite(float(lower[i])), _finite(float(upper[i]))
            looks.append(Look(round_index=i, rounds=i + 1, mean_log=float(mean[i]), lower_log=lo, upper_log=hi,
                              estimate=math.expm1(float(mean[i])),
                              low=None if lo is None else math.expm1(lo),
                              high=None if hi is None else math.expm1(hi), decision=decision))
            if decision != "continue":
                break
    return SequentialRecord(confidence=confidence, mixture_g=mixture_g, min_gain=min_gain,
                            threshold_log=threshold, min_rounds=min_rounds, max_rounds=max_rounds,
                            futility=futility, decision=decision, rounds=len(looks), looks=looks)


def first_decision(values: np.ndarray, *, threshold_log: float, confidence: float = 0.95, min_rounds: int = 2,
                   max_rounds: int | None = None, futility: bool = False,
                   mixture_g: float = DEFAULT_MIXTURE_G) -> tuple[np.ndarray, np.ndarray]:
    """For many sequences at once (trials x rounds): the round count at the first decision (0 = none by
    the last round) and its code (PROMOTE, REJECT, FUTILE; NONE). For benchmarks and tests."""
    *_, code = look_codes(values, threshold_log=threshold_log, confidence=confidence, min_rounds=min_rounds,
                          max_rounds=max_rounds, futility=futility, mixture_g=mixture_g)
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
                "sequential run stops there at its decision), paired-t over the fixed rounds of the others")
    return f"{method} {confidence:.0%} interval over paired rounds"
