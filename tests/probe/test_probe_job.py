"""The probe Job: schema-valid for every shipped stack, on the servers' image, placement and /dev/shm, minimal RBAC,
renamed exactly when what it measures changes, and deployed before the arms only when enabled."""

from __future__ import annotations

import kubernetes_validate
import pytest
from pulumi_harness import run_program, shipped_stacks

from sglab.cli import main
from sglab.config.arms import baseline_arm
from sglab.config.loader import load_stack
from sglab.probe.job import SERVICE_ACCOUNT, probe_plan
from sglab.deploy.render import render_stack
from sglab.probe.result import PROBE_KIND
from sglab.probe.store import PROBE_RESULT_PARTS

from .helpers import stack_with

K8S_VERSIONS = ("1.31.0", "1.37.0")
STACK = "eagle-nccl-ll"
JOB = "kubernetes:batch/v1:Job"


@pytest.mark.parametrize("stack_name", shipped_stacks())
def test_every_shipped_stacks_probe_job_is_schema_valid(stack_name):
    plan = probe_plan(load_stack(stack_name).config, stack_name)
    assert [m["kind"] for m in plan.manifests()] == (
        ["ServiceAccount", "Role", "RoleBinding", "ConfigMap"] + ["ConfigMap"] * PROBE_RESULT_PARTS + ["Job"])
    for manifest in plan.manifests():
        for version in K8S_VERSIONS:
            kubernetes_validate.validate(manifest, version, strict=True)
    broken = probe_plan(load_stack(stack_name).config, stack_name).job
    broken["spec"]["template"]["spec"]["initContainers"][0]["gpuz"] = 8
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSIONS[0], strict=True)


def _server_pod(stack_name: str) -> dict:
    rendered = render_stack(load_stack(stack_name))
    (deployment,) = [o for o in rendered.objects if o["kind"] in ("Deployment", "StatefulSet")
                     and o["metadata"]["name"] == "sglang-baseline"]
    return deployment["spec"]["template"]["spec"]


@pytest.mark.parametrize("stack_name", ["eagle-default", "production"])
def test_probe_runs_on_the_servers_image_placement_and_shm(stack_name):
    stack = load_stack(stack_name).config
    pod = probe_plan(stack, stack_name).job["spec"]["template"]["spec"]
    server = _server_pod(stack_name)
    (probe,) = pod["initContainers"]
    (server_container,) = server["containers"]
    assert probe["image"] == server_container["image"] == baseline_arm(stack).image
    for key in ("nodeSelector", "tolerations", "priorityClassName", "affinity"):
        assert pod.get(key) == server.get(key), key
    shm = next(v for v in pod["volumes"] if v["name"] == "dshm")
    assert shm == next(v for v in server["volumes"] if v["name"] == "dshm")
    assert {"name": "dshm", "mountPath": "/dev/shm"} in probe["volumeMounts"]
    gpus = stack.placement.gpus_per_node
    assert (probe["resources"]["limits"]["nvidia.com/gpu"] == gpus
            == server_container["resources"]["limits"]["nvidia.com/gpu"])
    assert "--exit-zero" in probe["command"] and "--allow-nvls" not in probe["command"]
    (store,) = pod["containers"]
    assert "nvidia.com/gpu" not in store["resources"].get("limits", {})
    assert store["command"][:3] == ["sglab", "probe", "store"]


