"""The production HTTPRoute reaches only the inference endpoints, the servers require their API keys (from a
Secret, never in the stack) and admit only the declared network peers. SGLang's route table:
tests/data/sglang-http-routes.json."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from sglab.config.loader import load_stack
from sglab.config.serving import RoutePath, Serving
from sglab.deploy.render import render_stack

ROUTES = json.loads((Path(__file__).parents[1] / "data" / "sglang-http-routes.json").read_text())["routes"]
# The product's inference endpoints (OpenAI chat/completions/models, native generate).
INFERENCE = {"/v1/chat/completions", "/v1/completions", "/v1/models", "/v1/models/{model:path}", "/generate"}
# What the platform review names as control endpoints on the inference port.
CONTROL = {"/pause_generation", "/continue_generation", "/abort_request", "/slow_down", "/release_memory_occupation",
           "/configure_logging", "/load_lora_adapter", "/update_weight_version", "/get_weights_by_name",
           "/flush_cache", "/metrics"}


def _concrete(path: str) -> str:
    """A request path the route serves: each {parameter} becomes one segment."""
    return re.sub(r"\{[^}]*\}", "some-model", path)


def matches(match: dict, path: str) -> bool:
    """Gateway API path matching: Exact is equality, PathPrefix matches whole path elements."""
    kind, value = match["path"]["type"], match["path"]["value"]
    if kind == "Exact":
        return path == value
    assert kind == "PathPrefix", kind
    prefix = value.rstrip("/")
    return path == prefix or path.startswith(prefix + "/") or prefix == ""


@pytest.fixture(scope="module")
def objects() -> list[dict]:
    return render_stack(load_stack("production")).objects


def _of(objects, kind):
    return [o for o in objects if o["kind"] == kind]


def test_the_route_table_holds_every_control_endpoint():
    assert CONTROL <= {r["path"] for r in ROUTES}


def test_the_production_route_matches_only_the_inference_paths(objects):
    (route,) = _of(objects, "HTTPRoute")
    route_matches = [m for rule in route["spec"]["rules"] for m in rule["matches"]]
    served = {r["path"] for r in ROUTES if any(matches(m, _concrete(r["path"])) for m in route_matches)}
    assert served == INFERENCE
    assert not CONTROL & served


def test_a_root_prefix_is_refused():
    with pytest.raises(ValueError, match="control endpoints"):
        RoutePath(path="/", match="PathPrefix")
    assert [p.path for p in Serving().gateway.paths] == ["/v1/chat/completions", "/v1/completions", "/v1/models",
                                                         "/generate"]


def _server_containers(objects):
    workloads = _of(objects, "Rollout") + [d for d in _of(objects, "Deployment")
                                           if d["metadata"]["name"].startswith("sglang-")]
    assert len(workloads) == 2  # the serving Rollout and the standing control
    return [c for w in workloads for c in w["spec"]["template"]["spec"]["containers"]]


def test_servers_take_their_api_keys_from_the_secret(objects):
    for container in _server_containers(objects):
        args = container["args"]
        for flag, env, key in (("--api-key", "SGLAB_API_KEY", "api-key"),
                               ("--admin-api-key", "SGLAB_ADMIN_API_KEY", "admin-api-key")):
            assert args[args.index(flag) + 1] == f"$({env})"
            (entry,) = [e for e in container["env"] if e["name"] == env]
            assert entry["valueFrom"]["secretKeyRef"] == {"name": "sglang-api-keys", "key": key}
    assert not [s for s in _of(objects, "Secret") if s["metadata"]["name"] == "sglang-api-keys"], \
        "the keys' Secret is provisioned outside the stack"


def test_the_network_policy_admits_the_declared_peers_only(objects):
    """Production declares this Gateway's own Envoy proxies and the Prometheus pods: pods, never a namespace."""
    serving = load_stack("production").config.serving
    declared = [p.policy_peer() for p in [*serving.gateway.peers, *serving.monitoring.peers]]
    proxies = declared[0]["podSelector"]["matchLabels"]
    assert proxies["gateway.envoyproxy.io/owning-gateway-name"] == "inference-gateway"
    for policy in _of(objects, "NetworkPolicy"):
        peers = [p for rule in policy["spec"]["ingress"] for p in rule["from"]]
        outside = [p for p in peers if "namespaceSelector" in p or "ipBlock" in p]
        assert outside == declared, policy["metadata"]["name"]
        assert all("podSelector" in p for p in outside)


def test_a_cloud_gateway_is_admitted_by_its_proxy_subnet(tmp_path):
    """GKE, ALB and AGC gateways are no pods: their peer is an IP block, rendered strict-valid."""
    from ruamel.yaml import YAML

    from sglab.core.paths import stacks_dir
    from tests.serving.test_render_production import validate_all

    yaml_rt = YAML()
    doc = yaml_rt.load((stacks_dir() / "Pulumi.production.yaml").read_text())
    doc["config"]["sglab:serving"]["gateway"]["peers"] = [{"cidr": "10.129.0.0/23", "except-cidrs": ["10.129.1.0/24"]}]
    (tmp_path / "stacks").mkdir()
    path = tmp_path / "stacks" / "Pulumi.production.yaml"
    with open(path, "w") as fh:
        yaml_rt.dump(doc, fh)
    objects = render_stack(load_stack("production", path=path)).objects
    policies = _of(objects, "NetworkPolicy")
    assert policies
    for policy in policies:
        peers = [p for rule in policy["spec"]["ingress"] for p in rule["from"]]
        assert {"ipBlock": {"cidr": "10.129.0.0/23", "except": ["10.129.1.0/24"]}} in peers
    validate_all(policies)
