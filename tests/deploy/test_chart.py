"""charts/sglang-server through the real Helm v4 engine: what `pulumi up` would apply is schema-valid and right."""

from __future__ import annotations

import io
from pathlib import Path

import helm_python as helm
import kubernetes_validate
import pytest
import yaml

from sglab.cli import main
from sglab.config import baseline_arm, candidate_arm, load_stack
from sglab.config.loader import _plain
from sglab.serving.objects import server_api_keys
from sglab.config.stack import StackConfig
from sglab.deploy import crd_schemas
from sglab.deploy import values as values_module
from sglab.deploy.naming import arm_release_name, chart_dir
from sglab.deploy.render import render_chart
from sglab.deploy.values import chart_values, default_values

from pulumi_harness import pulumi_config, run_program, shipped_stacks

K8S_VERSIONS = ("1.31", kubernetes_validate.latest_version())
CHART = "kubernetes:helm.sh/v4:Chart"


def validate_all(objects: list[dict]) -> None:
    assert objects
    for obj in objects:
        if crd_schemas.is_custom(obj):  # a serving stack's Rollout, HTTPRoute, ...: the vendored CRDs
            crd_schemas.validate(obj, K8S_VERSIONS)
            continue
        for version in K8S_VERSIONS:
            kubernetes_validate.validate(obj, version, strict=True)


def by_kind(objects: list[dict], kind: str) -> list[dict]:
    return [o for o in objects if o["kind"] == kind]


def workload(objects: list[dict]) -> dict:
    """An arm's server workload: its Deployment, or a serving stack's Rollout (same pod template)."""
    return (by_kind(objects, "Deployment") or by_kind(objects, "Rollout"))[0]


@pytest.fixture(scope="module", params=shipped_stacks())
def captured(request):
    """(stack, loaded, program run, rendered objects per arm) with chart inputs as the mocks saw them."""
    name = request.param
    run = run_program(name)
    assert run.error is None, run.error
    rendered = {}  # by role (a sweep stack's candidate is its leader slot's chart)
    for chart in run.of_type(CHART):
        inputs = chart.inputs
        rendered[inputs["values"]["arm"]] = render_chart(inputs["chart"], inputs["values"], release=inputs["name"],
                                                         namespace=inputs["namespace"])
    return name, load_stack(name), run, rendered


def test_latest_version_is_newer_than_131():
    assert K8S_VERSIONS[1] != "1.31"


def test_what_pulumi_up_would_apply_is_schema_valid(captured):
    _, loaded, run, rendered = captured
    stack = loaded.config
    kinds = {"Deployment", "Service"}
    kinds |= {"PodDisruptionBudget"} if stack.disruption_budget.enabled else set()
    kinds |= {"NetworkPolicy"} if stack.network_policy.enabled else set()
    for objects in rendered.values():
        if stack.serving is None:  # a serving stack's shape: tests/serving/test_render_production.py
            assert sorted(o["kind"] for o in objects) == sorted(kinds)
        validate_all(objects)
    for typ in ("kubernetes:core/v1:Namespace", "kubernetes:core/v1:Secret"):
        for res in run.of_type(typ):
            obj = {k: v for k, v in res.inputs.items() if k != "stringData"}
            obj.setdefault("apiVersion", "v1")
            obj.setdefault("kind", typ.rsplit(":", 1)[1])
            validate_all([obj])


def test_kubernetes_validate_rejects_a_broken_object():
    """The validation above can fail: strict mode refuses an unknown field."""
    bad = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"}, "spec": {"portz": []}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, "1.31", strict=True)