def test_rbac_is_get_and_update_of_the_precreated_result_configmaps():
    plan = probe_plan(load_stack(STACK).config, STACK)
    access = plan.access
    names = [cm["metadata"]["name"] for cm in access.result_configmaps]
    assert names == [plan.names.result_configmap, f"{plan.names.result_configmap}-1"]
    assert access.role["rules"] == [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": names,
                                     "verbs": ["get", "update"]}]
    assert access.result_configmaps[0]["metadata"]["labels"]["sglab/result"] == PROBE_KIND
    assert access.result_configmaps[1]["metadata"]["labels"]["sglab/result"] == "part"
    pod = plan.job["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == SERVICE_ACCOUNT
    assert access.service_account["automountServiceAccountToken"] is False
    assert "sglab/role" not in plan.job["spec"]["template"]["metadata"]["labels"]  # not a load generator


def _token_readers(pod: dict) -> list[str]:
    tokens = {v["name"] for v in pod["volumes"]
              if any("serviceAccountToken" in s for s in v.get("projected", {}).get("sources", []))}
    return [c["name"] for c in pod.get("initContainers", []) + pod["containers"]
            if any(m["name"] in tokens for m in c.get("volumeMounts", []))]


def test_only_the_store_step_gets_an_api_token():
    pod = probe_plan(load_stack(STACK).config, STACK).job["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    assert _token_readers(pod) == ["store"]
    (mount,) = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "api-token"]
    assert mount == {"name": "api-token", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                     "readOnly": True}  # where the kubernetes client's in-cluster config reads token, CA, namespace
    (volume,) = [v for v in pod["volumes"] if v["name"] == "api-token"]
    paths = [s.get("serviceAccountToken", {}).get("path") or s.get("configMap", {}).get("items", [{}])[0].get("path")
             or s["downwardAPI"]["items"][0]["path"] for s in volume["projected"]["sources"]]
    assert paths == ["token", "ca.crt", "namespace"]


LOCKED_DOWN = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
               "seccompProfile": {"type": "RuntimeDefault"}}


def _writable(pod: dict, container: dict) -> dict[str, dict]:
    volumes = {v["name"]: v for v in pod["volumes"]}
    return {m["mountPath"]: volumes[m["name"]] for m in container["volumeMounts"] if not m.get("readOnly")}


@pytest.mark.parametrize("stack_name", shipped_stacks())
def test_probe_pod_is_locked_down_like_the_servers(stack_name):
    stack = load_stack(stack_name).config
    pod = probe_plan(stack, stack_name).job["spec"]["template"]["spec"]
    (probe,), (store,) = pod["initContainers"], pod["containers"]
    server = _server_pod(stack_name)
    (server_container,) = server["containers"]
    for container in (probe, store):
        assert {k: container["securityContext"][k] for k in LOCKED_DOWN} == LOCKED_DOWN
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
    # the probe runs the servers' image as the servers run it: same user, same writable paths
    server_user = {k: v for k, v in {**server.get("securityContext", {}), **server_container["securityContext"]}.items()
                   if k in ("runAsUser", "runAsGroup", "runAsNonRoot")}
    assert {k: v for k, v in probe["securityContext"].items() if k in server_user
            or k.startswith("runAs")} == server_user
    server_writable = _writable(server, server_container)
    probe_writable = _writable(pod, probe)
    assert set(probe_writable) == set(server_writable) | {"/probe-results"}
    for path in stack.pod_security.writable_paths:
        assert probe_writable[path]["emptyDir"] == server_writable[path]["emptyDir"], path
    assert store["securityContext"]["runAsNonRoot"] is True and set(_writable(pod, store)) == {"/tmp"}


def test_probe_security_follows_pod_security():
    stack = stack_with({"pod-security": {"run-as-user": 1000, "read-only-root-filesystem": False,
                                         "writable-paths": ["/tmp", "/home/sglang/.cache"],
                                         "writable-size-limit": "8Gi"}})
    plan = probe_plan(stack, STACK)
    pod = plan.job["spec"]["template"]["spec"]
    (probe,) = pod["initContainers"]
    context = probe["securityContext"]
    assert (context["runAsUser"], context["runAsGroup"], context["runAsNonRoot"]) == (1000, 1000, True)
    assert context["readOnlyRootFilesystem"] is False
    writable = _writable(pod, probe)
    assert set(writable) == {"/dev/shm", "/probe-results", "/tmp", "/home/sglang/.cache"}
    assert writable["/home/sglang/.cache"]["emptyDir"] == {"sizeLimit": "8Gi"}
    for version in K8S_VERSIONS:
        kubernetes_validate.validate(plan.job, version, strict=True)
    # its pod changed, what it measures did not: the same probe (kept as it ran; probe.rerun asks for a new one)
    assert plan.names.job == probe_plan(load_stack(STACK).config, STACK).names.job


@pytest.mark.parametrize("changes, renamed", [
    ({"nccl.NCCL_ALGO": "Tree"}, True),
    ({"load.concurrency": [1, 4]}, True),
    ({"image": "lmsysorg/sglang:dev"}, False),  # an image bump never starts a probe (it needs a free GPU node)
    ({"probe": {"rerun": "again"}}, True),  # asked for
    ({"probe": {"samples": 100}}, True),
    ({"placement.node-selector": {"pool": "other"}}, False),
    ({"policy.min-gain": 0.05}, False),
    ({"benchmark-job.timeout-min": 5}, False),
])
def test_probe_job_is_renamed_exactly_when_what_it_measures_changes(changes, renamed):
    before = probe_plan(load_stack(STACK).config, STACK).names.job
    after = probe_plan(stack_with(changes), STACK).names.job
    assert (after != before) == renamed


