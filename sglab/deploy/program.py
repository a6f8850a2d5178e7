"""The Pulumi program: namespace, HF token Secret, then one `SGLangServer` per arm, then stack outputs.

`run()` reads as the deployment order. Each builder takes the `Deployment` context and adds
resources and outputs to it; a further component (benchmark Job, Locust) is one more builder
called at the end of `run()`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from sglab.config.arms import confounds
from sglab.config.lints import blocking, stack_lints
from sglab.config.loader import ConfigError, LoadedStack
from sglab.config.models import StackConfig
from sglab.deploy.benchmark_job import build_benchmark_job
from sglab.deploy.locust import build_locust
from sglab.deploy.objects import hf_token_secret_manifest, namespace_manifest
from sglab.deploy.plan import arm_releases
from sglab.deploy.probe_job import build_probe_job
from sglab.deploy.pulumi_config import PulumiStack, read_pulumi_config
from sglab.deploy.server import SGLangServer
from sglab.deploy.sweep_arms import plan_wave


@dataclass
class Deployment:
    """What the builders share: the validated stack and the resources declared so far."""

    stack_name: str
    loaded: LoadedStack
    secrets: dict[str, pulumi.Output[str]]
    namespace: k8s.core.v1.Namespace | None = None
    hf_token_secret: k8s.core.v1.Secret | None = None
    arms: dict[str, SGLangServer] = field(default_factory=dict)
    probe_job: pulumi.Resource | None = None  # the NCCL probe runs before the arms take the GPUs
    outputs: dict[str, Any] = field(default_factory=dict)

    @property
    def stack(self) -> StackConfig:
        return self.loaded.config

    def foundation(self) -> list[pulumi.Resource]:
        """Resources every workload in the namespace depends on."""
        return [r for r in (self.namespace, self.hf_token_secret, self.probe_job) if r is not None]

    def export(self, name: str, value: Any) -> None:
        self.outputs[name] = value
        pulumi.export(name, value)


def read_stack() -> Deployment:
    """The stack config from Pulumi config; bad input stops `pulumi up` with one clear message."""
    try:
        config: PulumiStack = read_pulumi_config()
    except ConfigError as exc:
        raise pulumi.RunError(str(exc)) from None
    for note in config.loaded.warnings:
        pulumi.log.warn(note)
    lints = stack_lints(config.loaded.config)
    for lint in lints:
        pulumi.log.warn(f"lint {lint.describe()}")
    if blocking(lints):
        raise pulumi.RunError("; ".join(f"{lint.key}: {lint.message}; fix: {lint.fix}" for lint in blocking(lints)))
    return Deployment(stack_name=config.loaded.name, loaded=config.loaded, secrets=dict(config.secrets))


def build_namespace(dep: Deployment) -> None:
    manifest = namespace_manifest(dep.stack, dep.stack_name)
    dep.namespace = k8s.core.v1.Namespace("namespace", metadata=manifest["metadata"])
    dep.export("namespace", dep.stack.namespace)


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


def build_arms(dep: Deployment) -> None:
    """The baseline and the candidate; for a sweep wave (sglab:sweep.wave) the baseline and the wave's arms,
    one release per arm named after it (the baseline's release is the same in every wave)."""
    try:
        releases = arm_releases(dep.stack, dep.stack_name)
        wave = plan_wave(dep.stack, dep.stack_name) if dep.stack.sweep is not None else None
    except ConfigError as exc:
        raise pulumi.RunError(str(exc)) from None
    for release in releases:
        key = release.arm.role if release.arm.role == "baseline" or wave is None else release.release
        server = SGLangServer(key, release, pulumi.ResourceOptions(depends_on=dep.foundation()))
        dep.arms[key] = server
        if wave is not None and key != "baseline":
            continue
        dep.export(f"{key}_service", server.service_host)
        dep.export(f"{key}_port", server.port)
        dep.export(f"{key}_url", server.url)
        dep.export(f"{key}_launch_command", server.launch_command)
    if wave is None:
        dep.export("config_hashes", {role: server.config_hash for role, server in dep.arms.items()})
        dep.export("confounds", [c.as_dict() for c in confounds(dep.stack)])
        return
    for note in wave.notes:
        pulumi.log.warn(note)
    by_release = {a.release: a for a in wave.arms}
    dep.export("config_hashes", {"baseline": dep.arms["baseline"].config_hash,
                                 **{by_release[k].arm.name: s.config_hash for k, s in dep.arms.items() if k != "baseline"}})
    dep.export("sweep_wave", wave.number)
    dep.export("sweep_waves", wave.count)
    dep.export("sweep_carried", wave.carried.arm.name if wave.carried else None)
    dep.export("sweep_arms", {a.arm.name: {"url": dep.arms[a.release].url, "config_hash": a.arm.config_hash,
                                           "release": a.release, "carried": a.carried} for a in wave.arms})


def run() -> Deployment:
    """The whole program (`__main__.py` calls this)."""
    dep = read_stack()
    build_namespace(dep)
    build_hf_token_secret(dep)
    if dep.stack.probe.enabled:
        dep.probe_job = build_probe_job(dep).job
    build_arms(dep)
    if dep.stack.locust.enabled:
        build_locust(dep)
    if dep.stack.benchmark_job.enabled:
        build_benchmark_job(dep)
    return dep
