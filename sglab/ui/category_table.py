"""Rows of the A/B tab's per-category table: gain and accept length for each prompt category.

The numbers are the verdict's own (`Verdict.categories`, computed by `sglab.analysis.categories` over the
completed pseudo-rounds), so the tab shows what the saved result and the report will say. Empty when no
request carries a category (e.g. random-word prompts).
"""

from __future__ import annotations

from sglab.ui.verdict_view import gain_text

CATEGORY_TAB_KEY = "sglab-ab-categories"
CATEGORY_TAB_TITLE = "A/B by category"


def category_columns() -> list[tuple[str, str]]:
    return [
        ("category", "Category"), ("users", "Users"), ("requests", "Requests (baseline / candidate)"),
        ("metric", "Metric"), ("gain", "Gain [CI]"), ("accept_length", "Accept length, candidate [CI]"),
        ("rounds", "Pseudo-rounds"),
    ]


def _accept_text(value: float | None, low: float | None, high: float | None) -> str | None:
    if value is None:
        return None
    if low is None or high is None:
        return f"{value:.2f}"
    return f"{value:.2f} [{low:.2f}, {high:.2f}]"


def _gain_text(gain) -> str:
    if gain.estimate is None:
        return "waiting for a pseudo-round with both arms"
    if gain.low is None or gain.high is None:
        return f"{gain_text(gain).split(' [')[0]} (an interval needs 2 paired pseudo-rounds)"
    return gain_text(gain)


def category_rows(verdict) -> list[dict]:
    """One row per (level, category) of the verdict; the level shows in the label when there are several."""
    categories = list(verdict.categories) if verdict is not None else []
    show_level = len({c.level for c in categories}) > 1
    return [{
        "category": f"{c.category} (c={c.level})" if show_level else c.category,
        "users": c.level,
        "requests": f"{c.baseline_requests} / {c.candidate_requests}",
        "metric": c.gain.metric,
        "gain": _gain_text(c.gain),
        "accept_length": _accept_text(c.accept_length, c.accept_low, c.accept_high),
        "rounds": c.gain.rounds,
    } for c in categories]
