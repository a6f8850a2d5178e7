"""The Pulumi program: namespace, HF token Secret, the preflight, then one `SGLangServer` per arm, then the load
generators and stack outputs.

`run()` reads as the deployment order. Each builder takes the `Deployment` context and adds resources and outputs
to it. The capacity preflight runs before anything is declared, so a plan that could deadlock on GPU capacity, or
GPU nodes whose driver is too old for the image's CUDA build, change nothing; the preflight Job runs before any
server is replaced, so a launch command the image's SGLang refuses, or weights that are not there, leave the
running servers untouched.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from sglab.config.arms import confounds
from sglab.config.lints import blocking, stack_lints
from sglab.core.errors import ConfigError
from sglab.config.loader import LoadedStack
from sglab.config.stack import StackConfig
from sglab.deploy.benchmark_job import build_benchmark_job
from sglab.deploy.capacity import (Node, check_capacity, check_drivers, check_native_sidecar, read_cluster_nodes,
                                   read_cluster_version)
from sglab.deploy.locust import build_locust
from sglab.deploy.namespace import declare_hf_cache, declare_namespace
from sglab.deploy.objects import hf_token_secret_manifest
from sglab.deploy.plan import ArmRelease, SGLangServer, arm_releases
from sglab.deploy.preflight import Preflight, preflight_plan
from sglab.probe.job import build_probe_job
from sglab.deploy.pulumi_config import PulumiStack, read_pulumi_config
from sglab.sweep.arms import plan_wave


@dataclass
class Deployment:
    """What the builders share: the validated stack and the resources declared so far."""

    stack_name: str
    loaded: LoadedStack
    secrets: dict[str, pulumi.Output[str]]
    namespace: pulumi.Resource | None = None  # created, or read (an existing namespace: never deleted)
    hf_token_secret: k8s.core.v1.Secret | None = None
    hf_cache: pulumi.Resource | None = None
    preflight: Preflight | None = None  # every GPU-holding object waits for it
    admission: pulumi.Output[Any] | None = None  # resolves once an existing namespace is known to admit the pods
    arms: dict[str, SGLangServer] = field(default_factory=dict)
    probe_job: pulumi.Resource | None = None  # on demand: nothing waits for it
    outputs: dict[str, Any] = field(default_factory=dict)

    @property
    def stack(self) -> StackConfig:
        return self.loaded.config

    def foundation(self) -> list[pulumi.Resource]:
        """Resources every workload in the namespace depends on."""
        return [r for r in (self.namespace, self.hf_token_secret, self.hf_cache) if r is not None]

    def export(self, name: str, value: Any) -> None:
        self.outputs[name] = value
        pulumi.export(name, value)


def _refusal(exc: ConfigError) -> pulumi.RunError:
    return pulumi.RunError(str(exc))


def cluster_nodes() -> list[Node]:
    """The cluster's nodes, read with the kubeconfig and context this stack's Kubernetes provider uses."""
    kube = pulumi.Config("kubernetes")
    return read_cluster_nodes(kube.get("context"), kube.get("kubeconfig"))


def cluster_version() -> str:
    """The API server's gitVersion, read as the nodes are."""
    kube = pulumi.Config("kubernetes")
    return read_cluster_version(kube.get("context"), kube.get("kubeconfig"))


def check_cluster_version(loaded: LoadedStack, read_version: Callable[[], str]) -> None:
    """The native-sidecar check (sglab/deploy/capacity.py) on the API server's version; a version that cannot be
    read (no cluster in a preview) leaves it unchecked, said."""
    try:
        version = read_version()
    except Exception as exc:  # noqa: BLE001 - whatever stops the read, the check is skipped and says why
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        pulumi.log.warn(f"kubernetes version: the API server's version could not be read ({reason}): not checked")
        return
    try:
        check_native_sidecar(loaded.config, loaded.name, version)
    except ConfigError as exc:
        raise _refusal(exc) from None


def check_node_drivers(loaded: LoadedStack, read_nodes: Callable[[], Sequence[Node]]) -> None:
    """The driver check (sglab/deploy/capacity.py) on the nodes as read now; nodes that cannot be read (no
    cluster in a preview, a deployer that may not list nodes) leave it unchecked, said."""
    if loaded.config.placement.gpus_per_node == 0:
        return
    try:
        nodes = read_nodes()
    except Exception as exc:  # noqa: BLE001 - whatever stops the read, the check is skipped and says why
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        pulumi.log.warn(f"driver: the nodes could not be read ({reason}): not checked")
        return
    try:
        summary, warnings = check_drivers(loaded.config, loaded.name, nodes)
    except ConfigError as exc:
        raise _refusal(exc) from None
    for warning in warnings:
        pulumi.log.warn(warning)
    if summary is not None:
        pulumi.log.info(summary)


