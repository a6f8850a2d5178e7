"""Console output of a run (`sglab bench` and `sglab compare` print the same): the verdict table, what served
the arms, then where the report is."""

from __future__ import annotations

from pathlib import Path

from sglab import metrics
from sglab.analysis.operating_point import level_phrase
from sglab.report.provenance import label_console, machine_lines
from sglab.report.table import format_table, level_label
from sglab.schema.result import RunResult
from sglab.schema.verdict import Gain, Verdict, pct


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
