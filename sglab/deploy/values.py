"""Chart values for one arm, derived from the stack config in one place.

Both the Pulumi program and `sglab render` call `chart_values`, so what is rendered is what is applied.
Every value the chart reads is passed explicitly: the chart's own `values.yaml` is generated from this
module (`python -m sglab.deploy.values`) and never consulted by sglab.
"""

from __future__ import annotations

import sys
from io import StringIO
from typing import Any

from ruamel.yaml import YAML

from sglab.config.arms import ArmSpec, baseline_arm
from sglab.config.stack import StackConfig
from sglab.config.placement import Toleration
from sglab.deploy.naming import (HF_CACHE_CLAIM, arm_label, HF_TOKEN_SECRET, HF_TOKEN_SECRET_KEY, PART_OF,
                                 PROJECT_IMAGE_UID, chart_dir)
from sglab.deploy.objects import toleration_manifest
from sglab.serving.objects import server_api_keys, serving_values
from sglab.core.paths import write_or_check


def _toleration(tol: Toleration) -> dict[str, Any]:
    return toleration_manifest(tol)


def _model_volume(stack: StackConfig) -> dict[str, Any]:
    volume = stack.model.volume
    if volume is None:
        return {"kind": "none", "hostPath": "", "claimName": "", "mountPath": ""}
    return {
        "kind": volume.kind,
        "hostPath": volume.host_path or "",
        "claimName": volume.claim_name or "",
        "mountPath": volume.mount_path,
    }


def guaranteed_qos(stack: StackConfig) -> bool:
    """resources.guaranteed, unset: on for a benchmark stack, off for one marked production or one that sets its
    own cpu-limit."""
    res = stack.resources
    return res.guaranteed if res.guaranteed is not None else not stack.production and res.cpu_limit is None


def _resources(stack: StackConfig) -> dict[str, str]:
    """Requests as the stack sets them, else sized per GPU of the node. The CPU limit is the request with
    Guaranteed QoS (whole cores under the static CPU manager), else none unless cpu-limit asks for one."""
    res, gpus = stack.resources, stack.placement.gpus_per_node
    cpu = res.cpu or (str(res.cpu_per_gpu * gpus) if gpus else "")
    return {
        "cpu": cpu,
        "memory": res.memory or (f"{res.memory_per_gpu_gi * gpus}Gi" if gpus else ""),
        "cpuLimit": cpu if guaranteed_qos(stack) else (res.cpu_limit or ""),
    }


def _rdma(stack: StackConfig) -> dict[str, Any]:
    rdma = stack.placement.rdma
    if rdma is None:
        return {"enabled": False, "resource": "", "count": 0, "networks": [], "hostNetwork": False}
    return {"enabled": True, "resource": rdma.resource or "", "count": rdma.count, "networks": list(rdma.networks),
            "hostNetwork": rdma.host_network}


def _hf_cache(stack: StackConfig) -> dict[str, Any]:
    cache = stack.hf_cache
    if cache is None:
        return {"enabled": False, "claimName": "", "mountPath": ""}
    return {"enabled": True, "claimName": cache.claim_name or HF_CACHE_CLAIM, "mountPath": cache.mount_path}


def _security(stack: StackConfig) -> dict[str, Any]:
    security = stack.pod_security
    run_as = security.run_as_user
    if run_as is None and stack.backend == "sim":
        run_as = PROJECT_IMAGE_UID  # the simulator runs from the project image, whose user is known
    return {
        "runAsUser": run_as if run_as is not None else "",
        "readOnlyRootFilesystem": security.read_only_root_filesystem,
        "writablePaths": list(security.writable_paths),
        "writableSizeLimit": security.writable_size_limit,
        # a simulator writes next to nothing, and requests nothing else either (it fits a laptop's kind cluster)
        "ephemeralStorage": security.writable_storage if stack.backend != "sim" else "",
    }


