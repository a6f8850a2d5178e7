"""How good is the promotion rule? False promotions, power and rounds, measured on simulated runs.

Fixed mode (`--mode fixed`, the default): each trial builds a synthetic RunResult with a known true gain and
the DEFAULT budget and runs the real `judge()` with the DEFAULT policy read once after its fixed rounds (the
fixed-n paired t). Goals (issue 5): <= 2% false promotions on A/A and on A/B below min-gain, >= 90% power
for +5.9% at concurrency 1. Noise: "modelled" (the simulator's acceptance model plus assumed round jitter) or
"measured" (a complete simulator run's per-round spread, newest under results/ or --from-result PATH).

The bench's sequential rule (`--mode rule|reruns|guards|sequential`, issue 18): the per-round log-ratio
itself is simulated, sd 2.9% per round (the simulator's measured spread at 6 s rounds), under the noise of
real servers on two nodes: i.i.d. Gaussian; AR(1) rho 0.5 and 0.8 (each node drifting on its own); left
skew -2 (a centred, reflected exponential); stragglers (5% of rounds the candidate stalls and loses 10%);
a candidate-only trend +1.5% -> -1.5% over the 32 rounds (mean 0). Every case runs the real
`sglab.analysis.sequential.first_decision` / `look_codes` (the bench's rule: max 32 rounds, futility, the
default policy), vectorised over thousands of runs, against the previous rule (Lai's i.i.d. t-mixture
sequence, promotion from round 3, the old futility stop). (a) false promotions of identical arms; (b) power,
rounds and rounds saved against the fixed-n t of the same power; (c) re-running an inconclusive pair up to 10
times at a true gain equal to min-gain, fresh sequences vs one continued sequence
(sglab/analysis/accumulate.py), and (c') one continued sequence whose re-runs replay the rounds before them
(one load seed for all, rho 0.95 and 0.99) against runs that draw their own seed; (d) the TTFT p99 guard at +5%
and +35% against a +20% cap (sglab/analysis/checks.py); (e) the trade-off at the first looks; (f) the shipped
checks against later promotion floors (sglab/analysis/sequential.py: policy.checks standard and strict). Rates
come with 95% Wilson intervals. `--mode sweep` (needs a real run's noise, --from-result) compares the retired
successive elimination (benchmarks/retired_rules.py) with the exhaustive grid.

Run: .venv/bin/python benchmarks/decision_quality.py --mode sequential   (docs/verdict.md: the tables, wall time)
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import stats

from sglab.analysis import judge
from sglab.analysis.sequential import FUTILE, NONE, PROMOTE, REJECT, STANDARD, STRICT, Checks, look_codes
from sglab.analysis.checks import ratio_interval
from sglab.analysis.samples import comparison_arms, paired
from sglab.analysis.synthetic import synthetic_result
from sglab.config.loadplan import LoadPlan
from sglab.config.policy import PromotionPolicy
from sglab.config.stack import StackConfig
from sglab.results.store import load_result, results_root

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/retired_rules.py, also when loaded by path
from retired_rules import cs_bounds, eliminate, radius_factor  # noqa: E402

ASSUMED_ROUND_JITTER_CV = 0.01
ASSUMED_SHARED_DRIFT_CV = 0.02
BASELINE_REQUEST_CV = 0.005
def cases(min_gain: float) -> tuple[tuple[str, str, float, bool | None], ...]:
    """(label, kind, true gain, counts as a false promotion when promoted), relative to the policy's minimum."""
    return (
        ("A/A (identical arms)", "aa", 0.0, True),
        ("A/B, true gain 0", "ab", 0.0, True),
        (f"A/B, true gain {min_gain / 2:+.2%} (< min)", "ab", min_gain / 2, True),
        (f"A/B, true gain = min-gain ({min_gain:+.1%})", "ab", min_gain, None),
        ("A/B, true gain +3%", "ab", 0.03, False),
        ("A/B, true gain +3.3% (eagle-nccl-ll)", "ab", 0.033, False),
        ("A/B, true gain +5.9%", "ab", 0.059, False),
    )


def candidate_request_cv(max_new_tokens: int) -> tuple[float, float]:
    """Per-request CV of decode tok/s from the simulator's acceptance model (eagle-nccl-ll's 2 steps)."""
    from sglab.sim.acceptance import AcceptanceModel
    from sglab.sim.profile import PROFILES

    profile = PROFILES["default"]
    model = AcceptanceModel.build(profile.accept_prob_by_position, profile.accept_prob_tail, depth=2)
    dist = np.array(model.distribution())
    accept = np.arange(len(dist)) + 1.0
    mean = float((dist * accept).sum())
    sd = float(math.sqrt((dist * (accept - mean) ** 2).sum()))
    cycles = max_new_tokens / mean
    return sd / mean / math.sqrt(cycles), mean


def measured_noise(path: Path | None) -> tuple[float, str] | None:
    """sd of per-round log(candidate/baseline) at concurrency 1 from a real simulator run."""
    found = measured_log_ratios(path)
    return None if found is None else (float(found[0].std(ddof=1)), found[1])


def measured_log_ratios(path: Path | None) -> tuple[np.ndarray, str] | None:
    """Per-round log(candidate/baseline) at concurrency 1 from a real simulator run (newest, or `path`)."""
    found = measured_rounds(path)
    return None if found is None else (np.log(found[0][:, 1] / found[0][:, 0]), found[1])


def measured_rounds(path: Path | None) -> tuple[np.ndarray, str] | None:
    """Per-round decode tok/s (rounds x [baseline, candidate]) at concurrency 1 from a real simulator run."""
    candidates: list[Path] = [path] if path else sorted(results_root().glob("*/*/result.json"), reverse=True)
    for file in candidates:
        try:
            result = load_result(file)
        except Exception:  # noqa: BLE001 - any unreadable result is skipped
            continue
        if not result.complete or result.target.kind != "sim" or result.kind not in ("ab", "aa"):
            continue
        level = result.level(1)
        if level is None:
            continue
        rounds, data = paired(level, "decode_tok_per_s", list(comparison_arms(result)))
        if len(rounds) >= 3:
            return data, f"{file} ({len(rounds)} rounds)"
    return None


