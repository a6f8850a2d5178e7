"""Would the promoted config pass the target stack's own gate, on this evidence?

A source stack may gate on one operating point (concurrency 1) while production gates on others
(its policy.levels or sglab:traffic). Promoting there on the source's verdict alone would install a
config that production's own benchmark rejects, so promotion judges the same evidence a second time
under the target's policy and refuses with the reason and the fix when that gate does not pass.
"""

from __future__ import annotations

from sglab.analysis.assumptions import checks_named
from sglab.analysis.operating_point import level_phrase, level_label
from sglab.analysis.verdict import judge
from sglab.schema.verdict import pct
from sglab.config.loader import LoadedStack
from sglab.schema.result import RunResult

__all__ = ["target_gate_refusal"]


def target_gate_refusal(result: RunResult, target: LoadedStack, source_stack: str) -> tuple[str, str] | None:
    """(reason, fix) when the evidence fails the target stack's gate; None when it passes."""
    policy = target.config.policy
    verdict = judge(result, policy)
    if verdict.outcome == "promote":
        return None
    label = level_label(result)
    gate = "sglab:traffic" if policy.traffic is not None else "policy.levels"
    where = ", ".join(level_phrase(label, c) for c in verdict.gating_levels)
    reason = (f"the evidence fails the {target.name} stack's own gate ({gate}: {where}; "
              f"min-gain {policy.min_gain:+.1%}): {verdict.sentence}")
    missing = [c for c in verdict.gating_levels if verdict.level(c) is None]
    losing = [lv.concurrency for lv in verdict.levels if lv.gating and lv.outcome == "lose"]
    if missing:
        fix = (f"measure what {target.name} gates on: add {missing} to the load levels of stack '{source_stack}' "
               f"(or declare sglab:traffic there with the levels {target.name} serves) and re-run "
               f"`sglab bench --stack {source_stack}`")
    elif losing:
        fix = (f"the candidate loses at {', '.join(level_phrase(label, c) for c in losing)}, which {target.name} "
               f"serves: tune the candidate for that load (e.g. fewer speculative steps), declare sglab:traffic in "
               f"stack '{source_stack}' with the levels {target.name} serves so its own verdict gates them, and "
               "re-run the benchmark")
    elif undecided := [lv for lv in verdict.levels if lv.gating and lv.outcome == "undecided"]:
        floor = checks_named(policy.checks).promote_min_rounds
        fix = "; ".join([_undecided_fix(lv, verdict, label, target.name, source_stack, floor) for lv in undecided]
                        + [b.fix for b in verdict.blockers if b.fix])
    elif verdict.blockers:
        fix = "; ".join(b.fix for b in verdict.blockers if b.fix) or f"re-run `sglab bench --stack {source_stack}`"
    else:
        fix = (f"measure more at the levels {target.name} gates on (raise load.rounds, or declare sglab:traffic in "
               f"stack '{source_stack}' so they get the full rounds) and re-run `sglab bench --stack {source_stack}`")
    return reason, fix


def _undecided_fix(lv, verdict, label: str, target: str, source_stack: str, floor: int) -> str:
    """Why a level of the target's gate is undecided, and what decides it: the real reason, not a bystander."""
    gain = lv.gain(verdict.metric)
    where = level_phrase(label, lv.concurrency)
    if gain.low is None and gain.high is None:
        return (f"{where} has only {gain.rounds} rounds, too few for the confidence sequence to bound (a promotion "
                f"needs at least {floor} under {target}'s checks): it was measured as an ungated level; re-run `sglab "
                f"bench --stack {source_stack}`, which runs the levels {target} gates sequentially until they decide "
                f"(sglab:promote-to)")
    if gain.held:
        return f"{where}: {gain.notes[0] if gain.notes else gain.held}"
    more = f" (about {lv.more_rounds} more rounds would likely decide)" if lv.more_rounds else ""
    return (f"{where}'s sequence [{pct(gain.low)}, {pct(gain.high)}] still straddles {target}'s min-gain "
            f"{verdict.min_gain:+.1%} after {gain.rounds} rounds{more}: re-run `sglab bench --stack {source_stack}` "
            "with the same load settings; the new run continues this pair's sequence")
