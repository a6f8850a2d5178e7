"""How good is a sweep's pick, and what does it cost? The best-arm race against a full grid of equal pick accuracy.

Every simulated sweep is decided by the project's own rule, sglab.sweep.race.Race (the class
`sglab sweep` replays after every round): its plan says which arms (and whether the baseline) run the
next round, a segment of arm j draws log(1 + gain_j) + a round drift shared by the whole round + its
own noise, and the race eliminates, picks and stops. Measured per case: P(the best arm is picked), the
mean reported P(correct selection), P(the best arm is eliminated) (the family-wise error, <= 5% by
construction), rounds and arm-rounds (segments, baseline included: a wave holds its slots while it
runs, so its GPU time follows the segments it measures). The reference is a full grid (every arm and
the baseline, every round, the best point estimate picked) of n rounds, n the smallest with the same
pick accuracy (curve from --grid-trials full grids), so `fewer` = (K + 1) n / arm-rounds. The interval
of n is where the full grid's accuracy lies within the race's 95% binomial interval.

Cases: the shipped grid `stacks/Pulumi.eagle-sweep.yaml` (32 arms) with the simulator's modelled gain at
concurrency 1 (sglab.sim timing; an adaptive arm at the tier its EMA settles on for random text, so
s3 and s5 adaptive equal static s3: a documented synthetic model of the grid, not a measurement); the same
grid in cluster waves of parallel-arms slots (4: wave 1 the first 4 arms, each later wave 3 new + the
previous wave's pick, as sglab/sweep/arms.py deploys them), against waves of full grids; five
arms spaced 1%, 2% and 3% apart below a best of +5.9%; the five `quick-arms`; five arms all below the
baseline (nothing to confirm). Then the stress cases: identical arms at the minimum gain (every
elimination is a mistake) and the top two 0-2% apart (how the reported P(correct) compares with the
truth).

Noise: per segment sd 2.9%/sqrt(2) (so one paired log-ratio has the sd 2.9% of issue 18's reference
rounds) plus a shared round drift of sd 2% (cancelled by every within-round comparison); `--noise t3`
draws Student-t (3 df) with the same sd instead. Policy: the defaults (confidence 95%, min-gain +0.5%,
min-rounds 3), sweep.max-rounds 32.

Run: .venv/bin/python benchmarks/sweep_quality.py            (about 2 minutes on 2 cores)
     .venv/bin/python benchmarks/sweep_quality.py --trials 500 --grid-trials 4000   (a quick look)
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sglab.sweep.race import CHALLENGERS, NO_WINNER, Race
from sglab.config.stack import StackConfig

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/retired_rules.py, also when loaded by path
from retired_rules import cs_bounds, eliminate  # noqa: E402

PAIR_SD = 0.029  # one paired per-round log-ratio (issue 18's reference rounds)
SEGMENT_SD = PAIR_SD / math.sqrt(2)
DRIFT_SD = 0.02  # shared by every segment of a round
MAX_ROUNDS = 32  # stacks/Pulumi.eagle-sweep.yaml sweep.max-rounds
PARALLEL_ARMS = 4  # stacks/Pulumi.eagle-sweep.yaml sweep.parallel-arms


@dataclass(frozen=True)
class Noise:
    name: str = "gaussian"

    def draw(self, rng: np.random.Generator, shape: tuple[int, ...], sd: float) -> np.ndarray:
        if self.name == "t3":
            return rng.standard_t(3, shape) * sd / math.sqrt(3.0)  # t(3) has variance 3
        return rng.normal(0.0, sd, shape)

    def round(self, rng: np.random.Generator, trials: int, arms: int) -> np.ndarray:
        """(trials, 1 + arms): the baseline and every arm's segment noise of one round, drift included."""
        return self.draw(rng, (trials, arms + 1), SEGMENT_SD) + self.draw(rng, (trials, 1), DRIFT_SD)


def model_grid() -> list[tuple[str, float]]:
    """(arm, gain at concurrency 1) of the shipped eagle-sweep grid on the simulator's timing model."""
    from sglab.config import load_stack
    from sglab.sim.adaptive import AdaptiveConfig, AdaptiveController, tier_setup
    from sglab.sim.profile import PROFILES
    from sglab.sim.timing import SpecSetup, acceptance_model, comm_factor, steady_decode_tok_per_s
    from sglab.sweep.grid import expand

    profile = PROFILES["default"]
    base = steady_decode_tok_per_s(profile, 1, None, comm_factor(profile, {}, False))
    out = []
    for arm in expand(load_stack("eagle-sweep")).arms:
        spec = SpecSetup(arm.num_steps, arm.eagle_topk, arm.num_draft_tokens)
        if arm.adaptive:  # the tier SGLang's EMA rule settles on when every batch accepts the mean
            controller = AdaptiveController(AdaptiveConfig(), arm.num_steps)
            for _ in range(500):
                steps = controller.current_steps
                setup = spec if steps == spec.num_steps else tier_setup(spec, steps)
                controller.observe([acceptance_model(profile, setup).expected_accept_length() - 1.0])
            steps = controller.current_steps
            spec = spec if steps == spec.num_steps else tier_setup(spec, steps)
        rate = steady_decode_tok_per_s(profile, 1, spec, comm_factor(profile, arm.nccl, False))
        out.append((arm.name, rate / base - 1.0))
    return out


