"""Least privilege in what `pulumi up` applies: server and Locust pods rendered by the real Helm engine.

Server pods run `--trust-remote-code`: no service-account token, no privilege escalation, no capabilities,
the runtime's seccomp profile, a read-only root filesystem with emptyDirs only where SGLang writes, and
CPU/memory requests. Locust pods run non-root on a read-only root, and only the stack's own workers may
reach the master's worker port.
"""

from __future__ import annotations

import re
from pathlib import Path

import helm_python as helm
import kubernetes_validate
import pytest

from sglab.config import candidate_arm, load_stack
from sglab.core.paths import project_root
from sglab.deploy.benchmark_job import benchmark_plan
from sglab.deploy.locust import MASTER_PORT, RELEASE, WEB_PORT, chart_values, locust_release
from sglab.deploy.naming import PROJECT_IMAGE_UID, chart_dir
from sglab.deploy.render import render_chart
from sglab.deploy.values import chart_values as server_values

from pulumi_harness import run_program, shipped_stacks

from .test_chart import K8S_VERSIONS, _render, _stack_with, by_kind

CHART = "kubernetes:helm.sh/v4:Chart"
NETPOL = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
LOCKED_DOWN = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
               "seccompProfile": {"type": "RuntimeDefault"}}


def pod_templates(objects: list[dict]) -> list[dict]:
    """Every pod template among rendered objects: a Deployment's, or a LeaderWorkerSet's leader and workers."""
    out = [d["spec"]["template"] for d in by_kind(objects, "Deployment")]
    for lws in by_kind(objects, "LeaderWorkerSet"):
        group = lws["spec"]["leaderWorkerTemplate"]
        out += [group["leaderTemplate"], group["workerTemplate"]]
    assert out
    return out


def writable_mounts(pod: dict) -> dict[str, dict]:
    """mountPath -> volume, for every mount the container can write to."""
    (container,) = pod["spec"]["containers"]
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    return {m["mountPath"]: volumes[m["name"]] for m in container["volumeMounts"] if not m.get("readOnly")}


@pytest.fixture(scope="module", params=shipped_stacks())
def server_pods(request):
    run = run_program(request.param)
    assert run.error is None, run.error
    objects = []
    for chart in run.of_type(CHART):
        inputs = chart.inputs
        objects += render_chart(inputs["chart"], inputs["values"], release=inputs["name"],
                                namespace=inputs["namespace"])
    return load_stack(request.param).config, pod_templates(objects)


def test_server_pods_are_locked_down(server_pods):
    stack, pods = server_pods
    for pod in pods:
        spec = pod["spec"]
        assert spec["automountServiceAccountToken"] is False  # --trust-remote-code runs model code
        (container,) = spec["containers"]
        security = container["securityContext"]
        assert {k: security[k] for k in LOCKED_DOWN} == LOCKED_DOWN
        assert security["readOnlyRootFilesystem"] is True
        writable = writable_mounts(pod)
        assert set(writable) == {"/dev/shm", *stack.pod_security.writable_paths}
        assert {"/tmp", "/root/.cache", "/root/.triton"} <= set(writable)  # ZMQ ipc sockets, JIT caches
        for path, volume in writable.items():
            assert "emptyDir" in volume, path
            if path != "/dev/shm":
                assert volume["emptyDir"] == {"sizeLimit": stack.pod_security.writable_size_limit}


def test_server_pods_request_cpu_and_memory_for_an_8_gpu_node(server_pods):
    stack, pods = server_pods
    for pod in pods:
        resources = pod["spec"]["containers"][0]["resources"]
        gpus = stack.placement.gpus_per_node  # what the stack sets, else the defaults for an 8-GPU node
        assert resources["requests"]["cpu"] == (stack.resources.cpu or str(8 * gpus))
        assert resources["requests"]["memory"] == resources["limits"]["memory"] == (
            stack.resources.memory or f"{128 * gpus}Gi")
        if stack.production:  # serving: Burstable, no CPU limit
            assert "cpu" not in resources["limits"]
        else:  # a benchmark stack is Guaranteed: whole cores of its own under the static CPU manager
            assert resources["limits"]["cpu"] == resources["requests"]["cpu"]


def _quantity_gi(text: str) -> float:
    number, unit = re.fullmatch(r"([0-9.]+)(Mi|Gi|Ti)", text).groups()
    return float(number) * {"Mi": 1 / 1024, "Gi": 1, "Ti": 1024}[unit]


