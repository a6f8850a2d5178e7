"""PNG plots of a run (matplotlib, Agg): what a reader should see before reading any number.

Per-metric plots (decode speed and gain, latency CDFs, accept length, attribution) and the operating-point plots:
the latency-throughput curve of both arms (where along the load axis the candidate buys throughput with latency,
and where it stops paying) and the per-category bars ("code +21%, chat -4%"), which report.html also inlines as
SVG. Every plot shares the arms' colours, the outcome colours and the simulator-evidence title.
"""

from __future__ import annotations

import io
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from scipy import stats  # noqa: E402

from sglab import metrics  # noqa: E402
from sglab.analysis.operating_point import level_label as profile_label, level_phrase  # noqa: E402
from sglab.analysis.samples import arm_stats, per_round  # noqa: E402
from sglab.report.console import level_label  # noqa: E402
from sglab.report.provenance import SIMULATOR_EVIDENCE, simulator_producer  # noqa: E402
from sglab.schema.result import LevelResult, RunResult  # noqa: E402
from sglab.schema.verdict import Verdict  # noqa: E402

COLORS = {"baseline": "#4C72B0", "candidate": "#DD8452", "baseline+confounds": "#55A868",
          "candidate-confounds": "#C44E52", "baseline-b": "#8172B3"}
OUTCOME_COLORS = {"promote": "#2E7D32", "reject": "#C62828", "inconclusive": "#EF6C00"}
SIMULATOR_COLOR = "#E65100"  # simulator evidence, in the report's banner and the plots' titles


def arm_color(arm: str) -> str:
    return COLORS.get(arm, "#555555")


def evidence_title(result: RunResult) -> str | None:
    """The title a plot of simulator numbers carries (a PNG travels without its report)."""
    producer = simulator_producer(result)
    if producer is None:
        return None
    scale = producer.time_scale if producer.time_scale is not None else 1.0
    return f"{SIMULATOR_EVIDENCE} (tok/s and ms at time scale {scale:g}, {scale:g}x real time)"


def mark_evidence(fig: plt.Figure, result: RunResult) -> None:
    title = evidence_title(result)
    if title is not None:
        fig.suptitle(title, color=SIMULATOR_COLOR, fontsize=10)


def save_figure(fig: plt.Figure, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def verdict_slo(verdict: Verdict) -> metrics.SloTargets | None:
    """The SLO the verdict judged under (its policy, as the stack spells it)."""
    slo = verdict.policy.get("slo") if verdict.policy else None
    if not isinstance(slo, dict):
        return None
    get = lambda key: slo.get(key, slo.get(key.replace("-", "_")))  # noqa: E731
    return metrics.SloTargets(ttft_ms=get("ttft-ms"), tpot_ms=get("tpot-ms"), itl_ms=get("itl-ms"),
                              itl_quantile=get("itl-quantile") or 0.99)


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
    label = profile_label(result)
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
