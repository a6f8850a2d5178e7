"""The production HTTPRoute's backendRefs weights have one manager: Pulumi sets them when it creates the route, then
Argo Rollouts' Gateway API plugin owns them (it sets the canary's share at every step), and a `pulumi up` never
writes Pulumi's weights back. The chart carries a transform that adds `ignoreChanges` on the weights to the
HTTPRoute it renders, and to nothing else. Likewise the standing control's pod template: Pulumi creates it, then
the follower (sglab/serving/follow.py) alone moves it, once the stable revision runs the same shared config.

Run in its own pytest process (Pulumi mocks), never beside Locust's tests.
"""

from __future__ import annotations

import json

import pulumi

from sglab.config.loader import load_stack
from sglab.deploy.plan import (CONTROL_TEMPLATE, DEPLOYMENT_TYPE, HTTP_ROUTE_TYPE, ROUTE_WEIGHTS,
                               leave_control_template_to_follower, leave_route_weights_to_argo)
from sglab.deploy.render import render_stack
from pulumi_harness import run_program

CHART = "kubernetes:helm.sh/v4:Chart"


def transformed(type_: str, opts: pulumi.ResourceOptions | None = None):
    props = {"spec": {"rules": [{"backendRefs": [{"name": "a", "weight": 100}]}]}}
    args = pulumi.ResourceTransformArgs(custom=True, type_=type_, name=f"sglang-candidate:ns/{type_}",
                                        props=props, opts=opts or pulumi.ResourceOptions())
    return props, leave_route_weights_to_argo(args)


def test_the_route_ignores_changes_to_its_backend_weights_and_keeps_its_other_options():
    props, result = transformed(HTTP_ROUTE_TYPE, pulumi.ResourceOptions(ignore_changes=["metadata.annotations"],
                                                                         protect=True))
    assert result is not None
    assert result.props is props  # the route as rendered: Pulumi still creates it with the chart's weights
    assert result.opts.ignore_changes == ["metadata.annotations", "spec.rules[*].backendRefs[*].weight"]
    assert result.opts.protect is True


def test_every_other_kind_is_left_as_it_is():
    for type_ in ("argoproj.io/v1alpha1:Rollout", "core/v1:Service", "apps/v1:Deployment",
                  "gateway.networking.k8s.io/v1:GRPCRoute", "inference.networking.k8s.io/v1:InferencePool"):
        assert transformed(f"kubernetes:{type_}")[1] is None, type_
    assert transformed(CHART)[1] is None  # the transform also sees the chart itself


def test_the_ignored_path_names_every_weight_the_rendered_route_carries():
    """The path is Pulumi's property-path syntax (`[*]`: every element); walked here over the rendered route, it
    must reach each backendRef's weight, so a change to the route's shape cannot leave a weight managed twice."""
    (route,) = [o for o in render_stack(load_stack("production")).objects if o["kind"] == "HTTPRoute"]
    reached: list = []

    def walk(value, parts):
        if not parts:
            reached.append(value)
            return
        head, rest = parts[0], parts[1:]
        key, star = (head[:-3], True) if head.endswith("[*]") else (head, False)
        child = value[key]
        for item in (child if star else [child]):
            walk(item, rest)

    walk(route, ROUTE_WEIGHTS.split("."))
    weights = [ref["weight"] for rule in route["spec"]["rules"] for ref in rule["backendRefs"]]
    assert reached == weights and weights == [100, 0]  # stable, canary: the values Pulumi creates it with


def test_production_gives_its_serving_chart_the_route_transform_and_its_control_the_template_one():
    run = run_program("production")
    assert run.error is None, run.error
    charts = {r.name: r for r in run.of_type(CHART)}
    assert charts["candidate"].transforms == [leave_route_weights_to_argo]  # the chart rendering the HTTPRoute
    assert charts["baseline"].transforms == [leave_control_template_to_follower]  # the standing control


def test_the_control_ignores_changes_to_its_pod_template_and_nothing_else_does():
    (control,) = [o for o in render_stack(load_stack("production")).objects
                  if o["kind"] == "Deployment" and o["metadata"]["name"] == "sglang-baseline"]
    args = pulumi.ResourceTransformArgs(custom=True, type_=DEPLOYMENT_TYPE, name="baseline:ns/sglang-baseline",
                                        props=control, opts=pulumi.ResourceOptions(protect=True))
    result = leave_control_template_to_follower(args)
    assert result is not None and result.props is control  # created with the chart's template
    assert result.opts.ignore_changes == [CONTROL_TEMPLATE] and result.opts.protect is True
    assert CONTROL_TEMPLATE.split(".") == ["spec", "template"] and "template" in control["spec"]
    for obj in render_stack(load_stack("eagle-default")).objects:  # an A/B arm's Deployment: Pulumi's alone
        other = pulumi.ResourceTransformArgs(custom=True, type_=f"kubernetes:{obj['apiVersion']}:{obj['kind']}",
                                             name=obj["metadata"]["name"], props=obj, opts=pulumi.ResourceOptions())
        assert leave_control_template_to_follower(other) is None, obj["metadata"]["name"]


def test_ab_stacks_and_a_replica_routed_rollout_keep_pulumi_the_only_manager():
    """An A/B stack renders no route; routed by replica count Argo never writes the route, so Pulumi keeps it."""
    for stack in ("eagle-default", "eagle-sweep"):
        run = run_program(stack)
        assert run.error is None, run.error
        assert all(r.transforms == [] for r in run.of_type(CHART)), stack
    serving = json.loads(json.dumps(load_stack("production").raw["serving"]))
    run = run_program("production", {"serving": {**serving, "traffic-router": "replicas", "max-surge": 1}})
    assert run.error is None, run.error
    charts = {r.name: r for r in run.of_type(CHART)}
    assert charts["candidate"].transforms == []
    assert charts["baseline"].transforms == [leave_control_template_to_follower]
