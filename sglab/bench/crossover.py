"""A crossover across two runs of servers the user runs (`sglab bench --baseline-url ... --candidate-url ...
--crossover-of RUN`): sglab cannot move servers given by URL, so the user swaps them.

Run 1 is an ordinary URL run: baseline on machine X, candidate on machine Y, parallel (its gain includes the
two machines' difference). The user then serves the baseline on Y and the candidate on X and runs the same
stack with `--crossover-of <run 1>`. Before anything is measured, run 1 is found in the stack's results, its
seal verified, and checked to be the same comparison (stack, kind, both arms' config hashes, what the load plan
sends, the policy) on the same servers (producer, version, image, GPU per arm) with the machines swapped: each
arm's machine is what its server reports (a node, where it reports one) or else its URL's host. Its measured
rounds become period 1 of this run (node = run 1's machine of the arm), this run's rounds period 2, continuing
the round numbers where run 1's end; the crossover estimator (sglab/analysis/nodes.py) then pairs round j of
period 1 with round j of period 2, so the machine difference cancels and is reported on its own. The run
measures as many rounds again as run 1 did at every level (the sequential rule may stop a gated level at its
decision), starts a fresh sequence (run 1's rounds are inside it, never counted again) and draws a new seed.

The result records the run it joined (`design.joined_run`, its seal digest): promotion finds run 1 again,
verifies its seal, and checks that period 1 is exactly its rounds (`check_joined`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

from sglab.analysis.accumulate import arm_machines, key_of, machines, sequence_key
from sglab.core.errors import ConfigError
from sglab.core.untrusted import printable
from sglab.load.design import Joined
from sglab.load.request import BenchRequest, RefusedError, arm_infos, record_machines
from sglab.load.summary import arm_level_summary
from sglab.results import integrity
from sglab.results.store import RESULT_FILE, load_result, results_root
from sglab.schema.result import LevelResult, RunResult

ARMS = ("baseline", "candidate")


@dataclass
class PeriodOne:
    """Run 1 as period 1 of this run: its rounds relabelled, and where each arm ran."""

    joined: Joined
    levels: list[LevelResult]
    rounds: dict[int, int] = field(default_factory=dict)  # level -> run 1's complete measured rounds

    def totals(self) -> dict[int, int]:
        """level -> the rounds of the joined level: as many again as run 1 measured (one pair per round)."""
        return {level: 2 * n for level, n in self.rounds.items()}


def _host(url: str | None) -> str:
    return (urlparse(url or "").hostname or "").lower()


def machine_of(url: str | None, reported_node: str | None) -> str:
    """An arm's machine: the node its server reports, else its URL's host."""
    return reported_node or _host(url)


def _comparison(result: RunResult) -> str | None:
    """What must be equal between the two runs: the sequence key without where the servers are."""
    urls = result.target.urls
    result.target.urls = {}
    try:
        return sequence_key(result)
    finally:
        result.target.urls = urls


def _request_comparison(request: BenchRequest) -> str | None:
    policy = request.loaded.config.policy
    return key_of(stack=request.loaded.name, kind=request.kind,
                  config_hash={a.name: a.config_hash for a in request.arms},
                  policy=policy.model_dump(mode="json", by_alias=False),
                  plan=request.plan.model_dump(mode="json", by_alias=False), target_kind=request.target_kind,
                  time_scale=None, sim_env={}, urls={})


def _relabel(level: LevelResult, first: dict[str, str]) -> LevelResult | None:
    """Run 1's level as period 1: its complete measured rounds (from round 1 on, as a resumed level keeps them)
    and their requests; warm-ups are left out. None where no round is complete."""
    by_round: dict[int, list[bool]] = {}
    for r in level.rounds:
        if not r.warmup and r.round_index >= 0:
            by_round.setdefault(r.round_index, []).append(r.complete and r.arm in ARMS)
    done = 0
    while done in by_round and all(by_round[done]) and len(by_round[done]) == len(ARMS):
        done += 1
    if done == 0:
        return None
    rounds = [r.model_copy(update={"period": 1, "node": first[r.arm]}) for r in level.rounds
              if not r.warmup and 0 <= r.round_index < done]
    requests = [q for q in level.requests if not q.warmup and 0 <= q.round_index < done]
    arms = {arm: arm_level_summary([q for q in requests if q.arm == arm], [r for r in rounds if r.arm == arm])
            for arm in ARMS}
    return LevelResult(concurrency=level.concurrency, arms=arms, rounds=rounds, requests=requests)


def period_one(request: BenchRequest, run_id: str) -> PeriodOne:
    """Run 1, checked against this run's request and servers (what each reports); RefusedError naming what
    differs and the fix."""
    stack = request.loaded.name
    folder = (request.out or results_root()) / stack
    run_dir = folder / run_id
    if "/" in run_id or run_id in ("", ".", "..") or not (run_dir / RESULT_FILE).is_file():
        raise RefusedError(f"--crossover-of {printable(run_id, limit=80)}: no such run in {folder}; give the run id "
                           f"of the first run of this pair (`sglab results --stack {stack}`)")
    try:
        first = load_result(run_dir)
    except ConfigError as exc:
        raise RefusedError(f"--crossover-of {run_id}: {exc}") from None
    problem = integrity.verify(first)
    if problem is None and first.run_id != run_id:
        problem = f"it holds run {first.run_id}"
    if problem is not None:
        raise RefusedError(f"--crossover-of {run_id} cannot be trusted: {problem}; restore the run as it was written")

    def refuse(what: str, fix: str) -> RefusedError:
        return RefusedError(f"--crossover-of {run_id}: {what}; {fix}")

    if first.kind != "ab" or first.target.kind != "urls" or not first.complete or first.invalid_reason:
        raise refuse(f"it is a {first.kind} run of {first.target.kind}, complete {first.complete}, invalid "
                     f"{first.invalid_reason or 'no'}",
                     "period 1 is a complete, valid A/B of servers given by URL")
    if first.design is not None and first.design.joined_run:
        raise refuse("it is itself the second period of a crossover", "give the first run of the pair")
    if _comparison(first) != _request_comparison(request):
        raise refuse("it measured another comparison (stack, arms' config hashes, policy or what the load plan "
                     "sends differ)", "run the same stack file against the same servers; only which machine "
                     "serves which arm changes")
    if first.load_plan is not None and first.load_plan.seed == request.plan.seed:
        raise refuse(f"this run's load seed {request.plan.seed} is run 1's", "leave load.seed unset or give "
                     "another --seed: the same seed replays the same prompts and arm order")
    infos = arm_infos(request, request.urls)
    record_machines(request, request.urls, infos)  # what each server reports now
    if machines(first) != arm_machines(infos):
        raise refuse(f"its servers were others ({machines(first)}, now "
                     f"{arm_machines(infos)})", "serve the same images and versions, "
                     "swapped between the machines")
    arms = {a.name: a for a in first.arms}
    was = {arm: machine_of(arms[arm].url, arms[arm].machine.node_name if arms[arm].machine else None)
           for arm in ARMS}
    reported = {i.name: i.machine.node_name if i.machine else None for i in infos}
    now = {arm: machine_of(request.urls[arm], reported[arm]) for arm in ARMS}
    if not all(was.values()) or was["baseline"] == was["candidate"]:
        raise refuse(f"its arms ran on machines {was['baseline'] or '?'} and {was['candidate'] or '?'}",
                     "a crossover needs the two arms on two known machines")
    if (now["baseline"], now["candidate"]) != (was["candidate"], was["baseline"]):
        raise refuse(f"the machines did not swap: run 1 served the baseline on {was['baseline']} and the candidate "
                     f"on {was['candidate']}, this run serves them on {now['baseline']} and {now['candidate']}",
                     f"serve the baseline on {was['candidate']} and the candidate on {was['baseline']} (the machines "
                     "are what the servers report, else the URLs' hosts)")
    levels = [lv for lv in (_relabel(level, was) for level in first.levels) if lv is not None]
    rounds = {lv.concurrency: len({r.round_index for r in lv.rounds}) for lv in levels}
    wanted = set(request.plan.concurrency) if request.plan.profile == "concurrency" else set()
    missing = sorted(wanted - set(rounds))
    if missing or not rounds:
        raise refuse(f"it has no complete round at level(s) {missing or sorted(wanted)}",
                     "measure the same levels in both runs")
    joined = Joined(first.run_id, first.integrity.digest if first.integrity else None, was)
    return PeriodOne(joined, levels, rounds)


class FixedRounds:
    """The round controller of a joined run whose policy is not sequential: every arm, up to the level's rounds."""

    def __init__(self, totals: dict[int, int], arms: list[str]) -> None:
        self.totals, self.arms = totals, arms

    def rounds_at(self, level: int) -> int:
        return self.totals.get(level, 0)

    def arms_for_round(self, level: int, round_index: int) -> list[str]:
        return list(self.arms) if round_index < self.rounds_at(level) else []

    def round_done(self, level: int, round_index: int, measured: LevelResult) -> None:
        pass


