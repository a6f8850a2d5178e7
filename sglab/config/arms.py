"""Effective arms: the exact launch arguments and environment each server gets.

Everything downstream (chart values, the simulator target, config hashes, the live-flag check,
promotion) uses these, so "what was benchmarked" and "what is deployed" are the same bytes.
Both arms start from the shared settings; the candidate adds its speculative block and, only if
declared under `candidate.confounds`, other differences, which are listed as confounds.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Literal

from sglab.config.server import ServerFlags, sim_env
from sglab.config.stack import StackConfig
from sglab.sglang.flags import decode, encode, flag_text

ArmRole = Literal["baseline", "candidate"]

SGLANG_COMMAND = ("python3", "-m", "sglang.launch_server")
SIM_COMMAND = ("sglab", "sim")
HF_TOKEN_ENV = "HF_TOKEN"


@dataclass(frozen=True)
class Confound:
    """One difference between the arms other than the speculative block."""

    key: str
    baseline: str | None
    candidate: str | None

    def describe(self) -> str:
        return f"{self.key}: baseline={self.baseline if self.baseline is not None else '(unset)'} " \
               f"candidate={self.candidate if self.candidate is not None else '(unset)'}"

    def as_dict(self) -> dict[str, str | None]:
        return {"key": self.key, "baseline": self.baseline, "candidate": self.candidate}


@dataclass(frozen=True)
class ArmSpec:
    """One server as it will run: image, command, args and env (secrets only by name)."""

    name: str
    role: ArmRole
    speculative: bool
    image: str
    command: tuple[str, ...]
    args: tuple[str, ...]
    env: dict[str, str]
    secret_env: tuple[str, ...] = field(default=())
    port: int = 30000

    @property
    def config_hash(self) -> str:
        """sha256 over the effective launch args + env: equal hashes mean identical servers."""
        payload = json.dumps(
            {"image": self.image, "args": list(self.args), "env": self.env, "secret_env": list(self.secret_env)},
            sort_keys=True,
            separators=(",", ":"),
        )
        return hashlib.sha256(payload.encode()).hexdigest()

    @property
    def launch_command(self) -> str:
        """The command line as a shell would show it (secrets as $NAME)."""
        env = " ".join(f"{k}={_shell(v)}" for k, v in self.env.items())
        secrets = " ".join(f"{k}=${k}" for k in self.secret_env)
        parts = [p for p in (env, secrets, " ".join(self.command), " ".join(_shell(a) for a in self.args)) if p]
        return " ".join(parts)

    def with_name(self, name: str) -> "ArmSpec":
        return ArmSpec(name, self.role, self.speculative, self.image, self.command, self.args, dict(self.env),
                       self.secret_env, self.port)


def _shell(value: str) -> str:
    safe = all(c.isalnum() or c in "-_./:=,+@%" for c in value)
    return value if safe and value else "'" + value.replace("'", "'\\''") + "'"


def _server_args(stack: StackConfig, server: ServerFlags) -> list[str]:
    args = encode([
        ("--model-path", stack.model.path),
        ("--served-model-name", stack.model.served_model_name),
        ("--host", "0.0.0.0"),
        ("--port", server.port),
        ("--tp-size", server.tp_size),
        ("--mem-fraction-static", server.mem_fraction_static),
        ("--num-continuous-decode-steps", None if server.num_continuous_decode_steps == 1
         else server.num_continuous_decode_steps),
        ("--disable-custom-all-reduce", server.disable_custom_all_reduce),
        ("--trust-remote-code", server.trust_remote_code),
        ("--context-length", server.context_length),
        ("--max-running-requests", server.max_running_requests),
        ("--enable-metrics", server.enable_metrics),
    ])
    args += _multi_node_args(stack)
    args += list(server.extra_args)
    return args


# Set in every pod of a LeaderWorkerSet group by the LWS controller; Kubernetes expands $(NAME) in args.
LWS_ENV_LEADER_ADDRESS = "LWS_LEADER_ADDRESS"
LWS_ENV_WORKER_INDEX = "LWS_WORKER_INDEX"


def _multi_node_args(stack: StackConfig) -> list[str]:
    """Rank wiring for a server spanning `placement.nodes` pods (one LeaderWorkerSet group)."""
    placement = stack.placement
    if placement.nodes == 1:
        return []
    return [
        "--nnodes", str(placement.nodes),
        "--node-rank", f"$({LWS_ENV_WORKER_INDEX})",
        "--dist-init-addr", f"$({LWS_ENV_LEADER_ADDRESS}):{placement.dist_init_port}",
    ]


def _speculative_args(stack: StackConfig) -> list[str]:
    spec = stack.candidate.speculative
    return encode(spec.flag_values()) + list(spec.extra_args)


def _sim_env(stack: StackConfig) -> dict[str, str]:
    return sim_env(stack.sim) if stack.backend == "sim" else {}


def build_arm(stack: StackConfig, *, speculative: bool, with_confounds: bool, name: str | None = None) -> ArmSpec:
    """Any of the four attribution arms; `baseline_arm`/`candidate_arm` are the usual two."""
    confounds = stack.candidate.confounds if with_confounds else None
    server = stack.server
    if confounds is not None and confounds.server is not None:
        server = server.model_copy(update=confounds.server.model_dump(exclude_none=True))
    image = confounds.image if confounds is not None and confounds.image else stack.image
    env: dict[str, str] = dict(stack.env)
    if confounds is not None and confounds.env:
        env.update(confounds.env)
    nccl = stack.nccl.as_env()
    if confounds is not None and confounds.nccl is not None:
        nccl.update(confounds.nccl.as_env())
    env.update(nccl)
    env.update(stack.placement.fabric_env())  # placement.rdma: the same fabric variables in every arm
    env.update(_sim_env(stack))
    args = _server_args(stack, server)
    if speculative:
        args += _speculative_args(stack)
    role: ArmRole = "candidate" if speculative else "baseline"
    command = SIM_COMMAND if stack.backend == "sim" else SGLANG_COMMAND
    secret_env = (HF_TOKEN_ENV,) if stack.hf_token is not None else ()
    return ArmSpec(
        name=name or role,
        role=role,
        speculative=speculative,
        image=image,
        command=command,
        args=tuple(args),
        env=dict(sorted(env.items())),
        secret_env=secret_env,
        port=server.port,
    )


def baseline_arm(stack: StackConfig) -> ArmSpec:
    return build_arm(stack, speculative=False, with_confounds=False, name="baseline")


def candidate_arm(stack: StackConfig) -> ArmSpec:
    return build_arm(stack, speculative=True, with_confounds=True, name="candidate")


def attribution_arms(stack: StackConfig) -> list[ArmSpec]:
    """baseline, baseline + the candidate's declared differences, candidate without them, candidate."""
    return [
        baseline_arm(stack),
        build_arm(stack, speculative=False, with_confounds=True, name="baseline+confounds"),
        build_arm(stack, speculative=True, with_confounds=False, name="candidate-confounds"),
        candidate_arm(stack),
    ]


