"""The servers' NetworkPolicy admits exactly our load generators: the Job pod and the Locust pods."""

from __future__ import annotations

import pytest

from sglab.config.loader import load_stack
from sglab.core.paths import stack_path
from sglab.deploy.benchmark_job import benchmark_plan
from sglab.deploy.locust import RELEASE, chart_values
from sglab.deploy.naming import chart_dir
from sglab.deploy.render import render_chart, render_stack

STACK = "eagle-nccl-ll"


def admitted(policies: list[dict], labels: dict[str, str]) -> bool:
    """Every server's policy has an ingress peer whose podSelector matches these pod labels."""
    def matches(peer: dict) -> bool:
        wanted = peer.get("podSelector", {}).get("matchLabels", {})
        return bool(wanted) and all(labels.get(k) == v for k, v in wanted.items())
    return all(any(matches(peer) for rule in p["spec"]["ingress"] for peer in rule.get("from", []))
               for p in policies)


@pytest.mark.parametrize("allowed_from", [None, {"team": "perf", "sglab/role": "bench"}])
def test_loadgen_pods_are_admitted_and_plain_pods_are_not(allowed_from):
    loaded = load_stack(STACK)
    if allowed_from is not None:
        from sglab.config.loader import load_mapping

        raw = {k: v for k, v in loaded.raw.items() if k != "__lines__"}
        raw["network-policy"] = {"allowed-from": allowed_from}
        loaded = load_mapping(STACK, stack_path(STACK), raw)
    stack = loaded.config
    policies = [o for o in render_stack(loaded).objects if o["kind"] == "NetworkPolicy"]
    assert len(policies) == 2
    job_labels = benchmark_plan(stack, STACK).job["spec"]["template"]["metadata"]["labels"]
    locust = render_chart(chart_dir("locust"), chart_values(stack, STACK), release=RELEASE,
                          namespace=stack.namespace)
    pods = [d["spec"]["template"]["metadata"]["labels"] for d in locust if d["kind"] == "Deployment"]
    assert len(pods) == 2
    for labels in [job_labels, *pods]:
        assert admitted(policies, labels), labels
    assert not admitted(policies, {"app": "something-else"})
    reaper = benchmark_plan(stack, STACK).reaper.cron_job["spec"]["jobTemplate"]["spec"]["template"]
    assert not admitted(policies, reaper["metadata"]["labels"])  # the guard's reaper talks to the API, not the arms
