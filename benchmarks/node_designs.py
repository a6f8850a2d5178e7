"""Same conditions on real nodes: false promotions and power of parallel, crossover and switchback A/Bs.

Two 8-GPU nodes of one SKU differ by up to 8% (docs/verdict.md, "Same conditions on real nodes"). Each trial
simulates per-arm, per-round log decode rates: every node drifts on its own (marginal sd SD / sqrt(2) per
round, so a parallel round's log-ratio has the bench's measured sd SD = 2.9%) under a noise model of
benchmarks/decision_quality.py (i.i.d. Gaussian, AR(1) rho 0.5 and 0.8 per node, the candidate-only trend
+1.5% -> -1.5% over the run's most rounds), and node B runs every arm `node effect` faster than node A:

- parallel: the baseline on A, the candidate on B, both in every round;
- crossover: periods of `--period` rounds, the arms swapping nodes at each (both servers restart, at once);
- switchback: node A alone, one arm per round in ABBA order (a restart at every change of arm).

The design's estimates (sglab/analysis/nodes.py's arithmetic, vectorised; the first trials of every case are
checked against `design_estimates` on the same rounds as RoundSamples) go through the bench's rule itself,
`sglab.analysis.sequential.look_codes` with the default policy and futility, at most `--max-rounds` rounds;
the first look that decides stops the run. Reported: false promotions of identical configs (true gain 0),
power at a true +4%, the rounds used and the server restarts at +4%; rates with 95% Wilson intervals.

Run: PYTHONPATH=. .venv/bin/python benchmarks/node_designs.py --trials 2000
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from sglab.analysis.sequential import PROMOTE, checks_named, look_codes
from sglab.analysis.nodes import design_estimates
from sglab.config.policy import PromotionPolicy
from sglab.schema.result import LevelResult, RoundSample

SD = 0.029  # per-round sd of a parallel round's log-ratio (benchmarks/decision_quality.py)
GAIN = 0.04
NODE_EFFECTS = (0.0, 0.03, -0.03, 0.08, -0.08)
NODES = ("node-a", "node-b")


def node_noise(model: str, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """One node's drift per round (last axis), marginal sd SD / sqrt(2)."""
    sd = SD / math.sqrt(2)
    z = rng.normal(0.0, sd, shape)
    rho = {"AR(1), rho 0.5": 0.5, "AR(1), rho 0.8": 0.8}.get(model)
    if rho is None:
        return z
    out = np.empty(shape)
    out[..., 0] = z[..., 0]
    for r in range(1, shape[-1]):
        out[..., r] = rho * out[..., r - 1] + math.sqrt(1 - rho * rho) * z[..., r]
    return out


def candidate_trend(model: str, rounds: int) -> np.ndarray:
    """The candidate alone: +1.5% falling to -1.5% over the run's most rounds (mean 0)."""
    if model != "candidate-only trend":
        return np.zeros(rounds)
    return 0.015 - 0.03 * np.arange(rounds) / (rounds - 1)


MODELS = {"iid": "i.i.d. Gaussian", "ar0.5": "AR(1), rho 0.5", "ar0.8": "AR(1), rho 0.8",
          "trend": "candidate-only trend"}


def switchback_arm(rounds: int) -> np.ndarray:
    """1 where the candidate serves the round (ABBA, one round per period)."""
    return np.isin(np.arange(rounds) % 4, (1, 2)).astype(float)


