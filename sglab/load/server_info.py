"""What a live server says about itself (/get_server_info): its flags and its accept-length counter.

The bench runner refuses to measure when a server's live flags differ from what the stack declares
for that arm (the check llm-d-benchmark skips for SGLang), and reads the server-side accept length
around each round. Works with SGLang 0.4.x (top-level internal state) and later (`internal_states`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import httpx

from sglab.config.arms import ArmSpec, parse_launch_args

INFO_PATHS = ("/get_server_info", "/server_info")
# Flags sglab substitutes per target (the sim gets free ports; a Service maps ports).
NOT_COMPARED = frozenset({"--host", "--port"})
ALGORITHM_ALIASES = {"NEXTN": "EAGLE"}
DEFAULT_TIMEOUT_S = 10.0


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
        return float(value) if isinstance(value, (int, float)) else None

    @property
    def nccl_env(self) -> dict[str, str] | None:
        """NCCL_* env as the server reports it (our simulator does; SGLang itself does not)."""
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


def get_server_info(url: str, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> ServerInfo:
    url = url.rstrip("/")
    last_error = ""
    for path in INFO_PATHS:
        try:
            resp = httpx.get(url + path, timeout=timeout_s)
        except httpx.HTTPError as exc:
            raise ServerInfoError(f"{url}{path}: {type(exc).__name__}: {exc}") from None
        if resp.status_code == 200:
            data = resp.json()
            if isinstance(data, dict) and "decode" in data and isinstance(data["decode"], list):
                data = data["decode"][0]  # PD-disaggregation router
            return ServerInfo(url, data if isinstance(data, dict) else {})
        last_error = f"{url}{path}: HTTP {resp.status_code}"
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
        resp = httpx.post(url.rstrip("/") + "/flush_cache", timeout=timeout_s)
    except httpx.HTTPError:
        return False
    return resp.status_code == 200


def _norm(value) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value).strip()
    if text.lower() in ("true", "false", "none", "null"):
        return {"null": "none"}.get(text.lower(), text.lower())
    try:
        number = float(text)
    except ValueError:
        return ALGORITHM_ALIASES.get(text, text)
    return repr(int(number)) if number == int(number) else repr(number)


def flag_key(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def live_mismatches(arm: ArmSpec, info: ServerInfo) -> list[str]:
    """Every way the live server differs from the arm's declared launch args and NCCL env."""
    found: list[str] = []
    expected = parse_launch_args(arm.args)
    for flag, value in expected.items():
        if flag in NOT_COMPARED:
            continue
        key = flag_key(flag)
        if key not in info.args:
            found.append(f"{arm.name}: {flag} is declared ({value}) but the server does not report {key}")
            continue
        live = info.args[key]
        if _norm(live) != _norm(value):
            found.append(f"{arm.name}: {flag} is {live!r} on the server, the stack declares {value!r}")
    live_algorithm = info.args.get("speculative_algorithm")
    if "--speculative-algorithm" not in expected and _norm(live_algorithm) not in ("none", ""):
        found.append(f"{arm.name}: the server runs speculative decoding ({live_algorithm}) "
                     "but the stack declares none for this arm")
    reported = info.nccl_env
    if reported is not None:
        declared = {k: v for k, v in arm.env.items() if k.startswith("NCCL_")}
        for key in sorted(set(declared) | set(reported)):
            if declared.get(key) != reported.get(key):
                found.append(f"{arm.name}: env {key} is {reported.get(key)!r} on the server, "
                             f"the stack declares {declared.get(key)!r}")
    return found
