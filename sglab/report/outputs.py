"""Output formats of `sglab compare` and `sglab report` (`--output NAME`): one small interface, one registry, and
the built-in formats.

An output format turns a run and its (recomputed) verdict into what the command prints, writing any files it
makes into the output directory. Adding one is one `register(OutputFormat(...))` declaration, here or in a
plug-in; `--output NAME` picks it.

`csv` writes rounds.csv (one row per arm per round, every registered metric) and verdict.csv (one row per level:
each metric's gain with its interval, outcome), for spreadsheets and notebooks. Both end with `producer` and
`time_scale` columns: simulator rows' tok/s and durations are at that time scale, and simulator evidence promotes
no GPU stack. Locust's own per-endpoint CSVs are written at bench time from the live Locust run
(sglab/load/runner.py). `json` is the recomputed verdict (sglab.schema.verdict.Verdict) with an `evidence`
field: what produced the numbers, at which time scale, and whether they can promote a GPU stack.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sglab import metrics
from sglab.analysis.provenance import producer_of
from sglab.report import REPORT_FILE, write_report
from sglab.report.console import render_console
from sglab.report.provenance import evidence_line, evidence_record, simulator_producer
from sglab.schema.result import RunResult
from sglab.schema.verdict import Verdict


@dataclass(frozen=True)
class OutputContext:
    result: RunResult
    verdict: Verdict
    run_dir: Path  # the run's directory (where its result.json is)
    out_dir: Path  # where file outputs go (--out; default: the run directory)


@dataclass(frozen=True)
class OutputFormat:
    name: str
    help: str
    render: Callable[[OutputContext], str]  # what the command prints; files go into ctx.out_dir


_FORMATS: dict[str, OutputFormat] = {}


def register(output: OutputFormat) -> OutputFormat:
    if output.name in _FORMATS:
        raise ValueError(f"output format {output.name!r} is already declared")
    _FORMATS[output.name] = output
    return output


def unregister(name: str) -> None:
    _FORMATS.pop(name, None)


@contextmanager
def registered(output: OutputFormat) -> Iterator[OutputFormat]:
    """Declare an output format for the duration of a block (tests, plug-ins)."""
    register(output)
    try:
        yield output
    finally:
        unregister(output.name)


def names() -> list[str]:
    return list(_FORMATS)


def get(name: str) -> OutputFormat:
    try:
        return _FORMATS[name]
    except KeyError:
        raise KeyError(f"unknown output format {name!r}; choose from: {', '.join(_FORMATS)}") from None


def render(names_csv: str, ctx: OutputContext) -> str:
    """Render the comma-separated formats in order (unknown names raise KeyError before anything runs)."""
    chosen = [get(n.strip()) for n in names_csv.split(",") if n.strip()]
    if not chosen:
        raise KeyError(f"no output format given; choose from: {', '.join(_FORMATS)}")
    return "\n".join(text for text in (o.render(ctx) for o in chosen) if text)


# `--output console` (default of `compare`): the verdict table; the last line is `verdict: <outcome>`.
def _render_console(ctx: OutputContext) -> str:
    report = ctx.run_dir / REPORT_FILE
    return render_console(ctx.result, ctx.verdict, report if report.exists() else None)


CONSOLE = register(OutputFormat("console", "the verdict table (levels x gains, CIs, guards)", _render_console))


# `--output csv`: rounds.csv and verdict.csv.
ROUNDS_FILE = "rounds.csv"
VERDICT_FILE = "verdict.csv"
_ROUND_FIELDS = ("level", "round_index", "position", "arm", "warmup", "started_at_s", "duration_s", "requests",
                 "errors", "output_tokens", "ttft_ms_p50", "itl_ms_p50", "itl_ms_p99", "client_accept_length",
                 "server_accept_length", "complete")
_EVIDENCE_FIELDS = ("producer", "time_scale")


def _write_csv(path: Path, header: list[str], rows: list[list[object]]) -> Path:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(["" if v is None else v for v in row] for row in rows)
    tmp.replace(path)
    return path


def _render_csv(ctx: OutputContext) -> str:
    ctx.out_dir.mkdir(parents=True, exist_ok=True)
    producer = producer_of(ctx.result)
    evidence = [producer.kind, producer.time_scale]  # what produced every row, and its time scale
    recorded = [m for m in metrics.all_metrics() if not m.uses_slo]  # SLO metrics exist only as judged
    rounds = [[getattr(r, f) for f in _ROUND_FIELDS] + [m.round_value(r) for m in recorded] + evidence
              for lv in sorted(ctx.result.levels, key=lambda x: x.concurrency) for r in lv.rounds]
    rounds_path = _write_csv(ctx.out_dir / ROUNDS_FILE,
                             [*_ROUND_FIELDS, *(m.name for m in recorded), *_EVIDENCE_FIELDS], rounds)
    judged = set(ctx.verdict.levels[0].gains()) if ctx.verdict.levels else set()
    judged_names = [m.name for m in metrics.all_metrics() if not m.uses_slo or m.name in judged]
    header = ["concurrency", "gating", "outcome"] + [f"{n}_{part}" for n in judged_names
                                                     for part in ("rounds", "gain", "low", "high")]
    header += _EVIDENCE_FIELDS
    rows = []
    for lv in ctx.verdict.levels:
        gains = lv.gains()
        row: list[object] = [lv.concurrency, lv.gating, lv.outcome]
        for n in judged_names:
            g = gains.get(n)
            row += [g.rounds, g.estimate, g.low, g.high] if g else [None] * 4
        rows.append(row + evidence)
    verdict_path = _write_csv(ctx.out_dir / VERDICT_FILE, header, rows)
    return f"csv: {rounds_path}\ncsv: {verdict_path}"


CSV = register(OutputFormat("csv", "rounds.csv and verdict.csv in the output directory", _render_csv))


# `--output html` (default of `report`): the self-contained report.html with its PNGs.
def _render_html(ctx: OutputContext) -> str:
    path = write_report(ctx.result, ctx.out_dir, ctx.verdict)
    producer = simulator_producer(ctx.result)
    label = f"\n{evidence_line(producer)}" if producer is not None else ""
    return f"{ctx.verdict.sentence}{label}\nreport: {path}"


HTML = register(OutputFormat("html", "report.html (plots embedded) in the output directory", _render_html))


# `--output json`: the verdict as JSON, with `evidence`.
def _render_json(ctx: OutputContext) -> str:
    return json.dumps({**ctx.verdict.model_dump(mode="json"), "evidence": evidence_record(ctx.result)}, indent=1)


JSON = register(OutputFormat("json", "the verdict as JSON (with `evidence`: what produced the numbers)", _render_json))


# `--output plots`: the PNG plots alone (decode speed and gain, latency CDFs, accept length, attribution).
def _render_plots(ctx: OutputContext) -> str:
    from sglab.report.plots import write_plots  # matplotlib only when asked

    ctx.out_dir.mkdir(parents=True, exist_ok=True)
    made = write_plots(ctx.result, ctx.verdict, ctx.out_dir)
    return "\n".join(f"plot {name}: {path}" for name, path in made.items()) or "no samples to plot"


PLOTS = register(OutputFormat("plots", "PNG plots in the output directory", _render_plots))
