"""Kueue: with placement.kueue-queue the GPU servers' Deployments and the benchmark Job join that LocalQueue
(label kueue.x-k8s.io/queue-name), so a shared cluster's quota admits them; without it nothing carries the label."""

from __future__ import annotations

from sglab.config.loader import load_mapping, load_stack
from sglab.deploy.render import render_stack

QUEUE = "kueue.x-k8s.io/queue-name"


def _with_queue(name: str, queue: str):
    loaded = load_stack(name)
    raw = {**loaded.raw, "placement": {**(loaded.raw.get("placement") or {}), "kueue-queue": queue}}
    return load_mapping(name, loaded.path, raw)


def _labelled(objects):
    return sorted((o["kind"], o["metadata"]["name"]) for o in objects if QUEUE in (o["metadata"].get("labels") or {}))


def test_the_arms_and_the_benchmark_job_join_the_queue():
    objects = render_stack(_with_queue("sim", "gpu-lab")).objects
    labelled = _labelled(objects)
    assert ("Deployment", "sglang-baseline") in labelled and ("Deployment", "sglang-candidate") in labelled
    assert [k for k, n in labelled if k == "Job" and n.startswith("sglab-bench-")]
    assert {o["metadata"]["labels"][QUEUE] for o in objects if QUEUE in (o["metadata"].get("labels") or {})} == {
        "gpu-lab"}


def test_no_queue_no_label():
    assert _labelled(render_stack(load_stack("sim")).objects) == []
