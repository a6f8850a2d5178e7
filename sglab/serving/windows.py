"""One paired observation per window: each arm's SGLang metrics over the same wall-clock window, from Prometheus.

Windows tile time from the judge's start: a range query with step = window evaluates `increase(...[window])`
at each window's end, so window k covers (start + (k-1) w, start + k w] for every arm alike, and the same
traffic mix falls into both sides of a pair. Prometheus's extrapolation at a window's edges scales a
histogram's sum and count (or two counters of one target) alike, so the ratios the judge uses (mean
inter-token latency, accept length, error rate) do not depend on it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from sglab.config.serving import HttpResponses
from sglab.serving.prometheus import Prometheus, selector

# The SGLang metrics the judge reads (SGLang's collector names; the simulator serves the same).
REQUESTS = "sglang:num_requests_total"
ABORTED = "sglang:num_aborted_requests_total"
ITL = "sglang:inter_token_latency_seconds"
TTFT = "sglang:time_to_first_token_seconds"
GENERATED = "sglang:generation_tokens_total"
VERIFY = "sglang:spec_verify_calls_total"


@dataclass(frozen=True)
class ArmWindow:
    """One arm over one window (sums over its pods)."""

    requests: float
    errors: float
    itl_sum_s: float
    itl_count: float
    ttft_p99_s: float | None
    itl_p99_s: float | None
    generated_tokens: float
    verify_calls: float
    categories: dict[str, tuple[float, float]] = field(default_factory=dict)  # category -> (ITL sum, count)
    # HTTP responses in front of SGLang (serving.canary.http-responses; None: not declared) and those with a 5xx
    http_responses: float | None = None
    http_errors: float = 0.0
    # why the window cannot be read as measured (an absent error series, a negative increase): the judge fails
    # closed on any (sglab/serving/judge.py)
    problems: tuple[str, ...] = ()

    @property
    def decode_tok_per_s(self) -> float | None:
        """Tokens per second of decode as a request sees it: 1 / mean inter-token latency."""
        return self.itl_count / self.itl_sum_s if self.itl_sum_s > 0 and self.itl_count > 0 else None

    @property
    def accept_length(self) -> float | None:
        """Generated tokens per verify pass over the window (exact: both count finished requests)."""
        return self.generated_tokens / self.verify_calls if self.verify_calls > 0 else None

    @property
    def error_rate(self) -> float:
        """The larger of SGLang's aborted share and the 5xx share of HTTP responses: a request refused at the
        HTTP layer never reaches SGLang's counters."""
        aborted = min(1.0, self.errors / self.requests) if self.requests > 0 else 0.0
        responses = self.http_responses or 0.0
        return max(aborted, min(1.0, self.http_errors / responses) if responses > 0 else 0.0)

    @property
    def served(self) -> float:
        """Requests the arm was sent in the window, as counted by whichever side saw more of them."""
        return max(self.requests, self.http_responses or 0.0)

    def category_tok_per_s(self, category: str) -> float | None:
        total, count = self.categories.get(category, (0.0, 0.0))
        return count / total if total > 0 and count > 0 else None


@dataclass(frozen=True)
class Window:
    end: float  # unix time
    window_s: float
    arms: dict[str, ArmWindow]

    @property
    def start(self) -> float:
        return self.end - self.window_s


