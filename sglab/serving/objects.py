"""The `serving` chart values of a serving stack (sglab:serving, docs/production.md), derived in one place.

The candidate arm renders as an Argo Rollouts `Rollout` from the same pod template as the benchmarked
Deployment, with its canary steps (sglab/config/serving.py: argo_steps), an AnalysisTemplate whose Job runs
the live judge (`sglab canary` in the project image), the HTTPRoute (or InferencePool and its endpoint picker:
sglab/serving/picker.py), the scraping object and the watch CronJob; the baseline arm stays a Deployment: the
standing control. A stack without sglab:serving gets `{"enabled": false, ...}` and renders exactly as before.
"""

from __future__ import annotations

from typing import Any

from sglab.serving.picker import endpoint_picker_values, pool_spec
from sglab.serving.spec import POD_LABELS, REVISION_LABEL, SHARED_CONFIG_LABEL, SPEC_ENV, judge_spec
from sglab.config.arms import ArmSpec, baseline_arm, build_arm
from sglab.config.stack import StackConfig
from sglab.config.serving import Serving, argo_steps, control_mirror_percent
from sglab.deploy.objects import support_pod_placement
from sglab.deploy.naming import PROJECT_IMAGE_UID, release_name
from sglab.serving.follow import FOLLOWER, SCHEDULE as FOLLOW_SCHEDULE
from sglab.sglang.client import ADMIN_API_KEY_ENV, API_KEY_ENV

GATEWAY_PLUGIN = "argoproj-labs/gatewayAPI"
JUDGE_METRIC = "live-judge"
# Past the judge's own deadline (max-windows x window-s, plus the first window's wait), so the judge ends
# with its own `abort` and evidence rather than the Job's DeadlineExceeded.
JUDGE_SLACK_S = 300
TMP_SIZE = "1Gi"  # the judge's and the watch's /tmp, requested as ephemeral storage
FOLLOWER_MEMORY = "256Mi"  # the control's follower: the Kubernetes client and two objects
OFF = {"enabled": False, "workload": "Deployment", "replicas": 1}


TOKEN_DIR, CA_DIR = "/var/run/sglab/prometheus-token", "/var/run/sglab/prometheus-ca"


def _prometheus_credentials(serving: Serving) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """The judge spec's credential files, and the volumes and mounts that put them there."""
    mon = serving.monitoring
    spec: dict[str, Any] = {}
    volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    if mon.bearer_token_secret is not None:
        ref = mon.bearer_token_secret
        spec["prometheus_bearer_token_file"] = f"{TOKEN_DIR}/{ref.key}"
        volumes.append({"name": "prometheus-token", "secret": {"secretName": ref.name,
                                                               "items": [{"key": ref.key, "path": ref.key}]}})
        mounts.append({"name": "prometheus-token", "mountPath": TOKEN_DIR, "readOnly": True})
    if mon.ca_configmap is not None:
        ref = mon.ca_configmap
        spec["prometheus_ca_file"] = f"{CA_DIR}/{ref.key}"
        volumes.append({"name": "prometheus-ca", "configMap": {"name": ref.name,
                                                               "items": [{"key": ref.key, "path": ref.key}]}})
        mounts.append({"name": "prometheus-ca", "mountPath": CA_DIR, "readOnly": True})
    return spec, volumes, mounts


def _restricted_pod(stack: StackConfig, container: dict[str, Any], *, service_account: str | None = None
                    ) -> dict[str, Any]:
    """A pod of the project image that reads Prometheus and nothing else (no API token, read-only root), or with
    a service account the API and not Prometheus (the control's follower), placed as the stack's other CPU-only
    pods (pull secrets, tolerations, priority, off the GPU nodes)."""
    assert stack.serving is not None
    volumes, mounts = ([], []) if service_account else _prometheus_credentials(stack.serving)[1:]
    account = ({"serviceAccountName": service_account, "automountServiceAccountToken": True} if service_account
               else {"automountServiceAccountToken": False})
    return {
        **support_pod_placement(stack),
        "restartPolicy": "Never",
        **account,
        "enableServiceLinks": False,
        "securityContext": {"runAsNonRoot": True, "runAsUser": PROJECT_IMAGE_UID, "runAsGroup": PROJECT_IMAGE_UID,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{**container, "securityContext": {
            "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"}},
            "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}, *mounts]}],
        "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": TMP_SIZE}}, *volumes],
    }


