"""A stack's probe: its decode message sizes and NCCL variants, from the effective arms (sglab side only).

Variants: `nccl-default` (NCCL chooses; only the keys SGLang sets itself), the arms' own NCCL env
(`arms` when both share it, else `baseline` / `candidate`) and any `sglab:probe.variants`. Every variant
carries the NCCL variables SGLang sets itself (NCCL_NVLS_ENABLE, NCCL_CUMEM_ENABLE) with the values it
would give the server from its flags (sglab/sglang/collectives.py), so the probe runs what the server runs;
a variant that would enable NVLink multicast needs --allow-nvls.
"""

from __future__ import annotations

from sglab.config.arms import ArmSpec, baseline_arm, candidate_arm, parse_launch_args
from sglab.config.stack import StackConfig
from sglab.core.errors import ConfigError
from sglab.probe.spec import (DEFAULT_VARIANT, NVLS_KEY, ProbeRunSpec, SizeSpec, Variant, decode_steps, hidden_size_for,
                              message_sizes, sweep_sizes)
from sglab.sglang import collectives

# Algorithms whose draft layer runs on the target's TP group with the target's hidden size.
DRAFT_LAYER_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN")
CPU_WORLD_SIZE = 2


def sglang_forced_env(args: tuple[str, ...] | list[str]) -> dict[str, str]:
    """The NCCL values SGLang's _set_envs_and_config gives the server for these launch args."""
    return collectives.sglang_nccl_env(parse_launch_args(list(args)))


def _nccl_of(arm: ArmSpec) -> dict[str, str]:
    env = {k: v for k, v in arm.env.items() if k.startswith("NCCL_")}
    env.update(sglang_forced_env(arm.args))
    return dict(sorted(env.items()))


def probe_variants(stack: StackConfig) -> list[Variant]:
    base, cand = baseline_arm(stack), candidate_arm(stack)
    forced = sglang_forced_env(base.args)
    base_env, cand_env = _nccl_of(base), _nccl_of(cand)
    same = [role for role, env in (("baseline", base_env), ("candidate", cand_env)) if env == forced]
    variants = [Variant(name=DEFAULT_VARIANT, env=forced,
                        source="NCCL's own choice (only what SGLang sets itself)"
                        + (f"; what the {' and '.join(same)} arm{'s' if len(same) > 1 else ''} "
                           f"run{'' if len(same) > 1 else 's'}" if same else ""))]
    seen = {tuple(forced.items()): DEFAULT_VARIANT}
    if base_env == cand_env:
        candidates = [("arms", base_env, "both arms' NCCL env (sglab:nccl)")]
    else:
        candidates = [("baseline", base_env, "the baseline arm's NCCL env"),
                      ("candidate", cand_env, "the candidate arm's NCCL env (with its confounds)")]
    for name, variant_env in stack.probe.variants.items():
        merged = {**forced, **variant_env.as_env()}
        candidates.append((name, dict(sorted(merged.items())), "sglab:probe.variants"))
    for name, env, source in candidates:
        key = tuple(env.items())
        if key in seen:
            continue
        seen[key] = name
        variants.append(Variant(name=name, env=env, source=source))
    return variants


def probe_sizes(stack: StackConfig) -> tuple[list[SizeSpec], int, str]:
    """Decode sizes of both arms at every load level, plus the sweep; and the hidden size with its source."""
    probe = stack.probe
    if probe.hidden_size is not None:
        hidden, source = probe.hidden_size, "sglab:probe.hidden-size"
    else:
        known = hidden_size_for(stack.model.path)
        if known is None:
            raise ConfigError("stack", "probe.hidden-size", f"model {stack.model.path!r} is not in the probe's table "
                              "of known hidden sizes (sglab/probe/spec.py)",
                              "set sglab:probe.hidden-size to the model's hidden_size (its config.json)")
        hidden, source = known, f"known-model table ({stack.model.path})"
    spec = stack.candidate.speculative
    steps = []
    for arm in (baseline_arm(stack), candidate_arm(stack)):
        flags = parse_launch_args(list(arm.args))
        cap = flags.get("--max-running-requests")
        steps += decode_steps(
            stack.load.concurrency, max_running=int(cap) if cap else None, speculative=arm.speculative,
            num_draft_tokens=spec.num_draft_tokens, eagle_topk=spec.eagle_topk,
            has_draft_layer=spec.algorithm in DRAFT_LAYER_ALGORITHMS, arm=arm.role)
    sizes = message_sizes(steps, hidden, sweep_sizes(probe.sweep_min_bytes, probe.sweep_max_bytes))
    return [SizeSpec(bytes=s.bytes, sources=s.sources) for s in sizes], hidden, source


def needs_nvls(stack: StackConfig) -> bool:
    """Whether the stack's own servers enable NVLink multicast (then the probe must, to measure them)."""
    return any(v.env.get(NVLS_KEY) != "0" for v in probe_variants(stack))


def probe_spec(stack: StackConfig, stack_name: str, *, world_size: int | None = None, backend: str | None = None,
               allow_nvls: bool = False) -> ProbeRunSpec:
    """The run spec for `stack`: NCCL over the stack's GPUs per node; gloo over CPU_WORLD_SIZE processes for a
    stack without GPUs (the simulator's), which exercises the probe and its Job but measures no NCCL."""
    gpus = stack.placement.gpus_per_node
    backend = backend or ("nccl" if gpus > 0 else "gloo")
    world_size = world_size or (gpus if gpus > 0 else CPU_WORLD_SIZE)
    sizes, hidden, source = probe_sizes(stack)
    probe = stack.probe
    variants = probe_variants(stack)
    return ProbeRunSpec(
        stack=stack_name, backend=backend, world_size=world_size,
        hidden_size=hidden, hidden_size_source=source, sizes=sizes, variants=variants,
        warmup_replays=probe.warmup_replays, ops_per_graph=probe.ops_per_graph, samples=probe.samples,
        confidence=probe.confidence, variant_timeout_s=max(60.0, probe.timeout_min * 60 / (len(variants) + 1)),
        allow_nvls=allow_nvls)
