"""Console output of a run (`sglab bench` and `sglab compare` print the same): the verdict table (levels x gains,
CIs, latency deltas, errors, economics, outcome; one gain column pair per registered metric), what served the
arms, then where the report is. The last line is grep-able (`verdict: promote|reject|inconclusive`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from sglab import metrics
from sglab.analysis.operating_point import level_phrase
from sglab.analysis.sequential import method_phrase
from sglab.analysis.verdict import next_step
from sglab.report.provenance import label_console, machine_lines, parity_line
from sglab.schema.result import RunResult
from sglab.schema.verdict import LOSS_PREFIX, Gain, Verdict, pct

# Column titles of the built-in metrics, as the table has always written them.
_TITLES = {"decode_tok_per_s": "decode gain", "output_tok_per_s": "output gain"}


def _title(name: str) -> str:
    if name in _TITLES:
        return _TITLES[name]
    try:
        return f"{metrics.label(name)} gain"
    except KeyError:
        return f"{name} gain"


# The level column's five-character head per load profile (what a level is); other profiles: their name, cut.
_LEVEL_HEADS = {"concurrency": "conc", "rate": "req/s"}


def level_label(v: Verdict) -> str:
    """What the verdict's levels are (the run's load profile); a verdict from before profiles: concurrency."""
    return v.operating_point.level_label if v.operating_point is not None else "concurrency"


def _ci(g: Gain) -> str:
    return f"[{pct(g.low)}, {pct(g.high)}]"


def format_table(v: Verdict, lints: Iterable[Any] = ()) -> str:
    """`lints`: the run's recorded lints (RunResult.lints), one line each under the table."""
    conf = f"{v.confidence:.0%} CI"
    names = list(v.levels[0].gains()) if v.levels else list(_TITLES)
    gain_head = " | ".join(f"{_title(n):>11} {conf:>17}" for n in names)
    label = level_label(v)
    level_head = _LEVEL_HEADS.get(label, label[:5])
    head = (f"{level_head:>5} {'gate':>4} | {gain_head} | "
            f"{'TTFT p99':>8} {'ITL p99':>8} | {'err b/c':>11} | {'accept':>6} {'b-even':>6} | outcome")
    lines = [f"{v.stack} run {v.run_id} ({v.kind}): {v.candidate_arm} vs {v.baseline_arm}, "
             f"gate {_words(v.metric)} ≥ {v.min_gain:+.1%} at {level_phrase(label, v.gating_levels)}, "
             f"{method_phrase(v.method)}", head, "-" * len(head)]
    for lv in v.levels:
        e = lv.economics
        gains = lv.gains()
        cells = " | ".join(f"{pct(gains[n].estimate) if n in gains else 'n/a':>11} "
                           f"{_ci(gains[n]) if n in gains else '':>17}" for n in names)
        acc = f"{e.accept_length:.2f}" if e.accept_length is not None else "-"
        brk = f"{e.break_even_accept_length:.2f}" if e.break_even_accept_length is not None else "-"
        errs = f"{lv.baseline_error_rate:.1%}/{lv.candidate_error_rate:.1%}"
        lines.append(f"{lv.concurrency:>5} {'yes' if lv.gating else 'no':>4} | {cells} | "
                     f"{pct(lv.ttft_p99.increase):>8} "
                     f"{pct(lv.itl_p99.increase):>8} | {errs:>11} | {acc:>6} {brk:>6} | {lv.outcome}"
                     + (f" (non-inferiority {-lv.non_inferiority_margin:+.1%})"
                        if lv.non_inferiority_margin is not None else ""))
    lines.append("")
    if v.design_note:
        lines.append(f"design: {v.design} (the gain {v.design_note})")
    lines += [f"nodes @{lv.concurrency}: {lv.node_effect.sentence()} (crossover, {lv.node_effect.pairs} pairs; not in "
              "the gain)" for lv in v.levels if lv.node_effect is not None]
    op = v.operating_point
    if op is not None and op.loss_text:
        head = "LOSES" if op.slower else "below the baseline within the noise"
        lines.append(f"{head}: {op.loss_text.removeprefix(LOSS_PREFIX)}")
    if op is not None and op.weighted_gain is not None:
        lines.append(f"traffic-weighted gain over the gated levels: {pct(op.weighted_gain)}")
    for level in sorted({c.level for c in v.categories}):
        found = [c for c in v.categories if c.level == level]
        parts = [f"{c.category} {pct(c.gain.estimate)} [{pct(c.gain.low)}, {pct(c.gain.high)}]"
                 + (f" accept {c.accept_length:.2f}" if c.accept_length is not None else "") for c in found]
        each = found[0].confidence
        said = f" ({each:.1%} each: Bonferroni over {len(found)})" if each is not None and len(found) > 1 else ""
        lines.append(f"categories @{level}{said}: " + ", ".join(parts))
    for lv in v.levels:
        e = lv.economics
        if e.verify_cycle_ms is None or e.baseline_step_ms is None:
            continue
        lines.append(f"economics @{lv.concurrency}: baseline step {e.baseline_step_ms:.2f} ms/token, verify cycle "
                     f"{e.verify_cycle_ms:.2f} ms ({e.candidate_itl_ms:.2f} ms x accept {e.accept_length:.2f}), "
                     f"break-even accept length {e.break_even_accept_length:.2f} vs measured {e.accept_length:.2f}")
    parity = parity_line(v.output_parity)  # sglab/report/provenance.py (none for results without answers)
    if parity:
        lines.append(parity)
    lines.append(f"crossover: {v.crossover.note}")
    if v.attribution is not None:
        for la in v.attribution.levels:
            parts = ", ".join(f"{c.label} {pct(c.estimate)} [{pct(c.low)}, {pct(c.high)}]" for c in la.components)
            lines.append(f"attribution @{la.concurrency}: {parts}")
    for g in v.guards:
        if not g.ok:
            lines.append(f"guard FAILED: {g.detail}" + (f" (fix: {g.fix})" if g.fix else ""))
    for b in v.blockers:
        lines.append(f"blocker: {b.detail}" + (f" (fix: {b.fix})" if b.fix else ""))
    for r in v.reasons:
        if not r.startswith("guard failed") and not any(r == b.detail for b in v.blockers):
            lines.append(f"note: {r}")
    lines += [f"lint at bench time: {lint.describe()}" for lint in lints]
    lines.append(v.sentence)
    step = next_step(v)
    if step:
        lines.append(f"next: {step}")
    lines.append(f"verdict: {v.outcome}")
    return "\n".join(lines)


