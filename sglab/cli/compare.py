"""`sglab compare RESULT`: recompute and print the verdict (default: the table; `--output` picks a format).

Before judging, it says whether the result's integrity record holds (sglab/results/integrity.py; an old
file without one is still compared, and says so) and takes the confounds from the stack's arms when the
stack still hashes to what was benchmarked; the verdict adds those it recomputes from the launch
commands the result recorded. Notes go to stderr, so `--json` stays JSON.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sglab.cli.outputs import add_output_arguments, print_outputs
from sglab.core.untrusted import printable


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="print the verdict of a benchmark result",
                       description="Recompute the verdict from the result's samples with the policy recorded in "
                                   "it; the last line is `verdict: promote|reject|inconclusive`.")
    p.add_argument("result", type=Path, help="a result.json or its run directory")
    p.add_argument("--json", action="store_true", help="print the verdict as JSON (same as --output json)")
    add_output_arguments(p, default="console")
    p.set_defaults(func=run)


def note(text: str) -> None:
    print(f"note: {printable(text, limit=None)}", file=sys.stderr)


def with_recomputed_confounds(result):
    """The result with its confounds taken from the stack's arms, when the stack still describes this run."""
    from sglab.config.arms import baseline_arm, candidate_arm, confounds
    from sglab.core.errors import ConfigError
    from sglab.config.loader import load_stack

    try:
        stack = load_stack(result.stack)
    except ConfigError:
        note(f"stack '{result.stack}' is not here; confounds are recomputed from the recorded launch commands")
        return result
    arms = {"baseline": baseline_arm(stack.config), "candidate": candidate_arm(stack.config)}
    if result.kind not in ("ab", "interactive") or any(result.config_hash.get(n) != a.config_hash
                                                        for n, a in arms.items()):
        note(f"stack '{result.stack}' changed since this run (or it is not a plain A/B run); confounds are "
             "recomputed from the recorded launch commands")
        return result
    from sglab.schema.records import Confound

    return result.model_copy(update={"confounds": [Confound(**c.as_dict()) for c in confounds(stack.config)]})


def prepare(result):
    from sglab.results.integrity import verify

    problem = verify(result)
    if problem is not None:
        note(f"{problem}; the verdict below is computed anyway, but `sglab promote` refuses this result "
             f"(re-run the benchmark to get a sealed one)")
    return with_recomputed_confounds(result)


def run(args: argparse.Namespace) -> int:
    return print_outputs(args, "json" if args.json else args.output, prepare=prepare)
