"""The sweep run: every candidate against one baseline, interleaved and paired by round, as a best-arm race.

One `sglab sim` per arm (or the given URLs: on a cluster, the wave's slots). At a gated level
(policy.levels) the first min-rounds rounds run the baseline and every arm still in the sweep; after
that each round runs the pick and its strongest challengers (and the baseline while the pick is not
yet estimated to clear min-gain): sglab/sweep/race.py decides, replayed after every round from
all the level's rounds (race_record). Eliminated arms get no further rounds; the
level ends when one arm is left, the estimated P(correct selection) reaches policy.confidence, none is
left, or at sweep.max-rounds. A later gated level starts over with the arms not eliminated; ungated
levels run the pick and its challengers for load.ungated-rounds (for the Pareto plot). The pick then
goes to a confirmation A/B (sglab/sweep/confirm.py): the sweep's own rounds are never its evidence.

On simulators with two or more sim.nodes the baseline runs on the first node and the arms on the others (the
slots); each gated level starts with a calibration block (sweep.calibration-rounds rounds of the baseline config on
every slot node beside the baseline), and its race compares the arms net of their node's offset
(sglab/sweep/race.py).

The sweep's saved state (sweep.json beside its result.json, `SweepState`) is written after every round. The
measurements themselves are the run's result.json (kind `sweep`, sealed); sweep.json is not sealed, so nothing
in it decides anything on a resume: the arms are rebuilt from the grid by name, the race records, the pick and
the confirmation are recomputed from the sealed results (load_resume). It is read through the one bounded reader
into a typed model whose counts and rounds are bounded by the config's own limits, so a damaged or hostile file
is one ConfigError (file, key, fix), never a traceback or an allocation. The race records
(sglab.schema.result.RaceRecord, one per gated level) are kept so the outputs and a reader see every look without
rerunning the statistics.
"""

from __future__ import annotations

import math
import sys
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from sglab import metrics
from sglab.analysis.operating_point import effective_policy, slo_targets
from sglab.analysis.samples import per_round
from sglab.config.loader import LoadedStack
from sglab.config.loadplan import MAX_CONCURRENCY, MAX_LEVELS, MAX_ROUNDS, LoadPlan
from sglab.config.sweep import SweepSpec
from sglab.core.errors import ConfigError
from sglab.core.untrusted import printable
from sglab.core.untrusted_json import read_json
from sglab.results.store import RESULT_LIMITS, create_run_dir, new_run_id, write_json_atomic
from sglab.schema.records import PlainText, error_key, error_message
from sglab.schema.result import BoundedName as Name
from sglab.schema.result import BoundedText as Text
from sglab.schema.result import LevelResult, NodeOffset, RaceRecord, RunResult, SweepArmRecord
from sglab.schema.verdict import SweepStatus
from sglab.sweep.race import PREFIX, calibrated_node, calibration_arm, node_offsets, race_record
from sglab.sweep.grid import Grid

# The saved state.

STATE_FILE = "sweep.json"
STATE_LIMITS = replace(RESULT_LIMITS, what="a sweep state",
                       fix="give a sweep.json sglab wrote")
BASELINE = "baseline"  # the arm every candidate is compared with
MAX_ARMS = 4096  # arms of one sweep (a grid is a product of short lists; no sweep runs this many)


class _Strict(PlainText):
    model_config = ConfigDict(extra="forbid")


class SkippedRecord(_Strict):
    name: Name
    reason: Text


class ConfirmationRecord(_Strict):
    run_id: Name
    path: Text
    outcome: Name | None = None
    complete: bool
    sentence: Text | None = None


def _typed(model: type[BaseModel]):
    """Validate a saved dict as `model` and keep it a dict (the outputs read it as one)."""
    return AfterValidator(lambda value: model.model_validate(value).model_dump(mode="json", exclude_unset=True))


