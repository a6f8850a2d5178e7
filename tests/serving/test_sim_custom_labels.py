"""The simulator labels its request metrics with SGLang's custom labels (--tokenizer-metrics-allowed-custom-labels,
x-custom-labels header), as the per-category canary guard reads them from Prometheus."""

from __future__ import annotations

import json
import re

import httpx
import pytest

from sglab.sim.testing import running_sim

ARGS = ["--model-path", "m", "--enable-metrics", "--tokenizer-metrics-allowed-custom-labels", "category"]


def _series(text: str, name: str) -> dict[str, float]:
    out = {}
    for match in re.finditer(rf"^sglang:{name}\{{([^}}]*)\}} (\S+)$", text, re.M):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group(1)))
        out[labels.get("category", "<none>")] = float(match.group(2))
    return out


def _chat(url: str, category: str | None, header: str = "x-custom-labels") -> None:
    headers = {header: json.dumps({"category": category, "tenant": "t"})} if category else {}
    body = {"messages": [{"role": "user", "content": "Translate to French: good morning, friends."}],
            "max_tokens": 8, "ignore_eos": True}
    assert httpx.post(url + "/v1/chat/completions", json=body, headers=headers, timeout=30).status_code == 200


@pytest.mark.slow
def test_allowed_custom_labels_split_the_request_series():
    with running_sim(ARGS, env={"SGLAB_SIM_TIME_SCALE": "20"}) as url:
        _chat(url, "translation")
        _chat(url, "translation")
        _chat(url, "code")
        _chat(url, None)
        text = httpx.get(url + "/metrics").text
    requests = _series(text, "num_requests_total")
    assert requests == {"translation": 2.0, "code": 1.0, "": 1.0}
    tokens = _series(text, "generation_tokens_total")
    assert tokens["translation"] == 16.0 and tokens["code"] == 8.0
    assert "tenant" not in text, "only allowed labels are recorded"
    itl = _series(text, "inter_token_latency_seconds_count")
    assert itl["translation"] == 14.0 and itl["code"] == 7.0, itl  # 8 tokens: 1 TTFT + 7 inter-token gaps
    assert re.search(r'^sglang:num_running_reqs\{model_name="m"\}', text, re.M), "scheduler gauges are unlabelled"


@pytest.mark.slow
def test_without_the_flag_nothing_is_labelled():
    with running_sim(["--model-path", "m", "--enable-metrics"], env={"SGLAB_SIM_TIME_SCALE": "20"}) as url:
        _chat(url, "translation")
        text = httpx.get(url + "/metrics").text
    assert "category=" not in text and _series(text, "num_requests_total") == {"<none>": 1.0}
