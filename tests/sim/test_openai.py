"""The OpenAI-compatible routes, driven by the real `openai` Python client and by raw httpx."""

from __future__ import annotations

import httpx
import openai
import pytest

from sglab.sim.tokens import count_tokens

from .helpers import sse_events

MODEL = "/shared/kimi-k2.5-int4"


@pytest.fixture(scope="module")
def client(eagle_url):
    return openai.OpenAI(base_url=eagle_url + "/v1", api_key="unused", max_retries=0)


@pytest.mark.slow
def test_models(client, eagle_url):
    models = client.models.list()
    assert [m.id for m in models.data] == [MODEL]
    assert httpx.get(eagle_url + "/v1/models/nope").status_code == 404


@pytest.mark.slow
def test_completion_non_streaming(client):
    result = client.completions.create(model=MODEL, prompt="one two three", max_tokens=21,
                                       extra_body={"ignore_eos": True})
    assert result.object == "text_completion"
    assert result.choices[0].finish_reason == "length"
    assert count_tokens(result.choices[0].text) == 21
    assert (result.usage.prompt_tokens, result.usage.completion_tokens, result.usage.total_tokens) == (3, 21, 24)


@pytest.mark.slow
def test_completion_default_max_tokens_is_16(client):
    result = client.completions.create(model=MODEL, prompt="x", extra_body={"ignore_eos": True})
    assert result.usage.completion_tokens == 16


@pytest.mark.slow
def test_completion_streaming_deltas_without_usage(client):
    stream = client.completions.create(model=MODEL, prompt="hello", max_tokens=30, stream=True,
                                       extra_body={"ignore_eos": True})
    chunks = list(stream)
    assert all(c.usage is None and len(c.choices) == 1 for c in chunks)
    text = "".join(c.choices[0].text for c in chunks)
    assert count_tokens(text) == 30
    assert chunks[-1].choices[0].finish_reason == "length"
    assert all(c.choices[0].finish_reason is None for c in chunks[:-1])


@pytest.mark.slow
def test_completion_streaming_usage_only_when_asked(client):
    stream = client.completions.create(model=MODEL, prompt="hello there", max_tokens=12, stream=True,
                                       stream_options={"include_usage": True}, extra_body={"ignore_eos": True})
    chunks = list(stream)
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 12
    assert chunks[-1].usage.prompt_tokens == 2
    assert count_tokens("".join(c.choices[0].text for c in chunks[:-1])) == 12


@pytest.mark.slow
def test_chat_non_streaming(client):
    result = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi there"}],
                                            max_completion_tokens=17, extra_body={"ignore_eos": True})
    assert result.object == "chat.completion"
    assert result.choices[0].message.role == "assistant"
    assert count_tokens(result.choices[0].message.content) == 17 == result.usage.completion_tokens
    assert result.choices[0].finish_reason == "length"


@pytest.mark.slow
def test_chat_streaming(client):
    stream = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}],
                                            max_tokens=25, stream=True, stream_options={"include_usage": True},
                                            extra_body={"ignore_eos": True})
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant" and chunks[0].choices[0].delta.content == ""
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert count_tokens(content) == 25
    finals = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert len(finals) == 1 and finals[0].choices[0].finish_reason == "length"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 25
    assert all(c.object == "chat.completion.chunk" for c in chunks)


@pytest.mark.slow
def test_raw_stream_has_no_usage_chunk_by_default(eagle_url):
    with httpx.stream("POST", eagle_url + "/v1/chat/completions", json={
            "model": MODEL, "messages": [{"role": "user", "content": "x"}], "max_tokens": 5, "stream": True,
            "ignore_eos": True}) as response:
        events, done = sse_events(response)
    assert done and all(e["choices"] for e in events)


@pytest.mark.slow
def test_openai_error_envelope(eagle_url, client):
    response = httpx.post(eagle_url + "/v1/completions", json={"model": MODEL, "prompt": "x", "max_tokens": -3})
    assert response.status_code == 400
    body = response.json()
    assert body["object"] == "error" and body["code"] == 400 and body["message"]
    wrong_type = httpx.post(eagle_url + "/v1/chat/completions", content=b"{}", headers={"Content-Type": "text/plain"})
    assert wrong_type.status_code == 400 and wrong_type.json()["object"] == "error"
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model=MODEL, messages=[], max_tokens=3)


@pytest.mark.slow
def test_continuous_usage_stats_count_what_was_sent(eagle_url):
    with httpx.stream("POST", eagle_url + "/v1/completions", json={
            "model": MODEL, "prompt": "a b c d", "max_tokens": 40, "stream": True, "ignore_eos": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True}}) as response:
        events, done = sse_events(response)
    assert done
    sent = 0
    for event in events[:-1]:
        sent += count_tokens(event["choices"][0]["text"])
        assert event["usage"] == {"prompt_tokens": 4, "total_tokens": 4 + sent, "completion_tokens": sent,
                                  "reasoning_tokens": 0}
    assert sent == 40 and events[-1]["usage"]["completion_tokens"] == 40
