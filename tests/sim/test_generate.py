"""/generate over real HTTP (httpx): exact token counts, SSE chunk structure, speculative fields."""

from __future__ import annotations

import httpx
import pytest

from sglab.sim.tokens import count_tokens, make_prompt
from .helpers import stream_generate

SPEC_FIELDS = ("spec_verify_ct", "spec_accept_length", "spec_accept_rate", "spec_accept_token_num",
               "spec_draft_token_num", "spec_num_correct_drafts", "spec_num_proposed_drafts",
               "spec_correct_drafts_histogram", "spec_accepted_drafts", "spec_proposed_drafts",
               "spec_accept_histogram")


def _check_stream(events: list[dict], max_new: int, prompt_tokens: int) -> None:
    counts = [e["meta_info"]["completion_tokens"] for e in events]
    assert counts[0] == 1
    assert counts == sorted(counts) and len(set(counts)) == len(counts)
    assert counts[-1] == max_new
    for i, event in enumerate(events):
        meta = event["meta_info"]
        assert meta["prompt_tokens"] == prompt_tokens
        assert count_tokens(event["text"]) == meta["completion_tokens"] == len(event["output_ids"])
        if i:
            assert event["text"].startswith(events[i - 1]["text"])  # cumulative text
        if i < len(events) - 1:
            assert meta["finish_reason"] is None and "e2e_latency" not in meta
    final = events[-1]["meta_info"]
    assert final["finish_reason"] == {"type": "length", "length": max_new}
    assert final["e2e_latency"] > 0


@pytest.mark.slow
def test_baseline_stream_one_chunk_per_token(baseline_url):
    events, done = stream_generate(baseline_url, {"text": make_prompt(40), "sampling_params": {
        "max_new_tokens": 64, "ignore_eos": True, "temperature": 0}})
    assert done
    assert len(events) == 64
    _check_stream(events, 64, 40)
    assert not any(k.startswith("spec_") for k in events[-1]["meta_info"])
    final = events[-1]["meta_info"]  # --enable-metrics adds SGLang's per-request timing to the final chunk
    assert final["decode_throughput"] > 0 and final["prefill_finished_ts"] <= final["decode_finished_ts"]


@pytest.mark.slow
def test_eagle_stream_one_chunk_per_verify_cycle(eagle_url):
    events, done = stream_generate(eagle_url, {"input_ids": list(range(25)), "sampling_params": {
        "max_new_tokens": 200, "ignore_eos": True}})
    assert done
    _check_stream(events, 200, 25)
    steps = [b["meta_info"]["completion_tokens"] - a["meta_info"]["completion_tokens"]
             for a, b in zip(events, events[1:])]
    assert max(steps) > 1 and all(1 <= s <= 3 for s in steps)  # 2 steps: 1..3 tokens per cycle
    meta = events[-1]["meta_info"]
    assert all(field in meta for field in SPEC_FIELDS)
    verify = meta["spec_verify_ct"]
    assert verify == len(events) - 1  # the first chunk comes from prefill, then one per verify pass
    assert meta["spec_accept_length"] == pytest.approx(meta["completion_tokens"] / verify)
    assert meta["spec_accept_token_num"] == meta["completion_tokens"] - 1 - verify
    assert meta["spec_draft_token_num"] == verify * 2
    assert meta["spec_accept_rate"] == pytest.approx(meta["spec_accept_token_num"] / meta["spec_draft_token_num"])
    histogram = meta["spec_correct_drafts_histogram"]
    assert len(histogram) == 3 and sum(histogram) == verify
    assert sum(n * c for n, c in enumerate(histogram)) == meta["spec_accept_token_num"]
    assert 1.3 < meta["spec_accept_length"] < 2.2


@pytest.mark.slow
def test_non_streaming_and_batch(eagle_url):
    body = httpx.post(eagle_url + "/generate", json={"text": "a b c", "sampling_params": {
        "max_new_tokens": 33, "ignore_eos": True}}, timeout=30).json()
    assert body["meta_info"]["completion_tokens"] == 33 == count_tokens(body["text"]) == len(body["output_ids"])
    assert body["meta_info"]["prompt_tokens"] == 3
    batch = httpx.post(eagle_url + "/generate", json={"text": ["x", "y z"], "sampling_params": [
        {"max_new_tokens": 5, "ignore_eos": True}, {"max_new_tokens": 7, "ignore_eos": True}]}, timeout=30).json()
    assert [b["meta_info"]["completion_tokens"] for b in batch] == [5, 7]


@pytest.mark.slow
def test_batch_stream_carries_index(baseline_url):
    events, done = stream_generate(baseline_url, {"text": ["one", "two"], "sampling_params": {
        "max_new_tokens": 6, "ignore_eos": True}})
    assert done
    for index in (0, 1):
        mine = [e for e in events if e["index"] == index]
        assert [e["meta_info"]["completion_tokens"] for e in mine] == [1, 2, 3, 4, 5, 6]


@pytest.mark.slow
def test_without_ignore_eos_stops_deterministically(baseline_url):
    payload = {"text": "stop early please", "sampling_params": {"max_new_tokens": 5000}}
    first = httpx.post(baseline_url + "/generate", json=payload, timeout=60).json()["meta_info"]
    second = httpx.post(baseline_url + "/generate", json=payload, timeout=60).json()["meta_info"]
    assert first["finish_reason"]["type"] == "stop" and "matched" in first["finish_reason"]
    assert first["completion_tokens"] == second["completion_tokens"] < 5000


@pytest.mark.slow
def test_max_new_tokens_edge_cases(baseline_url):
    one = httpx.post(baseline_url + "/generate", json={"text": "hi", "sampling_params": {
        "max_new_tokens": 1, "ignore_eos": True}}).json()["meta_info"]
    assert one["completion_tokens"] == 1 and one["finish_reason"] == {"type": "length", "length": 1}
    zero = httpx.post(baseline_url + "/generate", json={"text": "hi", "sampling_params": {
        "max_new_tokens": 0}}).json()["meta_info"]
    assert zero["completion_tokens"] == 0


@pytest.mark.parametrize("payload", [
    {"sampling_params": {"max_new_tokens": 4}},
    {"text": "x", "input_ids": [1], "sampling_params": {}},
    {"text": "x", "sampling_params": {"max_new_tokens": -1}},
    {"text": "x", "sampling_params": {"temperature": -0.5}},
    {"input_ids": list(range(10)), "sampling_params": {"max_new_tokens": 300000}},
])
@pytest.mark.slow
def test_bad_requests_get_sglangs_400(baseline_url, payload):
    response = httpx.post(baseline_url + "/generate", json=payload)
    assert response.status_code == 400
    assert isinstance(response.json()["error"]["message"], str)