def test_server_pods_request_the_ephemeral_storage_their_writable_dirs_may_fill(server_pods):
    """The scheduler counts what the emptyDirs on the node's disk may hold, so no neighbour is evicted for it (a
    simulator, which writes next to nothing, requests none: it fits a laptop's kind cluster)."""
    stack, pods = server_pods
    for pod in pods:
        if stack.backend == "sim":
            assert "ephemeral-storage" not in pod["spec"]["containers"][0].get("resources", {}).get("requests", {})
            continue
        on_disk = [v["emptyDir"]["sizeLimit"] for v in writable_mounts(pod).values()
                   if v["emptyDir"].get("medium") != "Memory"]
        requested = pod["spec"]["containers"][0]["resources"]["requests"]["ephemeral-storage"]
        assert on_disk and _quantity_gi(requested) == sum(_quantity_gi(q) for q in on_disk)


def test_multi_node_pods_are_locked_down_too():
    stack = _stack_with(placement__nodes=2, server__tp_size=16)
    objects = render_chart(chart_dir(), server_values(stack, candidate_arm(stack), stack_name="two-node"),
                           release="sglang-candidate", namespace=stack.namespace)
    pods = pod_templates(objects)
    assert len(pods) == 2
    for pod in pods:
        assert pod["spec"]["automountServiceAccountToken"] is False
        security = pod["spec"]["containers"][0]["securityContext"]
        assert {k: security[k] for k in LOCKED_DOWN} == LOCKED_DOWN and security["readOnlyRootFilesystem"]
        assert "/tmp" in writable_mounts(pod)


def test_security_settings_come_from_config():
    stack = _stack_with(pod_security={"run-as-user": 1000, "read-only-root-filesystem": False,
                                      "writable-paths": ["/tmp", "/home/sglang/.cache"],
                                      "writable-size-limit": "8Gi"},
                        resources={"cpu": "48", "memory": "800Gi", "cpu-limit": "96"})
    (pod,) = pod_templates(_render(stack))
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    assert pod["spec"]["securityContext"]["runAsUser"] == pod["spec"]["securityContext"]["runAsGroup"] == 1000
    container = pod["spec"]["containers"][0]
    assert container["securityContext"]["readOnlyRootFilesystem"] is False
    assert set(writable_mounts(pod)) == {"/dev/shm", "/tmp", "/home/sglang/.cache"}
    assert writable_mounts(pod)["/tmp"]["emptyDir"] == {"sizeLimit": "8Gi"}
    assert container["resources"]["requests"]["ephemeral-storage"] == "16Gi"  # two writable paths of 8Gi
    assert container["resources"]["requests"]["cpu"] == "48" and container["resources"]["limits"]["cpu"] == "96"
    assert container["resources"]["limits"]["memory"] == "800Gi"


def test_the_simulator_runs_as_the_project_images_user():
    stack = _stack_with(backend="sim", placement__gpus_per_node=0, server__tp_size=1)
    (pod,) = pod_templates(_render(stack))
    context = pod["spec"]["securityContext"]
    assert context["runAsNonRoot"] is True and context["runAsUser"] == PROJECT_IMAGE_UID
    assert "resources" not in pod["spec"]["containers"][0]  # no GPUs: nothing derived per GPU


def test_project_image_user_matches_the_dockerfile():
    dockerfile = (project_root() / "Dockerfile").read_text()
    assert re.search(r"^USER (\d+)$", dockerfile, re.M).group(1) == str(PROJECT_IMAGE_UID)


@pytest.mark.parametrize("section, value, key", [
    ("pod-security", {"writable-paths": ["tmp"]}, "writable-paths"),
    ("pod-security", {"writable-paths": ["/tmp", "/tmp"]}, "writable-paths"),
    ("pod-security", {"writable-paths": ["/"]}, "writable-paths"),
    ("pod-security", {"run-as-user": 0}, "run-as-user"),
    ("pod-security", {"run-as-user": True}, "run-as-user"),
    ("pod-security", {"writable-size-limit": "lots"}, "writable-size-limit"),
    ("resources", {"cpu-limit": "two"}, "cpu-limit"),
])
def test_bad_security_settings_are_refused(section, value, key):
    with pytest.raises(Exception) as err:
        _stack_with(**{section.replace("-", "_"): value})
    assert key in str(err.value) and "Extra inputs" not in str(err.value)


@pytest.mark.parametrize("path, bad", [
    (("security", "readOnlyRootFilesystem"), "yes"),
    (("security", "writablePaths"), ["relative"]),
    (("security", "runAsUser"), 0),
    (("security", "extra"), 1),
    (("resources", "cpuLimit"), "two"),
])
def test_schema_refuses_bad_security_values(path, bad):
    stack = load_stack("eagle-nccl-ll").config
    values = server_values(stack, candidate_arm(stack), stack_name="s")
    values[path[0]][path[1]] = bad
    with pytest.raises(helm.HelmError):
        render_chart(chart_dir(), values, release="sglang-candidate", namespace="ns")


