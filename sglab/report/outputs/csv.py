"""`--output csv`: rounds.csv (one row per arm per round, every registered metric) and verdict.csv
(one row per level: each metric's gain with its interval, outcome), for spreadsheets and notebooks. Both end
with `producer` and `time_scale` columns: simulator rows' tok/s and durations are at that time scale, and
simulator evidence promotes no GPU stack.

Locust's own per-endpoint CSVs are written at bench time from the live Locust run (sglab/load/reports.py).
"""

from __future__ import annotations

import csv
from pathlib import Path

from sglab import metrics
from sglab.analysis.provenance import producer_of
from sglab.report.outputs.registry import OutputContext, OutputFormat, register

ROUNDS_FILE = "rounds.csv"
VERDICT_FILE = "verdict.csv"
_ROUND_FIELDS = ("level", "round_index", "position", "arm", "warmup", "started_at_s", "duration_s", "requests",
                 "errors", "output_tokens", "ttft_ms_p50", "itl_ms_p50", "itl_ms_p99", "client_accept_length",
                 "server_accept_length", "complete")
_EVIDENCE_FIELDS = ("producer", "time_scale")


def _write(path: Path, header: list[str], rows: list[list[object]]) -> Path:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(["" if v is None else v for v in row] for row in rows)
    tmp.replace(path)
    return path


def _render(ctx: OutputContext) -> str:
    ctx.out_dir.mkdir(parents=True, exist_ok=True)
    producer = producer_of(ctx.result)
    evidence = [producer.kind, producer.time_scale]  # what produced every row, and its time scale
    recorded = [m for m in metrics.all_metrics() if not m.uses_slo]  # SLO metrics exist only as judged
    rounds = [[getattr(r, f) for f in _ROUND_FIELDS] + [m.round_value(r) for m in recorded] + evidence
              for lv in sorted(ctx.result.levels, key=lambda x: x.concurrency) for r in lv.rounds]
    rounds_path = _write(ctx.out_dir / ROUNDS_FILE, [*_ROUND_FIELDS, *(m.name for m in recorded), *_EVIDENCE_FIELDS],
                         rounds)
    judged = set(ctx.verdict.levels[0].gains()) if ctx.verdict.levels else set()
    names = [m.name for m in metrics.all_metrics() if not m.uses_slo or m.name in judged]
    header = ["concurrency", "gating", "outcome"] + [f"{n}_{part}" for n in names
                                                     for part in ("rounds", "gain", "low", "high")]
    header += _EVIDENCE_FIELDS
    rows = []
    for lv in ctx.verdict.levels:
        gains = lv.gains()
        row: list[object] = [lv.concurrency, lv.gating, lv.outcome]
        for n in names:
            g = gains.get(n)
            row += [g.rounds, g.estimate, g.low, g.high] if g else [None] * 4
        rows.append(row + evidence)
    verdict_path = _write(ctx.out_dir / VERDICT_FILE, header, rows)
    return f"csv: {rounds_path}\ncsv: {verdict_path}"


CSV = register(OutputFormat("csv", "rounds.csv and verdict.csv in the output directory", _render))
