"""The stack config: the single source of truth for both arms, the load plan and the promotion policy.

A stack file (`stacks/Pulumi.<stack>.yaml`) holds these under the `sglab:` namespace, one top-level
key per field of `StackConfig` (kebab-case, mirroring SGLang's flag names). The Pulumi program, the
CLI and the charts' values all derive from these models; no default lives anywhere else.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AliasGenerator, BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from sglab.config.nccl import NcclEnv


class KeyedValueError(ValueError):
    """A cross-field check failing at a key below the validated model (`loc`, kebab-case, e.g. server.tp-size).

    The loader reports that key path and its line instead of the whole section.
    """

    def __init__(self, loc: str | tuple[str | int, ...], message: str) -> None:
        super().__init__(message)
        if isinstance(loc, str):
            loc = tuple(int(p) if p.isdigit() else p for p in loc.split("."))
        self.loc = loc


def _kebab(name: str) -> str:
    return name.replace("_", "-")


class Model(BaseModel):
    """Base: kebab-case keys in YAML, unknown keys refused (a typo must never be silently ignored)."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        populate_by_name=True,
        alias_generator=AliasGenerator(validation_alias=_kebab, serialization_alias=_kebab),
    )


_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DNS_SUBDOMAIN = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_NAME = re.compile(r"^(?=.{1,63}$)[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(?=.{0,63}$)(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_CPU = re.compile(r"^([0-9]+(\.[0-9]+)?|[0-9]+m)$")
_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|k|M|G|T)?$")

# StackConfig fields that must be Pulumi secrets (`{secure: ...}` in the stack file, `--secret` in Pulumi).
SECRET_FIELDS = ("hf_token", "locust_password")

SpeculativeAlgorithm = Literal["EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"]
DRAFT_MODEL_ALGORITHMS = ("EAGLE", "EAGLE3", "STANDALONE")
# SGLang forces max_running_requests=48 for these when the flag is unset (server_args.py).
SGLANG_FORCED_MAX_RUNNING_REQUESTS = 48
FORCES_MAX_RUNNING = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM")

# Flags sglab renders itself; passing them through extra-args would bypass validation and fairness.
MANAGED_FLAGS = (
    "--model-path", "--model", "--host", "--port", "--tp-size", "--tp", "--tensor-parallel-size",
    "--mem-fraction-static", "--num-continuous-decode-steps", "--disable-custom-all-reduce",
    "--trust-remote-code", "--context-length", "--max-running-requests", "--enable-metrics",
    "--served-model-name", "--nnodes", "--node-rank", "--dist-init-addr",
)


class ModelVolume(Model):
    """How the model weights reach the pod: a PVC or a hostPath, always read-only."""

    kind: Literal["pvc", "hostPath"] = "hostPath"
    claim_name: str | None = None
    host_path: str | None = None
    mount_path: str = "/shared"

    @model_validator(mode="after")
    def _source(self) -> "ModelVolume":
        if self.kind == "pvc" and not self.claim_name:
            raise KeyedValueError("claim-name", "kind is pvc but claim-name is missing: name the PersistentVolumeClaim holding the weights")
        if self.kind == "hostPath" and not self.host_path:
            raise KeyedValueError("host-path", "kind is hostPath but host-path is missing: give the node directory holding the weights")
        if not self.mount_path.startswith("/"):
            raise KeyedValueError("mount-path", "mount-path must be an absolute path inside the container")
        return self


class ModelSpec(Model):
    path: str = Field(description="Model path as the server sees it (--model-path)")
    served_model_name: str | None = None
    volume: ModelVolume | None = None


