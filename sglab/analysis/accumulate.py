"""Evidence that accumulates: runs of one (baseline, candidate) pair under one policy extend one sequence.

An inconclusive run invites a re-run; were every re-run a fresh sequence, "re-run until it promotes" would
compound the error (1.0% false promotions after one run at a true gain equal to min-gain, 3.2% after 3, 5.3%
after 5). So a new bench of the same pair continues the sequence of the runs before it, and the
verdict judges their union: the anytime-valid sequence keeps its error rate across runs exactly as within
one (benchmarks/decision_quality.py measures 10 re-runs).

Same pair = the same `sequence_key`: the stack, both arms' config hashes, the policy's decision keys (its
design included), what the load plan sends (profile, prompts, endpoint, lengths, round length; not the round
counts or the seed) and the target (simulator or servers, their URLs, time scale). Anything else starts a new
sequence by construction; starting afresh on purpose is `sglab bench --fresh-sequence`, recorded in the result.
What served the arms is known only once they run: `recheck` refuses a sequence whose runs ran on other
machines (producer, server version, image, GPU product).

A re-run counts as new rounds only if it draws new rounds: each run has its own load seed (load.seed unset
draws one; the simulators' acceptance draws follow it), and a sequence refuses a seed it already counted (a
re-run with the same seed replays the same prompts, arm order and acceptance draws: its rounds correlate
+0.95..+0.997 with the earlier run's, and counting them again promotes 7.8% of pairs at min-gain within 10
re-runs, benchmarks/decision_quality.py --mode reruns).

Every run in results/<stack> must load, verify its seal, sit under its own run id and belong to the stack, or
the sequence refuses: a changed or unreadable newest run would otherwise leave the sequence silently, a copy
of an old run under a newer name would rewind it, and another stack's run would join it. A sequence that
promoted goes on too: the sequence is valid at every look, so a re-run re-judges the union (and keeps deciding
the levels a promotion target gates at its own, higher min-gain, sglab/bench/sequential.py).

Evidence is recomputed, never trusted: the earlier runs are found in the stack's results by run id, their
seals verified (sglab/results/integrity.py) and their per-round log-ratios recomputed from their samples.
The new result records them (run id, seal digest, the recomputed log-ratios per level) under
result.sequential.sequence, sealed with it, so `judge` stays a pure function of one document; promotion
checks every recorded run again against its file (`recheck`).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from sglab.analysis.stops import level_log_ratios
from sglab.config.policy import PromotionPolicy
from sglab.results import integrity
from sglab.schema.result import EarlierRun, RunResult, SequenceRecord
from sglab.core.errors import ConfigError
from sglab.core.untrusted import printable
from sglab.results.store import RESULT_FILE, list_runs, load_result, results_root

POLICY_KEYS = ("metric", "min_gain", "confidence", "min_rounds", "levels", "method", "checks", "slo", "traffic",
               "design")
PLAN_KEYS = ("profile", "round_duration_s", "round_requests", "max_new_tokens", "endpoint", "natural_stop",
             "prompts", "rate", "trace", "warmup_requests")


class SequenceError(Exception):
    """An earlier run of the sequence is missing or cannot be trusted: what and the fix, made `printable` here
    (they may quote a directory's name or a reader's exception, and a new run records them)."""

    def __init__(self, why: str, fix: str):
        self.why, self.fix = printable(why, limit=None), printable(fix, limit=None)
        super().__init__(f"{self.why}\n  fix: {self.fix}")


def key_of(*, stack: str, kind: str, config_hash: dict, policy: dict, plan: dict, target_kind: str,
           time_scale: float | None, sim_env: dict, urls: dict) -> str | None:
    """The identity of a pair's sequence (None for runs that cannot continue one: A/A, four arms, fixed-n)."""
    if kind != "ab" or policy.get("method") != "sequential":
        return None
    # a result recorded before policy.checks existed was judged with its default, and continues that sequence
    recorded_policy = {"checks": PromotionPolicy.model_fields["checks"].default,
                       "design": PromotionPolicy.model_fields["design"].default,
                       **{k: v for k, v in policy.items() if v is not None}}
    body = {"stack": stack, "config_hash": {k: config_hash.get(k) for k in ("baseline", "candidate")},
            "policy": {k: recorded_policy.get(k) for k in POLICY_KEYS}, "plan": {k: plan.get(k) for k in PLAN_KEYS},
            "target": {"kind": target_kind, "time_scale": time_scale, "sim_env": dict(sorted(sim_env.items())),
                       "urls": {} if target_kind == "sim" else dict(sorted(urls.items()))}}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def sequence_key(result: RunResult) -> str | None:
    """The key of a stored result (as recorded: config hashes, policy, load plan, target)."""
    if result.policy is None or result.load_plan is None:
        return None
    return key_of(stack=result.stack, kind=result.kind, config_hash=result.config_hash,
                  policy=result.policy.model_dump(), plan=result.load_plan.model_dump(),
                  target_kind=result.target.kind, time_scale=result.target.time_scale,
                  sim_env=result.target.sim_env, urls=result.target.urls)


