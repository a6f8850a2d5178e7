"""Does the bundled prompt suite accept like the prompts the simulator's timing was calibrated on?

The default profile's `accept_prob_by_position` reproduce the article's accept length (2.1 at 5 steps, real
prompts); the shipped stacks send the suite (chat endpoint, so the simulator treats it as templated). For
every suite record this classifies its text as the simulator does (sglab.sim.tokens.classify on the
message contents) and takes its category's E[a] (sglab.sim.acceptance.ContentAcceptance, topk 1) at depths
1..7, templated and raw. The mix is weighted two ways: by request (what the gate's per-request decode tok/s
mean sees) and by output token (Σ tokens / Σ verify passes, what a /metrics window accept length sees).
The calibrated profile's own E[a] at the same depth is the target (within TOLERANCE at depths 1..5).

Usage: .venv/bin/python benchmarks/suite_acceptance.py [--max-depth 7]
Exit 1 if a templated request-weighted mix is off the calibrated E[a] by more than TOLERANCE at depth 1..5.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter

from sglab.load.datasets import load_suite
from sglab.sim.acceptance import CATEGORY_PROFILES, ContentAcceptance
from sglab.sim.tokens import RANDOM, classify
from sglab.sim.profile import SimProfile

TOLERANCE = 0.02  # relative, templated request-weighted mix vs the calibrated E[a], depths 1..5
CHECKED_DEPTHS = range(1, 6)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-depth", type=int, default=7)
    args = parser.parse_args()
    profile = SimProfile()
    records = load_suite().records
    started = time.perf_counter()
    categories = [classify(r.text) for r in records]
    classify_us = (time.perf_counter() - started) / len(records) * 1e6
    mix = Counter(categories)
    mislabelled = sum(c != r.category for c, r in zip(categories, records))
    print(f"suite: {len(records)} records, classified mix {dict(sorted(mix.items()))}, "
          f"{mislabelled} not classified as their label, classify {classify_us:.0f} us/record")

    print("\n| depth | calibrated E[a] | suite templated (by request) | ratio | suite templated (by token) | ratio "
          "| suite raw (by request) | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    failed = False
    per_depth: dict[int, ContentAcceptance] = {}
    for depth in range(1, args.max_depth + 1):
        content = ContentAcceptance(profile.accept_prob_by_position, profile.accept_prob_tail, depth=depth)
        per_depth[depth] = content
        calibrated = content.default.expected_accept_length()
        row = [f"{calibrated:.3f}"]
        for templated, by_token in ((True, False), (True, True), (False, False)):
            weights = [r.output_tokens if by_token else 1 for r in records]
            lengths = [content.model(c, templated).expected_accept_length() for c in categories]
            if by_token:  # Σ tokens / Σ cycles
                value = sum(weights) / sum(w / a for w, a in zip(weights, lengths))
            else:
                value = sum(lengths) / len(lengths)
            ratio = value / calibrated
            row += [f"{value:.3f}", f"{ratio - 1:+.1%}"]
            if templated and not by_token and depth in CHECKED_DEPTHS and abs(ratio - 1) > TOLERANCE:
                failed = True
        print(f"| {depth} | " + " | ".join(row) + " |")

    shown = [d for d in (1, 2, 3, 5) if d <= args.max_depth]
    print("\n| category | suite records | " + " | ".join(f"E[a] {d} steps, templated / raw" for d in shown) + " |")
    print("|---|---|" + "---|" * len(shown))
    for name in [*CATEGORY_PROFILES, RANDOM]:
        cells = []
        for d in shown:
            templated = per_depth[d].model(name, True).expected_accept_length()
            raw = per_depth[d].model(name, False).expected_accept_length()
            cells.append(f"{templated:.3f} / {raw:.3f}")
        print(f"| `{name}` | {mix.get(name, 0)} | " + " | ".join(cells) + " |")
    if failed:
        print(f"\nFAIL: the templated suite mix is off the calibrated E[a] by more than {TOLERANCE:.0%} "
              f"at some depth in {CHECKED_DEPTHS.start}..{CHECKED_DEPTHS.stop - 1}")
        return 1
    print(f"\nOK: templated suite mix within {TOLERANCE:.0%} of the calibrated E[a] at depths "
          f"{CHECKED_DEPTHS.start}..{CHECKED_DEPTHS.stop - 1}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