class SweepState(PlainText):
    model_config = ConfigDict(extra="forbid")

    run_id: Name
    stack: Name
    quick: bool = False
    metric: Name
    gated_levels: Annotated[list[Annotated[int, Field(ge=1, le=MAX_CONCURRENCY)]], Field(max_length=MAX_LEVELS)]
    max_rounds: Annotated[int, Field(ge=1, le=MAX_ROUNDS)]
    arms: Annotated[list[Annotated[dict[str, Any], _typed(SweepArmRecord)]], Field(max_length=MAX_ARMS)]
    skipped: Annotated[list[Annotated[dict[str, str], _typed(SkippedRecord)]],
                       Field(max_length=MAX_ARMS * 4)] = Field(default_factory=list)
    notes: Annotated[list[Text], Field(max_length=256)] = Field(default_factory=list)
    baseline_hash: Name
    # level (str) -> RaceRecord; recomputed from the result on every resume
    records: Annotated[dict[Name, dict], Field(max_length=MAX_LEVELS)] = Field(default_factory=dict)
    contenders: Annotated[list[Name], Field(max_length=MAX_ARMS)] = Field(default_factory=list)
    finalists: Annotated[list[Name], Field(max_length=MAX_ARMS)] = Field(default_factory=list)
    status: SweepStatus = "running"
    winner: Name | None = None
    winner_cleared_min: bool = False
    confirmation: Annotated[dict[str, Any], _typed(ConfirmationRecord)] | None = None
    plan: dict[str, Any] = Field(default_factory=dict)  # the load plan the sweep ran (a LoadPlan's dump)
    sim_env: Annotated[dict[Name, Text], Field(max_length=256)] = Field(default_factory=dict)
    target: Literal["sim", "urls", "in-cluster"] = "sim"
    # Where the simulators run (arm -> node of sim.nodes, the calibration arms included) and the calibration
    # block's length: what to start and run, never what decides (the result's rounds record the nodes).
    arm_nodes: Annotated[dict[Name, Name], Field(max_length=MAX_ARMS + 16)] = Field(default_factory=dict)
    calibration_rounds: Annotated[int, Field(ge=0, le=MAX_ROUNDS)] = 0
    # A cluster sweep's calibration step (no arms): per gated level, the baseline's node and each slot node's offset
    # (NodeOffset); for the outputs only: `sweep --next` recomputes them from the sealed result.
    calibration: Annotated[dict[Name, dict[str, Any]], Field(max_length=MAX_LEVELS)] = Field(default_factory=dict)

    def arm(self, name: str) -> dict[str, Any] | None:
        return next((a for a in self.arms if a["name"] == name), None)

    def save(self, run_dir: Path) -> Path:
        return write_json_atomic(run_dir / STATE_FILE, self.model_dump(mode="json"), overwrite=True)


def load_state(run_dir: Path) -> SweepState:
    """The saved state, read by the bounded reader; ConfigError (file, key, fix) when it is not one."""
    path = run_dir / STATE_FILE
    if not path.exists():
        raise ConfigError(path, None, f"does not exist: {run_dir} is not a sweep run",
                          "give a sweep's run id or directory (results/<stack>/<run-id>/)")
    try:
        state = SweepState.model_validate(read_json(path, STATE_LIMITS))
        LoadPlan.model_validate(state.plan)  # bounded by the load plan's own limits (rounds, levels, seconds)
        return state
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        where = [] if exc.title == "SweepState" else ["plan"]
        raise ConfigError(path, ".".join([*where, error_key(err)])[:200], error_message(err)[:300],
                          "the file is damaged or not a sweep's state; start the sweep again") from None


# The run.

def say(text: str) -> None:
    """Progress, one line per round, seen at once also when stdout is a file or a pipe."""
    print(printable(text, limit=None), flush=True)


def complete_rounds(level: LevelResult) -> int:
    """Rounds from the first on whose every segment completed (a round cut short is measured again)."""
    by_round: dict[int, bool] = {}
    for r in level.rounds:
        if r.round_index >= 0 and not r.warmup:
            by_round[r.round_index] = by_round.get(r.round_index, True) and r.complete
    n = 0
    while by_round.get(n):
        n += 1
    return n


def round_values(level: LevelResult, metric: str, arms: list[str], policy=None) -> np.ndarray:
    """(rounds x (baseline, *arms)) oriented log values of the gate metric: log(value), negated where lower is
    better, NaN where an arm did not run (or gave no value). A metric that depends on the SLO (goodput) is
    recomputed with the policy's SLO, as the verdict does."""
    declared = metrics.get(metric)
    table = per_round(level, metric, slo_targets(effective_policy(policy)) if policy is not None else None)
    sign = 1.0 if declared.direction == "higher" else -1.0
    names = [BASELINE, *arms]
    out = np.full((complete_rounds(level), len(names)), np.nan)
    for i in range(out.shape[0]):
        for j, arm in enumerate(names):
            value = table.get(i, {}).get(arm)
            if value is not None and value > 0 and math.isfinite(value):
                out[i, j] = sign * math.log(value)
    return out


def calibration_block(measured: LevelResult, metric: str, policy) -> tuple[list[NodeOffset], str | None]:
    """(each slot node's offset, the baseline's node) of a level that is only a calibration block (a cluster sweep's
    calibration step): the same computation as level_race's block."""
    return _level(measured, [], metric, policy, 0)  # type: ignore[return-value]