def read_stack(read_nodes: Callable[[], Sequence[Node]] = cluster_nodes,
               read_version: Callable[[], str] = cluster_version) -> Deployment:
    """The stack config from Pulumi config; bad input, a plan that could deadlock, GPU nodes whose driver is too
    old for the image, or a cluster too old for the benchmark Job's sidecar stop `pulumi up` with one clear
    message before anything is declared."""
    try:
        config: PulumiStack = read_pulumi_config()
    except ConfigError as exc:
        raise _refusal(exc) from None
    for note in config.loaded.warnings:
        pulumi.log.warn(note)
    lints = stack_lints(config.loaded.config)
    for lint in lints:
        pulumi.log.warn(f"lint {lint.describe()}")
    if blocking(lints):
        raise pulumi.RunError("; ".join(f"{lint.key}: {lint.message}; fix: {lint.fix}" for lint in blocking(lints)))
    try:
        capacity, warnings = check_capacity(config.loaded.config, config.loaded.name)
    except ConfigError as exc:
        raise _refusal(exc) from None
    for warning in warnings:
        pulumi.log.warn(warning)
    if capacity is not None:
        pulumi.log.info(capacity.describe())
    check_node_drivers(config.loaded, read_nodes)
    check_cluster_version(config.loaded, read_version)
    return Deployment(stack_name=config.loaded.name, loaded=config.loaded, secrets=dict(config.secrets))


def build_hf_token_secret(dep: Deployment) -> None:
    manifest = hf_token_secret_manifest(dep.stack, dep.stack_name, dep.secrets.get("hf-token"))
    if manifest is None:
        return
    dep.hf_token_secret = k8s.core.v1.Secret(
        "hf-token",
        metadata=manifest["metadata"],
        type=manifest["type"],
        string_data=manifest["stringData"],
        opts=pulumi.ResourceOptions(depends_on=[dep.namespace] if dep.namespace else []),
    )


def _releases(dep: Deployment) -> list[ArmRelease]:
    try:
        return arm_releases(dep.stack, dep.stack_name)
    except ConfigError as exc:
        raise _refusal(exc) from None


def build_preflight(dep: Deployment, releases: list[ArmRelease]) -> None:
    plan = preflight_plan(dep.stack, dep.stack_name, releases)
    if plan is None:
        return
    dep.preflight = Preflight("preflight", plan, foundation=dep.foundation(), gate=dep.admission)
    pulumi.log.info(f"phase 1/3 preflight: Job {plan.name} checks every launch command with the server image's "
                    "SGLang, the model paths and their architectures (no GPU); the servers wait for it",
                    resource=dep.preflight.job)
    dep.export("preflight_job", dep.preflight.job_name)


def _gate(dep: Deployment, values: dict[str, Any]) -> Any:
    """Chart values that resolve only once an existing namespace is known to admit the pods (else the program
    fails there and no server is touched)."""
    return values if dep.admission is None else dep.admission.apply(lambda _: values)


def build_arms(dep: Deployment, releases: list[ArmRelease]) -> None:
    """The baseline and the candidate; for a sweep wave the baseline and the wave's arms, each in its slot (the
    baseline's release is the same in every wave, a slot is the same resource in every wave)."""
    wave = plan_wave(dep.stack, dep.stack_name) if dep.stack.sweep is not None else None
    depends = [*dep.foundation(), *([dep.preflight.job] if dep.preflight is not None else [])]
    for release in releases:
        key = "baseline" if release.arm.role == "baseline" else release.resource
        server = SGLangServer(key, release, pulumi.ResourceOptions(depends_on=depends),
                              values=_gate(dep, release.values))
        dep.arms[key] = server
        if wave is not None and key != "baseline":
            continue
        role = release.arm.role
        dep.export(f"{role}_service", server.service_host)
        dep.export(f"{role}_port", server.port)
        dep.export(f"{role}_url", server.url)
        dep.export(f"{role}_launch_command", server.launch_command)
        dep.export(f"{role}_release", release.release)
    first = next(iter(dep.arms.values()))
    pulumi.log.info(f"phase 2/3 servers: {len(releases)} loading, up to rollout.pulumi-timeout-min "
                    f"{dep.stack.rollout.pulumi_timeout_min} min; watch: kubectl -n {dep.stack.namespace} get pods "
                    "-l app.kubernetes.io/part-of=sglab -w", resource=first)
    if wave is None:
        dep.export("config_hashes", {s.role: s.config_hash for s in dep.arms.values()})
        dep.export("confounds", [c.as_dict() for c in confounds(dep.stack)])
        return
    for note in wave.notes:
        pulumi.log.warn(note)
    by_release = {a.release: a for a in wave.arms}
    dep.export("config_hashes", {"baseline": dep.arms["baseline"].config_hash,
                                 **{by_release[k].arm.name: s.config_hash for k, s in dep.arms.items()
                                    if k != "baseline"}})
    dep.export("sweep_wave", wave.number)
    dep.export("sweep_waves", wave.count)
    dep.export("sweep_carried", wave.carried.arm.name if wave.carried else None)
    dep.export("sweep_arms", {a.arm.name: {"url": dep.arms[a.release].url, "config_hash": a.arm.config_hash,
                                           "release": a.release, "carried": a.carried} for a in wave.arms})


def run(read_nodes: Callable[[], Sequence[Node]] = cluster_nodes,
        read_version: Callable[[], str] = cluster_version) -> Deployment:
    """The whole program (`__main__.py` calls this; a test passes the nodes and the version the checks read)."""
    dep = read_stack(read_nodes, read_version)
    try:
        declare_namespace(dep)
        build_hf_token_secret(dep)
        declare_hf_cache(dep)
    except ConfigError as exc:
        raise _refusal(exc) from None
    releases = _releases(dep)
    build_preflight(dep, releases)
    if dep.stack.probe.enabled:
        dep.probe_job = build_probe_job(dep).job
    build_arms(dep, releases)
    if dep.stack.locust.enabled:
        build_locust(dep)
    if dep.stack.benchmark_job.enabled:
        build_benchmark_job(dep)
    return dep
