"""SGLang's Prometheus metrics (`sglang:` names), kept in memory and rendered as the text format.

Served at /metrics only with --enable-metrics. Names, types and default buckets follow SGLang's
metrics collector; every series carries the `model_name` label. As in SGLang, the token and verify
counters grow when a request finishes (the engine adds them), so their window ratio is exact.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

TTFT_BUCKETS_S = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
ITL_BUCKETS_S = (0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080,
                 0.100, 0.200, 0.400, 0.600, 0.800, 1.0, 2.0, 4.0, 6.0, 8.0)
E2E_BUCKETS_S = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 800, 1200, 1600, 2400)


@dataclass
class Histogram:
    buckets: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    count: int = 0

    def __post_init__(self) -> None:
        self.counts = [0] * (len(self.buckets) + 1)

    def observe(self, value: float, times: int = 1) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += times
        self.total += value * times
        self.count += times


GAUGES = {
    "num_running_reqs": "The number of running requests.",
    "num_queue_reqs": "The number of requests in the waiting queue.",
    "num_used_tokens": "The number of used tokens.",
    "token_usage": "The token usage.",
    "gen_throughput": "The generation throughput (token/s).",
    "cache_hit_rate": "The prefix cache hit rate.",
    "spec_accept_length": "The average acceptance length of speculative decoding.",
    "spec_accept_rate": "The average acceptance rate of speculative decoding.",
    "spec_num_steps": "The number of speculative decoding steps (the active tier with --speculative-adaptive).",
    "spec_num_draft_tokens": "The number of speculative draft tokens (the active tier with --speculative-adaptive).",
    "max_total_num_tokens": "Maximum total number of tokens in the KV cache pool.",
    "num_grammar_queue_reqs": "The number of requests in the grammar waiting queue.",
    "num_retracted_reqs": "The number of retracted requests.",
}
COUNTERS = {
    "prompt_tokens_total": "Number of prefill tokens processed.",
    "generation_tokens_total": "Number of generation tokens processed.",
    "spec_verify_calls_total": "Number of speculative decoding verification calls.",
    "cached_tokens_total": "Number of cached prompt tokens.",
    "num_requests_total": "Number of requests processed.",
    "num_aborted_requests_total": "Number of requests aborted.",
}
HISTOGRAMS = {
    "time_to_first_token_seconds": ("Histogram of time to first token in seconds.", TTFT_BUCKETS_S),
    "inter_token_latency_seconds": ("Histogram of inter-token latency in seconds.", ITL_BUCKETS_S),
    "e2e_request_latency_seconds": ("Histogram of End-to-end request latency in seconds", E2E_BUCKETS_S),
}


MAX_LABELLED_SERIES = 256
# Not an SGLang metric: HTTP responses by status code as a proxy in front of the server counts them (a mesh
# sidecar's istio_requests_total by response_code). SGLang's counters never see a request refused at its HTTP
# layer; the rehearsal's judge reads this in place of the stack's serving.canary.http-responses.
HTTP_RESPONSES = "sglab_sim_http_responses_total"
HTTP_CODE_LABEL = "code"


class Series:
    """The request (tokenizer) counters and histograms of one combination of custom label values."""

    def __init__(self) -> None:
        self.counters = {name: 0.0 for name in COUNTERS}
        self.histograms = {name: Histogram(buckets) for name, (_, buckets) in HISTOGRAMS.items()}


class Metrics:
    """Scheduler gauges, unlabelled; request series per custom label values (SGLang's
    --tokenizer-metrics-allowed-custom-labels: every request series carries each allowed label, "" when a
    request does not set it). `counters`/`histograms` are the series of requests without custom labels."""

    def __init__(self, model_name: str, custom_labels: tuple[str, ...] = ()) -> None:
        self.model_name = model_name
        self.custom_labels = tuple(custom_labels)
        self.gauges = {name: 0.0 for name in GAUGES}
        self.responses: dict[int, int] = {200: 0}  # HTTP status -> count (HTTP_RESPONSES), from the start
        self._series: dict[tuple[str, ...], Series] = {}
        self._by_labels: dict[tuple[tuple[str, str], ...], Series] = {}
        default = self.of(())
        self.counters, self.histograms = default.counters, default.histograms

    def of(self, labels: tuple[tuple[str, str], ...]) -> Series:
        """The series of a request's custom labels ((label, value) pairs; labels not allowed are ignored).
        Past MAX_LABELLED_SERIES distinct value sets, new ones count as unlabelled (bounded cardinality)."""
        series = self._by_labels.get(labels)
        if series is None:
            given = dict(labels)
            key = tuple(given.get(name, "") for name in self.custom_labels)
            if key not in self._series and len(self._series) >= MAX_LABELLED_SERIES:
                key = ("",) * len(self.custom_labels)
            series = self._series.setdefault(key, Series())
            self._by_labels[labels] = series
        return series

    def set_load(self, running: int, waiting: int, used_tokens: int, kv_cache_tokens: int) -> None:
        """The scheduler's load gauges, refreshed every iteration."""
        self.gauges.update(num_running_reqs=running, num_queue_reqs=waiting, num_used_tokens=used_tokens,
                           token_usage=used_tokens / kv_cache_tokens, max_total_num_tokens=kv_cache_tokens)

    def count_response(self, status: int) -> None:
        self.responses[status] = self.responses.get(status, 0) + 1

    def render(self) -> str:
        label = _label("model_name", self.model_name)
        lines: list[str] = []
        for name, help_text in GAUGES.items():
            lines += [f"# HELP sglang:{name} {help_text}", f"# TYPE sglang:{name} gauge",
                      f"sglang:{name}{{{label}}} {_num(self.gauges[name])}"]
        keyed = [(",".join([label, *(_label(n, v) for n, v in zip(self.custom_labels, key))]), series)
                 for key, series in self._series.items()]
        for name, help_text in COUNTERS.items():
            lines += [f"# HELP sglang:{name} {help_text}", f"# TYPE sglang:{name} counter"]
            lines += [f"sglang:{name}{{{labels}}} {_num(series.counters[name])}" for labels, series in keyed]
        for name, (help_text, _) in HISTOGRAMS.items():
            lines += [f"# HELP sglang:{name} {help_text}", f"# TYPE sglang:{name} histogram"]
            for labels, series in keyed:
                hist = series.histograms[name]
                cumulative = 0
                for bound, count in zip(hist.buckets, hist.counts):
                    cumulative += count
                    lines.append(f'sglang:{name}_bucket{{le="{_num(float(bound))}",{labels}}} {cumulative}')
                lines.append(f'sglang:{name}_bucket{{le="+Inf",{labels}}} {hist.count}')
                lines.append(f"sglang:{name}_sum{{{labels}}} {_num(hist.total)}")
                lines.append(f"sglang:{name}_count{{{labels}}} {hist.count}")
        lines += [f"# HELP {HTTP_RESPONSES} HTTP responses by status code (the simulator's, as a sidecar counts them).",
                  f"# TYPE {HTTP_RESPONSES} counter"]
        lines += [f'{HTTP_RESPONSES}{{{HTTP_CODE_LABEL}="{status}",{label}}} {count}'
                  for status, count in sorted(self.responses.items())]
        return "\n".join(lines) + "\n"


def _label(name: str, value: str) -> str:
    return name + '="' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _num(value: float) -> str:
    return repr(float(value))
