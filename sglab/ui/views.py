"""What the A/B tab shows: its table, its per-category table and its live plot, from the samples and the verdict.

One module because every view reads the verdict the same way (`gain_text`, `level_view`), so the tab says what
the saved result and the report will say. Pure: no Locust, no I/O.

- **The verdict as the tab words it**: every registry metric's gain with its CI, and the verdict's sentence.
- **The table**: one row per arm and concurrency level, then the candidate-vs-baseline row. The metric columns
  come from the metric registry (`sglab.metrics`): each declared metric gets a column with its value per arm and
  its gain on the comparison row, so a new metric shows up here without an edit. Arm rows use every measured
  (non-warm-up) request so far, including the pseudo-round still in progress; the gain row is the analysis
  stage's verdict over the completed pseudo-rounds.
- **The per-category table**: gain and accept length for each prompt category. The numbers are the verdict's
  own (`Verdict.categories`, computed by `sglab.analysis.attribution` over the completed pseudo-rounds). Empty
  when no request carries a category (e.g. random-word prompts).
- **The live plot**: the gated metric's gain after each pseudo-round, with its confidence band.
  `gain_series` turns a result into JSON points (served at /sglab/plot.json); `PLOT_SCRIPT` draws them in an
  SVG above the tab's table, client-side, with no external script (the UI may have no internet). The band is
  the verdict's own anytime-valid confidence sequence (`sglab.analysis.sequential.bounds`, its checks
  included) over the paired per-round log-ratios: what the tab draws is what the verdict decides on, and
  watching it round after round does not inflate the error rate the way a fixed-n interval recomputed at
  every look does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sglab import metrics
from sglab.analysis.samples import comparison_arms, paired
from sglab.analysis.sequential import bounds
from sglab.load.summary import arm_level_summary, round_sample
from sglab.schema.result import RequestSample, RunResult
from sglab.ui.live import LiveRun, arrivals_text, level_text, with_server_accept


# ---- the verdict as the tab words it -----------------------------------------------------------------------

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


# ---- the table: one row per arm and level, then the gain row -----------------------------------------------

# The built-in metrics keep the column keys and titles the tab has always had.
LEGACY_COLUMNS = {
    "decode_tok_per_s": ("decode_tok_s", "Decode tok/s (mean)"),
    "output_tok_per_s": ("output_tok_s", "Output tok/s (aggregate)"),
}


def metric_column(metric: metrics.Metric) -> tuple[str, str]:
    """(row key, column title) of one registry metric."""
    return LEGACY_COLUMNS.get(metric.name, (metric.name, f"{metric.label[:1].upper()}{metric.label[1:]} "
                                                         f"({metric.unit})"))


def live_metrics() -> list[metrics.Metric]:
    """The registry metrics a live window can compute: SLO-based ones need the SLO the verdict judges under."""
    return [m for m in metrics.all_metrics() if not m.uses_slo]


def table_columns(level_label: str | None = None) -> list[tuple[str, str]]:
    """The tab's columns; an open-loop session (`level_label`, the profile's: "rate (req/s)", "trace") adds its
    level and the arrivals' accuracy, and its users are the in-flight cap."""
    head = [("arm", "Arm"), ("users", "Users"), ("requests", "Requests"), ("errors", "Errors")]
    if level_label is not None:
        head = [("arm", "Arm"), ("level", level_label[:1].upper() + level_label[1:]),
                ("users", "Users (in-flight cap)"), ("arrivals", "Arrivals (late = > 20 ms behind schedule)"),
                ("requests", "Requests"), ("errors", "Errors")]
    return [
        *head,
        *(metric_column(m) for m in live_metrics()),
        ("ttft_p50", "TTFT p50 ms"), ("ttft_p99", "TTFT p99 ms"), ("itl_p50", "ITL p50 ms"), ("itl_p99", "ITL p99 ms"),
        ("accept_client", "Accept length (client)"), ("accept_server", "Accept length (server)"),
        ("verdict", "Gain [95% CI] / verdict"),
    ]


def _round(value: float | None, digits: int = 1) -> float | None:
    return None if value is None else round(value, digits)


def arm_row(arm: str, level: int, samples: list[RequestSample], server_accept: float | None,
            *, show_level: bool, level_name: str | None = None) -> dict:
    """Each metric over the whole span so far (first measured request's start to the last one's end)."""
    timed = [s for s in samples if s.e2e_ms is not None]
    span_s = max(s.start_s + s.e2e_ms / 1000.0 for s in timed) - min(s.start_s for s in timed) if timed else 0.0
    whole = round_sample(samples, level=level, round_index=0, position=0, arm=arm, warmup=False,
                         started_at_s=0.0, duration_s=span_s, server_accept_length=None)
    summary = with_server_accept(arm_level_summary(samples, [whole]), server_accept)
    window = metrics.RoundWindow(requests=samples, started_at_s=0.0, duration_s=span_s)
    accept = summary.accept_length
    return {
        "arm": f"{arm} ({level_name or f'c={level}'})" if show_level else arm,
        "users": level,
        "requests": summary.requests,
        "errors": summary.errors,
        **{metric_column(m)[0]: _round(m.compute_round(window)) for m in live_metrics()},
        "ttft_p50": _round(summary.ttft_ms.p50),
        "ttft_p99": _round(summary.ttft_ms.p99),
        "itl_p50": _round(summary.itl_ms.p50, 2),
        "itl_p99": _round(summary.itl_ms.p99, 2),
        "accept_client": _round(accept.client_mean, 3) if accept else None,
        "accept_server": _round(accept.server_mean, 3) if accept else None,
        "verdict": None,
    }