def check_joined(result: RunResult, base: Path | None) -> str | None:
    """Promotion's check of a joined run: run 1 is still in the stack's results, sealed as recorded, and period 1
    is exactly its complete measured rounds; None when all hold, else what is wrong."""
    design = result.design
    if design is None or not design.joined_run:
        return None
    run_dir = (base if base is not None else results_root()) / result.stack / design.joined_run
    if not (run_dir / RESULT_FILE).is_file():
        return f"run {design.joined_run}, its period 1, is missing from {run_dir.parent}"
    try:
        first = load_result(run_dir)
    except ConfigError as exc:
        return f"run {design.joined_run}, its period 1, cannot be read: {exc}"
    problem = integrity.verify(first)
    if problem is not None or first.integrity is None or first.integrity.digest != design.joined_digest:
        return f"run {design.joined_run}, its period 1, is not the run it joined ({problem or 'its seal changed'})"
    nodes = design.nodes
    was = {arm: (nodes.get(arm) or [None])[0] or "" for arm in ARMS}
    expected = {lv.concurrency: lv for lv in (_relabel(level, was) for level in first.levels) if lv is not None}
    for level in result.levels:
        mine = [r for r in level.rounds if r.period == 1]
        theirs = expected.get(level.concurrency)
        if mine != (theirs.rounds if theirs is not None else []):
            return (f"its period 1 at concurrency {level.concurrency} is not run {design.joined_run}'s rounds "
                    "(recomputed from that run)")
    return None