def level_race(measured: LevelResult, arms: list[str], metric: str, policy, max_rounds: int
               ) -> tuple[RaceRecord, int]:
    """See _level."""
    return _level(measured, arms, metric, policy, max_rounds)  # type: ignore[return-value]


def _level(measured: LevelResult, arms: list[str], metric: str, policy, max_rounds: int):
    """(the race of one gated level over all its rounds, the rounds of its calibration block): the leading rounds that
    ran no arm of `arms` are the calibration block (the baseline config on every slot node, `baseline@<node>`), the
    rest the race; the nodes are the ones the rounds record. The one race rule of a sweep on simulators, of a wave's
    Job and of `sweep --next`'s calibrated replay of a wave (with_calibration)."""
    calibrating = [a for a in dict.fromkeys(r.arm for r in measured.rounds) if a.startswith(PREFIX)]
    values = round_values(measured, metric, [*calibrating, *arms], policy)
    ran: dict[int, set[str]] = {}
    node_of: dict[str, set[str | None]] = {}
    for r in measured.rounds:
        if r.round_index >= 0 and not r.warmup:
            ran.setdefault(r.round_index, set()).add(r.arm)
            node_of.setdefault(r.arm, set()).add(r.node)
    block = 0
    while block < len(values) and not ran.get(block, set()) & set(arms):
        block += 1

    def node(arm: str) -> str | None:  # an arm recorded on two nodes has no one offset: never corrected
        found = node_of.get(arm, set())
        return next(iter(found)) if len(found) == 1 else ("several nodes" if found else None)

    c = len(calibrating)
    offsets = node_offsets(values[:block, : 1 + c], [node(a) or a for a in calibrating],
                           confidence=policy.confidence) if block and c else []
    if not arms:
        return offsets, node(BASELINE)
    race_values = np.concatenate([values[block:, :1], values[block:, 1 + c:]], axis=1)
    rec = race_record(arms, race_values, min_gain=policy.min_gain, confidence=policy.confidence,
                      min_rounds=policy.min_rounds, max_rounds=max_rounds,
                      arm_nodes=[node(a) for a in arms], baseline_node=node(BASELINE),
                      calibration=offsets, calibration_rounds=block)
    return rec, block


def _nodes(level: LevelResult, arms: set[str] | None = None) -> dict[str, set[str | None]]:
    out: dict[str, set[str | None]] = {}
    for r in level.rounds:
        if r.round_index >= 0 and not r.warmup and (arms is None or r.arm in arms):
            out.setdefault(r.arm, set()).add(r.node)
    return out


def with_calibration(calibration: LevelResult, wave: LevelResult) -> tuple[LevelResult, list[str]]:
    """A cluster wave's rounds after the calibration step's block (its own run, before wave 1: the baseline config
    in every slot beside the baseline), renumbered, so level_race takes the block's offsets out of the wave's race;
    both come from sealed results. (the wave as it is, why) where the offsets do not apply: the baseline ran on
    another node than in the calibration step. An arm on a node the step did not measure is named (its bounds stay
    unbounded: level_race never decides on it)."""
    block = complete_rounds(calibration)
    kept = [r for r in calibration.rounds if 0 <= r.round_index < block and not r.warmup
            and (r.arm == BASELINE or r.arm.startswith(PREFIX))]
    cal_nodes, wave_nodes = _nodes(calibration), _nodes(wave)
    base_then, base_now = cal_nodes.get(BASELINE, set()), wave_nodes.get(BASELINE, set())
    if base_then != base_now:
        def shown(nodes: set[str | None]) -> str:
            return ", ".join(sorted(str(n) for n in nodes)) or "no node"
        return wave, [f"the baseline ran on {shown(base_now)} in this wave and on {shown(base_then)} in the "
                      "calibration step: the slot nodes' offsets are against another node, so this wave is compared "
                      "uncorrected"]
    measured = {n for arm, nodes in cal_nodes.items() if arm.startswith(PREFIX) for n in nodes} | base_then
    notes = [f"{arm} ran on {', '.join(sorted(str(n) for n in nodes))}, which the calibration step did not measure: "
             "its interval against the baseline and the other arms stays unbounded (never decided on)"
             for arm, nodes in wave_nodes.items() if arm != BASELINE and not nodes <= measured]
    shifted = [r.model_copy(update={"round_index": r.round_index + block}) for r in wave.rounds if r.round_index >= 0]
    return wave.model_copy(update={"rounds": [*kept, *shifted]}), notes


