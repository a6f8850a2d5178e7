"""What a stack deploys: the arm chart releases with their values, as data, and `SGLangServer`, the Pulumi
component that deploys one.

The Pulumi program turns each release into an `SGLangServer` component; `sglab render` feeds the
same releases to the Helm engine. Neither builds values on its own. A sweep stack with
`sglab:sweep.wave` set deploys the baseline and that wave's candidates (sglab/sweep/arms.py)
instead of its own candidate; the baseline's release is the same in every wave.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import pulumi
import pulumi_kubernetes as k8s

from sglab.config.arms import ArmSpec, baseline_arm, candidate_arm
from sglab.config.stack import StackConfig
from sglab.deploy.naming import arm_release_name, chart_dir, release_host, release_name
from sglab.sweep.arms import HOSTNAME_LABEL, plan_wave, slot_node
from sglab.deploy.values import chart_values
from sglab.serving.follow import NEXT_TEMPLATE
from sglab.serving.objects import GATEWAY_PLUGIN

# The chart's HTTPRoute as Pulumi registers it (a custom resource: kubernetes:<apiVersion>:<kind>)
HTTP_ROUTE_TYPE = "kubernetes:gateway.networking.k8s.io/v1:HTTPRoute"
# Every backendRef weight of every rule, in Pulumi's property-path syntax (`[*]`: each element)
ROUTE_WEIGHTS = "spec.rules[*].backendRefs[*].weight"
DEPLOYMENT_TYPE = "kubernetes:apps/v1:Deployment"
CONTROL_TEMPLATE = "spec.template"  # the standing control's pod template: the follower's to write


@dataclass(frozen=True)
class ArmRelease:
    """One arm as a Helm release of charts/sglang-server; `resource` is its Pulumi resource name (a sweep stack's
    slot name, so the same slot is the same resource in every wave and in the confirmation)."""

    arm: ArmSpec
    release: str
    namespace: str
    chart: Path
    values: dict[str, Any]
    timeout_min: int
    resource: str = ""
    nodes: int = 1  # the nodes (whole GPU nodes when gpus > 0) one server holds
    gpus_per_node: int = 0

    @property
    def service_host(self) -> str:
        return release_host(self.namespace, self.release)

    @property
    def url(self) -> str:
        return f"http://{self.service_host}:{self.arm.port}"


def arm_release(stack: StackConfig, arm: ArmSpec, stack_name: str, release: str, resource: str = "",
                arm_name: str = "") -> ArmRelease:
    return ArmRelease(arm=arm, release=release, namespace=stack.namespace, chart=chart_dir(),
                      values=chart_values(stack, arm, stack_name=stack_name, arm_name=arm_name),
                      timeout_min=stack.rollout.pulumi_timeout_min, resource=resource or release,
                      nodes=stack.placement.nodes, gpus_per_node=stack.placement.gpus_per_node)


def arm_releases(stack: StackConfig, stack_name: str) -> list[ArmRelease]:
    """Baseline then candidate; for a sweep wave, baseline then the wave's arms (the carried leader last). A sweep
    stack's candidate (its confirmation A/B) runs in the leader slot, where a wave's carried leader runs."""
    base = arm_release(stack, baseline_arm(stack), stack_name, release_name("baseline"), "baseline")
    wave = plan_wave(stack, stack_name)
    if wave is None:
        release = arm_release_name(stack, "candidate")
        resource = "candidate" if release == release_name("candidate") else release
        return [base, arm_release(stack, candidate_arm(stack), stack_name, release, resource)]
    return [base, *(_pinned(stack, arm_release(stack, a.arm.arm, stack_name, a.release, arm_name=a.arm.name))
                    for a in wave.arms)]


def _pinned(stack: StackConfig, release: ArmRelease) -> ArmRelease:
    """A wave's slot on its calibrated node (sweep.slot-nodes): a required node constraint in its chart values."""
    node = slot_node(stack, release.release)
    if node is None:
        return release
    values = {**release.values, "nodeSelector": {**release.values["nodeSelector"], HOSTNAME_LABEL: node}}
    return ArmRelease(release.arm, release.release, release.namespace, release.chart, values, release.timeout_min,
                      release.resource, release.nodes, release.gpus_per_node)


def leave_route_weights_to_argo(args: pulumi.ResourceTransformArgs) -> Optional[pulumi.ResourceTransformResult]:
    """A chart transform: the HTTPRoute ignores changes to its backendRefs weights, which Argo Rollouts' Gateway API
    plugin sets during a canary. Pulumi creates the route with the chart's weights and never writes them again, so a
    `pulumi up` mid-canary has no weight diff to apply (docs/production.md, "Limits"). Any other kind: untouched."""
    if args.type_ != HTTP_ROUTE_TYPE:
        return None
    return pulumi.ResourceTransformResult(
        args.props, pulumi.ResourceOptions.merge(args.opts, pulumi.ResourceOptions(ignore_changes=[ROUTE_WEIGHTS])))


def leave_control_template_to_follower(args: pulumi.ResourceTransformArgs
                                       ) -> Optional[pulumi.ResourceTransformResult]:
    """A chart transform: the standing control's Deployment ignores changes to its pod template. Pulumi creates it
    with its template, then writes only the next one, as the annotation the follower (sglab/serving/follow.py)
    copies in once the stable revision runs the same shared config: `pulumi up` never moves the control ahead of
    the stable. Any other object (a Deployment without that annotation included): untouched."""
    metadata = args.props.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    if args.type_ != DEPLOYMENT_TYPE or not isinstance(annotations, dict) or NEXT_TEMPLATE not in annotations:
        return None
    return pulumi.ResourceTransformResult(
        args.props, pulumi.ResourceOptions.merge(args.opts, pulumi.ResourceOptions(ignore_changes=[CONTROL_TEMPLATE])))


def chart_transforms(values: dict[str, Any]) -> list[pulumi.ResourceTransform]:
    """What the chart's objects leave to another manager: the route's weights to Argo, the control's template to
    its follower."""
    transforms: list[pulumi.ResourceTransform] = []
    if argo_sets_route_weights(values):
        transforms.append(leave_route_weights_to_argo)
    if values.get("serving", {}).get("follow"):
        transforms.append(leave_control_template_to_follower)
    return transforms


def argo_sets_route_weights(values: dict[str, Any]) -> bool:
    """Whether the chart's Rollout routes its canary through its HTTPRoute with the Gateway API plugin (with
    `traffic-router: replicas` Argo never writes the route, and an A/B arm renders none)."""
    serving = values.get("serving", {})
    route = serving.get("httpRoute")
    canary = serving.get("rollout", {}).get("strategy", {}).get("canary", {})
    plugin = canary.get("trafficRouting", {}).get("plugins", {}).get(GATEWAY_PLUGIN, {})
    return route is not None and plugin.get("httpRoute") == route["name"]


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
        transforms = chart_transforms(release.values)
        self.chart = k8s.helm.v4.Chart(
            name,
            chart=str(release.chart),
            name=release.release,
            namespace=release.namespace,
            values=release.values if values is None else values,
            opts=pulumi.ResourceOptions(
                parent=self,
                custom_timeouts=pulumi.CustomTimeouts(create=timeout, update=timeout, delete="10m"),
                transforms=transforms or None,
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
