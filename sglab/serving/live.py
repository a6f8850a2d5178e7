"""The judge's loop: after every window, read all windows since the start from Prometheus, decide, log.

Stateless by design: each look recomputes every window from Prometheus (one range query per metric and
arm), so a restarted Job resumes where the evidence is, and nothing the judge held in memory can drift
from what Prometheus shows. Each look is logged with its evidence (a JSON line) and summarised on the
console; the loop ends at a decision or after max-windows windows (then `continue`: undecided).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from sglab.serving.judge import Decision, decide
from sglab.serving.prometheus import Prometheus
from sglab.serving.spec import JudgeSpec
from sglab.serving.windows import Window, fetch_windows
from sglab.core.untrusted import printable


@dataclass
class DecisionLog:
    """Where each look goes: a JSONL file (local runs), a stream (the pod's log), the console lines."""

    path: Path | None = None
    stream: TextIO | None = None
    console: Callable[[str], None] = print
    records: list[dict[str, Any]] = field(default_factory=list)

    def look(self, what: str, decision: Decision, windows: list[Window], spec: JudgeSpec) -> None:
        newest = windows[-1] if windows else None
        record = {"time": time.time(), "kind": what, "stack": spec.stack, "windows": len(windows),
                  "window_s": spec.window_s, "window_end": newest.end if newest else None,
                  **decision.evidence(),
                  "newest_window": {arm: {"requests": a.requests, "errors": a.errors,
                                          "http_responses": a.http_responses, "http_errors": a.http_errors,
                                          "error_rate": a.error_rate,
                                          "decode_tok_per_s": a.decode_tok_per_s, "accept_length": a.accept_length,
                                          "ttft_p99_s": a.ttft_p99_s, "itl_p99_s": a.itl_p99_s}
                                    for arm, a in newest.arms.items()} if newest else {}}
        self.records.append(record)
        line = json.dumps(record, default=str)
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(line + "\n")
        if self.stream is not None:
            self.stream.write(line + "\n")
            self.stream.flush()
        self.console(summary(len(windows), decision))


def summary(windows: int, d: Decision) -> str:
    guards = [g for g in d.guards + d.categories if g.status in ("fail", "pending") and g.estimate is not None]
    state = "; ".join(printable(g.detail, limit=200) for g in guards) or "guards ok"
    return (f"window {windows}: {printable(d.reason, limit=400)} [{state}] -> {d.outcome}"
            if d.outcome != "continue" else f"window {windows}: {printable(d.reason, limit=400)} [{state}]")


def judge_live(prom: Prometheus, spec: JudgeSpec, arms: dict[str, dict[str, str]], *, start: float,
               log: DecisionLog, clock: Callable[[], float] | None = None,
               sleep: Callable[[float], None] | None = None) -> tuple[Decision, list[Window]]:
    """Look after every window until a decision or max-windows windows have passed since `start`.
    `time.sleep` is looked up when called: under Locust (the rehearsal) gevent has patched it, and a sleep
    bound before the patch would stall every Locust user."""
    clock = clock or (lambda: time.time())
    sleep = sleep or (lambda s: time.sleep(s))
    seen = -1
    decision: Decision | None = None
    windows: list[Window] = []
    while True:
        now = clock()
        windows = fetch_windows(prom, arms, start=start, now=now, window_s=spec.window_s, settle_s=spec.settle_s,
                                category_label=spec.category_label, http=spec.http_responses)
        if len(windows) != seen:
            seen = len(windows)
            decision = decide(windows, spec)
            if windows:
                log.look("canary", decision, windows, spec)
            if decision.outcome != "continue":
                return decision, windows
        if len(windows) >= spec.max_windows:
            assert decision is not None
            decision.reason = (f"undecided after {len(windows)} windows ({decision.windows_skipped} could not be "
                               f"paired): {decision.reason}")
            return decision, windows
        next_end = start + (len(windows) + 1) * spec.window_s + spec.settle_s
        sleep(max(0.05, min(next_end - clock(), spec.window_s)))