def gain_row(level: int, verdict, show_level: bool, windows: int, *, level_name: str | None = None,
             rounds_word: str = "pseudo-rounds") -> dict:
    """The running gain of every metric with its CI and the verdict wording, from the analysis stage's judge."""
    view = level_view(verdict, level)
    label = "candidate vs baseline" + (f" ({level_name or f'c={level}'})" if show_level else "")
    return {
        "arm": label,
        "users": level,
        "requests": None,
        "errors": None,
        **{metric_column(m)[0]: view.gains.get(m.name) for m in live_metrics()},
        "ttft_p50": None,
        "ttft_p99": view.ttft_p99_delta,
        "itl_p50": None,
        "itl_p99": view.itl_p99_delta,
        "accept_client": None,
        "accept_server": None,
        "verdict": f"{view.wording} ({windows} {rounds_word})",
    }


def table_rows(run: LiveRun, result: RunResult, verdict) -> list[dict]:
    samples = [s for s in run.snapshot() if not s.warmup]
    levels = sorted({s.level for s in samples})
    show_level = len(levels) > 1
    rows: list[dict] = []
    for level in levels:
        for info in run.arms:
            arm_samples = [s for s in samples if s.level == level and s.arm == info.name]
            if arm_samples:
                rows.append(arm_row(info.name, level, arm_samples, run.server_accept_length.get(info.name),
                                    show_level=show_level))
        judged_level = result.level(level)
        windows = len({r.round_index for r in judged_level.rounds}) if judged_level else 0
        rows.append(gain_row(level, verdict, show_level, windows))
    return rows


def open_loop_rows(run, result: RunResult, verdict) -> list[dict]:
    """An open-loop run's rows (`OpenLoopRun`, sglab/ui/live.py): per level, each arm with its arrivals' accuracy and
    the in-flight cap as its users, then the gain over the paired rounds and where the schedule is."""
    samples = [s for s in run.snapshot() if not s.warmup]
    levels = [lv for lv in run.level_order() if any(s.level == lv for s in samples)]
    show_level = len(levels) > 1
    driver = run.driver
    rows: list[dict] = []
    for level in levels:
        name = level_text(run.profile, level)
        for info in run.arms:
            arm_samples = [s for s in samples if s.level == level and s.arm == info.name]
            if arm_samples:
                row = arm_row(info.name, level, arm_samples, run.server_accept_length.get(info.name),
                              show_level=show_level, level_name=name)
                stats = run.arrivals(level, info.name, include_running=True)
                rows.append({**row, "level": name, "users": run.users, "arrivals": arrivals_text(stats)})
        paired = run.paired_rounds(level)
        row = gain_row(level, verdict if paired else None, show_level, paired, level_name=name,
                       rounds_word="paired rounds")
        if not paired:
            row["verdict"] = "waiting: a verdict needs rounds that both arms completed (0 paired rounds)"
        here = driver is not None and getattr(driver, "level", None) == level
        rows.append({**row, "level": name, "users": run.users,
                     "arrivals": driver.position() if here else "level done"})
    return rows


# ---- the per-category table --------------------------------------------------------------------------------

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


# ---- the live plot -----------------------------------------------------------------------------------------

PLOT_PATH = "/sglab/plot.json"
DEFAULT_METRIC = "decode_tok_per_s"


def _gain(log_value: float) -> float | None:
    return math.expm1(log_value) if math.isfinite(log_value) else None


def gain_series(result: RunResult | None) -> dict:
    """{"metric", "min_gain", "confidence", "levels": [{"concurrency", "points": [{round, rounds, gain, low, high}]}]}.

    `low`/`high` are None while the band is still unbounded (the first few rounds)."""
    policy = result.policy if result is not None else None
    metric = (policy.metric if policy is not None else None) or DEFAULT_METRIC
    confidence = (policy.confidence if policy is not None else None) or 0.95
    out: dict[str, Any] = {"metric": metric, "min_gain": policy.min_gain if policy is not None else None,
           "confidence": confidence, "levels": []}
    if result is None or len(result.arms) < 2:
        return out
    arms = list(comparison_arms(result))
    for level in result.levels:
        rounds, data = paired(level, metric, arms)
        if not rounds:
            continue
        log_ratios = np.log(data[:, 1] / data[:, 0])
        stats, lower, upper = bounds(log_ratios, confidence=confidence)
        mean = stats.mean
        out["levels"].append({"concurrency": level.concurrency, "points": [
            {"round": r, "rounds": i + 1, "gain": _gain(float(mean[i])), "low": _gain(float(lower[i])),
             "high": _gain(float(upper[i]))} for i, r in enumerate(rounds)]})
    return out


