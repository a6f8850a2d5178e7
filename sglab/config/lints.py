"""Lints over a stack's effective arms (env + launch args) that need no GPU: NCCL settings that cannot work.

The SGLang facts they rest on (its custom all-reduce and the NCCL variables it sets from its own flags) are
in the SGLang contract, sglab/sglang/collectives.py. NCCL_PROTO=LL128 forced where NCCL would not choose it
has silent data-corruption reports (NVIDIA/nccl #281, #1261, #831): it needs an explicit
`sglab:accept-lints: [nccl-proto-ll128]`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Literal, Protocol

from sglab.sglang import collectives

# NCCL_* keys that do not steer a single-node all-reduce (logging, inter-node transports); the ones SGLang
# sets itself have their own lint.
_NOT_ALL_REDUCE_TUNING = ("NCCL_DEBUG", "NCCL_IB_", "NCCL_SOCKET_", "NCCL_NET")

Severity = Literal["error", "warning", "note"]
# Lints that stop validate/render/pulumi up until the stack lists their code under sglab:accept-lints.
NEEDS_OPT_IN: tuple[str, ...] = ("nccl-proto-ll128", "image-tag-in-production")
OPT_IN_KEY = "accept-lints"


class ArmLike(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def env(self) -> dict[str, str]: ...
    @property
    def args(self) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class Lint:
    code: str
    severity: Severity
    arms: tuple[str, ...]
    key: str
    message: str
    fix: str

    def describe(self) -> str:
        return f"{self.severity} [{self.code}] ({', '.join(self.arms)}) {self.key}: {self.message}; fix: {self.fix}"

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, "severity": self.severity, "arms": list(self.arms), "key": self.key,
                "message": self.message, "fix": self.fix}


@dataclass(frozen=True)
class _Finding:
    code: str
    severity: Severity
    env_key: str | None
    message: str
    fix: str


def _tp_size(flags: dict[str, str]) -> int:
    value = flags.get("--tp-size", "1")  # aliases (--tp) arrive canonical from parse_launch_args
    return int(value) if value.isdigit() else 1


def _custom_all_reduce(env: dict[str, str], flags: dict[str, str]) -> list[_Finding]:
    skip = (*_NOT_ALL_REDUCE_TUNING, *collectives.SGLANG_OWNED_NCCL_ENV)
    tuned = sorted(k for k in env if k.startswith("NCCL_") and not k.startswith(skip))
    multi_node = flags.get("--nnodes", "1") not in ("1", "true")
    disable = collectives.DISABLE_CUSTOM_ALL_REDUCE_FLAG
    if not tuned or disable in flags or multi_node:
        return []
    if _tp_size(flags) not in collectives.CUSTOM_ALL_REDUCE_WORLD_SIZES:
        return []
    settings = " ".join(f"{k}={env[k]}" for k in tuned)
    return [_Finding(
        "custom-all-reduce-shadows-nccl", "warning", None,
        f"{settings} set while SGLang's custom all-reduce is on (no {disable}): on a fully NVLinked node it "
        f"takes every all-reduce under {collectives.CUSTOM_ALL_REDUCE_MAX_BYTES // (1024 * 1024)} MiB, "
        "which is all of the decode path (about 14 KB to 1 MB), so these NCCL values likely change nothing there "
        "(only larger, prefill all-reduces reach NCCL)",
        "set server.disable-custom-all-reduce: true (both arms) so NCCL carries the decode all-reduces, or drop "
        "the NCCL settings")]


def _sglang_owned(env: dict[str, str]) -> list[_Finding]:
    out = []
    for key, flag in collectives.SGLANG_OWNED_NCCL_ENV.items():
        if key not in env:
            continue
        if env[key] == "1":
            fix = f"remove {key} and add {flag} to server.extra-args"
            also = collectives.ALSO_ENABLES.get(flag, ())
            if also:
                fix += f" (it also enables {', '.join(also)})"
        else:
            fix = f"remove {key}: {env[key]} is what SGLang sets itself unless {flag} is given"
        out.append(_Finding(
            "sglang-overwrites-nccl-env", "warning", key,
            f"{key}={env[key]} in the pod env: SGLang sets {key} itself from {flag} (0.5.23 keeps the pod's value "
            f"only while neither {flag} nor a flag implying it is given, and releases before it overwrote it every "
            "time), so this value is silently replaced or depends on the image", fix))
    return out


def _ll128(env: dict[str, str], accepted: frozenset[str]) -> list[_Finding]:
    proto = env.get("NCCL_PROTO", "")
    if proto.startswith("^") or "LL128" not in [p.strip() for p in proto.split(",")]:
        return []
    code = "nccl-proto-ll128"
    severity: Severity = "note" if code in accepted else "error"
    return [_Finding(
        code, severity, "NCCL_PROTO",
        f"NCCL_PROTO={proto} forces LL128, which NCCL enables only where it is known to be safe; forcing it "
        "has reports of silent data corruption (NVIDIA/nccl #281, #1261, #831)"
        + (f" (accepted by sglab:{OPT_IN_KEY})" if code in accepted else ""),
        f"remove LL128 from NCCL_PROTO, or accept the risk explicitly: sglab:{OPT_IN_KEY}: [{code}]")]


def arm_findings(arm: ArmLike, accepted: frozenset[str] = frozenset()) -> list[_Finding]:
    from sglab.config.arms import parse_launch_args

    env = dict(arm.env)
    flags = parse_launch_args(list(arm.args))
    return _custom_all_reduce(env, flags) + _sglang_owned(env) + _ll128(env, accepted)


def _key_for(env_key: str | None, code: str, arms: tuple[str, ...]) -> str:
    if env_key is None:
        return "server.disable-custom-all-reduce" if code == "custom-all-reduce-shadows-nccl" else "nccl"
    return f"nccl.{env_key}" if "baseline" in arms else f"candidate.confounds.nccl.{env_key}"


def lint_arms(arms: Iterable[ArmLike], accepted: Iterable[str] = ()) -> list[Lint]:
    """Every lint of every arm; a finding shared by several arms is reported once, naming them."""
    accepted = frozenset(accepted)
    merged: dict[_Finding, list[str]] = {}
    for arm in arms:
        for finding in arm_findings(arm, accepted):
            merged.setdefault(finding, []).append(arm.name)
    return [Lint(f.code, f.severity, tuple(names), _key_for(f.env_key, f.code, tuple(names)), f.message, f.fix)
            for f, names in merged.items()]


def stack_lints(stack: Any) -> list[Lint]:
    """Lints of a StackConfig's baseline and candidate arms (what validate, render and results record)."""
    from sglab.config.arms import baseline_arm, candidate_arm

    return (lint_arms([baseline_arm(stack), candidate_arm(stack)], stack.accept_lints) + _fabric(stack)
            + _image_pins(stack))