def _queries(sel: str, w: str, category_label: str | None, http: HttpResponses | None = None) -> dict[str, str]:
    q = {
        "requests": f"sum(increase({REQUESTS}{sel}[{w}]))",
        "errors": f"sum(increase({ABORTED}{sel}[{w}]))",
        "itl_sum": f"sum(increase({ITL}_sum{sel}[{w}]))",
        "itl_count": f"sum(increase({ITL}_count{sel}[{w}]))",
        "ttft_p99": f"histogram_quantile(0.99, sum by (le) (increase({TTFT}_bucket{sel}[{w}])))",
        "itl_p99": f"histogram_quantile(0.99, sum by (le) (increase({ITL}_bucket{sel}[{w}])))",
        "generated": f"sum(increase({GENERATED}{sel}[{w}]))",
        "verify": f"sum(increase({VERIFY}{sel}[{w}]))",
    }
    if http is not None:
        q["http_responses"] = f"sum(increase({http.metric}{sel}[{w}]))"
        server_errors = "{" + sel[1:-1] + ("," if sel != "{}" else "") + f'{http.code_label}=~"5.."' + "}"
        q["http_errors"] = f"sum(increase({http.metric}{server_errors}[{w}]))"
    if category_label:
        q["cat_sum"] = f"sum by ({category_label}) (increase({ITL}_sum{sel}[{w}]))"
        q["cat_count"] = f"sum by ({category_label}) (increase({ITL}_count{sel}[{w}]))"
    return q


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def window_ends(start: float, now: float, window_s: float, settle_s: float) -> list[float]:
    """Ends of the complete windows since `start` whose samples have been scraped by `now` (settle_s after)."""
    count = int(max(0.0, now - settle_s - start) // window_s)
    return [start + (k + 1) * window_s for k in range(count)]


def fetch_windows(prom: Prometheus, arms: dict[str, dict[str, str]], *, start: float, now: float,
                  window_s: float, settle_s: float, category_label: str | None = None,
                  http: HttpResponses | None = None) -> list[Window]:
    """Every complete window since `start`, each with every arm that served requests in it."""
    ends = window_ends(start, now, window_s, settle_s)
    if not ends:
        return []
    w = f"{window_s:g}s"
    values: dict[str, dict[str, dict[float, float]]] = {}
    categories: dict[str, dict[str, dict[float, dict[str, float]]]] = {}
    for arm, labels in arms.items():
        values[arm], categories[arm] = {}, {"cat_sum": {}, "cat_count": {}}
        for name, promql in _queries(selector(labels), w, category_label, http).items():
            series = prom.query_range(promql, ends[0], ends[-1], window_s)
            if name.startswith("cat_"):
                for s in series:
                    cat = s.labels.get(category_label or "", "")
                    for t, sample in s.samples:
                        if math.isfinite(sample):
                            categories[arm][name].setdefault(round(t, 3), {})[cat] = sample
                continue
            values[arm][name] = {round(t, 3): sample for s in series[:1] for t, sample in s.samples}
    out = []
    for end in ends:
        key = round(end, 3)
        by_arm = {}
        for arm in arms:
            queried = values[arm]
            if _finite(queried["requests"].get(key)) is None and _finite(queried.get("http_responses", {}).get(key)) \
                    is None:
                continue
            by_arm[arm] = arm_window({name: series.get(key) for name, series in queried.items()},
                                     categories[arm]["cat_sum"].get(key, {}), categories[arm]["cat_count"].get(key, {}))
        out.append(Window(end=end, window_s=window_s, arms=by_arm))
    return out


COUNTERS = {"requests": REQUESTS, "errors": ABORTED, "itl_sum": f"{ITL}_sum", "itl_count": f"{ITL}_count",
            "generated": GENERATED, "verify": VERIFY, "http_responses": "the HTTP response counter",
            "http_errors": "the HTTP response counter (5xx)"}


def arm_window(values: dict[str, float | None], sums: dict[str, float], counts: dict[str, float]) -> ArmWindow:
    """One arm's window from its query values (name -> increase, None where the series was absent). The error
    series must be there (absent is not zero errors) and no counter may decrease (an increase below zero is a
    reset mid-window or a non-physical series): either is a problem the judge fails closed on. Where HTTP
    responses are declared (the key is queried), their series must be there too; no 5xx series is no 5xx yet."""
    problems = []
    if _finite(values.get("errors")) is None:
        problems.append(f"no error series ({ABORTED})")
    if "http_responses" in values and _finite(values["http_responses"]) is None:
        problems.append("no HTTP response series (serving.canary.http-responses.metric)")
    for name, metric in COUNTERS.items():
        value = _finite(values.get(name))
        if value is not None and value < 0:
            problems.append(f"a negative increase of {metric} ({value:g}): a counter reset or a non-physical series")
    return ArmWindow(
        requests=_finite(values.get("requests")) or 0.0, errors=_finite(values.get("errors")) or 0.0,
        itl_sum_s=_finite(values.get("itl_sum")) or 0.0, itl_count=_finite(values.get("itl_count")) or 0.0,
        ttft_p99_s=_finite(values.get("ttft_p99")), itl_p99_s=_finite(values.get("itl_p99")),
        generated_tokens=_finite(values.get("generated")) or 0.0, verify_calls=_finite(values.get("verify")) or 0.0,
        categories={c: (sums[c], counts.get(c, 0.0)) for c in sums if c}, problems=tuple(problems),
        http_responses=_finite(values.get("http_responses")) if "http_responses" in values else None,
        http_errors=_finite(values.get("http_errors")) or 0.0)
