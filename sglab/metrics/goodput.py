"""Goodput at SLO: throughput that counts only the requests meeting the policy's SLO.

A request is good when it succeeded and meets every bound of the SLO (`policy.slo` or
`sglab:traffic.slo`): TTFT ≤ ttft-ms, TPOT = (e2e − TTFT) / (output tokens − 1) ≤ tpot-ms, and the
itl-quantile of its own inter-token gaps ≤ itl-ms. Both metrics depend on the SLO, so the verdict
recomputes them from the request samples with the SLO it judges under (`uses_slo`).
"""

from __future__ import annotations

import numpy as np

from sglab.metrics.builtin import tokens_before
from sglab.metrics.registry import Metric, RoundWindow, SloTargets, register
from sglab.schema.result import RequestSample

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
