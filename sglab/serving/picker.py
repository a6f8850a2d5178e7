"""The InferencePool's endpoint picker (`gateway.inference-pool: true`), as serving chart values.

The Gateway API Inference Extension's EPP (`gateway.endpoint-picker.image`, release v1.5.0) is an ext-proc server:
the gateway asks it, for every request, which pod of the pool serves it. What it is told here, from its sources
(`cmd/epp/runner`, `pkg/epp/config/loader`, `pkg/epp/framework/plugins` at v1.5.0):

- scheduling: one profile whose only plugin is `random-picker` (it shuffles the candidates, the ready pods of the
  pool, and takes one). No scorer, no filter: the loader adds a `max-score-picker` only to a profile without a
  picker, and its auto-filled profile (every scorer) only when no profile is given. So a request's length, its
  prefix or a pod's load never choose the pod, and the stable and canary pods get the same mix of requests.
- `passthrough-parser`: the body is not parsed (the default OpenAI parser refuses SGLang's native `/generate`).
- the data layer reads the servers' `/metrics` on their port with SGLang's metric names (`core-metrics-extractor`,
  `defaultEngine: sglang`): `sglang:num_queue_reqs`, `sglang:num_running_reqs`, `sglang:token_usage`. They feed
  the saturation detector, which refuses only sheddable requests (a negative InferenceObjective priority), never
  picks a pod.
- it watches the pool's pods, the pool itself and (where their CRDs exist) InferenceObjectives and
  InferenceModelRewrites, in its own namespace only: a Role, no ClusterRole. Its /metrics (port 9090) would need
  cluster-scoped TokenReviews, so it stays closed, and nothing is admitted to it.
"""

from __future__ import annotations

import json
from typing import Any

from sglab.config.stack import StackConfig
from sglab.deploy.objects import support_pod_placement

EXT_PROC_PORT = 9002  # the EPP's --grpc-port default, which the gateway dials (InferencePool endpointPickerRef)
HEALTH_PORT = 9003  # --grpc-health-port: gRPC health, SERVING once the pool has synced
PICKER_UID = 65532  # the image's distroless:nonroot user
POOL_GROUP = "inference.networking.k8s.io"
OBJECTIVE_GROUP = "inference.networking.x-k8s.io"
READ = ["get", "list", "watch"]


def picker_name(release: str) -> str:
    return f"{release}-epp"


def picker_config() -> dict[str, Any]:
    """The EndpointPickerConfig: a random pick among ready pods, nothing parsed, SGLang's metrics read."""
    return {
        "apiVersion": "inference.networking.x-k8s.io/v1alpha1",
        "kind": "EndpointPickerConfig",
        "plugins": [{"type": "random-picker"}, {"type": "passthrough-parser"}, {"type": "metrics-data-source"},
                    {"type": "core-metrics-extractor", "parameters": {"defaultEngine": "sglang"}}],
        "schedulingProfiles": [{"name": "default", "plugins": [{"pluginRef": "random-picker"}]}],
        "parser": {"pluginRef": "passthrough-parser"},
        "dataLayer": {"sources": [{"pluginRef": "metrics-data-source",
                                   "extractors": [{"pluginRef": "core-metrics-extractor"}]}]},
    }


def _role_rules(pool: str) -> list[dict[str, Any]]:
    return [
        {"apiGroups": [""], "resources": ["pods"], "verbs": READ},
        # its cache lists and watches the pool by a metadata.name field selector, which resourceNames allow
        {"apiGroups": [POOL_GROUP], "resources": ["inferencepools"], "resourceNames": [pool], "verbs": READ},
        # watched where the CRDs are installed; a forbidden watch would keep its cache from syncing
        {"apiGroups": [OBJECTIVE_GROUP], "resources": ["inferenceobjectives", "inferencemodelrewrites"],
         "verbs": READ},
    ]


def _pod_spec(stack: StackConfig, name: str, pool: str) -> dict[str, Any]:
    assert stack.serving is not None
    picker = stack.serving.gateway.endpoint_picker
    health = {"grpc": {"port": HEALTH_PORT, "service": "readiness"}, "periodSeconds": 2}
    return {
        **support_pod_placement(stack),
        "serviceAccountName": name,
        "automountServiceAccountToken": True,  # it reads pods and the pool through the API
        "enableServiceLinks": False,
        # an ext-proc stream lasts as long as the reply it routes: give it the servers' grace
        "terminationGracePeriodSeconds": stack.rollout.termination_grace_period_s,
        "securityContext": {"runAsNonRoot": True, "runAsUser": PICKER_UID, "runAsGroup": PICKER_UID,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{
            "name": "epp",
            "image": picker.image,
            "imagePullPolicy": "IfNotPresent",
            "args": ["--pool-name", pool, "--pool-namespace", stack.namespace, "--pool-group", POOL_GROUP,
                     "--grpc-port", str(EXT_PROC_PORT), "--grpc-health-port", str(HEALTH_PORT),
                     "--tracing=false", "--enable-pprof=false",
                     "--config-text", json.dumps(picker_config(), separators=(",", ":"))],
            "ports": [{"name": "grpc", "containerPort": EXT_PROC_PORT, "protocol": "TCP"},
                      {"name": "grpc-health", "containerPort": HEALTH_PORT, "protocol": "TCP"}],
            "readinessProbe": health,
            "livenessProbe": {"grpc": {"port": HEALTH_PORT, "service": "liveness"}, "initialDelaySeconds": 5,
                              "periodSeconds": 10},
            "resources": {"requests": {"cpu": picker.cpu, "memory": picker.memory},
                          "limits": {"memory": picker.memory}},
            "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}},
        }],
    }


def endpoint_picker_values(stack: StackConfig, release: str, labels: dict[str, str]) -> dict[str, Any]:
    """The chart's `serving.endpointPicker`: its ServiceAccount, Role and binding, the Deployment (one replica,
    Recreate: the EPP keeps per-pool state and runs one active replica), the Service the pool names, and the
    NetworkPolicy that admits the gateway's declared peers to its ext-proc port and nothing else."""
    assert stack.serving is not None
    name = picker_name(release)
    return {
        "name": name,
        "labels": labels,
        "port": EXT_PROC_PORT,
        "rules": _role_rules(release),
        "podSpec": _pod_spec(stack, name, release),
        "peers": [p.policy_peer() for p in stack.serving.gateway.peers],
    }


def pool_spec(stack: StackConfig, release: str, port: int) -> dict[str, Any]:
    """The InferencePool: the serving pods (stable and canary alike) on their port, behind the picker. FailOpen:
    while the picker restarts the gateway picks an endpoint itself rather than failing the request."""
    return {"selector": {"matchLabels": {"app.kubernetes.io/instance": release}},
            "targetPorts": [{"number": port}],
            "endpointPickerRef": {"name": picker_name(release), "port": {"number": EXT_PROC_PORT},
                                  "failureMode": "FailOpen"}}
