"""The stack's namespace and the HF cache claim: what `pulumi destroy` may delete, and what it must not.

- `namespace.create: false` (the default of a stack marked production): the namespace is the platform's. The
  program only reads it (`Namespace.get`: Pulumi never deletes a read resource) and checks that its Pod
  Security label admits the stack's pods before any server is touched.
- A namespace the stack creates carries the Pod Security labels its pods meet (below), and
  is kept on `pulumi destroy` (retainOnDelete) while it holds something that must outlive the stack: a PVC of
  weights or the HF cache, benchmark or probe results (deleting a namespace deletes everything in it).
- The HF cache claim the stack creates (sglab:hf-cache without claim-name) is kept on destroy too.

Pod Security Admission: the Pod Security Standard level every pod a stack renders meets, and the namespace
labels that enforce it (https://kubernetes.io/docs/concepts/security/pod-security-standards/).

The level is derived from the settings that decide it (tests/deploy/test_admission.py checks it against the
PSS rules applied to every rendered pod):

- privileged: a hostPath volume (model.volume kind hostPath, placement.rdma host-network's /dev/infiniband), the
  host network, or an added capability other than baseline's (IPC_LOCK for RDMA);
- baseline: a container that may run as root (the server image's own user: `pod-security.run-as-user` unset);
- restricted: otherwise (non-root, no privilege escalation, every capability dropped, seccomp RuntimeDefault,
  only configMap/emptyDir/PVC/projected/secret volumes): the benchmark Job and Locust always are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sglab.config.cluster import PSS_LEVELS, PssLevel
from sglab.config.lints import pinned, stack_images
from sglab.deploy.capacity import NATIVE_SIDECAR
from sglab.config.stack import StackConfig
from sglab.core.errors import ConfigError
from sglab.core.paths import stack_path
from sglab.deploy.naming import BENCH_SERVICE_ACCOUNT, HF_CACHE_CLAIM
from sglab.deploy.objects import common_labels, node_reader

LABEL_PREFIX = "pod-security.kubernetes.io/"
# The PSS version the labels pin: the oldest Kubernetes sglab supports (a pinned version does not tighten under
# the stack when the cluster upgrades; the rules checked are the same from 1.31 to 1.37 for these pods).
PSS_VERSION = "v1.31"


@dataclass(frozen=True)
class Need:
    level: PssLevel
    why: str


def server_needs(stack: StackConfig) -> list[Need]:
    """What the server pods (and the preflight and probe, which run the server image the same way) require."""
    needs: list[Need] = []
    volume = stack.model.volume
    if volume is not None and volume.kind == "hostPath":
        needs.append(Need("privileged", f"model.volume is a hostPath ({volume.host_path})"))
    rdma = stack.placement.rdma
    if rdma is not None:
        needs.append(Need("privileged", "placement.rdma adds the IPC_LOCK capability"))
        if rdma.host_network:
            needs.append(Need("privileged", "placement.rdma.host-network uses the host network and a hostPath "
                                            "/dev/infiniband"))
    if stack.pod_security.run_as_user is None and stack.backend == "sglang":
        needs.append(Need("baseline", "the server image runs as its own user, which may be root "
                                      "(pod-security.run-as-user unset)"))
    return needs


def _rank(level: str) -> int:
    return PSS_LEVELS.index(level)  # type: ignore[arg-type]


def required_level(stack: StackConfig) -> PssLevel:
    """The strictest level every pod of the stack meets."""
    needs = server_needs(stack)
    return max((n.level for n in needs), key=_rank, default="restricted")


def namespace_level(stack: StackConfig, stack_name: str) -> PssLevel:
    """namespace.pod-security, or the required level for auto; a level the pods do not meet is refused."""
    chosen = stack.namespace_spec.pod_security
    needed = required_level(stack)
    if chosen == "auto":
        return needed
    if _rank(chosen) < _rank(needed):
        reasons = "; ".join(n.why for n in server_needs(stack) if _rank(n.level) > _rank(chosen))
        raise ConfigError(stack_path(stack_name), "namespace.pod-security",
                          f"is {chosen}, but the stack's pods need {needed}: {reasons}",
                          f"set namespace.pod-security: {needed} (or auto), or change what needs it")
    return chosen  # type: ignore[return-value]


def namespace_labels(stack: StackConfig, stack_name: str) -> dict[str, str]:
    """enforce and warn at the level the pods meet; audit at restricted, so the audit log says what a stricter
    namespace would need."""
    level = namespace_level(stack, stack_name)
    return {f"{LABEL_PREFIX}enforce": level, f"{LABEL_PREFIX}enforce-version": PSS_VERSION,
            f"{LABEL_PREFIX}warn": level, f"{LABEL_PREFIX}warn-version": PSS_VERSION,
            f"{LABEL_PREFIX}audit": "restricted", f"{LABEL_PREFIX}audit-version": PSS_VERSION}


def existing_namespace_problem(stack: StackConfig, labels: dict[str, str] | None) -> str | None:
    """Why an existing namespace (namespace.create false) would reject the stack's pods, or None."""
    enforced = (labels or {}).get(f"{LABEL_PREFIX}enforce")
    needed = required_level(stack)
    if enforced in PSS_LEVELS and _rank(enforced) < _rank(needed):
        reasons = "; ".join(n.why for n in server_needs(stack) if _rank(n.level) > _rank(enforced))
        return (f"namespace {stack.namespace} enforces the Pod Security Standard {enforced!r}, but the stack's "
                f"pods need {needed!r} ({reasons}), so Kubernetes would refuse to create them; ask the platform "
                f"team for a namespace at {needed}, or change what needs it (docs/deploy.md, \"Admission\")")
    return None


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
    labels = {**common_labels(stack_name), **namespace_labels(stack, stack_name)}
    metadata: dict[str, Any] = {"name": stack.namespace, "labels": labels}
    if keeps_namespace(stack):
        metadata["annotations"] = {"sglab/kept-on-destroy": "; ".join(holds_state(stack)) or "namespace.protect"}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata}

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