class ServerFlags(Model):
    """Flags applied to BOTH arms. Names are SGLang's launch_server flags without the dashes."""

    tp_size: Annotated[int, Field(ge=1)] = 8
    mem_fraction_static: Annotated[float, Field(gt=0, lt=1)] | None = None
    num_continuous_decode_steps: Annotated[int, Field(ge=1)] = 1
    disable_custom_all_reduce: bool = False
    trust_remote_code: bool = False
    context_length: Annotated[int, Field(ge=1)] | None = None
    max_running_requests: Annotated[int, Field(ge=1)] | None = None
    enable_metrics: bool = True
    port: Annotated[int, Field(ge=1, le=65535)] = 30000
    extra_args: list[str] = Field(default_factory=list)

    @field_validator("extra_args")
    @classmethod
    def _no_managed(cls, args: list[str]) -> list[str]:
        for arg in args:
            flag = arg.split("=", 1)[0]
            if flag in MANAGED_FLAGS or flag.startswith("--speculative-"):
                raise ValueError(
                    f"{flag} is managed by sglab; set it under server (or candidate.speculative), not extra-args"
                )
        return args


class ServerOverrides(Model):
    """A partial ServerFlags: only what the candidate changes on purpose (a declared confound)."""

    mem_fraction_static: Annotated[float, Field(gt=0, lt=1)] | None = None
    num_continuous_decode_steps: Annotated[int, Field(ge=1)] | None = None
    disable_custom_all_reduce: bool | None = None
    context_length: Annotated[int, Field(ge=1)] | None = None
    max_running_requests: Annotated[int, Field(ge=1)] | None = None
    extra_args: list[str] | None = None


class SpeculativeSpec(Model):
    """The candidate's speculative block (SGLang's --speculative-* flags)."""

    algorithm: SpeculativeAlgorithm = "EAGLE3"
    draft_model_path: str | None = None
    num_steps: Annotated[int, Field(ge=1)] | None = None
    eagle_topk: Annotated[int, Field(ge=1)] | None = None
    num_draft_tokens: Annotated[int, Field(ge=1)] | None = None

    @model_validator(mode="after")
    def _sglang_rules(self) -> "SpeculativeSpec":
        given = [v is not None for v in (self.num_steps, self.eagle_topk, self.num_draft_tokens)]
        if any(given) and not all(given):
            raise ValueError(
                "num-steps, eagle-topk and num-draft-tokens must all be set or all unset "
                "(SGLang asserts this); set all three"
            )
        if not any(given):
            raise ValueError(
                "num-steps, eagle-topk and num-draft-tokens are unset: SGLang would pick them itself "
                "((3, 1, 4) for most models, (5, 4, 8) for Llama/Grok), so the benchmark would not say what "
                "it measured; set all three"
            )
        assert self.num_steps is not None and self.eagle_topk is not None and self.num_draft_tokens is not None
        if self.eagle_topk == 1 and self.num_draft_tokens != self.num_steps + 1:
            raise KeyedValueError(
                "num-draft-tokens",
                f"eagle-topk is 1, so SGLang would silently adjust num-draft-tokens from {self.num_draft_tokens} "
                f"to num-steps + 1 = {self.num_steps + 1}; set num-draft-tokens: {self.num_steps + 1}"
            )
        if self.num_draft_tokens > self.num_steps * self.eagle_topk + 1:
            raise KeyedValueError(
                "num-draft-tokens",
                f"num-draft-tokens {self.num_draft_tokens} exceeds num-steps * eagle-topk + 1 = "
                f"{self.num_steps * self.eagle_topk + 1}: the draft tree cannot hold that many tokens; "
                "lower num-draft-tokens or raise num-steps/eagle-topk"
            )
        if self.algorithm in DRAFT_MODEL_ALGORITHMS and not self.draft_model_path:
            raise KeyedValueError("algorithm", f"algorithm {self.algorithm} needs draft-model-path (the draft model's weights)")
        if self.algorithm == "NGRAM" and self.draft_model_path:
            raise KeyedValueError("draft-model-path", "algorithm NGRAM uses no draft model; remove draft-model-path")
        return self


