"""Locust in the cluster: `charts/locust` (master + workers) driving both arms, and its Pulumi component.

The master serves Locust's web UI (the A/B tab included, from the project image's locustfile) on a
ClusterIP Service unless the stack says `locust.service-type: LoadBalancer`; workers reach the master
on its own always-ClusterIP Service. Web login is on by default: the password is the Pulumi secret
`sglab:locust-password`, stored in a Kubernetes Secret and handed to the master as SGLAB_UI_PASSWORD
(sglab/ui/auth.py reads it). Every Locust pod carries the label the servers' NetworkPolicy admits.

Only this stack's workers join the master: both read SGLAB_WORKER_TOKEN from one Secret whose random value
`pulumi up` generates when it first creates it and then keeps (ignore_changes), marked secret in the state
and never exported; the master ignores a worker without it (sglab/load/distributed.py).
"""

from __future__ import annotations

import secrets
import sys
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from sglab.config.arms import baseline_arm, candidate_arm
from sglab.core.errors import ConfigError
from sglab.core.paths import stack_path
from sglab.config.stack import StackConfig
from sglab.deploy.benchmark_job import STACKS_MOUNT, stack_file_text
from sglab.deploy.naming import PART_OF, PROJECT_IMAGE_UID, arm_url, chart_dir
from sglab.deploy.objects import common_labels, secret_manifest, support_pod_placement
from sglab.deploy.values import to_yaml
from sglab.core.paths import write_or_check

CHART = "locust"
RELEASE = "sglab-locust"
WEB_PORT = 8089
MASTER_PORT = 5557
LOGIN_SECRET = f"{RELEASE}-web-login"
LOGIN_SECRET_KEY = "password"
STACK_CONFIGMAP = f"{RELEASE}-stack"
PASSWORD_CONFIG_KEY = "locust-password"
WORKER_TOKEN_ENV = "SGLAB_WORKER_TOKEN"  # sglab/load/distributed.py's (that module imports gevent: not here)
WORKER_TOKEN_SECRET = f"{RELEASE}-worker-token"
WORKER_TOKEN_KEY = "token"
# What `sglab render` shows for the token: `pulumi up` generates the value once per stack.
WORKER_TOKEN_PLACEHOLDER = "<secret: random, generated per stack by pulumi up>"
UI_PLUGIN = "sglab/ui/locust_plugin.py"  # the A/B tab and its login; the master loads it beside the locustfile


def web_service(release: str = RELEASE) -> str:
    return f"{release}-web"


def master_service(release: str = RELEASE) -> str:
    return f"{release}-master"


def port_forward_command(namespace: str, release: str = RELEASE) -> str:
    return f"kubectl port-forward -n {namespace} svc/{web_service(release)} {WEB_PORT}:{WEB_PORT}"


def check_login(stack: StackConfig, stack_name: str, password: Any) -> None:
    """Refuse a login-protected UI without a password (Locust would serve a login nobody can pass)."""
    if stack.locust.enabled and stack.locust.web_login and password is None:
        raise ConfigError(
            stack_path(stack_name), f"sglab:{PASSWORD_CONFIG_KEY}",
            "locust.enabled and locust.web-login are true but no locust-password secret is set",
            f"pulumi config set --secret sglab:{PASSWORD_CONFIG_KEY} <password> --stack {stack_name} "
            "(or set locust.web-login: false to serve the UI without login, port-forward only)")


def chart_values(stack: StackConfig, stack_name: str) -> dict[str, Any]:
    """Values for charts/locust: its whole input."""
    locust = stack.locust
    base, cand = baseline_arm(stack), candidate_arm(stack)
    return {
        "stack": stack_name,
        "partOf": PART_OF,
        "image": {"name": locust.image or stack.project_image, "pullPolicy": stack.image_pull_policy},
        "locustfile": locust.locustfile,
        "uiPlugin": UI_PLUGIN,
        "targets": {
            "baselineUrl": arm_url(stack, "baseline", base.port),
            "candidateUrl": arm_url(stack, "candidate", cand.port),
        },
        "workers": locust.workers,
        "resources": {"cpu": locust.cpu, "memory": locust.memory},
        "service": {"type": locust.service_type},
        "ports": {"web": WEB_PORT, "master": MASTER_PORT},
        "webLogin": {
            "enabled": locust.web_login,
            "username": locust.username,
            "existingSecret": LOGIN_SECRET if locust.web_login else "",
            "secretKey": LOGIN_SECRET_KEY,
        },
        "workerToken": {"env": WORKER_TOKEN_ENV, "existingSecret": WORKER_TOKEN_SECRET, "secretKey": WORKER_TOKEN_KEY},
        "podLabels": dict(stack.network_policy.allowed_from),
        "stackFile": {"configMap": STACK_CONFIGMAP if stack_name else "", "mountPath": STACKS_MOUNT},
        "runAsUser": PROJECT_IMAGE_UID,
        "placement": _placement(stack),
    }


