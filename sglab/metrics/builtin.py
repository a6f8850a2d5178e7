"""The metrics sglab ships: per-request decode speed and aggregate output throughput.

Both are stored in built-in result fields (RequestSample.decode_tok_per_s, RoundSample.decode_tok_per_s_mean
and RoundSample.output_tok_per_s), so result files keep their shape. docs/results-schema.md describes them.
"""

from __future__ import annotations

from sglab.metrics.registry import Metric, RoundWindow, register
from sglab.schema.result import RequestSample, RoundSample


def decode_rate(output_tokens: int, ttft_s: float | None, e2e_s: float | None) -> float | None:
    """(output tokens - 1) / (e2e - TTFT): the decode rate after the first token (bench_serving's rule)."""
    if ttft_s is None or e2e_s is None or output_tokens < 2:
        return None
    span = e2e_s - ttft_s
    return (output_tokens - 1) / span if span > 0 else None


def tokens_before(sample: RequestSample, end_s: float) -> int:
    """How many of a request's tokens had arrived by `end_s` (seconds since the run started)."""
    if sample.ttft_ms is None:
        return 0
    at = sample.start_s + sample.ttft_ms / 1000
    if at > end_s:
        return 0
    count = 1 + (sample.output_tokens - 1 - len(sample.itl_ms))  # extra tokens of the first chunk
    for gap in sample.itl_ms:
        at += gap / 1000
        if at > end_s:
            break
        count += 1
    return count


def window_tokens(window: RoundWindow) -> int | None:
    """Tokens of successful requests that arrived inside the round's time window (None: no window)."""
    if window.window_s is None or window.window_s <= 0:
        return None
    return sum(tokens_before(s, window.started_at_s + window.window_s) for s in window.ok)


def _request_decode(sample: RequestSample) -> float | None:
    if sample.ttft_ms is None or sample.e2e_ms is None:
        return None
    return decode_rate(sample.output_tokens, sample.ttft_ms / 1000, sample.e2e_ms / 1000)


def _round_output(window: RoundWindow) -> float | None:
    """With a time window (duration rounds), only tokens inside it count, so the tail of requests still
    running after the gate closed (fewer streams, different per arm) does not."""
    ok = window.ok
    if not ok:
        return None
    inside = window_tokens(window)
    if inside is not None:
        return inside / window.window_s
    tokens = sum(s.output_tokens for s in ok)
    return tokens / window.duration_s if window.duration_s > 0 else None


def _recorded_output(sample: RoundSample) -> float | None:
    if sample.output_tok_per_s is not None:
        return sample.output_tok_per_s
    return sample.output_tokens / sample.duration_s if sample.duration_s > 0 else None


DECODE_TOK_PER_S = register(Metric(
    name="decode_tok_per_s", unit="tok/s", label="decode tok/s", direction="higher", can_gate=True,
    per_request=_request_decode, request_field="decode_tok_per_s", round_field="decode_tok_per_s_mean",
    description="per request (output_tokens - 1) / (e2e - TTFT); a round's value is the mean over its requests"))

OUTPUT_TOK_PER_S = register(Metric(
    name="output_tok_per_s", unit="tok/s", label="output tok/s", direction="higher", can_gate=True,
    per_round=_round_output, round_field="output_tok_per_s", from_round=_recorded_output,
    description="aggregate: output tokens of successful requests inside the round's window / the window"))
