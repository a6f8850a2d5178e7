"""`sglab sim` command line: SGLang's launch_server flags plus the simulator's own --sim-* knobs.

The same rendered launch arguments start either `python3 -m sglang.launch_server` or `sglab sim`.
SGLang flags the simulator does not model are accepted and echoed in server info under their
snake_case name; a malformed value for a known flag fails like SGLang's argparse (exit 2). NCCL_* is
read from the environment like a real server; --sim-* flags beat SGLAB_SIM_* env, which beats defaults.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sglab.core.errors import USAGE
from sglab.sglang import flags, rules, sim_knobs
from sglab.sglang.env import nccl_env as nccl_part
from sglab.sglang.flags import SGLANG_VERSION
from sglab.sim.adaptive import AdaptiveConfig, AdaptiveConfigError, AdaptiveController, load_adaptive_config
from sglab.sim.faults import FaultSpec
from sglab.sim.profile import ProfileError, SimProfile, load_profile, parse_overrides
from sglab.sim.timing import SpecSetup, comm_factor

ALLOW_LONGER_CONTEXT_ENV = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"
# Flags the simulator parses with their types: the contract's table, except list-valued flags (the
# simulator models none of them; they are echoed exactly as written, like any unmodelled flag).
SGLANG_FLAGS = tuple(f for f in flags.FLAGS if not f.is_list)
SIM_KNOBS = sim_knobs.SIM_KNOBS
SPECULATIVE_ALGORITHMS = rules.SPECULATIVE_ALGORITHMS
DRAFT_MODEL_ALGORITHMS = rules.DRAFT_MODEL_ALGORITHMS
FORCED_MAX_RUNNING_REQUESTS = rules.FORCED_MAX_RUNNING_REQUESTS
AUTO_SPEC_SHAPE = rules.AUTO_SPEC_SHAPE


class SimArgsError(ValueError):
    """Launch arguments or SGLAB_SIM_* env the server cannot start with."""


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
    adaptive: AdaptiveConfig | None = None  # --speculative-adaptive in effect (None: static or off)
    warnings: tuple[str, ...] = ()  # logged at WARNING, as SGLang logs them
    run_seed: int = 0  # the bench run's load seed (SGLAB_SIM_RUN_SEED): the acceptance draws follow it
    node: str | None = None  # the simulated node it runs on (None: not named)
    node_speed: float = 1.0  # every modelled duration is divided by it (with time_scale)

    @property
    def speed(self) -> float:
        """What every modelled duration is divided by: the time scale times the node's speed."""
        return self.time_scale * self.node_speed

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


def build_parser() -> argparse.ArgumentParser:
    """SGLang's flags (abbreviations accepted, as SGLang's own parser does) and the --sim-* knobs."""
    parser = argparse.ArgumentParser(
        prog="sglab sim",
        description=f"SGLang-compatible CPU simulator (behaves like SGLang {SGLANG_VERSION}: EAGLE family, STANDALONE, "
                    "NGRAM + NCCL timing model). Accepts "
                    "python -m sglang.launch_server flags; simulator knobs are --sim-* or SGLAB_SIM_* env.",
    )
    for flag in SGLANG_FLAGS:
        if flag.is_switch:
            parser.add_argument(*flag.options, dest=flag.dest, action="store_true", default=flag.default)
        else:
            parser.add_argument(*flag.options, dest=flag.dest, type=flag.type, default=flag.default,
                                choices=flag.choices, required=flag.name == "--model-path")
    sim = parser.add_argument_group("simulator knobs (flag beats SGLAB_SIM_* env)")
    for knob in sim_knobs.SIM_KNOBS:
        sim.add_argument(knob.flag, dest="sim_" + knob.name, type=knob.type, default=None,
                         help=f"{knob.help} [env {knob.env}, default {knob.default!r}]")
    return parser


def _unknown_flags(parser: argparse.ArgumentParser, rest: list[str]) -> dict[str, Any]:
    """Leftover `--flag [values]`, echoed under their snake_case name; stray positionals are an error."""
    try:
        decoded = flags.decode(rest)
    except flags.FlagError as exc:
        parser.error(str(exc))
    if flags.POSITIONAL in decoded or "--" in rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    return {flags.flag_key(name): (value[0] if len(value) == 1 else list(value)) if isinstance(value, tuple) else value
            for name, value in decoded.items()}


def _knob(args: argparse.Namespace, env: Mapping[str, str], knob: sim_knobs.SimKnob) -> Any:
    value = getattr(args, "sim_" + knob.name)
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


# The algorithms the simulator models (docs/simulator.md); SGLang's others are refused under --target sim.
SIMULATED_FAMILIES = ("eagle", "ngram")


