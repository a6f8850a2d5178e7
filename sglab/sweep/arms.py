"""A sweep stack on a cluster: which arms of the grid `pulumi up` deploys (one wave), into which slot.

With `sglab:sweep.wave` set, the program deploys the baseline and one wave of the expanded grid (its
stable order, sglab/sweep/grid.py) instead of the stack's own candidate; the benchmark Job then runs
`sglab sweep` against exactly those Services. Wave 1 is the first `parallel-arms` arms; every later wave
is the next `parallel-arms - 1` arms plus the previous wave's leader (`sweep.carry-arm`), so each wave is
a same-run sweep against the one baseline and the final leader has been measured against every later
wave's arms. The leader comes from stack config, not from reading the previous wave's ConfigMap inside
the program: what a wave deploys is then a function of the stack alone (a preview shows it exactly, the
Job's comparison hash is fixed before anything runs), and the program prints the command that sets it.

Arms run in fixed slots, not under their own names: `sglang-slot-1..parallel-arms` (naming.slot_release_name),
fresh arms from slot 1, the carried leader in the last slot, which is also where the confirmation A/B's
candidate runs. So a new wave, and the switch to the confirmation, replace each slot's server in place (the
Deployment's Recreate strategy stops the old pod before the new one starts) and never need more GPUs than the
wave itself; the capacity preflight (sglab/deploy/capacity.py) checks that against placement.max-nodes.

The grid is expanded from the validated config as the benchmark Job's pod loads it (the stack file
the Job mounts), so both sides compute the same arms and config hashes.

The benchmark Job's sweep side (sglab/deploy/benchmark_job.py declares the Job itself): its `sglab sweep`
command against a wave's Services, the wave's stack outputs read back from the result it stored, and the
next step it prints.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from sglab.config.arms import baseline_arm
from sglab.config.loader import LoadedStack, load_mapping
from sglab.config.stack import StackConfig
from sglab.core.errors import ConfigError
from sglab.core.paths import stack_path
from sglab.deploy.naming import (PENDING, RESULT_CONFIGMAP_FLAG, SECRET_KEYS, arm_release_name, release_host,
                                 service_url, slot_release_name)
from sglab.results.sink import read_summary
from sglab.sweep.grid import Grid, SweepArm, expand, quick_subset

WAVE_KEY = "sweep.wave"
CARRY_KEY = "sweep.carry-arm"
SLOT_NODES_KEY = "sweep.slot-nodes"
CALIBRATION_RUN_KEY = "sweep.calibration-run"
CALIBRATION_CONFIGMAP_KEY = "sweep.calibration-configmap"
CALIBRATION_WAVE = 0  # sweep.wave 0: the calibration step, the baseline's config in every slot
HOSTNAME_LABEL = "kubernetes.io/hostname"
ARM_URL_FLAG = "--arm-url"  # the Job's `sglab sweep` flag for one arm's URL
SECRET_STANDIN = {"secure": "<secret>"}  # the arms carry secret env by name only; the value never matters here


def stack_document(stack: StackConfig) -> dict:
    """The validated config as plain data (secrets as stand-ins): what the Job's stack file holds."""
    dumped = stack.model_dump(mode="json", by_alias=True)
    return {k: (SECRET_STANDIN if k in SECRET_KEYS and v is not None else v)
            for k, v in dumped.items() if not (k in SECRET_KEYS and v is None)}


@lru_cache(maxsize=8)
def _grid(document_json: str, stack_name: str) -> Grid:
    loaded: LoadedStack = load_mapping(stack_name, stack_path(stack_name), json.loads(document_json))
    grid = expand(loaded)
    if loaded.config.benchmark_job.quick and loaded.config.sweep.quick_arms:
        grid = quick_subset(grid, loaded.config.sweep)  # what `sglab sweep --quick` in the Job sweeps
    return grid


def sweep_grid(stack: StackConfig, stack_name: str) -> Grid:
    return _grid(json.dumps(stack_document(stack)), stack_name)  # key order kept: it is the grid's order


def wave_slices(arms: int, parallel: int) -> list[tuple[int, int]]:
    """(start, stop) of each wave's new arms: `parallel` at first, then `parallel - 1` beside the carried leader
    (with parallel-arms 1 every wave is one new arm and nothing is carried)."""
    if arms <= 0:
        return []
    step = parallel - 1 if parallel > 1 else 1
    slices = [(0, min(parallel, arms))]
    while slices[-1][1] < arms:
        start = slices[-1][1]
        slices.append((start, min(start + step, arms)))
    return slices


