"""`sglab render --stack production`: the serving shape, every object strict-valid (Kubernetes 1.31 and the
newest kubernetes-validate knows; the vendored Argo Rollouts / Gateway API / Prometheus Operator CRDs)."""

from __future__ import annotations

import contextlib
import copy
import io
import json
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from ruamel.yaml import YAML

from sglab.serving.spec import SPEC_ENV, JudgeSpec, judge_spec
from sglab.cli import main
from sglab.config.loader import load_stack
from sglab.deploy import crd_schemas
from sglab.deploy.render import render_stack
from sglab.core.paths import stacks_dir

K8S_VERSIONS = ("1.31", kubernetes_validate.latest_version())


def validate_all(objects: list[dict]) -> None:
    for obj in objects:
        if crd_schemas.is_custom(obj):
            crd_schemas.validate(obj, K8S_VERSIONS)
        else:
            for version in K8S_VERSIONS:
                kubernetes_validate.validate(obj, version, strict=True)


def named(objects: list[dict], kind: str, name: str | None = None) -> list[dict]:
    return [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]


def _stack_copy(tmp_path: Path, edit) -> Path:
    yaml_rt = YAML()
    doc = yaml_rt.load((stacks_dir() / "Pulumi.production.yaml").read_text())
    edit(doc["config"])
    (tmp_path / "stacks").mkdir(exist_ok=True)
    path = tmp_path / "stacks" / "Pulumi.production.yaml"
    with open(path, "w") as fh:
        yaml_rt.dump(doc, fh)
    return path


def _render(path: Path) -> list[dict]:
    return render_stack(load_stack("production", path=path)).objects


@pytest.fixture(scope="module")
def printed() -> list[dict]:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["render", "--stack", "production"]) == 0
    return [d for d in yaml.safe_load_all(buf.getvalue()) if d]


def test_render_shows_the_serving_shape_and_no_benchmark_job(printed):
    kinds = {o["kind"] for o in printed}
    assert {"Rollout", "AnalysisTemplate", "HTTPRoute", "PodMonitor", "NetworkPolicy", "CronJob"} <= kinds
    jobs = [o["metadata"]["name"] for o in printed if o["kind"] == "Job"]
    assert all(name.startswith("sglab-preflight-") for name in jobs), jobs  # the preflight only: no benchmark Job
    assert not [o for o in printed if "bench" in o["metadata"]["name"]]
    assert not named(printed, "Deployment", "sglang-candidate"), "the serving candidate is the Rollout"
    (control,) = named(printed, "Deployment", "sglang-baseline")
    assert control["spec"]["replicas"] == 1
    (rollout,) = named(printed, "Rollout")
    assert rollout["spec"]["replicas"] == 4
    validate_all(printed)


def _selects(service: dict, workload: dict) -> bool:
    labels = workload["spec"]["template"]["metadata"]["labels"]
    return all(labels.get(k) == v for k, v in service["spec"]["selector"].items())


def share_lost_when_empty(route: dict, objects: list[dict], workload_name: str) -> float:
    """The share of the route's requests that get an error while `workload_name` has no ready pod: the weighted
    share of backendRefs whose Service selects only that workload's pods (the Gateway API answers 503 for them);
    a mirror's copy is not a request's answer."""
    workloads = [o for o in objects if o["kind"] in ("Deployment", "Rollout")]
    services = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Service"}
    lost = total = 0.0
    for rule in route["spec"]["rules"]:
        for ref in rule["backendRefs"]:
            weight = ref.get("weight", 1)
            total += weight
            service = services.get(ref["name"]) if ref.get("kind", "Service") == "Service" else None
            if service is not None and {w["metadata"]["name"] for w in workloads if _selects(service, w)} == {
                    workload_name}:
                lost += weight
    return lost / total


def test_production_routes_nothing_to_the_control_and_mirrors_it_one_stable_pods_share(printed):
    """The control is one replica that restarts, drains and reloads on every change of the shared config: a
    backendRef weight on it would fail its share of requests whenever it has no ready pod. It gets a copy of one
    stable pod's share (4 stable pods: 25%), whose responses the gateway drops."""
    (route,) = named(printed, "HTTPRoute")
    (control,) = named(printed, "Deployment", "sglang-baseline")
    (control_service,) = named(printed, "Service", "sglang-baseline")
    assert control["spec"]["replicas"] == 1  # a backend that can be empty
    assert share_lost_when_empty(route, printed, "sglang-baseline") == 0
    (rule,) = route["spec"]["rules"]
    assert "sglang-baseline" not in [r["name"] for r in rule["backendRefs"]]
    (mirror,) = [f["requestMirror"] for f in rule["filters"] if f["type"] == "RequestMirror"]
    assert mirror == {"backendRef": {"name": "sglang-baseline", "port": control_service["spec"]["ports"][0]["port"]},
                      "percent": 25}
    crd_schemas.validate(route, K8S_VERSIONS)


