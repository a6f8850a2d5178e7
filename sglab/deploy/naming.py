"""Names every deploy component agrees on: chart paths, Helm release names, service DNS, the HF token Secret, and
the project image's reference (what `make image` builds and pushes, and what stacks pull by default).

The Pulumi program, `sglab render` and the in-cluster load generators all use these, so an arm's
address is computed once. The image's repository and version are declared once (sglab/config/cluster.py,
sglab.__version__); the Makefile asks here:

    python -m sglab.deploy.naming                      # ghcr.io/sglab-dev/sglab:0.1.0 (sglab:project-image's default)
    python -m sglab.deploy.naming --registry ghcr.io/acme   # ghcr.io/acme/sglab:0.1.0 (where `make image` pushes)
    python -m sglab.deploy.naming --local              # sglab:0.1.0 (the tag kind/minikube load for the sim stack)
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
from pathlib import Path
from typing import Any

from sglab import __version__
from sglab.config.arms import ArmRole
from sglab.config.cluster import DEFAULT_PROJECT_IMAGE, PROJECT_IMAGE_REPOSITORY, image_problem
from sglab.core.errors import USAGE
from sglab.core.paths import project_root

SERVER_CHART = "sglang-server"
PART_OF = "sglab"
# The benchmark Job's ServiceAccount (its Role, and the opt-in ClusterRole that reads nodes, bind to it).
BENCH_SERVICE_ACCOUNT = "sglab-bench"
HF_TOKEN_SECRET = "sglab-hf-token"
HF_TOKEN_SECRET_KEY = "token"
HF_CACHE_CLAIM = "sglab-hf-cache"  # the claim the stack creates for sglab:hf-cache without claim-name
SECRET_PLACEHOLDER = "<secret: set with pulumi config set --secret sglab:hf-token>"
SECRET_KEYS = ("hf-token", "locust-password")  # stack keys that hold secrets (never written into a ConfigMap)
# A sweep stack's candidates run in fixed slots (sglang-slot-1..parallel-arms): a new wave, or the switch to the
# confirmation A/B, replaces each slot's server in place instead of adding new GPU-holding releases.
SLOT_PREFIX = "sglang-slot-"
ARM_HASH_CHARS = 8
RESULT_CONFIGMAP_FLAG = "--result-configmap"  # `sglab bench`/`sglab sweep`: store the result for the program
PENDING = "pending"  # a stack output while the benchmark Job has stored no result
PROJECT_IMAGE_UID = 10001  # the Dockerfile's USER: Locust, the benchmark Job and the simulator run as it


def chart_dir(chart: str = SERVER_CHART) -> Path:
    """Absolute path of a chart shipped in `charts/` (the Helm provider resolves paths itself).

    Found beside the package (editable install); otherwise in the working directory, which is the
    project directory when Pulumi runs the program.
    """
    beside = project_root() / "charts" / chart
    return beside if beside.is_dir() else (Path.cwd() / "charts" / chart).resolve()


def release_name(role: ArmRole) -> str:
    """Helm release (and Service) name of an arm, e.g. `sglang-candidate`."""
    return f"sglang-{role}"


_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def arm_label(arm_name: str) -> str:
    """A sweep arm's name as a label value: as it is when it is one, else a slug with a hash of the exact name."""
    if len(arm_name) <= 63 and _LABEL_VALUE.match(arm_name):
        return arm_name
    slug = re.sub(r"[^A-Za-z0-9]+", "-", arm_name).strip("-")
    digest = hashlib.sha256(arm_name.encode()).hexdigest()[:ARM_HASH_CHARS]
    return f"{slug[:63 - ARM_HASH_CHARS - 1].rstrip('-')}-{digest}".lstrip("-")


def slot_release_name(slot: int) -> str:
    """Helm release (and Service, and Pulumi resource) name of a sweep stack's candidate slot, e.g. `sglang-slot-2`."""
    return f"{SLOT_PREFIX}{slot}"


def arm_release_name(stack: Any, role: ArmRole) -> str:
    """The release serving an arm of the stack's A/B pair: a sweep stack's candidate (its confirmation A/B) runs in
    its last slot, where a wave's carried leader runs (sweep_arms.leader_slot); every other stack's is
    `sglang-candidate`."""
    sweep = getattr(stack, "sweep", None)
    if role == "candidate" and sweep is not None:
        return slot_release_name(sweep.parallel_arms)
    return release_name(role)


def arm_url(stack: Any, role: ArmRole, port: int) -> str:
    """In-cluster URL of an arm of the stack's A/B pair (what the benchmark Job and Locust dial)."""
    return f"http://{release_host(stack.namespace, arm_release_name(stack, role))}:{port}"


def release_host(namespace: str, release: str) -> str:
    """In-cluster DNS name of a release's Service (the chart names the Service after the release)."""
    return f"{release}.{namespace}.svc.cluster.local"


def service_host(namespace: str, role: ArmRole) -> str:
    """In-cluster DNS name of an arm's Service."""
    return release_host(namespace, release_name(role))


def service_url(namespace: str, role: ArmRole, port: int) -> str:
    return f"http://{service_host(namespace, role)}:{port}"


# The project image.
IMAGE_NAME = PROJECT_IMAGE_REPOSITORY.rsplit("/", 1)[1]
_REGISTRY = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?(:[0-9]+)?(/[a-z0-9]([-a-z0-9._]*[a-z0-9])?)*$")


def reference(registry: str | None = None, *, local: bool = False) -> str:
    if local:
        return f"{IMAGE_NAME}:{__version__}"
    if registry is None:
        return DEFAULT_PROJECT_IMAGE
    registry = registry.rstrip("/")
    if not _REGISTRY.match(registry):
        raise ValueError(f"REGISTRY {registry!r} is not a registry path; write it like ghcr.io/<org> or "
                         "registry.example.com:5000/team")
    ref = f"{registry}/{IMAGE_NAME}:{__version__}"
    problem = image_problem(ref)
    if problem is not None:
        raise ValueError(f"{ref} {problem}; push to a registry the cluster's nodes can pull from")
    return ref


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="print the project image reference")
    parser.add_argument("--registry", help="registry path to push to (e.g. ghcr.io/acme)")
    parser.add_argument("--local", action="store_true", help="the local tag for kind/minikube")
    args = parser.parse_args(argv)
    try:
        print(reference(args.registry or None, local=args.local))
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return USAGE
    return 0


if __name__ == "__main__":
    sys.exit(main())