def arm_waves(stack: StackConfig, stack_name: str) -> dict[str, int]:
    """arm name -> the wave that deploys it new on a cluster (`sglab sweep --list`)."""
    grid = sweep_grid(stack, stack_name)
    slices = wave_slices(len(grid.arms), stack.sweep.parallel_arms if stack.sweep else 1)
    return {grid.arms[i].name: w for w, (start, stop) in enumerate(slices, 1) for i in range(start, stop)}


@dataclass(frozen=True)
class WaveArm:
    arm: SweepArm
    release: str  # Helm release and Service name
    carried: bool = False  # the previous wave's leader


@dataclass(frozen=True)
class Wave:
    number: int
    count: int
    arms: list[WaveArm]
    notes: list[str] = field(default_factory=list)  # what the program warns about
    calibration_run: str | None = None  # the calibration step whose sealed rounds correct this wave (sweep --next)

    @property
    def carried(self) -> WaveArm | None:
        return next((a for a in self.arms if a.carried), None)


def slot_count(stack: StackConfig) -> int:
    """The candidate slots of a sweep stack: parallel-arms (a wave never deploys more)."""
    return stack.sweep.parallel_arms if stack.sweep is not None else 1


def leader_slot(stack: StackConfig) -> str:
    """The last slot: where a wave's carried leader runs and the confirmation A/B's candidate (the stack's own
    candidate), so a leader that stays the leader keeps its server from wave to wave."""
    return arm_release_name(stack, "candidate")


def _refuse(stack_name: str, key: str, problem: str, fix: str) -> ConfigError:
    return ConfigError(stack_path(stack_name), key, problem, fix)


def plan_wave(stack: StackConfig, stack_name: str) -> Wave | None:
    """The wave the program deploys; None when the stack deploys its own A/B pair (no sweep.wave). Bad wave
    or carry-arm values raise ConfigError naming the key and the number of waves."""
    spec = stack.sweep
    if spec is None or spec.wave is None:
        return None
    if stack.locust.enabled:
        raise _refuse(stack_name, "locust.enabled", "in-cluster Locust drives the baseline/candidate pair, which a "
                      "sweep wave does not deploy", f"set locust.enabled false, or unset {WAVE_KEY}")
    grid = sweep_grid(stack, stack_name)
    if not grid.arms:
        raise _refuse(stack_name, "sweep", "every combination of the grid is skipped, so there is nothing to deploy",
                      "run `sglab sweep --stack S --list` to see why")
    slices = wave_slices(len(grid.arms), spec.parallel_arms)
    count = len(slices)
    if spec.wave > count:
        raise _refuse(stack_name, WAVE_KEY, f"is {spec.wave}, but the grid's {len(grid.arms)} arms at "
                      f"parallel-arms {spec.parallel_arms} make {count} wave{'s' if count > 1 else ''}",
                      f"set {WAVE_KEY} to 1..{count}")
    if spec.slot_nodes and len(spec.slot_nodes) != spec.parallel_arms:
        raise _refuse(stack_name, SLOT_NODES_KEY, f"names {len(spec.slot_nodes)} nodes, but the stack has "
                      f"{spec.parallel_arms} slots (parallel-arms)", f"let `sglab sweep --stack {stack_name} --next` "
                      f"write it from the calibration step, or remove it (pulumi config rm --path "
                      f"sglab:{SLOT_NODES_KEY})")
    if spec.slot_nodes and stack.placement.nodes != 1:
        raise _refuse(stack_name, SLOT_NODES_KEY, f"pins each slot to one node, but a server holds "
                      f"{stack.placement.nodes} nodes (placement.nodes)", f"remove {SLOT_NODES_KEY}")
    if spec.wave == CALIBRATION_WAVE:
        return _calibration_wave(stack, stack_name, grid, count)
    start, stop = slices[spec.wave - 1]
    fresh = grid.arms[start:stop]
    arms = [WaveArm(a, slot_release_name(i)) for i, a in enumerate(fresh, 1)]
    notes: list[str] = []
    if spec.carry_arm is not None:
        carried = _carried(stack_name, spec, grid, start)
        arms.append(WaveArm(carried, leader_slot(stack), carried=True))
    elif spec.wave > 1 and spec.parallel_arms > 1:
        notes.append(f"{WAVE_KEY} {spec.wave} without {CARRY_KEY}: this wave's sweep does not measure wave "
                     f"{spec.wave - 1}'s leader, so its ranking cannot be compared with it; set {CARRY_KEY} to "
                     f"wave {spec.wave - 1}'s sweep_leader output")
    releases = [a.release for a in arms]
    if len(set(releases)) != len(releases):  # fresh arms fill slots 1.., the leader the last: never two in one
        raise _refuse(stack_name, "sweep", f"two arms map to one slot: {releases}", "report this as a bug")
    return Wave(spec.wave, count, arms, notes, spec.calibration_run)


