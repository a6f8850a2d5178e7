"""A dead scheduler loop: /health 503, in-flight requests end (abort), new ones get 503.

In-process server, so the failure can be injected."""

from __future__ import annotations

import asyncio

import httpx
from aiohttp import web

from sglab.sim import engine as engine_module
from sglab.sim.cli_args import parse_sim_args
from sglab.sim.server import build_app
from sglab.sim.testing import free_port


def test_dead_scheduler_turns_health_503(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("injected scheduler bug")

    monkeypatch.setattr(engine_module.timing, "iteration_ms", broken)

    async def scenario() -> list[int]:
        port = free_port()
        runner = web.AppRunner(build_app(parse_sim_args(["--model-path", "m", "--sim-time-scale", "10"], env={})))
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        base = f"http://127.0.0.1:{port}"
        try:
            async with httpx.AsyncClient(base_url=base, timeout=5) as client:
                before = (await client.get("/health")).status_code
                # prefill works, the first decode iteration hits the bug and the loop dies
                await client.post("/generate", json={"text": "x", "stream": True,
                                                     "sampling_params": {"max_new_tokens": 1}})
                stream = asyncio.create_task(client.post("/generate", json={
                    "text": "x", "sampling_params": {"max_new_tokens": 5}}))
                for _ in range(100):
                    if (await client.get("/health")).status_code == 503:
                        break
                    await asyncio.sleep(0.02)
                after = (await client.get("/health")).status_code
                in_flight = (await stream).json()["meta_info"]["finish_reason"]["type"]
                refused = (await client.post("/generate", json={"text": "x"})).status_code
                return [before, after, in_flight, refused]
        finally:
            await runner.cleanup()

    assert asyncio.run(scenario()) == [200, 503, "abort", 503]