# Draws above the A/B tab's table; polls the JSON every 2 s like Locust's own stats poll.
PLOT_SCRIPT = """
<script>
(() => {
  const url = "." + "%(path)s";
  const W = 720, H = 220, L = 56, R = 12, T = 24, B = 30;
  const NS = "http://www.w3.org/2000/svg";
  const el = (tag, attrs, text) => {
    const node = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    return node;
  };
  const pct = v => (v * 100).toFixed(1) + "%%";
  function draw(box, data) {
    const svg = el("svg", {width: W, height: H, id: "sglab-ab-plot-svg", role: "img"});
    const level = (data.levels || [])[0];
    svg.appendChild(el("text", {x: L, y: 14, "font-size": 12, fill: "currentColor"},
      level ? `${data.metric} gain at c=${level.concurrency}, band: ${Math.round(data.confidence * 100)}%% ` +
              `confidence sequence (anytime-valid)`
            : "gain plot: waiting for completed pseudo-rounds from both arms"));
    if (!level) { box.replaceChildren(svg); return; }
    const pts = level.points;
    const vals = [0, data.min_gain || 0].concat(pts.flatMap(p => [p.gain, p.low, p.high].filter(v => v !== null)));
    let lo = Math.min(...vals), hi = Math.max(...vals);
    const pad = (hi - lo) * 0.1 || 0.01; lo -= pad; hi += pad;
    const n = Math.max(pts[pts.length - 1].rounds, 2);
    const x = r => L + (W - L - R) * (r - 1) / (n - 1);
    const y = v => T + (H - T - B) * (hi - v) / (hi - lo);
    const clip = v => v === null ? null : Math.min(hi, Math.max(lo, v));
    const banded = pts.filter(p => p.low !== null && p.high !== null);
    if (banded.length) {
      const top = banded.map(p => `${x(p.rounds)},${y(clip(p.high))}`);
      const bottom = banded.slice().reverse().map(p => `${x(p.rounds)},${y(clip(p.low))}`);
      svg.appendChild(el("polygon", {points: top.concat(bottom).join(" "), fill: "rgba(25,118,210,0.25)",
                                     id: "sglab-ab-band"}));
    }
    for (const [v, label, dash, left] of [[0, "0%%", "2,3", true], [data.min_gain, "min gain", "6,3", false]]) {
      if (v === null || v === undefined) continue;
      svg.appendChild(el("line", {x1: L, x2: W - R, y1: y(v), y2: y(v), stroke: "gray", "stroke-dasharray": dash}));
      svg.appendChild(left ? el("text", {x: L - 4, y: y(v) + 4, "font-size": 10, fill: "gray", "text-anchor": "end"},
                                label)
                           : el("text", {x: W - R, y: y(v) - 4, "font-size": 10, fill: "gray", "text-anchor": "end"},
                                `${label} ${pct(v)}`));
    }
    svg.appendChild(el("polyline", {points: pts.map(p => `${x(p.rounds)},${y(p.gain)}`).join(" "), fill: "none",
                                    stroke: "rgb(25,118,210)", "stroke-width": 2, id: "sglab-ab-gain"}));
    const last = pts[pts.length - 1];
    svg.appendChild(el("text", {x: L, y: H - 8, "font-size": 11, fill: "currentColor"},
      `${last.rounds} pseudo-rounds: ${pct(last.gain)} [` +
      `${last.low === null ? "unbounded" : pct(last.low)}, ${last.high === null ? "unbounded" : pct(last.high)}]`));
    box.replaceChildren(svg);
  }
  async function tick() {
    const tab = [...document.querySelectorAll("[role=tab]")].find(t => t.getAttribute("aria-selected") === "true");
    let box = document.getElementById("sglab-ab-plot");
    if (!tab || tab.textContent.trim() !== "%(title)s") { if (box) box.remove(); return; }
    const table = document.querySelector("table");
    if (!table) return;
    if (!box) {
      box = document.createElement("div");
      box.id = "sglab-ab-plot";
      box.style.margin = "8px 0";
      table.parentElement.insertBefore(box, table);
    }
    try {
      const response = await fetch(url, {credentials: "same-origin"});
      if (response.ok) draw(box, await response.json());
    } catch (e) { /* the next poll retries */ }
  }
  setInterval(tick, 2000);
})();
</script>
"""


def plot_script(tab_title: str) -> str:
    return PLOT_SCRIPT % {"path": PLOT_PATH, "title": tab_title}