def _placement(stack: StackConfig) -> dict[str, Any]:
    support = support_pod_placement(stack)
    return {"nodeSelector": support.get("nodeSelector", {}), "tolerations": support.get("tolerations", []),
            "priorityClassName": support.get("priorityClassName", ""),
            "imagePullSecrets": list(stack.image_pull_secrets)}


def _pods(role: str, stack_name: str, release: str = RELEASE) -> dict[str, str]:
    """Labels selecting the chart's master or worker pods (of this stack, when it has a name)."""
    labels = {"app.kubernetes.io/name": CHART, "app.kubernetes.io/instance": release,
              "app.kubernetes.io/component": role}
    return {**labels, "sglab/stack": stack_name} if stack_name else labels


def network_policy_manifests(stack: StackConfig, stack_name: str) -> list[dict[str, Any]]:
    """The master admits its worker port only from this stack's workers (the web port from anyone: its
    login guards it); the workers admit nothing. Outside the chart, beside the servers' policy switch."""
    if not stack.network_policy.enabled:
        return []

    def policy(role: str, ingress: list[dict[str, Any]]) -> dict[str, Any]:
        return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                "metadata": {"name": f"{RELEASE}-{role}", "namespace": stack.namespace,
                             "labels": common_labels(stack_name)},
                "spec": {"podSelector": {"matchLabels": _pods(role, stack_name)}, "policyTypes": ["Ingress"],
                         "ingress": ingress}}

    tcp = lambda port: [{"port": port, "protocol": "TCP"}]  # noqa: E731
    return [
        policy("master", [{"ports": tcp(WEB_PORT)},
                          {"from": [{"podSelector": {"matchLabels": _pods("worker", stack_name)}}],
                           "ports": tcp(MASTER_PORT)}]),
        policy("worker", []),
    ]


def login_secret_manifest(stack: StackConfig, stack_name: str, password: Any) -> dict[str, Any] | None:
    """The Secret holding the web UI password (`password` may be a Pulumi Output), or None without login."""
    if not stack.locust.web_login:
        return None
    return secret_manifest(stack, stack_name, LOGIN_SECRET, LOGIN_SECRET_KEY, password)


def worker_token_secret_manifest(stack: StackConfig, stack_name: str, token: Any) -> dict[str, Any]:
    """The Secret both master and workers read SGLAB_WORKER_TOKEN from (`token` may be a Pulumi Output)."""
    return secret_manifest(stack, stack_name, WORKER_TOKEN_SECRET, WORKER_TOKEN_KEY, token)


def new_worker_token() -> Any:
    """A fresh random token, secret in Pulumi's state (kept after the first `pulumi up`: see the component)."""
    return pulumi.Output.secret(secrets.token_urlsafe(32))


def stack_configmap_manifest(stack: StackConfig, stack_name: str) -> dict[str, Any]:
    """The stack file for `locust --stack` (the A/B tab's arms, load plan and policy), secrets as markers."""
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": STACK_CONFIGMAP, "namespace": stack.namespace, "labels": common_labels(stack_name)},
            "data": {f"Pulumi.{stack_name}.yaml": stack_file_text(stack)}}


@dataclass(frozen=True)
class LocustRelease:
    namespace: str
    values: dict[str, Any]
    secret: dict[str, Any] | None
    stack_configmap: dict[str, Any]
    network_policies: list[dict[str, Any]]
    worker_token: dict[str, Any]

    def manifests(self) -> list[dict[str, Any]]:
        """The objects outside the chart (what `sglab render` adds to the chart's own)."""
        return ([m for m in (self.secret, self.worker_token, self.stack_configmap) if m is not None]
                + self.network_policies)


def locust_release(stack: StackConfig, stack_name: str, password: Any,
                   worker_token: Any = WORKER_TOKEN_PLACEHOLDER) -> LocustRelease:
    check_login(stack, stack_name, password)
    return LocustRelease(stack.namespace, chart_values(stack, stack_name),
                         login_secret_manifest(stack, stack_name, password),
                         stack_configmap_manifest(stack, stack_name), network_policy_manifests(stack, stack_name),
                         worker_token_secret_manifest(stack, stack_name, worker_token))


