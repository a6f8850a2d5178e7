"""Timing profiles: every constant of the simulator's timing model, named, documented and overridable.

A profile is a `SimProfile`; `default` is calibrated to the article (Kimi-K2.5 int4, TP 8, see
docs/simulator.md for the derivation) and reports the SGLang release sglab pins (sglab/sglang/flags.py). Any field can
be overridden from a JSON/YAML file
(`--sim-profile path.yaml`, keys = field names, unknown keys refused) or one by one
(`--sim-set NAME=VALUE`, `SGLAB_SIM_SET="NAME=VALUE,NAME=VALUE"`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from sglab.sglang.flags import SGLANG_VERSION

Ms = Annotated[float, Field(ge=0)]
Probability = Annotated[float, Field(ge=0, le=1)]


class ProfileError(ValueError):
    """A profile name, file or override that cannot be used; the message says which and how to fix it."""


class SimProfile(BaseModel):
    """The timing model's constants (milliseconds at time_scale 1, per 8-GPU TP group)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    scheduler_overhead_ms: Ms = Field(0.3, description="CPU scheduling per iteration (no overlap with spec v1)")
    target_fixed_compute_ms: Ms = Field(
        10.4165, description="weight-read-bound cost of any target forward (CUDA-graph decode at batch 1)")
    target_per_token_compute_ms: Ms = Field(
        0.05, description="extra target compute per token in the forward (batch size x tokens per request)")
    target_fixed_comm_ms: Ms = Field(0.4825, description="all-reduce latency of a target forward, default NCCL")
    target_per_token_comm_ms: Ms = Field(0.012, description="all-reduce cost per token in the forward")
    verify_fixed_compute_ms: Ms = Field(
        0.519, description="extra fixed compute of a TARGET_VERIFY pass (tree mask, accept/reject sampling)")
    verify_per_draft_token_compute_ms: Ms = Field(
        0.3, description="extra verify compute per draft-token position (batch independent)")
    verify_fixed_comm_ms: Ms = Field(
        9.212, description="NCCL-sensitive fixed time of a verify pass (eager collectives, default NCCL)")
    verify_per_draft_token_comm_ms: Ms = Field(
        0.608, description="NCCL-sensitive verify time per draft-token position")
    draft_fixed_ms: Ms = Field(0.24, description="one EAGLE-3 draft pass (a single decoder layer)")
    draft_per_token_ms: Ms = Field(0.01, description="draft pass cost per token (batch size x topk)")
    prefill_fixed_ms: Ms = Field(20.0, description="fixed cost of a prefill (extend) iteration")
    prefill_per_token_ms: Ms = Field(0.12, description="prefill cost per prompt token in the iteration")
    draft_prefill_per_token_ms: Ms = Field(0.005, description="EAGLE draft extend over the prompt, per token")
    standalone_draft_fixed_ms: Ms = Field(
        2.0, description="one STANDALONE draft pass: a whole small model (e.g. ~1B, 16 layers), not one layer")
    standalone_draft_per_token_ms: Ms = Field(0.02, description="STANDALONE draft pass cost per token")
    standalone_draft_prefill_per_token_ms: Ms = Field(
        0.02, description="STANDALONE draft model's extend over the prompt, per token")
    standalone_accept_factor: Annotated[float, Field(gt=0, le=1)] = Field(
        0.8, description="p_i multiplier of a separate small draft model against EAGLE-3's head (no target features)")
    ngram_lookup_fixed_ms: Ms = Field(0.1, description="NGRAM trie match per cycle (CPU, no draft forward)")
    ngram_lookup_per_request_ms: Ms = Field(0.02, description="NGRAM trie match per running request")
    ngram_accept_base: Probability = Field(0.1, description="NGRAM p_1 for text that never repeats itself")
    ngram_accept_gain: Probability = Field(0.75, description="NGRAM p_1 added per unit of prompt repetition")
    ngram_accept_max: Probability = Field(0.9, description="NGRAM p_1 cap")
    ngram_accept_decay: Probability = Field(0.9, description="NGRAM p_i = p_1 * decay^(i-1) along a match")
    max_prefill_tokens: Annotated[int, Field(ge=1)] = Field(
        16384, description="prompt tokens admitted per prefill iteration (SGLang --max-prefill-tokens default)")

    nccl_proto_factor: dict[str, float] = Field(
        default_factory=lambda: {"LL": 0.6, "LL128": 0.8, "Simple": 1.15},
        description="communication multiplier per NCCL_PROTO value (unset or other: 1.0)")
    nccl_algo_factor: dict[str, float] = Field(
        default_factory=lambda: {"Ring": 0.9, "Tree": 1.0, "NVLS": 0.95, "NVLSTree": 0.95},
        description="communication multiplier per NCCL_ALGO value (unset or other: 1.0)")
    nccl_p2p_level_factor: dict[str, float] = Field(
        default_factory=lambda: {"SYS": 0.8333, "5": 0.8333, "LOC": 1.4, "0": 1.4},
        description="communication multiplier per NCCL_P2P_LEVEL value (unset or other: 1.0)")
    custom_all_reduce_factor: Annotated[float, Field(gt=0)] = Field(
        0.7, description="communication multiplier when custom all-reduce is on (no --disable-custom-all-reduce)")

    accept_prob_by_position: tuple[Probability, ...] = Field(
        (0.46, 0.5013, 0.74, 0.78, 0.794),
        description="P(draft token i accepted | tokens before it accepted), topk 1, i = 1, 2, ...")
    accept_prob_tail: Probability = Field(0.80, description="conditional acceptance beyond the listed positions")

    model_context_length: Annotated[int, Field(ge=1)] = Field(
        262144, description="context length the model's config.json would give (--context-length may not exceed)")
    kv_cache_tokens: Annotated[int, Field(ge=1)] = Field(
        1_000_000, description="max_total_num_tokens reported in server info")
    auto_max_running_requests: Annotated[int, Field(ge=1)] = Field(
        1024, description="batch cap when --max-running-requests is unset and speculation is off")
    eos_min_tokens: Annotated[int, Field(ge=1)] = Field(
        16, description="without ignore_eos a request stops (finish_reason stop) at a length seeded from its "
                        "prompt, uniform in [eos_min_tokens, eos_max_tokens] (capped by max_new_tokens)")
    eos_max_tokens: Annotated[int, Field(ge=1)] = Field(1024, description="see eos_min_tokens")
    version: str = Field(SGLANG_VERSION, description="SGLang version reported in server info")

    @field_validator("nccl_proto_factor", "nccl_algo_factor", "nccl_p2p_level_factor")
    @classmethod
    def _positive_factors(cls, table: dict[str, float]) -> dict[str, float]:
        for key, value in table.items():
            if value <= 0:
                raise ValueError(f"factor for {key!r} must be > 0, got {value}")
        return table