def run_race(gains: np.ndarray, trials: int, rng: np.random.Generator, noise: Noise, *, max_rounds: int = MAX_ROUNDS,
             challengers: int = CHALLENGERS) -> Race:
    """`trials` sweeps of the arms `gains` (trials x K, or K for all alike), each round what the race plans."""
    policy = StackConfig.model_fields["policy"].default_factory()
    truth = np.broadcast_to(np.log1p(np.asarray(gains, dtype=float)), (trials, np.shape(gains)[-1]))
    k = truth.shape[1]
    race = Race(trials, k, min_gain=policy.min_gain, confidence=policy.confidence, min_rounds=policy.min_rounds,
                max_rounds=max_rounds, challengers=challengers)
    mean = np.concatenate([np.zeros((trials, 1)), truth], axis=1)
    while race.running.any():
        plan = race.plan()
        race.observe(np.where(plan, mean + noise.round(rng, trials, k), np.nan))
    return race


def full_grid_accuracy(gains: np.ndarray, trials: int, horizon: int, rng: np.random.Generator, noise: Noise
                       ) -> np.ndarray:
    """P(best picked) of a full grid after n = 1..horizon rounds (the baseline and its drift cancel in argmax)."""
    g = np.log1p(np.asarray(gains, dtype=float))
    best = int(np.argmax(g))
    total = np.zeros((trials, g.size))
    acc = np.zeros(horizon)
    for n in range(horizon):
        total += g + noise.draw(rng, (trials, g.size), SEGMENT_SD)
        acc[n] = float((total.argmax(axis=1) == best).mean())
    return acc


def equal_rounds(curve: np.ndarray, accuracy: float) -> int | None:
    hits = np.nonzero(curve >= accuracy)[0]
    return int(hits[0]) + 1 if hits.size else None


def binomial_interval(p: float, n: int) -> tuple[float, float]:
    half = 1.96 * math.sqrt(max(p * (1 - p), 1e-12) / n)
    return max(p - half, 0.0), min(p + half, 1.0)


def compare(label: str, accuracy: float, trials: int, arm_rounds: float, k: int, curve: np.ndarray, *,
            segments_per_round: int | None = None) -> str:
    """The `full grid, same accuracy` columns: n (and its interval), its arm-rounds, the ratio. A round of the
    full grid is K + 1 segments (the arms and the baseline), or `segments_per_round` (all waves' rounds)."""
    low, high = binomial_interval(accuracy, trials)
    n, n_low, n_high = (equal_rounds(curve, a) for a in (accuracy, low, high))
    per_round = segments_per_round or k + 1

    def cost(r):
        return None if r is None else per_round * r

    grid = cost(n)
    span = f"{n_low or '?'}-{n_high or f'>{curve.size}'}"
    fewer = "-" if grid is None else f"{grid / arm_rounds:.2f}x"
    ends = [cost(r) for r in (n_low, n_high)]
    fewer_span = "-".join("?" if c is None else f"{c / arm_rounds:.1f}" for c in ends)
    return (f"| {label} | {accuracy:.1%} | {n if n else f'>{curve.size}'} ({span}) | {grid if grid else '-'} | "
            f"{arm_rounds:.0f} | **{fewer}** ({fewer_span}) |")


def race_row(label: str, gains: list[float], args, rng, noise: Noise, curve: np.ndarray, **kw) -> list[str]:
    g = np.asarray(gains)
    best = int(np.argmax(g))
    race = run_race(g, args.trials, rng, noise, **kw)
    accuracy = float((race.leader == best).mean())
    cells = [f"| {label} | {len(g)} | {accuracy:.1%} | {race.p_correct.mean():.1%} | "
             f"{(~race.alive[:, best]).mean():.2%} | {race.looks.mean():.1f} | {race.segments.mean():.1f} "
             f"(p90 {np.percentile(race.segments, 90):.0f}) |"]
    return cells + [compare(label, accuracy, args.trials, float(race.segments.mean()), len(g), curve)]


