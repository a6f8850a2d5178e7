"""The benchmark Job's stack outputs, read back from the result summary it stored (results/sink.summary_of):
the verdict, per-level gains with their intervals, and the break-even numbers."""

from __future__ import annotations

from typing import Any

from sglab.deploy.naming import PENDING
from sglab.results.sink import read_summary


def _level_rows(verdict: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    metric = verdict.get("metric") or "decode_tok_per_s"
    gains, economics = [], []
    for level in verdict.get("levels") or []:
        if not isinstance(level, dict):
            continue
        gain = level.get("decode" if metric == "decode_tok_per_s" else "output") or {}
        gains.append({"concurrency": level.get("concurrency"), "gating": level.get("gating"),
                      "outcome": level.get("outcome"), "metric": metric, "gain": gain.get("estimate"),
                      "ci_low": gain.get("low"), "ci_high": gain.get("high"), "rounds": gain.get("rounds")})
        econ = level.get("economics") or {}
        economics.append({key: econ.get(key) for key in ("concurrency", "baseline_step_ms", "verify_cycle_ms",
                                                          "accept_length", "break_even_accept_length",
                                                          "accept_margin")})
    return gains, economics


def summarize_result(summary_json: str | None) -> dict[str, Any]:
    """Stack outputs from the result summary the Job wrote (result_sink.summary_of); `pending` while there is
    none, `invalid` if it is not one (the outputs say why instead of failing the deployment)."""
    empty = {"verdict": PENDING, "sentence": "", "run_id": "", "levels": [], "break_even": []}
    summary = read_summary(summary_json)
    if summary is None:
        return empty
    if isinstance(summary, str):
        return {**empty, "verdict": "invalid", "sentence": summary}
    verdict = summary.get("verdict") if isinstance(summary.get("verdict"), dict) else {}
    outcome = verdict.get("outcome")
    gains, economics = _level_rows(verdict)
    return {"verdict": outcome if isinstance(outcome, str) else PENDING,
            "sentence": str(verdict.get("sentence") or ""), "run_id": summary["run_id"],
            "levels": gains, "break_even": economics}