def test_program_deploys_the_probe_on_demand_only_when_enabled():
    off = run_program(STACK)
    assert off.error is None and not [j for j in off.of_type(JOB)
                                      if j.inputs["metadata"]["name"].startswith("sglab-probe")]
    on = run_program(STACK, {"probe": {"enabled": True, "timeout-min": 12}})
    assert on.error is None
    (job,) = [j for j in on.of_type(JOB) if j.inputs["metadata"]["name"].startswith("sglab-probe-")]
    stack = stack_with({"probe": {"enabled": True, "timeout-min": 12}})
    assert job.inputs["metadata"]["name"] == probe_plan(stack, STACK).names.job
    assert job.inputs["spec"]["activeDeadlineSeconds"] == 12 * 60
    options = on.options_of(JOB, "nccl-probe-job")
    assert options["custom_timeouts"]["create"] == "17m"
    probe_urn_suffix = "kubernetes:batch/v1:Job::nccl-probe-job"
    for arm in ("baseline", "candidate"):
        # nothing waits for the probe: one that waits for a free GPU node never holds the servers back
        assert not any(d.endswith(probe_urn_suffix)
                       for d in on.options_of("sglab:index:SGLangServer", arm)["dependencies"])
    # a finished probe is kept as it ran: a later image or source change does not replace it
    assert "spec" in options["ignore_changes"]
    assert "data" in on.options_of("kubernetes:core/v1:ConfigMap", "nccl-probe-src")["ignore_changes"]
    assert on.outputs["probe_job"] == job.inputs["metadata"]["name"]
    for manifest in [j.inputs for j in on.of_type(JOB)]:
        for version in K8S_VERSIONS:
            kubernetes_validate.validate({"apiVersion": "batch/v1", "kind": "Job", **manifest}, version, strict=True)


def test_sglab_probe_nccl_prints_the_job(capsys):
    assert main(["probe", "nccl", "--stack", STACK]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# sglab probe nccl --stack eagle-nccl-ll")
    assert "decode sizes: 14 KiB, 42 KiB, 56 KiB, 168 KiB, 224 KiB, 672 KiB" in out
    assert "kind: Job" in out and "NCCL_NVLS_ENABLE" in out
    import yaml

    docs = [d for d in yaml.safe_load_all(out) if d]
    assert [d["kind"] for d in docs] == [m["kind"] for m in probe_plan(load_stack(STACK).config, STACK).manifests()]


def test_shipped_modules_import_only_stdlib_torch_pydantic_and_each_other():
    """What the Job mounts into the server image must not need the rest of sglab (checked statically; the gloo
    smoke test runs them from the materialized ConfigMap too)."""
    import ast
    import sys
    from pathlib import Path

    from sglab.probe.job import SHIPPED_CONTRACT, SHIPPED_MODULES

    root = Path(__file__).resolve().parents[2] / "sglab"
    shipped = [f"probe.{m}" for m in SHIPPED_MODULES] + [f"sglang.{m}" for m in SHIPPED_CONTRACT]
    allowed = {f"sglab.{m}" for m in shipped} | {"sglab.probe", "sglab.sglang"}
    bad = []
    for module in shipped:
        tree = ast.parse((root / (module.replace(".", "/") + ".py")).read_text())
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else []
            for name in names:
                top = name.split(".")[0]
                if name.startswith("sglab"):
                    if name not in allowed:
                        bad.append(f"{module.split('.')[1]}: {name}")
                elif top not in sys.stdlib_module_names and top not in ("torch", "pydantic", "__future__"):
                    bad.append(f"{module.split('.')[1]}: {name}")
    # nccl.py's --stack path reaches for the loader and results store, and result.py's load_probe (the CLI's) for
    # the bounded reader and its error, only when sglab is installed
    assert sorted(bad) == ["nccl: sglab.config.loader", "nccl: sglab.probe.plan", "nccl: sglab.results.store",
                           "result: sglab.core.errors", "result: sglab.core.untrusted_json"]