def _judge_container(stack: StackConfig, spec_json: str, name: str, args: list[str]) -> dict[str, Any]:
    serving = stack.serving
    assert serving is not None
    return {
        "name": name,
        "image": stack.project_image,
        "imagePullPolicy": stack.image_pull_policy,
        "command": ["sglab", *args],
        "env": [{"name": SPEC_ENV, "value": spec_json}, {"name": "HOME", "value": "/tmp"}],
        "resources": {"requests": {"cpu": serving.judge_cpu, "memory": serving.judge_memory,
                                   "ephemeral-storage": TMP_SIZE},
                      "limits": {"memory": serving.judge_memory}},
    }


def _pod_labels(stack_name: str, component: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": "sglab-" + component, "app.kubernetes.io/component": component,
            "app.kubernetes.io/part-of": "sglab", "sglab/stack": stack_name}


def analysis_template(stack: StackConfig, stack_name: str, spec_json: str) -> dict[str, Any]:
    """One Job metric: `sglab canary` looks every window until it decides. Exit 0 (promote) completes the Job
    (Successful); abort (1), continue at its deadline (3) or bad input (2) fail it (Failed: Argo aborts)."""
    serving = stack.serving
    assert serving is not None
    judge = serving.canary
    deadline = (judge.max_windows + 1) * judge.window_s + JUDGE_SLACK_S
    container = _judge_container(stack, spec_json, "judge", [
        "canary", "--from-env", "--stable-hash", "{{args.stable-hash}}", "--canary-hash", "{{args.canary-hash}}"])
    return {
        "args": [{"name": "stable-hash"}, {"name": "canary-hash"}],
        "metrics": [{
            "name": JUDGE_METRIC, "count": 1, "failureLimit": 0,
            "provider": {"job": {
                "metadata": {"labels": _pod_labels(stack_name, "canary-judge")},
                "spec": {"backoffLimit": 0, "activeDeadlineSeconds": deadline,
                         "ttlSecondsAfterFinished": serving.finished_job_ttl_s,
                         "template": {"metadata": {"labels": _pod_labels(stack_name, "canary-judge")},
                                      "spec": _restricted_pod(stack, container)}}}},
        }],
    }


def control_follower(stack: StackConfig, stack_name: str, release: str) -> dict[str, Any]:
    """The CronJob that moves the standing control to the stable revision's config (sglab/serving/follow.py),
    with a Role that reads the Rollout and reads and patches the control's Deployment, by name."""
    serving = stack.serving
    assert serving is not None
    name, control = FOLLOWER, release_name("baseline")
    container = {
        "name": "follower", "image": stack.project_image, "imagePullPolicy": stack.image_pull_policy,
        "command": ["python", "-m", "sglab.serving.follow", "--rollout", release, "--control", control,
                    "--namespace", stack.namespace, "--stack", stack_name],
        "env": [{"name": "HOME", "value": "/tmp"}],
        "resources": {"requests": {"cpu": "100m", "memory": FOLLOWER_MEMORY, "ephemeral-storage": TMP_SIZE},
                      "limits": {"memory": FOLLOWER_MEMORY}},
    }
    labels = _pod_labels(stack_name, "control-follower")
    return {
        "name": name, "labels": labels, "schedule": FOLLOW_SCHEDULE,
        "rules": [{"apiGroups": ["argoproj.io"], "resources": ["rollouts"], "resourceNames": [release],
                   "verbs": ["get"]},
                  {"apiGroups": ["apps"], "resources": ["deployments"], "resourceNames": [control],
                   "verbs": ["get", "patch"]}],
        "jobSpec": {"backoffLimit": 0, "activeDeadlineSeconds": 300,
                    "ttlSecondsAfterFinished": serving.finished_job_ttl_s,
                    "template": {"metadata": {"labels": labels},
                                 "spec": _restricted_pod(stack, container, service_account=name)}},
    }