def cluster_scoped(stack: StackConfig, stack_name: str) -> list[tuple[str, str, str]]:
    """(kind, name, the key that opted in) of every cluster-scoped object the stack renders: none unless it says
    so (a tenant of a shared cluster may create none; tests/deploy/test_tenancy.py checks it against a render)."""
    found: list[tuple[str, str, str]] = []
    namespace = namespace_manifest(stack, stack_name)
    if namespace is not None:
        found.append(("Namespace", namespace["metadata"]["name"], "namespace.create"))
    if stack.benchmark_job.enabled and stack.benchmark_job.read_node_labels:
        for manifest in node_reader(common_labels(stack_name), stack.namespace, BENCH_SERVICE_ACCOUNT):
            found.append((manifest["kind"], manifest["metadata"]["name"], "benchmark-job.read-node-labels"))
    return found


def tenancy_lines(stack: StackConfig, stack_name: str) -> list[str]:
    """What a platform team checks before admitting the stack: the Pod Security level, the cluster-scoped
    objects, and the priority its pods schedule at."""
    level, needs = namespace_level(stack, stack_name), server_needs(stack)
    why = "; ".join(n.why for n in needs if n.level == level) or "every pod meets it"
    if namespace_manifest(stack, stack_name) is not None:
        lines = [f"pod security: {level} enforced on namespace {stack.namespace} (created by the stack): {why}"]
    else:
        lines = [f"pod security: {level} needed ({why}); the existing namespace {stack.namespace} must admit it "
                 f"(its pod-security.kubernetes.io/enforce label at {level} or looser)"]
    found = cluster_scoped(stack, stack_name)
    if found:
        lines.append(f"cluster-scoped objects ({len(found)}): "
                     + ", ".join(f"{kind} {name} ({key})" for kind, name, key in found))
    else:
        lines.append("cluster-scoped objects: none (every object is in the namespace)")
    if stack.serving is not None:
        keys = stack.serving.api_keys
        lines.append(f"api keys: the servers read --api-key and --admin-api-key from Secret {keys.secret} (keys "
                     f"{keys.api_key_key}, {keys.admin_api_key_key}) in {stack.namespace}; create it before pulumi "
                     "up (docs/production.md)")
    lines.append(images_line(stack))
    if stack.benchmark_runs_guard:
        lines.append(f"kubernetes: {'.'.join(map(str, NATIVE_SIDECAR))} or newer (the benchmark Job's disruption guard "
                     "is a native sidecar; pulumi up reads the API server's version and stops on an older one)")
    priority = stack.placement.priority_class_name
    if priority:
        lines.append(f"priority: {priority} for the servers and the pods beside them; if its value is above other "
                     "tenants' and its preemptionPolicy is PreemptLowerPriority, a pending pod of this stack "
                     f"preempts theirs (kubectl get priorityclass {priority})")
    else:
        lines.append("priority: the cluster's default (no priority class: preempts no other tenant)")
    return lines


def images_line(stack: StackConfig) -> str:
    """Every image the stack's pods run, the keys that set it and how it is pinned (production refuses tags
    unless it accepts them: the lint `image-tag-in-production`)."""
    return "images: " + "; ".join(f"{image} ({', '.join(keys)}): {'pinned by digest' if pinned(image) else 'a tag'}"
                                  for image, keys in stack_images(stack).items())


def declare_namespace(dep: Any) -> None:
    """Create (labelled, kept on destroy when it holds state) or read the stack's namespace."""
    import pulumi  # Pulumi's SDK only where the program runs: validate reads this module without it
    import pulumi_kubernetes as k8s

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
    import pulumi

    labels = (metadata or {}).get("labels") if isinstance(metadata, dict) else getattr(metadata, "labels", None)
    problem = existing_namespace_problem(stack, labels)
    if problem is not None:
        raise pulumi.RunError(problem)
    return True


def declare_hf_cache(dep: Any) -> None:
    import pulumi
    import pulumi_kubernetes as k8s

    manifest = hf_cache_manifest(dep.stack, dep.stack_name)
    if manifest is None:
        return
    dep.hf_cache = k8s.core.v1.PersistentVolumeClaim(
        "hf-cache", metadata=manifest["metadata"], spec=manifest["spec"],
        opts=pulumi.ResourceOptions(depends_on=[dep.namespace] if dep.namespace else [], retain_on_delete=True))