def recorded(result: RunResult) -> SequenceRecord | None:
    """The sequence a result records (None: it records none)."""
    return result.sequential.sequence if result.sequential is not None else None


def earlier_log_ratios(result: RunResult, metric: str, slo=None) -> dict[int, list[float]]:
    """level -> the earlier runs' log-ratios a result's sequence continues (empty for a fresh sequence, or when
    the sequence was measured on another metric than the one judged)."""
    seq = recorded(result)
    if seq is None or seq.metric != metric:
        return {}
    out: dict[int, list[float]] = {}
    for run in seq.runs:
        for level, ratios in run.levels.items():
            out.setdefault(int(level), []).extend(ratios)
    return out


def _levels(result: RunResult, policy) -> dict[str, list[float]]:
    return {str(lv.concurrency): level_log_ratios(lv, policy.metric, policy) for lv in result.levels}


def _trusted(run_dir: Path) -> RunResult:
    found = load_result(run_dir)
    problem = integrity.verify(found)
    if problem is not None:
        raise SequenceError(f"run {found.run_id} of this pair's sequence cannot be trusted: {problem}",
                            "restore the run as it was written, or start afresh with `--fresh-sequence` (recorded "
                            "in the result)")
    if found.run_id != run_dir.name:
        raise SequenceError(f"{run_dir} holds run {found.run_id}, not the run of that name the "
                            "sequence recorded", f"move it back under its own run id, {FRESH_FIX}")
    return found


FRESH_FIX = "or start afresh with `--fresh-sequence` (recorded in the result)"


def _stack_runs(stack: str, base: Path | None) -> list[tuple[Path, RunResult]]:
    """Every run in results/<stack>, oldest first, each loaded and its seal verified; SequenceError naming the
    first that fails to load or verify, sits under a directory other than its run id, or is another stack's."""
    out = []
    for run_dir in list_runs(stack, base):
        try:
            found = load_result(run_dir)
        except Exception as exc:  # noqa: BLE001 - any unreadable result refuses the sequence, with its reason
            raise SequenceError(f"{run_dir} cannot be read, so the sequence of runs of this stack cannot be "
                                f"followed: {str(exc)[:300]}",
                                f"restore it as it was written or move it out of {run_dir.parent}, "
                                f"{FRESH_FIX}") from None
        problem = integrity.verify(found)
        if problem is not None:
            raise SequenceError(f"run {found.run_id} in {run_dir.parent} cannot be trusted: "
                                f"{problem}", f"restore the run as it was written or move it out of "
                                f"{run_dir.parent}, {FRESH_FIX}")
        if found.run_id != run_dir.name:
            raise SequenceError(f"{run_dir} holds run {found.run_id}: a run stored under "
                                "another name would reorder the sequence", f"move it back to {run_dir.parent}/"
                                f"{found.run_id} or out of {run_dir.parent}, {FRESH_FIX}")
        if found.stack != stack:
            raise SequenceError(f"run {found.run_id} in {run_dir.parent} is a run of stack "
                                f"{found.stack}, not {stack}",
                                f"move it to its own stack's results, {FRESH_FIX}")
        out.append((run_dir, found))
    return out


def _seed(result: RunResult) -> int | None:
    return result.load_plan.seed if result.load_plan is not None else None


