"""The HTML report: one self-contained page (plots embedded as base64; the PNGs also sit beside it)."""

from __future__ import annotations

import base64
import html
from pathlib import Path

from sglab import metrics
from sglab.analysis.operating_point import level_phrase
from sglab.analysis.sequential import method_sentence
from sglab.analysis.provenance import producer_of
from sglab.report.plots import INLINE, OUTCOME_COLORS, SIMULATOR_COLOR, inline_svg
from sglab.report.provenance import (SIMULATOR_EVIDENCE, evidence_next_step, machine_text, parity_line, parity_rows,
                                     real_evidence_fix, simulator_producer, time_scale_text, unverified_text)
from sglab.report.console import level_label
from sglab.schema.result import RunResult
from sglab.schema.verdict import LOSS_PREFIX, LevelVerdict, Verdict

CAPTIONS = {
    "decode": "Decode tok/s per level for both arms, and the candidate's gain with its confidence interval.",
    "latency": "TTFT and inter-token latency distributions, both arms overlaid.",
    "accept": "The candidate's per-request accept length against the break-even accept length.",
    "attribution": "The gain split into the candidate's declared differences, speculation and their interaction.",
    "curve": "Left: TTFT p99 against aggregate output tok/s, one point per level, both arms. Right: goodput "
             "(with an SLO) or output tok/s per level.",
    "categories": "The gain and the candidate's accept length per prompt category.",
}

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2rem auto;max-width:1150px;color:#222;
padding:0 1rem}
h1{font-size:1.4rem;margin-bottom:.2rem} h2{font-size:1.1rem;margin-top:2rem;border-bottom:1px solid #ddd}
.verdict{font-size:1.15rem;padding:.8rem 1rem;border-left:6px solid;background:#f7f7f7;margin:1rem 0}
table{border-collapse:collapse;font-size:.9rem;margin:.5rem 0}
td,th{border:1px solid #ddd;padding:.3rem .6rem;text-align:right}
th{background:#f0f0f0} td.l,th.l{text-align:left} .bad{color:#C62828} .ok{color:#2E7D32} .muted{color:#777}
figure{margin:1rem 0} figure img{max-width:100%;border:1px solid #eee} figcaption{color:#555;font-size:.9rem}
code{background:#f3f3f3;padding:0 .2rem;font-size:.85rem;word-break:break-all}
"""


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x:+.1%}"


def _num(x: float | None, fmt: str = ".2f") -> str:
    return "–" if x is None else format(x, fmt)


def _e(text: object) -> str:
    return html.escape(str(text))


def _level_row(lv: LevelVerdict) -> str:
    d, o, e = lv.decode, lv.output, lv.economics
    cls = {"win": "ok", "lose": "bad"}.get(lv.outcome, "")
    cells = [
        str(lv.concurrency), "yes" if lv.gating else "no",
        f"{_num(d.baseline_mean, '.1f')} → {_num(d.candidate_mean, '.1f')}",
        f"{_pct(d.estimate)} [{_pct(d.low)}, {_pct(d.high)}]",
        f"{_pct(o.estimate)} [{_pct(o.low)}, {_pct(o.high)}]",
        _pct(lv.ttft_p99.increase), _pct(lv.itl_p99.increase),
        f"{lv.baseline_error_rate:.1%} / {lv.candidate_error_rate:.1%}",
        _num(e.baseline_step_ms), _num(e.verify_cycle_ms), _num(e.accept_length), _num(e.break_even_accept_length),
        str(d.rounds),
    ]
    tds = "".join(f"<td>{_e(c)}</td>" for c in cells)
    return f"<tr>{tds}<td class='l {cls}'>{_e(lv.outcome)}</td></tr>"


def _levels_table(v: Verdict, scale_mark: str = "") -> str:
    """`scale_mark`: what the tok/s are at (simulator evidence: its time scale)."""
    conf = f"{v.confidence:.0%} CI"
    head = [_level_head(v), "gates", f"decode tok/s b → c{scale_mark}", f"decode gain [{conf}]",
            f"output tok/s gain [{conf}]",
            "TTFT p99 Δ", "ITL p99 Δ", "errors b / c", "baseline step ms", "verify cycle ms", "accept length",
            "break-even accept", "rounds", "outcome"]
    ths = "".join(f"<th>{_e(h)}</th>" for h in head)
    return f"<table><tr>{ths}</tr>{''.join(_level_row(lv) for lv in v.levels)}</table>"


def _level_head(v: Verdict) -> str:
    return {"concurrency": "conc.", "rate": "req/s"}.get(level_label(v), level_label(v))


def _checks(v: Verdict) -> str:
    items = []
    for g in v.guards:
        items.append(f"<li class='{'ok' if g.ok else 'bad'}'>{'✔' if g.ok else '✘'} guard {_e(g.name)}: {_e(g.detail)}"
                     + (f" <span class='muted'>fix: {_e(g.fix)}</span>" if g.fix else "") + "</li>")
    for b in v.blockers:
        items.append(f"<li class='bad'>✘ blocker {_e(b.name)}: {_e(b.detail)}"
                     + (f" <span class='muted'>fix: {_e(b.fix)}</span>" if b.fix else "") + "</li>")
    return "<ul>" + "".join(items) + "</ul>" if items else "<p class='muted'>no guards evaluated</p>"


def _attribution(v: Verdict) -> str:
    if v.attribution is None:
        return ""
    rows = []
    for la in v.attribution.levels:
        cells = "".join(f"<td>{_pct(c.estimate)} [{_pct(c.low)}, {_pct(c.high)}]</td>" for c in la.components)
        rows.append(f"<tr><td>{la.concurrency}</td>{cells}<td>{la.rounds}</td></tr>")
    labels = [c.label for c in v.attribution.levels[0].components] if v.attribution.levels else []
    head = "".join(f"<th>{_e(label)}</th>" for label in [_level_head(v), *labels, "rounds"])
    return (f"<h2>Attribution</h2><p>Four arms per round; parts are percentage points of the baseline and add up "
            f"to the total.</p><table><tr>{head}</tr>{''.join(rows)}</table>")


def _figure(name: str, path: Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    return (f"<figure><img alt='{_e(name)}' src='data:image/png;base64,{data}'>"
            f"<figcaption>{_e(CAPTIONS.get(name, ''))} <a "
            f"href='{_e(path.name)}'>{_e(path.name)}</a></figcaption></figure>")


def _run_details(result: RunResult) -> str:
    rows = [("stack", result.stack), ("run id", result.run_id), ("kind", result.kind),
            ("started", result.started_at), ("finished", result.finished_at or "–"),
            ("complete", "yes" if result.complete else f"no ({result.incomplete_reason or 'no reason'})"),
            ("target", result.target.kind), ("git commit", result.git_commit or "–")]
    rows += [(f"arm {a.name} ({a.role})", f"{a.config_hash[:12]} · {a.launch_command}") for a in result.arms]
    rows.append(("produced by", producer_of(result).describe()))
    rows += [(f"machine {a.name}", machine_text(a.machine)) for a in result.arms]
    rows += [(f"unverified {a.name}", unverified_text(a.unverified)) for a in result.arms if a.unverified]
    if result.confounds:
        rows.append(("confounds", "; ".join(c.describe() for c in result.confounds)))
    body = "".join(f"<tr><th class='l'>{_e(k)}</th><td class='l'><code>{_e(v)}</code></td></tr>" for k, v in rows)
    return f"<table>{body}</table>"


def _parity(verdict: Verdict) -> str:
    """Temperature-0 answers: the candidate's against the baseline's, and the baseline's A/A, per level."""
    rows = parity_rows(verdict.output_parity)
    if not rows:
        return ""
    body = "".join(f"<tr><td>{level}</td><td class='l'>{_e(cand)}</td><td class='l'>{_e(aa)}</td></tr>"
                   for level, cand, aa in rows)
    return (f"<h2>Output parity</h2><p>{_e(parity_line(verdict.output_parity))}. Speculative decoding is lossless: "
            "at temperature 0 the candidate should answer as the baseline does; on real GPUs batch-variant numerics "
            "make a few differences normal, and the A/A column shows how many the baseline has by itself.</p>"
            f"<table><tr><th>level</th><th>candidate = baseline</th><th>A/A: baseline = itself, other rounds</th>"
            f"</tr>{body}</table>")


def _loss_banner(verdict: Verdict) -> str:
    """The levels where the candidate loses, above everything else (a PROMOTE at one level hides them)."""
    op = verdict.operating_point
    if op is None or not (op.loss_text or op.not_gated_text):
        return ""
    parts = []
    if op.loss_text and op.slower:
        parts.append(f"<div class='verdict' style='border-color:#C62828'><b class='bad'>LOSES</b> — "
                     f"{_e(op.loss_text.removeprefix(LOSS_PREFIX))}</div>")
    elif op.loss_text:
        parts.append(f"<p class='muted'>{_e(op.loss_text)}</p>")
    if op.not_gated_text:
        parts.append(f"<p class='muted'>{_e(op.not_gated_text)}</p>")
    return "".join(parts)


def _simulator_banner(result: RunResult) -> str:
    """Above the verdict: simulator numbers are a timing model at a time scale, and promote no GPU stack."""
    producer = simulator_producer(result)
    if producer is None:
        return ""
    return (f"<div class='verdict sim' style='border-color:{SIMULATOR_COLOR}'><b style='color:{SIMULATOR_COLOR}'>"
            f"SIMULATOR EVIDENCE"
            f"</b> — {_e(SIMULATOR_EVIDENCE.split(': ', 1)[1])}. These numbers come from "
            f"{_e(producer.describe())}: {_e(time_scale_text(producer))}. To judge your GPUs, "
            f"{_e(real_evidence_fix(result.stack))}.</div>")


def _categories(verdict: Verdict) -> str:
    if not verdict.categories:
        return ""
    rows = []
    for g in verdict.categories:
        cls = "ok" if (g.gain.estimate or 0) >= 0 else "bad"
        accept = (f"{_num(g.accept_length)} [{_num(g.accept_low)}, {_num(g.accept_high)}]"
                  if g.accept_length is not None else "–")
        rows.append(f"<tr><td>{g.level}</td><td class='l'>{_e(g.category)}</td><td class='{cls}'>"
                    f"{_pct(g.gain.estimate)} [{_pct(g.gain.low)}, {_pct(g.gain.high)}]</td><td>{accept}</td>"
                    f"<td>{g.gain.rounds}</td><td>{g.baseline_requests} / {g.candidate_requests}</td></tr>")
    head = "".join(f"<th>{h}</th>" for h in ("level", "category", f"gain [{verdict.confidence:.0%} CI]",
                                              "accept length [CI]", "rounds", "requests b / c"))
    return f"<h2>By prompt category</h2><table><tr>{head}</tr>{''.join(rows)}</table>"


def _inline(result: RunResult, verdict: Verdict, plots: dict[str, Path]) -> str:
    figures = []
    for name in INLINE:
        if name in plots:
            svg = inline_svg(name, result, verdict)
            if svg:
                figures.append(f"<figure>{svg}<figcaption>{_e(CAPTIONS.get(name, ''))} "
                               f"<a href='{_e(plots[name].name)}'>{_e(plots[name].name)}</a></figcaption></figure>")
    return "".join(figures)


def _levels_title(v: Verdict) -> str:
    label = level_label(v)
    return "rate level (req/s)" if label == "rate" else f"{label} level"


def render_html(result: RunResult, verdict: Verdict, plots: dict[str, Path]) -> str:
    simulated = simulator_producer(result)
    # a green PROMOTE reads as promotable: simulator evidence is shown in the simulator banner's colour
    color = SIMULATOR_COLOR if simulated is not None else OUTCOME_COLORS.get(verdict.outcome, "#555")
    outcome = verdict.outcome.upper() + (" (simulator evidence)" if simulated is not None else "")
    scale_mark = (f" (simulator, {simulated.time_scale or 1:g}x real time)" if simulated is not None else "")
    step = evidence_next_step(result, verdict)
    sentence = verdict.sentence.removeprefix(f"{verdict.outcome}: ")
    inline = _inline(result, verdict, plots)
    plots = {name: path for name, path in plots.items() if name not in INLINE}
    economics = "".join(
        f"<li>{level_phrase(level_label(verdict), lv.concurrency)}: baseline step "
        f"{_num(lv.economics.baseline_step_ms)} ms/token; verify cycle {_num(lv.economics.verify_cycle_ms)} ms = "
        f"{_num(lv.economics.candidate_itl_ms)} ms × accept {_num(lv.economics.accept_length)}; break-even accept "
        f"length {_num(lv.economics.break_even_accept_length)} vs measured {_num(lv.economics.accept_length)}</li>"
        for lv in verdict.levels if lv.economics.verify_cycle_ms is not None)
    figures = "".join(_figure(name, path) for name, path in plots.items())
    notes = "".join(f"<li>{_e(r)}</li>" for r in verdict.reasons)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>sglab · {_e(result.stack)} · {_e(result.run_id)}</title>
<style>{CSS}</style></head><body>
<h1>{_e(result.stack)}: {_e(verdict.candidate_arm)} vs {_e(verdict.baseline_arm)}</h1>
<div class="muted">run {_e(result.run_id)} · {_e(result.kind)} · {_e(result.started_at)}</div>
{_simulator_banner(result)}
<div class="verdict" style="border-color:{color}"><b style="color:{color}">{_e(outcome)}</b> —
{_e(sentence)}</div>
{_loss_banner(verdict)}
{f"<p>Next: <code>{_e(step)}</code></p>" if step else ""}
<h2>Per {_e(_levels_title(verdict))}</h2>
<p>Gate: {_e(metrics.label(verdict.metric))} gain ≥
{verdict.min_gain:+.1%} at {_e(level_phrase(level_label(verdict), verdict.gating_levels))};
{_e(method_sentence(verdict.method, verdict.confidence))}. Crossover: {_e(verdict.crossover.note)}.</p>
{_levels_table(verdict, scale_mark)}
{inline}
{_categories(verdict)}
{_parity(verdict)}
<h2>Speculation economics</h2><ul>{economics or "<li class='muted'>no accept length measured</li>"}</ul>
<h2>Guards and blockers</h2>{_checks(verdict)}
{f"<ul>{notes}</ul>" if notes else ""}
{_attribution(verdict)}
<h2>Plots</h2>{figures or "<p class='muted'>no samples to plot</p>"}
<h2>Run</h2>{_run_details(result)}
</body></html>
"""
