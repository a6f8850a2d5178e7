"""What a stack deploys, as data: the arm chart releases with their values.

The Pulumi program turns each release into an `SGLangServer` component; `sglab render` feeds the
same releases to the Helm engine. Neither builds values on its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sglab.config.arms import ArmSpec, baseline_arm, candidate_arm
from sglab.config.models import StackConfig
from sglab.deploy.naming import chart_dir, release_name, service_host, service_url
from sglab.deploy.values import chart_values


@dataclass(frozen=True)
class ArmRelease:
    """One arm as a Helm release of charts/sglang-server."""

    arm: ArmSpec
    release: str
    namespace: str
    chart: Path
    values: dict[str, Any]
    timeout_min: int

    @property
    def service_host(self) -> str:
        return service_host(self.namespace, self.arm.role)

    @property
    def url(self) -> str:
        return service_url(self.namespace, self.arm.role, self.arm.port)


def arm_releases(stack: StackConfig, stack_name: str) -> list[ArmRelease]:
    """Baseline then candidate."""
    return [
        ArmRelease(
            arm=arm,
            release=release_name(arm.role),
            namespace=stack.namespace,
            chart=chart_dir(),
            values=chart_values(stack, arm, stack_name=stack_name),
            timeout_min=stack.rollout.pulumi_timeout_min,
        )
        for arm in (baseline_arm(stack), candidate_arm(stack))
    ]