def test_sglab_render_prints_exactly_what_the_program_applies(captured, capsys):
    """Every object `sglab render` prints is one the program declares (directly or through a chart), and back."""
    name, _, run, rendered = captured
    assert main(["render", "--stack", name]) == 0
    printed = [d for d in yaml.safe_load_all(io.StringIO(capsys.readouterr().out)) if d]
    validate_all(printed)
    expected: list[dict] = []
    for res in run.applied():
        obj = {**res.inputs, "apiVersion": res.inputs.get("apiVersion"), "kind": res.inputs.get("kind")}
        if obj["kind"] == "Secret":  # the program holds the real (secret) value, render a placeholder
            obj = {k: v for k, v in obj.items() if k != "stringData"}
        expected.append(obj)
    for chart in run.of_type(CHART):
        expected += rendered.get(chart.inputs["values"]["arm"]) or render_chart(
            chart.inputs["chart"], chart.inputs["values"], release=chart.inputs["name"],
            namespace=chart.inputs["namespace"])
    key = lambda o: (o["kind"], o["metadata"]["name"])  # noqa: E731
    assert sorted(map(key, printed)) == sorted(map(key, expected))
    by_key = {key(o): o for o in printed}
    for obj in expected:
        shown = by_key[key(obj)]
        if obj["kind"] == "Secret":
            shown = {k: v for k, v in shown.items() if k != "stringData"}
        assert _wire(shown) == _wire(obj), key(obj)
    arms = rendered["baseline"] + rendered["candidate"]
    start = printed.index(arms[0])
    assert printed[start:start + len(arms)] == arms


