"""A cluster wave's slot nodes: how often is the best arm picked when its slot's node hides it?

Every race is the project's own rule, sglab.sweep.race (the class a wave's Job runs and `sglab sweep --next`
replays). A wave of four arms in four slots: the best arm (+6%) in a slot 8% slower than the baseline's node, a +4%
arm in one 3% faster, two -5% arms on nodes like the baseline's. Each race gets its own calibration step (the
baseline's config in every slot beside the baseline for --block rounds: sglab.sweep.race.node_offsets). Three ways
to race the same rounds (drawn once per race):

- uncorrected: the Job's race without the step (what a wave did before the calibration was built);
- replay: the uncorrected race asks for the rounds and stops, then the same rounds are replayed net of the step
  (race_record with the offsets: what `--next` does for a wave whose Job could not read the step);
- live: the race net of the step from its first look (what a calibrated wave's Job does).

A segment draws log(1 + gain) + its node's log speed + a round drift shared by the round (sd 2%) + its own noise
(sd 1.5%). Policy: eagle-sweep's (confidence 95%, its min-gain and min-rounds), sweep.max-rounds 32.

Run: .venv/bin/python benchmarks/slot_calibration.py                 (1000 races, about 20 s on 2 cores)
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sglab.config import load_stack  # noqa: E402
from sglab.sweep.race import Race, arm_corrections, node_offsets, race_record  # noqa: E402

GAINS = [0.06, 0.04, -0.05, -0.05]
NODES = ["slow", "fast", "c", "d"]
SPEED = {"slow": math.log(0.92), "fast": math.log(1.03), "c": 0.0, "d": 0.0}
NAMES = ["best", "second", "worse-1", "worse-2"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--races", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--block", type=int, default=8, help="rounds of the calibration step")
    parser.add_argument("--max-rounds", type=int, default=32)
    args = parser.parse_args(argv)
    policy = load_stack("eagle-sweep").config.policy
    trials, horizon = args.races, args.max_rounds
    rng = np.random.default_rng(args.seed)

    def draw(n: int, effects: list[float]) -> np.ndarray:
        shared = rng.normal(0, 0.02, (trials, n, 1))
        return shared + np.asarray(effects)[None, None, :] + rng.normal(0, 0.015, (trials, n, len(effects)))

    data = draw(horizon, [0.0, *(math.log1p(g) + SPEED[n] for g, n in zip(GAINS, NODES))])
    block = draw(args.block, [0.0, *(SPEED[n] for n in NODES)])
    kw = dict(min_gain=policy.min_gain, confidence=policy.confidence, min_rounds=policy.min_rounds,
              max_rounds=horizon)

    job = Race(trials, len(GAINS), **kw)
    measured = np.full((trials, horizon, len(GAINS) + 1), np.nan)
    for r in range(horizon):
        if not job.running.any():
            break
        row = np.where(job.plan(), data[:, r, :], np.nan)
        measured[:, r, :] = np.where(job.running[:, None], row, np.nan)
        job.observe(row)

    offsets = [node_offsets(block[t], NODES, confidence=policy.confidence) for t in range(trials)]
    replayed = 0
    for t in range(trials):
        done = measured[t][~np.all(np.isnan(measured[t]), axis=1)]  # the rounds the Job measured
        rec = race_record(NAMES, done, arm_nodes=NODES, baseline_node="base", calibration=offsets[t],
                          calibration_rounds=args.block, **kw)
        replayed += (rec.winner or rec.leader) == "best"

    offset, half = np.zeros((trials, len(GAINS))), np.zeros((trials, len(GAINS)))
    ids = np.zeros(len(GAINS), dtype=int)
    for t in range(trials):
        offset[t], half[t], ids = arm_corrections(NODES, "base", offsets[t])
    live = Race(trials, len(GAINS), offset_log=offset, halfwidth_log=half, node_ids=ids, **kw)
    for r in range(horizon):
        if not live.running.any():
            break
        live.observe(np.where(live.plan(), data[:, r, :], np.nan))

    print(f"{trials} races (seed {args.seed}): the best +6% in a slot 8% slower, +4% in one 3% faster, two -5% arms; "
          f"a {args.block}-round calibration step; max-rounds {horizon}")
    print("| race | P(best picked) | mean segments |")
    print("|---|---|---|")
    print(f"| uncorrected (the Job without the step) | {np.mean(job.leader == 0):.1%} | {job.segments.mean():.1f} |")
    print(f"| replay of those rounds net of the step (--next) | {replayed / trials:.1%} | {job.segments.mean():.1f} |")
    print(f"| live, net of the step from the first look (the Job) | {np.mean(live.leader == 0):.1%} | "
          f"{live.segments.mean():.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
