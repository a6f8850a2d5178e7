"""The plain Kubernetes objects outside the charts: the stack's namespace and the HF token Secret.

Returned as manifests so the Pulumi program (typed resources built from the same fields) and
`sglab render` (which prints them) cannot disagree.
"""

from __future__ import annotations

from typing import Any

from sglab.config.models import StackConfig
from sglab.deploy.naming import HF_TOKEN_SECRET, HF_TOKEN_SECRET_KEY, PART_OF

MANAGED_BY = "pulumi"


def common_labels(stack_name: str) -> dict[str, str]:
    return {"app.kubernetes.io/part-of": PART_OF, "app.kubernetes.io/managed-by": MANAGED_BY, "sglab/stack": stack_name}


def namespace_manifest(stack: StackConfig, stack_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": stack.namespace, "labels": common_labels(stack_name)},
    }


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
