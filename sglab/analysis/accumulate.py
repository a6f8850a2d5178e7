"""Evidence that accumulates: runs of one (baseline, candidate) pair under one policy extend one sequence.

An inconclusive run invites a re-run; were every re-run a fresh sequence, "re-run until it promotes" would
compound the error (1.0% false promotions after one run at a true gain equal to min-gain, 3.2% after 3, 5.3%
after 5). So a new bench of the same pair continues the sequence of the runs before it, and the
verdict judges their union: the anytime-valid sequence keeps its error rate across runs exactly as within
one (benchmarks/decision_quality.py measures 10 re-runs).

Same pair = the same `sequence_key`: both arms' config hashes, the policy's decision keys, what the load
plan sends (profile, prompts, endpoint, lengths, round length; not the round counts or the seed) and the
target (simulator or servers, time scale). Anything else starts a new sequence by construction; starting
afresh on purpose is `sglab bench --fresh-sequence`, recorded in the result. A sequence that promoted goes on
too: the sequence is valid at every look, so a re-run re-judges the union (and keeps deciding the levels a
promotion target gates at its own, higher min-gain, sglab/bench/sequential.py).

Evidence is recomputed, never trusted: the earlier runs are found in the stack's results by run id, their
seals verified (sglab/results/integrity.py) and their per-round log-ratios recomputed from their samples.
The new result records them (run id, seal digest, the recomputed log-ratios per level) under
result.sequential["sequence"], sealed with it, so `judge` stays a pure function of one document; promotion
checks every recorded run again against its file (`recheck`).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from sglab.analysis.stops import level_log_ratios
from sglab.config.policy import PromotionPolicy
from sglab.results import integrity
from sglab.schema.result import RunResult
from sglab.core.errors import ConfigError
from sglab.results.store import RESULT_FILE, list_runs, load_result, results_root

POLICY_KEYS = ("metric", "min_gain", "confidence", "min_rounds", "levels", "method", "checks", "slo", "traffic")
PLAN_KEYS = ("profile", "round_duration_s", "round_requests", "max_new_tokens", "endpoint", "natural_stop",
             "prompts", "rate", "trace", "warmup_requests")


class SequenceError(Exception):
    """An earlier run of the sequence is missing or cannot be trusted: what and the fix."""

    def __init__(self, why: str, fix: str):
        self.why, self.fix = why, fix
        super().__init__(f"{why}\n  fix: {fix}")


def key_of(*, kind: str, config_hash: dict, policy: dict, plan: dict, target_kind: str, time_scale: float | None,
           sim_env: dict) -> str | None:
    """The identity of a pair's sequence (None for runs that cannot continue one: A/A, four arms, fixed-n)."""
    if kind != "ab" or policy.get("method") != "sequential":
        return None
    # a result recorded before policy.checks existed was judged with its default, and continues that sequence
    recorded_policy = {"checks": PromotionPolicy.model_fields["checks"].default,
                       **{k: v for k, v in policy.items() if v is not None}}
    body = {"config_hash": {k: config_hash.get(k) for k in ("baseline", "candidate")},
            "policy": {k: recorded_policy.get(k) for k in POLICY_KEYS}, "plan": {k: plan.get(k) for k in PLAN_KEYS},
            "target": {"kind": target_kind, "time_scale": time_scale, "sim_env": dict(sorted(sim_env.items()))}}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def sequence_key(result: RunResult) -> str | None:
    """The key of a stored result (as recorded: config hashes, policy, load plan, target)."""
    if result.policy is None or result.load_plan is None:
        return None
    return key_of(kind=result.kind, config_hash=result.config_hash, policy=result.policy.model_dump(),
                  plan=result.load_plan.model_dump(), target_kind=result.target.kind,
                  time_scale=result.target.time_scale, sim_env=result.target.sim_env)


def recorded(result: RunResult) -> dict | None:
    """The sequence a result records (None: it records none)."""
    seq = (result.sequential or {}).get("sequence") if isinstance(result.sequential, dict) else None
    return seq if isinstance(seq, dict) else None


def earlier_log_ratios(result: RunResult, metric: str, slo=None) -> dict[int, list[float]]:
    """level -> the earlier runs' log-ratios a result's sequence continues (empty for a fresh sequence, or when
    the sequence was measured on another metric than the one judged)."""
    seq = recorded(result)
    if not seq or seq.get("metric") != metric:
        return {}
    out: dict[int, list[float]] = {}
    for run in seq.get("runs", []):
        for level, ratios in (run.get("levels") or {}).items():
            out.setdefault(int(level), []).extend(float(x) for x in ratios)
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
    return found


def continue_sequence(stack: str, key: str, policy, *, base: Path | None = None,
                      fresh_reason: str | None = None) -> dict:
    """The sequence record a new run of the pair starts with: the earlier runs it continues, each verified and
    its log-ratios recomputed (the newest run of the key names its predecessors; each is checked again)."""
    record = {"key": key, "metric": policy.metric, "fresh": fresh_reason is not None, "reason": fresh_reason,
              "runs": []}
    if fresh_reason is not None:
        return record
    latest = None
    for run_dir in reversed(list_runs(stack, base)):
        try:
            candidate = load_result(run_dir)
        except Exception:  # noqa: BLE001 - an unreadable result is no run of this sequence
            continue
        if sequence_key(candidate) == key:
            latest = (run_dir, candidate)
            break
    if latest is None:
        return record
    run_dir, newest = latest
    chain = []
    for entry in (recorded(newest) or {}).get("runs", []):
        earlier_dir = run_dir.parent / str(entry.get("run_id"))
        if not (earlier_dir / "result.json").is_file():
            raise SequenceError(f"run {entry.get('run_id')} of this pair's sequence (named by run {newest.run_id}) is "
                                f"missing from {run_dir.parent}", "restore it, or start afresh with `--fresh-sequence` "
                                "(recorded in the result)")
        found = _trusted(earlier_dir)
        if found.integrity is None or found.integrity.digest != entry.get("digest"):
            raise SequenceError(f"run {found.run_id} is not the run the sequence recorded (its seal changed)",
                                "restore it, or start afresh with `--fresh-sequence`")
        chain.append(_entry(found, policy))
    chain.append(_entry(_trusted(run_dir), policy))
    record["runs"] = chain
    return record


def _entry(result: RunResult, policy) -> dict:
    record = result.integrity
    return {"run_id": result.run_id, "algorithm": record.algorithm if record else None,
            "digest": record.digest if record else None, "levels": _levels(result, policy)}


def recheck(result: RunResult, base: Path | None, policy) -> str | None:
    """Promotion's check of a recorded sequence: every earlier run is still in `base`/<stack>/, sealed as recorded,
    and its recomputed log-ratios are the recorded ones; None when all hold, else what is wrong."""
    seq = recorded(result)
    if not seq or not seq.get("runs"):
        return None
    folder = (base if base is not None else results_root()) / result.stack
    for entry in seq["runs"]:
        run_id = str(entry.get("run_id"))
        if not (folder / run_id / RESULT_FILE).is_file():
            return f"earlier run {run_id} of its sequence is missing from {folder}"
        try:
            found = _trusted(folder / run_id)
        except SequenceError as exc:
            return exc.why
        except ConfigError as exc:
            return f"earlier run {run_id} of its sequence cannot be read: {exc}"
        if found.integrity is None or found.integrity.digest != entry.get("digest"):
            return f"earlier run {run_id} is not the run its sequence recorded (its seal changed)"
        if _levels(found, policy) != entry.get("levels"):
            return f"earlier run {run_id}'s rounds, recomputed, differ from the ones its sequence recorded"
    return None
