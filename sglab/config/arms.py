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

from sglab.config.models import ServerFlags, StackConfig

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
    args = ["--model-path", stack.model.path]
    if stack.model.served_model_name:
        args += ["--served-model-name", stack.model.served_model_name]
    args += ["--host", "0.0.0.0", "--port", str(server.port), "--tp-size", str(server.tp_size)]
    if server.mem_fraction_static is not None:
        args += ["--mem-fraction-static", f"{server.mem_fraction_static:g}"]
    if server.num_continuous_decode_steps != 1:
        args += ["--num-continuous-decode-steps", str(server.num_continuous_decode_steps)]
    if server.disable_custom_all_reduce:
        args.append("--disable-custom-all-reduce")
    if server.trust_remote_code:
        args.append("--trust-remote-code")
    if server.context_length is not None:
        args += ["--context-length", str(server.context_length)]
    if server.max_running_requests is not None:
        args += ["--max-running-requests", str(server.max_running_requests)]
    if server.enable_metrics:
        args.append("--enable-metrics")
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
    args = ["--speculative-algorithm", spec.algorithm]
    if spec.draft_model_path:
        args += ["--speculative-draft-model-path", spec.draft_model_path]
    args += [
        "--speculative-num-steps", str(spec.num_steps),
        "--speculative-eagle-topk", str(spec.eagle_topk),
        "--speculative-num-draft-tokens", str(spec.num_draft_tokens),
    ]
    return args


def _sim_env(stack: StackConfig) -> dict[str, str]:
    if stack.backend != "sim":
        return {}
    sim = stack.sim
    env = {
        "SGLAB_SIM_PROFILE": sim.profile,
        "SGLAB_SIM_SEED": str(sim.seed),
        "SGLAB_SIM_TIME_SCALE": f"{sim.time_scale:g}",
        "SGLAB_SIM_WARMUP_S": f"{sim.warmup_s:g}",
    }
    if sim.faults is not None:  # names read by sglab/sim/cli_args.py SIM_KNOBS
        faults = sim.faults
        env.update({
            "SGLAB_SIM_ERROR_RATE": f"{faults.error_rate:g}",
            "SGLAB_SIM_ERROR_STATUS": str(faults.error_status),
            "SGLAB_SIM_DISCONNECT_RATE": f"{faults.disconnect_rate:g}",
            "SGLAB_SIM_STALL_RATE": f"{faults.stall_rate:g}",
            "SGLAB_SIM_STALL_S": f"{faults.stall_s:g}",
            "SGLAB_SIM_SLOW_START_S": f"{faults.slow_start_s:g}",
        })
    return env


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


def _flag_map(args: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("--"):
            if i + 1 < len(args) and not args[i + 1].startswith("--"):
                out[arg] = args[i + 1]
                i += 2
                continue
            out[arg] = "true"
        i += 1
    return out


def confounds(stack: StackConfig) -> list[Confound]:
    """Every difference between baseline and candidate besides --speculative-*, computed from the arms."""
    base, cand = baseline_arm(stack), candidate_arm(stack)
    found: list[Confound] = []
    if base.image != cand.image:
        found.append(Confound("image", base.image, cand.image))
    bflags = {k: v for k, v in _flag_map(base.args).items()}
    cflags = {k: v for k, v in _flag_map(cand.args).items() if not k.startswith("--speculative-")}
    for key in sorted(set(bflags) | set(cflags)):
        if bflags.get(key) != cflags.get(key):
            found.append(Confound(f"server {key}", bflags.get(key), cflags.get(key)))
    for key in sorted(set(base.env) | set(cand.env)):
        if base.env.get(key) != cand.env.get(key):
            found.append(Confound(f"env {key}", base.env.get(key), cand.env.get(key)))
    return found


def parse_launch_args(args: list[str] | tuple[str, ...]) -> dict[str, str]:
    """Flag -> value (or 'true' for switches), for comparing against a live server's reported args."""
    return _flag_map(tuple(args))