def _wire(value):
    """Pulumi inputs carry numbers as floats; compare like with like."""
    if isinstance(value, dict):
        return {k: _wire(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_wire(v) for v in value]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    return float(value)


def test_deployment_matches_the_arm(captured):
    name, loaded, _, rendered = captured
    stack = loaded.config
    for arm in (baseline_arm(stack), candidate_arm(stack)):
        dep = workload(rendered[arm.role])
        meta, spec = dep["metadata"], dep["spec"]
        assert meta["labels"]["sglab/arm"] == arm.role
        assert meta["labels"]["app.kubernetes.io/part-of"] == "sglab"
        assert meta["labels"]["sglab/stack"] == name
        assert meta["labels"]["app.kubernetes.io/version"] == arm.image.rsplit(":", 1)[1]
        assert meta["annotations"]["sglab/config-hash"] == arm.config_hash
        if dep["kind"] == "Deployment":
            assert spec["strategy"] == {"type": "Recreate"}
        pod = spec["template"]["spec"]
        assert spec["template"]["metadata"]["labels"]["sglab/arm"] == arm.role
        assert pod["enableServiceLinks"] is False
        (container,) = pod["containers"]
        assert container["image"] == arm.image
        assert container["command"] == list(arm.command)
        assert container["args"] == list(arm.args) + server_api_keys(stack)[0]  # a serving stack's key references
        env = {e["name"]: e.get("value") for e in container.get("env", [])}
        assert {k: v for k, v in env.items() if v is not None} == arm.env
        assert container["ports"][0]["containerPort"] == arm.port
        gpus = stack.placement.gpus_per_node
        if gpus:
            assert container["resources"]["limits"]["nvidia.com/gpu"] == gpus
        else:
            assert "nvidia.com/gpu" not in str(container.get("resources", {}))
        rollout = stack.rollout
        startup = container["startupProbe"]
        assert startup["failureThreshold"] * startup["periodSeconds"] >= rollout.startup_timeout_min * 60
        assert container["readinessProbe"]["httpGet"]["path"] == rollout.readiness_path
        assert container["livenessProbe"]["httpGet"]["path"] == rollout.liveness_path
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert volumes["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": stack.resources.shm_size}
        mounts = {m["name"]: m for m in container["volumeMounts"]}
        assert mounts["dshm"]["mountPath"] == "/dev/shm"
        if stack.model.volume is not None:
            assert mounts["model"] == {"name": "model", "mountPath": stack.model.volume.mount_path, "readOnly": True}
        if stack.placement.separate_nodes:
            (term,) = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            assert term["topologyKey"] == "kubernetes.io/hostname"
            assert term["labelSelector"]["matchLabels"]["app.kubernetes.io/part-of"] == "sglab"
            assert term["labelSelector"]["matchLabels"]["sglab/stack"] == name
        assert pod.get("nodeSelector", {}) == stack.placement.node_selector
        if dep["kind"] == "Deployment":  # Pulumi does not await a Rollout (Argo runs the canary after pulumi up)
            assert dep["metadata"]["annotations"]["pulumi.com/timeoutSeconds"] == str(rollout.pulumi_timeout_min * 60)
        (svc,) = [o for o in by_kind(rendered[arm.role], "Service")
                  if o["metadata"]["name"] == arm_release_name(stack, arm.role)]
        assert svc["metadata"]["annotations"]["pulumi.com/timeoutSeconds"] == str(rollout.pulumi_timeout_min * 60)


def test_anti_affinity_selects_the_other_arm(captured):
    """Each arm's anti-affinity term matches the other arm's pod labels: they can never share a node."""
    _, loaded, _, rendered = captured
    if not loaded.config.placement.separate_nodes:
        pytest.skip("stack opts out of node separation")
    pods = {role: workload(objs)["spec"]["template"] for role, objs in rendered.items()}
    for role, other in (("baseline", "candidate"), ("candidate", "baseline")):
        term = pods[role]["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
        labels = pods[other]["metadata"]["labels"]
        assert all(labels.get(k) == v for k, v in term["labelSelector"]["matchLabels"].items())


def test_service_pdb_and_network_policy(captured):
    _, loaded, _, rendered = captured
    stack = loaded.config
    for role, objects in rendered.items():
        (svc,) = [o for o in by_kind(objects, "Service") if o["metadata"]["name"] == arm_release_name(stack, role)]
        assert svc["spec"]["type"] == "ClusterIP"
        assert svc["spec"]["ports"][0]["port"] == stack.server.port
        dep = workload(objects)
        assert svc["spec"]["selector"].items() <= dep["spec"]["template"]["metadata"]["labels"].items()
        if stack.disruption_budget.enabled:
            (pdb,) = by_kind(objects, "PodDisruptionBudget")
            assert pdb["spec"]["maxUnavailable"] == stack.disruption_budget.max_unavailable
            assert pdb["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
        if stack.network_policy.enabled:
            (netpol,) = by_kind(objects, "NetworkPolicy")
            assert netpol["spec"]["policyTypes"] == ["Ingress"]
            (rule,) = netpol["spec"]["ingress"]
            assert rule["from"][0] == {"podSelector": {"matchLabels": stack.network_policy.allowed_from}}
            assert all("namespaceSelector" in peer for peer in rule["from"][1:])  # sglab:serving's peers
            assert netpol["spec"]["podSelector"]["matchLabels"] == svc["spec"]["selector"]


# --- variations of a stack, rendered through the same values function ---------------------------------

def _stack_with(**updates) -> StackConfig:
    """eagle-nccl-ll with `section__key=value` updates (underscores become dashes)."""
    data = _plain(load_stack("eagle-nccl-ll").raw)
    for dotted, value in updates.items():
        node = data
        *parents, leaf = dotted.split("__")
        for part in parents:
            node = node.setdefault(part.replace("_", "-"), {})
        node[leaf.replace("_", "-")] = value
    return StackConfig.model_validate(data)


def _render(stack: StackConfig, role: str = "candidate") -> list[dict]:
    arm = candidate_arm(stack) if role == "candidate" else baseline_arm(stack)
    objects = render_chart(chart_dir(), chart_values(stack, arm, stack_name="variant"),
                           release=f"sglang-{role}", namespace=stack.namespace)
    validate_all(objects)
    return objects


def test_hf_token_is_read_from_the_secret():
    stack = _stack_with(hf_token={"secure": "v1:abc"})
    container = by_kind(_render(stack), "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]
    (hf,) = [e for e in container["env"] if e["name"] == "HF_TOKEN"]
    assert hf == {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "sglab-hf-token", "key": "token"}}}


def test_gpus_zero_omits_the_gpu_request():
    stack = _stack_with(backend="sim", placement__gpus_per_node=0, server__tp_size=1, resources__cpu="2",
                        resources__memory="4Gi")
    container = by_kind(_render(stack), "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"] == {"requests": {"cpu": "2", "memory": "4Gi"},
                                      "limits": {"cpu": "2", "memory": "4Gi"}}  # Guaranteed QoS


def test_pvc_model_volume_is_read_only():
    stack = _stack_with(model__volume={"kind": "pvc", "claim-name": "weights", "mount-path": "/shared"})
    pod = by_kind(_render(stack), "Deployment")[0]["spec"]["template"]["spec"]
    (model,) = [v for v in pod["volumes"] if v["name"] == "model"]
    assert model["persistentVolumeClaim"] == {"claimName": "weights", "readOnly": True}


def test_network_policy_pdb_and_anti_affinity_can_be_disabled():
    stack = _stack_with(network_policy__enabled=False, disruption_budget__enabled=False,
                        placement__separate_nodes=False, placement__priority_class_name="gpu-high",
                        placement__runtime_class_name="nvidia")
    objects = _render(stack)
    assert {o["kind"] for o in objects} == {"Deployment", "Service"}
    pod = by_kind(objects, "Deployment")[0]["spec"]["template"]["spec"]
    assert "affinity" not in pod
    assert pod["priorityClassName"] == "gpu-high" and pod["runtimeClassName"] == "nvidia"


def test_network_policy_allowed_from_is_configurable():
    stack = _stack_with(network_policy__allowed_from={"app": "bench"})
    (netpol,) = by_kind(_render(stack), "NetworkPolicy")
    assert netpol["spec"]["ingress"][0]["from"][0]["podSelector"]["matchLabels"] == {"app": "bench"}


# --- values.schema.json, lint, generated files ---------------------------------------------------------

@pytest.mark.parametrize("path, bad", [
    (("port",), "thirty"),
    (("port",), 70000),
    (("arm",), "canary"),
    (("shmSize",), "lots"),
    (("gpus",), -1),
    (("command",), []),
    (("probes", "readinessPath"), "health"),
    (("modelVolume", "kind"), "nfs"),
    (("env",), [{"name": "BAD NAME", "value": "1"}]),
    (("tolerations",), [{"operator": "Maybe"}]),
    (("extraFlags",), ["--oops"]),
])
def test_schema_rejects_a_bad_value_at_template_time(path, bad):
    values = default_values()
    node = values
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = bad
    with pytest.raises(helm.HelmError) as err:
        render_chart(chart_dir(), values, release="sglang-baseline", namespace="ns")
    assert path[-1] in str(err.value) or "additional" in str(err.value).lower()


def test_no_chart_default_leaks_into_sglab_values():
    """Helm merges maps with the chart's defaults; sglab's values must come out of that merge unchanged."""
    with helm.Chart.load(str(chart_dir())) as chart:
        for name in shipped_stacks():
            stack = load_stack(name).config
            for arm in (baseline_arm(stack), candidate_arm(stack)):
                values = chart_values(stack, arm, stack_name=name)
                assert chart.merge_values(values) == values
        variant = _stack_with(network_policy__allowed_from={"app": "bench"}, placement__node_selector={"a": "b"})
        values = chart_values(variant, candidate_arm(variant), stack_name="variant")
        assert chart.merge_values(values) == values


def test_schema_accepts_the_defaults_and_every_stack():
    render_chart(chart_dir(), default_values(), release="sglang-baseline", namespace="ns")
    for name in shipped_stacks():
        stack = load_stack(name).config
        for arm in (baseline_arm(stack), candidate_arm(stack)):
            with helm.Chart.load(str(chart_dir())) as chart:
                chart.validate_schema(chart_values(stack, arm, stack_name=name))


def test_helm_lint_is_clean():
    for values in (None, default_values()):
        report = helm.lint(str(chart_dir()), values, strict=True, namespace="sglab")
        assert report["errors"] == [] and report["messages"] == [], report


def test_generated_chart_files_are_up_to_date():
    for path, text in values_module.generated_files().items():
        assert Path(path).read_text() == text, f"{path} is stale: run .venv/bin/python -m sglab.deploy.values"


def test_values_example_installs_standalone():
    example = chart_dir() / "examples" / values_module.EXAMPLE_FILE
    values = yaml.safe_load(example.read_text())
    objects = render_chart(chart_dir(), values, release="my-server", namespace="team")
    validate_all(objects)
    dep = by_kind(objects, "Deployment")[0]
    assert dep["metadata"]["name"] == "my-server"
    assert "--speculative-algorithm" in dep["spec"]["template"]["spec"]["containers"][0]["args"]


def test_render_with_hf_token_shows_a_placeholder_secret(tmp_path, monkeypatch, capsys):
    from sglab.core.paths import project_root, stack_path

    text = stack_path("eagle-nccl-ll", project_root()).read_text().replace(
        "  sglab:env:", "  sglab:hf-token:\n    secure: v1:c2VjcmV0LWNpcGhlcnRleHQ=\n  sglab:env:")
    (tmp_path / "Pulumi.gated.yaml").write_text(text)
    monkeypatch.setenv("SGLAB_STACKS_DIR", str(tmp_path))
    assert main(["render", "--stack", "gated"]) == 0
    out = capsys.readouterr().out
    assert "c2VjcmV0LWNpcGhlcnRleHQ" not in out
    objects = [d for d in yaml.safe_load_all(io.StringIO(out)) if d]
    (secret,) = by_kind(objects, "Secret")
    assert secret["metadata"]["name"] == "sglab-hf-token"
    assert secret["stringData"]["token"].startswith("<secret")
    validate_all(objects)
    for dep in by_kind(objects, "Deployment"):
        env = dep["spec"]["template"]["spec"]["containers"][0]["env"]
        assert {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "sglab-hf-token", "key": "token"}}} in env