def run_case(kind: str, gain: float, trials: int, policy: PromotionPolicy, plan: LoadPlan, noise: dict,
             seed0: int) -> dict[str, float]:
    counts = {"promote": 0, "reject": 0, "inconclusive": 0, "would_promote": 0}
    for trial in range(trials):
        result = synthetic_result(
            kind=kind, gain=gain, levels=(1,), rounds=plan.rounds, round_duration_s=plan.round_duration_s or 10.0,
            output_tokens=plan.max_new_tokens, with_requests=False, seed=seed0 + trial, **noise)
        v = judge(result, policy)
        counts[v.outcome] += 1
        counts["would_promote"] += v.statistical_outcome == "promote"
    return {k: c / trials for k, c in counts.items()}


def table(title: str, policy: PromotionPolicy, plan: LoadPlan, noise: dict, trials: int) -> list[str]:
    lines = [title, f"  {'case':<38} {'promote':>8} {'reject':>8} {'inconcl.':>8}   note"]
    for i, (label, kind, gain, false_if_promoted) in enumerate(cases(policy.min_gain)):
        rates = run_case(kind, gain, trials, policy, plan, noise, seed0=10_000 * (i + 1))
        promote = rates["would_promote"] if kind == "aa" else rates["promote"]
        if false_if_promoted is True:
            note = f"false promotions {promote:.1%} (goal <= 2%)"
            if kind == "aa":
                note += f"; actually promoted {rates['promote']:.1%} (A/A never promotes)"
        elif false_if_promoted is False:
            note = f"power {promote:.1%}" + (" (goal >= 90%)" if gain > 0.05 else "")
        else:
            note = "boundary: one-sided alpha by construction"
        lines.append(f"  {label:<38} {promote:>8.1%} {rates['reject']:>8.1%} {rates['inconclusive']:>8.1%}   {note}")
    return lines


def budget_table(title: str, policy: PromotionPolicy, plan: LoadPlan, noise: dict, trials: int) -> list[str]:
    """Promotion rate by number of rounds: what the default budget buys, and what a bigger one would."""
    gains = (policy.min_gain / 2, 0.033, 0.059)
    lines = [title, f"  {'rounds':>6} " + " ".join(f"{'P(promote) @ ' + format(g, '+.1%'):>20}" for g in gains)]
    for rounds in (6, 8, 10, 12, 16):
        rates = [run_case("ab", g, trials, policy, plan.model_copy(update={"rounds": rounds}), noise,
                          seed0=500_000 + 1000 * rounds + int(g * 1e4))["promote"] for g in gains]
        lines.append(f"  {rounds:>6} " + " ".join(f"{r:>20.1%}" for r in rates))
    return lines


