"""The live judge sees HTTP errors: SGLang's counters never count a request its HTTP layer refuses, so the error
guard also reads a counter of HTTP responses by status code (serving.canary.http-responses), and an arm whose
declared counter is absent fails closed."""

from __future__ import annotations

from dataclasses import replace

import httpx
import pytest

from sglab.config.serving import CanaryJudge, HttpResponses
from sglab.serving.judge import decide
from sglab.serving.windows import Window, _queries, arm_window
from sglab.sim.metrics import HTTP_RESPONSES
from sglab.sim.testing import running_sim

from tests.serving.test_judge import SPEC, first_decision, windows

ISTIO = HttpResponses(metric="istio_requests_total")
SPEC_HTTP = SPEC.model_copy(update={"http_responses": ISTIO})
HEALTHY = {"requests": 100.0, "errors": 0.0, "itl_sum": 50.0, "itl_count": 5000.0, "generated": 2000.0,
           "verify": 1000.0}


def _canary_failing(ws: list[Window], share: float) -> list[Window]:
    """The canary's HTTP layer answers `share` of its requests with a 500; SGLang counts only the others."""
    out = []
    for w in ws:
        canary, stable = w.arms["canary"], w.arms["stable"]
        responses = canary.requests / (1 - share)
        out.append(Window(end=w.end, window_s=w.window_s, arms={
            "canary": replace(canary, http_responses=responses, http_errors=responses - canary.requests),
            "stable": replace(stable, http_responses=stable.requests, http_errors=0.0)}))
    return out


def test_a_canary_answering_30_percent_5xx_aborts_on_the_error_guard() -> None:
    """It is faster on the requests it serves, and SGLang's aborted counter stays at zero."""
    k, d = first_decision(_canary_failing(windows(40, {}, gain=0.05), 0.3), SPEC_HTTP)
    assert d.outcome == "abort" and "error-rate" in d.reason, d.reason
    error_guard = next(g for g in d.guards if g.name == "error-rate")
    assert error_guard.status == "fail" and error_guard.estimate == pytest.approx(0.3)


def test_the_same_canary_unseen_without_a_declared_counter_says_what_it_cannot_see() -> None:
    """No HTTP counter declared: the guard reads SGLang's aborted requests only, and its line says so."""
    d = decide(windows(12, {}, gain=0.05), SPEC)
    error_guard = next(g for g in d.guards if g.name == "error-rate")
    assert "HTTP errors are unseen" in error_guard.detail and "serving.canary.http-responses" in error_guard.detail


def test_a_window_where_every_request_failed_at_the_http_layer_aborts() -> None:
    """SGLang saw none of the window's requests: the HTTP counter did, and the window is not skipped."""
    ws = windows(12, {}, gain=0.05)
    dead = arm_window({**HEALTHY, "requests": 0.0, "itl_sum": 0.0, "itl_count": 0.0, "generated": 0.0,
                       "verify": 0.0, "http_responses": 40.0, "http_errors": 40.0}, {}, {})
    ws[4] = Window(end=ws[4].end, window_s=60, arms={**ws[4].arms, "canary": dead})
    d = decide(ws, SPEC_HTTP)
    assert d.outcome == "abort" and "served 40 requests without a token" in d.reason, d.reason


def test_an_absent_http_series_fails_closed_and_absent_5xx_is_none_yet() -> None:
    absent = arm_window({**HEALTHY, "http_responses": None, "http_errors": None}, {}, {})
    assert any("no HTTP response series" in p for p in absent.problems)
    no_errors = arm_window({**HEALTHY, "http_responses": 100.0, "http_errors": None}, {}, {})
    assert no_errors.problems == () and no_errors.error_rate == 0.0
    negative = arm_window({**HEALTHY, "http_responses": 100.0, "http_errors": -2.0}, {}, {})
    assert any("negative" in p for p in negative.problems)


def test_the_queries_select_the_arm_and_the_5xx_codes() -> None:
    q = _queries('{sglab_arm="candidate"}', "60s", None, ISTIO)
    assert q["http_responses"] == 'sum(increase(istio_requests_total{sglab_arm="candidate"}[60s]))'
    assert q["http_errors"] == ('sum(increase(istio_requests_total{sglab_arm="candidate",response_code=~"5.."}'
                                '[60s]))')
    assert "http_responses" not in _queries('{sglab_arm="candidate"}', "60s", None, None)


@pytest.mark.parametrize("value", ["istio requests", "1metric", "a-b"])
def test_a_metric_that_is_not_a_prometheus_name_is_refused(value: str) -> None:
    with pytest.raises(ValueError, match="not a Prometheus metric name"):
        CanaryJudge.model_validate({"http-responses": {"metric": value}})


@pytest.mark.slow
def test_the_simulator_counts_its_responses_by_status_code() -> None:
    """What a sidecar in front of the server counts: an injected 500 shows, the probes and /metrics do not."""
    env = {"SGLAB_SIM_ERROR_RATE": "1.0"}
    with running_sim(["--model-path", "m", "--enable-metrics"], env=env) as url:
        httpx.get(f"{url}/health", timeout=10)
        reply = httpx.post(f"{url}/generate", json={"text": "hi", "sampling_params": {"max_new_tokens": 4}},
                           timeout=10)
        assert reply.status_code == 500
        text = httpx.get(f"{url}/metrics", timeout=10).text
    lines = {line.split("{")[0] + "{" + line.split("{")[1].split(",")[0]: line.rsplit(" ", 1)[1]
             for line in text.splitlines() if line.startswith(HTTP_RESPONSES + "{")}
    assert lines == {f'{HTTP_RESPONSES}{{code="200"': "0", f'{HTTP_RESPONSES}{{code="500"': "1"}
