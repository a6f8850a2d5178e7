"""Per-round and per-level, per-arm summaries of measured requests (warm-up excluded).

Failed requests count as errors and are left out of the timing figures. The compared metrics'
round values come from the metric registry (sglab/metrics): decode tok/s is the mean over the
round's requests, output tok/s the tokens inside the round's window over the window.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from sglab import metrics
from sglab.metrics.builtin import OUTPUT_TOK_PER_S, tokens_before, window_tokens
from sglab.schema.result import AcceptLength, ArmLevelSummary, Percentiles, RequestSample, RoundSample

__all__ = ["arm_level_summary", "percentiles", "round_sample", "tokens_before"]


def percentiles(values: Iterable[float | None]) -> Percentiles:
    data = np.asarray([v for v in values if v is not None], dtype=float)
    if data.size == 0:
        return Percentiles()
    p50, p90, p99 = np.percentile(data, [50, 90, 99])
    return Percentiles(p50=float(p50), p90=float(p90), p99=float(p99), mean=float(data.mean()))


def _mean(values: Iterable[float | None]) -> float | None:
    data = [v for v in values if v is not None]
    return float(np.mean(data)) if data else None


def _ok(samples: Sequence[RequestSample]) -> list[RequestSample]:
    return [s for s in samples if s.error is None]


def round_sample(samples: Sequence[RequestSample], *, level: int, round_index: int, position: int, arm: str,
                 warmup: bool, started_at_s: float, duration_s: float,
                 server_accept_length: float | None, window_s: float | None = None) -> RoundSample:
    """One segment. With a time window (duration rounds), throughput counts only tokens inside it, so the
    tail of requests still running after the gate closed (fewer streams, different per arm) does not count."""
    ok = _ok(samples)
    window = metrics.RoundWindow(requests=samples, started_at_s=started_at_s, duration_s=duration_s,
                                 window_s=window_s)
    decode = percentiles(s.decode_tok_per_s for s in ok)
    itl = percentiles(g for s in ok for g in s.itl_ms)
    return RoundSample(
        level=level, round_index=round_index, position=position, arm=arm, warmup=warmup,
        started_at_s=round(started_at_s, 6), duration_s=round(duration_s, 6),
        requests=len(samples), errors=len(samples) - len(ok), output_tokens=sum(s.output_tokens for s in ok),
        output_tok_per_s=OUTPUT_TOK_PER_S.compute_round(window), window_s=window_s,
        window_output_tokens=window_tokens(window),
        decode_tok_per_s_mean=decode.mean, decode_tok_per_s_p50=decode.p50,
        ttft_ms_p50=percentiles(s.ttft_ms for s in ok).p50,
        itl_ms_p50=itl.p50, itl_ms_p99=itl.p99,
        client_accept_length=_mean(s.accept_length for s in ok),
        server_accept_length=server_accept_length,
        metrics=metrics.round_metrics(window),
    )


def _level_metrics(rounds: Sequence[RoundSample]) -> dict[str, float]:
    """Mean over the rounds of each registry metric kept in RoundSample.metrics."""
    names = {name for r in rounds for name in r.metrics}
    return {name: float(np.mean([r.metrics[name] for r in rounds if name in r.metrics])) for name in sorted(names)}


def arm_level_summary(samples: Sequence[RequestSample], rounds: Sequence[RoundSample]) -> ArmLevelSummary:
    """One arm at one level from its measured (non-warm-up) requests and rounds."""
    measured = [s for s in samples if not s.warmup]
    measured_rounds = [r for r in rounds if not r.warmup]
    ok = _ok(measured)
    tokens = sum(s.output_tokens for s in ok)
    duration = sum(r.duration_s for r in measured_rounds)
    windowed = measured_rounds and all(r.window_s for r in measured_rounds)
    if windowed:
        throughput = sum(r.window_output_tokens or 0 for r in measured_rounds) / sum(r.window_s
                                                                                     for r in measured_rounds)
    else:
        throughput = tokens / duration if duration > 0 else None
    client = _mean(s.accept_length for s in ok)
    server = _mean(r.server_accept_length for r in measured_rounds)
    methods = sorted({r.accept_length_method for r in measured_rounds if r.accept_length_method})
    decode = percentiles(s.decode_tok_per_s for s in ok)
    return ArmLevelSummary(
        requests=len(measured),
        errors=len(measured) - len(ok),
        output_tokens=tokens,
        duration_s=round(duration, 6),
        output_tok_per_s=throughput if ok else None,
        decode_tok_per_s=decode,
        ttft_ms=percentiles(s.ttft_ms for s in ok),
        itl_ms=percentiles(g for s in ok for g in s.itl_ms),
        e2e_ms=percentiles(s.e2e_ms for s in ok),
        accept_length=AcceptLength(client_mean=client, server_mean=server,
                                   server_method="+".join(methods) if methods else None) if (client or server)
                                   else None,
        metrics=_level_metrics(measured_rounds),
    )