def read_calibration(configmap: str, run_id: str, stack: str, *, namespace: str | None = None, core_api: Any = None
                     ) -> tuple[dict[int, LevelResult], list[str]]:
    """In a wave's Job: (gated level -> the calibration step's block, why not) from the step's result ConfigMaps
    (`get` by name, the wave's Role), its seal verified and its identity checked (a complete sweep result of this
    stack, run `run_id`, which `sweep --next` took from the verified copy at home). Anything else leaves the wave's
    race uncorrected, said in one line (and `sweep --next` still recomputes it from the sealed results at home)."""
    from sglab.results import integrity
    from sglab.results.pull import read_document
    from sglab.results.sink import current_namespace, part_names, parts_count
    from sglab.results.store import parse_result

    def why(problem: str) -> tuple[dict[int, LevelResult], list[str]]:
        return {}, [f"the calibration step's result {configmap}: {problem}; this wave's race runs uncorrected "
                    "(sglab sweep --next recomputes it net of the slot nodes from the sealed results)"]

    try:
        if core_api is None:
            from kubernetes import client, config

            try:
                config.load_incluster_config()
            except config.ConfigException:
                config.load_kube_config()
            core_api = client.CoreV1Api()
        namespace = namespace or current_namespace()
        index = core_api.read_namespaced_config_map(configmap, namespace)
        count = parts_count(index.metadata.annotations)
        parts = [index, *(core_api.read_namespaced_config_map(name, namespace)
                          for name in part_names(configmap, max(count, 1))[1:])]
    except Exception as exc:  # gone (pulled and pruned), forbidden, unreachable
        return why(f"cannot be read ({type(exc).__name__}: {printable(exc)[:200]})")
    document, problem = read_document(parts)
    if document is None:
        return why(problem or "it holds no result yet")
    try:
        result = parse_result(document, configmap)
    except ConfigError as exc:
        return why(str(exc)[:300])
    problem = integrity.verify(result)
    if problem is not None:
        return why(problem)
    if result.kind != "sweep" or result.stack != stack or result.run_id != run_id or not result.complete:
        return why(f"is run {result.run_id} ({result.kind}, stack {result.stack}, "
                   f"{'complete' if result.complete else 'incomplete'}), not the complete calibration run {run_id}")
    return {level.concurrency: level for level in result.levels}, []