def _calibration_wave(stack: StackConfig, stack_name: str, grid: Grid, count: int) -> Wave:
    """The calibration step (sweep.wave 0): every slot serves the baseline's config, as `baseline@<slot>` (a
    candidate-role server, so nothing of the baseline's selects it), beside the baseline; its Job measures each slot's
    node against the baseline's (sglab.sweep.run.cluster_layout), and `sweep --next` pins later waves' slots there."""
    from sglab.sweep.race import calibration_arm

    spec = stack.sweep
    if not spec.calibration_rounds:
        raise _refuse(stack_name, WAVE_KEY, "is 0 (the calibration step), but sweep.calibration-rounds is 0",
                      "set sweep.calibration-rounds (default 8), or start at sweep.wave 1 (uncalibrated)")
    if spec.carry_arm is not None:
        raise _refuse(stack_name, CARRY_KEY, f"is {spec.carry_arm!r}, but the calibration step carries no arm",
                      f"unset {CARRY_KEY}")
    arms = []
    for i in range(1, slot_count(stack) + 1):
        name = calibration_arm(slot_release_name(i))
        server = replace(grid.baseline, name=name, role="candidate")
        arms.append(WaveArm(SweepArm(name=name, num_steps=0, eagle_topk=0, num_draft_tokens=0, adaptive=False,
                                     variant="default", nccl={}, arm=server), slot_release_name(i)))
    return Wave(CALIBRATION_WAVE, count, arms)


def slot_node(stack: StackConfig, release: str) -> str | None:
    """The node a wave pins slot `release` to (sweep.slot-nodes, from the calibration step); None: unpinned (no
    calibration, the calibration step itself, or the confirmation, whose crossover moves the arms itself)."""
    spec = stack.sweep
    if spec is None or not spec.wave or not spec.slot_nodes:
        return None
    slots = {slot_release_name(i): node for i, node in enumerate(spec.slot_nodes, 1)}
    return slots.get(release)


def calibration_read_rules(stack: StackConfig, wave: Wave | None) -> list[dict[str, Any]]:
    """A calibrated wave's Job reads the calibration step's sealed block (sglab.sweep.run.read_calibration): `get` on
    exactly that step's result ConfigMaps (index and parts), by name; nothing for any other Job."""
    from sglab.results.sink import part_names

    spec = stack.sweep
    if wave is None or not wave.number or spec is None or not spec.calibration_configmap or not spec.calibration_run:
        return []
    return [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": part_names(spec.calibration_configmap),
             "verbs": ["get"]}]


def _carried(stack_name: str, spec, grid: Grid, start: int) -> SweepArm:
    if spec.wave == 1:
        raise _refuse(stack_name, CARRY_KEY, f"is {spec.carry_arm!r}, but wave 1 has no previous wave",
                      f"unset {CARRY_KEY} for wave 1")
    if spec.parallel_arms < 2:
        raise _refuse(stack_name, CARRY_KEY, "needs parallel-arms 2 or more (the leader takes one of the wave's "
                      "nodes)", f"unset {CARRY_KEY}, or raise sweep.parallel-arms")
    earlier = [a.name for a in grid.arms[:start]]
    if spec.carry_arm not in earlier:
        where = "an arm of this or a later wave" if grid.arm(spec.carry_arm) else "not an arm of the grid"
        raise _refuse(stack_name, CARRY_KEY, f"is {spec.carry_arm!r}, {where}; it must be an arm of an earlier "
                      f"wave (the previous wave's sweep_leader output)",
                      f"set {CARRY_KEY} to one of the earlier waves' arms, e.g. {earlier[-1]!r}")
    return grid.arm(spec.carry_arm)


# The benchmark Job's sweep side.

