"""Operating-point plots: the latency–throughput curve of both arms and the per-category bars.

The curve shows what one number cannot: where along the load axis the candidate buys throughput
with latency, and where it stops paying. The category bars show which kinds of prompt the draft
accepts well ("code +21%, chat −4%"). Both are written as PNGs (`--output plots`) and inlined as SVG
in report.html.
"""

from __future__ import annotations

import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from sglab.analysis.operating_point import level_label  # noqa: E402
from sglab.analysis.samples import arm_stats, per_round  # noqa: E402
from sglab.report.plot_style import arm_color, mark_evidence, save_figure, verdict_slo  # noqa: E402
from sglab.schema.result import RunResult  # noqa: E402
from sglab.schema.verdict import Verdict  # noqa: E402

INLINE = ("curve", "categories")  # the plots report.html inlines as SVG


def _level_mean(result: RunResult, level: int, arm: str, metric: str, verdict: Verdict) -> float | None:
    lv = result.level(level)
    values = [r[arm] for r in per_round(lv, metric, verdict_slo(verdict)).values() if arm in r] if lv else []
    return float(np.mean(values)) if values else None


def _curve_figure(result: RunResult, verdict: Verdict) -> plt.Figure | None:
    levels = sorted(lv.concurrency for lv in result.levels)
    if len(levels) < 2:
        return None
    arms = [verdict.baseline_arm, verdict.candidate_arm]
    judged_goodput = all("goodput_tok_per_s" in lv.gains() for lv in verdict.levels)
    right_metric = "goodput_tok_per_s" if judged_goodput else "output_tok_per_s"
    label = level_label(result)
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    mark_evidence(fig, result)
    drawn = False
    for arm in arms:
        xs, ys, shown = [], [], []
        for c in levels:
            tput = _level_mean(result, c, arm, "output_tok_per_s", verdict)
            ttft = arm_stats(result.level(c), arm).ttft_p99_ms
            if tput is not None and ttft is not None:
                xs.append(tput)
                ys.append(ttft)
                shown.append(c)
        if xs:
            drawn = True
            left.plot(xs, ys, "o-", color=arm_color(arm), label=arm)
            for x, y, c in zip(xs, ys, shown):
                left.annotate(str(c), (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
        per_level = [(c, _level_mean(result, c, arm, right_metric, verdict)) for c in levels]
        per_level = [(c, v) for c, v in per_level if v is not None]
        if per_level:
            drawn = True
            right.plot([c for c, _ in per_level], [v for _, v in per_level], "o-", color=arm_color(arm), label=arm)
    if not drawn:
        plt.close(fig)
        return None
    for lv in verdict.levels:
        if lv.concurrency in (verdict.operating_point.losing if verdict.operating_point else []):
            right.axvline(lv.concurrency, color="#C62828", ls=":", lw=1)
    left.set_xlabel("output tok/s (aggregate, mean over rounds)")
    left.set_ylabel("TTFT p99 (ms)")
    left.set_title(f"latency vs throughput (points: {label})")
    left.grid(alpha=0.3)
    left.legend(fontsize=8)
    right.set_xscale("log", base=2)
    right.set_xticks(levels, [str(c) for c in levels])
    right.set_xlabel(label)
    right.set_ylabel("goodput tok/s (requests meeting the SLO)" if judged_goodput else "output tok/s")
    right.set_title(("goodput" if judged_goodput else "throughput") + " per level (dotted: the candidate loses)")
    right.grid(alpha=0.3)
    right.legend(fontsize=8)
    return fig


def _category_figure(verdict: Verdict) -> plt.Figure | None:
    if not verdict.categories:
        return None
    gated = [c for c in verdict.gating_levels if any(g.level == c for g in verdict.categories)]
    level = gated[0] if gated else verdict.categories[0].level
    rows = [g for g in verdict.categories if g.level == level and g.gain.estimate is not None]
    if not rows:
        return None
    names = [g.category for g in rows]
    est = np.array([100 * g.gain.estimate for g in rows])
    low = np.array([100 * g.gain.low if g.gain.low is not None else 100 * g.gain.estimate for g in rows])
    high = np.array([100 * g.gain.high if g.gain.high is not None else 100 * g.gain.estimate for g in rows])
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    xs = np.arange(len(rows))
    colors = ["#2E7D32" if e >= 0 else "#C62828" for e in est]
    bars = left.bar(xs, est, color=colors, yerr=[est - low, high - est], capsize=4)
    left.bar_label(bars, labels=[f"{e:+.1f}%" for e in est], fontsize=7, padding=2)
    left.axhline(0, color="#999999", lw=1)
    left.set_xticks(xs, names, rotation=20)
    left.set_ylabel(f"{rows[0].gain.metric} gain (%)")
    left.set_title(f"gain by prompt category at level {level} ({verdict.confidence:.0%} CI over rounds)")
    accept = np.array([g.accept_length if g.accept_length is not None else np.nan for g in rows])
    a_low = np.array([g.accept_low if g.accept_low is not None else a for g, a in zip(rows, accept)])
    a_high = np.array([g.accept_high if g.accept_high is not None else a for g, a in zip(rows, accept)])
    right.bar(xs, accept, color=arm_color(verdict.candidate_arm), yerr=[accept - a_low, a_high - accept], capsize=4)
    right.set_xticks(xs, names, rotation=20)
    right.set_ylabel("candidate accept length (tokens / verify)")
    right.set_title("accept length by category")
    return fig


def latency_throughput_plot(result: RunResult, verdict: Verdict, path: Path) -> Path | None:
    fig = _curve_figure(result, verdict)
    return save_figure(fig, path) if fig is not None else None


def category_plot(verdict: Verdict, path: Path) -> Path | None:
    fig = _category_figure(verdict)
    return save_figure(fig, path) if fig is not None else None


def inline_svg(name: str, result: RunResult, verdict: Verdict) -> str | None:
    """The plot as an SVG element for report.html (None when it has no data)."""
    fig = _curve_figure(result, verdict) if name == "curve" else _category_figure(verdict)
    if fig is None:
        return None
    fig.tight_layout()
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg")
    plt.close(fig)
    text = buffer.getvalue()
    return text[text.index("<svg"):]
