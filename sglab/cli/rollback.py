"""`sglab rollback --stack production [--dry-run] [--reason TEXT]`: restore the config before the newest promotion."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sglab.core.errors import USAGE
from sglab.core.untrusted import printable
from sglab.promotion.evidence import PromotionRefused
from sglab.promotion.rollback import rollback


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rollback", help="restore a stack's config from before its newest promotion",
                       description="Undo the newest promotion into the stack still in effect according to "
                                   "stacks/promotions.jsonl: its promoted keys get back what they held before, "
                                   "with the same locked, atomic, logged write as `sglab promote`. Then run the "
                                   "printed `pulumi up` (docs/production.md: what a rollback costs).")
    p.add_argument("--stack", default="production", help="the target stack to roll back (default: production)")
    p.add_argument("--dry-run", action="store_true", help="show the diff; change nothing")
    p.add_argument("--reason", default="", help="why (recorded in the log, e.g. the watch's finding)")
    p.add_argument("--root", type=Path, default=None, help=argparse.SUPPRESS)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        done = rollback(args.stack, root=args.root, dry_run=args.dry_run, reason=args.reason[:500])
    except PromotionRefused as exc:
        print(f"refused: {printable(exc.why, limit=2000)}", file=sys.stderr)
        print(f"  fix: {printable(exc.fix, limit=2000)}", file=sys.stderr)
        return USAGE
    restored = done.restored.describe() if done.restored else "the config before the first logged promotion"
    print(f"undoes: {printable(done.undone.describe())}")
    print(f"restores: {printable(restored)}")
    print(done.diff, end="" if done.diff.endswith("\n") else "\n")
    if done.written:
        print(f"rolled back {done.target}: wrote {done.target_path}, logged in {done.log_path}")
        print(f"next: {done.next_command}")
    else:
        print(f"dry run: nothing written. Without --dry-run this writes {done.target_path} "
              f"and then you run: {done.next_command}")
    return 0
