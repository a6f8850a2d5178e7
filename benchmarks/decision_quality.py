"""How good is the promotion rule? False-promotion rate and power, measured on simulated runs.

Each trial builds a synthetic RunResult with a known true gain and the DEFAULT budget (LoadPlan
defaults: rounds, round length, max-new-tokens) and runs the real `judge()` with the DEFAULT
PromotionPolicy. Goals (issue 5): <= 2% false promotions on A/A and on A/B below min-gain,
>= 90% power for +5.9% at concurrency 1.

Noise. "modelled": the candidate's per-request spread comes from the simulator's acceptance model
(eagle-nccl-ll: 2 steps), plus an assumed per-arm round jitter (CPU contention on a shared box) and a
round drift shared by both arms (cancelled by pairing). "measured": when a complete simulator run
exists under results/ (or --from-result PATH), the spread of its per-round log-ratios at concurrency 1
replaces the model. Run: .venv/bin/python benchmarks/decision_quality.py [--trials N]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

from sglab.analysis import judge
from sglab.analysis.samples import comparison_arms, paired
from sglab.analysis.synthetic import synthetic_result
from sglab.config.models import LoadPlan, PromotionPolicy, StackConfig
from sglab.results.store import load_result, results_root

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
            d = np.log(data[:, 1] / data[:, 0])
            return float(d.std(ddof=1)), f"{file} ({len(rounds)} rounds)"
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000, help="simulated runs per case (default 1000)")
    parser.add_argument("--from-result", type=Path, default=None, help="estimate noise from this result.json")
    args = parser.parse_args(argv)

    plan = LoadPlan()
    policy = StackConfig.model_fields["policy"].default_factory()  # the stack default, not a copy of it
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
    started = time.perf_counter()
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
    print("\n".join(out))
    print(f"elapsed {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