class SweepController:
    """Which arms run each round, from the race's record; saves the state after every round."""

    def __init__(self, state: SweepState, plan: LoadPlan, policy, run_dir: Path, *, echo=say) -> None:
        self.state = state
        self.plan = plan
        self.policy = policy
        self.run_dir = run_dir
        self.echo = echo
        self.ungated_rounds = plan.ungated_rounds or plan.rounds
        # A cluster wave's calibration: per gated level, the calibration step's block, read from its sealed result
        # (read_calibration); every look of the race is then net of the slot nodes (with_calibration).
        self.block: dict[int, LevelResult] = {}

    def gated(self, level: int) -> bool:
        return level in self.state.gated_levels

    @property
    def calibration_arms(self) -> list[str]:
        return [arm for arm in self.state.arm_nodes if arm.startswith(PREFIX)]

    @property
    def calibration_rounds(self) -> int:
        """Rounds of each gated level's calibration block (0: none)."""
        return self.state.calibration_rounds if self.calibration_arms else 0

    def rounds_at(self, level: int) -> int:
        if self.gated(level):
            return self.calibration_rounds + self.state.max_rounds
        return self.ungated_rounds

    def record(self, level: int) -> RaceRecord | None:
        raw = self.state.records.get(str(level))
        return RaceRecord.model_validate(raw) if raw else None

    def racing(self, level: int) -> list[str]:
        """The next round of a gated level (the baseline included where it runs): all arms still in it at first."""
        rec = self.record(level)
        if rec is None:
            return [BASELINE, *self.state.contenders]
        return rec.next_round if rec.outcome == "continue" else []

    def warmup_arms(self, level: int) -> list[str]:
        """Every arm a level may run (warmed up before its first round, also after a resume)."""
        if self.gated(level):
            return [BASELINE, *self.calibration_arms, *self.state.contenders]
        return [BASELINE, *(self.state.finalists or self.state.contenders)]

    def arms_for_round(self, level: int, round_index: int) -> list[str]:
        if self.state.status == "no-winner" or round_index >= self.rounds_at(level):
            return []
        if self.gated(level) and round_index < self.calibration_rounds:
            return [BASELINE, *self.calibration_arms]
        if self.gated(level):
            return self.racing(level) if self.state.contenders else []  # a calibration step has no race
        arms = self.state.finalists or self.state.contenders
        return [BASELINE, *arms] if arms else []

    def update(self, level: int, measured: LevelResult) -> RaceRecord | None:
        """Recompute the level's race from all its rounds (also on resume): level_race."""
        arms = list(self.state.contenders)
        if not arms:  # a cluster sweep's calibration step: the block and nothing else
            offsets, base = calibration_block(measured, self.state.metric, self.policy)
            self.state.calibration[str(level)] = {"baseline_node": base,
                                                  "offsets": [o.model_dump(mode="json") for o in offsets]}
            return None
        notes: list[str] = []
        if self.block.get(level) is not None:
            measured, notes = with_calibration(self.block[level], measured)
        elif self.block:
            notes = [f"the calibration step did not measure c={level}: this level's race is compared uncorrected"]
        for note in notes:
            if note not in self.state.notes:  # said once, when first seen (and in the ranking)
                self.state.notes.append(note)
                self.echo(f"note: {note}")
        rec, block = level_race(measured, arms, self.state.metric, self.policy, self.state.max_rounds)
        if block < self.calibration_rounds:
            return rec  # still calibrating: the race has not started
        self.state.records[str(level)] = rec.model_dump(mode="json")
        if rec.outcome != "continue":
            self.state.contenders = [a for a in arms if a in rec.survivors]  # in the grid's order
            if rec.outcome == "no-winner":
                self.state.status = "no-winner"
                self.state.winner, self.state.finalists = None, []
            else:
                self.state.winner, self.state.winner_cleared_min = rec.winner, rec.winner_cleared_min
                self.state.finalists = [rec.winner, *rec.challengers_now]
        return rec

    def round_done(self, level: int, round_index: int, measured: LevelResult) -> None:
        if self.gated(level) and round_index < self.calibration_rounds:
            rec = self.update(level, measured)
            line = f"sweep c={level} calibration round {round_index + 1}/{self.calibration_rounds}"
            offsets, base = (rec.calibration, rec.baseline_node) if rec is not None else (
                [NodeOffset.model_validate(o) for o in self.state.calibration[str(level)]["offsets"]],
                self.state.calibration[str(level)]["baseline_node"])
            if round_index + 1 == self.calibration_rounds:
                line += ": " + "; ".join(o.describe(f"the baseline's {base}") for o in offsets)
            self.echo(line)
        elif self.gated(level):
            round_index -= self.calibration_rounds
            rec = self.update(level, measured)
            if rec is not None:
                self.echo(progress_line(level, round_index, self.state.max_rounds, rec))
        else:
            self.echo(f"sweep c={level} round {round_index + 1}/{self.ungated_rounds} (ungated)")
        self.state.save(self.run_dir)


def progress_line(level: int, round_index: int, max_rounds: int, rec: RaceRecord) -> str:
    """e.g. `sweep c=1 round 9/32: pick s5-k1-d6-LL +15.4% vs baseline, +0.8% vs s4-k1-d5-LL, P(correct) ≈ 83%;
    next s5-k1-d6-LL, s4-k1-d5-LL, s3-k1-d4-LL; eliminated s1-k1-d2 (below-min)`."""
    gone = [f"{a.arm} ({a.reason})" for a in rec.arms if a.eliminated_at == rec.rounds]
    pick = next((a for a in rec.arms if a.arm == rec.leader), None)
    shown = "" if pick is None or pick.estimate is None else f" {pick.estimate:+.1%} vs baseline"
    rival = next((a for a in rec.arms if a.arm in rec.challengers_now and a.gap_to_pick is not None), None)
    ahead = "" if rival is None else f", {-rival.gap_to_pick:+.1%} vs {rival.arm}"
    chance = "" if rec.p_correct is None else f", P(correct) {'>=' if rec.p_correct_guaranteed else '≈'} " + (
        f"{rec.confidence:.0%}" if rec.p_correct_guaranteed else f"{rec.p_correct:.0%}")
    line = f"sweep c={level} round {round_index + 1}/{max_rounds}: pick {rec.leader}{shown}{ahead}{chance}"
    if rec.outcome == "continue":
        arms = [a for a in rec.next_round if a != BASELINE]
        shown = ", ".join(rec.next_round) if len(arms) <= 4 else (
            f"{'the baseline and ' if BASELINE in rec.next_round else ''}{len(arms)} arms")
        line += f"; next {shown}" + (" (screening)" if rec.rounds < rec.min_rounds else "")
    if gone:
        line += f"; eliminated {', '.join(gone)}"
    return line + ("" if rec.outcome == "continue" else f" -> {rec.outcome} {rec.winner or ''}".rstrip())