class CandidateConfounds(Model):
    """Everything the candidate changes besides speculation. Declared here, reported as a confound."""

    image: str | None = None
    nccl: NcclEnv | None = None
    env: dict[str, str] | None = None
    server: ServerOverrides | None = None


class CandidateSpec(Model):
    speculative: SpeculativeSpec
    confounds: CandidateConfounds | None = None


def _check_labels(labels: dict[str, str]) -> dict[str, str]:
    """Kubernetes label syntax, so a bad key fails here (with its key path) rather than at apply time."""
    for key, value in labels.items():
        prefix, _, name = key.rpartition("/")
        if (prefix and not _DNS_SUBDOMAIN.match(prefix)) or not _LABEL_NAME.match(name):
            raise KeyedValueError((key,), f"{key!r} is not a valid label key; write [prefix/]name with a name of "
                                          "up to 63 letters, digits, '-', '_' or '.'")
        if not isinstance(value, str) or not _LABEL_VALUE.match(value):
            raise KeyedValueError((key,), f"{value!r} is not a valid label value; use up to 63 letters, digits, "
                                          "'-', '_' or '.', starting and ending with a letter or digit")
    return labels


class Toleration(Model):
    key: str | None = None
    operator: Literal["Exists", "Equal"] = "Equal"
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: int | None = None

    @model_validator(mode="after")
    def _kubernetes_rules(self) -> "Toleration":
        if self.operator == "Exists" and self.value:
            raise KeyedValueError("value", "operator Exists matches any value; remove value (or use operator: Equal)")
        if self.key is None and self.operator != "Exists":
            raise KeyedValueError("operator", "a toleration without key must use operator: Exists")
        if self.toleration_seconds is not None and self.effect != "NoExecute":
            raise KeyedValueError("toleration-seconds", "toleration-seconds only applies to effect: NoExecute")
        return self


class Placement(Model):
    """Where each arm runs: whole 8-GPU nodes, never the same node for both arms."""

    gpus_per_node: Annotated[int, Field(ge=0)] = 8
    nodes: Annotated[int, Field(ge=1)] = 1
    # nodes > 1: each arm is a LeaderWorkerSet; rank 0 listens here for the other ranks (--dist-init-addr).
    dist_init_port: Annotated[int, Field(ge=1, le=65535)] = 20000
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: list[Toleration] = Field(default_factory=list)
    separate_nodes: bool = True
    priority_class_name: str | None = None
    runtime_class_name: str | None = None

    @field_validator("node_selector")
    @classmethod
    def _labels(cls, labels: dict[str, str]) -> dict[str, str]:
        return _check_labels(labels)

    @field_validator("priority_class_name", "runtime_class_name")
    @classmethod
    def _object_name(cls, value: str | None) -> str | None:
        if value is not None and not _DNS_SUBDOMAIN.match(value):
            raise ValueError(f"{value!r} is not a valid Kubernetes object name (lowercase letters, digits, '-', '.')")
        return value


class Resources(Model):
    shm_size: str = "64Gi"
    cpu: str | None = None
    memory: str | None = None

    @field_validator("shm_size", "memory", "cpu", mode="before")
    @classmethod
    def _number_as_quantity(cls, value: Any) -> Any:
        """`cpu: 2` in YAML is a number; Kubernetes quantities are strings."""
        return str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value

    @field_validator("shm_size", "memory")
    @classmethod
    def _quantity(cls, value: str | None) -> str | None:
        if value is not None and not _QUANTITY.match(str(value)):
            raise ValueError(f"{value!r} is not a Kubernetes quantity (e.g. 64Gi)")
        return value

    @field_validator("cpu")
    @classmethod
    def _cpu(cls, value: str | None) -> str | None:
        if value is not None and not _CPU.match(value):
            raise ValueError(f"{value!r} is not a CPU quantity (e.g. 2, 1.5 or 500m)")
        return value


