"""Real result documents for the in-cluster tests: synthetic runs judged by sglab.analysis."""

from __future__ import annotations

from sglab.analysis.synthetic import synthetic_result
from sglab.analysis.verdict import judge
from sglab.schema.result import RunResult


def judged_result(stack: str = "eagle-nccl-ll", *, run_id: str = "20260101T000000Z-abc123", gain: float = 0.059,
                  rounds: int = 6, seed: int = 0) -> RunResult:
    """Small on purpose (short rounds): the full-size document is ~5 MB of JSON."""
    result = synthetic_result(stack=stack, run_id=run_id, gain=gain, rounds=rounds, seed=seed,
                              round_duration_s=1.0, output_tokens=16)
    result.verdict = judge(result)
    return result