def slot_layout(loaded: LoadedStack, arms: list[str], target: str) -> tuple[dict[str, str], int]:
    """(arm -> node, calibration rounds) on simulators with two or more sim.nodes: the baseline on the first node,
    the arms round-robin on the others (the slots), and where sweep.calibration-rounds > 0 the baseline config on
    each slot node that serves an arm (`baseline@<node>`). Elsewhere ({}, 0): the cluster's slots are its own."""
    nodes = list(loaded.config.sim.nodes)  # type: ignore[attr-defined]  # SimSpec is built by create_model
    if target != "sim" or len(nodes) < 2:
        return {}, 0
    slots = nodes[1:]
    placed = {arm: slots[i % len(slots)] for i, arm in enumerate(arms)}
    rounds = (loaded.config.sweep or SweepSpec()).calibration_rounds
    calibration = {calibration_arm(node): node for node in dict.fromkeys(placed.values())} if rounds else {}
    return {BASELINE: nodes[0], **calibration, **placed}, rounds


def cluster_layout(loaded: LoadedStack, calibration: list[str]) -> tuple[dict[str, str], int]:
    """(arm -> slot, rounds) of a cluster sweep's calibration step: the `baseline@<slot>` servers the Job was given
    by URL (the baseline's config in every slot), for sweep.calibration-rounds rounds; the nodes are the ones the
    rounds record. ({}, 0) for a wave."""
    if not calibration:
        return {}, 0
    rounds = (loaded.config.sweep or SweepSpec()).calibration_rounds
    return {arm: calibrated_node(arm) or arm for arm in calibration}, rounds


def new_state(loaded: LoadedStack, grid: Grid, plan: LoadPlan, *, run_id: str, quick: bool,
              sim_env: dict[str, str], target: str, calibration: list[str] | None = None) -> SweepState:
    stack = loaded.config
    arm_nodes, calibration_rounds = (cluster_layout(loaded, calibration) if calibration else
                                     slot_layout(loaded, [a.name for a in grid.arms], target))
    return SweepState(arm_nodes=arm_nodes, calibration_rounds=calibration_rounds,
        run_id=run_id, stack=loaded.name, quick=quick, metric=stack.policy.metric,
        gated_levels=[c for c in effective_policy(stack.policy).levels if c in plan.concurrency],
        max_rounds=stack.sweep.max_rounds if stack.sweep else 32, arms=[a.record() for a in grid.arms],
        skipped=[{"name": s.name, "reason": s.reason} for s in grid.skipped], notes=list(grid.notes),
        baseline_hash=grid.baseline.config_hash, contenders=[a.name for a in grid.arms],
        plan=plan.model_dump(mode="json"), sim_env=dict(sim_env), target=target)


def sweep_request(loaded: LoadedStack, grid: Grid, plan: LoadPlan, state: SweepState, **kw):
    """The run's servers: the baseline, the calibration arms (the baseline's config, on their slot nodes) and the
    arms still in the sweep, each on its node of state.arm_nodes."""
    from sglab.load.rounds import ArmsRequest  # the runner imports Locust (gevent): only when running

    calibration = [grid.baseline.with_name(arm) for arm in state.arm_nodes if arm.startswith(PREFIX)]
    arms = [grid.baseline, *calibration] + [a.arm for a in grid.arms if a.name in state.contenders]
    placed = {arm.name: state.arm_nodes[arm.name] for arm in arms if arm.name in state.arm_nodes}
    return ArmsRequest(loaded=loaded, plan=plan, kind="sweep", arm_specs=arms, arm_nodes=placed, **kw)


