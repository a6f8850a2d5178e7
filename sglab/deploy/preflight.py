"""The preflight Job: before any GPU-holding object changes, the servers' own image checks what they will run.

A Job with no GPU, in the servers' image (one container per distinct arm image), runs
sglab/deploy/preflight_check.py, shipped with its spec in a ConfigMap: every arm's exact launch args through
that image's SGLang argument parser, the model and draft paths on the model volume, and their config.json
architectures against the image's SGLang model registry. The arms' releases depend on it (Pulumi `dependsOn`),
so a failed preflight fails `pulumi up` with its termination message (the problems and their fixes, printed
by Pulumi's Job awaiter) before any server is replaced: the running servers are left as they are.

Named after a hash of its spec and pod template, it runs again exactly when a launch command, an image or a
model path changes; `pulumi.com/replaceUnready` lets the next `pulumi up` rerun a failed one (after the
weights were copied, say). It mounts the weights as the servers do and runs on the servers' nodes
(node selector and tolerations: a hostPath only exists there), as the servers' user, locked down.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from sglab.config.stack import StackConfig
from sglab.deploy.objects import common_labels, server_image_security, support_pod_placement
from sglab.deploy.plan import ArmRelease

HASH_CHARS = 12
MOUNT = "/opt/sglab-preflight"
SCRIPT_KEY = "preflight_check.py"
AWAIT_SLACK_MIN = 5
COMPONENT = "preflight"


def script_text() -> str:
    return (Path(__file__).resolve().parent / SCRIPT_KEY).read_text(encoding="utf-8")


def model_paths(stack: StackConfig) -> list[dict[str, str]]:
    """The paths the servers read from the model volume (none when weights come from the hub)."""
    if stack.model.volume is None:
        return []
    paths = [{"key": "model.path", "path": stack.model.path}]
    draft = stack.candidate.speculative.draft_model_path
    if draft:
        paths.append({"key": "candidate.speculative.draft-model-path", "path": draft})
    return paths


def specs(stack: StackConfig, stack_name: str, releases: list[ArmRelease]) -> dict[str, dict[str, Any]]:
    """image -> the spec preflight_check.py reads for the arms that run it (arm releases in their order)."""
    out: dict[str, dict[str, Any]] = {}
    for release in releases:
        arm = release.arm
        spec = out.setdefault(arm.image, {"stack": stack_name, "image": arm.image, "arms": [],
                                          "paths": model_paths(stack)})
        spec["arms"].append({"name": release.values.get("armName") or release.resource or arm.name,
                             "release": release.release, "args": list(arm.args), "env": dict(arm.env)})
    return out


@dataclass(frozen=True)
class PreflightPlan:
    name: str
    configmap: dict[str, Any]
    job: dict[str, Any]
    await_timeout_min: int

    def manifests(self) -> list[dict[str, Any]]:
        return [self.configmap, self.job]


def _pod(stack: StackConfig, configmap: str, images: dict[str, dict[str, Any]], server: dict[str, Any]) -> dict:
    context, writable_mounts, writable_volumes = server_image_security(server["security"])
    volume = server["modelVolume"]
    mounts = [{"name": "preflight", "mountPath": MOUNT, "readOnly": True}, *writable_mounts]
    volumes: list[dict[str, Any]] = [{"name": "preflight", "configMap": {"name": configmap}}, *writable_volumes]
    if volume["kind"] != "none":
        mounts.append({"name": "model", "mountPath": volume["mountPath"], "readOnly": True})
        volumes.append({"name": "model", "hostPath": {"path": volume["hostPath"], "type": "Directory"}}
                       if volume["kind"] == "hostPath" else
                       {"name": "model", "persistentVolumeClaim": {"claimName": volume["claimName"], "readOnly": True}})
    job = stack.preflight
    containers = [{
        "name": f"check-{i}" if len(images) > 1 else "check",
        "image": image,
        "imagePullPolicy": stack.image_pull_policy,
        "command": ["python3", f"{MOUNT}/{SCRIPT_KEY}", "--spec", f"{MOUNT}/spec-{i}.json"],
        "env": [{"name": "HOME", "value": "/tmp"}, {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},
                {"name": "HF_HUB_OFFLINE", "value": "1"}, {"name": "CUDA_VISIBLE_DEVICES", "value": ""}],
        "resources": {"requests": {"cpu": job.cpu, "memory": job.memory}, "limits": {"memory": job.memory}},
        "volumeMounts": mounts,
        "securityContext": context,
        # What Pulumi's Job awaiter prints when the Job fails: the problems and fixes, else the log's tail.
        "terminationMessagePolicy": "FallbackToLogsOnError",
    } for i, image in enumerate(images)]
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "containers": containers,
        "volumes": volumes,
        **support_pod_placement(stack),
    }
    if server["nodeSelector"]:  # the servers' nodes: a hostPath of weights is only there
        spec["nodeSelector"] = {**spec.get("nodeSelector", {}), **server["nodeSelector"]}
    return {"metadata": {"labels": {"app.kubernetes.io/name": "sglab-preflight", "app.kubernetes.io/part-of": "sglab",
                                    "app.kubernetes.io/component": COMPONENT}}, "spec": spec}


def preflight_plan(stack: StackConfig, stack_name: str, releases: list[ArmRelease]) -> PreflightPlan | None:
    """The preflight for these arm releases, or None (preflight.enabled false, or the simulator backend)."""
    if not stack.preflight.enabled or stack.backend != "sglang" or not releases:
        return None
    by_image = specs(stack, stack_name, releases)
    data = {SCRIPT_KEY: script_text(), **{f"spec-{i}.json": json.dumps(spec, indent=1, sort_keys=True)
                                          for i, spec in enumerate(by_image.values())}}
    server = releases[0].values
    pod = _pod(stack, "{configmap}", by_image, server)
    digest = hashlib.sha256(json.dumps({"data": data, "pod": pod}, sort_keys=True).encode()).hexdigest()[:HASH_CHARS]
    name = f"sglab-preflight-{digest}"
    labels = {**common_labels(stack_name), "app.kubernetes.io/component": COMPONENT, "sglab/preflight": digest}
    pod = _pod(stack, name, by_image, server)
    pod["metadata"]["labels"]["sglab/stack"] = stack_name
    configmap = {"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": {"name": name, "namespace": stack.namespace, "labels": labels}, "data": data}
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": name, "namespace": stack.namespace, "labels": labels,
                        "annotations": {"pulumi.com/replaceUnready": "true"}},
           "spec": {"backoffLimit": 0, "activeDeadlineSeconds": stack.preflight.timeout_min * 60, "template": pod}}
    return PreflightPlan(name, configmap, job, stack.preflight.timeout_min + AWAIT_SLACK_MIN)


class Preflight(pulumi.ComponentResource):
    """The preflight ConfigMap and Job; `job` is what the arms depend on."""

    TYPE = "sglab:index:Preflight"

    def __init__(self, name: str, plan: PreflightPlan, *, foundation: list[pulumi.Resource],
                 gate: pulumi.Output[Any] | None = None, opts: pulumi.ResourceOptions | None = None) -> None:
        """`gate`: an Output that must resolve before the Job is created (an existing namespace that admits it)."""
        super().__init__(self.TYPE, name, None, opts)
        source = k8s.core.v1.ConfigMap(f"{name}-spec", metadata=plan.configmap["metadata"],
                                       data=plan.configmap["data"],
                                       opts=pulumi.ResourceOptions(parent=self, depends_on=foundation))
        timeout = f"{plan.await_timeout_min}m"
        spec = plan.job["spec"] if gate is None else gate.apply(lambda _: plan.job["spec"])
        self.job = k8s.batch.v1.Job(
            f"{name}-job", metadata=plan.job["metadata"], spec=spec,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*foundation, source],
                                        custom_timeouts=pulumi.CustomTimeouts(create=timeout, update=timeout)))
        self.job_name = pulumi.Output.from_input(plan.name)
        self.register_outputs({"job": self.job_name})
