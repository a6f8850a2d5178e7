"""Shared test helpers: chart-like launch args and SSE parsing."""

from __future__ import annotations

import json

import httpx

CHART_COMMON = [
    "--model-path", "/shared/kimi-k2.5-int4", "--host", "0.0.0.0", "--port", "30000", "--tp-size", "8",
    "--mem-fraction-static", "0.88", "--num-continuous-decode-steps", "4", "--disable-custom-all-reduce",
    "--trust-remote-code", "--max-running-requests", "48", "--enable-metrics",
]
EAGLE_2STEP = [
    "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/shared/kimi-k2.5-eagle3",
    "--speculative-num-steps", "2", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "3",
]
TUNED_NCCL = {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring", "NCCL_P2P_LEVEL": "SYS"}
FAST = {"SGLAB_SIM_TIME_SCALE": "50"}


def sse_events(response: httpx.Response) -> tuple[list[dict], bool]:
    """The JSON payloads of an SSE response, and whether it ended with [DONE]."""
    events, done = [], False
    for line in response.iter_lines():
        if not line:
            continue
        assert line.startswith("data: "), line
        body = line[len("data: "):]
        if body == "[DONE]":
            done = True
            continue
        assert not done, "data after [DONE]"
        events.append(json.loads(body))
    return events, done


def stream_generate(url: str, payload: dict, timeout: float = 30.0) -> tuple[list[dict], bool]:
    with httpx.stream("POST", url + "/generate", json={**payload, "stream": True}, timeout=timeout) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        return sse_events(response)
