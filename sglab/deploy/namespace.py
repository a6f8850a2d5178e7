"""The stack's namespace and the HF cache claim: what `pulumi destroy` may delete, and what it must not.

- `namespace.create: false` (the default of a stack marked production): the namespace is the platform's. The
  program only reads it (`Namespace.get`: Pulumi never deletes a read resource) and checks that its Pod
  Security label admits the stack's pods before any server is touched.
- A namespace the stack creates carries the Pod Security labels its pods meet (sglab/deploy/admission.py), and
  is kept on `pulumi destroy` (retainOnDelete) while it holds something that must outlive the stack: a PVC of
  weights or the HF cache, benchmark or probe results (deleting a namespace deletes everything in it).
- The HF cache claim the stack creates (sglab:hf-cache without claim-name) is kept on destroy too.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from sglab.deploy.admission import existing_namespace_problem
from sglab.deploy.naming import HF_CACHE_CLAIM
from sglab.deploy.objects import common_labels, keeps_namespace, namespace_manifest

EXISTING = "existing-namespace"  # the Pulumi name of a read (never deleted) namespace


def hf_cache_manifest(stack: Any, stack_name: str) -> dict[str, Any] | None:
    """The PersistentVolumeClaim the stack creates for sglab:hf-cache, or None (no cache, or an existing claim)."""
    cache = stack.hf_cache
    if cache is None or cache.claim_name:
        return None
    spec: dict[str, Any] = {"accessModes": list(cache.access_modes), "resources": {"requests": {"storage": cache.size}}}
    if cache.storage_class:
        spec["storageClassName"] = cache.storage_class
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": HF_CACHE_CLAIM, "namespace": stack.namespace, "labels": common_labels(stack_name),
                         # A WaitForFirstConsumer class binds the claim only when a server mounts it: Pulumi must not
                         # wait for Bound before the servers that bind it exist.
                         "annotations": {"sglab/kept-on-destroy": "hub downloads of the model",
                                         "pulumi.com/skipAwait": "true"}},
            "spec": spec}


def declare_namespace(dep: Any) -> None:
    """Create (labelled, kept on destroy when it holds state) or read the stack's namespace."""
    stack = dep.stack
    manifest = namespace_manifest(stack, dep.stack_name)  # raises ConfigError for a pod-security level too strict
    if manifest is None:
        # Another resource name than a created namespace's: a stack that switches to create: false never turns
        # its created Namespace into a read (docs/deploy.md says how to move such a stack over).
        existing = k8s.core.v1.Namespace.get(EXISTING, stack.namespace)
        dep.namespace = existing
        dep.admission = existing.metadata.apply(lambda meta: _admits(stack, meta))
        dep.export("namespace", stack.namespace)
        dep.export("namespace_created", False)
        return
    dep.namespace = k8s.core.v1.Namespace(
        "namespace", metadata=manifest["metadata"],
        opts=pulumi.ResourceOptions(retain_on_delete=keeps_namespace(stack)))
    dep.export("namespace", stack.namespace)
    dep.export("namespace_created", True)


def _admits(stack: Any, metadata: Any) -> bool:
    labels = (metadata or {}).get("labels") if isinstance(metadata, dict) else getattr(metadata, "labels", None)
    problem = existing_namespace_problem(stack, labels)
    if problem is not None:
        raise pulumi.RunError(problem)
    return True


def declare_hf_cache(dep: Any) -> None:
    manifest = hf_cache_manifest(dep.stack, dep.stack_name)
    if manifest is None:
        return
    dep.hf_cache = k8s.core.v1.PersistentVolumeClaim(
        "hf-cache", metadata=manifest["metadata"], spec=manifest["spec"],
        opts=pulumi.ResourceOptions(depends_on=[dep.namespace] if dep.namespace else [], retain_on_delete=True))
