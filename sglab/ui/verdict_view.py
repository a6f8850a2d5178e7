"""The verdict as the A/B tab shows it: gains with their CI and the verdict's own sentence."""

from __future__ import annotations

from dataclasses import dataclass

WAITING = "waiting: a verdict needs completed pseudo-rounds from both arms"


@dataclass(frozen=True)
class LevelView:
    decode_gain: str | None
    output_gain: str | None
    ttft_p99_delta: str | None
    itl_p99_delta: str | None
    wording: str


def _pct(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{round(value * 100, 1) + 0.0:+.1f}%"  # + 0.0 turns -0.0 into +0.0


def _gain(gain) -> str | None:
    if gain is None or gain.estimate is None:
        return None
    return f"{_pct(gain.estimate)} [{_pct(gain.low)}, {_pct(gain.high)}]"


def level_view(verdict, level: int) -> LevelView:
    """One concurrency level of a `sglab.analysis.verdict.Verdict` (None = nothing to judge yet)."""
    lv = verdict.level(level) if verdict is not None else None
    if lv is None:
        return LevelView(None, None, None, None, WAITING)
    if lv.gating:
        wording = verdict.sentence
    else:
        wording = f"not gating (policy levels {verdict.gating_levels}): {lv.outcome}; overall: {verdict.sentence}"
    return LevelView(
        decode_gain=_gain(lv.decode),
        output_gain=_gain(lv.output),
        ttft_p99_delta=None if lv.ttft_p99.increase is None else _pct(lv.ttft_p99.increase),
        itl_p99_delta=None if lv.itl_p99.increase is None else _pct(lv.itl_p99.increase),
        wording=wording,
    )