def simulate(design: str, model: str, gain: float, node: float, trials: int, rounds: int, period: int,
             rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Per-arm log rates (trials x rounds) and where each arm ran."""
    a, b = node_noise(model, rng, (trials, rounds)), node_noise(model, rng, (trials, rounds))
    trend = candidate_trend(model, rounds)
    if design == "switchback":
        cand = switchback_arm(rounds)
        return {"value": a + cand * (gain + trend), "candidate": np.broadcast_to(cand, (trials, rounds))}
    swapped = ((np.arange(rounds) // period) % 2 == 1) if design == "crossover" else np.zeros(rounds, bool)
    on_b = lambda arm_on_b: np.where(arm_on_b, b + node, a)  # noqa: E731
    base = on_b(swapped)
    cand = on_b(~swapped) + gain + trend
    return {"baseline": base, "candidate": cand, "swapped": swapped}


def estimates(design: str, sim: dict[str, np.ndarray], period: int) -> tuple[np.ndarray, np.ndarray]:
    """(trials x estimates, the rounds at which each completed): nodes.py's estimates, vectorised."""
    if design == "parallel":
        x = sim["candidate"] - sim["baseline"]
        return x, np.arange(1, x.shape[1] + 1)
    if design == "crossover":
        r = sim["candidate"] - sim["baseline"]
        out, done = [], []
        for start in range(0, r.shape[1] - period, 2 * period):
            for j in range(min(period, r.shape[1] - start - period)):
                out.append((r[:, start + j] + r[:, start + period + j]) / 2)
                done.append(start + period + j + 1)
        return np.stack(out, axis=1), np.asarray(done)
    v, cand = sim["value"], sim["candidate"][0]
    blocks = v.shape[1] // 4
    x = np.stack([(v[:, 4 * k + 1] + v[:, 4 * k + 2]) / 2 - (v[:, 4 * k] + v[:, 4 * k + 3]) / 2
                  for k in range(blocks)], axis=1)
    assert (cand[:4] == [0, 1, 1, 0]).all()
    return x, 4 * np.arange(1, blocks + 1)


def as_level(design: str, sim: dict[str, np.ndarray], trial: int, period: int) -> LevelResult:
    """One trial's rounds as the bench records them, for the check against sglab/analysis/nodes.py."""
    rows = []
    rounds = sim["candidate"].shape[1]

    def sample(t: int, arm: str, log_rate: float, node: str, p: int | None) -> RoundSample:
        return RoundSample(level=1, round_index=t, position=0, arm=arm, started_at_s=float(t), duration_s=1.0,
                           requests=1, errors=0, output_tokens=1, decode_tok_per_s_mean=100 * math.exp(log_rate),
                           node=node, period=p)
    for t in range(rounds):
        if design == "switchback":
            arm = "candidate" if sim["candidate"][trial, t] else "baseline"
            rows.append(sample(t, arm, float(sim["value"][trial, t]), NODES[0], t + 1))
            continue
        swapped = bool(sim["swapped"][t])
        p = t // period + 1 if design == "crossover" else None
        rows.append(sample(t, "baseline", float(sim["baseline"][trial, t]), NODES[int(swapped)], p))
        rows.append(sample(t, "candidate", float(sim["candidate"][trial, t]), NODES[int(not swapped)], p))
    return LevelResult(concurrency=1, rounds=rows)


def restarts(design: str, used: np.ndarray, period: int) -> np.ndarray:
    """Server restarts up to the round a run stopped at: a crossover restarts both servers at each swap (at
    once: one wait), a switchback one server at each change of arm."""
    if design == "parallel":
        return np.zeros_like(used)
    if design == "crossover":
        return 2 * ((used - 1) // period)
    changes = np.concatenate([[0], np.cumsum(np.diff(switchback_arm(int(used.max()) + 1)) != 0)])
    return changes[used - 1]


def wilson(hits: float, n: int, z: float = 1.96) -> tuple[float, float]:
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def rate(mask: np.ndarray) -> str:
    low, high = wilson(float(mask.sum()), mask.size)
    return f"{mask.mean():6.2%} [{low:.2%}, {high:.2%}]"


def run(design: str, model: str, gain: float, node: float, args, policy: PromotionPolicy, seed: int
        ) -> tuple[np.ndarray, np.ndarray]:
    """(promoted, rounds used) per trial."""
    rng = np.random.default_rng(seed)
    period = args.period
    sim = simulate(design, model, gain, node, args.trials, args.max_rounds, period, rng)
    x, done = estimates(design, sim, period)
    for trial in range(2):  # the vectorised estimates are nodes.py's, on the same rounds
        found = design_estimates(as_level(design, sim, trial, period), "decode_tok_per_s")
        assert np.allclose(found.values, x[trial]) and [e.rounds for e in found.estimates] == list(done), design
    *_, code, _ = look_codes(x, threshold_log=math.log1p(policy.min_gain), confidence=policy.confidence,
                             min_rounds=policy.min_rounds, max_rounds=args.max_rounds, futility=True,
                             checks=checks_named(args.checks))
    hit = code != 0
    first = np.where(hit.any(axis=1), hit.argmax(axis=1), x.shape[1] - 1)
    picked = np.take_along_axis(code, first[:, None], axis=1)[:, 0]
    used = np.where(hit.any(axis=1), done[first], args.max_rounds)
    return picked == PROMOTE, used


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--max-rounds", type=int, default=32)
    parser.add_argument("--period", type=int, default=16, help="a crossover's period in rounds (default: half of "
                        "--max-rounds: one swap)")
    parser.add_argument("--checks", default="standard", choices=("standard", "strict"))
    parser.add_argument("--designs", default="parallel,crossover,switchback")
    parser.add_argument("--models", default=",".join(MODELS), help=f"of {', '.join(MODELS)}")
    parser.add_argument("--seed", type=int, default=20261207)
    args = parser.parse_args()
    policy = PromotionPolicy()
    started = time.monotonic()
    print(f"# {args.trials} trials per cell, at most {args.max_rounds} rounds, crossover period {args.period} rounds, "
          f"{args.checks} checks, min-gain {policy.min_gain:+.1%}, confidence {policy.confidence:.0%}, "
          f"per-round log-ratio sd {SD:.1%}")
    print(f"{'design':<11} {'noise':<21} {'node':>5} | {'false promotions (gain 0)':<27} | "
          f"{'power at +4%':<27} | rounds | restarts")
    wrong = []
    for d_i, design in enumerate(args.designs.split(",")):
        for m_i, model in enumerate(MODELS[m] for m in args.models.split(",")):
            for n_i, node in enumerate(NODE_EFFECTS):
                seed = args.seed + 1000 * d_i + 100 * m_i + 10 * n_i
                false, _ = run(design, model, 0.0, node, args, policy, seed)
                power, used = run(design, model, GAIN, node, args, policy, seed + 1)
                print(f"{design:<11} {model:<21} {node:+5.0%} | {rate(false):<27} | {rate(power):<27} | "
                      f"{used.mean():6.1f} | {restarts(design, used, args.period).mean():5.1f}")
                if design == "parallel" and (false.mean() > 0.025 or power.mean() < 0.90):
                    wrong.append(f"parallel, {model}, node {node:+.0%}: {false.mean():.1%} false promotions of "
                                 f"identical configs, {power.mean():.1%} power at +4%")
    if wrong:
        print("\nwhat parallel gets wrong (its gain includes the difference between the two nodes):")
        print("\n".join(f"  {w}" for w in wrong))
    print(f"\n# wall {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
