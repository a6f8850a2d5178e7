"""`SGLangServer`: one arm of the pair as a Pulumi component wrapping the local sglang-server chart."""

from __future__ import annotations

from typing import Any, Optional

import pulumi
import pulumi_kubernetes as k8s

from sglab.deploy.plan import ArmRelease


class SGLangServer(pulumi.ComponentResource):
    """One SGLang server (baseline or candidate): the chart release plus what clients need to reach it."""

    TYPE = "sglab:index:SGLangServer"

    def __init__(self, name: str, release: ArmRelease, opts: Optional[pulumi.ResourceOptions] = None, *,
                 values: Any = None) -> None:
        """`values` (default: the release's) may be an Output of them: the chart waits for it to resolve."""
        super().__init__(self.TYPE, name, None, opts)
        self.release = release
        # A large model can take longer to load than the provider's 10-minute default await.
        timeout = f"{release.timeout_min}m"
        self.chart = k8s.helm.v4.Chart(
            name,
            chart=str(release.chart),
            name=release.release,
            namespace=release.namespace,
            values=release.values if values is None else values,
            opts=pulumi.ResourceOptions(
                parent=self,
                custom_timeouts=pulumi.CustomTimeouts(create=timeout, update=timeout, delete="10m"),
            ),
        )
        self.role = release.arm.role
        self.service_host = pulumi.Output.from_input(release.service_host)
        self.port = pulumi.Output.from_input(release.arm.port)
        self.url = pulumi.Output.from_input(release.url)
        self.launch_command = pulumi.Output.from_input(release.arm.launch_command)
        self.config_hash = pulumi.Output.from_input(release.arm.config_hash)
        self.register_outputs({
            "service_host": self.service_host,
            "port": self.port,
            "url": self.url,
            "launch_command": self.launch_command,
            "config_hash": self.config_hash,
        })