def continue_sequence(stack: str, key: str, policy, *, base: Path | None = None,
                      fresh_reason: str | None = None, seed: int | None = None) -> SequenceRecord:
    """The sequence record a new run of the pair starts with: the earlier runs it continues, each verified and
    its log-ratios recomputed (the newest run of the key names its predecessors; each is checked again).
    `seed`: the new run's load seed, refused when a run of the sequence already counted it."""
    record = SequenceRecord(key=key, metric=policy.metric, fresh=fresh_reason is not None, reason=fresh_reason)
    if fresh_reason is not None:
        return record
    runs = _stack_runs(stack, base)
    latest = next(((d, r) for d, r in reversed(runs) if sequence_key(r) == key), None)
    if latest is None:
        return record
    run_dir, newest = latest
    chain = []
    counted: dict[int | None, str] = {}
    before = recorded(newest)
    # (run id, the digest the sequence recorded for it, is it the newest run: checked by its own seal only)
    entries = [(r.run_id, r.digest, False) for r in (before.runs if before is not None else [])]
    for run_id, digest, is_newest in entries + [(newest.run_id, None, True)]:
        earlier_dir = run_dir.parent / run_id
        if not (earlier_dir / "result.json").is_file():
            raise SequenceError(f"run {run_id} of this pair's sequence (named by run {newest.run_id}) is "
                                f"missing from {run_dir.parent}", f"restore it, {FRESH_FIX}")
        found = _trusted(earlier_dir)
        if not is_newest and (found.integrity is None or found.integrity.digest != digest):
            raise SequenceError(f"run {found.run_id} is not the run the sequence recorded (its seal changed)",
                                f"restore it, {FRESH_FIX}")
        _count_seed(counted, found)
        chain.append(_entry(found, policy))
    if seed is not None and seed in counted:
        raise SequenceError(f"load seed {seed} was already counted by run {counted[seed]} of this pair's sequence: "
                            "the same seed replays the same prompts, arm order and acceptance draws, so its rounds "
                            "are no new evidence", f"leave load.seed unset (each run draws its own) or give "
                            f"another --seed, {FRESH_FIX}")
    record.runs = chain
    return record


def _count_seed(counted: dict[int | None, str], found: RunResult) -> None:
    """Record a run's load seed; SequenceError when an earlier run of the sequence had the same one."""
    seed = _seed(found)
    if seed in counted:
        raise SequenceError(f"runs {counted[seed]} and {found.run_id} of this pair's sequence share load seed {seed}: "
                            "the later replays the earlier's prompts, arm order and acceptance draws, so the sequence "
                            "counts the same rounds twice", "start afresh with `--fresh-sequence` (recorded in the "
                            "result); each new run draws its own seed while load.seed is unset")
    counted[seed] = found.run_id


def _entry(result: RunResult, policy) -> EarlierRun:
    record = result.integrity
    return EarlierRun(run_id=result.run_id, algorithm=record.algorithm if record else None,
                      digest=record.digest if record else None, levels=_levels(result, policy))


GPU_LABEL = "nvidia.com/gpu.product"


def machines(result: RunResult) -> dict[str, tuple]:
    """arm -> what served it, as far as a re-run must match: producer, server version, image (digest, else
    name) and GPU product; the node itself may change between runs (and does within a crossover)."""
    return arm_machines(result.arms)


def arm_machines(arms: list) -> dict[str, tuple]:
    """machines() of a run's ArmInfos."""
    out = {}
    for arm in arms:
        m = arm.machine
        out[arm.name] = (None,) if m is None else (m.producer, m.server_version, m.image_digest or m.image,
                                                   m.node_labels.get(GPU_LABEL))
    return out


def recheck(result: RunResult, base: Path | None, policy) -> str | None:
    """Promotion's check of a recorded sequence: every earlier run is still in `base`/<stack>/, sealed as recorded,
    its recomputed log-ratios are the recorded ones, it ran with a load seed of its own and on the machines this
    run ran on; None when all hold, else what is wrong."""
    seq = recorded(result)
    if seq is None or not seq.runs:
        return None
    folder = (base if base is not None else results_root()) / result.stack
    counted: dict[int | None, str] = {}
    for entry in seq.runs:
        run_id = entry.run_id
        if not (folder / run_id / RESULT_FILE).is_file():
            return f"earlier run {run_id} of its sequence is missing from {folder}"
        try:
            found = _trusted(folder / run_id)
            _count_seed(counted, found)
        except SequenceError as exc:
            return exc.why
        except ConfigError as exc:
            return f"earlier run {run_id} of its sequence cannot be read: {exc}"
        if found.integrity is None or found.integrity.digest != entry.digest:
            return f"earlier run {run_id} is not the run its sequence recorded (its seal changed)"
        if _levels(found, policy) != entry.levels:
            return f"earlier run {run_id}'s rounds, recomputed, differ from the ones its sequence recorded"
        if found.stack != result.stack:
            return f"earlier run {run_id} is a run of stack {found.stack}, not {result.stack}"
        if machines(found) != machines(result):
            return (f"earlier run {run_id} of its sequence ran on other machines "
                    f"({machines(found)} against this run's "
                    f"{machines(result)}): a sequence measures one pair on one set of "
                    "machines")
    if _seed(result) in counted:
        return (f"its load seed {_seed(result)} was already counted by earlier run {counted[_seed(result)]}: the "
                "same rounds counted twice")
    return None
