"""Cluster defaults: a progress deadline that outlasts loading, Guaranteed QoS for benchmark
stacks, the Job and Locust scheduled by the stack's placement, an HF cache on a claim for hub weights, and
`pulumi up` saying which phase it waits on."""

from __future__ import annotations

import json
import logging

import kubernetes_validate
import pytest

from sglab.config.loader import load_mapping, load_stack
from sglab.deploy.render import render_stack
from sglab.core.errors import ConfigError
from pulumi_harness import run_program, shipped_stacks

K8S = ("1.31", kubernetes_validate.latest_version())


def with_sections(name: str, **sections):
    loaded = load_stack(name)
    return load_mapping(name, loaded.path, {**json.loads(json.dumps(loaded.raw)), **sections})


def qos_class(pod: dict) -> str:
    """Kubernetes' rule: Guaranteed when every container limits cpu and memory to exactly its requests."""
    containers = pod["spec"]["containers"] + pod["spec"].get("initContainers", [])
    def guaranteed(c):  # noqa: E306
        res = c.get("resources", {})
        req, lim = res.get("requests", {}), res.get("limits", {})
        return all(r in lim and str(lim[r]) == str(req.get(r, lim[r])) for r in ("cpu", "memory"))
    return "Guaranteed" if all(guaranteed(c) for c in containers) else "Burstable"


@pytest.mark.parametrize("name", shipped_stacks())
def test_the_progress_deadline_outlasts_the_startup_timeout(name):
    stack = load_stack(name).config
    for dep in [o for o in render_stack(load_stack(name)).objects if o["kind"] == "Deployment"
                and o["metadata"]["name"].startswith("sglang-")]:
        deadline = dep["spec"]["progressDeadlineSeconds"]
        assert deadline >= stack.rollout.startup_timeout_min * 60  # not the default 600 s
        assert deadline == stack.rollout.pulumi_timeout_min * 60  # Kubernetes and Pulumi give up together


@pytest.mark.parametrize("name", shipped_stacks())
def test_benchmark_stacks_are_guaranteed_production_is_burstable(name):
    stack = load_stack(name).config
    servers = [o["spec"]["template"] for o in render_stack(load_stack(name)).objects
               if o["kind"] == "Deployment" and o["metadata"]["name"].startswith("sglang-")]
    for pod in servers:
        assert qos_class(pod) == ("Burstable" if stack.production else "Guaranteed"), name


def test_guaranteed_needs_whole_cpus_and_no_other_limit():
    with pytest.raises(ConfigError, match="sglab:resources.cpu.*whole number"):
        with_sections("eagle-nccl-ll", resources={"guaranteed": True, "cpu": "62.5"})
    with pytest.raises(ConfigError, match="sglab:resources.cpu-limit"):
        with_sections("eagle-nccl-ll", resources={"guaranteed": True, "cpu": "64", "cpu-limit": "96"})
    off = with_sections("eagle-nccl-ll", resources={"guaranteed": False})
    (pod, *_) = [o["spec"]["template"] for o in render_stack(off).objects if o["kind"] == "Deployment"]
    assert "cpu" not in pod["spec"]["containers"][0]["resources"]["limits"]