def chart_values(stack: StackConfig, arm: ArmSpec, *, stack_name: str, arm_name: str = "") -> dict[str, Any]:
    """Values for `charts/sglang-server` rendering `arm` of `stack`: the chart's whole input. `arm_name` is a
    sweep arm's name (the identity of what a slot serves: label and annotation sglab/arm-name)."""
    rollout = stack.rollout
    return {
        "arm": arm.role,
        "armName": arm_name,
        "armLabel": arm_label(arm_name) if arm_name else "",
        "stack": stack_name,
        "partOf": PART_OF,
        "configHash": arm.config_hash,
        "image": {"name": arm.image, "pullPolicy": stack.image_pull_policy},
        "imagePullSecrets": list(stack.image_pull_secrets),
        "command": list(arm.command),
        "args": [*arm.args, *server_api_keys(stack)[0]],
        "port": arm.port,
        "env": [{"name": k, "value": v} for k, v in arm.env.items()],
        "secretEnv": [
            *({"name": name, "secretName": HF_TOKEN_SECRET, "secretKey": HF_TOKEN_SECRET_KEY}
              for name in arm.secret_env),
            *server_api_keys(stack)[1],
        ],
        "nodes": stack.placement.nodes,
        "gpus": stack.placement.gpus_per_node,
        "resources": _resources(stack),
        "shmSize": stack.resources.shm_size,
        "modelVolume": _model_volume(stack),
        "probes": {
            "periodSeconds": rollout.probe_period_s,
            "timeoutSeconds": rollout.probe_timeout_s,
            "startupFailureThreshold": rollout.startup_failure_threshold,
            "readinessPath": rollout.readiness_path,
            "livenessPath": rollout.liveness_path,
            "livenessFailureThreshold": rollout.liveness_failure_threshold,
        },
        "termination": {"gracePeriodSeconds": rollout.termination_grace_period_s,
                        "preStopDrainSeconds": rollout.pre_stop_drain_s},
        "awaitTimeoutSeconds": rollout.pulumi_timeout_min * 60,
        "progressDeadlineSeconds": rollout.progress_deadline_s,
        "nodeSelector": dict(stack.placement.node_selector),
        "tolerations": [_toleration(t) for t in stack.placement.tolerations],
        "priorityClassName": stack.placement.priority_class_name or "",
        "runtimeClassName": stack.placement.runtime_class_name or "",
        "kueueQueue": stack.placement.kueue_queue or "",
        "antiAffinity": {"enabled": stack.placement.separate_nodes},
        "networkPolicy": {
            "enabled": stack.network_policy.enabled,
            # A list, not a map: Helm would merge a map with the chart's default labels instead of replacing it.
            "allowedFrom": [dict(stack.network_policy.allowed_from)],
        },
        "podDisruptionBudget": {
            "enabled": stack.disruption_budget.enabled,
            "maxUnavailable": stack.disruption_budget.max_unavailable,
        },
        "security": _security(stack),
        "rdma": _rdma(stack),
        "hfCache": _hf_cache(stack),
        "serving": serving_values(stack, arm, stack_name=stack_name),  # sglab:serving (sglab/serving/objects.py)
    }


# The smallest valid stack: the model's defaults plus placeholders for the keys that have none.
_CHART_DEFAULTS_STACK = {
    "model": {"path": "/models/model", "volume": {"kind": "hostPath", "host-path": "/models", "mount-path": "/models"}},
    "server": {"max-running-requests": 48},
    "candidate": {"speculative": {"algorithm": "EAGLE3", "draft-model-path": "/models/draft", "num-steps": 3,
                                  "eagle-topk": 1, "num-draft-tokens": 4}},
}

VALUES_HEADER = """\
# Default values of the sglang-server chart: one SGLang server (one arm of an sglab A/B pair).
# GENERATED from sglab's config model (sglab/config/) by `python -m sglab.deploy.values`;
# do not edit by hand. sglab itself always passes every value; these defaults serve `helm install`
# users and `helm lint`. The model path below is a placeholder: set args to your own server flags
# (see examples/ and docs/deploy.md).
"""


def default_values() -> dict[str, Any]:
    """The chart's default values: the baseline arm of the smallest valid stack."""
    stack = StackConfig.model_validate(_CHART_DEFAULTS_STACK)
    values = chart_values(stack, baseline_arm(stack), stack_name="")
    values["configHash"] = ""
    return values


def to_yaml(values: dict[str, Any], header: str = "") -> str:
    yaml = YAML()
    yaml.default_flow_style = False
    yaml.width = 4096
    buf = StringIO()
    buf.write(header)
    yaml.dump(values, buf)
    return buf.getvalue()


def values_yaml_text() -> str:
    return to_yaml(default_values(), VALUES_HEADER)


EXAMPLE_STACK = "eagle-nccl-ll"
EXAMPLE_FILE = "eagle3-candidate.yaml"
EXAMPLE_HEADER = """\
# The EAGLE-3 candidate of stack eagle-nccl-ll, for installing the chart by hand:
#   helm install sglang-candidate charts/sglang-server -n my-ns --create-namespace -f {path}
# GENERATED by `python -m sglab.deploy.values` from stacks/Pulumi.eagle-nccl-ll.yaml; do not edit.
# For a gated model, create a Secret and add to secretEnv:
#   - {{name: HF_TOKEN, secretName: sglab-hf-token, secretKey: token}}
"""


def example_values_text() -> str:
    """A complete values file for `helm install` users: one arm of a shipped stack."""
    from sglab.config.arms import candidate_arm
    from sglab.config.loader import load_stack
    from sglab.core.paths import project_root

    stack = load_stack(EXAMPLE_STACK, project_root()).config
    values = chart_values(stack, candidate_arm(stack), stack_name="")
    return to_yaml(values, EXAMPLE_HEADER.format(path=f"charts/sglang-server/examples/{EXAMPLE_FILE}"))


def generated_files() -> dict[str, str]:
    """Chart files generated from the config model: path -> content."""
    return {
        str(chart_dir() / "values.yaml"): values_yaml_text(),
        str(chart_dir() / "examples" / EXAMPLE_FILE): example_values_text(),
    }


def main() -> int:
    """Regenerate the chart's values.yaml and example values (or check them with --check)."""
    return write_or_check(generated_files(), "python -m sglab.deploy.values")


if __name__ == "__main__":
    sys.exit(main())