PROFILES: dict[str, SimProfile] = {"default": SimProfile()}


def _read_file(path: Path) -> dict[str, Any]:
    from sglab.core.errors import ConfigError
    from sglab.core.untrusted_json import JsonLimits, decode, loads, read_bytes

    limits = JsonLimits("a simulator profile", max_bytes=1024 * 1024, max_depth=8)
    try:  # the user's file: bounded, and any fault one ProfileError
        text = decode(read_bytes(path, limits), path, limits)
        if path.suffix in (".yaml", ".yml"):
            from ruamel.yaml import YAML

            data = YAML(typ="safe").load(text)
        else:
            data = loads(text, path, limits)
    except ConfigError as exc:
        raise ProfileError(str(exc)) from None
    except Exception as exc:  # ruamel's parse errors and its recursion on deep nesting
        raise ProfileError(f"{path}: not a readable YAML profile ({type(exc).__name__})") from None
    if not isinstance(data, dict):
        raise ProfileError(f"{path}: a profile file must be a mapping of field names to values")
    return data


def _coerce(raw: str) -> Any:
    """'1.5' -> 1.5, '[0.5, 0.7]' -> list, 'LL:0.5' stays a string."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def parse_overrides(text: str | None) -> dict[str, Any]:
    """'a=1,b=2' (env form) -> {'a': 1, 'b': 2}; JSON values allowed, e.g. accept_prob_tail=0.7."""
    out: dict[str, Any] = {}
    if not text:
        return out
    for item in _split_top_level(text):
        if "=" not in item:
            raise ProfileError(f"profile override {item!r} is not NAME=VALUE")
        key, raw = item.split("=", 1)
        out[key.strip()] = _coerce(raw.strip())
    return out


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside [] or {} (so list values survive)."""
    parts, depth, current = [], 0, []
    for char in text:
        if char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    if "".join(current).strip():
        parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


def load_profile(name_or_path: str, overrides: dict[str, Any] | None = None) -> SimProfile:
    """A named profile or a file (YAML/JSON, partial: missing keys keep the default), then overrides."""
    if name_or_path in PROFILES:
        base = PROFILES[name_or_path].model_dump()
    else:
        path = Path(name_or_path)
        if not path.exists():  # a directory or a FIFO: the bounded reader says what it is
            raise ProfileError(
                f"sim profile {name_or_path!r} is neither a built-in profile ({', '.join(PROFILES)}) nor a file")
        base = PROFILES["default"].model_dump()
        base.update(_read_file(path))
    base.update(overrides or {})
    try:
        return SimProfile.model_validate(base)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise ProfileError(f"sim profile {name_or_path!r}: {problems} (field names: see docs/simulator.md)") from None
