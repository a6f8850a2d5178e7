"""The A/B tab's live plot: the gated metric's gain after each pseudo-round, with its confidence band.

`gain_series` turns a result into JSON points (served at /sglab/plot.json); `PLOT_SCRIPT` draws them in
an SVG above the tab's table, client-side, with no external script (the UI may have no internet).
The band is the verdict's own anytime-valid confidence sequence (`sglab.analysis.sequential.bounds`, its
checks included) over the paired per-round log-ratios: what the tab draws is what the verdict decides on,
and watching it round after round does not inflate the error rate the way a fixed-n interval recomputed at
every look does.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from sglab.analysis.samples import comparison_arms, paired
from sglab.analysis.sequential import bounds
from sglab.schema.result import RunResult

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
