"""The pods sglab runs beside the servers (judge Job, watch and follower CronJobs, benchmark Job, Locust,
preflight) can pull, schedule and authenticate where the servers do, and stay off the GPU nodes unless the stack
says otherwise."""

from __future__ import annotations

from pathlib import Path

from ruamel.yaml import YAML

from sglab.config.loader import load_stack
from sglab.core.paths import stacks_dir
from sglab.deploy.objects import GPU_NODE_LABEL, support_pod_placement
from sglab.deploy.render import render_stack

OFF_GPU = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": GPU_NODE_LABEL, "operator": "NotIn", "values": ["true"]}]}]}}}


def _stack(tmp_path: Path, edit=lambda c: None):
    yaml_rt = YAML()
    doc = yaml_rt.load((stacks_dir() / "Pulumi.production.yaml").read_text())
    doc["config"]["sglab:image-pull-secrets"] = ["registry-cred"]
    edit(doc["config"])
    (tmp_path / "stacks").mkdir(exist_ok=True)
    path = tmp_path / "stacks" / "Pulumi.production.yaml"
    with open(path, "w") as fh:
        yaml_rt.dump(doc, fh)
    return load_stack("production", path=path)


def _support_pods(objects: list[dict]) -> dict[str, dict]:
    pods = {}
    for o in objects:
        if o["kind"] == "AnalysisTemplate":
            pods["judge"] = o["spec"]["metrics"][0]["provider"]["job"]["spec"]["template"]["spec"]
        elif o["kind"] == "CronJob":  # the watch, the control's follower
            pods[o["metadata"]["name"].removeprefix("sglang-candidate-")] = o["spec"]["jobTemplate"]["spec"][
                "template"]["spec"]
        elif o["kind"] == "Job":
            pods[o["metadata"]["name"]] = o["spec"]["template"]["spec"]
    return pods


def test_judge_watch_follower_and_preflight_pull_schedule_and_keep_off_gpu_nodes(tmp_path):
    loaded = _stack(tmp_path)
    pods = _support_pods(render_stack(loaded).objects)
    assert {"judge", "watch", "sglang-baseline-follower"} <= set(pods)
    assert any(name.startswith("sglab-preflight") for name in pods)
    for name, pod in pods.items():
        assert pod["imagePullSecrets"] == [{"name": "registry-cred"}], name
        assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}], name
        assert pod["priorityClassName"] == "inference-critical", name
        assert pod["affinity"] == OFF_GPU, name


def test_a_stack_may_put_its_cpu_pods_on_gpu_nodes(tmp_path):
    loaded = _stack(tmp_path, lambda c: c["sglab:placement"].update({"cpu-pods-on-gpu-nodes": True}))
    assert "affinity" not in support_pod_placement(loaded.config)
    for pod in _support_pods(render_stack(loaded).objects).values():
        assert "affinity" not in pod


def _gi(quantity: str) -> float:
    units = {"Gi": 1.0, "Mi": 1 / 1024}
    return float(quantity[:-2]) * units[quantity[-2:]]


def _disk_requests_cover_the_empty_dirs(pod: dict) -> None:
    """Every disk emptyDir is bounded and its size requested: the scheduler counts it, the kubelet evicts nobody
    else for it."""
    disk = [v["emptyDir"] for v in pod["volumes"] if "emptyDir" in v and v["emptyDir"].get("medium") != "Memory"]
    assert all("sizeLimit" in d for d in disk), disk
    requested = sum(_gi(c["resources"]["requests"].get("ephemeral-storage", "0Gi"))
                    for c in pod["containers"] + pod.get("initContainers", []))
    assert requested >= sum(_gi(d["sizeLimit"]) for d in disk) > 0


def test_finished_judge_watch_and_follower_jobs_are_cleaned_up_and_request_their_disk(tmp_path):
    objects = render_stack(_stack(tmp_path)).objects
    (template,) = [o for o in objects if o["kind"] == "AnalysisTemplate"]
    crons = [o for o in objects if o["kind"] == "CronJob"]  # the watch, the control's follower
    assert len(crons) == 2
    jobs = [template["spec"]["metrics"][0]["provider"]["job"]["spec"], *(c["spec"]["jobTemplate"]["spec"]
                                                                          for c in crons)]
    for job in jobs:
        assert job["ttlSecondsAfterFinished"] == 7 * 24 * 3600
        _disk_requests_cover_the_empty_dirs(job["template"]["spec"])


def test_the_benchmark_job_requests_its_disk():
    from sglab.deploy.benchmark_job import benchmark_plan

    plan = benchmark_plan(load_stack("sim").config, "sim")
    _disk_requests_cover_the_empty_dirs(plan.job["spec"]["template"]["spec"])