def fixed_mode(args: argparse.Namespace) -> list[str]:
    """The fixed-n design through the real judge(): false promotions and power at the default budget."""
    plan = LoadPlan()
    # the stack default, not a copy of it, read once after its fixed rounds: the fixed-n paired-t (the default
    # method, sequential, is measured by the peeking/power modes)
    policy = StackConfig.model_fields["policy"].default_factory().model_copy(update={"method": "paired-t"})
    cand_cv, accept = candidate_request_cv(plan.max_new_tokens)
    modelled = dict(baseline_tok_per_s=88.8, round_cv=ASSUMED_ROUND_JITTER_CV, shared_cv=ASSUMED_SHARED_DRIFT_CV,
                    request_cv=BASELINE_REQUEST_CV, candidate_request_cv=cand_cv)
    print(f"default budget: {plan.rounds} rounds x {plan.round_duration_s:g} s, max-new-tokens {plan.max_new_tokens}, "
          f"levels {plan.concurrency} (decision at {policy.levels})")
    print(f"default policy: min-gain {policy.min_gain:+.1%}, metric {policy.metric}, {policy.confidence:.0%} "
          f"{policy.method} interval over rounds, min-rounds {policy.min_rounds}, min-requests {policy.min_requests}")
    print(f"modelled noise: candidate per-request CV {cand_cv:.2%} (sim acceptance, mean accept length {accept:.2f}), "
          f"baseline per-request CV {BASELINE_REQUEST_CV:.1%}, per-arm round jitter CV {ASSUMED_ROUND_JITTER_CV:.1%} "
          f"(assumed), shared round drift CV {ASSUMED_SHARED_DRIFT_CV:.1%} (assumed); trials per case {args.trials}")
    out = table("modelled noise, default policy:", policy, plan, modelled, args.trials)
    doubled = dict(modelled, round_cv=2 * ASSUMED_ROUND_JITTER_CV, candidate_request_cv=2 * cand_cv)
    out += table("twice the modelled noise, default policy:", policy, plan, doubled, args.trials)
    out += table("modelled noise, bootstrap interval (policy method: bootstrap):",
                 policy.model_copy(update={"method": "bootstrap"}), plan, modelled, max(200, args.trials // 4))
    found = measured_noise(args.from_result)
    if found:
        sd_d, source = found
        measured = dict(baseline_tok_per_s=88.8, round_cv=sd_d / math.sqrt(2), shared_cv=0.0, request_cv=0.0)
        out += table(f"measured noise (sd of per-round log-ratio {sd_d:.2%} from {source}):", policy, plan,
                     measured, args.trials)
    else:
        out.append("measured noise: no complete simulator run under results/ (run `sglab bench --stack "
                   "eagle-nccl-ll`, then re-run this script)")
    budget_noise, budget_source = (measured, "measured") if found else (modelled, "modelled")
    out += budget_table(f"rounds needed ({budget_source} noise, default policy, {plan.round_duration_s:g} s rounds):",
                        policy, plan, budget_noise, max(200, args.trials // 2))
    return out



SWEEP_ROUND_S = 6.0  # LoadPlan's default round length at the gated level
SWEEP_GPUS_PER_ARM = 8  # one H200 node per arm
GPU_MIN_PER_ARM_ROUND = SWEEP_ROUND_S / 60 * SWEEP_GPUS_PER_ARM


@dataclass(frozen=True)
class RoundNoise:
    """Per-round log-ratio noise: Gaussian with a measured sd, or the measured run's own residuals resampled."""

    label: str
    sd: float
    residuals: np.ndarray | None = None  # centred per-round log-ratios; None = Gaussian
    # for a sweep, each arm's own noise and the baseline's (common to every arm of a round)
    arm_sd: float = 0.0
    baseline_sd: float = 0.0
    arm_residuals: np.ndarray | None = None
    baseline_residuals: np.ndarray | None = None

    def draw(self, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        if self.residuals is None:
            return rng.normal(0.0, self.sd, shape)
        return rng.choice(self.residuals, size=shape)

    def draw_arm(self, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        if self.arm_residuals is None:
            return rng.normal(0.0, self.arm_sd, shape)
        return rng.choice(self.arm_residuals, size=shape)

    def draw_baseline(self, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        if self.baseline_residuals is None:
            return rng.normal(0.0, self.baseline_sd, shape)
        return rng.choice(self.baseline_residuals, size=shape)


# --- the bench's sequential rule under the noise of real servers (issue 18) ----------------------------

SD = 0.029  # per-round sd of the log-ratio: the simulator's measured spread at 6 s rounds (docs/verdict.md)
MAX_ROUNDS = 32  # the bench rule: max rounds = 2 x load.rounds
RUNS = 10  # re-runs of an inconclusive pair


def wilson(hits: float, trials: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a rate measured as hits / trials."""
    p = hits / trials
    centre = (p + z * z / (2 * trials)) / (1 + z * z / trials)
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / (1 + z * z / trials)
    return max(0.0, centre - half), min(1.0, centre + half)


def rate(mask: np.ndarray) -> str:
    low, high = wilson(float(mask.sum()), mask.size)
    return f"{mask.mean():.2%} [{low:.2%}, {high:.2%}]"


def noise_models() -> list[tuple[str, object]]:
    """(label, draw(rng, shape) -> per-round log-ratio noise, marginal sd SD, mean 0)."""
    def gaussian(rng, shape):
        return rng.normal(0.0, SD, shape)

    def ar1(rho):
        def draw(rng, shape):
            z = rng.normal(0.0, SD, shape)
            out = np.empty(shape)
            out[..., 0] = z[..., 0]
            for r in range(1, shape[-1]):
                out[..., r] = rho * out[..., r - 1] + math.sqrt(1 - rho * rho) * z[..., r]
            return out
        return draw

    def left_skew(rng, shape):  # skewness -2: a centred, reflected exponential (gamma shape 1)
        return SD * (1.0 - rng.exponential(1.0, shape))

    def stragglers(rng, shape, p=0.05, loss=0.10):  # 5% of rounds the candidate stalls and loses 10%
        return (rng.normal(0.0, math.sqrt(SD * SD - p * (1 - p) * loss * loss), shape)
                - loss * (rng.random(shape) < p) + p * loss)

    def trend(rng, shape):  # the candidate alone: +1.5% falling to -1.5% over the 32 rounds, mean 0
        return rng.normal(0.0, SD, shape) + 0.015 - 0.03 * np.arange(shape[-1]) / (MAX_ROUNDS - 1)

    return [("i.i.d. Gaussian", gaussian), ("AR(1), rho 0.5", ar1(0.5)), ("AR(1), rho 0.8", ar1(0.8)),
            ("left skew -2", left_skew), ("stragglers (5% of rounds -10%)", stragglers),
            ("candidate-only trend +1.5% -> -1.5%", trend)]


def previous_rule(x: np.ndarray, threshold: float, policy: PromotionPolicy, max_rounds: int = MAX_ROUNDS
                  ) -> tuple[np.ndarray, np.ndarray]:
    """The rule before issue 18, for comparison: Lai's t-mixture sequence, decisions from min-rounds, futility
    judged at the point estimate. (first round of a decision, 0 = none; code)."""
    mean, lower, upper = cs_bounds(x, confidence=policy.confidence)
    n = np.arange(1, x.shape[-1] + 1)
    allowed = n >= policy.min_rounds
    code = np.where(allowed & (lower > threshold), PROMOTE, np.where(allowed & (upper < threshold), REJECT, NONE))
    factor = radius_factor(n, confidence=policy.confidence)
    at_max = float(radius_factor(max_rounds, confidence=policy.confidence))
    with np.errstate(invalid="ignore"):
        sd = np.where(np.isfinite(factor), (upper - mean) / np.where(np.isfinite(factor), factor, 1.0), np.inf)
        hopeless = allowed & (n < max_rounds) & (upper < threshold + at_max * sd)
        in_reach = mean + at_max * sd < threshold
    code = np.where((code == NONE) & hopeless & ~in_reach, FUTILE, code)
    return _first(code)


def _first(code: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    hit = code != NONE
    any_hit = hit.any(axis=-1)
    first = np.where(any_hit, hit.argmax(axis=-1), 0)
    picked = np.take_along_axis(code, first[..., None], axis=-1)[..., 0]
    return np.where(any_hit, first + 1, 0), np.where(any_hit, picked, NONE)


def rule(x: np.ndarray, threshold: float, policy: PromotionPolicy, max_rounds: int = MAX_ROUNDS,
         checks: Checks = STANDARD) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The bench's rule as sglab/bench/sequential.py runs it: (first decision round, code, held-at-the-end)."""
    st, lower, upper, code, held = look_codes(x, threshold_log=threshold, confidence=policy.confidence,
                                              min_rounds=policy.min_rounds, max_rounds=max_rounds, futility=True,
                                              checks=checks)
    rounds, picked = _first(code)
    last = np.where(rounds == 0, x.shape[-1], rounds) - 1
    return rounds, picked, np.take_along_axis(held, last[:, None], axis=1)[:, 0]


def fixed_power(x: np.ndarray, threshold: float, policy: PromotionPolicy) -> np.ndarray:
    """P(promote) of the fixed-n paired t read once after n rounds, for every n (the comparison design)."""
    n = np.arange(1, x.shape[-1] + 1)
    mean = np.cumsum(x, axis=-1) / n
    y = x - x[..., :1]
    my = np.cumsum(y, axis=-1) / n
    var = np.maximum((np.cumsum(y * y, axis=-1) - n * my * my) / np.maximum(n - 1, 1), 0.0)
    q = stats.t.ppf((1 + policy.confidence) / 2, np.maximum(n - 1, 1))
    power = (mean - q * np.sqrt(var / n) > threshold).mean(axis=0)
    power[: policy.min_rounds - 1] = 0.0
    return power


def fixed_checked_power(x: np.ndarray, threshold: float, policy: PromotionPolicy) -> np.ndarray:
    """The same for a fixed-n design with this rule's checks (the t quantile in place of the sequence's bound:
    widened for dependence, lowered for skew, held by the same holds): the equally robust fixed design."""
    from sglab.analysis.sequential import HELD_NONE, round_stats

    st = round_stats(x)
    q = stats.t.ppf((1 + policy.confidence) / 2, np.maximum(st.n - 1, 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        lower_q = q - st.skew_excess() * (1.0 + 2.0 * q * q) / (6.0 * np.sqrt(st.n))
        lower = st.mean - lower_q * st.sd * st.widen / np.sqrt(st.n)
    power = ((lower > threshold) & (STANDARD.held(st) == HELD_NONE)).mean(axis=0)
    power[: policy.min_rounds - 1] = 0.0
    return power


def same_power_n(power: np.ndarray, target: float) -> int | None:
    hits = np.nonzero(power >= min(target, 0.999))[0]
    return int(hits[0]) + 1 if hits.size else None


def false_promotion_table(policy: PromotionPolicy, trials: int, seed: int) -> list[str]:
    """(a) Identical arms (A/A, true gain 0) under each noise model: how often each rule promotes."""
    thr = math.log1p(policy.min_gain)
    rng = np.random.default_rng(seed)
    lines = [f"(a) false promotions of identical arms (true gain 0), sd {SD:.1%} per round, max {MAX_ROUNDS} rounds, "
             f"futility, min-gain {policy.min_gain:+.1%}, {policy.confidence:.0%}; {trials} runs per row "
             "(95% Wilson intervals); goal <= 2%",
             f"  {'round noise':<38} {'previous rule':>24} {'this rule':>24} {'held at the end':>16} "
             f"{'mean rounds':>11}"]
    for label, draw in noise_models():
        x = draw(rng, (trials, MAX_ROUNDS))
        _, old = previous_rule(x, thr, policy)
        rounds, code, held = rule(x, thr, policy)
        used = np.where(rounds == 0, MAX_ROUNDS, rounds).mean()
        lines.append(f"  {label:<38} {rate(old == PROMOTE):>24} {rate(code == PROMOTE):>24} "
                     f"{float((held > 0).mean()):>16.1%} {used:>11.1f}")
    return lines


def power_table(policy: PromotionPolicy, trials: int, seed: int) -> list[str]:
    """(b) i.i.d. Gaussian rounds: decisions, mean rounds, and rounds saved against the fixed-n t of equal power."""
    thr = math.log1p(policy.min_gain)
    rng = np.random.default_rng(seed)
    lines = [f"(b) power and rounds on i.i.d. Gaussian rounds (sd {SD:.1%}), {trials} runs per row; 'fixed-n, same "
             "power': the fewest fixed rounds whose paired t promotes as often (capped at 99.9%)",
             f"  {'true gain':>9} {'rule':<14} {'promote':>8} {'reject':>7} {'futile':>7} {'inconcl.':>8} "
             f"{'mean rounds':>11} {'fixed-n, same power':>20} {'rounds saved':>12} "
             f"{'fixed-n with the checks':>24} {'saved vs it':>11}"]
    for gain in (-0.03, 0.0, policy.min_gain, 0.03, 0.033, 0.059):
        x = math.log1p(gain) + rng.normal(0.0, SD, (trials, 120))
        power = fixed_power(x, thr, policy)
        checked = fixed_checked_power(x, thr, policy)
        x = x[:, :MAX_ROUNDS]
        for name, (rounds, code) in (("previous", previous_rule(x, thr, policy)),
                                     ("this rule", rule(x, thr, policy)[:2])):
            used = np.where(rounds == 0, MAX_ROUNDS, rounds).mean()
            promote, reject, futile = (float((code == c).mean()) for c in (PROMOTE, REJECT, FUTILE))
            n_same = same_power_n(power, promote) if gain > policy.min_gain else None
            same = "-" if n_same is None else str(n_same)
            saved = "-" if n_same is None else f"{1 - used / n_same:+.0%}"
            n_checked = same_power_n(checked, promote) if gain > policy.min_gain and name == "this rule" else None
            checked_text = "-" if n_checked is None else str(n_checked)
            saved_checked = "-" if n_checked is None else f"{1 - used / n_checked:+.0%}"
            lines.append(f"  {gain:>+9.1%} {name:<14} {promote:>8.1%} {reject:>7.1%} {futile:>7.1%} "
                         f"{1 - promote - reject - futile:>8.1%} {used:>11.1f} {same:>20} {saved:>12} "
                         f"{checked_text:>24} {saved_checked:>11}")
    return lines


def rerun_table(policy: PromotionPolicy, trials: int, seed: int) -> list[str]:
    """(c) A pair whose true gain is exactly min-gain, re-run after every run that did not promote (up to 10)."""
    thr = math.log1p(policy.min_gain)
    rng = np.random.default_rng(seed)
    lines = [f"(c) re-running until it promotes: true gain = min-gain ({policy.min_gain:+.1%}), i.i.d. Gaussian, "
             f"{MAX_ROUNDS} rounds per run at most, re-run after anything but a promotion; {trials} pairs; goal <= 2% "
             f"after {RUNS}",
             f"  {'runs':>4} {'previous rule, fresh sequences':>32} {'this rule, fresh sequences':>32} "
             f"{'this rule, one continued sequence':>34} {'rounds so far':>13}"]
    shown = (1, 3, 5, 10)
    fresh_old, fresh_new, continued = (np.zeros((len(shown), trials), bool) for _ in range(3))
    rounds_so_far = np.zeros((len(shown), trials))
    chunk = 2500  # runs at a time: a continued sequence is up to 320 rounds long
    for lo in range(0, trials, chunk):
        size = min(chunk, trials - lo)
        old_hit, new_hit = np.zeros(size, bool), np.zeros(size, bool)
        x = thr + rng.normal(0.0, SD, (size, RUNS * MAX_ROUNDS))
        start = np.zeros(size, dtype=int)  # rounds of the continued sequence before this run
        done = np.zeros(size, bool)
        for k in range(1, RUNS + 1):
            run = thr + rng.normal(0.0, SD, (size, MAX_ROUNDS))
            old_hit |= previous_rule(run, thr, policy)[1] == PROMOTE
            new_hit |= rule(run, thr, policy)[1] == PROMOTE
            # the continued sequence: run k looks at rounds start+1 .. start+32 of the one sequence; its futility
            # stop is against its own last round
            done, start = _next_run(x, start, done, thr, policy)
            if k in shown:
                i = shown.index(k)
                fresh_old[i, lo:lo + size], fresh_new[i, lo:lo + size] = old_hit, new_hit
                continued[i, lo:lo + size], rounds_so_far[i, lo:lo + size] = done, start
    for i, k in enumerate(shown):
        lines.append(f"  {k:>4} {rate(fresh_old[i]):>32} {rate(fresh_new[i]):>32} {rate(continued[i]):>34} "
                     f"{rounds_so_far[i].mean():>13.1f}")
    return lines


def _next_run(x: np.ndarray, start: np.ndarray, done: np.ndarray, thr: float, policy: PromotionPolicy
              ) -> tuple[np.ndarray, np.ndarray]:
    """One more run of a continued sequence: it looks at rounds start+1 .. start+MAX_ROUNDS (its futility stop
    against its own last round). Returns (promoted by now, where the next run starts)."""
    limit = start + MAX_ROUNDS
    *_, code, _ = look_codes(x[:, :limit.max()], threshold_log=thr, confidence=policy.confidence,
                             min_rounds=policy.min_rounds, max_rounds=limit, futility=True)
    m = np.arange(1, limit.max() + 1)
    inside = (m[None, :] > start[:, None]) & (m[None, :] <= limit[:, None]) & ~done[:, None]
    rounds, picked = _first(np.where(inside, code, NONE))
    return done | (picked == PROMOTE), np.where(rounds > 0, rounds, limit)


def replayed_sequence(policy: PromotionPolicy, trials: int, rng: np.random.Generator, rho: float,
                      shown: tuple[int, ...]) -> np.ndarray:
    """One continued sequence over up to RUNS re-runs of a pair at true gain = min-gain, re-run after anything but
    a promotion; run k's round j is rho-correlated with run 1's round j (the same seed replays its prompts, arm
    order and acceptance draws: measured +0.95..+0.997), rho 0 when each run draws its own seed. Returns
    (len(shown), trials): promoted by then."""
    thr = math.log1p(policy.min_gain)
    out = np.zeros((len(shown), trials), bool)
    chunk = 2500
    for lo in range(0, trials, chunk):
        size = min(chunk, trials - lo)
        first = rng.normal(0.0, 1.0, (size, MAX_ROUNDS))
        x = np.zeros((size, RUNS * MAX_ROUNDS))
        start = np.zeros(size, dtype=int)
        done = np.zeros(size, bool)
        rows = np.arange(size)[:, None]
        for k in range(1, RUNS + 1):
            own = first if k == 1 else rho * first + math.sqrt(1 - rho ** 2) * rng.normal(0.0, 1.0, first.shape)
            x[rows, start[:, None] + np.arange(MAX_ROUNDS)[None, :]] = thr + SD * own
            done, start = _next_run(x, start, done, thr, policy)
            if k in shown:
                out[shown.index(k), lo:lo + size] = done
    return out


def replayed_rerun_table(policy: PromotionPolicy, trials: int, seed: int) -> list[str]:
    """(c') re-runs that replay the rounds before them (one load seed for every run) against runs with seeds of
    their own, one continued sequence (sglab/analysis/accumulate.py refuses a seed it already counted)."""
    rng = np.random.default_rng(seed)
    shown = (1, 3, 5, 10)
    rows = [("same seed, rounds replayed, rho 0.95", 0.95), ("same seed, rounds replayed, rho 0.99", 0.99),
            ("own seed per run (rho 0)", 0.0)]
    lines = [f"(c') re-running until it promotes, one continued sequence: true gain = min-gain "
             f"({policy.min_gain:+.1%}), "
             f"sd {SD:.1%} per round, {MAX_ROUNDS} rounds per run at most; {trials} pairs; goal <= 2% after {RUNS}",
             f"  {'runs':>4} " + " ".join(f"{name:>38}" for name, _ in rows)]
    hits = [replayed_sequence(policy, trials, rng, rho, shown) for _, rho in rows]
    for i, k in enumerate(shown):
        lines.append(f"  {k:>4} " + " ".join(f"{rate(h[i]):>38}" for h in hits))
    return lines


TTFT_LOG_SD = 0.30  # per-request spread of log TTFT: gives the 14% bootstrap sd at ~140 requests per arm


def guard_table(policy: PromotionPolicy, trials: int, seed: int, cap: float = 0.20) -> list[str]:
    """(d) The TTFT p99 guard (round bootstrap, pass / fail / undecided) at +5% and +35% against a +20% cap."""
    rng = np.random.default_rng(seed)
    rounds = 16
    lines = [f"(d) TTFT p99 guard against a {cap:+.0%} cap ({policy.confidence:.0%} round-bootstrap interval of the "
             f"p99 ratio, {rounds} rounds, lognormal requests with log-sd {TTFT_LOG_SD}); blocks = fails or undecided; "
             f"{trials} runs per row; goals: blocks <= 5% at +5%, >= 90% at +35%",
             f"  {'requests/arm':>12} {'sd of estimate':>14} {'+5%: blocks':>24} {'(fails)':>8} {'+35%: blocks':>24} "
             f"{'(fails)':>8} {'point estimate: +5% / +35% beyond cap':>40}"]
    for per_arm in (144, 320, 640, 1280, 2560):
        k = per_arm // rounds
        row = {}
        for true in (0.05, 0.35):
            decisions, estimates = [], []
            for _ in range(trials):
                base = [np.exp(rng.normal(0.0, TTFT_LOG_SD, k)) for _ in range(rounds)]
                cand = [np.exp(rng.normal(math.log1p(true), TTFT_LOG_SD, k)) for _ in range(rounds)]
                q = ratio_interval(base, cand, confidence=policy.confidence, seed=int(rng.integers(1 << 30)))
                decisions.append(q.decide(cap))
                estimates.append(q.increase)
            decisions = np.array(decisions)
            row[true] = (decisions != "pass", decisions == "fail", np.array(estimates))
        sd = float(np.std(np.log1p(row[0.05][2])))
        point = f"{float((row[0.05][2] > cap).mean()):.1%} / {float((row[0.35][2] > cap).mean()):.1%}"
        lines.append(f"  {rounds * k:>12} {sd:>14.1%} {rate(row[0.05][0]):>24} {float(row[0.05][1].mean()):>8.1%} "
                     f"{rate(row[0.35][0]):>24} {float(row[0.35][1].mean()):>8.1%} {point:>40}")
    return lines


def tradeoff_table(policy: PromotionPolicy, trials: int, seed: int) -> list[str]:
    """(e) Why >= 30% fewer rounds at +5.9% and <= 2% false promotions under AR(0.5) cannot both hold: the fixed-n
    t needs 10-11 rounds for 99.9% power at +5.9%, so saving 30% means stopping most +5.9% runs by round 7; any
    rule that does (here: promote at the first look from `first` to 7 whose t at the minimum clears `t`) promotes
    identical arms with AR(0.5) rounds that often from those looks alone, checks or not (7 rounds cannot show the
    dependence: the bias-corrected lag-1 autocorrelation widens the bound as the rule does)."""
    thr = math.log1p(policy.min_gain)
    rng = np.random.default_rng(seed)
    models = dict(noise_models())
    ar, skew = models["AR(1), rho 0.5"](rng, (trials, 7)), models["left skew -2"](rng, (trials, 7))
    gain = math.log1p(0.059) + rng.normal(0.0, SD, (trials, 7))
    lines = [f"(e) the trade-off at the first looks: decisions only at rounds first..7, t (at the minimum, the "
             f"dependence widening applied) above a constant; {trials} runs per row",
             f"  {'looks':>6} {'t >':>5} {'+5.9% stops by round 7':>23} {'AR(0.5) A/A promoted by 7':>27} "
             f"{'skew -2 A/A promoted by 7':>27}"]

    def t_of(x: np.ndarray) -> np.ndarray:
        from sglab.analysis.sequential import round_stats

        st = round_stats(x)
        with np.errstate(divide="ignore", invalid="ignore"):
            return (st.mean - thr) / (st.sd * st.widen) * np.sqrt(st.n)

    t = {name: t_of(x) for name, x in (("gain", gain), ("ar", ar), ("skew", skew))}
    for first in (5, 7):
        for bound in (3.0, 3.4, 3.8):
            hit = {k: (v[:, first - 1:7] > bound).any(axis=1) for k, v in t.items()}
            lines.append(f"  {f'{first}..7':>6} {bound:>5.1f} {hit['gain'].mean():>23.1%} {rate(hit['ar']):>27} "
                         f"{rate(hit['skew']):>27}")
    return lines


def checks_table(policy: PromotionPolicy, trials: int, seed: int) -> list[str]:
    """(f) The frontier of the checks: the shipped floor (10 rounds) and dependence hold (1%) against later floors
    and a 5% hold, on the same simulated runs: every A/A row, power at +3%, rounds and rounds saved against the
    fixed-n t of the same power at +3% and +5.9%. Only a floor near 20 rounds keeps AR(0.8) at <= 2%."""
    thr = math.log1p(policy.min_gain)
    rng = np.random.default_rng(seed)
    designs = (("standard (10, 1%)", STANDARD),
               ("floor 16, 5%", Checks("floor-16", promote_min_rounds=16, dependent_z=1.645)),
               ("STRICT (20, 5%)", STRICT))
    aa = [(label, draw(rng, (trials, MAX_ROUNDS))) for label, draw in noise_models()]
    gains = {g: math.log1p(g) + rng.normal(0.0, SD, (trials, 120)) for g in (0.03, 0.059)}
    fixed = {g: fixed_power(x, thr, policy) for g, x in gains.items()}
    short = {"i.i.d. Gaussian": "iid", "AR(1), rho 0.5": "AR .5", "AR(1), rho 0.8": "AR .8", "left skew -2": "skew",
             "stragglers (5% of rounds -10%)": "stragglers", "candidate-only trend +1.5% -> -1.5%": "trend"}
    lines = [f"(f) the checks' frontier: A/A false promotions per noise model, then power and rounds on i.i.d. "
             f"rounds; {trials} runs per cell, same runs for every design; goals: A/A <= 2%, power >= 90% at +3%, "
             "saved >= 30% at +3% and +5.9%",
             f"  {'design':<18} " + " ".join(f"{short[label]:>10}" for label, _ in aa)
             + f" {'+3%: power':>11} {'rounds':>6} {'saved':>6} {'+5.9%: rounds':>14} {'saved':>6} {'AR .8 held':>10}"]
    for name, checks in designs:
        cells, held_ar8 = [], 0.0
        for label, x in aa:
            _, code, held = rule(x, thr, policy, checks=checks)
            cells.append(f"{float((code == PROMOTE).mean()):>10.2%}")
            if label == "AR(1), rho 0.8":
                held_ar8 = float((held > 0).mean())
        tail = []
        for g, x in gains.items():
            rounds, code, _ = rule(x[:, :MAX_ROUNDS], thr, policy, checks=checks)
            used = float(np.where(rounds == 0, MAX_ROUNDS, rounds).mean())
            promote = float((code == PROMOTE).mean())
            n_same = same_power_n(fixed[g], promote)
            saved = "-" if n_same is None else f"{1 - used / n_same:+.0%}"
            tail.append((promote, used, saved))
        (p3, r3, s3), (_, r6, s6) = tail
        lines.append(f"  {name:<18} " + " ".join(cells)
                     + f" {p3:>11.1%} {r3:>6.1f} {s3:>6} {r6:>14.1f} {s6:>6} {held_ar8:>10.1%}")
    return lines


def rule_modes(args: argparse.Namespace, modes: tuple[str, ...]) -> list[str]:
    policy = StackConfig.model_fields["policy"].default_factory()
    out = [f"the bench's sequential rule (sglab/analysis/sequential.py) with the default policy: min-gain "
           f"{policy.min_gain:+.1%}, {policy.confidence:.0%}, min-rounds {policy.min_rounds}"]
    if "rule" in modes:
        out += false_promotion_table(policy, args.seq_trials, seed=1018)
        out += power_table(policy, args.seq_trials, seed=2018)
        out += tradeoff_table(policy, args.seq_trials, seed=5018)
        out += checks_table(policy, args.seq_trials, seed=6018)
    if "reruns" in modes:
        out += rerun_table(policy, args.seq_trials, seed=3018)
        out += replayed_rerun_table(policy, args.seq_trials, seed=3019)
    if "guards" in modes:
        out += guard_table(policy, args.guard_trials, seed=4018)
    return out


def simulator_grid() -> list[tuple[str, float]]:
    """True gains at concurrency 1 from the simulator's own timing model: steps 1-5 (topk 1, draft tokens =
    steps + 1) x NCCL default / LL / Ring / P2P SYS, against the non-speculative default-NCCL baseline."""
    from sglab.sim.profile import PROFILES
    from sglab.sim.timing import SpecSetup, comm_factor, steady_decode_tok_per_s

    profile = PROFILES["default"]
    variants = {"default": {}, "LL": {"NCCL_PROTO": "LL"}, "Ring": {"NCCL_ALGO": "Ring"},
                "SYS": {"NCCL_P2P_LEVEL": "SYS"}}
    base = steady_decode_tok_per_s(profile, 1, None, comm_factor(profile, {}, False))
    grid = []
    for name, env in variants.items():
        comm = comm_factor(profile, env, False)
        for steps in range(1, 6):
            rate = steady_decode_tok_per_s(profile, 1, SpecSetup(steps, 1, steps + 1), comm)
            grid.append((f"{name}/s{steps}", rate / base - 1))
    return grid


CLOSE_GRID = [("a", 0.059), ("b", 0.035), ("c", 0.02), ("d", 0.01), ("e", 0.0), ("f", -0.03), ("g", -0.08),
              ("h", -0.15)]


def sweep_table(noise: RoundNoise, policy: PromotionPolicy, grid: list[tuple[str, float]], title: str, trials: int,
                seed: int) -> list[str]:
    """(c) Successive elimination vs the exhaustive grid at fixed rounds: P(true best picked), arm-rounds."""
    rng = np.random.default_rng(seed)
    thr = math.log1p(policy.min_gain)
    gains = np.array([g for _, g in grid])
    k, best = len(grid), int(np.argmax(gains))
    horizon = 48
    # each arm's own round noise, minus the baseline's (the same for every arm of a round)
    x = (np.log1p(gains)[None, :, None] + noise.draw_arm(rng, (trials, k, horizon))
         - noise.draw_baseline(rng, (trials, 1, horizon)))
    mean = np.cumsum(x, axis=2) / np.arange(1, horizon + 1)
    exhaustive_correct = (mean.argmax(axis=1) == best).mean(axis=0)  # per fixed round count
    gap = gains[best] - np.sort(gains)[-2]
    lines = [f"(c) sweep, {title}: {k} arms, best {grid[best][0]} {gains[best]:+.1%} (runner-up {gap:.1%} behind); "
             f"{noise.label}; {trials} sweeps per row; GPU-min = arm-rounds x {SWEEP_ROUND_S:g} s x "
             f"{SWEEP_GPUS_PER_ARM} GPUs, baseline included",
             f"  {'design':<34} {'P(best)':>7} {'best elim.':>10} {'regret':>7} {'arm-rounds':>10} {'GPU-min':>8} | "
             f"{'exhaustive, same P(best)':>24} {'fewer':>6}",
             "  true gains: " + ", ".join(f"{name} {g:+.1%}" for name, g in sorted(grid, key=lambda a: -a[1]))]
    for rounds in (4, 8, 12, 16, 20, 32):
        cost = (k + 1) * rounds
        regret = float((gains[best] - gains[mean[:, :, rounds - 1].argmax(axis=1)]).mean())
        lines.append(f"  {f'exhaustive grid, {rounds} rounds':<34} {exhaustive_correct[rounds - 1]:>7.1%} {'':>10} "
                     f"{regret:>7.2%} {cost:>10} {cost * GPU_MIN_PER_ARM_ROUND:>8.0f} |")
    arm_conf = 1 - (1 - policy.confidence) / k
    _, lower, upper = cs_bounds(x, confidence=arm_conf)
    for max_rounds in (16, 20, 32, 48):
        out_round, _, looks, _ = eliminate(lower[:, :, :max_rounds], upper[:, :, :max_rounds], threshold_log=thr,
                                           min_rounds=policy.min_rounds)
        alive = out_round == 0
        at_stop = np.take_along_axis(mean, (looks - 1)[:, None, None].repeat(k, axis=1), axis=2)[:, :, 0]
        pick = np.where(alive, at_stop, -np.inf).argmax(axis=1)
        picked = alive.any(axis=1)
        correct = float((picked & (pick == best)).mean())
        regret = float(np.where(picked, gains[best] - gains[pick], gains[best]).mean())
        arm_rounds = float((np.where(alive, looks[:, None], out_round).sum(axis=1) + looks).mean())
        hits = np.nonzero(exhaustive_correct >= correct)[0]
        same = int(hits[0]) + 1 if hits.size else None
        same_cost = None if same is None else (k + 1) * same
        fewer = "-" if same_cost is None else f"{same_cost / arm_rounds:.1f}x"
        same_text = f">{horizon} rounds" if same is None else f"{same} rounds = {same_cost}"
        lines.append(f"  {f'elimination, max {max_rounds} rounds':<34} {correct:>7.1%} "
                     f"{float((out_round[:, best] > 0).mean()):>10.2%} {regret:>7.2%} {arm_rounds:>10.1f} "
                     f"{arm_rounds * GPU_MIN_PER_ARM_ROUND:>8.0f} | {same_text:>24} {fewer:>6}")
    return lines


def sweep_mode(args: argparse.Namespace) -> list[str]:
    """(e) The sweep at the simulator's grid, with a real run's noise (benchmarks/retired_rules.py)."""
    policy = StackConfig.model_fields["policy"].default_factory()
    found = measured_rounds(args.from_result)
    if found is None:
        return ["sweep mode needs a real run's noise: run `.venv/bin/sglab bench --stack eagle-nccl-ll --target sim "
                "--quick`, then pass --from-result results/<stack>/<run>/result.json"]
    data, source = found
    log_base, log_cand = np.log(data[:, 0]), np.log(data[:, 1])
    d = log_cand - log_base
    sd, base_sd = float(d.std(ddof=1)), float(log_base.std(ddof=1))
    arm_sd = math.sqrt(max(sd ** 2 - base_sd ** 2, 0.0))
    noises = [RoundNoise(f"Gaussian, sd {sd:.2%} (sweep: arm {arm_sd:.2%}, baseline {base_sd:.2%})", sd,
                         arm_sd=arm_sd, baseline_sd=base_sd),
              RoundNoise(f"resampled residuals of the {d.size} measured rounds", sd, d - d.mean(),
                         arm_residuals=log_cand - log_cand.mean(), baseline_residuals=log_base - log_base.mean())]
    out = [f"sweep: noise from {source}"]
    out += sweep_table(noises[0], policy, simulator_grid(), "the simulator's model grid", args.sweep_trials, 3000)
    out += sweep_table(noises[0], policy, CLOSE_GRID, "a close grid", args.sweep_trials, 3001)
    out += sweep_table(noises[1], policy, simulator_grid(), "the simulator's model grid", args.sweep_trials, 3002)
    return out


MODES = ("fixed", "rule", "reruns", "guards", "sweep", "sequential", "all")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=MODES, default="fixed",
                        help="fixed: the fixed-n design through judge() (default); rule, reruns, guards: the bench's "
                             "sequential rule (sequential = those three); sweep: elimination vs the grid; all")
    parser.add_argument("--trials", type=int, default=1000, help="simulated runs per case, fixed mode (default 1000)")
    parser.add_argument("--seq-trials", type=int, default=20000,
                        help="simulated runs per row, rule and reruns modes (default 20000)")
    parser.add_argument("--guard-trials", type=int, default=1000, help="simulated runs per row, guards (default 1000)")
    parser.add_argument("--sweep-trials", type=int, default=2000, help="simulated sweeps per design (default 2000)")
    parser.add_argument("--from-result", type=Path, default=None, help="estimate noise from this result.json")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    out: list[str] = []
    if args.mode in ("fixed", "all"):
        out += fixed_mode(args)
    rule_parts = {"rule": ("rule",), "reruns": ("reruns",), "guards": ("guards",),
                  "sequential": ("rule", "reruns", "guards"), "all": ("rule", "reruns", "guards")}.get(args.mode)
    if rule_parts:
        out += rule_modes(args, rule_parts)
    if args.mode in ("sweep", "all"):
        out += sweep_mode(args)
    print("\n".join(out))
    print(f"elapsed {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
