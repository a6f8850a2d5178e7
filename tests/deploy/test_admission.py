"""Admission-ready: the namespace a stack creates enforces the Pod Security Standard level its
rendered pods really meet (judged by tests/deploy/pss.py, written from the standard), and a production stack may
not take its weights from a hostPath."""

from __future__ import annotations

import json

import pytest

from sglab.config.loader import load_mapping, load_stack
from sglab.deploy.namespace import LABEL_PREFIX, PSS_VERSION, required_level
from sglab.deploy.render import render_stack
from sglab.core.errors import ConfigError
from pulumi_harness import shipped_stacks

from .pss import baseline_violations, pod_templates, restricted_violations, strictest_level

ORDER = ["restricted", "baseline", "privileged"]
RDMA = {"resource": "rdma/rdma_shared_device_a", "networks": ["sriov-ib"], "socket-ifname": "net1"}


def with_everything(name: str, **sections):
    """The stack with every pod sglab can render: the benchmark Job, Locust, the probe, the preflight."""
    loaded = load_stack(name)
    raw = {**json.loads(json.dumps(loaded.raw)), "locust": {"enabled": True}, "locust-password": {"secure": "x"},
           "benchmark-job": {"enabled": True}, "probe": {"enabled": True, "hidden-size": 7168}, **sections}
    raw = {key: value for key, value in raw.items() if value is not None}  # a section given as None is removed
    return load_mapping(name, loaded.path, raw)


def variants() -> list[tuple[str, dict]]:
    out = [(name, {}) for name in shipped_stacks()]
    out.append(("eagle-nccl-ll", {"pod-security": {"run-as-user": 1000, "writable-paths": ["/tmp", "/home/s/.cache"]},
                                  "model": {"path": "/w/m", "volume": {"kind": "pvc", "claim-name": "weights",
                                                                       "mount-path": "/w"}},
                                  "candidate": {"speculative": {"algorithm": "EAGLE3", "draft-model-path": "/w/d",
                                                                "num-steps": 2, "eagle-topk": 1,
                                                                "num-draft-tokens": 3}}}))
    server = load_stack("production").raw["server"]
    # Multi-node servers (LeaderWorkerSet) are not canaried by Argo Rollouts: the two-node variants drop sglab:serving.
    two_node = {"placement": {"gpus-per-node": 8, "nodes": 2, "rdma": RDMA}, "server": {**server, "tp-size": 16},
                "serving": None}
    out.append(("production", two_node))
    out.append(("production", {**two_node, "placement": {**two_node["placement"],
                                                         "rdma": {**RDMA, "networks": [], "host-network": True}}}))
    return out


@pytest.mark.parametrize("name, sections", variants())
def test_the_namespace_enforces_the_level_every_rendered_pod_meets(name, sections):
    loaded = with_everything(name, **sections)
    objects = render_stack(loaded).objects
    pods = pod_templates(objects)
    assert len(pods) >= 5
    met = {what: strictest_level(pod) for what, pod in pods}
    weakest = max(met.values(), key=ORDER.index)
    assert required_level(loaded.config) == weakest, met  # the strictest level all of them meet, no looser
    for ns in [o for o in objects if o["kind"] == "Namespace"]:
        labels = ns["metadata"]["labels"]
        level = labels[f"{LABEL_PREFIX}enforce"]
        assert level == weakest and labels[f"{LABEL_PREFIX}warn"] == level
        assert labels[f"{LABEL_PREFIX}enforce-version"] == PSS_VERSION
        assert labels[f"{LABEL_PREFIX}audit"] == "restricted"
        checks = {"restricted": restricted_violations, "baseline": baseline_violations}.get(level)
        for what, pod in pods:
            assert checks is None or checks(pod) == [], (what, checks(pod))


def test_the_load_generators_are_restricted_and_the_servers_say_why_they_are_not():
    objects = render_stack(with_everything("eagle-nccl-ll")).objects
    pods = dict(pod_templates(objects))
    assert "CronJob/sglab-guard-reaper" in pods
    for what, pod in pods.items():
        if what.startswith(("Job/sglab-bench-", "Deployment/sglab-locust-", "CronJob/sglab-guard-reaper")):
            assert restricted_violations(pod) == [], what
    server = pods["Deployment/sglang-candidate"]
    assert "volume model: hostPath" in baseline_violations(server)  # a lab stack: privileged, and the label says so
    assert any("runAsNonRoot" in v for v in restricted_violations(server))


def test_an_explicit_level_the_pods_do_not_meet_is_refused():
    loaded = with_everything("eagle-nccl-ll", namespace={"name": "lab", "pod-security": "baseline"})
    with pytest.raises(ConfigError) as refused:
        render_stack(loaded)
    message = str(refused.value)
    assert "namespace.pod-security" in message and "need privileged" in message and "hostPath" in message


def test_hostpath_weights_are_refused_in_production():
    loaded = load_stack("production")
    raw = {**json.loads(json.dumps(loaded.raw)),
           "model": {"path": "/shared/kimi-k2.5-int4", "volume": {"kind": "hostPath", "host-path": "/shared",
                                                                 "mount-path": "/shared"}}}
    with pytest.raises(ConfigError) as refused:
        load_mapping("production", loaded.path, raw)
    message = str(refused.value)
    assert "sglab:model.volume.kind" in message and "production" in message
    assert "kind: pvc" in message and "CSI" in message
    lab = {**raw, "production": False, "namespace": "sglab-lab"}
    assert load_mapping("production", loaded.path, lab).config.model.volume.kind == "hostPath"  # a lab may
