"""`sglab validate --stack NAME`: check a stack's config and list its confounds; `sglab render --stack NAME
[--out DIR]`: every Kubernetes object `pulumi up` would apply, as YAML. Both read the stack offline (no Pulumi,
no cluster) and stop at the same lints."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sglab.config import baseline_arm, candidate_arm, confounds, load_stack
from sglab.config.lints import lint_lines, raise_blocking, stack_lints
from sglab.core.untrusted import printable

RENDERED_FILES = "[0-9][0-9]-*.yaml"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("render", help="print the Kubernetes objects a stack deploys (real Helm engine, no cluster)")
    p.add_argument("--stack", required=True, help="stack name (stacks/Pulumi.<stack>.yaml)")
    p.add_argument("--out", type=Path, help="write one YAML file per object into this directory instead")
    p.set_defaults(func=run_render)

    p = sub.add_parser("validate", help="check a stack's config and list confounds")
    p.add_argument("--stack", required=True, help="stack name (stacks/Pulumi.<stack>.yaml) or the path of a stack file")
    p.set_defaults(func=run_validate)


def run_validate(args: argparse.Namespace) -> int:
    loaded = load_stack(args.stack)
    for note in loaded.warnings:
        print(f"warning: {printable(note, limit=None)}", file=sys.stderr)
    stack = loaded.config
    lints = stack_lints(stack)
    raise_blocking(lints, loaded.path)
    from sglab.deploy.capacity import check_capacity  # a plan that could deadlock on GPU nodes is no valid plan

    capacity, capacity_warnings = check_capacity(stack, loaded.name)
    for note in capacity_warnings:  # what follows quotes only the validated stack: no control character in it
        print(f"warning: {note}", file=sys.stderr)
    print(f"{printable(loaded.path, limit=None)}: valid")
    if capacity is not None:
        print(capacity.describe())
    from sglab.deploy.namespace import tenancy_lines

    for line in tenancy_lines(stack, loaded.name):
        print(line)
    for arm in (baseline_arm(stack), candidate_arm(stack)):
        print(f"{arm.role}: config-hash {arm.config_hash[:12]}  {arm.launch_command}")
    found = confounds(stack)
    if found:
        print(f"confounds ({len(found)}): the candidate differs from the baseline beyond speculation in")
        for c in found:
            print(f"  - {c.describe()}")
        print("  results of this stack are reported with these confounds and cannot be promoted")
    else:
        print("confounds: none (baseline and candidate differ only in the speculative block)")
    for line in lint_lines(lints):
        print(line)
    note = traffic_note(stack)
    if note:
        print(note)
    return 0


def traffic_note(stack) -> str | None:
    """A GPU stack without sglab:traffic is judged only at its policy levels: a verdict there says nothing about
    the concurrencies production serves, so validate says so before anything runs."""
    if stack.traffic is not None or (stack.backend != "sglang" and not stack.placement.gpus_per_node):
        return None
    levels = ", ".join(str(level) for level in stack.policy.levels)
    return (f"traffic: no sglab:traffic declared, so only the policy levels (concurrency {levels}) are judged; "
            "the other levels are measured, not gated. Declare the levels production serves, e.g. "
            "sglab:traffic: {levels: [1, 4, 16]} (docs/config.md)")


def run_render(args: argparse.Namespace) -> int:
    from sglab.deploy.render import header_comment, object_filename, render_stack, to_multidoc, to_yaml

    loaded = load_stack(args.stack)
    lints = stack_lints(loaded.config)
    raise_blocking(lints, loaded.path)
    rendered = render_stack(loaded)
    for note in rendered.warnings:  # from the validated stack
        print(f"warning: {note}", file=sys.stderr)
    for lint in lints:
        print(f"warning: lint {lint.describe()}", file=sys.stderr)
    header = header_comment(rendered) + "".join(f"# {line}\n" for line in lint_lines(lints))
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