class Rollout(Model):
    """Probes and timeouts sized for very large models (loading 1T params can take 20+ minutes)."""

    startup_timeout_min: Annotated[int, Field(ge=1)] = 60
    probe_period_s: Annotated[int, Field(ge=1)] = 10
    readiness_path: str = "/health_generate"
    liveness_path: str = "/health"
    # Above SGLang's own 20 s SGLANG_HEALTH_CHECK_TIMEOUT, so a slow /health_generate is not a probe failure.
    probe_timeout_s: Annotated[int, Field(ge=1)] = 25
    liveness_failure_threshold: Annotated[int, Field(ge=1)] = 6
    pulumi_timeout_min: Annotated[int, Field(ge=1)] = 90

    @field_validator("readiness_path", "liveness_path")
    @classmethod
    def _http_path(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError(f"{value!r} is not an HTTP path; start it with / (e.g. /health_generate)")
        return value

    @property
    def startup_failure_threshold(self) -> int:
        """Startup probe failures allowed so that failures x period covers startup-timeout-min."""
        return -(-self.startup_timeout_min * 60 // self.probe_period_s)

    @model_validator(mode="after")
    def _timeouts(self) -> "Rollout":
        if self.pulumi_timeout_min < self.startup_timeout_min:
            raise KeyedValueError(
                "pulumi-timeout-min",
                f"pulumi-timeout-min ({self.pulumi_timeout_min}) is shorter than startup-timeout-min "
                f"({self.startup_timeout_min}): pulumi up would give up while the model is still loading; "
                "raise pulumi-timeout-min"
            )
        return self


class DisruptionBudget(Model):
    """A PodDisruptionBudget per arm: a node drain must not evict a server mid-benchmark (reloading takes minutes)."""

    enabled: bool = True
    max_unavailable: Annotated[int, Field(ge=0)] = 0


class NetworkPolicySpec(Model):
    enabled: bool = True
    allowed_from: dict[str, str] = Field(default_factory=lambda: {"sglab/role": "loadgen"})

    @field_validator("allowed_from")
    @classmethod
    def _labels(cls, labels: dict[str, str]) -> dict[str, str]:
        return _check_labels(labels)

    @model_validator(mode="after")
    def _someone_allowed(self) -> "NetworkPolicySpec":
        if self.enabled and not self.allowed_from:
            raise KeyedValueError("allowed-from", "allowed-from is empty, so no load generator could reach the "
                                                  "servers; give the load generators' labels or set enabled: false")
        return self


class PromptSpec(Model):
    """A seeded prompt set, identical for both arms."""

    source: Literal["random", "file"] = "random"
    file: str | None = None
    count: Annotated[int, Field(ge=1)] = 256
    input_len: Annotated[int, Field(ge=1)] = 256
    range_ratio: Annotated[float, Field(ge=0, le=1)] = 0.5
    seed: int = 1

    @model_validator(mode="after")
    def _file(self) -> "PromptSpec":
        if self.source == "file" and not self.file:
            raise ValueError("source is file but file is missing: give a JSONL file of prompts")
        return self


class LoadPlan(Model):
    """What the A/B benchmark sends: same prompts, same load, both arms, interleaved rounds."""

    concurrency: list[Annotated[int, Field(ge=1)]] = Field(default_factory=lambda: [1, 4, 16])
    rounds: Annotated[int, Field(ge=1)] = 16
    # Levels the promotion policy does not gate on only show the crossover: fewer rounds there keeps
    # the measuring time where the decision is (None = load.rounds everywhere).
    ungated_rounds: Annotated[int, Field(ge=1)] | None = 4
    round_duration_s: Annotated[float, Field(gt=0)] | None = 6.0
    round_requests: Annotated[int, Field(ge=1)] | None = None
    warmup_requests: Annotated[int, Field(ge=0)] = 2
    max_new_tokens: Annotated[int, Field(ge=2)] = 128
    endpoint: Literal["generate", "chat"] = "generate"
    request_timeout_s: Annotated[float, Field(gt=0)] = 300.0
    seed: int = 0
    prompts: PromptSpec = Field(default_factory=PromptSpec)

    @model_validator(mode="after")
    def _round_size(self) -> "LoadPlan":
        if (self.round_duration_s is None) == (self.round_requests is None):
            raise ValueError("set exactly one of round-duration-s and round-requests")
        if len(set(self.concurrency)) != len(self.concurrency):
            raise ValueError("concurrency levels must be distinct")
        return self


class PromotionPolicy(Model):
    """When a candidate may be promoted. Defaults are deliberately conservative."""

    min_gain: float = 0.005
    metric: Literal["decode_tok_per_s", "output_tok_per_s"] = "decode_tok_per_s"
    levels: list[int] = Field(default_factory=lambda: [1])
    ttft_p99_max_increase: float | None = 0.5
    itl_p99_max_increase: float | None = None
    error_cap: Annotated[float, Field(ge=0, le=1)] = 0.01
    min_rounds: Annotated[int, Field(ge=2)] = 3
    min_requests: Annotated[int, Field(ge=1)] = 20
    confidence: Annotated[float, Field(gt=0.5, lt=1)] = 0.95
    # How the per-round interval is computed (sglab/analysis/stats.py; docs/verdict.md measures both).
    method: Literal["paired-t", "bootstrap"] = "paired-t"


class _PodRequests(Model):
    """cpu/memory requests of an sglab-run pod, checked as Kubernetes quantities before anything is applied."""

    @field_validator("cpu", "memory", mode="before", check_fields=False)
    @classmethod
    def _number_as_quantity(cls, value: Any) -> Any:
        return str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value

    @field_validator("cpu", check_fields=False)
    @classmethod
    def _cpu(cls, value: str) -> str:
        if not _CPU.match(value):
            raise ValueError(f"{value!r} is not a CPU quantity (e.g. 2, 1.5 or 500m)")
        return value

    @field_validator("memory", check_fields=False)
    @classmethod
    def _memory(cls, value: str) -> str:
        if not _QUANTITY.match(value):
            raise ValueError(f"{value!r} is not a Kubernetes quantity (e.g. 2Gi)")
        return value


class BenchmarkJob(_PodRequests):
    """The in-cluster benchmark Job declared after the arms (runs again when the comparison changes)."""

    enabled: bool = True
    rerun: str = ""
    image: str | None = None
    timeout_min: Annotated[int, Field(ge=1)] = 60
    quick: bool = False
    cpu: str = "2"
    memory: str = "2Gi"

    @field_validator("rerun", mode="before")
    @classmethod
    def _token_as_string(cls, value: Any) -> Any:
        """`pulumi config set --path ...rerun 2` stores a number; any token will do."""
        return str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value


class LocustSpec(_PodRequests):
    """Locust master + workers in the cluster, driving both arms (Locust's web UI)."""

    enabled: bool = False
    workers: Annotated[int, Field(ge=1)] = 2
    image: str | None = None
    web_login: bool = True
    username: str = "sglab"
    service_type: Literal["ClusterIP", "NodePort", "LoadBalancer"] = "ClusterIP"
    locustfile: str = Field("loadtests/locustfile.py", description="path inside the project image")
    cpu: str = Field("1", description="CPU request of the master and of each worker")
    memory: str = "1Gi"


class SimFaults(Model):
    """Seeded fault injection in the simulator (SGLAB_SIM_* env), for testing the harness."""

    error_rate: Annotated[float, Field(ge=0, le=1)] = 0.0
    error_status: Annotated[int, Field(ge=500, le=599)] = 500
    disconnect_rate: Annotated[float, Field(ge=0, le=1)] = 0.0
    stall_rate: Annotated[float, Field(ge=0, le=1)] = 0.0
    stall_s: Annotated[float, Field(ge=0)] = 2.0
    slow_start_s: Annotated[float, Field(ge=0)] = 0.0

    @model_validator(mode="after")
    def _total(self) -> "SimFaults":
        if self.error_rate + self.disconnect_rate + self.stall_rate > 1:
            raise ValueError("error-rate + disconnect-rate + stall-rate must not exceed 1")
        return self


class SimSpec(Model):
    """Simulator-only knobs, passed as SGLAB_SIM_* env (ignored by a real SGLang server)."""

    profile: str = "default"
    seed: int = 0
    time_scale: Annotated[float, Field(gt=0)] = 1.0
    warmup_s: Annotated[float, Field(ge=0)] = 0.0
    faults: SimFaults | None = None


class StackConfig(Model):
    """Everything under `sglab:` in a stack file."""

    namespace: str = "sglab"
    image: str = "lmsysorg/sglang:v0.5.3-cu129"
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"
    backend: Literal["sglang", "sim"] = "sglang"
    model: ModelSpec
    server: ServerFlags = Field(default_factory=ServerFlags)
    env: dict[str, str] = Field(default_factory=dict)
    hf_token: Any = None
    nccl: NcclEnv = Field(default_factory=NcclEnv)
    candidate: CandidateSpec
    placement: Placement = Field(default_factory=Placement)
    resources: Resources = Field(default_factory=Resources)
    rollout: Rollout = Field(default_factory=Rollout)
    network_policy: NetworkPolicySpec = Field(default_factory=NetworkPolicySpec)
    disruption_budget: DisruptionBudget = Field(default_factory=DisruptionBudget)
    load: LoadPlan = Field(default_factory=LoadPlan)
    policy: PromotionPolicy = Field(default_factory=PromotionPolicy)
    benchmark_job: BenchmarkJob = Field(default_factory=BenchmarkJob)
    locust: LocustSpec = Field(default_factory=LocustSpec)
    locust_password: Any = None
    project_image: str = Field("sglab:0.1.0", description="sglab + Locust + loadtests/: runs the benchmark "
                               "Job and in-cluster Locust unless benchmark-job.image / locust.image say otherwise")
    sim: SimSpec = Field(default_factory=SimSpec)

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: str) -> str:
        if not _DNS_LABEL.match(value):
            raise ValueError(f"{value!r} is not a valid namespace (lowercase letters, digits and '-', max 63)")
        return value

    @field_validator("env")
    @classmethod
    def _env(cls, env: dict[str, str]) -> dict[str, str]:
        for key in env:
            if not _ENV_NAME.match(key):
                raise KeyedValueError((key,), f"{key!r} is not a valid environment variable name")
            if key.startswith("NCCL_"):
                raise KeyedValueError(key, f"{key} belongs under nccl, where it is type-checked; move it there")
            if key == "HF_TOKEN":
                raise KeyedValueError(
                    key,
                    "HF_TOKEN must not be plain text; set it as a secret: pulumi config set --secret sglab:hf-token"
                )
            if key.startswith("SGLAB_SIM_"):
                raise KeyedValueError(key, f"{key} is a simulator knob; set it under sim instead")
        return {k: str(v) for k, v in env.items()}

    @field_validator(*SECRET_FIELDS)
    @classmethod
    def _secret(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None:
            return None
        if isinstance(value, dict) and set(value) == {"secure"}:
            return value
        if isinstance(value, SecretValue):
            return value
        key = _kebab(info.field_name or "")
        raise ValueError(
            "is plain text in the stack file, but a secret must be a Pulumi secret ({secure: ...}); "
            f"delete this line, then run: pulumi config set --secret sglab:{key} <value>"
        )

    @model_validator(mode="after")
    def _cross_checks(self) -> "StackConfig":
        if self.placement.nodes > 1 and self.backend != "sglang":
            raise KeyedValueError(
                "placement.nodes",
                f"nodes is {self.placement.nodes}: multi-node serving is not supported with backend "
                f"{self.backend} (the simulator is one process); use nodes: 1",
            )
        if self.placement.nodes > 1 and self.placement.gpus_per_node == 0:
            raise KeyedValueError(
                "placement.gpus-per-node",
                "gpus-per-node is 0 but nodes > 1: multi-node serving splits the model over GPUs; "
                "set gpus-per-node (e.g. 8)",
            )
        nodes = self.placement.nodes
        gpus = self.placement.gpus_per_node * nodes
        if self.backend == "sglang" and self.server.tp_size != gpus:
            other = (f" or placement.gpus-per-node: {self.server.tp_size // nodes}"
                     if self.server.tp_size % nodes == 0 else "")
            raise KeyedValueError(
                "server.tp-size",
                f"tp-size is {self.server.tp_size} but each arm requests {gpus} GPUs "
                f"(placement.gpus-per-node {self.placement.gpus_per_node} x nodes {nodes}) and "
                f"SGLang runs one TP rank per GPU; set server.tp-size: {gpus}{other}",
            )
        spec = self.candidate.speculative
        effective_max_running = self.server.max_running_requests
        overrides = self.candidate.confounds.server if self.candidate.confounds else None
        if overrides is not None and overrides.max_running_requests is not None:
            effective_max_running = overrides.max_running_requests
        if spec.algorithm in FORCES_MAX_RUNNING and effective_max_running is None:
            raise KeyedValueError(
                "server.max-running-requests",
                f"server.max-running-requests is unset: SGLang would silently force it to "
                f"{SGLANG_FORCED_MAX_RUNNING_REQUESTS} on the {spec.algorithm} candidate while the baseline "
                f"chooses its own, so the arms would differ; set server.max-running-requests "
                f"(e.g. {SGLANG_FORCED_MAX_RUNNING_REQUESTS})"
            )
        if self.model.volume is not None:
            mount = self.model.volume.mount_path.rstrip("/") + "/"
            paths = [("model.path", self.model.path)]
            if spec.draft_model_path:
                paths.append(("candidate.speculative.draft-model-path", spec.draft_model_path))
            for key, path in paths:
                if path.startswith("/") and not path.startswith(mount):
                    raise KeyedValueError(
                        key,
                        f"{path!r} is outside the model volume mounted at {self.model.volume.mount_path}, so the "
                        f"server could not read it; move it under {self.model.volume.mount_path} or change "
                        "model.volume.mount-path"
                    )
        for level in self.policy.levels:
            if level not in self.load.concurrency:
                raise KeyedValueError(
                    "policy.levels",
                    f"policy.levels names concurrency {level}, which load.concurrency "
                    f"{self.load.concurrency} never runs; add it there or remove it from policy.levels"
                )
        if self.locust.enabled and self.locust.web_login and self.locust_password is None:
            raise KeyedValueError(
                "locust.web-login",
                "locust.enabled and locust.web-login are true but the sglab:locust-password secret is not set, "
                "so nobody could log in to the Locust UI; pulumi config set --secret sglab:locust-password "
                "<password> (or set locust.web-login: false and reach the UI only through kubectl port-forward)"
            )
        if self.locust.enabled and self.locust.service_type != "ClusterIP" and not self.locust.web_login:
            raise KeyedValueError(
                "locust.service-type",
                f"locust.service-type {self.locust.service_type} exposes the Locust UI outside the cluster, and "
                "locust.web-login is false, so anyone who reaches it could drive load at the servers; "
                "set locust.web-login: true (with sglab:locust-password) or use service-type ClusterIP and "
                "kubectl port-forward"
            )
        return self


class SecretValue(str):
    """A resolved secret (inside the Pulumi program). str subclass so it never prints by accident."""

    def __repr__(self) -> str:
        return "SecretValue('***')"