def test_the_job_and_locust_schedule_where_the_stack_says():
    # production serves through sglab:serving, where the benchmark Job is off unless asked for
    loaded = with_sections("production", locust={"enabled": True}, **{"locust-password": {"secure": "x"},
                                                                      "benchmark-job": {"enabled": True}})
    stack = loaded.config
    objects = render_stack(loaded).objects
    pods = {o["metadata"]["name"]: o["spec"]["template"]["spec"] for o in objects
            if o["kind"] in ("Deployment", "Job") and not o["metadata"]["name"].startswith("sglang-")}
    pods.update({o["metadata"]["name"]: o["spec"]["jobTemplate"]["spec"]["template"]["spec"] for o in objects
                 if o["kind"] == "CronJob" and o["metadata"]["name"].startswith("sglab-")})
    assert {n.split("-")[1] for n in pods} >= {"bench", "locust", "preflight", "guard"}  # guard: the reaper
    for name, pod in pods.items():
        assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}], name
        assert pod["priorityClassName"] == stack.placement.priority_class_name == "inference-critical", name
    for name, pod in pods.items():
        if not name.startswith("sglab-preflight"):  # only the preflight follows the servers (their hostPath)
            assert "nodeSelector" not in pod, name
    cpu_pool = with_sections("eagle-nccl-ll", placement={**load_stack("eagle-nccl-ll").raw["placement"],
                                                         "loadgen-node-selector": {"pool": "cpu"}})
    (job,) = [o for o in render_stack(cpu_pool).objects if o["kind"] == "Job" and "bench" in o["metadata"]["name"]]
    assert job["spec"]["template"]["spec"]["nodeSelector"] == {"pool": "cpu"}


HUB = {"model": {"path": "moonshotai/Kimi-K2.5"},
       "candidate": {"speculative": {"algorithm": "EAGLE3", "draft-model-path": "lightseekorg/kimi-k2.5-eagle3",
                                     "num-steps": 2, "eagle-topk": 1, "num-draft-tokens": 3}}}


def test_hub_weights_need_an_hf_cache_claim():
    with pytest.raises(ConfigError) as refused:
        with_sections("eagle-nccl-ll", **HUB)
    assert "sglab:hf-cache" in str(refused.value) and "64Gi emptyDir" in str(refused.value)


def test_the_hf_cache_claim_is_created_kept_and_mounted():
    loaded = with_sections("eagle-nccl-ll", **HUB, **{"hf-cache": {"size": "1500Gi", "storage-class": "shared-fs"}})
    objects = render_stack(loaded).objects
    (claim,) = [o for o in objects if o["kind"] == "PersistentVolumeClaim"]
    assert claim["spec"] == {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1500Gi"}},
                             "storageClassName": "shared-fs"}
    assert claim["metadata"]["annotations"]["pulumi.com/skipAwait"] == "true"  # bound by its first consumer
    for version in K8S:
        kubernetes_validate.validate(claim, version, strict=True)
    for dep in [o for o in objects if o["kind"] == "Deployment"]:
        pod = dep["spec"]["template"]["spec"]
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert volumes["hf-cache"] == {"name": "hf-cache", "persistentVolumeClaim": {"claimName": "sglab-hf-cache"}}
        (container,) = pod["containers"]
        assert {"name": "hf-cache", "mountPath": "/var/cache/huggingface"} in container["volumeMounts"]
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["HF_HUB_CACHE"] == "/var/cache/huggingface"
    run = run_program("eagle-nccl-ll", {**HUB, "hf-cache": {"size": "1500Gi"}})
    assert run.error is None, run.error
    (pvc,) = run.of_type("kubernetes:core/v1:PersistentVolumeClaim")
    assert run.options_of(pvc.typ, pvc.name)["retain_on_delete"] is True  # a hub download survives destroy
    existing = with_sections("eagle-nccl-ll", **HUB, **{"hf-cache": {"claim-name": "team-hf-cache"}})
    assert not [o for o in render_stack(existing).objects if o["kind"] == "PersistentVolumeClaim"]


def test_pulumi_up_says_which_phase_it_waits_on(caplog):
    caplog.set_level(logging.INFO)
    run = run_program("eagle-nccl-ll")
    assert run.error is None
    lines = [r.getMessage() for r in caplog.records]
    phases = [line for line in lines if line.startswith("phase ")]
    assert [p.split(":")[0] for p in phases] == ["phase 1/3 preflight", "phase 2/3 servers", "phase 3/3 benchmark"]
    assert "up to rollout.pulumi-timeout-min 90 min" in phases[1]
    assert "16 rounds per gated level" in phases[2]
    assert "kubectl -n sglab-eagle-nccl-ll logs -f job/sglab-bench-" in phases[2]
    assert any(line.startswith("capacity: up to 2 servers") for line in lines)