def test_args_and_env_pass_through_verbatim():
    """The chart adds no flag and mangles no value, however it would need quoting in YAML."""
    tricky = ["--json-model-override-args", '{"rope_scaling": {"factor": 2.0}}', "--log-level", "debug",
              "--chat-template", "a: b #c", "--tool-call-parser", "'quoted'"]
    stack = _stack_with(server__extra_args=tricky, env={"SGLANG_X": "yes: no # not a comment", "EMPTY": "",
                                                       "NUM": "007"})
    arm = candidate_arm(stack)
    container = by_kind(_render(stack), "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == list(arm.command)
    assert container["args"] == list(arm.args)
    assert container["args"][-len(tricky) - 10:-10] == tricky
    assert {e["name"]: e["value"] for e in container["env"]} == arm.env


# --- multi-node: one server spanning several nodes as a LeaderWorkerSet group ----------------------------

def test_multi_node_server_is_a_leader_worker_set():
    stack = _stack_with(placement__nodes=2, server__tp_size=16)
    arm = candidate_arm(stack)
    objects = render_chart(chart_dir(), chart_values(stack, arm, stack_name="two-node"),
                           release="sglang-candidate", namespace=stack.namespace)
    assert sorted(o["kind"] for o in objects) == ["LeaderWorkerSet", "NetworkPolicy", "PodDisruptionBudget",
                                                  "Service"]
    validate_all([o for o in objects if o["kind"] != "LeaderWorkerSet"])  # LWS is a CRD: no bundled schema
    (lws,) = by_kind(objects, "LeaderWorkerSet")
    assert lws["apiVersion"] == "leaderworkerset.x-k8s.io/v1"
    assert lws["metadata"]["annotations"]["pulumi.com/waitFor"] == "condition=Available"
    group = lws["spec"]["leaderWorkerTemplate"]
    assert group["size"] == 2 and group["restartPolicy"] == "RecreateGroupOnPodRestart"
    assert lws["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"] == {"maxUnavailable": 1, "maxSurge": 0}
    assert group["leaderTemplate"] == group["workerTemplate"]
    for template in (group["leaderTemplate"], group["workerTemplate"]):
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "rank", **template["metadata"]},
               "spec": template["spec"]}
        validate_all([pod])
        (container,) = template["spec"]["containers"]
        assert container["args"] == list(arm.args)
        assert container["resources"]["limits"]["nvidia.com/gpu"] == 8
    args = list(arm.args)
    assert args[args.index("--tp-size") + 1] == "16"
    assert args[args.index("--nnodes") + 1] == "2"
    assert args[args.index("--node-rank") + 1] == "$(LWS_WORKER_INDEX)"
    assert args[args.index("--dist-init-addr") + 1] == "$(LWS_LEADER_ADDRESS):20000"
    (svc,) = by_kind(objects, "Service")
    assert svc["spec"]["selector"]["leaderworkerset.sigs.k8s.io/worker-index"] == "0"
    (netpol,) = by_kind(objects, "NetworkPolicy")
    peers = netpol["spec"]["ingress"][1]
    assert peers == {"from": [{"podSelector": {"matchLabels": netpol["spec"]["podSelector"]["matchLabels"]}}]}


