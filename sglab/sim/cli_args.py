"""`sglab sim` command line: SGLang's launch_server flags plus the simulator's own --sim-* knobs.

The same rendered launch arguments start either `python3 -m sglang.launch_server` or `sglab sim`.
SGLang flags the simulator does not model are accepted and echoed in server info under their
snake_case name; a malformed value for a known flag fails like SGLang's argparse (exit 2). NCCL_* is
read from the environment like a real server; --sim-* flags beat SGLAB_SIM_* env, which beats defaults.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sglab.sim.faults import FaultSpec
from sglab.sim.profile import ProfileError, SimProfile, load_profile, parse_overrides
from sglab.sim.timing import SpecSetup, comm_factor

# (flags, type, default); type None = switch. dest = first long flag in snake_case.
SGLANG_FLAGS: tuple[tuple[tuple[str, ...], Any, Any], ...] = (
    (("--model-path", "--model"), str, None),
    (("--tokenizer-path",), str, None),
    (("--tokenizer-mode",), str, "auto"),
    (("--load-format",), str, "auto"),
    (("--trust-remote-code",), None, False),
    (("--dtype",), str, "auto"),
    (("--kv-cache-dtype",), str, "auto"),
    (("--quantization",), str, None),
    (("--served-model-name",), str, None),
    (("--chat-template",), str, None),
    (("--revision",), str, None),
    (("--context-length",), int, None),
    (("--device",), str, "cuda"),
    (("--host",), str, "127.0.0.1"),
    (("--port",), int, 30000),
    (("--mem-fraction-static",), float, None),
    (("--max-running-requests",), int, None),
    (("--max-total-tokens",), int, None),
    (("--chunked-prefill-size",), int, None),
    (("--max-prefill-tokens",), int, 16384),
    (("--schedule-policy",), str, "fcfs"),
    (("--schedule-conservativeness",), float, 1.0),
    (("--cuda-graph-max-bs",), int, None),
    (("--disable-cuda-graph",), None, False),
    (("--tp-size", "--tp", "--tensor-parallel-size"), int, 1),
    (("--dp-size", "--data-parallel-size"), int, 1),
    (("--pp-size", "--pipeline-parallel-size"), int, 1),
    (("--ep-size", "--expert-parallel-size"), int, 1),
    (("--stream-interval",), int, 1),
    (("--stream-output",), None, False),
    (("--random-seed",), int, None),
    (("--log-level",), str, "info"),
    (("--api-key",), str, None),
    (("--enable-metrics",), None, False),
    (("--decode-log-interval",), int, 40),
    (("--enable-cache-report",), None, False),
    (("--num-continuous-decode-steps",), int, 1),
    (("--disable-custom-all-reduce",), None, False),
    (("--disable-overlap-schedule",), None, False),
    (("--skip-server-warmup",), None, False),
    (("--attention-backend",), str, None),
    (("--page-size",), int, 1),
    (("--nnodes",), int, 1),
    (("--node-rank",), int, 0),
    (("--dist-init-addr", "--nccl-init-addr"), str, None),
    (("--watchdog-timeout",), float, 300.0),
    (("--enable-dp-attention",), None, False),
    (("--speculative-algorithm",), str, None),
    (("--speculative-draft-model-path", "--speculative-draft-model"), str, None),
    (("--speculative-num-steps",), int, None),
    (("--speculative-eagle-topk",), int, None),
    (("--speculative-num-draft-tokens",), int, None),
    (("--speculative-accept-threshold-single",), float, 1.0),
    (("--speculative-accept-threshold-acc",), float, 1.0),
    (("--speculative-token-map",), str, None),
    (("--speculative-attention-mode",), str, "prefill"),
)
SPECULATIVE_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM")
DRAFT_MODEL_ALGORITHMS = ("EAGLE", "EAGLE3", "STANDALONE")
FORCED_MAX_RUNNING_REQUESTS = 48  # SGLang forces this for the EAGLE family when the flag is unset
AUTO_SPEC_SHAPE = (3, 1, 4)  # SGLang's auto (num_steps, topk, num_draft_tokens) for most models
ALLOW_LONGER_CONTEXT_ENV = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"


class SimArgsError(ValueError):
    """Launch arguments or SGLAB_SIM_* env the server cannot start with."""


@dataclass(frozen=True)
class SimKnob:
    flag: str
    env: str
    type: Any
    default: Any
    help: str


SIM_KNOBS: tuple[SimKnob, ...] = (
    SimKnob("--sim-profile", "SGLAB_SIM_PROFILE", str, "default",
            "timing profile: a built-in name or a YAML/JSON file"),
    SimKnob("--sim-set", "SGLAB_SIM_SET", str, "", "profile overrides NAME=VALUE[,NAME=VALUE...]"),
    SimKnob("--sim-seed", "SGLAB_SIM_SEED", int, 0, "seed of acceptance draws, EOS lengths and faults"),
    SimKnob("--sim-time-scale", "SGLAB_SIM_TIME_SCALE", float, 1.0, "divide every modelled duration by this"),
    SimKnob("--sim-warmup-s", "SGLAB_SIM_WARMUP_S", float, 0.0, "seconds of 503 from /health* after start"),
    SimKnob("--sim-spin-ms", "SGLAB_SIM_SPIN_MS", float, 1.0,
            "busy-wait this close to each deadline (sleep alone is up to 1 ms late); at most 10%% of an iteration"),
    SimKnob("--sim-error-rate", "SGLAB_SIM_ERROR_RATE", float, 0.0, "fraction of requests answered with a 5xx"),
    SimKnob("--sim-error-status", "SGLAB_SIM_ERROR_STATUS", int, 500, "status code of injected errors"),
    SimKnob("--sim-disconnect-rate", "SGLAB_SIM_DISCONNECT_RATE", float, 0.0,
            "fraction of streams cut mid-stream"),
    SimKnob("--sim-stall-rate", "SGLAB_SIM_STALL_RATE", float, 0.0, "fraction of streams that stall mid-stream"),
    SimKnob("--sim-stall-s", "SGLAB_SIM_STALL_S", float, 2.0, "length of an injected stall (seconds, not scaled)"),
    SimKnob("--sim-slow-start-s", "SGLAB_SIM_SLOW_START_S", float, 0.0, "keep the port closed this long"),
)


@dataclass(frozen=True)
class SimConfig:
    """Everything the simulator server needs, resolved once at start."""

    server_args: dict[str, Any]
    profile: SimProfile
    profile_name: str
    profile_overrides: dict[str, Any]
    nccl_env: dict[str, str]
    comm_factor: float
    spec: SpecSetup | None
    seed: int
    time_scale: float
    warmup_s: float
    spin_ms: float
    faults: FaultSpec
    unknown_flags: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    record_step_time: bool = False

    @property
    def host(self) -> str:
        return self.server_args["host"]

    @property
    def port(self) -> int:
        return self.server_args["port"]

    @property
    def served_model_name(self) -> str:
        return self.server_args["served_model_name"]

    @property
    def max_running_requests(self) -> int:
        return self.server_args["max_running_requests"]

    @property
    def context_length(self) -> int:
        return self.server_args["context_length"]


def _dest(flags: tuple[str, ...]) -> str:
    return flags[0][2:].replace("-", "_")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sglab sim",
        description="SGLang-compatible CPU simulator (EAGLE-3 + NCCL timing model). Accepts "
                    "python -m sglang.launch_server flags; simulator knobs are --sim-* or SGLAB_SIM_* env.",
        allow_abbrev=False,
    )
    for flags, kind, default in SGLANG_FLAGS:
        if kind is None:
            parser.add_argument(*flags, dest=_dest(flags), action="store_true", default=default)
        elif flags[0] == "--speculative-algorithm":
            parser.add_argument(*flags, dest=_dest(flags), type=str, default=default, choices=SPECULATIVE_ALGORITHMS)
        else:
            parser.add_argument(*flags, dest=_dest(flags), type=kind, default=default)
    for action in parser._actions:
        if action.dest == "model_path":
            action.required = True
    sim = parser.add_argument_group("simulator knobs (flag beats SGLAB_SIM_* env)")
    for knob in SIM_KNOBS:
        sim.add_argument(knob.flag, dest=_dest((knob.flag,)), type=knob.type, default=None,
                         help=f"{knob.help} [env {knob.env}, default {knob.default!r}]")
    return parser


def _unknown_flags(parser: argparse.ArgumentParser, rest: list[str]) -> dict[str, Any]:
    """Leftover `--flag [value]` pairs, echoed as snake_case; stray positionals are an error."""
    out: dict[str, Any] = {}
    i = 0
    while i < len(rest):
        arg = rest[i]
        if not arg.startswith("--") or arg == "--":
            parser.error(f"unrecognized arguments: {' '.join(rest[i:])}")
        name, eq, value = arg[2:].partition("=")
        key = name.replace("-", "_")
        if eq:
            out[key] = value
        elif i + 1 < len(rest) and not rest[i + 1].startswith("--"):
            out[key] = rest[i + 1]
            i += 1
        else:
            out[key] = True
        i += 1
    return out


def _knob(args: argparse.Namespace, env: Mapping[str, str], knob: SimKnob) -> Any:
    value = getattr(args, _dest((knob.flag,)))
    if value is not None:
        return value
    raw = env.get(knob.env)
    if raw is None or raw == "":
        return knob.default
    try:
        return knob.type(raw)
    except ValueError:
        raise SimArgsError(f"{knob.env}={raw!r} is not a valid {knob.type.__name__}; "
                           f"fix the environment variable ({knob.help})") from None


def _resolve_speculative(values: dict[str, Any], notes: list[str]) -> SpecSetup | None:
    algorithm = values["speculative_algorithm"]
    if algorithm is None:
        return None
    if algorithm == "NEXTN":
        values["speculative_algorithm"] = algorithm = "EAGLE"
    if algorithm in DRAFT_MODEL_ALGORITHMS and not values["speculative_draft_model_path"]:
        raise SimArgsError(f"--speculative-algorithm {algorithm} needs --speculative-draft-model-path")
    if values["max_running_requests"] is None:
        values["max_running_requests"] = FORCED_MAX_RUNNING_REQUESTS
        notes.append(f"max_running_requests is set to {FORCED_MAX_RUNNING_REQUESTS} for speculative decoding "
                     "(as SGLang does when the flag is unset)")
    shape = (values["speculative_num_steps"], values["speculative_eagle_topk"], values["speculative_num_draft_tokens"])
    if shape[0] is None:
        if shape[1] is not None or shape[2] is not None:
            raise SimArgsError("--speculative-num-steps is unset but --speculative-eagle-topk or "
                               "--speculative-num-draft-tokens is set; set all three or none (SGLang asserts this)")
        shape = AUTO_SPEC_SHAPE
        notes.append(f"speculative (num_steps, eagle_topk, num_draft_tokens) auto-chosen as {shape}")
    steps, topk, draft = shape
    if topk is None or draft is None:
        raise SimArgsError("--speculative-num-steps is set: also set --speculative-eagle-topk and "
                           "--speculative-num-draft-tokens")
    if steps < 1 or topk < 1 or draft < 1:
        raise SimArgsError("--speculative-num-steps, --speculative-eagle-topk and --speculative-num-draft-tokens "
                           "must be >= 1")
    if topk == 1 and draft != steps + 1:
        notes.append("speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when "
                     "speculative_eagle_topk == 1")
        draft = steps + 1
    values["speculative_num_steps"], values["speculative_eagle_topk"] = steps, topk
    values["speculative_num_draft_tokens"] = draft
    return SpecSetup(num_steps=steps, topk=topk, num_draft_tokens=draft, draft_model=algorithm != "NGRAM")


def parse_sim_args(argv: list[str], env: Mapping[str, str] | None = None) -> SimConfig:
    """argv as for sglang.launch_server (+ --sim-*); env defaults to os.environ. Exit 2 on bad flags."""
    env = os.environ if env is None else env
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    unknown = _unknown_flags(parser, rest)
    values = {_dest(flags): getattr(args, _dest(flags)) for flags, _, _ in SGLANG_FLAGS}
    notes: list[str] = []
    for key in ("port", "tp_size", "dp_size", "pp_size", "max_running_requests", "context_length",
                "num_continuous_decode_steps", "stream_interval", "max_prefill_tokens"):
        if values[key] is not None and values[key] < 1:
            raise SimArgsError(f"--{key.replace('_', '-')} must be >= 1, got {values[key]}")
    if values["port"] > 65535:
        raise SimArgsError(f"--port {values['port']} is not a TCP port")
    if values["mem_fraction_static"] is not None and not 0 < values["mem_fraction_static"] < 1:
        raise SimArgsError(f"--mem-fraction-static must be in (0, 1), got {values['mem_fraction_static']}")

    knobs = {k.flag: _knob(args, env, k) for k in SIM_KNOBS}
    try:
        overrides = parse_overrides(knobs["--sim-set"])
        profile = load_profile(knobs["--sim-profile"], overrides)
    except ProfileError as exc:
        raise SimArgsError(str(exc)) from None
    if knobs["--sim-time-scale"] <= 0:
        raise SimArgsError(f"--sim-time-scale / SGLAB_SIM_TIME_SCALE must be > 0, got {knobs['--sim-time-scale']}")
    if knobs["--sim-warmup-s"] < 0 or knobs["--sim-spin-ms"] < 0:
        raise SimArgsError("--sim-warmup-s and --sim-spin-ms must be >= 0")
    faults = FaultSpec(
        error_rate=knobs["--sim-error-rate"], error_status=knobs["--sim-error-status"],
        disconnect_rate=knobs["--sim-disconnect-rate"], stall_rate=knobs["--sim-stall-rate"],
        stall_s=knobs["--sim-stall-s"], slow_start_s=knobs["--sim-slow-start-s"],
    )
    try:
        faults.validate()
    except ValueError as exc:
        raise SimArgsError(f"fault injection: {exc}") from None

    spec = _resolve_speculative(values, notes)
    if values["context_length"] is None:
        values["context_length"] = profile.model_context_length
    elif values["context_length"] > profile.model_context_length:
        message = (f"User-specified context_length ({values['context_length']}) is greater than the derived "
                   f"context_length ({profile.model_context_length}).")
        if env.get(ALLOW_LONGER_CONTEXT_ENV, "").lower() not in ("1", "true", "yes"):
            raise SimArgsError(f"{message} Set {ALLOW_LONGER_CONTEXT_ENV}=1 to allow it, or lower --context-length")
        notes.append(message + f" Allowed by {ALLOW_LONGER_CONTEXT_ENV}.")
    if values["max_running_requests"] is None:
        values["max_running_requests"] = profile.auto_max_running_requests
    values["tokenizer_path"] = values["tokenizer_path"] or values["model_path"]
    values["served_model_name"] = values["served_model_name"] or values["model_path"]
    values["max_prefill_tokens"] = values["max_prefill_tokens"] or profile.max_prefill_tokens
    if values["num_continuous_decode_steps"] != 1:
        notes.append("num_continuous_decode_steps has no effect in SGLang >= 0.4 (accepted and echoed)")
    for key in unknown:
        notes.append(f"--{key.replace('_', '-')} is not modelled by the simulator (accepted and echoed)")

    nccl_env = {k: v for k, v in sorted(env.items()) if k.startswith("NCCL_")}
    return SimConfig(
        server_args={**values, **unknown},
        profile=profile,
        profile_name=knobs["--sim-profile"],
        profile_overrides=overrides,
        nccl_env=nccl_env,
        comm_factor=comm_factor(profile, nccl_env, values["disable_custom_all_reduce"]),
        spec=spec,
        seed=knobs["--sim-seed"],
        time_scale=knobs["--sim-time-scale"],
        warmup_s=knobs["--sim-warmup-s"],
        spin_ms=knobs["--sim-spin-ms"],
        faults=faults,
        unknown_flags=unknown,
        notes=tuple(notes),
        record_step_time=env.get("SGLANG_RECORD_STEP_TIME", "").lower() in ("1", "true", "yes"),
    )


def parse_or_exit(argv: list[str], env: Mapping[str, str] | None = None) -> SimConfig:
    try:
        return parse_sim_args(argv, env)
    except SimArgsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
