"""`sglab sweep --stack S --next`: the next step of an in-cluster sweep, as one command.

It reads where the sweep is (the stack's Pulumi outputs: `pulumi stack output --json`, and the stack file, where
`pulumi config set` writes), prints what it will run and why, checks the plan against the cluster's capacity
(sglab/deploy/capacity.py: a wave that would not fit never starts), then runs the `pulumi config` and
`pulumi up` commands:

- no wave yet: the calibration step (sweep.wave 0: the baseline's config in every slot), or wave 1 where
  sweep.calibration-rounds is 0;
- the calibration step's result in: wave 1, every slot pinned to the node the step's sealed result records for it
  (sweep.slot-nodes, sweep.calibration-run; the result pulled home first: `sglab results pull`);
- a wave whose result is in: the next wave with its leader carried (`sweep.carry-arm`); after a calibration step the
  leader is recomputed here from the wave's and the step's sealed results, net of the slot nodes (calibrated_wave),
  not taken from the Job's output;
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
from sglab.sweep.arms import (CALIBRATION_CONFIGMAP_KEY, CALIBRATION_RUN_KEY, CALIBRATION_WAVE, CARRY_KEY,
                              SLOT_NODES_KEY, WAVE_KEY, Wave, plan_wave, sweep_grid)

PULUMI_ENV = "SGLAB_PULUMI"  # the pulumi executable (default: `pulumi` on PATH)
FINISHED = ("promote", "reject", "inconclusive")


@dataclass
class Step:
    what: str
    changes: list[tuple[str, Any]] = field(default_factory=list)  # (key path under sglab:, value; None: remove)
    up: bool = True
    report: list[str] = field(default_factory=list)  # what it read to decide (the calibrated ranking)

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
        spec = stack.sweep
        stale = [(key, None) for key, value in ((SLOT_NODES_KEY, spec.slot_nodes),
                                                (CALIBRATION_RUN_KEY, spec.calibration_run),
                                                (CALIBRATION_CONFIGMAP_KEY, spec.calibration_configmap)) if value]
        if spec.calibration_rounds:
            return Step(f"start the sweep: calibrate the slot nodes (the baseline's config in all "
                        f"{spec.parallel_arms} slots, {spec.calibration_rounds} rounds beside the baseline per gated "
                        "level), then wave 1", [(WAVE_KEY, CALIBRATION_WAVE), (CARRY_KEY, None), *stale, *token])
        return Step("start the sweep: wave 1 (sweep.calibration-rounds 0: the slot nodes are not calibrated)",
                    [(WAVE_KEY, 1), (CARRY_KEY, None), *stale, *token])
    status = outputs.get("sweep_status")
    if outputs.get("sweep_wave") != wave.number or status in (None, PENDING, "invalid"):
        why = "not deployed yet" if outputs.get("sweep_wave") != wave.number else f"its result is {status}"
        return Step(f"resume wave {wave.number}/{wave.count} ({why}): pulumi up again", token)
    if wave.number == CALIBRATION_WAVE:
        run_id = str(outputs.get("sweep_run_id") or "")
        nodes, measured = slot_nodes(loaded, run_id)
        configmap = outputs.get("benchmark_result_configmap")  # a pointer only: the Job checks what it reads there
        changes = [(WAVE_KEY, 1), (CARRY_KEY, None), *[(f"{SLOT_NODES_KEY}[{i}]", n) for i, n in enumerate(nodes)],
                   (CALIBRATION_RUN_KEY, run_id),
                   *([(CALIBRATION_CONFIGMAP_KEY, str(configmap))] if isinstance(configmap, str) and configmap else [])]
        return Step(f"wave 1/{wave.count}, each slot pinned to its calibrated node ({', '.join(nodes)})", changes,
                    report=measured)
    leader = outputs.get("sweep_leader")
    report: list[str] = []
    if stack.sweep.calibration_run:
        leader, report = calibrated_wave(loaded, wave, str(outputs.get("sweep_run_id") or ""), leader)
    else:
        report = [f"not calibrated (no {CALIBRATION_RUN_KEY}): the Job's leader is carried as its race measured it, "
                  "each gain including its slot node's difference from the baseline's"]
    if wave.number < wave.count:
        carry = [(CARRY_KEY, leader)] if leader else [(CARRY_KEY, None)]
        what = f"wave {wave.number + 1}/{wave.count}" + (f", carrying wave {wave.number}'s leader {leader}"
                                                          if leader else f" (wave {wave.number} has no leader)")
        return Step(what, [(WAVE_KEY, wave.number + 1), *carry], report=report)
    if not leader:
        return Step(f"the last wave ({wave.number}/{wave.count}) has no leader: no arm beat the baseline by "
                    "policy.min-gain; nothing to confirm", up=False)
    return Step(f"the confirmation A/B of {leader} on fresh rounds, as the stack's candidate",
                confirmation_changes(loaded, leader), report=report)


# The calibration, read from sealed results only (pulled home by `sglab results pull`).

def _sealed(loaded: LoadedStack, run_id: str, what: str):
    """The sealed sweep result `run_id` of this stack, pulled home and verified; ConfigError with the pull to run."""
    from sglab.results.store import RESULT_FILE, results_root
    from sglab.sweep.run import verified_result

    where = results_root() / loaded.name / run_id
    if not run_id or not (where / RESULT_FILE).is_file():
        raise ConfigError(where / RESULT_FILE, None, f"{what} (run {run_id or '?'}) is not here: the slot nodes and "
                          "the calibrated race are read from its sealed result, never from the stack outputs",
                          f"sglab results pull --stack {loaded.name}, then the same --next again")
    result = verified_result(where, loaded.name)
    if result.kind != "sweep" or result.stack != loaded.name or result.run_id != run_id or not result.complete:
        raise ConfigError(where / RESULT_FILE, "run_id", f"is {'a complete' if result.complete else 'an incomplete'} "
                          f"{result.kind} run {result.run_id} of stack '{result.stack}', not {what}",
                          f"run the step again: sglab sweep --stack {loaded.name} --next --rerun")
    return result


def _round_nodes(result, arm: str) -> set[str | None]:
    return {r.node for level in result.levels for r in level.rounds if r.arm == arm and r.round_index >= 0
            and not r.warmup}


def slot_nodes(loaded: LoadedStack, run_id: str) -> tuple[list[str], list[str]]:
    """(the node each slot ran on in the calibration step, what the step measured): from its sealed rounds. A slot
    recorded on no node or on several (its pod moved mid-step) has no one offset: the step is refused."""
    from sglab.deploy.naming import slot_release_name
    from sglab.sweep.race import calibration_arm
    from sglab.sweep.run import BASELINE, calibration_block

    result = _sealed(loaded, run_id, "the calibration step's result")
    nodes = []
    for i in range(1, loaded.config.sweep.parallel_arms + 1):
        arm = calibration_arm(slot_release_name(i))
        found = _round_nodes(result, arm)
        if len(found) != 1 or None in found:
            raise ConfigError(loaded.path, SLOT_NODES_KEY, f"the calibration step {run_id} recorded {arm} on "
                              f"{sorted(str(n) for n in found) or 'no node'}, not on one node",
                              f"run the step again: sglab sweep --stack {loaded.name} --next --rerun")
        nodes.append(str(next(iter(found))))
    base = _round_nodes(result, BASELINE)
    report = [f"calibration step {run_id}: the baseline on {', '.join(sorted(str(n) for n in base))}"]
    for level in result.levels:
        offsets, node = calibration_block(level, loaded.config.policy.metric, loaded.config.policy)
        report += [f"  c={level.concurrency}: {o.describe(str(node))}" for o in offsets]
    return nodes, report


def calibrated_wave(loaded: LoadedStack, wave: Wave, run_id: str, job_leader: str | None
                    ) -> tuple[str | None, list[str]]:
    """The wave's leader recomputed from its sealed rounds after the calibration step's sealed block
    (sglab.sweep.run.with_calibration and level_race: the sweep's one race rule), gated level by gated level as the
    Job's sweep runs them; and the ranking that says so. The Job's own race is not corrected (its allocation of
    rounds used uncorrected values; the replay is still valid: every round was chosen from earlier rounds only)."""
    from sglab.analysis.operating_point import effective_policy
    from sglab.sweep.outputs import _node_lines
    from sglab.sweep.run import level_race, with_calibration

    stack = loaded.config
    calibration = _sealed(loaded, stack.sweep.calibration_run, "the calibration step's result")
    result = _sealed(loaded, run_id, f"wave {wave.number}'s result")
    names = [a.name for a in sweep_grid(stack, loaded.name).arms]
    contenders = sorted((a.arm.name for a in wave.arms), key=names.index)  # the Job sweeps them in the grid's order
    gated = effective_policy(stack.policy).levels
    blocks = {level.concurrency: level for level in calibration.levels}
    leader: str | None = None
    report = [f"wave {wave.number}: the race recomputed net of the slot nodes (calibration step "
              f"{stack.sweep.calibration_run}, wave result {run_id}, both sealed)"]
    for level in result.levels:
        if level.concurrency not in gated or not contenders:
            continue
        block = blocks.get(level.concurrency)
        merged, notes = with_calibration(block, level) if block is not None else (
            level, [f"the calibration step did not measure c={level.concurrency}: compared uncorrected"])
        rec, _ = level_race(merged, contenders, stack.policy.metric, stack.policy, stack.sweep.max_rounds)
        report += [f"c={level.concurrency}: {rec.outcome}, pick {rec.winner or rec.leader}"
                   + ("" if rec.outcome != "continue" else " (the calibrated race was not decided by the wave's "
                                                          "rounds: its pick so far)"),
                   *[f"  note: {n}" for n in notes], *_node_lines(rec.model_dump(mode="json"))]
        report += [f"    {a.rank} {a.arm} on {a.node}: {a.status}, gain "
                   + ("-" if a.estimate is None else f"{a.estimate:+.1%}") for a in rec.arms]
        if rec.outcome == "no-winner":
            return None, report + ["no arm beat the baseline by policy.min-gain net of the slot nodes"]
        leader = rec.winner or rec.leader
        if rec.outcome != "continue":
            contenders = [a for a in contenders if a in rec.survivors]
    if leader != job_leader:
        report.append(f"the Job's race (not calibrated) led with {job_leader or 'none'}; the calibrated pick "
                      f"{leader or 'none'} is carried")
    return leader, report


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
    for line in step.report:
        print(f"  {line}")
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