def _words(metric: str) -> str:
    try:
        return metrics.label(metric)
    except KeyError:
        return metric


def render_console(result: RunResult, verdict: Verdict, report: Path | None = None) -> str:
    """The verdict table (and the run's recorded lints, what served its arms, the simulator-evidence label); the
    last line stays `verdict: <outcome>...` so scripts can grep it."""
    lines = format_table(verdict, result.lints).splitlines()
    at = lines.index(verdict.sentence) if verdict.sentence in lines else len(lines) - 1
    lines[at:at] = metric_disagreements(verdict)
    recorded = any(a.machine is not None for a in result.arms)  # results before it was recorded: as they were
    for line in machine_lines(result) if recorded else ():
        lines.insert(len(lines) - 1, line)
    if report is not None:
        lines.insert(len(lines) - 1, f"report: {report}")
    return "\n".join(label_console(lines, result, verdict))


def _loses(gain: Gain) -> bool:
    return gain.high is not None and gain.high < 0


def _shown(gain: Gain) -> str:
    return f"{pct(gain.estimate)} [{pct(gain.low)}, {pct(gain.high)}]"


def metric_disagreements(verdict: Verdict) -> list[str]:
    """One sentence per level where decode tok/s and output tok/s disagree (one is shown to lose, the other is
    not): the table shows both columns, and a reader of one would otherwise miss what the other says."""
    out = []
    for lv in verdict.levels:
        decode, output = lv.decode, lv.output
        if decode.estimate is None or output.estimate is None or _loses(decode) == _loses(output):
            continue
        losing, other = ("decode tok/s", "output tok/s") if _loses(decode) else ("output tok/s", "decode tok/s")
        gains = {"decode tok/s": decode, "output tok/s": output}
        out.append(f"at {level_phrase(level_label(verdict), lv.concurrency)} {losing} loses "
                   f"({_shown(gains[losing])}) but {other} is not shown to ({_shown(gains[other])}): decode tok/s "
                   "is each request's speed after its first token, output tok/s the round's throughput (time to "
                   f"first token and queueing included), so they can differ; the gate judges "
                   f"{metrics.label(verdict.metric)}")
    return out