def test_single_node_server_has_no_rank_wiring():
    for name in shipped_stacks():
        stack = load_stack(name).config
        if stack.placement.nodes == 1:
            assert "--nnodes" not in candidate_arm(stack).args


def test_render_matches_the_program_with_locust_enabled(tmp_path, monkeypatch, capsys):
    from sglab.core.paths import project_root, stack_path

    text = stack_path("eagle-nccl-ll", project_root()).read_text() + (
        "  sglab:locust:\n    enabled: true\n    workers: 2\n"
        "  sglab:locust-password:\n    secure: v1:bG9jdXN0LXBhc3N3b3Jk\n")
    path = tmp_path / "Pulumi.with-locust.yaml"
    path.write_text(text)
    monkeypatch.setenv("SGLAB_STACKS_DIR", str(tmp_path))
    config, secret_keys = pulumi_config(path)
    run = run_program("with-locust", config=config, secret_keys=secret_keys)
    assert run.error is None, run.error
    assert main(["render", "--stack", "with-locust"]) == 0
    out = capsys.readouterr().out
    assert "bG9jdXN0LXBhc3N3b3Jk" not in out
    printed = [d for d in yaml.safe_load_all(io.StringIO(out)) if d]
    validate_all(printed)
    charts = {c.name: c for c in run.of_type(CHART)}
    assert set(charts) == {"baseline", "candidate", "locust"}
    locust = charts["locust"].inputs
    expected = render_chart(locust["chart"], locust["values"], release=locust["name"], namespace=locust["namespace"])
    assert expected and all(obj in printed for obj in expected)
    applied = {(r.inputs["kind"], r.inputs["metadata"]["name"]) for r in run.applied()}
    assert applied <= {(o["kind"], o["metadata"]["name"]) for o in printed}