def elimination_row(label: str, gains: list[float], args, rng, noise: Noise, curve: np.ndarray) -> tuple[str, str]:
    """The rule this replaces (benchmarks/retired_rules.py): every survivor gets every round."""
    policy = StackConfig.model_fields["policy"].default_factory()
    g = np.log1p(np.asarray(gains))
    k, best, trials = g.size, int(np.argmax(g)), args.trials
    base = noise.draw(rng, (trials, 1, MAX_ROUNDS), SEGMENT_SD)
    x = g[None, :, None] + noise.draw(rng, (trials, k, MAX_ROUNDS), SEGMENT_SD) - base
    mean, lower, upper = cs_bounds(x, confidence=1 - (1 - policy.confidence) / k)
    out_round, _, looks, _ = eliminate(lower, upper, threshold_log=math.log1p(policy.min_gain),
                                       min_rounds=policy.min_rounds)
    alive = out_round == 0
    at_stop = np.take_along_axis(mean, (looks - 1)[:, None, None].repeat(k, axis=1), axis=2)[:, :, 0]
    pick = np.where(alive, at_stop, -np.inf).argmax(axis=1)
    accuracy = float((alive.any(axis=1) & (pick == best)).mean())
    spent = np.where(alive, looks[:, None], out_round).sum(axis=1) + looks
    head = (f"| {label} | {k} | {accuracy:.1%} | - | {(out_round[:, best] > 0).mean():.2%} | {looks.mean():.1f} | "
            f"{spent.mean():.1f} |")
    return head, compare(label, accuracy, trials, float(spent.mean()), k, curve)


def wave_rows(grid: list[tuple[str, float]], args, rng, noise: Noise) -> tuple[str, str]:
    """The grid on a cluster: waves of PARALLEL_ARMS slots, each wave its own race, the pick carried on."""
    gains = np.array([g for _, g in grid])
    best, trials = int(np.argmax(gains)), args.trials
    first = list(range(PARALLEL_ARMS))
    waves = [first] + [list(range(i, min(i + PARALLEL_ARMS - 1, gains.size)))
                       for i in range(PARALLEL_ARMS, gains.size, PARALLEL_ARMS - 1)]
    carried = np.full(trials, -1)
    spent = np.zeros(trials)
    rows = np.arange(trials)
    for arms in waves:
        index = np.array([arms + ([] if carried[0] < 0 else [0])] * trials)
        if carried[0] >= 0:
            index[:, -1] = carried
        race = run_race(gains[index], trials, rng, noise)
        spent += race.segments
        carried = index[rows, np.maximum(race.leader, 0)]
    accuracy = float((carried == best).mean())
    # the waves of full grids: every arm of a wave (the carried pick included) n rounds, the best estimate carried
    n = np.arange(1, args.horizon + 1)[None, :]
    picks = np.zeros((args.grid_trials, args.horizon), dtype=int)
    for w, arms in enumerate(waves):
        new = np.array(arms)
        total = np.log1p(gains[new])[None, None, :] * n[:, :, None] + np.cumsum(
            noise.draw(rng, (args.grid_trials, args.horizon, new.size), SEGMENT_SD), axis=1)
        if w == 0:
            picks = new[total.argmax(axis=2)]
            continue
        carry = np.log1p(gains[picks]) * n + np.cumsum(noise.draw(rng, picks.shape, SEGMENT_SD), axis=1)
        choice = np.concatenate([total, carry[:, :, None]], axis=2).argmax(axis=2)
        picks = np.where(choice == new.size, picks, new[np.minimum(choice, new.size - 1)])
    curve = (picks == best).mean(axis=0)
    head = (f"| eagle-sweep in cluster waves ({len(waves)} waves of {PARALLEL_ARMS} slots) | {gains.size} | "
            f"{accuracy:.1%} | - | - | - | {spent.mean():.1f} |")
    per_round = sum(len(arms) + (1 if w else 0) + 1 for w, arms in enumerate(waves))  # arms, carried, baseline
    return head, compare(f"eagle-sweep, {len(waves)} waves", accuracy, trials, float(spent.mean()), gains.size,
                         curve, segments_per_round=per_round)