# --- Locust ------------------------------------------------------------------------------------------

def _locust(**overrides):
    stack = _stack_with(locust={"enabled": True}, locust_password={"secure": "v1:x"}, **overrides)
    release = locust_release(stack, "lab", "pw")
    objects = render_chart(chart_dir("locust"), release.values, release=RELEASE, namespace=stack.namespace)
    return stack, objects, release.manifests()


def test_locust_pods_run_non_root_on_a_read_only_root():
    _, objects, _ = _locust()
    for pod in pod_templates(objects):
        assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
        assert pod["spec"]["securityContext"]["runAsUser"] == PROJECT_IMAGE_UID
        (container,) = pod["spec"]["containers"]
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
        assert set(writable_mounts(pod)) == {"/tmp"}
        assert "emptyDir" in writable_mounts(pod)["/tmp"]


def _selects(selector: dict, labels: dict) -> bool:
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def admits(policies: list[dict], pod_labels: dict, source_labels: dict, port: int) -> bool:
    """Kubernetes' semantics for policies in one namespace: a pod no policy selects admits everything; a
    selected pod admits a connection that some rule of some selecting policy allows."""
    selecting = [p for p in policies if _selects(p["spec"]["podSelector"], pod_labels)]
    if not selecting:
        return True
    for policy in selecting:
        for rule in policy["spec"].get("ingress", []):
            ports = [p["port"] for p in rule.get("ports", [])]
            peers = rule.get("from")
            if (not ports or port in ports) and (peers is None or any(
                    "podSelector" in peer and _selects(peer["podSelector"], source_labels) for peer in peers)):
                return True
    return False


def test_only_the_stacks_workers_reach_the_master_port():
    stack, objects, extra = _locust()
    policies = by_kind(extra, "NetworkPolicy")
    assert len(policies) == 2
    for policy in policies:
        for version in K8S_VERSIONS:
            kubernetes_validate.validate(policy, version, strict=True)
    pods = {d["metadata"]["name"].rsplit("-", 1)[1]: d["spec"]["template"]["metadata"]["labels"]
            for d in by_kind(objects, "Deployment")}
    master, worker = pods["master"], pods["worker"]
    job = benchmark_plan(stack, "lab").job["spec"]["template"]["metadata"]["labels"]  # a loadgen, not a worker
    other_stack_worker = {**worker, "sglab/stack": "other"}
    assert admits(policies, master, worker, MASTER_PORT)
    for outsider in (job, other_stack_worker, {"app": "anything"}, {}):
        assert not admits(policies, master, outsider, MASTER_PORT), outsider
    assert admits(policies, master, {"app": "anything"}, WEB_PORT)  # the UI: its login protects it
    for source in (master, worker, job):
        assert not admits(policies, worker, source, 8080)  # workers listen on nothing


def test_locust_network_policy_follows_the_stack_switch_and_is_applied():
    _, _, extra = _locust(network_policy__enabled=False)
    assert by_kind(extra, "NetworkPolicy") == []
    run = run_program("eagle-nccl-ll", {"locust": {"enabled": True}}, secrets={"locust-password": "pw"})
    assert run.error is None, run.error
    names = sorted(r.inputs["metadata"]["name"] for r in run.of_type(NETPOL))
    assert names == [f"{RELEASE}-master", f"{RELEASE}-worker"]


def test_locust_chart_values_stay_strict():
    stack = _stack_with(locust={"enabled": True}, locust_password={"secure": "v1:x"})
    values = chart_values(stack, "lab")
    values["runAsUser"] = 0
    with pytest.raises(helm.HelmError):
        render_chart(chart_dir("locust"), values, release=RELEASE, namespace="ns")


def test_docs_say_what_is_writable_and_why():
    text = (Path(project_root()) / "docs" / "deploy.md").read_text()
    for phrase in ("readOnlyRootFilesystem", "/root/.triton", "/root/.cache", "/tmp", "pod-security",
                   "automountServiceAccountToken", str(MASTER_PORT)):
        assert phrase in text, phrase


# --- the class: every pod sglab renders -----------------------------------------------------------------

