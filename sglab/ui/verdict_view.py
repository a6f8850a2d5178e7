"""The verdict as the A/B tab shows it: every registry metric's gain with its CI, and the verdict's sentence."""

from __future__ import annotations

from dataclasses import dataclass, field

WAITING = "waiting: a verdict needs completed pseudo-rounds from both arms"


@dataclass(frozen=True)
class LevelView:
    gains: dict[str, str | None] = field(default_factory=dict)  # metric name -> "+x% [lo, hi]"
    ttft_p99_delta: str | None = None
    itl_p99_delta: str | None = None
    wording: str = WAITING

    @property
    def decode_gain(self) -> str | None:
        return self.gains.get("decode_tok_per_s")

    @property
    def output_gain(self) -> str | None:
        return self.gains.get("output_tok_per_s")


def _pct(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{round(value * 100, 1) + 0.0:+.1f}%"  # + 0.0 turns -0.0 into +0.0


def gain_text(gain) -> str | None:
    """"+x% [lo, hi]" of a `Gain`, or None while it has no estimate."""
    if gain is None or gain.estimate is None:
        return None
    return f"{_pct(gain.estimate)} [{_pct(gain.low)}, {_pct(gain.high)}]"


def level_view(verdict, level: int) -> LevelView:
    """One concurrency level of a `sglab.schema.verdict.Verdict` (None = nothing to judge yet)."""
    lv = verdict.level(level) if verdict is not None else None
    if lv is None:
        return LevelView()
    if lv.gating:
        wording = verdict.sentence
    else:
        wording = f"not gating (policy levels {verdict.gating_levels}): {lv.outcome}; overall: {verdict.sentence}"
    return LevelView(
        gains={name: gain_text(gain) for name, gain in lv.gains().items()},
        ttft_p99_delta=None if lv.ttft_p99.increase is None else _pct(lv.ttft_p99.increase),
        itl_p99_delta=None if lv.itl_p99.increase is None else _pct(lv.itl_p99.increase),
        wording=wording,
    )