def run_sweep(loaded: LoadedStack, grid: Grid, plan: LoadPlan, *, quick: bool = False, target: str = "sim",
              urls: dict[str, str] | None = None, sim_env: dict[str, str] | None = None, out: Path | None = None,
              progress: bool = False, echo=say) -> tuple[SweepState, RunResult, Path]:
    """Run the sweep's measurement (no confirmation); the state is saved after every round. A cluster sweep's
    calibration step is given no arm of the grid, only `baseline@<slot>` servers by URL (cluster_layout)."""
    from sglab.load.rounds import run_controlled

    calibration = [name for name in urls or {} if name.startswith(PREFIX)]
    if calibration and grid.arms:
        raise ValueError("a calibration step (baseline@<slot> servers) runs no arm of the grid beside them")
    if calibration and not (loaded.config.sweep or SweepSpec()).calibration_rounds:
        raise ValueError("a calibration step needs sweep.calibration-rounds > 0")
    if not grid.arms and not calibration:
        raise ValueError("the grid has no runnable arm (every combination was skipped)")
    run_id = new_run_id()
    run_dir = create_run_dir(loaded.name, run_id, base=out)
    state = new_state(loaded, grid, plan, run_id=run_id, quick=quick, sim_env=sim_env or {}, target=target,
                      calibration=calibration)
    state.save(run_dir)
    controller = SweepController(state, plan, loaded.config.policy, run_dir, echo=echo)
    spec = loaded.config.sweep or SweepSpec()
    if target == "in-cluster" and spec.wave and spec.calibration_configmap and spec.calibration_run:
        # a calibrated wave's Job: the calibration step's sealed block, so every look is net of the slot nodes
        controller.block, notes = read_calibration(spec.calibration_configmap, spec.calibration_run, loaded.name)
        for note in notes:
            echo(f"note: {note}")
        state.notes += notes
        if controller.block:
            echo(f"calibrated: the race is net of the slot nodes measured by calibration step {spec.calibration_run}")
    request = sweep_request(loaded, grid, plan, state, target_kind=target, urls=urls or {},
                            sim_env=sim_env or {}, out=out, progress=progress)
    result, run_dir = run_controlled(request, controller, run_id=run_id, run_dir=run_dir)
    finish(state, result, run_dir)
    return state, result, run_dir


def verified_result(path: Path, stack: str):
    """A result this resume reads, verified with the seal the results use; ConfigError (never re-sealed) if not."""
    from sglab.results import integrity
    from sglab.results.store import RESULT_FILE, load_result

    result = load_result(path)
    problem = integrity.verify(result)
    if problem is not None:
        raise ConfigError(path / RESULT_FILE if path.is_dir() else path, "integrity", f"{problem}; a resume never "
                          "re-seals it", f"restore the file as sglab wrote it, or start a new sweep "
                          f"(`sglab sweep --stack {stack}`)")
    return result


def rebuild_arms(state: SweepState, grid: Grid, path: Path) -> None:
    """state.arms from the grid by name: an arm the grid does not have, or whose flags differ from the grid's, and
    an arm the grid has that the sweep did not start with, are refused, named (a sweep's arms are fixed at start)."""
    fix = f"start a new sweep (`sglab sweep --stack {state.stack}`): a sweep's arms are fixed when it starts"
    for saved in state.arms:
        arm = grid.arm(saved["name"])
        if arm is None:
            raise ConfigError(path, "arms", f"arm {saved['name']} is not an arm of stack '{state.stack}''s grid",
                              fix)
        if SweepArmRecord.model_validate(arm.record()) != SweepArmRecord.model_validate(saved):
            raise ConfigError(path, "arms", f"arm {saved['name']} is recorded with other flags than the grid "
                              f"gives it (changed since sweep {state.run_id} started, or edited)", fix)
    names = {a["name"] for a in state.arms}
    added = [a.name for a in grid.arms if a.name not in names]
    if added:
        raise ConfigError(path, "arms", f"the grid has arms sweep {state.run_id} did not start with: "
                          f"{', '.join(added)}", fix)
    if grid.baseline.config_hash != state.baseline_hash:
        raise ConfigError(path, "baseline_hash", f"the baseline of stack '{state.stack}' changed since sweep "
                          f"{state.run_id} started", fix)
    state.arms = [a.record() for a in grid.arms]


def check_layout(loaded: LoadedStack, state: SweepState, path: Path) -> None:
    """The simulated nodes a resume starts the servers on are the stack's layout, as when the sweep started: a
    changed sim.nodes (or an edited sweep.json) would move arms between nodes mid-level."""
    calibration = [arm for arm in state.arm_nodes if arm.startswith(PREFIX)] if state.target != "sim" else []
    layout = (cluster_layout(loaded, calibration) if calibration else
              slot_layout(loaded, [a["name"] for a in state.arms], state.target))
    if layout != (state.arm_nodes, state.calibration_rounds):
        raise ConfigError(path, "arm_nodes", f"the simulated nodes of stack '{state.stack}' (sim.nodes, "
                          f"sweep.calibration-rounds) are not the ones sweep {state.run_id} started on",
                          f"restore them, or start a new sweep (`sglab sweep --stack {state.stack}`)")


