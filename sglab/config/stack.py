"""StackConfig: everything under `sglab:` in a stack file, with the checks that span sections."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from sglab import metrics
from sglab.config.base import KeyedValueError, Model, SecretValue, _kebab, check_env, is_under, normal_dir
from sglab.config.cluster import (DEFAULT_PROJECT_IMAGE, BenchmarkJob, HfCache, LocustSpec, NamespaceSpec,
                                  PreflightSpec, check_pull_secrets, cluster_checks, namespace_input)
from sglab.config.loadplan import LoadPlan
from sglab.config.nccl import NcclEnv, ProbeSpec
from sglab.config.placement import DisruptionBudget, NetworkPolicySpec, Placement, PodSecurity, Resources, Rollout
from sglab.config.policy import PromotionPolicy, Traffic
from sglab.config.server import CandidateSpec, ModelSpec, ServerFlags, SimSpec
from sglab.config.serving import Serving, serving_checks
from sglab.config.sweep import SweepSpec
from sglab.sglang import rules
from sglab.sglang.flags import DEFAULT_IMAGE


# The lint codes a stack may accept (`sglab:accept-lints`), declared with the stack model that names them
# (sglab/config/lints.py reads the stack's arms, so it cannot be imported here).
LintCode = Literal["custom-all-reduce-shadows-nccl", "sglang-overwrites-nccl-env", "nccl-proto-ll128",
                   "multi-node-without-rdma", "image-tag-in-production"]


# StackConfig fields that must be Pulumi secrets (`{secure: ...}` in the stack file, `--secret` in Pulumi).
SECRET_FIELDS = ("hf_token", "locust_password")


class StackConfig(Model):
    """Everything under `sglab:` in a stack file."""

    # `sglab:namespace: NAME` or {name, create, protect, pod-security} (config/cluster.py);
    # `stack.namespace` is the name.
    namespace_spec: NamespaceSpec = Field(default_factory=NamespaceSpec, alias="namespace")
    production: bool = False  # serving, not a lab: a platform-owned namespace, no hostPath weights (docs/deploy.md)
    image_pull_secrets: list[str] = Field(default_factory=list)  # on every pod sglab renders
    hf_cache: HfCache | None = None
    preflight: PreflightSpec = Field(default_factory=PreflightSpec)
    image: str = DEFAULT_IMAGE  # the pinned SGLang release (sglab/sglang/flags.py); a digest may follow
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
    pod_security: PodSecurity = Field(default_factory=PodSecurity)
    rollout: Rollout = Field(default_factory=Rollout)
    network_policy: NetworkPolicySpec = Field(default_factory=NetworkPolicySpec)
    disruption_budget: DisruptionBudget = Field(default_factory=DisruptionBudget)
    load: LoadPlan = Field(default_factory=LoadPlan)
    policy: PromotionPolicy = Field(default_factory=PromotionPolicy)
    benchmark_job: BenchmarkJob = Field(default_factory=BenchmarkJob)
    locust: LocustSpec = Field(default_factory=LocustSpec)
    locust_password: Any = None
    project_image: str = Field(DEFAULT_PROJECT_IMAGE, description="sglab + Locust + loadtests/: runs the benchmark "
                               "Job and in-cluster Locust unless benchmark-job.image / locust.image say otherwise")
    sim: SimSpec = Field(default_factory=SimSpec)
    probe: ProbeSpec = Field(default_factory=ProbeSpec)
    sweep: SweepSpec | None = None  # `sglab sweep` (docs/sweep.md)
    # What production serves (profile, levels, weights, SLO): the gate runs at each level (docs/verdict.md).
    traffic: Traffic | None = None
    promote_to: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")] = Field(
        "production", description="the stack a promotion goes to: `sglab bench` also runs its gated levels "
        "sequentially against its gate, and `sglab promote` defaults to it (docs/verdict.md)")
    # Production's serving shape: Rollout, canary, gateway, scraping, standing control (docs/production.md).
    serving: Serving | None = None
    # Lint codes (sglab/config/lints.py) this stack accepts; the ones that need it stop the stack until then.
    accept_lints: list[LintCode] = Field(default_factory=list)

    @property
    def benchmark_scales_arms_down(self) -> bool:
        """The benchmark Job scales its arms to 0 when it ends (no idle GPUs): a lab stack's two single-node arms,
        unless benchmark-job.scale-arms-to-zero is false. Never a serving stack's (production traffic), a sweep's
        slots (the next wave reuses them) or a multi-node server (a LeaderWorkerSet)."""
        lab = self.serving is None and self.sweep is None and self.placement.nodes == 1
        return lab and self.benchmark_job.scale_arms_to_zero

    @property
    def benchmark_holds_budgets(self) -> bool:
        """The benchmark Job's guard holds the arms' PodDisruptionBudgets at 0 while it measures."""
        return self.disruption_budget.enabled and self.disruption_budget.hold_during_benchmark

    @property
    def benchmark_runs_guard(self) -> bool:
        """The benchmark Job's pod carries the guard (a native sidecar, Kubernetes 1.29+): it holds the budgets or
        scales the arms down when the Job ends."""
        return self.benchmark_job.enabled and (self.benchmark_holds_budgets or self.benchmark_scales_arms_down)

    @property
    def namespace(self) -> str:
        return self.namespace_spec.name

    @field_validator("namespace_spec", mode="before")
    @classmethod
    def _namespace(cls, value: Any) -> Any:
        return namespace_input(value)

    @field_validator("image_pull_secrets")
    @classmethod
    def _pull_secrets(cls, names: list[str]) -> list[str]:
        return check_pull_secrets(names)

    @field_validator("env", mode="before")
    @classmethod
    def _env(cls, env: Any) -> Any:
        return check_env(env, "nccl")

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
        if rules.forces_max_running(spec.algorithm) and effective_max_running is None:
            raise KeyedValueError(
                "server.max-running-requests",
                f"server.max-running-requests is unset: SGLang would silently force it to "
                f"{rules.FORCED_MAX_RUNNING_REQUESTS} on the {spec.algorithm} candidate while the baseline "
                f"chooses its own, so the arms would differ; set server.max-running-requests "
                f"(e.g. {rules.FORCED_MAX_RUNNING_REQUESTS})"
            )
        if self.model.volume is None and self.backend == "sglang":
            # An absolute path names a file inside the server's container; without a volume nothing puts it
            # there, so validate and render pass and the servers fail on the GPU nodes (the simulator reads no
            # weights, so backend sim is exempt).
            paths = [("model.path", self.model.path)]
            if spec.draft_model_path:
                paths.append(("candidate.speculative.draft-model-path", spec.draft_model_path))
            for key, path in paths:
                if path.startswith("/"):
                    parent = path.rstrip("/").rsplit("/", 1)[0] or "/"
                    raise KeyedValueError(
                        key,
                        f"{path!r} is an absolute path but model.volume is not set, so nothing mounts the weights "
                        f"into the server's container and SGLang would fail on the GPU nodes; add model.volume "
                        f"(kind: hostPath, host-path: <the node directory holding the weights>, mount-path: "
                        f"{parent}), or kind: pvc with claim-name, or give a Hugging Face model id instead"
                    )
        if self.model.volume is not None:
            weights = self.model.volume.mount_path
            for writable in self.pod_security.writable_paths:
                if normal_dir(writable) == normal_dir(weights):
                    raise KeyedValueError("model.volume.mount-path", f"mount-path {weights} is also in pod-security."
                                          "writable-paths, and one directory takes one volume; mount the weights at a "
                                          "directory of their own, e.g. /shared")
                if is_under(writable, weights):
                    raise KeyedValueError("model.volume.mount-path",
                                          f"pod-security.writable-paths {writable} is inside "
                                          f"the read-only model volume at {weights}, where the container runtime "
                                          "cannot create its mount point; move that writable path out of "
                                          f"{weights}, or mount the weights elsewhere")
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
        # A trace is one level, checked against the run it plans (sglab bench refuses an ungated run).
        measured = {"concurrency": ("concurrency", "load.concurrency", self.load.concurrency),
                    "rate": ("request rate", "load.rate.levels", self.load.rate.levels)}.get(self.load.profile)
        for level in self.policy.levels if measured else ():
            what, key, levels = measured
            if level not in levels:
                raise KeyedValueError(
                    "policy.levels",
                    f"policy.levels names {what} {level}, which {key} {levels} never runs; add it there or "
                    "remove it from policy.levels"
                )
        self._gate_on_traffic()
        cluster_checks(self)
        if self.serving is not None:  # frozen model: set once, here (the benchmark Job is off in a serving stack)
            object.__setattr__(self, "benchmark_job", serving_checks(self))
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

    def _gate_on_traffic(self) -> None:
        """With sglab:traffic the policy gates at its levels (policy.levels and policy.traffic follow from it),
        so the runner, --quick, the recorded policy and promote all see one gate."""
        policy, traffic = self.policy, self.traffic
        if traffic is None:
            if policy.traffic is not None:
                raise KeyedValueError("policy.traffic", "policy.traffic is set from sglab:traffic; "
                                      "declare the traffic there (sglab:traffic: {profile, levels})")
            self._check_slo_metric(policy)
            return
        if "levels" in policy.model_fields_set and policy.levels != traffic.levels:
            raise KeyedValueError("policy.levels", f"policy.levels {policy.levels} and traffic.levels "
                                  f"{traffic.levels} disagree: with sglab:traffic the gate runs at the traffic's "
                                  "levels; remove policy.levels")
        load_profile = getattr(self.load, "profile", "concurrency")
        if traffic.profile != load_profile:
            raise KeyedValueError("traffic.profile", f"traffic.profile is {traffic.profile} but load.profile is "
                                  f"{load_profile}, so the gated levels would never be measured; set "
                                  f"load.profile: {traffic.profile}")
        rate = getattr(self.load, "rate", None)
        measured = {"concurrency": self.load.concurrency,
                    "rate": rate.levels if rate is not None else None}.get(traffic.profile)
        missing = [lv for lv in traffic.levels if measured is not None and lv not in measured]
        if missing:
            where = "load.concurrency" if traffic.profile == "concurrency" else "load.rate.levels"
            raise KeyedValueError("traffic.levels", f"traffic.levels names {missing}, which {where} {measured} "
                                  f"never runs; add them to {where}")
        gate = policy.model_copy(update={"levels": list(traffic.levels), "traffic": traffic})
        self._check_slo_metric(gate)
        object.__setattr__(self, "policy", gate)  # frozen model: set once, here, at validation

    @staticmethod
    def _check_slo_metric(policy: PromotionPolicy) -> None:
        if metrics.get(policy.metric).uses_slo and policy.slo is None:
            raise KeyedValueError("policy.metric", f"policy.metric {policy.metric} counts the requests that meet "
                                  "the SLO, but no SLO is declared; set policy.slo (ttft-ms, tpot-ms)")
