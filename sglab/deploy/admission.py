"""Pod Security Admission: the Pod Security Standard level every pod a stack renders meets, and the namespace
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

from sglab.config.cluster import PSS_LEVELS, PssLevel
from sglab.config.stack import StackConfig
from sglab.core.errors import ConfigError
from sglab.core.paths import stack_path

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
