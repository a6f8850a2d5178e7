"""Warm-up (503 then 200) and each injected fault, seen by a real client."""

from __future__ import annotations

import socket
import time

import httpx
import pytest

from sglab.sim.testing import free_port, running_sim

from .helpers import CHART_COMMON, EAGLE_2STEP, FAST, sse_events

PAYLOAD = {"text": "a b c", "sampling_params": {"max_new_tokens": 40, "ignore_eos": True}, "stream": True}


def test_health_is_503_during_warmup_then_200():
    with running_sim(CHART_COMMON, {**FAST, "SGLAB_SIM_WARMUP_S": "1.5"}, wait="port") as url:
        assert httpx.get(url + "/health").status_code == 503
        assert httpx.get(url + "/health_generate").status_code == 503
        assert httpx.get(url + "/server_info").json()["status"] == "starting"
        deadline = time.monotonic() + 20
        while httpx.get(url + "/health").status_code != 200:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert httpx.get(url + "/health_generate").status_code == 200
        assert httpx.get(url + "/server_info").json()["status"] == "ready"


def test_injected_errors_are_5xx_and_seeded():
    args = CHART_COMMON + ["--sim-error-rate", "0.5", "--sim-error-status", "503", "--sim-seed", "3"]
    runs = []
    for _ in range(2):
        with running_sim(args, FAST) as url:
            statuses = [httpx.post(url + "/generate", json={**PAYLOAD, "stream": False}).status_code
                        for _ in range(12)]
            info = httpx.get(url + "/server_info").json()["sglab_sim"]
        runs.append(statuses)
        assert info["injected_faults"]["error"] == statuses.count(503)
    assert runs[0] == runs[1]  # same seed, same arrival order: same faults
    assert set(runs[0]) == {200, 503}


def test_injected_error_on_openai_route_uses_the_envelope():
    with running_sim(CHART_COMMON + ["--sim-error-rate", "1"], FAST) as url:
        response = httpx.post(url + "/v1/completions", json={"prompt": "x", "max_tokens": 3})
        assert response.status_code == 500 and response.json()["object"] == "error"


def test_injected_disconnect_cuts_the_stream_without_done():
    with running_sim(CHART_COMMON + ["--sim-disconnect-rate", "1"], FAST) as url:
        with pytest.raises(httpx.HTTPError):
            with httpx.stream("POST", url + "/generate", json=PAYLOAD, timeout=10) as response:
                events, done = sse_events(response)
                assert not done  # reached only if the client does not notice the cut
                raise httpx.RemoteProtocolError("stream ended without [DONE]")
        # the server is still healthy and serves the next (also cut) request's prefix
        assert httpx.get(url + "/health").status_code == 200


def test_injected_stall_pauses_the_stream():
    with running_sim(CHART_COMMON + EAGLE_2STEP + ["--sim-stall-rate", "1", "--sim-stall-s", "1.0"], FAST) as url:
        arrivals, lines = [], []
        with httpx.stream("POST", url + "/generate", json=PAYLOAD, timeout=30) as response:
            for line in response.iter_lines():
                if line:
                    arrivals.append(time.monotonic())
                    lines.append(line)
        gaps = [b - a for a, b in zip(arrivals, arrivals[1:])]
        assert max(gaps) >= 0.9
        assert lines[-1] == "data: [DONE]"


def test_slow_start_keeps_the_port_closed():
    port = free_port()
    start = time.monotonic()
    with running_sim(CHART_COMMON, {**FAST, "SGLAB_SIM_SLOW_START_S": "2"}, port=port) as url:
        assert time.monotonic() - start >= 2.0
        assert httpx.get(url + "/health").status_code == 200
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", port)) != 0


def test_client_disconnect_aborts_the_request(baseline_url):
    long = {**PAYLOAD, "sampling_params": {"max_new_tokens": 50000, "ignore_eos": True}}
    with httpx.stream("POST", baseline_url + "/generate", json=long) as response:
        next(response.iter_lines())
    deadline = time.monotonic() + 10
    while True:
        text = httpx.get(baseline_url + "/metrics").text
        aborted = [line for line in text.splitlines() if line.startswith("sglang:num_aborted_requests_total")]
        if float(aborted[0].rsplit(" ", 1)[1]) >= 1:
            break
        assert time.monotonic() < deadline, "disconnected request was never aborted"
        time.sleep(0.1)
    assert httpx.get(baseline_url + "/health_generate").status_code == 200