def stress_rows(args, rng, noise: Noise, grid_size: int) -> list[str]:
    out = ["", "Family-wise error (every arm at gain = min-gain, so every elimination is a mistake; a given arm "
           "could be 'the best'):", "", "| arms | P(a given arm eliminated), worst arm | P(any arm eliminated) |",
           "|---|---|---|"]
    for k in (5, grid_size):
        race = run_race(np.full(k, 0.005), args.trials, rng, noise, max_rounds=64)
        out.append(f"| {k} | {(~race.alive).mean(axis=0).max():.2%} | {(~race.alive).any(axis=1).mean():.2%} |")
    out += ["", "Reported P(correct selection) against the truth (5 arms +5.9%, +5.9% - gap, +3%, +1%, -2%; "
            "regret = mean shortfall of the pick's gain behind the best):", "",
            "| gap of the top two | P(best picked) | mean reported P(correct) | P(pick within 0.5% of the best) "
            "| regret | arm-rounds |", "|---|---|---|---|---|---|"]
    for gap in (0.0, 0.0025, 0.005, 0.01, 0.02):
        gains = np.array([0.059, 0.059 - gap, 0.03, 0.01, -0.02])
        race = run_race(gains, args.trials, rng, noise)
        shortfall = gains.max() - gains[np.maximum(race.leader, 0)]
        best_ok = float((shortfall == 0).mean()) if gap == 0 else float((race.leader == 0).mean())
        out.append(f"| {gap:.2%} | {best_ok:.1%} | {race.p_correct.mean():.1%} | {(shortfall <= 0.005).mean():.1%} "
                   f"| {shortfall.mean():.3%} | {race.segments.mean():.1f} |")
    below = run_race(np.array([-0.03, -0.05, -0.08, -0.12, -0.15]), args.trials, rng, noise)
    out += ["",
            f"Five arms all below the baseline (-3% to -15%): no-winner in {(below.outcome == NO_WINNER).mean():.1%}"
            f" of the sweeps (nothing to confirm), {below.segments.mean():.1f} arm-rounds."]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=4000, help="simulated sweeps per case (default 4000)")
    parser.add_argument("--grid-trials", type=int, default=20000, help="simulated full grids per case (default 20000)")
    parser.add_argument("--horizon", type=int, default=160, help="full-grid rounds tried (default 160)")
    parser.add_argument("--noise", choices=("gaussian", "t3"), default="gaussian")
    parser.add_argument("--seed", type=int, default=18)
    parser.add_argument("--no-stress", action="store_true", help="only the savings table")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    rng, noise = np.random.default_rng(args.seed), Noise(args.noise)
    grid = model_grid()
    gains = {name: g for name, g in grid}
    from sglab.config import load_stack

    quick_arms = load_stack("eagle-sweep").config.sweep.quick_arms
    cases = [(f"eagle-sweep ({len(grid)} arms, simulator model, c=1)", [g for _, g in grid])]
    cases += [(f"5 arms {step:.0%} apart (+5.9% best)", [0.059 - step * i for i in range(5)]) for step in
              (0.01, 0.02, 0.03)]
    cases.append(("eagle-sweep quick-arms (5)", [gains[a] for a in quick_arms]))
    top = sorted(grid, key=lambda a: -a[1])
    print(f"sweep quality: noise {noise.name}, paired log-ratio sd {PAIR_SD:.1%} (segment {SEGMENT_SD:.2%}, shared "
          f"drift {DRIFT_SD:.0%}), {args.trials} sweeps and {args.grid_trials} full grids per case, max-rounds "
          f"{MAX_ROUNDS}, seed {args.seed}")
    print(f"eagle-sweep model gains at c=1: best {top[0][0]} {top[0][1]:+.2%}, {top[1][0]} {top[1][1]:+.2%}, "
          f"{top[2][0]} {top[2][1]:+.2%}; {sum(g < 0 for _, g in grid)} of {len(grid)} below the baseline\n")
    races = ["| case | arms | P(best picked) | mean reported P(correct) | P(best eliminated) | rounds | arm-rounds |",
             "|---|---|---|---|---|---|---|"]
    equal = ["| case | P(best picked) | full grid of that accuracy: rounds (interval) | its arm-rounds | race "
             "arm-rounds | fewer (interval) |", "|---|---|---|---|---|---|"]
    for label, case in cases:
        curve = full_grid_accuracy(np.asarray(case), args.grid_trials, args.horizon, rng, noise)
        head, row = race_row(label, case, args, rng, noise, curve)
        races.append(head)
        equal.append(row)
        if label.startswith(("eagle-sweep (", "5 arms 1%")):
            head, row = elimination_row(f"{label}: successive elimination (before)", case, args, rng, noise, curve)
            races.append(head)
            equal.append(row)
        if label.startswith("5 arms 1%"):
            head, row = race_row(f"{label}, 1 challenger", case, args, rng, noise, curve, challengers=1)
            races.append(head)
            equal.append(row)
            head, row = race_row(f"{label}, max-rounds 64", case, args, rng, noise, curve, max_rounds=64)
            races.append(head)
            equal.append(row)
    head, row = wave_rows(grid, args, rng, noise)
    races.append(head)
    equal.append(row)
    print("\n".join(races + [""] + equal))
    if not args.no_stress:
        print("\n".join(stress_rows(args, rng, noise, len(grid))))
    print(f"\nelapsed {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
