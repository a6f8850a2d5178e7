"""Per-request speculative stats on the OpenAI routes (`sglext.spec_tokens_details`) and the /metrics
counters whose window ratio is the accept length, over real HTTP."""

from __future__ import annotations

import httpx
import openai
import pytest

from sglab.sim.testing import running_sim

from .helpers import CHART_COMMON, EAGLE_2STEP, sse_events
from .test_server_info import _metric

MODEL = "/shared/kimi-k2.5-int4"
FIELDS = {"spec_accept_rate", "spec_accept_length", "spec_cap_length", "spec_block_accept_length",
          "spec_num_correct_drafts", "spec_num_proposed_drafts", "spec_verify_ct", "spec_correct_drafts_histogram",
          "spec_cap_lens_histogram"}
NUM_DRAFT_TOKENS = 3  # EAGLE_2STEP


def _check_identities(details: dict, completion_tokens: int) -> None:
    assert set(details) == FIELDS
    histogram, verify = details["spec_correct_drafts_histogram"], details["spec_verify_ct"]
    assert verify > 0 and sum(histogram) == verify
    assert sum(i * h for i, h in enumerate(histogram)) == details["spec_num_correct_drafts"]
    assert details["spec_num_proposed_drafts"] == verify * (NUM_DRAFT_TOKENS - 1)
    assert details["spec_accept_rate"] == pytest.approx(details["spec_num_correct_drafts"] / (verify * 2))
    assert details["spec_accept_length"] == pytest.approx(completion_tokens / verify)
    # every committed token after the prefill's is a verify pass's bonus token or an accepted draft
    assert completion_tokens - 1 == verify + details["spec_num_correct_drafts"]
    assert (details["spec_cap_length"], details["spec_block_accept_length"], details["spec_cap_lens_histogram"]) \
        == (0.0, 0.0, [])


def _chat(url: str, **extra) -> dict:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Tell me about rivers, please."}],
            "max_tokens": 60, "ignore_eos": True, **extra}
    response = httpx.post(url + "/v1/chat/completions", json=body, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


@pytest.mark.slow
def test_chat_non_streaming_details(eagle_url):
    body = _chat(eagle_url, return_spec_tokens_details=True)
    _check_identities(body["sglext"]["spec_tokens_details"], body["usage"]["completion_tokens"])
    assert "sglext" not in _chat(eagle_url)  # only when asked


@pytest.mark.slow
def test_completion_non_streaming_details_with_the_openai_client(eagle_url):
    client = openai.OpenAI(base_url=eagle_url + "/v1", api_key="unused", max_retries=0)
    result = client.completions.create(model=MODEL, prompt="a b c", max_tokens=40,
                                       extra_body={"ignore_eos": True, "return_spec_tokens_details": True})
    details = result.model_extra["sglext"]["spec_tokens_details"]
    _check_identities(details, result.usage.completion_tokens)


@pytest.mark.parametrize("route, payload", [
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}),
    ("/v1/completions", {"prompt": "hello there"}),
])
@pytest.mark.slow
def test_stream_sends_details_after_the_finish_chunk_and_before_usage(eagle_url, route, payload):
    body = {"model": MODEL, **payload, "max_tokens": 45, "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True}, "return_spec_tokens_details": True}
    with httpx.stream("POST", eagle_url + route, json=body, timeout=30) as response:
        events, done = sse_events(response)
    assert done
    *content, ext, usage = events
    assert content[-1]["choices"][0]["finish_reason"] == "length"
    assert ext["choices"] == [] and usage["choices"] == [] and "sglext" not in usage
    assert all("sglext" not in e for e in content)
    _check_identities(ext["sglext"]["spec_tokens_details"], usage["usage"]["completion_tokens"])


@pytest.mark.slow
def test_bad_flag_type_is_a_400(eagle_url):
    response = httpx.post(eagle_url + "/v1/chat/completions", json={
        "model": MODEL, "messages": [{"role": "user", "content": "x"}], "return_spec_tokens_details": "yes"})
    assert response.status_code == 400 and "return_spec_tokens_details" in response.json()["message"]


@pytest.mark.slow
def test_no_details_without_speculation(baseline_url):
    assert "sglext" not in _chat(baseline_url, return_spec_tokens_details=True)


@pytest.mark.slow
def test_metrics_window_accept_length_equals_the_requests_own(eagle_url):
    """Δgeneration_tokens / Δspec_verify_calls over a window = Σ completion / Σ verify of its requests."""
    before = httpx.get(eagle_url + "/metrics").text
    bodies = [_chat(eagle_url, return_spec_tokens_details=True, max_tokens=30 + 7 * i) for i in range(5)]
    after = httpx.get(eagle_url + "/metrics").text
    tokens = _metric(after, "sglang:generation_tokens_total") - _metric(before, "sglang:generation_tokens_total")
    verify = _metric(after, "sglang:spec_verify_calls_total") - _metric(before, "sglang:spec_verify_calls_total")
    assert tokens == sum(b["usage"]["completion_tokens"] for b in bodies)
    assert verify == sum(b["sglext"]["spec_tokens_details"]["spec_verify_ct"] for b in bodies)
    assert '# TYPE sglang:spec_verify_calls_total counter' in after


@pytest.mark.slow
def test_counters_grow_when_a_request_finishes():
    """As in SGLang, a running request's tokens are not in the counters until it ends."""
    with running_sim(CHART_COMMON + EAGLE_2STEP, {"SGLAB_SIM_TIME_SCALE": "2"}) as url:
        with httpx.stream("POST", url + "/v1/completions", json={
                "model": MODEL, "prompt": "x", "max_tokens": 400, "ignore_eos": True, "stream": True}, timeout=60) as r:
            lines = r.iter_lines()
            for _ in range(5):
                next(lines)
            mid = httpx.get(url + "/metrics").text
            assert _metric(mid, "sglang:generation_tokens_total") == 0
            assert _metric(mid, "sglang:spec_verify_calls_total") == 0
            for _ in lines:
                pass
        end = httpx.get(url + "/metrics").text
        assert _metric(end, "sglang:generation_tokens_total") == 400
        assert _metric(end, "sglang:spec_verify_calls_total") > 400 / 3