def server_api_keys(stack: StackConfig) -> tuple[list[str], list[dict[str, str]]]:
    """The servers' key flags and the env they read them from: each flag's value is a `$(VAR)` reference the
    kubelet expands from the Secret, so no key is in the stack, the chart values or a rendered object."""
    if stack.serving is None:
        return [], []
    keys = stack.serving.api_keys
    pairs = (("--api-key", API_KEY_ENV, keys.api_key_key),
             ("--admin-api-key", ADMIN_API_KEY_ENV, keys.admin_api_key_key))
    args = [a for flag, env, _ in pairs for a in (flag, f"$({env})")]
    env = [{"name": env, "secretName": keys.secret, "secretKey": key} for _, env, key in pairs]
    return args, env


def _backend(name: str, port: int, weight: int) -> dict[str, Any]:
    return {"name": name, "port": port, "weight": weight}


def http_route(serving: Serving, release: str, port: int, control_port: int) -> dict[str, Any]:
    """Gateway -> the serving backends (stable + canary Services, whose weights Argo's plugin sets; or the one
    Service / InferencePool of all serving pods). The standing control gets no backendRef weight: a copy of one
    stable pod's share of requests (`RequestMirror`, the gateway drops its responses), so a control with no
    ready pod (a restart, a drain, a new image loading) fails no request."""
    gw = serving.gateway
    parent: dict[str, Any] = {"name": gw.name, "namespace": gw.namespace}
    if gw.section_name:
        parent["sectionName"] = gw.section_name
    if gw.inference_pool:
        refs = [{"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": release, "weight": 100}]
    elif serving.traffic_router == "gateway-api":
        refs = [_backend(f"{release}-stable", port, 100), _backend(f"{release}-canary", port, 0)]
    else:
        refs = [_backend(release, port, 100)]
    rule: dict[str, Any] = {
        # the declared inference paths only: SGLang serves its control endpoints on the same port
        "matches": [{"path": {"type": p.match, "value": p.path}} for p in gw.paths],
        "backendRefs": refs, "timeouts": {"request": f"{gw.request_timeout_s}s"}}
    if serving.control.replicas:
        rule["filters"] = [{"type": "RequestMirror", "requestMirror": {
            "backendRef": {"name": release_name("baseline"), "port": control_port},
            "percent": control_mirror_percent(serving)}}]
    spec: dict[str, Any] = {"parentRefs": [parent], "rules": [rule]}
    if gw.hostnames:
        spec["hostnames"] = list(gw.hostnames)
    return spec


def _strategy(stack: StackConfig, release: str, analysis_name: str) -> dict[str, Any]:
    serving = stack.serving
    assert serving is not None
    analysis = {"templates": [{"templateName": analysis_name}],
                "args": [{"name": "stable-hash", "valueFrom": {"podTemplateHashValue": "Stable"}},
                         {"name": "canary-hash", "valueFrom": {"podTemplateHashValue": "Latest"}}]}
    canary: dict[str, Any] = {
        "canaryMetadata": {"labels": {REVISION_LABEL: "canary"}},
        "stableMetadata": {"labels": {REVISION_LABEL: "stable"}},
        "steps": argo_steps(serving, analysis=analysis),
    }
    if serving.traffic_router == "gateway-api":
        canary.update({
            "canaryService": f"{release}-canary", "stableService": f"{release}-stable",
            # the stable keeps every pod until the canary is promoted: an abort has nothing to reload
            "dynamicStableScale": False, "scaleDownDelaySeconds": serving.scale_down_delay_s,
            "trafficRouting": {"plugins": {GATEWAY_PLUGIN: {"httpRoute": release, "namespace": stack.namespace}}},
        })
    else:
        canary.update({"maxSurge": serving.max_surge, "maxUnavailable": 0})
    return {"canary": canary}


