"""PNG plots of a run (matplotlib, Agg): what a reader should see before reading any number."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from scipy import stats  # noqa: E402

from sglab.analysis.samples import per_round  # noqa: E402
from sglab import metrics  # noqa: E402
from sglab.schema.result import LevelResult, RunResult  # noqa: E402
from sglab.schema.verdict import Verdict  # noqa: E402
from sglab.analysis.operating_point import level_phrase  # noqa: E402
from sglab.report.table import level_label  # noqa: E402
from sglab.report.curves import category_plot, latency_throughput_plot  # noqa: E402
from sglab.report.plot_style import (OUTCOME_COLORS, arm_color, mark_evidence, save_figure,  # noqa: E402,F401
                                     verdict_slo)


def _axis(label: str) -> str:
    """An x-axis that counts levels, named as the profile measured them."""
    return {"rate": "rate (req/s)", "trace": "trace replay"}.get(label, label)


def _mean_ci(values: list[float], confidence: float) -> tuple[float, float]:
    """Mean and half-width of its t interval over rounds (0 below two rounds)."""
    a = np.asarray(values, dtype=float)
    if a.size < 2:
        return float(a.mean()) if a.size else math.nan, 0.0
    half = stats.t.ppf((1 + confidence) / 2, a.size - 1) * a.std(ddof=1) / math.sqrt(a.size)
    return float(a.mean()), float(half)


def metric_plot(result: RunResult, verdict: Verdict, path: Path, metric: str = "decode_tok_per_s") -> Path | None:
    """Left: a registered metric per arm per level with CIs over rounds. Right: the gain with its CI vs min-gain."""
    declared = metrics.get(metric)
    levels = sorted(result.levels, key=lambda lv: lv.concurrency)
    if not levels or not all(metric in lv.gains() for lv in verdict.levels):
        return None  # a metric the verdict did not judge (an SLO metric without an SLO)
    slo = verdict_slo(verdict)
    arms = [a.name for a in result.arms]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    mark_evidence(fig, result)
    xs = np.arange(len(levels))
    width = 0.8 / len(arms)
    for i, arm in enumerate(arms):
        means, halves = [], []
        for lv in levels:
            values = [r[arm] for r in per_round(lv, metric, slo).values() if arm in r]
            m, h = _mean_ci(values, verdict.confidence)
            means.append(m)
            halves.append(h)
        left.bar(xs + (i - (len(arms) - 1) / 2) * width, means, width, yerr=halves, capsize=4, label=arm,
                 color=arm_color(arm))
    label = level_label(verdict)
    left.set_xticks(xs, [str(lv.concurrency) for lv in levels])
    left.set_xlabel(_axis(label))
    per = " per request" if declared.from_requests else ""
    left.set_ylabel(f"{declared.label}{per} (mean over rounds)")
    left.set_title(f"{declared.label}, {verdict.confidence:.0%} CI over rounds")
    left.legend(fontsize=8)
    gains = [verdict.level(lv.concurrency) for lv in levels]
    level_gains = [g.gain(metric) if g else None for g in gains]

    def series(key: str) -> np.ndarray:
        return np.array([100 * getattr(g, key) if g and getattr(g, key) is not None else np.nan for g in level_gains])

    est, low, high = series("estimate"), series("low"), series("high")
    conc = [lv.concurrency for lv in levels]
    right.axhline(0, color="#999999", lw=1)
    right.axhline(100 * verdict.min_gain, color="#2E7D32", ls="--", lw=1, label=f"min gain {verdict.min_gain:+.1%}")
    color = arm_color(verdict.candidate_arm)
    if len(conc) > 1:
        right.fill_between(conc, low, high, color=color, alpha=0.25, label=f"{verdict.confidence:.0%} CI")
    right.errorbar(conc, est, yerr=[est - low, high - est], fmt="o-", color=color, capsize=5,
                   label="gain" if len(conc) > 1 else f"gain, {verdict.confidence:.0%} CI")
    for c, g in zip(conc, gains):
        if g is not None and g.gating:
            right.annotate("gate", (c, est[conc.index(c)]), textcoords="offset points", xytext=(6, 6), fontsize=8)
    if verdict.crossover.status == "between" and verdict.crossover.concurrency:
        right.axvline(verdict.crossover.concurrency, color="#C62828", ls=":", lw=1,
                      label=f"crossover ≈ {verdict.crossover.concurrency:.1f}{' req/s' if label == 'rate' else ''}")
    right.set_xscale("log", base=2)
    right.set_xticks(conc, [str(c) for c in conc])
    right.set_xlabel(_axis(label))
    right.set_ylabel(f"{verdict.candidate_arm} vs {verdict.baseline_arm}, {declared.label} gain (%)")
    right.set_title("gain per level")
    right.legend(fontsize=8)
    return save_figure(fig, path)


def _cdf(ax: plt.Axes, values: list[float], label: str, color: str) -> None:
    if not values:
        return
    a = np.sort(np.asarray(values))
    ax.plot(a, np.arange(1, a.size + 1) / a.size, label=f"{label} (n={a.size})", color=color)


def _report_level(result: RunResult, verdict: Verdict) -> LevelResult | None:
    for c in verdict.gating_levels + [lv.concurrency for lv in result.levels]:
        lv = result.level(c)
        if lv is not None and lv.requests:
            return lv
    return None


def latency_plot(result: RunResult, verdict: Verdict, path: Path) -> Path | None:
    """TTFT and ITL CDFs of both arms overlaid, at the first gating level with request samples."""
    level = _report_level(result, verdict)
    if level is None:
        return None
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    mark_evidence(fig, result)
    for arm in (verdict.baseline_arm, verdict.candidate_arm):
        ok = [r for r in level.requests if r.arm == arm and not r.warmup and r.round_index >= 0 and r.error is None]
        _cdf(left, [r.ttft_ms for r in ok if r.ttft_ms is not None], arm, arm_color(arm))
        _cdf(right, [g for r in ok for g in r.itl_ms], arm, arm_color(arm))
    for ax, name in ((left, "TTFT (ms)"), (right, "inter-token latency (ms)")):
        ax.set_xlabel(name)
        ax.set_ylabel("fraction of samples ≤ x")
        ax.axhline(0.99, color="#999999", ls=":", lw=1)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
    where = level_phrase(level_label(verdict), level.concurrency)
    left.set_title(f"TTFT CDF at {where}")
    right.set_title(f"ITL CDF at {where}")
    return save_figure(fig, path)


def accept_plot(result: RunResult, verdict: Verdict, path: Path) -> Path | None:
    """Per-request accept length of the candidate, with the break-even line it must clear."""
    level = _report_level(result, verdict)
    if level is None:
        return None
    values = [r.accept_length for r in level.requests if r.arm == verdict.candidate_arm and not r.warmup
              and r.round_index >= 0 and r.error is None and r.accept_length is not None]
    if not values:
        return None
    econ = verdict.level(level.concurrency).economics
    fig, ax = plt.subplots(figsize=(7, 4))
    mark_evidence(fig, result)
    ax.hist(values, bins=min(30, max(8, len(values) // 4)), color=arm_color(verdict.candidate_arm), alpha=0.8,
            label=f"per-request accept length (n={len(values)})")
    if econ.break_even_accept_length is not None:
        ax.axvline(econ.break_even_accept_length, color="#C62828", ls="--", lw=2,
                   label=f"break-even {econ.break_even_accept_length:.2f}")
    if econ.accept_length is not None:
        ax.axvline(econ.accept_length, color="#222222", lw=1.5,
                   label=f"measured mean {econ.accept_length:.2f} ({econ.accept_length_source})")
    ax.set_xlabel("accept length (tokens per verify cycle)")
    ax.set_ylabel("requests")
    ax.set_title(f"accept length at {level_phrase(level_label(verdict), level.concurrency)}: right of the red line, "
                 "speculation pays")
    ax.legend(fontsize=8)
    return save_figure(fig, path)


def attribution_plot(verdict: Verdict, path: Path) -> Path | None:
    att = verdict.attribution
    if att is None or not att.levels:
        return None
    keys = ["confounds", "speculation", "interaction", "total"]
    colors = ["#55A868", "#C44E52", "#8172B3", "#DD8452"]
    fig, ax = plt.subplots(figsize=(8, 4.2))
    xs = np.arange(len(att.levels))
    width = 0.2
    for i, key in enumerate(keys):
        comps = [lv.component(key) for lv in att.levels]
        est = np.array([100 * c.estimate for c in comps])
        err = np.array([[100 * (c.estimate - c.low) if c.low is not None else 0 for c in comps],
                        [100 * (c.high - c.estimate) if c.high is not None else 0 for c in comps]])
        bars = ax.bar(xs + (i - 1.5) * width, est, width, yerr=err, capsize=3, color=colors[i], label=comps[0].label)
        ax.bar_label(bars, labels=[f"{v:+.1f}" for v in est], fontsize=7, padding=2)
    ax.axhline(0, color="#999999", lw=1)
    ax.set_xticks(xs, [str(lv.concurrency) for lv in att.levels])
    ax.set_xlabel(_axis(level_label(verdict)))
    ax.set_ylabel("gain over baseline (percentage points)")
    ax.set_title(f"where the gain comes from ({att.confidence:.0%} CI over rounds)")
    ax.legend(fontsize=8)
    return save_figure(fig, path)


def write_plots(result: RunResult, verdict: Verdict, out_dir: Path) -> dict[str, Path]:
    """Every plot that has data, by name -> file."""
    made = {
        "decode": metric_plot(result, verdict, out_dir / "decode_tok_per_s.png"),
        "latency": latency_plot(result, verdict, out_dir / "latency_cdf.png"),
        "accept": accept_plot(result, verdict, out_dir / "accept_length.png"),
        "attribution": attribution_plot(verdict, out_dir / "attribution.png"),
    }
    for m in metrics.all_metrics():  # the built-in output metric has no plot of its own (as before)
        if m.name not in ("decode_tok_per_s", "output_tok_per_s"):
            made[m.name] = metric_plot(result, verdict, out_dir / f"{m.name}.png", m.name)
    made["curve"] = latency_throughput_plot(result, verdict, out_dir / "latency_throughput.png")
    made["categories"] = category_plot(verdict, out_dir / "categories.png")
    return {name: p for name, p in made.items() if p is not None}


decode_plot = metric_plot  # the name before the metric registry