def stack_images(stack: Any) -> dict[str, list[str]]:
    """image -> the stack keys that set it, for every image the stack's pods may run: the servers, the project
    image's pods (the benchmark Job, Locust, the preflight, the judge, the watch and the control's follower) and
    the endpoint picker."""
    from sglab.config.arms import baseline_arm, candidate_arm

    images: dict[str, list[str]] = {}

    def add(image: str, key: str) -> None:
        keys = images.setdefault(image, [])
        if key not in keys:
            keys.append(key)

    add(baseline_arm(stack).image, "image")
    candidate = candidate_arm(stack).image
    add(candidate, "image" if candidate == stack.image else "candidate.confounds.image")
    add(stack.project_image, "project-image")
    if stack.benchmark_job.image:
        add(stack.benchmark_job.image, "benchmark-job.image")
    if stack.locust.image:
        add(stack.locust.image, "locust.image")
    if stack.serving is not None and stack.serving.gateway.inference_pool:
        add(stack.serving.gateway.endpoint_picker.image, "serving.gateway.endpoint-picker.image")
    return images


def pinned(image: str) -> bool:
    return "@sha256:" in image


def _image_pins(stack: Any) -> list[Lint]:
    """Production on a tag: a tag can point to other bits by the time a pod starts (a canary's pod, a node's later
    pull of the stable's image), so two pods of one revision could run different code; a digest cannot."""
    tags = [(image, keys) for image, keys in stack_images(stack).items() if not pinned(image)]
    if not stack.production or not tags:
        return []
    code = "image-tag-in-production"
    accepted = code in stack.accept_lints
    named = "; ".join(f"{image} ({', '.join(keys)})" for image, keys in tags)
    return [Lint(code, "note" if accepted else "error", ("baseline", "candidate"), tags[0][1][0],
                 f"production runs images by tag: {named}; a tag can be moved to other bits between two pods' "
                 "starts" + (f" (accepted by sglab:{OPT_IN_KEY})" if accepted else ""),
                 "pin each by digest (name:tag@sha256:<digest>; `docker buildx imagetools inspect <image>` prints "
                 f"it), or accept tags explicitly: sglab:{OPT_IN_KEY}: [{code}]")]


def _fabric(stack: Any) -> list[Lint]:
    """A server spanning nodes with no RDMA fabric declared: NCCL falls back to TCP sockets between the nodes."""
    if stack.placement.nodes < 2 or stack.placement.rdma is not None:
        return []
    code = "multi-node-without-rdma"
    return [Lint(code, "note" if code in stack.accept_lints else "warning", ("baseline", "candidate"),
                 "placement.rdma",
                 f"each server spans {stack.placement.nodes} nodes but no RDMA fabric is declared: without RDMA "
                 "devices, IPC_LOCK and NCCL_IB_* / NCCL_SOCKET_IFNAME, NCCL falls back to TCP sockets between the "
                 "nodes, far too slow for tensor parallelism across them",
                 "set placement.rdma (device-plugin resource and Multus networks, or host-network; socket-ifname), "
                 f"docs/deploy.md \"Multi-node servers\"; or accept TCP: sglab:{OPT_IN_KEY}: [{code}]")]


def blocking(lints: Iterable[Lint]) -> list[Lint]:
    """The lints that stop the stack until accepted."""
    return [lint for lint in lints if lint.severity == "error"]


def raise_blocking(lints: Iterable[Lint], file: Any) -> None:
    """ConfigError (exit 2, naming key and fix) for the first lint that needs an opt-in the stack lacks."""
    from sglab.core.errors import ConfigError

    for lint in blocking(lints):
        raise ConfigError(file, lint.key, lint.message, lint.fix)


def lint_lines(lints: Iterable[Lint]) -> list[str]:
    """What validate and render print: one line per lint, or that there are none."""
    lints = list(lints)
    if not lints:
        return ["lints: none"]
    return [f"lints ({len(lints)}):"] + [f"  - {lint.describe()}" for lint in lints]