def test_render_out_replaces_an_earlier_render(tmp_path, capsys):
    (tmp_path / "05-deployment-stale.yaml").write_text("kind: Deployment\n")
    (tmp_path / "notes.txt").write_text("mine")
    assert main(["render", "--stack", "eagle-default", "--out", str(tmp_path)]) == 0
    names = sorted(p.name for p in tmp_path.iterdir())
    assert "05-deployment-stale.yaml" not in names and "notes.txt" in names
    assert names[0] == "00-namespace-sglab-eagle-default.yaml"


def test_render_prints_the_probe_job_the_program_applies(tmp_path, monkeypatch):
    from sglab.config.loader import load_mapping
    from sglab.core.paths import stack_path
    from sglab.deploy.render import render_stack

    loaded = load_stack("eagle-nccl-ll")
    raw = {k: v for k, v in loaded.raw.items() if k != "__lines__"}
    raw["probe"] = {"enabled": True, "hidden-size": 7168}
    printed = {(o["kind"], o["metadata"]["name"])
               for o in render_stack(load_mapping("eagle-nccl-ll", stack_path("eagle-nccl-ll"), raw)).objects}
    run = run_program("eagle-nccl-ll", {"probe": {"enabled": True, "hidden-size": 7168}})
    assert run.error is None, run.error
    applied = {(r.inputs["kind"], r.inputs["metadata"]["name"]) for r in run.applied()}
    assert any(kind == "Job" for kind, _ in applied)
    assert applied <= printed, applied - printed