SHARED = "sglab/shared-config"


def _shared_configs(objects: list[dict]) -> tuple[str, str]:
    (rollout,) = named(objects, "Rollout")
    (control,) = named(objects, "Deployment", "sglang-baseline")
    return (rollout["spec"]["template"]["metadata"]["labels"][SHARED],
            control["spec"]["template"]["metadata"]["labels"][SHARED])


def test_both_arms_pods_carry_the_shared_config_the_watch_compares(printed, tmp_path):
    """The serving pods and the control carry the hash of their server without speculation, as a target label:
    equal within one render; a promotion of a new image changes it on both (so the stable from before and a
    control already on the new image differ), a change of the speculation alone changes neither."""
    serving, control = _shared_configs(printed)
    assert serving == control and len(serving) == 16
    monitors = named(printed, "PodMonitor")
    assert monitors and all(SHARED in m["spec"]["podTargetLabels"] for m in monitors)

    def new_image(c):
        c["sglab:image"] = str(c["sglab:image"]).rsplit(":", 1)[0] + ":v9.9.9"

    image = _shared_configs(_render(_stack_copy(tmp_path, new_image)))
    assert image[0] == image[1] != serving

    def speculation(c):
        c["sglab:candidate"]["speculative"]["draft-model-path"] = "/shared/another-eagle3"

    assert _shared_configs(_render(_stack_copy(tmp_path, speculation))) == (serving, control)


def test_the_rollout_runs_the_benchmarked_pod_template(printed, tmp_path):
    """The same chart and stack without sglab:serving renders the candidate as a Deployment: same pod template,
    but for the API keys a serving server requires and the shared-config label the watch reads (they change no
    measured behaviour)."""
    plain = _render(_stack_copy(tmp_path, lambda c: c.pop("sglab:serving")))
    (deployment,) = named(plain, "Deployment", "sglang-candidate")
    (rollout,) = named(printed, "Rollout")
    served = copy.deepcopy(rollout["spec"]["template"])
    (container,) = served["spec"]["containers"]
    assert container["args"][-4:] == ["--api-key", "$(SGLAB_API_KEY)", "--admin-api-key", "$(SGLAB_ADMIN_API_KEY)"]
    del container["args"][-4:]
    container["env"] = [e for e in container["env"] if e["name"] not in ("SGLAB_API_KEY", "SGLAB_ADMIN_API_KEY")]
    del served["metadata"]["labels"][SHARED]
    assert served == deployment["spec"]["template"]
    assert rollout["spec"]["selector"] == deployment["spec"]["selector"]


def test_canary_steps_analysis_and_traffic_come_from_the_config(printed):
    (rollout,) = named(printed, "Rollout")
    canary = rollout["spec"]["strategy"]["canary"]
    steps = canary["steps"]
    (analysis,) = [s["analysis"] for s in steps if "analysis" in s]
    assert steps == [{"setCanaryScale": {"replicas": 1}}, {"setWeight": 20}, {"analysis": analysis},
                     {"setCanaryScale": {"matchTrafficWeight": True}}, {"setWeight": 50},
                     {"pause": {"duration": "900s"}}]
    (template,) = named(printed, "AnalysisTemplate")
    assert analysis["templates"] == [{"templateName": template["metadata"]["name"]}]
    assert {a["name"]: a["valueFrom"]["podTemplateHashValue"] for a in analysis["args"]} == {
        "stable-hash": "Stable", "canary-hash": "Latest"}
    assert canary["dynamicStableScale"] is False, "the stable must keep its pods: an abort reloads nothing"
    route_name = canary["trafficRouting"]["plugins"]["argoproj-labs/gatewayAPI"]["httpRoute"]
    (route,) = named(printed, "HTTPRoute", route_name)
    refs = {r["name"]: r["weight"] for r in route["spec"]["rules"][0]["backendRefs"]}
    assert refs == {canary["stableService"]: 100, canary["canaryService"]: 0}
    services = {o["metadata"]["name"] for o in named(printed, "Service")}
    assert set(refs) <= services
    assert route["spec"]["parentRefs"] == [{"name": "inference-gateway", "namespace": "gateway"}]


