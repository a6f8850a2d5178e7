"""`sglab sweep --stack S --next`: the next step of an in-cluster sweep, as one command.

It reads where the sweep is (the stack's Pulumi outputs: `pulumi stack output --json`, and the stack file, where
`pulumi config set` writes), prints what it will run and why, checks the plan against the cluster's capacity
(sglab/deploy/capacity.py: a wave that would not fit never starts), then runs the `pulumi config` and
`pulumi up` commands:

- no wave yet: wave 1;
- a wave whose result is in: the next wave with its leader carried (`sweep.carry-arm`);
- the last wave with a leader: the confirmation A/B, the leader as the stack's candidate (the sweep's own
  confirmation stack: sglab.sweep.grid.arm_stack with its NCCL variant shared by both arms), `sweep.wave` unset;
- a wave (or the confirmation) whose result is not in (the Job failed, `pulumi up` was interrupted): the same
  step again (`--rerun` also asks for a new benchmark Job: a failed one is not rerun by itself);
- a finished confirmation: nothing to run; it says how to pull and promote.
"""

from __future__ import annotations

import copy
import json
import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from sglab.core.errors import ConfigError
from sglab.config.loader import LoadedStack, _plain, load_mapping
from sglab.deploy.capacity import check_capacity
from sglab.deploy.naming import PENDING
from sglab.sweep.arms import CARRY_KEY, WAVE_KEY, plan_wave, sweep_grid

PULUMI_ENV = "SGLAB_PULUMI"  # the pulumi executable (default: `pulumi` on PATH)
FINISHED = ("promote", "reject", "inconclusive")


@dataclass
class Step:
    what: str
    changes: list[tuple[str, Any]] = field(default_factory=list)  # (key path under sglab:, value; None: remove)
    up: bool = True

    def commands(self, stack_name: str, pulumi: str = "pulumi") -> list[list[str]]:
        out = []
        for path, value in self.changes:
            if value is None:
                out.append([pulumi, "config", "rm", "--path", f"sglab:{path}", "--stack", stack_name])
            else:
                text = json.dumps(value) if isinstance(value, bool) else str(value)
                out.append([pulumi, "config", "set", "--path", f"sglab:{path}", "--stack", stack_name, "--", text])
        if self.up:
            out.append([pulumi, "up", "--stack", stack_name])
        return out


