"""The live judge's decision over paired windows: promote, abort or continue, with its evidence.

The gain is the bench's: per window, log(canary decode tok/s / stable decode tok/s), decided by the same
anytime-valid confidence sequence (`sglab.analysis.sequential.sequential_test`), so looking after every
window keeps its error rate. Guards are non-inferiority checks on their own confidence sequences, read the
same way: a guard shown beyond its margin aborts at once; at a promote, every guard's estimate must lie
within its margin (as the bench's guards), else the judge waits for more windows.

- TTFT / ITL p99: log(canary p99 / stable p99) against log(1 + max-increase);
- error rate: canary minus stable, against max-increase (absolute);
- accept length: log(canary accept length / the bench's break-even); below it speculation stops paying
  before tok/s shows it;
- categories (requests carrying SGLang custom labels): each category with at least category-min-share of
  the canary's tokens gets its own gain sequence; one shown below -category-max-loss aborts.
Outcomes: promote (exit 0), abort (1), continue (3); Argo's Job provider reads 0 as Successful, any other
code as Failed (abort).

The loop (`judge_live`): after every window, read all windows since the start from Prometheus, decide, log.
Stateless by design: each look recomputes every window from Prometheus (one range query per metric and
arm), so a restarted Job resumes where the evidence is, and nothing the judge held in memory can drift
from what Prometheus shows. Each look is logged with its evidence (a JSON line) and summarised on the
console; the loop ends at a decision or after max-windows windows (then `continue`: undecided).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, TextIO

from sglab.analysis.sequential import SequentialRecord, sequential_test
from sglab.core.errors import NO, OK, UNDECIDED
from sglab.core.untrusted import printable
from sglab.serving.prometheus import Prometheus
from sglab.serving.spec import JudgeSpec
from sglab.serving.windows import ArmWindow, Window, fetch_windows

Outcome = Literal["promote", "abort", "continue"]
EXIT_CODES: dict[str, int] = {"promote": OK, "abort": NO, "continue": UNDECIDED}  # sglab/core/errors.py
CANARY, STABLE = "canary", "stable"


@dataclass
class GuardResult:
    name: str
    status: Literal["pass", "fail", "pending", "off"]
    estimate: float | None  # in the guard's unit (relative increase, absolute rate, relative gain)
    bound: float | None  # the confidence-sequence bound that decides it (upper for an increase)
    margin: float | None
    windows: int
    detail: str


@dataclass
class Decision:
    outcome: Outcome
    reason: str
    windows_used: int
    windows_skipped: int
    gain: float | None
    gain_low: float | None
    gain_high: float | None
    sequential: str  # the main sequence's own decision (promote/reject/futile/continue/inconclusive)
    guards: list[GuardResult] = field(default_factory=list)
    categories: list[GuardResult] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.outcome]

    def evidence(self) -> dict[str, Any]:
        return asdict(self)


def usable(window: Window, spec: JudgeSpec, arms: tuple[str, str]) -> str | None:
    """Why a window cannot be paired (None: it can)."""
    for arm in arms:
        data = window.arms.get(arm)
        if data is None:
            return f"no {arm} series"
        if data.served < spec.min_requests_per_window:
            return f"{arm} served {data.served:.0f} requests (< {spec.min_requests_per_window})"
        if data.decode_tok_per_s is None:
            return f"no {arm} inter-token latency"
    return None


def failing(windows: list[Window], spec: JudgeSpec, arms: tuple[str, str]) -> str | None:
    """The first window the judge cannot read as healthy evidence (None: none): an arm's series absent or
    non-physical (ArmWindow.problems), or a canary that served requests without a token (every request of the
    window failed: skipping it would hide the failing canary)."""
    for window in windows:
        for arm in arms:
            data = window.arms.get(arm)
            if data is not None and data.problems:
                return f"window ending {window.end:.0f}: {arm}: {data.problems[0]}"
        canary = window.arms.get(arms[0])
        if canary is not None and canary.served >= spec.min_requests_per_window and canary.decode_tok_per_s is None:
            return (f"window ending {window.end:.0f}: {arms[0]} served {canary.served:.0f} requests without a token "
                    "(every request failed)")
    return None


def _log_ratio(a: float | None, b: float | None) -> float | None:
    return math.log(a / b) if a is not None and b is not None and a > 0 and b > 0 else None


def _sequence(values: list[float], spec: JudgeSpec, *, min_gain: float, futility: bool = False) -> SequentialRecord:
    return sequential_test(values, min_gain=min_gain, confidence=spec.confidence, min_rounds=spec.min_windows,
                           max_rounds=spec.max_windows, futility=futility, checks=spec.checks)


def _increase_guard(name: str, values: list[float], margin: float, spec: JudgeSpec, *, log_scale: bool) -> GuardResult:
    """Non-inferiority of a quantity where more is worse: values are canary minus stable (logs or absolute)."""
    if len(values) < 2:
        return GuardResult(name, "pending", None, None, margin, len(values), "too few windows")
    # the sequence tests the stable-minus-canary side against -margin: 'promote' = shown within the margin
    threshold = -math.log1p(margin) if log_scale else -margin
    record = _sequence([-v for v in values], spec, min_gain=math.expm1(threshold))
    look = record.last
    assert look is not None
    to_unit = (lambda x: math.expm1(x)) if log_scale else (lambda x: x)
    estimate = to_unit(-look.mean_log)
    upper = None if look.lower_log is None else to_unit(-look.lower_log)
    unit = "%" if log_scale else " (absolute)"
    shown = f"{estimate:+.1%}" + ("" if upper is None else f", upper bound {upper:+.1%}")
    if record.decision == "reject":
        return GuardResult(name, "fail", estimate, upper, margin, len(values),
                           f"{name} {shown}: beyond the allowed {margin:+.1%}{unit}")
    status = "pass" if record.decision == "promote" or estimate <= margin else "pending"
    return GuardResult(name, status, estimate, upper, margin, len(values), f"{name} {shown} (allowed {margin:+.1%})")


def _gain_guard(name: str, values: list[float], spec: JudgeSpec, what: str, *, max_loss: float = 0.0,
                blocking: bool = True) -> GuardResult:
    """A relative gain (log ratios, canary over reference) that must not be shown below -max_loss; while
    undecided, a negative estimate holds a promotion back when `blocking`."""
    if len(values) < 2:
        return GuardResult(name, "pending" if blocking else "pass", None, None, -max_loss, len(values),
                           f"{what}: too few windows")
    record = _sequence(values, spec, min_gain=-max_loss)
    look = record.last
    assert look is not None
    high = None if look.upper_log is None else math.expm1(look.upper_log)
    shown = f"{look.estimate:+.1%}" + ("" if high is None else f", upper bound {high:+.1%}")
    floor = "zero" if max_loss == 0 else f"{-max_loss:+.0%}"
    if record.decision == "reject":
        return GuardResult(name, "fail", look.estimate, high, -max_loss, len(values), f"{what} {shown}: below {floor}")
    status = "pending" if blocking and look.estimate < -max_loss else "pass"
    return GuardResult(name, status, look.estimate, high, -max_loss, len(values), f"{what} {shown}")


def _category_guards(pairs: list[tuple[ArmWindow, ArmWindow]], spec: JudgeSpec) -> list[GuardResult]:
    tokens: dict[str, float] = {}
    for canary, _ in pairs:
        for cat, (_, count) in canary.categories.items():
            tokens[cat] = tokens.get(cat, 0.0) + count
    total = sum(tokens.values())
    out = []
    for cat in sorted(tokens, key=lambda c: -tokens[c]):
        share = tokens[cat] / total if total else 0.0
        if share < spec.category_min_share:
            continue
        values = [r for c, s in pairs if (r := _log_ratio(c.category_tok_per_s(cat), s.category_tok_per_s(cat)))
                  is not None]
        out.append(_gain_guard(f"category {cat}", values, spec, f"{cat} ({share:.0%} of tokens) gain",
                               max_loss=spec.category_max_loss, blocking=False))
    return out


def decide(windows: list[Window], spec: JudgeSpec, *, arms: tuple[str, str] = (CANARY, STABLE),
           with_guards: bool = True) -> Decision:
    """The decision after `windows` (oldest first): `arms` is (candidate side, reference side)."""
    pairs: list[tuple[ArmWindow, ArmWindow]] = []
    skipped = 0
    broken = failing(windows, spec, arms)
    if broken is not None:
        return Decision("abort", f"{broken}: the judge fails closed", 0, 0, None, None, None, "continue")
    for window in windows:
        if usable(window, spec, arms) is None:
            pairs.append((window.arms[arms[0]], window.arms[arms[1]]))
        else:
            skipped += 1
    gains = [_log_ratio(c.decode_tok_per_s, s.decode_tok_per_s) for c, s in pairs]
    main = _sequence([g for g in gains if g is not None], spec, min_gain=spec.min_gain, futility=spec.futility)
    look = main.last
    decision = Decision("continue", "", len(pairs), skipped, look.estimate if look else None,
                        look.low if look else None, look.high if look else None, main.decision)
    if with_guards:
        decision.guards = _guards(pairs, spec)
        decision.categories = _category_guards(pairs, spec) if spec.category_label else []
    failed = [g for g in decision.guards + decision.categories if g.status == "fail"]
    shown = "no windows yet" if look is None else (
        f"gain {look.estimate:+.1%} decode tok/s over {len(pairs)} windows "
        f"({spec.confidence:.0%} CS {_pct(look.low)} to {_pct(look.high)}; minimum {spec.min_gain:+.1%})")
    if failed:
        decision.outcome, decision.reason = "abort", f"guard failed: {failed[0].detail}; {shown}"
    elif main.decision in ("reject", "futile"):
        why = "shown below the minimum gain" if main.decision == "reject" else "cannot reach the minimum gain"
        decision.outcome, decision.reason = "abort", f"{why}: {shown}"
    elif main.decision == "inconclusive":
        decision.outcome = "abort"
        decision.reason = f"no decision within max-windows {spec.max_windows}: {shown}"
    elif main.decision == "promote":
        waiting = [g for g in decision.guards + decision.categories if g.status == "pending"]
        if waiting:
            decision.reason = f"gain shown, waiting on guard: {waiting[0].detail}; {shown}"
        else:
            decision.outcome, decision.reason = "promote", shown
    else:
        decision.reason = shown
    return decision


def _guards(pairs: list[tuple[ArmWindow, ArmWindow]], spec: JudgeSpec) -> list[GuardResult]:
    out = []
    for name, margin, read in (("ttft-p99", spec.ttft_p99_max_increase, lambda a: a.ttft_p99_s),
                               ("itl-p99", spec.itl_p99_max_increase, lambda a: a.itl_p99_s)):
        if margin is None:
            out.append(GuardResult(name, "off", None, None, None, 0, f"{name}: no guard configured"))
            continue
        values = [r for c, s in pairs if (r := _log_ratio(read(c), read(s))) is not None]
        out.append(_increase_guard(name, values, margin, spec, log_scale=True))
    errors = [c.error_rate - s.error_rate for c, s in pairs]
    guard = _increase_guard("error-rate", errors, spec.error_rate_max_increase, spec, log_scale=False)
    if spec.http_responses is None:
        guard.detail += ("; SGLang's aborted requests only: HTTP errors are unseen until "
                         "serving.canary.http-responses names a counter of them")
    out.append(guard)
    if not spec.accept_length_guard:
        out.append(GuardResult("accept-length", "off", None, None, None, 0, "accept-length: guard off"))
    elif spec.break_even_accept_length is None:
        out.append(GuardResult("accept-length", "off", None, None, None, 0,
                               f"accept-length: no break-even to compare with ({spec.break_even_source})"))
    else:
        tau = spec.break_even_accept_length
        values = [math.log(a / tau) for c, _ in pairs if (a := c.accept_length) is not None and a > 0]
        if pairs and not values:
            out.append(GuardResult("accept-length", "off", None, None, None, 0,
                                   "accept-length: the canary reports no speculative verify passes"))
        else:
            out.append(_gain_guard("accept-length", values, spec, f"accept length vs break-even {tau:.2f}"))
    return out


def _pct(value: float | None) -> str:
    return "unbounded" if value is None else f"{value:+.1%}"


# The loop.

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
