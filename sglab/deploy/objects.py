"""The plain Kubernetes objects outside the charts: the stack's namespace and the HF token Secret.

Returned as manifests so the Pulumi program (typed resources built from the same fields) and
`sglab render` (which prints them) cannot disagree.
"""

from __future__ import annotations

from typing import Any

from sglab.config.stack import StackConfig
from sglab.deploy.naming import HF_TOKEN_SECRET, HF_TOKEN_SECRET_KEY, PART_OF

MANAGED_BY = "pulumi"


def common_labels(stack_name: str) -> dict[str, str]:
    return {"app.kubernetes.io/part-of": PART_OF, "app.kubernetes.io/managed-by": MANAGED_BY, "sglab/stack": stack_name}


def creates_namespace(stack: StackConfig) -> bool:
    """namespace.create, unset: yes, except for a stack marked production (the platform owns its namespace)."""
    create = stack.namespace_spec.create
    return create if create is not None else not stack.production


def holds_state(stack: StackConfig) -> list[str]:
    """What in the namespace must outlive the stack (why a namespace the stack creates is kept on destroy)."""
    held = []
    volume = stack.model.volume
    if volume is not None and volume.kind == "pvc":
        held.append(f"the weights' PersistentVolumeClaim {volume.claim_name}")
    if stack.hf_cache is not None:
        held.append("the HF cache PersistentVolumeClaim")
    if stack.benchmark_job.enabled:
        held.append("benchmark results (ConfigMaps)")
    if stack.probe.enabled:
        held.append("NCCL probe results (ConfigMaps)")
    return held


def keeps_namespace(stack: StackConfig) -> bool:
    """namespace.protect, unset: keep a created namespace on `pulumi destroy` when it holds anything of holds_state."""
    protect = stack.namespace_spec.protect
    return protect if protect is not None else bool(holds_state(stack))


def namespace_manifest(stack: StackConfig, stack_name: str) -> dict[str, Any] | None:
    """The Namespace the stack creates (with the Pod Security labels its pods meet), or None for an existing one."""
    if not creates_namespace(stack):
        return None
    from sglab.deploy.admission import namespace_labels

    labels = {**common_labels(stack_name), **namespace_labels(stack, stack_name)}
    metadata: dict[str, Any] = {"name": stack.namespace, "labels": labels}
    if keeps_namespace(stack):
        metadata["annotations"] = {"sglab/kept-on-destroy": "; ".join(holds_state(stack)) or "namespace.protect"}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata}


def hf_token_secret_manifest(stack: StackConfig, stack_name: str, token: Any) -> dict[str, Any] | None:
    """The Secret holding HF_TOKEN, or None when the stack sets no hf-token. `token` may be a Pulumi Output."""
    if stack.hf_token is None:
        return None
    return secret_manifest(stack, stack_name, HF_TOKEN_SECRET, HF_TOKEN_SECRET_KEY, token)


def secret_manifest(stack: StackConfig, stack_name: str, name: str, key: str, value: Any) -> dict[str, Any]:
    """An Opaque Secret with one key in the stack's namespace; `value` may be a Pulumi Output."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {"name": name, "namespace": stack.namespace, "labels": common_labels(stack_name)},
        "stringData": {key: value},
    }