class LocustLoadGenerator(pulumi.ComponentResource):
    """Locust master + workers (charts/locust via helm.v4.Chart), the login Secret and the worker-token Secret."""

    TYPE = "sglab:index:LocustLoadGenerator"

    def __init__(self, name: str, release: LocustRelease, *, foundation: list[pulumi.Resource] | None = None,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        depends: list[pulumi.Resource] = list(foundation or [])
        if release.secret is not None:
            secret = k8s.core.v1.Secret(
                f"{name}-web-login", metadata=release.secret["metadata"], type=release.secret["type"],
                string_data=release.secret["stringData"],
                opts=pulumi.ResourceOptions(parent=self, depends_on=list(depends)))
            depends.append(secret)
        token = release.worker_token
        depends.append(k8s.core.v1.Secret(  # random once: later runs' fresh values are ignored, pods keep theirs
            f"{name}-worker-token", metadata=token["metadata"], type=token["type"], string_data=token["stringData"],
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(foundation or []),
                                        ignore_changes=["stringData"], additional_secret_outputs=["stringData",
                                                                                                   "data"])))
        stack_file = k8s.core.v1.ConfigMap(
            f"{name}-stack", metadata=release.stack_configmap["metadata"], data=release.stack_configmap["data"],
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(foundation or [])))
        depends.append(stack_file)
        for manifest in release.network_policies:  # before the pods exist, so no window without them
            depends.append(k8s.networking.v1.NetworkPolicy(
                manifest["metadata"]["name"], metadata=manifest["metadata"], spec=manifest["spec"],
                opts=pulumi.ResourceOptions(parent=self, depends_on=list(foundation or []))))
        self.chart = k8s.helm.v4.Chart(
            name, chart=str(chart_dir(CHART)), name=RELEASE, namespace=release.namespace, values=release.values,
            opts=pulumi.ResourceOptions(parent=self, depends_on=depends))
        self.web_service = pulumi.Output.from_input(web_service())
        self.port_forward = pulumi.Output.from_input(port_forward_command(release.namespace))
        self.register_outputs({"web_service": self.web_service, "port_forward": self.port_forward})


def build_locust(dep: Any) -> LocustLoadGenerator:
    """Program builder (`dep` is program.Deployment); refuses login without a password."""
    try:
        release = locust_release(dep.stack, dep.stack_name, dep.secrets.get(PASSWORD_CONFIG_KEY), new_worker_token())
    except ConfigError as exc:
        raise pulumi.RunError(str(exc)) from None
    locust = LocustLoadGenerator("locust", release, foundation=dep.foundation())
    dep.export("locust_web_service", locust.web_service)
    dep.export("locust_port_forward", locust.port_forward)
    return locust


# The smallest valid stack, as values.py uses for the server chart's defaults.
_CHART_DEFAULTS_STACK = {
    "model": {"path": "/models/model", "volume": {"kind": "hostPath", "host-path": "/models", "mount-path": "/models"}},
    "server": {"max-running-requests": 48},
    "candidate": {"speculative": {"algorithm": "EAGLE3", "draft-model-path": "/models/draft", "num-steps": 3,
                                  "eagle-topk": 1, "num-draft-tokens": 4}},
    "namespace": "default",
}

VALUES_HEADER = """\
# Default values of the locust chart: Locust master (web UI) + workers driving an sglab A/B pair.
# GENERATED from sglab's config model by `python -m sglab.deploy.locust`; do not edit by hand.
# sglab always passes every value; these defaults serve `helm install` and `helm lint`. With webLogin
# enabled, create the Secret first: kubectl create secret generic sglab-locust-web-login --from-literal=password=...
# Master and workers share a worker token: kubectl create secret generic sglab-locust-worker-token \
#   --from-literal=token="$(openssl rand -hex 32)"
"""


def default_values() -> dict[str, Any]:
    return chart_values(StackConfig.model_validate(_CHART_DEFAULTS_STACK), "")


def values_yaml_text() -> str:
    return to_yaml(default_values(), VALUES_HEADER)


def main() -> int:
    """Regenerate charts/locust/values.yaml (or check it with --check)."""
    return write_or_check({chart_dir(CHART) / "values.yaml": values_yaml_text()}, "python -m sglab.deploy.locust")


if __name__ == "__main__":
    sys.exit(main())
