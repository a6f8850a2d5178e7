"""Rows of the A/B tab's table: one per arm and concurrency level, then the candidate-vs-baseline row.

The metric columns come from the metric registry (`sglab.metrics`): each declared metric gets a column
with its value per arm and its gain on the comparison row, so a new metric shows up here without an edit.
Arm rows use every measured (non-warm-up) request so far, including the pseudo-round still in
progress; the gain row is the analysis stage's verdict over the completed pseudo-rounds.
"""

from __future__ import annotations

from sglab import metrics
from sglab.load.summary import arm_level_summary, round_sample
from sglab.schema.result import RequestSample, RunResult
from sglab.ui.live import LiveRun, with_server_accept
from sglab.ui.verdict_view import level_view

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
    """An open-loop run's rows (sglab/ui/open_loop_run.py): per level, each arm with its arrivals' accuracy and
    the in-flight cap as its users, then the gain over the paired rounds and where the schedule is."""
    from sglab.ui.open_loop_run import arrivals_text, level_text

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
