"""Warm-up (503 then 200) and each injected fault, seen by a real client."""

from __future__ import annotations

import socket
import time

import httpx
import pytest

from sglab.sim.testing import free_port, running_sim

from .helpers import CHART_COMMON, EAGLE_2STEP, FAST, sse_events

PAYLOAD = {"text": "a b c", "sampling_params": {"max_new_tokens": 40, "ignore_eos": True}, "stream": True}


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_a_server_down_every_other_period_fails_all_requests_then_none():
    """error-period-s 1: every request fails for a second, none the next second, and so on."""
    args = CHART_COMMON + ["--sim-error-period-s", "1"]
    seen: list[tuple[float, int]] = []
    with running_sim(args, FAST) as url:
        started = time.monotonic()
        while time.monotonic() - started < 3.5:
            status = httpx.post(url + "/generate", json={**PAYLOAD, "stream": False}).status_code
            seen.append((time.monotonic(), status))
            time.sleep(0.02)
    assert {status for _, status in seen} == {200, 500}
    flips = [t for (t, a), (_, b) in zip(seen, seen[1:]) if a != b]
    assert len(flips) >= 3, seen
    assert all(0.8 < later - earlier < 1.2 for earlier, later in zip(flips, flips[1:])), flips


def test_the_fault_clock_alternates_from_the_start():
    from sglab.sim.faults import FaultInjector, FaultSpec

    now = [100.0]
    injector = FaultInjector(FaultSpec(error_period_s=30.0), seed=0, clock=lambda: now[0])
    seen = []
    for t in (0, 10, 29.9, 30, 59.9, 60, 95):
        now[0] = 100.0 + t
        seen.append(injector.draw(8).error)
    assert seen == [True, True, True, False, False, True, False]
    assert injector.injected["error"] == 4


@pytest.mark.slow
def test_injected_error_on_openai_route_uses_the_envelope():
    with running_sim(CHART_COMMON + ["--sim-error-rate", "1"], FAST) as url:
        response = httpx.post(url + "/v1/completions", json={"prompt": "x", "max_tokens": 3})
        assert response.status_code == 500 and response.json()["object"] == "error"


@pytest.mark.slow
def test_injected_disconnect_cuts_the_stream_without_done():
    with running_sim(CHART_COMMON + ["--sim-disconnect-rate", "1"], FAST) as url:
        with pytest.raises(httpx.HTTPError):
            with httpx.stream("POST", url + "/generate", json=PAYLOAD, timeout=10) as response:
                events, done = sse_events(response)
                assert not done  # reached only if the client does not notice the cut
                raise httpx.RemoteProtocolError("stream ended without [DONE]")
        # the server is still healthy and serves the next (also cut) request's prefix
        assert httpx.get(url + "/health").status_code == 200


@pytest.mark.slow
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


@pytest.mark.slow
def test_slow_start_keeps_the_port_closed():
    port = free_port()
    start = time.monotonic()
    with running_sim(CHART_COMMON, {**FAST, "SGLAB_SIM_SLOW_START_S": "2"}, port=port) as url:
        assert time.monotonic() - start >= 2.0
        assert httpx.get(url + "/health").status_code == 200
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", port)) != 0


@pytest.mark.slow
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