def test_the_judge_job_runs_sglab_canary_with_the_stacks_spec(printed):
    (template,) = named(printed, "AnalysisTemplate")
    (metric,) = template["spec"]["metrics"]
    assert metric["count"] == 1 and metric["failureLimit"] == 0
    job = metric["provider"]["job"]["spec"]
    assert job["backoffLimit"] == 0
    (container,) = job["template"]["spec"]["containers"]
    assert container["command"][:3] == ["sglab", "canary", "--from-env"]
    assert "{{args.canary-hash}}" in container["command"] and "{{args.stable-hash}}" in container["command"]
    env = {e["name"]: e["value"] for e in container["env"]}
    spec = JudgeSpec.model_validate(json.loads(env[SPEC_ENV]))
    stack = load_stack("production").config
    assert spec == judge_spec(stack, "production")
    assert job["activeDeadlineSeconds"] > spec.max_windows * spec.window_s
    assert job["template"]["spec"]["automountServiceAccountToken"] is False


@pytest.mark.parametrize("edit, kinds", [
    (lambda c: c["sglab:serving"].update({"traffic-router": "replicas"}), {"Rollout", "HTTPRoute"}),
    (lambda c: c["sglab:serving"].update({"traffic-router": "replicas", "gateway": {"inference-pool": True}}),
     {"InferencePool"}),
    (lambda c: c["sglab:serving"]["monitoring"].update({"scrape": "service-monitor"}), {"ServiceMonitor"}),
    (lambda c: c["sglab:serving"]["monitoring"].update({"scrape": "annotations"}), {"Rollout"}),
])
def test_every_variant_is_strict_valid(tmp_path, edit, kinds):
    objects = _render(_stack_copy(tmp_path, edit))
    assert kinds <= {o["kind"] for o in objects}
    validate_all(objects)


def test_replica_count_routing_has_no_traffic_services(tmp_path):
    objects = _render(_stack_copy(tmp_path, lambda c: c["sglab:serving"].update({"traffic-router": "replicas"})))
    (rollout,) = named(objects, "Rollout")
    canary = rollout["spec"]["strategy"]["canary"]
    assert "trafficRouting" not in canary and canary["maxUnavailable"] == 0 and canary["maxSurge"] == 1
    assert canary["steps"][0] == {"setWeight": 25}
    assert not [o for o in named(objects, "Service") if o["metadata"]["name"].endswith(("-stable", "-canary"))]
    (route,) = named(objects, "HTTPRoute")
    assert [r["name"] for r in route["spec"]["rules"][0]["backendRefs"]] == ["sglang-candidate"]
    assert share_lost_when_empty(route, objects, "sglang-baseline") == 0


def test_annotation_scraping_marks_both_arms_pods(tmp_path):
    objects = _render(_stack_copy(tmp_path, lambda c: c["sglab:serving"]["monitoring"].update(
        {"scrape": "annotations"})))
    assert not named(objects, "PodMonitor")
    for workload in named(objects, "Rollout") + named(objects, "Deployment"):
        annotations = workload["spec"]["template"]["metadata"]["annotations"]
        assert annotations["prometheus.io/scrape"] == "true" and annotations["prometheus.io/port"] == "30000"


def test_the_judge_and_watch_pods_are_locked_down(printed):
    """They only read Prometheus: no API token, non-root, no escalation, no capabilities, a read-only root."""
    (template,) = named(printed, "AnalysisTemplate")
    (cron,) = named(printed, "CronJob", "sglang-candidate-watch")
    pods = [template["spec"]["metrics"][0]["provider"]["job"]["spec"]["template"],
            cron["spec"]["jobTemplate"]["spec"]["template"]]
    for pod in pods:
        spec = pod["spec"]
        assert spec["automountServiceAccountToken"] is False and spec["restartPolicy"] == "Never"
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        for container in spec["containers"]:
            security = container["securityContext"]
            assert security["allowPrivilegeEscalation"] is False and security["capabilities"] == {"drop": ["ALL"]}
            assert security["readOnlyRootFilesystem"] is True
            assert container["resources"]["limits"]["memory"]
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    (container,) = pods[1]["spec"]["containers"]
    assert container["command"] == ["sglab", "watch", "--from-env"]