def _resolve_speculative(values: dict[str, Any], notes: list[str]) -> SpecSetup | None:
    algorithm = values["speculative_algorithm"]
    if algorithm is None:
        return None
    if rules.family(algorithm) not in SIMULATED_FAMILIES:
        modelled = ", ".join(a for a in rules.SPECULATIVE_ALGORITHMS if rules.family(a) in SIMULATED_FAMILIES)
        raise SimArgsError(f"--speculative-algorithm {algorithm} is accepted by SGLang but not modelled by the "
                           f"simulator (its drafting is not documented well enough to model: docs/simulator.md); "
                           f"benchmark it against a real server (--target), or use {modelled}")
    values["speculative_algorithm"] = canonical = rules.canonical_algorithm(algorithm)
    if rules.needs_draft_model(algorithm) and not values["speculative_draft_model_path"]:
        raise SimArgsError(f"--speculative-algorithm {algorithm} needs --speculative-draft-model-path")
    if not rules.takes_draft_model(algorithm) and values["speculative_draft_model_path"]:
        notes.append(f"--speculative-draft-model-path is not used by {algorithm} (accepted and echoed)")
    if values["max_running_requests"] is None and rules.forces_max_running(algorithm):
        values["max_running_requests"] = rules.FORCED_MAX_RUNNING_REQUESTS
        notes.append(f"max_running_requests is set to {rules.FORCED_MAX_RUNNING_REQUESTS} for speculative decoding "
                     "(as SGLang does when the flag is unset)")
    if rules.family(algorithm) == "ngram":
        return _resolve_ngram(values, notes)
    shape = (values["speculative_num_steps"], values["speculative_eagle_topk"], values["speculative_num_draft_tokens"])
    if shape[0] is None:
        if rules.shape_partly_set(*shape):
            raise SimArgsError("--speculative-num-steps is unset but --speculative-eagle-topk or "
                               "--speculative-num-draft-tokens is set; set all three or none (SGLang asserts this)")
        shape = rules.AUTO_SPEC_SHAPE
        notes.append(f"speculative (num_steps, eagle_topk, num_draft_tokens) auto-chosen as {shape}")
    steps, topk, draft = shape
    if topk is None or draft is None:
        raise SimArgsError("--speculative-num-steps is set: also set --speculative-eagle-topk and "
                           "--speculative-num-draft-tokens")
    _check_shape(steps, topk, draft)
    if rules.adjusted_num_draft_tokens(steps, topk, draft) != draft:
        notes.append("speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when "
                     "speculative_eagle_topk == 1")
        draft = rules.adjusted_num_draft_tokens(steps, topk, draft)
    values["speculative_num_steps"], values["speculative_eagle_topk"] = steps, topk
    values["speculative_num_draft_tokens"] = draft
    return SpecSetup(num_steps=steps, topk=topk, num_draft_tokens=draft,
                     kind="standalone" if canonical == "STANDALONE" else "eagle")


def _check_shape(steps: int, topk: int, draft: int) -> None:
    if steps < 1 or topk < 1 or draft < 1:
        raise SimArgsError("--speculative-num-steps, --speculative-eagle-topk and --speculative-num-draft-tokens "
                           "must be >= 1")
    too_big = rules.out_of_bounds(steps, topk, draft)
    if too_big is not None:
        name, value, bound = too_big
        raise SimArgsError(f"--speculative-{name.replace('_', '-')} {value} is beyond what SGLang can run; "
                           f"use at most {bound}")


def _resolve_ngram(values: dict[str, Any], notes: list[str]) -> SpecSetup:
    """As SGLang's _handle_ngram: topk = max BFS breadth, draft tokens default 12, steps = draft // topk."""
    breadth = values["speculative_ngram_max_bfs_breadth"]
    if values["speculative_eagle_topk"] not in (None, breadth):
        notes.append(f"speculative_eagle_topk is set to speculative_ngram_max_bfs_breadth ({breadth}) for ngram")
    draft = values["speculative_num_draft_tokens"]
    if draft is None:
        draft = rules.NGRAM_DEFAULT_NUM_DRAFT_TOKENS
        notes.append(f"speculative_num_draft_tokens is set to {draft} by default for ngram speculative decoding")
    steps = values["speculative_num_steps"] if values["speculative_num_steps"] is not None else draft // breadth
    _check_shape(max(steps, 1), breadth, draft)
    problem = rules.ngram_problem(draft, values["speculative_ngram_min_bfs_breadth"], breadth,
                                  values["speculative_ngram_external_corpus_path"] is not None,
                                  values["speculative_ngram_external_sam_budget"])
    if problem:
        raise SimArgsError(f"ngram speculative decoding: {problem}")
    values["speculative_num_steps"], values["speculative_eagle_topk"] = steps, breadth
    values["speculative_num_draft_tokens"] = draft
    return SpecSetup(num_steps=steps, topk=breadth, num_draft_tokens=draft, kind="ngram",
                     max_trie_depth=values["speculative_ngram_max_trie_depth"])