def load_resume(loaded: LoadedStack, grid: Grid, run_dir: Path, state: SweepState) -> tuple[SweepState, RunResult]:
    """What a resume continues from, with nothing unsealed deciding: the sweep's result verified, its arms rebuilt
    from the grid, every race decision (the pick) recomputed from the result's rounds, and a confirmation kept only
    where its own sealed result confirms that pick. sweep.json gives only the names and the run's settings."""
    from sglab.results.store import RESULT_FILE

    path = run_dir / STATE_FILE
    result = verified_result(run_dir, loaded.name)
    if result.kind != "sweep" or result.run_id != state.run_id or result.stack != loaded.name:
        raise ConfigError(run_dir / RESULT_FILE, "run_id", f"is {result.kind} run {result.run_id} of stack "
                          f"'{result.stack}', not sweep {state.run_id} of stack '{loaded.name}'",
                          "give the sweep's own run directory")
    if state.stack != loaded.name:
        raise ConfigError(path, "stack", f"is '{state.stack}', not '{loaded.name}'", "give a sweep of this stack")
    rebuild_arms(state, grid, path)
    check_layout(loaded, state, path)
    confirmed = state.confirmation
    controller = SweepController(state, LoadPlan.model_validate(state.plan), loaded.config.policy, run_dir,
                                 echo=lambda _: None)
    state.status, state.records, state.contenders = "running", {}, [a["name"] for a in state.arms]
    state.calibration = {}  # a calibration step's offsets: recomputed from its rounds too
    state.winner, state.winner_cleared_min, state.finalists, state.confirmation = None, False, [], None
    for level in result.levels:  # recompute every decision from the saved rounds
        if controller.gated(level.concurrency) and state.status == "running":
            controller.update(level.concurrency, level)
    if result.complete:
        state.status = ("calibrated" if not state.arms else  # a cluster's calibration step: no arms
                        "swept" if state.winner and state.status != "no-winner" else "no-winner")
        if confirmed is not None and state.winner:
            _keep_confirmation(loaded, state, Path(confirmed["path"]), path)
    return state, result


def _keep_confirmation(loaded: LoadedStack, state: SweepState, where: Path, path: Path) -> None:
    """The saved confirmation, if its sealed result confirms this sweep's recomputed pick; else refused."""
    from sglab.analysis.verdict import judge, policy_of

    confirmation = verified_result(where, loaded.name)
    record = confirmation.sweep
    if (record is None or record.sweep_run_id != state.run_id
            or record.arm.model_dump(mode="json") != state.arm(state.winner or "")):
        raise ConfigError(path, "confirmation", f"names run {confirmation.run_id}, which is not the confirmation of "
                          f"sweep {state.run_id}'s pick {state.winner}", "remove the `confirmation` key from "
                          "sweep.json and resume again (the pick is confirmed afresh)")
    verdict = judge(confirmation, policy_of(confirmation)) if confirmation.complete else None
    outcome = verdict.outcome if verdict is not None else None
    state.confirmation = {"run_id": confirmation.run_id, "path": str(where), "outcome": outcome,
                          "complete": confirmation.complete, "sentence": verdict.sentence if verdict else None}
    state.status = "confirmed" if outcome == "promote" else "not-confirmed"


def resume_sweep(loaded: LoadedStack, grid: Grid, run_dir: Path, result: RunResult, state: SweepState, *,
                 urls: dict[str, str] | None = None, progress: bool = False, echo=say
                 ) -> tuple[SweepState, RunResult, Path]:
    """Continue an interrupted sweep in its own run directory, from what load_resume recomputed."""
    from sglab.load.rounds import run_controlled

    plan = LoadPlan.model_validate(state.plan)
    controller = SweepController(state, plan, loaded.config.policy, run_dir, echo=echo)
    echo(f"resuming sweep {state.run_id}: {len(state.contenders)} arms still in it")
    request = sweep_request(loaded, grid, plan, state, target_kind=state.target, urls=urls or {},
                            sim_env=state.sim_env, out=run_dir.parent.parent, progress=progress)
    result, run_dir = run_controlled(request, controller, run_dir=run_dir, resume=result)
    finish(state, result, run_dir)
    return state, result, run_dir


def finish(state: SweepState, result: RunResult, run_dir: Path) -> None:
    if not result.complete:
        state.status = "interrupted"
        print(f"sweep interrupted ({result.incomplete_reason}); continue with: sglab sweep --stack {state.stack} "
              f"--resume {state.run_id}", file=sys.stderr)
    elif not state.contenders and not state.arms:
        state.status = "calibrated"
    elif state.status != "no-winner":
        state.status = "swept" if state.winner else "no-winner"
    state.save(run_dir)
