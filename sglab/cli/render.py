"""`sglab render --stack NAME [--out DIR]`: every Kubernetes object `pulumi up` would apply, as YAML."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sglab.config import load_stack
from sglab.config.lints import lint_lines, raise_blocking, stack_lints
from sglab.deploy.render import header_comment, object_filename, render_stack, to_multidoc, to_yaml
from sglab.core.untrusted import printable

RENDERED_FILES = "[0-9][0-9]-*.yaml"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("render", help="print the Kubernetes objects a stack deploys (real Helm engine, no cluster)")
    p.add_argument("--stack", required=True, help="stack name (stacks/Pulumi.<stack>.yaml)")
    p.add_argument("--out", type=Path, help="write one YAML file per object into this directory instead")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    loaded = load_stack(args.stack)
    lints = stack_lints(loaded.config)
    raise_blocking(lints, loaded.path)
    rendered = render_stack(loaded)
    for note in rendered.warnings:
        print(f"warning: {printable(note, limit=None)}", file=sys.stderr)
    for lint in lints:
        print(f"warning: lint {printable(lint.describe(), limit=None)}", file=sys.stderr)
    header = printable(header_comment(rendered) + "".join(f"# {line}\n" for line in lint_lines(lints)),
                       newlines=True, limit=None)
    if args.out is None:
        sys.stdout.write(header + to_multidoc(rendered.objects))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    for stale in args.out.glob(RENDERED_FILES):  # an earlier render's objects; nothing else is touched
        stale.unlink()
    for index, obj in enumerate(rendered.objects):
        (args.out / object_filename(index, obj)).write_text(to_yaml(obj))
    sys.stderr.write(header)
    print(f"wrote {len(rendered.objects)} files to {args.out}", file=sys.stderr)
    return 0