def _resolve_adaptive(values: dict[str, Any], spec: SpecSetup | None, notes: list[str],
                      warnings: list[str]) -> AdaptiveConfig | None:
    """--speculative-adaptive as SGLang resolves it: unsupported shapes fall back to static with a warning
    (and server info then says speculative_adaptive false); a supported one reads its config file."""
    if not values["speculative_adaptive"]:
        if values["speculative_adaptive_config"] is not None:
            notes.append("--speculative-adaptive-config has no effect without --speculative-adaptive")
        return None
    algorithm = values["speculative_algorithm"]
    if spec is None:
        reason = "speculative_algorithm=None (only EAGLE/EAGLE3 are supported)"
    else:
        reason = rules.adaptive_fallback(algorithm, spec.topk)
    if reason is not None:
        warnings.append(f"speculative_adaptive disabled: {reason}. Falling back to static speculative params.")
        values["speculative_adaptive"] = False
        return None
    try:
        config = load_adaptive_config(values["speculative_adaptive_config"])
        AdaptiveController(config, spec.num_steps)  # SGLang asserts two distinct tiers at start
    except AdaptiveConfigError as exc:
        raise SimArgsError(str(exc)) from None
    for key in config.ignored_keys:
        notes.append(f"speculative adaptive config key {key!r} is not read (SGLang #21599 reads only "
                     "candidate_steps, ema_alpha, warmup_batches, update_interval, down_hysteresis, up_hysteresis)")
    return config


def parse_sim_args(argv: list[str], env: Mapping[str, str] | None = None) -> SimConfig:
    """argv as for sglang.launch_server (+ --sim-*); env defaults to os.environ. Exit 2 on bad flags."""
    env = os.environ if env is None else env
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    unknown = _unknown_flags(parser, rest)
    values = {flag.dest: getattr(args, flag.dest) for flag in SGLANG_FLAGS}
    notes: list[str] = []
    for key in ("port", "tp_size", "dp_size", "pp_size", "max_running_requests", "context_length",
                "num_continuous_decode_steps", "stream_interval", "max_prefill_tokens"):
        if values[key] is not None and values[key] < 1:
            raise SimArgsError(f"--{key.replace('_', '-')} must be >= 1, got {values[key]}")
    if values["port"] > 65535:
        raise SimArgsError(f"--port {values['port']} is not a TCP port")
    if values["mem_fraction_static"] is not None and not 0 < values["mem_fraction_static"] < 1:
        raise SimArgsError(f"--mem-fraction-static must be in (0, 1), got {values['mem_fraction_static']}")

    knobs = {k.name: _knob(args, env, k) for k in sim_knobs.SIM_KNOBS}
    try:
        overrides = parse_overrides(knobs["set"])
        profile = load_profile(knobs["profile"], overrides)
    except ProfileError as exc:
        raise SimArgsError(str(exc)) from None
    for knob in sim_knobs.knobs("sim") + sim_knobs.knobs("cli") + sim_knobs.knobs("node"):
        if knob.name == "time_scale" and knobs["allow_unfaithful_time_scale"] and knobs["time_scale"] > 0:
            continue  # a behaviour test's fast simulator; its server info says it is not faithful
        try:
            knob.check(knobs[knob.name])
        except ValueError as exc:
            raise SimArgsError(str(exc)) from None
    if knobs["node"] and not re.fullmatch(sim_knobs.NODE_NAME_PATTERN, knobs["node"]):
        node = sim_knobs.knob("node")
        raise SimArgsError(f"{node.flag} / {node.env} {knobs['node']!r} is not a node name; use a DNS label "
                           "(lowercase letters, digits and '-', at most 63, e.g. sim-node-a)")
    faults = FaultSpec(**{k.name: knobs[k.name] for k in sim_knobs.knobs("faults")})
    try:
        faults.validate()
    except ValueError as exc:
        raise SimArgsError(f"fault injection: {exc}") from None

    spec = _resolve_speculative(values, notes)
    warnings: list[str] = []
    adaptive = _resolve_adaptive(values, spec, notes, warnings)
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

    nccl_env = nccl_part(env)
    return SimConfig(
        server_args={**values, **unknown},
        profile=profile,
        profile_name=knobs["profile"],
        profile_overrides=overrides,
        nccl_env=nccl_env,
        comm_factor=comm_factor(profile, nccl_env, values["disable_custom_all_reduce"]),
        spec=spec,
        seed=knobs["seed"],
        run_seed=knobs["run_seed"],
        time_scale=knobs["time_scale"],
        warmup_s=knobs["warmup_s"],
        spin_ms=knobs["spin_ms"],
        faults=faults,
        unknown_flags=unknown,
        notes=tuple(notes),
        record_step_time=env.get("SGLANG_RECORD_STEP_TIME", "").lower() in ("1", "true", "yes"),
        adaptive=adaptive,
        warnings=tuple(warnings),
        node=knobs["node"] or None,
        node_speed=knobs["node_speed"],
    )


def parse_or_exit(argv: list[str], env: Mapping[str, str] | None = None) -> SimConfig:
    try:
        return parse_sim_args(argv, env)
    except SimArgsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(USAGE) from None