def _scrape(serving: Serving) -> dict[str, Any]:
    mon = serving.monitoring
    kinds = {"pod-monitor": "PodMonitor", "service-monitor": "ServiceMonitor", "annotations": ""}
    return {"kind": kinds[mon.scrape], "interval": f"{mon.interval_s}s", "labels": dict(mon.labels),
            "podTargetLabels": list(POD_LABELS)}


def shared_config(stack: StackConfig, arm: ArmSpec) -> str:
    """The arm's server with speculation left out (image, server flags, env, NCCL), hashed to a label value: the
    control is the serving config without speculation only where both carry the same (sglab/serving/watch.py)."""
    return build_arm(stack, speculative=False, with_confounds=arm.role == "candidate").config_hash[:16]


def serving_values(stack: StackConfig, arm: ArmSpec, *, stack_name: str) -> dict[str, Any]:
    """The chart's `serving` block for one arm (OFF for a stack without sglab:serving)."""
    serving = stack.serving
    if serving is None:
        return dict(OFF)
    common: dict[str, Any] = {
        "enabled": True,
        # the gateway's data plane and Prometheus (scraping /metrics on the same port), as declared
        "peers": [p.policy_peer() for p in [*serving.gateway.peers, *serving.monitoring.peers]],
        "scrape": _scrape(serving),
        "podLabels": {SHARED_CONFIG_LABEL: shared_config(stack, arm)},
        "podAnnotations": ({"prometheus.io/scrape": "true", "prometheus.io/port": str(arm.port),
                            "prometheus.io/path": "/metrics"} if serving.monitoring.scrape == "annotations" else {}),
    }
    if arm.role == "baseline":  # the standing control: its template changes only through the follower
        return {**common, "workload": "Deployment", "replicas": serving.control.replicas,
                "follow": bool(serving.control.replicas)}
    release = release_name("candidate")
    picker_labels = _pod_labels(stack_name, "endpoint-picker") if serving.gateway.inference_pool else {}
    if picker_labels:  # the pool's picker reads the servers' /metrics, on their port
        common["peers"] = [*common["peers"], {"podSelector": {"matchLabels": picker_labels}}]
    analysis_name = f"{release}-{JUDGE_METRIC}"
    spec_json = judge_spec(stack, stack_name, overrides=_prometheus_credentials(serving)[0]).to_env()
    startup_s = stack.rollout.startup_timeout_min * 60
    watch = None
    if serving.watch.enabled and serving.control.replicas:
        watch = {"schedule": serving.watch.schedule, "jobSpec": {
            "backoffLimit": 0, "activeDeadlineSeconds": 600, "ttlSecondsAfterFinished": serving.finished_job_ttl_s,
            "template": {"metadata": {"labels": _pod_labels(stack_name, "watch")},
                         "spec": _restricted_pod(stack, _judge_container(stack, spec_json, "watch",
                                                                  ["watch", "--from-env"]))}}}
    return {
        **common,
        "workload": "Rollout",
        "replicas": serving.replicas,
        "rollout": {
            "strategy": _strategy(stack, release, analysis_name),
            "revisionHistoryLimit": max(2, serving.rollback_window_revisions),
            "rollbackWindow": {"revisions": serving.rollback_window_revisions},
            # a canary pod that cannot load in time aborts the rollout (stable keeps serving) instead of waiting
            "progressDeadlineSeconds": startup_s + 600,
        },
        "trafficServices": serving.traffic_router == "gateway-api" and not serving.gateway.inference_pool,
        "analysisTemplate": {"name": analysis_name, "spec": analysis_template(stack, stack_name, spec_json)},
        "httpRoute": {"name": release, "spec": http_route(serving, release, arm.port, baseline_arm(stack).port)},
        **({"inferencePool": {"name": release, "spec": pool_spec(stack, release, arm.port)},
            "endpointPicker": endpoint_picker_values(stack, release, picker_labels)} if picker_labels else {}),
        **({"watch": watch} if watch else {}),
        **({"follower": control_follower(stack, stack_name, release)} if serving.control.replicas else {}),
    }
