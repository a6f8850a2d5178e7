"""The project image's name: what `make image` builds and pushes, and what stacks pull by default.

    python -m sglab.deploy.image                      # ghcr.io/sglab-dev/sglab:0.1.0 (sglab:project-image's default)
    python -m sglab.deploy.image --registry ghcr.io/acme   # ghcr.io/acme/sglab:0.1.0 (where `make image` pushes)
    python -m sglab.deploy.image --local              # sglab:0.1.0 (the tag kind/minikube load for the sim stack)

The repository and version are declared once (sglab/config/cluster.py, sglab.__version__); the Makefile asks here.
"""

from __future__ import annotations

import argparse
import re
import sys

from sglab import __version__
from sglab.config.cluster import DEFAULT_PROJECT_IMAGE, PROJECT_IMAGE_REPOSITORY, image_problem
from sglab.core.errors import USAGE

NAME = PROJECT_IMAGE_REPOSITORY.rsplit("/", 1)[1]
_REGISTRY = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?(:[0-9]+)?(/[a-z0-9]([-a-z0-9._]*[a-z0-9])?)*$")


def reference(registry: str | None = None, *, local: bool = False) -> str:
    if local:
        return f"{NAME}:{__version__}"
    if registry is None:
        return DEFAULT_PROJECT_IMAGE
    registry = registry.rstrip("/")
    if not _REGISTRY.match(registry):
        raise ValueError(f"REGISTRY {registry!r} is not a registry path; write it like ghcr.io/<org> or "
                         "registry.example.com:5000/team")
    ref = f"{registry}/{NAME}:{__version__}"
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
