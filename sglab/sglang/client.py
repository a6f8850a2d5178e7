"""HTTP client for what a live SGLang server says about itself: /get_server_info, /flush_cache, /metrics.

Works with SGLang 0.4.x (internal state merged at the top level of /get_server_info) and later
(`internal_states`, one per DP rank; newest servers serve /server_info and keep /get_server_info as
a deprecated alias). A PD-disaggregation router wraps the payload as {"prefill": [...], "decode": [...]}.
The answer is untrusted input: at most MAX_INFO_BYTES after decompression, whole within the timeout, read by
the one bounded JSON reader (sglab.core.untrusted_json).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import httpx

from sglab.core.untrusted_json import MiB, JsonLimits, JsonRefused, parse_bytes, read_stream
from sglab.sglang.secret_names import redact_url_credentials

INFO_PATHS = ("/get_server_info", "/server_info")
DEFAULT_TIMEOUT_S = 10.0
MAX_INFO_BYTES = 4 * MiB  # a real answer is a few KB (the server args and one state per DP rank)
INFO_LIMITS = JsonLimits("a server's /get_server_info answer", MAX_INFO_BYTES, max_depth=16,
                         fix="point the URL at an SGLang server (or sglab's simulator)")


class ServerInfoError(Exception):
    pass


@dataclass
class ServerInfo:
    url: str
    raw: dict = field(default_factory=dict)

    @property
    def args(self) -> dict:
        return self.raw

    @property
    def internal_state(self) -> dict:
        states = self.raw.get("internal_states")
        if isinstance(states, list) and states and isinstance(states[0], dict):
            return states[0]
        return self.raw  # <= 0.4.5: merged at top level

    @property
    def accept_length(self) -> float | None:
        """Server-cumulative average accept length (since boot or the last /flush_cache), if any."""
        value = self.internal_state.get("avg_spec_accept_length", self.raw.get("avg_spec_accept_length"))
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    @property
    def nccl_env(self) -> dict[str, str] | None:
        """NCCL_* env as the server reports it (sglab's simulator does; SGLang itself does not)."""
        sim_block = self.raw.get("sglab_sim")
        holders = (self.raw, self.internal_state, sim_block if isinstance(sim_block, dict) else {})
        for holder in holders:
            for key in ("nccl_env", "env"):
                value = holder.get(key)
                if isinstance(value, dict):
                    return {k: str(v) for k, v in value.items() if str(k).startswith("NCCL_")}
        return None

    @property
    def version(self) -> str | None:
        return self.raw.get("version")


# The servers' keys as the pods read them from the stack's Secret (serving.api-keys, sglab/serving/objects.py);
# the benchmark Job carries the same env (sglab/deploy/benchmark_job.py), and a user whose own servers run with
# --api-key exports it. Read here, at the one place requests to a server are made, and never printed.
API_KEY_ENV = "SGLAB_API_KEY"
ADMIN_API_KEY_ENV = "SGLAB_ADMIN_API_KEY"


def auth_headers(*, admin: bool = False, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The Authorization header SGLang's key middleware asks for: --api-key for the API, --admin-api-key (else
    the API key, as SGLang falls back) for its control endpoints; {} when no key is set."""
    env = os.environ if env is None else env
    key = (env.get(ADMIN_API_KEY_ENV, "") if admin else "") or env.get(API_KEY_ENV, "")
    return {"Authorization": f"Bearer {key}"} if key else {}


def _refused(status: int) -> str:
    return (f" (the server asks for an API key: export {API_KEY_ENV} with its --api-key)"
            if status == 401 else "")


def get_server_info(url: str, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> ServerInfo:
    """What the server says about itself; every fault (unreachable, too large, too slow, not JSON) one
    ServerInfoError naming the URL (credentials shown as ***). `timeout_s` bounds each path's whole answer."""
    url = url.rstrip("/")
    shown = redact_url_credentials(url)
    last_error = ""
    for path in INFO_PATHS:
        deadline = time.monotonic() + timeout_s
        try:
            with httpx.stream("GET", url + path, timeout=timeout_s, headers=auth_headers()) as resp:
                if resp.status_code != 200:
                    last_error = f"{shown}{path}: HTTP {resp.status_code}{_refused(resp.status_code)}"
                    continue
                data = parse_bytes(read_stream(resp.iter_bytes(), INFO_LIMITS, deadline=deadline), INFO_LIMITS)
        except httpx.HTTPError as exc:
            raise ServerInfoError(f"{shown}{path}: {type(exc).__name__}: "
                                  f"{redact_url_credentials(str(exc))}") from None
        except JsonRefused as exc:
            raise ServerInfoError(f"{shown}{path}: {exc}") from None
        if isinstance(data, dict) and isinstance(data.get("decode"), list) and data["decode"]:
            data = data["decode"][0]  # PD-disaggregation router
        return ServerInfo(url, data if isinstance(data, dict) else {})
    raise ServerInfoError(last_error)


def read_accept_length(url: str) -> float | None:
    """The server's accept-length counter (None when the server does not speculate or is unreachable)."""
    try:
        return get_server_info(url).accept_length
    except (ServerInfoError, ValueError):
        return None


def flush_cache(url: str, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> bool:
    """POST /flush_cache: resets the radix cache and the accept-length counters; False if refused."""
    try:
        resp = httpx.post(url.rstrip("/") + "/flush_cache", timeout=timeout_s, headers=auth_headers(admin=True))
    except httpx.HTTPError:
        return False
    return resp.status_code == 200


def get_metrics(url: str, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> str | None:
    """The Prometheus text of /metrics (None when the server runs without --enable-metrics or is down)."""
    try:
        resp = httpx.get(url.rstrip("/") + "/metrics", timeout=timeout_s)
    except httpx.HTTPError:
        return None
    return resp.text if resp.status_code == 200 else None


# Counters whose deltas over a window give its accept length: tokens generated / verify passes (SGLang #25689).
GENERATION_TOKENS = "sglang:generation_tokens_total"
SPEC_VERIFY_CALLS = "sglang:spec_verify_calls_total"


def counter_totals(text: str, names: tuple[str, ...]) -> dict[str, float]:
    """Each named counter summed over its label sets (one series per DP rank / model) from Prometheus text."""
    totals: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, _, rest = line.partition("{") if "{" in line.split(" ", 1)[0] else line.partition(" ")
        if name not in names:
            continue
        value = rest.rsplit("}", 1)[-1].split()[0] if "}" in rest else rest.split()[0]
        try:
            totals[name] = totals.get(name, 0.0) + float(value)
        except ValueError:
            continue
    return totals


def spec_counters(url: str, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> tuple[float, float] | None:
    """(generation tokens, verify calls) so far, or None when /metrics or either counter is missing."""
    text = get_metrics(url, timeout_s=timeout_s)
    if text is None:
        return None
    totals = counter_totals(text, (GENERATION_TOKENS, SPEC_VERIFY_CALLS))
    if GENERATION_TOKENS not in totals or SPEC_VERIFY_CALLS not in totals:
        return None
    return totals[GENERATION_TOKENS], totals[SPEC_VERIFY_CALLS]
