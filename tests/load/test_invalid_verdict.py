"""An invalid run (an arm died mid-run) is never promotable, even with `complete` flipped to true."""

from __future__ import annotations

from sglab.analysis import judge
from sglab.analysis.synthetic import synthetic_result

QUIET = {"round_cv": 0.001, "shared_cv": 0.0, "request_cv": 0.002}


def test_an_invalid_run_is_blocked_whatever_complete_says():
    result = synthetic_result(gain=0.059, **QUIET)
    assert judge(result).outcome == "promote"
    result.invalid_reason = "candidate server exited (SIGKILL) at concurrency 1, round 3/16"
    verdict = judge(result)  # complete is still true: only the invalid blocker stands
    assert verdict.outcome != "promote"
    blocker = next(c for c in verdict.blockers if c.name == "invalid")
    assert not blocker.ok and "candidate server exited" in blocker.detail
