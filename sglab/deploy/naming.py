"""Names every deploy component agrees on: chart paths, Helm release names, service DNS, the HF token Secret.

The Pulumi program, `sglab render` and the in-cluster load generators all use these, so an arm's
address is computed once.
"""

from __future__ import annotations

from pathlib import Path

from sglab.config.arms import ArmRole
from sglab.config.loader import project_root

SERVER_CHART = "sglang-server"
PART_OF = "sglab"
HF_TOKEN_SECRET = "sglab-hf-token"
HF_TOKEN_SECRET_KEY = "token"
SECRET_PLACEHOLDER = "<secret: set with pulumi config set --secret sglab:hf-token>"
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


def service_host(namespace: str, role: ArmRole) -> str:
    """In-cluster DNS name of an arm's Service."""
    return f"{release_name(role)}.{namespace}.svc.cluster.local"


def service_url(namespace: str, role: ArmRole, port: int) -> str:
    return f"http://{service_host(namespace, role)}:{port}"