def _set(raw: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    node = raw
    for part in parents:
        node = node.setdefault(part, {})
    if "[" in last:
        name, index = last[:-1].split("[")
        items = node.setdefault(name, [])
        items[int(index):int(index) + 1] = [value]
    elif value is None:
        node.pop(last, None)
    else:
        node[last] = value


def _leaves(prefix: str, old: Any, new: Any) -> list[tuple[str, Any]]:
    """`pulumi config set --path` steps that turn `old` into `new` (mappings by key, lists by index)."""
    if isinstance(new, dict):
        old = old if isinstance(old, dict) else {}
        return [change for key in new for change in _leaves(f"{prefix}.{key}", old.get(key), new[key])]
    if isinstance(new, list):
        if old == new:
            return []
        return [(f"{prefix}[{i}]", item) for i, item in enumerate(new)]
    return [] if old == new else [(prefix, new)]


def applied(loaded: LoadedStack, changes: list[tuple[str, Any]]) -> LoadedStack:
    """The stack as it will be after the changes (validated like a stack file: a bad step fails here)."""
    raw = copy.deepcopy(_plain(loaded.raw))
    for path, value in changes:
        _set(raw, path, value)
    return load_mapping(loaded.name, loaded.path, raw)


def confirmation_changes(loaded: LoadedStack, leader: str) -> list[tuple[str, Any]]:
    """The leader as the stack's candidate (its NCCL variant in sglab:nccl for both arms), and no wave."""
    from sglab.sweep.grid import arm_stack

    arm = sweep_grid(loaded.config, loaded.name).arm(leader)
    if arm is None:
        raise ConfigError(loaded.path, CARRY_KEY, f"the sweep's leader {leader!r} is not an arm of this stack's grid",
                          "the grid changed since the sweep ran: run the waves again (pulumi config rm --path "
                          "sglab:sweep.wave)")
    target = arm_stack(loaded, num_steps=arm.num_steps, eagle_topk=arm.eagle_topk,
                       num_draft_tokens=arm.num_draft_tokens, adaptive=arm.adaptive, nccl=arm.nccl, shared_nccl=True)
    current, wanted = _plain(loaded.raw), _plain(target.raw)
    changes = [c for key in ("candidate", "nccl") for c in _leaves(key, current.get(key), wanted.get(key))]
    return changes + [(WAVE_KEY, None), (CARRY_KEY, None)]


def next_step(loaded: LoadedStack, outputs: dict[str, Any], *, rerun: str | None = None) -> Step:
    stack = loaded.config
    wave = plan_wave(stack, loaded.name)
    token = [("benchmark-job.rerun", rerun)] if rerun else []
    if wave is None:
        verdict = outputs.get("benchmark_verdict")
        if verdict in FINISHED and outputs.get("config_hashes", {}).get("candidate"):
            return Step(f"the confirmation A/B finished: {verdict}; bring it home and promote it if it says so: "
                        f"sglab results pull --stack {loaded.name} && sglab promote --stack {loaded.name} "
                        f"--result <run {outputs.get('benchmark_run_id', '')}>", up=False)
        if verdict in (PENDING, "invalid") or "benchmark_verdict" in outputs:
            return Step(f"the confirmation A/B has no result yet ({verdict}): pulumi up again", token)
        return Step("start the sweep: wave 1", [(WAVE_KEY, 1), (CARRY_KEY, None), *token])
    status = outputs.get("sweep_status")
    if outputs.get("sweep_wave") != wave.number or status in (None, PENDING, "invalid"):
        why = "not deployed yet" if outputs.get("sweep_wave") != wave.number else f"its result is {status}"
        return Step(f"resume wave {wave.number}/{wave.count} ({why}): pulumi up again", token)
    leader = outputs.get("sweep_leader")
    if wave.number < wave.count:
        carry = [(CARRY_KEY, leader)] if leader else [(CARRY_KEY, None)]
        what = f"wave {wave.number + 1}/{wave.count}" + (f", carrying wave {wave.number}'s leader {leader}"
                                                          if leader else f" (wave {wave.number} has no leader)")
        return Step(what, [(WAVE_KEY, wave.number + 1), *carry])
    if not leader:
        return Step(f"the last wave ({wave.number}/{wave.count}) has no leader: no arm beat the baseline by "
                    "policy.min-gain; nothing to confirm", up=False)
    return Step(f"the confirmation A/B of {leader} on fresh rounds, as the stack's candidate",
                confirmation_changes(loaded, leader))


def read_outputs(stack_name: str, pulumi: str, runner: Callable[..., Any] = subprocess.run) -> dict[str, Any]:
    done = runner([pulumi, "stack", "output", "--json", "--stack", stack_name], capture_output=True, text=True)
    if done.returncode != 0:
        raise ConfigError("pulumi", f"stack {stack_name}", f"`pulumi stack output` failed: "
                          f"{(done.stderr or '').strip().splitlines()[-1:] or ['no output']}",
                          f"pulumi login, then pulumi stack select {stack_name} --create (docs/deploy.md)")
    try:
        outputs = json.loads(done.stdout or "{}")
    except json.JSONDecodeError:
        raise ConfigError("pulumi", f"stack {stack_name}", "`pulumi stack output --json` printed no JSON",
                          "check the Pulumi CLI") from None
    return outputs if isinstance(outputs, dict) else {}


def run_next(loaded: LoadedStack, *, dry_run: bool = False, yes: bool = False, max_nodes: int | None = None,
             rerun: bool = False, runner: Callable[..., Any] = subprocess.run) -> int:
    """Print the step, check its capacity, run it. Exit status: 0, 2 (refused), or pulumi's."""
    pulumi = os.environ.get(PULUMI_ENV, "pulumi")
    outputs = read_outputs(loaded.name, pulumi, runner)
    step = next_step(loaded, outputs, rerun=f"resume-{int(time.time())}" if rerun else None)
    after = applied(loaded, step.changes)
    capacity, warnings = check_capacity(after.config, loaded.name, max_nodes)
    print(f"sglab sweep {loaded.name} --next: {step.what}")
    if capacity is not None:
        print(f"  {capacity.describe()}")
    for warning in warnings:
        print(f"  warning: {warning}", file=sys.stderr)
    commands = step.commands(loaded.name, pulumi)
    if yes and step.up:
        commands[-1].append("--yes")
    for argv in commands:
        print(f"  {shlex.join(argv)}")
    if dry_run or not commands:
        return 0
    for argv in commands:
        done = runner(argv)
        if done.returncode != 0:
            print(f"error: `{shlex.join(argv)}` exited {done.returncode}; run the same --next again once it is "
                  "fixed (it resumes from where the sweep is)", file=sys.stderr)
            return done.returncode
    return 0
