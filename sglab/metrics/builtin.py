"""The metrics sglab ships, each one `register(Metric(...))` declaration: per-request decode speed, aggregate
output throughput, and goodput at SLO (tokens and requests).

Decode speed and output throughput are stored in built-in result fields (RequestSample.decode_tok_per_s,
RoundSample.decode_tok_per_s_mean and RoundSample.output_tok_per_s), so result files keep their shape.
docs/results-schema.md describes them.

Goodput counts only the requests meeting the policy's SLO. A request is good when it succeeded and meets every
bound of the SLO (`policy.slo`): TTFT ≤ ttft-ms, TPOT = (e2e − TTFT) / (output tokens − 1)
≤ tpot-ms, and the itl-quantile of its own inter-token gaps ≤ itl-ms. Both goodput metrics depend on the SLO, so
the verdict recomputes them from the request samples with the SLO it judges under (`uses_slo`).
"""

from __future__ import annotations

import numpy as np

from sglab.metrics.registry import Metric, RoundWindow, SloTargets, register
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


# A round without one good request counts half a token (half a request), so the per-round log ratio of
# an arm that misses the SLO everywhere stays finite and the verdict can reject it instead of seeing no data.
EMPTY_ROUND_FLOOR = 0.5


def tpot_ms(sample: RequestSample) -> float | None:
    """Time per output token after the first (None below two tokens)."""
    if sample.ttft_ms is None or sample.e2e_ms is None or sample.output_tokens < 2:
        return None
    return (sample.e2e_ms - sample.ttft_ms) / (sample.output_tokens - 1)


def is_good(sample: RequestSample, slo: SloTargets) -> bool:
    """Succeeded and met every bound of the SLO."""
    if sample.error is not None or sample.ttft_ms is None:
        return False
    if slo.ttft_ms is not None and sample.ttft_ms > slo.ttft_ms:
        return False
    per_token = tpot_ms(sample)
    if slo.tpot_ms is not None and per_token is not None and per_token > slo.tpot_ms:
        return False
    if slo.itl_ms is not None and sample.itl_ms:
        if float(np.quantile(sample.itl_ms, slo.itl_quantile)) > slo.itl_ms:
            return False
    return True


def _span(window: RoundWindow) -> float | None:
    span = window.window_s if window.window_s else window.duration_s
    return span if span and span > 0 else None


def _good(window: RoundWindow) -> list[RequestSample] | None:
    if window.slo is None or _span(window) is None or not window.requests:
        return None
    return [s for s in window.requests if is_good(s, window.slo)]


def _goodput_tokens(window: RoundWindow) -> float | None:
    """Good requests' output tokens over the round (with a time window: the tokens that arrived inside it)."""
    good = _good(window)
    if good is None:
        return None
    if window.window_s:
        end = window.started_at_s + window.window_s
        tokens = sum(tokens_before(s, end) for s in good)
    else:
        tokens = sum(s.output_tokens for s in good)
    return max(float(tokens), EMPTY_ROUND_FLOOR) / _span(window)


def _goodput_requests(window: RoundWindow) -> float | None:
    """Good requests per second (with a time window: those that finished inside it)."""
    good = _good(window)
    if good is None:
        return None
    if window.window_s:
        end = window.started_at_s + window.window_s
        good = [s for s in good if s.start_s + (s.e2e_ms or 0) / 1000 <= end]
    return max(float(len(good)), EMPTY_ROUND_FLOOR) / _span(window)


GOODPUT_TOK_PER_S = register(Metric(
    name="goodput_tok_per_s", unit="tok/s", label="goodput tok/s", direction="higher", can_gate=True,
    per_round=_goodput_tokens, uses_slo=True,
    description="output tokens of the requests meeting the SLO (policy.slo) per second of the round"))

GOODPUT_REQ_PER_S = register(Metric(
    name="goodput_req_per_s", unit="req/s", label="goodput req/s", direction="higher", can_gate=True,
    per_round=_goodput_requests, uses_slo=True,
    description="requests meeting the SLO (policy.slo) per second of the round"))
