"""`sglab promote --stack NAME [--to production] [--dry-run] [--result PATH]`: promote on evidence only; and
`sglab rollback --stack production [--dry-run] [--reason TEXT]`: restore the config before the newest promotion."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sglab.core.errors import USAGE
from sglab.core.untrusted import printable
from sglab.promotion.promote import PromotionRefused, promote, rollback


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("promote", help="write a stack's winning candidate config into the production stack",
                       description="Verify the stack's newest complete A/B run (its integrity record, its "
                                   "own plan, its launch commands), recompute its verdict under the policy "
                                   "recorded with it (the stack's may tighten it, never loosen it), check the "
                                   "config still hashes to what was benchmarked, then write the candidate's "
                                   "serving config into stacks/Pulumi.<target>.yaml and log the evidence.")
    p.add_argument("--stack", required=True, help="the benchmarked stack (stacks/Pulumi.<stack>.yaml)")
    p.add_argument("--to", dest="target", default=None,
                   help="target stack (default: the stack's sglab:promote-to, production unless it says otherwise)")
    p.add_argument("--dry-run", action="store_true", help="show the verdict and the diff; change nothing")
    p.add_argument("--result", type=Path, default=None,
                   help="a specific result.json or run directory (default: the newest complete run)")
    p.add_argument("--accept-unkeyed-seal", action="store_true",
                   help="promote a result sealed with a plain SHA-256 digest (not this machine's HMAC, not a "
                        "pulled cluster record); printed and recorded in promotions.jsonl")
    p.set_defaults(func=run_promote)

    p = sub.add_parser("rollback", help="restore a stack's config from before its newest promotion",
                       description="Undo the newest promotion into the stack still in effect according to "
                                   "stacks/promotions.jsonl: its promoted keys get back what they held before, "
                                   "with the same locked, atomic, logged write as `sglab promote`. Then run the "
                                   "printed `pulumi up` (docs/production.md: what a rollback costs).")
    p.add_argument("--stack", default="production", help="the target stack to roll back (default: production)")
    p.add_argument("--dry-run", action="store_true", help="show the diff; change nothing")
    p.add_argument("--reason", default="", help="why (recorded in the log, e.g. the watch's finding)")
    p.set_defaults(func=run_rollback)


def _say(text: str, *, lines: bool = False, **kwargs) -> None:
    """Every line quotes the result (run id, sentence), the promotion log or the stack files (the diff, `lines`):
    `printable`, so none of them can add or hide a line."""
    print(printable(text, newlines=lines, limit=None), **kwargs)


def run_promote(args: argparse.Namespace) -> int:
    try:
        done = promote(args.stack, target=args.target, dry_run=args.dry_run, result_path=args.result,
                       accept_unkeyed_seal=args.accept_unkeyed_seal)
    except PromotionRefused as exc:
        _say(f"refused: {exc.why}", file=sys.stderr)
        _say(f"  fix: {exc.fix}", file=sys.stderr)
        _say(f"  check: {exc.check or '?'} (docs/promotion.md, \"What it checks, in order\")", file=sys.stderr)
        return USAGE
    _say(f"evidence: run {done.verdict.run_id} ({done.result_path})")
    _say(f"checks passed ({len(done.checks)}): {', '.join(c.name for c in done.checks)}")
    seal, digest = done.log_entry.get("seal", {}), done.log_entry["integrity"]["digest"]
    if seal.get("accepted") == "unkeyed-opt-in":
        _say(f"seal: plain SHA-256 {digest}, accepted by --accept-unkeyed-seal (recorded in the promotion log)")
    elif seal.get("accepted") == "cluster-record":
        _say(f"seal: plain SHA-256 {digest}, the cluster's record (pulled from ConfigMap "
              f"{seal.get('namespace') or '?'}/{seal.get('configmap')})")
    _say(done.verdict.sentence)
    if done.diff:
        _say(done.diff, lines=True, end="" if done.diff.endswith("\n") else "\n")
    else:
        _say(f"{done.target_path.name} already holds this config; nothing to change")
    if done.written:
        _say(f"promoted {done.source} -> {done.target}: wrote {done.target_path}, logged in {done.log_path}")
        _say(f"next: {done.next_command}")
    else:
        _say(f"dry run: nothing written. Without --dry-run this writes {done.target_path} "
              f"and then you run: {done.next_command}")
    return 0


def run_rollback(args: argparse.Namespace) -> int:
    try:
        done = rollback(args.stack, dry_run=args.dry_run, reason=args.reason[:500])
    except PromotionRefused as exc:
        _say(f"refused: {exc.why}", file=sys.stderr)
        _say(f"  fix: {exc.fix}", file=sys.stderr)
        return USAGE
    restored = done.restored.describe() if done.restored else "the config before the first logged promotion"
    _say(f"undoes: {done.undone.describe()}")
    _say(f"restores: {restored}")
    _say(done.diff, lines=True, end="" if done.diff.endswith("\n") else "\n")
    if done.written:
        print(f"rolled back {done.target}: wrote {done.target_path}, logged in {done.log_path}")
        print(f"next: {done.next_command}")
    else:
        print(f"dry run: nothing written. Without --dry-run this writes {done.target_path} "
              f"and then you run: {done.next_command}")
    return 0
