"""The pods sglab runs beside the servers (judge Job, watch CronJob, benchmark Job, Locust, preflight) can pull,
schedule and authenticate where the servers do, and stay off the GPU nodes unless the stack says otherwise."""

from __future__ import annotations

from pathlib import Path

from ruamel.yaml import YAML

from sglab.config.loader import load_stack
from sglab.core.paths import stacks_dir
from sglab.deploy.jobs import GPU_NODE_LABEL, support_pod_placement
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
        elif o["kind"] == "CronJob":
            pods["watch"] = o["spec"]["jobTemplate"]["spec"]["template"]["spec"]
        elif o["kind"] == "Job":
            pods[o["metadata"]["name"]] = o["spec"]["template"]["spec"]
    return pods


def test_judge_watch_and_preflight_pull_schedule_and_keep_off_gpu_nodes(tmp_path):
    loaded = _stack(tmp_path)
    pods = _support_pods(render_stack(loaded).objects)
    assert {"judge", "watch"} <= set(pods) and any(name.startswith("sglab-preflight") for name in pods)
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
