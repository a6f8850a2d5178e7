"""The simulator guards its port as SGLang does when given keys: every request needs `--api-key`, except the
probes (/health*) and Prometheus (/metrics); the control endpoints need `--admin-api-key` when one is set."""

from __future__ import annotations

import asyncio

import httpx
from aiohttp import web

from sglab.sim.cli_args import parse_sim_args
from sglab.sim.server import build_app
from sglab.sim.testing import free_port

KEY, ADMIN = {"Authorization": "Bearer user-key"}, {"Authorization": "Bearer admin-key"}


def _statuses(argv: list[str], calls: list[tuple[str, str, dict]]) -> list[int]:
    async def scenario() -> list[int]:
        port = free_port()
        runner = web.AppRunner(build_app(parse_sim_args(
            ["--model-path", "m", "--sim-time-scale", "10", "--enable-metrics", *argv], env={})))
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as client:
                return [(await client.request(method, path, headers=headers)).status_code
                        for method, path, headers in calls]
        finally:
            await runner.cleanup()

    return asyncio.run(scenario())


def test_a_request_without_the_api_key_is_refused_but_probes_and_metrics_pass():
    got = _statuses(["--api-key", "user-key"], [
        ("GET", "/v1/models", {}), ("GET", "/v1/models", {"Authorization": "Bearer wrong"}),
        ("GET", "/v1/models", KEY), ("GET", "/health", {}), ("GET", "/metrics", {}), ("GET", "/get_model_info", {})])
    assert got == [401, 401, 200, 200, 200, 401]


def test_the_control_endpoints_need_the_admin_key():
    got = _statuses(["--api-key", "user-key", "--admin-api-key", "admin-key"], [
        ("POST", "/flush_cache", KEY), ("POST", "/flush_cache", ADMIN), ("GET", "/v1/models", KEY),
        ("GET", "/v1/models", ADMIN)])
    assert got == [401, 200, 200, 401]


def test_without_keys_everything_is_open():
    assert _statuses([], [("GET", "/v1/models", {}), ("POST", "/flush_cache", {})]) == [200, 200]
