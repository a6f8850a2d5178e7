"""The InferencePool variant (`gateway.inference-pool: true`): the pool's endpoint picker is rendered with it,
reads only its namespace, runs locked down where the stack's other CPU pods run, is reachable from the gateway
alone, and picks a ready pod at random, so stable and canary pods see the same traffic mix (the live judge's
assumption). The picker is the Gateway API Inference Extension's EPP (its configuration: docs/production.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from sglab.config.loader import load_stack
from sglab.config.serving import EndpointPicker
from sglab.core.errors import ConfigError
from sglab.core.paths import stacks_dir
from sglab.deploy.objects import GPU_NODE_LABEL
from sglab.deploy.render import render_stack
from tests.deploy.pss import restricted_violations
from tests.serving.test_render_production import validate_all

PICKER = "sglang-candidate-epp"
POOL = "sglang-candidate"
OFF_GPU = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": GPU_NODE_LABEL, "operator": "NotIn", "values": ["true"]}]}]}}}
# The EPP's plugins that score or filter by load, KV cache or prefix: any of them would steer requests by content.
STEERING = {"queue-scorer", "kv-cache-utilization-scorer", "prefix-cache-scorer", "lora-affinity-scorer",
            "max-score-picker", "weighted-random-picker", "utilization-detector", "prefix-cache-affinity-filter",
            "latency-scorer", "openai-parser"}


def _pool_stack(tmp_path: Path, edit=lambda c: None):
    yaml_rt = YAML()
    doc = yaml_rt.load((stacks_dir() / "Pulumi.production.yaml").read_text())
    config = doc["config"]
    config["sglab:image-pull-secrets"] = ["registry-cred"]
    config["sglab:serving"]["traffic-router"] = "replicas"
    config["sglab:serving"]["gateway"]["inference-pool"] = True
    edit(config)
    (tmp_path / "stacks").mkdir(exist_ok=True)
    path = tmp_path / "stacks" / "Pulumi.production.yaml"
    with open(path, "w") as fh:
        yaml_rt.dump(doc, fh)
    return load_stack("production", path=path)


@pytest.fixture(scope="module")
def pool(tmp_path_factory) -> tuple[object, list[dict]]:
    loaded = _pool_stack(tmp_path_factory.mktemp("pool"))
    return loaded, render_stack(loaded).objects


def _one(objects: list[dict], kind: str, name: str) -> dict:
    (obj,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return obj


def _picker_container(objects: list[dict]) -> dict:
    (container,) = _one(objects, "Deployment", PICKER)["spec"]["template"]["spec"]["containers"]
    return container


def _picker_config(objects: list[dict]) -> dict:
    args = _picker_container(objects)["args"]
    return json.loads(args[args.index("--config-text") + 1])


def test_the_pool_names_the_picker_it_renders_and_every_object_is_strict_valid(pool):
    loaded, objects = pool
    (inference_pool,) = [o for o in objects if o["kind"] == "InferencePool"]
    ref = inference_pool["spec"]["endpointPickerRef"]
    service = _one(objects, "Service", ref["name"])
    (port,) = [p for p in service["spec"]["ports"] if p["port"] == ref["port"]["number"]]
    deployment = _one(objects, "Deployment", ref["name"])
    template = deployment["spec"]["template"]
    assert all(template["metadata"]["labels"][k] == v for k, v in service["spec"]["selector"].items())
    (container,) = template["spec"]["containers"]
    (target,) = [p for p in container["ports"] if p["name"] == port["targetPort"]]
    args = container["args"]
    assert args[args.index("--grpc-port") + 1] == str(target["containerPort"])
    assert args[args.index("--pool-name") + 1] == inference_pool["metadata"]["name"] == POOL
    assert args[args.index("--pool-namespace") + 1] == loaded.config.namespace
    assert ref.get("failureMode") == "FailOpen"  # a restarting picker drops no request
    assert deployment["spec"]["strategy"] == {"type": "Recreate"} and deployment["spec"]["replicas"] == 1
    validate_all(objects)


def test_the_picker_reads_its_namespace_only(pool):
    loaded, objects = pool
    assert not [o for o in objects if o["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    role = _one(objects, "Role", PICKER)
    binding = _one(objects, "RoleBinding", PICKER)
    account = _one(objects, "ServiceAccount", PICKER)
    namespace = loaded.config.namespace
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == namespace
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": PICKER}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": PICKER, "namespace": namespace}]
    assert _one(objects, "Deployment", PICKER)["spec"]["template"]["spec"]["serviceAccountName"] == \
        account["metadata"]["name"]
    verbs = {v for rule in role["rules"] for v in rule["verbs"]}
    assert verbs == {"get", "list", "watch"}
    by_resource = {(g, r): rule for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]}
    assert ("", "pods") in by_resource
    assert by_resource[("inference.networking.k8s.io", "inferencepools")]["resourceNames"] == [POOL]
    assert not [k for k in by_resource if k[1] in ("secrets", "configmaps", "nodes", "*")]


def test_the_picker_picks_a_ready_pod_at_random_whatever_the_request(pool):
    """The only scheduling plugin is the random picker, the request body is not parsed (nothing about a request
    can steer it), and the model servers' metrics are read as SGLang's."""
    _, objects = pool
    config = _picker_config(objects)
    assert config["kind"] == "EndpointPickerConfig"
    types = {p.get("name", p["type"]): p["type"] for p in config["plugins"]}
    (profile,) = config["schedulingProfiles"]
    assert [types[p["pluginRef"]] for p in profile["plugins"]] == ["random-picker"]
    assert not STEERING & set(types.values())
    assert types[config["parser"]["pluginRef"]] == "passthrough-parser"
    (extractor,) = [p for p in config["plugins"] if p["type"] == "core-metrics-extractor"]
    assert extractor["parameters"]["defaultEngine"] == "sglang"


def test_the_picker_pod_is_restricted_and_placed_like_the_stacks_cpu_pods(pool):
    _, objects = pool
    template = _one(objects, "Deployment", PICKER)["spec"]["template"]
    assert restricted_violations(template) == []  # the Pod Security Standards' restricted level
    spec = template["spec"]
    assert spec["imagePullSecrets"] == [{"name": "registry-cred"}]
    assert spec["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert spec["priorityClassName"] == "inference-critical"
    assert spec["affinity"] == OFF_GPU
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    container = _picker_container(objects)
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"}}
    # the Inference Extension's last release that ships its EPP (v1.6.0 moved it to llm-d)
    assert container["image"] == EndpointPicker().image == "registry.k8s.io/gateway-api-inference-extension/epp:v1.5.0"
    assert container["resources"]["limits"]["memory"] == container["resources"]["requests"]["memory"]
    assert container["readinessProbe"]["grpc"] and container["livenessProbe"]["grpc"]


def test_the_gateway_reaches_the_picker_and_the_picker_the_servers_nothing_wider(pool):
    loaded, objects = pool
    serving = loaded.config.serving
    gateway = [p.policy_peer() for p in serving.gateway.peers]
    picker_labels = _one(objects, "Deployment", PICKER)["spec"]["template"]["metadata"]["labels"]
    service = _one(objects, "Service", PICKER)
    (ext_proc,) = service["spec"]["ports"]

    policy = _one(objects, "NetworkPolicy", PICKER)
    assert policy["spec"]["podSelector"]["matchLabels"] == service["spec"]["selector"]
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    (rule,) = policy["spec"]["ingress"]
    assert rule["from"] == gateway
    assert rule["ports"] == [{"port": ext_proc["targetPort"], "protocol": "TCP"}]

    def admits_picker(policy: dict) -> list[dict]:
        return [r for r in policy["spec"]["ingress"] for p in r["from"]
                if "namespaceSelector" not in p and "podSelector" in p
                and all(picker_labels.get(k) == v for k, v in p["podSelector"]["matchLabels"].items())]

    candidate = _one(objects, "NetworkPolicy", POOL)
    (rule,) = admits_picker(candidate)  # the pool's servers: their port carries /metrics, which the picker reads
    assert [p["port"] for p in rule["ports"]] == ["http"]
    assert not admits_picker(_one(objects, "NetworkPolicy", "sglang-baseline")), "the control is in no pool"


def test_without_the_pool_nothing_of_the_picker_is_rendered():
    objects = render_stack(load_stack("production")).objects
    assert not [o for o in objects if o["metadata"]["name"] == PICKER]


@pytest.mark.parametrize("image, words", [
    ("epp:v1.5.0", "registry"),
    ("registry.k8s.io/gateway-api-inference-extension/epp", "latest"),
])
def test_the_picker_image_must_be_pullable_and_pinned(tmp_path, image, words):
    def edit(config):
        config["sglab:serving"]["gateway"]["endpoint-picker"] = {"image": image}

    with pytest.raises(ConfigError) as refused:
        _pool_stack(tmp_path, edit)
    assert "serving.gateway.endpoint-picker.image" in str(refused.value) and words in str(refused.value)
