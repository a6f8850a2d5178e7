"""The live-flag check: does a running server run what the stack declares for its arm?

The bench runner refuses to measure when a server's live flags differ from the arm's launch args
(the check llm-d-benchmark skips for SGLang), and reads the server-side accept length around each
round. The HTTP client and the flag normalisation are the SGLang contract's (sglab/sglang/).
"""

from __future__ import annotations

from sglab.config.arms import ArmSpec
from sglab.sglang.client import (DEFAULT_TIMEOUT_S, INFO_PATHS, ServerInfo, ServerInfoError, flush_cache,
                                 get_metrics, get_server_info, read_accept_length)
from sglab.sglang.flags import POSITIONAL, decode, flag_key, flag_text, norm_value
from sglab.sglang.rules import ALGORITHM_ALIASES

# Flags sglab substitutes per target (the sim gets free ports; a Service maps ports).
NOT_COMPARED = frozenset({"--host", "--port", POSITIONAL})

__all__ = [
    "ALGORITHM_ALIASES", "DEFAULT_TIMEOUT_S", "INFO_PATHS", "NOT_COMPARED", "ServerInfo", "ServerInfoError",
    "flag_key", "flush_cache", "get_metrics", "get_server_info", "live_mismatches", "read_accept_length", "unverified",
]


def live_mismatches(arm: ArmSpec, info: ServerInfo) -> list[str]:
    """Every way the live server differs from the arm's declared launch args and NCCL env."""
    found: list[str] = []
    expected = decode(arm.args)
    for flag, decoded in expected.items():
        if flag in NOT_COMPARED:
            continue
        value = flag_text(decoded)
        key = flag_key(flag)
        if key not in info.args:
            found.append(f"{arm.name}: {flag} is declared ({value}) but the server does not report {key}")
            continue
        live = info.args[key]
        if norm_value(live) != norm_value(decoded if isinstance(decoded, tuple) else value):
            found.append(f"{arm.name}: {flag} is {live!r} on the server, the stack declares {value!r}")
    live_algorithm = info.args.get("speculative_algorithm")
    if "--speculative-algorithm" not in expected and norm_value(live_algorithm) not in ("none", ""):
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


def unverified(arm: ArmSpec, info: ServerInfo) -> list[str]:
    """What the arm declares that the server does not report, so the live check cannot compare it: its NCCL_*
    settings where the server reports no environment (SGLang does not; sglab's simulator does)."""
    if info.nccl_env is not None:
        return []
    return [f"{key}={value}" for key, value in sorted(arm.env.items()) if key.startswith("NCCL_")]