def sweep_command(stack: StackConfig, stack_name: str, result_configmap: str, wave: Wave) -> list[str]:
    """`sglab sweep` against the baseline and this wave's arm Services; no confirmation (it needs the winner's
    NCCL variant on both arms: a deployment of its own, docs/sweep.md)."""
    base = baseline_arm(stack)
    command = ["sglab", "sweep", "--stack", stack_name, "--target", "in-cluster",
               "--baseline-url", service_url(stack.namespace, "baseline", base.port)]
    for a in wave.arms:
        command += [ARM_URL_FLAG, f"{a.arm.name}=http://{release_host(stack.namespace, a.release)}:{a.arm.arm.port}"]
    command += [RESULT_CONFIGMAP_FLAG, result_configmap, "--no-confirm", "--no-progress"]
    if stack.benchmark_job.quick:
        command.append("--quick")
    return command


def summarize_sweep(summary_json: str | None) -> dict[str, Any]:
    """A sweep wave's outputs from the summary its Job wrote (`sglab sweep --result-configmap`: the result's
    verdict is sglab.sweep.outputs.sweep_verdict): status, ranking, the leader and its config hash."""
    empty = {"status": PENDING, "sentence": "", "run_id": "", "ranking": [], "leader": None,
             "leader_config_hash": None, "leader_cleared_min": False}
    summary = read_summary(summary_json)
    if summary is None:
        return empty
    if isinstance(summary, str):
        return {**empty, "status": "invalid", "sentence": summary}
    verdict = summary.get("verdict")
    if not isinstance(verdict, dict) or summary.get("kind") != "sweep":
        return {**empty, "status": "invalid", "sentence": "the result ConfigMap holds no sglab sweep result summary"}
    ranking = [row for row in verdict.get("ranking") or [] if isinstance(row, dict)]
    return {"status": str(verdict.get("outcome") or PENDING), "sentence": str(verdict.get("sentence") or ""),
            "run_id": summary["run_id"], "ranking": ranking, "leader": verdict.get("winner"),
            "leader_config_hash": verdict.get("winner_config_hash"),
            "leader_cleared_min": bool(verdict.get("winner_cleared_min"))}


def next_command(stack_name: str) -> str:
    return f"sglab sweep --stack {stack_name} --next"


def next_step(wave: Wave, sweep: dict[str, Any], stack_name: str) -> str:
    """What to run after this wave: the one command (sglab/sweep/next_wave.py), and what it runs: the next wave
    with its leader carried, or the confirmation A/B."""
    leader = sweep.get("leader")
    if sweep.get("status") in (PENDING, "invalid"):
        return (f"wait for the benchmark Job's sweep result; if the Job failed or pulumi up was interrupted, "
                f"{next_command(stack_name)} resumes this wave")
    if wave.number == CALIBRATION_WAVE:
        return (f"sglab results pull --stack {stack_name} && {next_command(stack_name)}  (runs: pulumi config set "
                f"--path sglab:{SLOT_NODES_KEY} from the calibration's sealed result, sglab:sweep.wave 1 && pulumi up)")
    if wave.calibration_run and wave.number < wave.count:
        return (f"sglab results pull --stack {stack_name} && {next_command(stack_name)}  (recomputes wave "
                f"{wave.number}'s leader net of the slot nodes from its and the calibration step's sealed results, "
                f"then runs wave {wave.number + 1} carrying it)")
    if wave.calibration_run:
        return (f"sglab results pull --stack {stack_name} && {next_command(stack_name)}  (last wave: recomputes its "
                "leader net of the slot nodes, makes it the stack's candidate, unsets sglab:sweep.wave and runs pulumi "
                "up: the confirmation A/B on fresh rounds; then sglab results pull and sglab promote)")
    if wave.number < wave.count:
        carry = (f" && pulumi config set --path sglab:sweep.carry-arm {leader}" if leader
                 else " && pulumi config rm --path sglab:sweep.carry-arm")
        return (f"{next_command(stack_name)}  (runs: pulumi config set --path sglab:sweep.wave {wave.number + 1}"
                f"{carry} && pulumi up)")
    if not leader:
        return "last wave: no leader (no arm beat the baseline by policy.min-gain); nothing to confirm"
    return (f"{next_command(stack_name)}  (last wave: makes {leader} the stack's candidate, unsets sglab:sweep.wave "
            "and runs pulumi up: the confirmation A/B on fresh rounds; then sglab results pull and sglab promote)")
