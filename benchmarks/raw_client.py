"""A minimal asyncio + aiohttp streaming client: the yardstick the Locust load generator is compared with.

Same requests (sglab's LoadSettings payloads and prompts), same SSE parsing (sglab's StreamParser), no
Locust. Run as a subprocess so its event loop never meets gevent:

    python benchmarks/raw_client.py URL --users 16 --seconds 8 --max-new-tokens 256      # prints JSON
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


async def _run(url: str, users: int, seconds: float | None, requests_per_user: int | None,
               max_new_tokens: int) -> dict:
    import aiohttp

    from sglab.config.loadplan import LoadPlan
    from sglab.load.settings import LoadSettings
    from sglab.load.stream_parser import StreamParser

    settings = LoadSettings.from_plan(LoadPlan(max_new_tokens=max_new_tokens))
    deadline = time.perf_counter() + seconds if seconds else None
    out = {"tokens": 0, "requests": 0, "errors": 0, "ttft_ms": [], "itl_ms": []}

    async def user(i: int, session) -> None:
        n, done = i, 0
        while (deadline is None or time.perf_counter() < deadline) and \
                (requests_per_user is None or done < requests_per_user):
            prompt = settings.prompts[n % len(settings.prompts)]
            n += users
            done += 1
            parser = StreamParser("generate")
            start = time.perf_counter()
            async with session.post(url + settings.path, json=settings.payload(prompt)) as resp:
                async for line in resp.content:
                    parser.feed_line(line, time.perf_counter() - start)
            m = parser.finish(time.perf_counter() - start)
            if m.error is None and m.output_tokens == max_new_tokens:
                out["tokens"] += m.output_tokens
                out["requests"] += 1
                out["ttft_ms"].append(m.ttft_s * 1000)
                out["itl_ms"].extend(g * 1000 for g in m.itl_s)
            else:
                out["errors"] += 1

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None),
                                     connector=aiohttp.TCPConnector(limit=users)) as session:
        await asyncio.gather(*(user(i, session) for i in range(users)))
    return out


def run_subprocess(url: str, *, users: int, max_new_tokens: int, seconds: float | None = None,
                   requests_per_user: int | None = None) -> dict:
    cmd = [sys.executable, str(HERE / "raw_client.py"), url, "--users", str(users),
           "--max-new-tokens", str(max_new_tokens)]
    if seconds:
        cmd += ["--seconds", str(seconds)]
    if requests_per_user:
        cmd += ["--requests-per-user", str(requests_per_user)]
    return json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--users", type=int, default=1)
    parser.add_argument("--seconds", type=float)
    parser.add_argument("--requests-per-user", type=int)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(_run(args.url, args.users, args.seconds, args.requests_per_user,
                                      args.max_new_tokens))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