def _server_flags(args: tuple[str, ...]) -> dict[str, str]:
    """Launch args as SGLang reads them (aliases, abbreviations, whole lists), without --speculative-*."""
    return {k: flag_text(v) for k, v in decode(args).items() if not k.startswith("--speculative-")}


def confounds(stack: StackConfig) -> list[Confound]:
    """Every difference between baseline and candidate besides --speculative-*, computed from the arms."""
    return arm_differences(baseline_arm(stack), candidate_arm(stack))


def arm_differences(base: ArmSpec, cand: ArmSpec) -> list[Confound]:
    """Image, launch flags as SGLang reads them (whole lists, aliases, abbreviations; --speculative-* aside)
    and env that differ between two arms; also used on the launch commands a result recorded."""
    found: list[Confound] = []
    if base.image != cand.image:
        found.append(Confound("image", base.image, cand.image))
    bflags, cflags = _server_flags(base.args), _server_flags(cand.args)
    for key in sorted(set(bflags) | set(cflags)):
        if bflags.get(key) != cflags.get(key):
            found.append(Confound(f"server {key}", bflags.get(key), cflags.get(key)))
    for key in sorted(set(base.env) | set(cand.env)):
        if base.env.get(key) != cand.env.get(key):
            found.append(Confound(f"env {key}", base.env.get(key), cand.env.get(key)))
    return found


def parse_launch_args(args: list[str] | tuple[str, ...]) -> dict[str, str]:
    """Canonical flag -> value ('true' for switches, lists joined by spaces), as SGLang's parser reads args."""
    return {k: flag_text(v) for k, v in decode(tuple(args)).items()}