def _every_pod(objects: list[dict]) -> list[tuple[str, dict]]:
    pods = [(f"{o['kind']}/{o['metadata']['name']}", o["spec"]["template"]) for o in objects
            if o["kind"] in ("Deployment", "Job", "Rollout")]
    # a serving stack's live judge (Argo's Job provider) and watch CronJob
    pods += [(f"AnalysisTemplate/{o['metadata']['name']}", m["provider"]["job"]["spec"]["template"])
             for o in by_kind(objects, "AnalysisTemplate") for m in o["spec"]["metrics"] if "job" in m["provider"]]
    pods += [(f"CronJob/{o['metadata']['name']}", o["spec"]["jobTemplate"]["spec"]["template"])
             for o in by_kind(objects, "CronJob")]
    for lws in by_kind(objects, "LeaderWorkerSet"):
        group = lws["spec"]["leaderWorkerTemplate"]
        pods += [(f"LeaderWorkerSet/{lws['metadata']['name']}", group[t]) for t in ("leaderTemplate", "workerTemplate")]
    return pods


# production routed through an InferencePool: its endpoint picker is one more pod
POOL = {"serving": {"traffic-router": "replicas", "gateway": {"inference-pool": True}}}


@pytest.mark.parametrize("name, sections", [pytest.param(name, {}, id=name) for name in shipped_stacks()]
                         + [pytest.param("production", POOL, id="production-inference-pool")])
def test_every_rendered_pod_is_locked_down(name, sections, monkeypatch, tmp_path):
    """Servers, Locust, the benchmark Job, the endpoint picker and any other Job: no escalation, no capabilities,
    seccomp, a read-only root, a token only where the pod writes through the API (the result-writing Jobs, the
    disruption guard's reaper and the control's follower, with minimal RBAC) or reads it (the endpoint picker: its
    pool's pods, a namespaced Role)."""
    from sglab.config.loader import load_mapping
    from sglab.core.paths import stack_path
    from sglab.deploy.render import render_stack

    loaded = load_stack(name)
    raw = {k: v for k, v in loaded.raw.items() if k != "__lines__"}
    for key, section in sections.items():
        raw[key] = {**raw[key], **section}
    raw["locust"] = {**raw.get("locust", {}), "enabled": True}
    raw["locust-password"] = {"secure": "v1:x"}
    raw["benchmark-job"] = {**raw.get("benchmark-job", {}), "enabled": True}
    raw["probe"] = {**raw.get("probe", {}), "enabled": True, "hidden-size": 7168}
    pods = _every_pod(render_stack(load_mapping(name, stack_path(name), raw)).objects)
    assert any(what.startswith("Job/sglab-probe-") for what, _ in pods) and len(pods) >= 6
    assert "CronJob/sglab-guard-reaper" in dict(pods)  # every stack's Job holds its arms' budgets by default
    assert any(what == "Deployment/sglang-candidate-epp" for what, _ in pods) is bool(sections)
    for what, pod in pods:
        spec = pod["spec"]
        tokens = {v["name"] for v in spec.get("volumes", [])
                  if any("serviceAccountToken" in s for s in v.get("projected", {}).get("sources", []))}
        has_token = spec.get("automountServiceAccountToken") is True or bool(tokens)
        uses_api = what.startswith(("Job/sglab-bench-", "Job/sglab-probe-")) or what.endswith("-epp") \
            or what in ("CronJob/sglab-guard-reaper", "CronJob/sglang-baseline-follower")
        assert has_token is uses_api, what
        if tokens:  # a projected token instead of automount: never in an init container (the probe's, say)
            assert spec["automountServiceAccountToken"] is False, what
            assert not [c for c in spec.get("initContainers", [])
                        if any(m["name"] in tokens for m in c.get("volumeMounts", []))], what
        contexts = [(c, spec.get("securityContext", {})) for c in spec["containers"] + spec.get("initContainers", [])]
        for container, pod_context in contexts:
            security = container.get("securityContext", {})
            assert security.get("allowPrivilegeEscalation") is False, what
            assert security.get("capabilities") == {"drop": ["ALL"]}, what
            assert (security.get("seccompProfile") or pod_context.get("seccompProfile")) == {"type": "RuntimeDefault"}
            assert security.get("readOnlyRootFilesystem") is True, what
        server_image = what.startswith(("Deployment/sglang-", "Rollout/sglang-", "LeaderWorkerSet/",
                                        "Job/sglab-preflight-")) and not what.endswith("-epp")
        if not server_image or loaded.config.backend == "sim":
            for container in spec["containers"]:  # the project image's user (an init container may run the servers')
                effective = {**spec["securityContext"], **container.get("securityContext", {})}
                assert effective.get("runAsNonRoot") is True, what
