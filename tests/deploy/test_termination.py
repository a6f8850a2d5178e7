"""A server's shutdown is the stack's: terminationGracePeriodSeconds, and a preStop drain that keeps the pod
serving while the gateway and the Services take it out of rotation, before SIGTERM."""

from __future__ import annotations

import pytest

from sglab.config.loader import load_stack
from sglab.config.placement import Rollout
from sglab.deploy.render import render_stack


def _servers(objects):
    return [o for o in objects if o["kind"] in ("Deployment", "Rollout")
            and o["metadata"]["name"].startswith("sglang-")]


def test_the_default_is_a_minute_and_no_drain():
    for workload in _servers(render_stack(load_stack("sim")).objects):
        pod = workload["spec"]["template"]["spec"]
        assert pod["terminationGracePeriodSeconds"] == 60 and "lifecycle" not in pod["containers"][0]


def test_production_drains_before_sigterm_and_waits_for_long_replies():
    loaded = load_stack("production")
    rollout = loaded.config.rollout
    for workload in _servers(render_stack(loaded).objects):
        pod = workload["spec"]["template"]["spec"]
        assert pod["terminationGracePeriodSeconds"] == rollout.termination_grace_period_s > 60
        (server,) = pod["containers"]
        assert server["lifecycle"] == {"preStop": {"sleep": {"seconds": rollout.pre_stop_drain_s}}}


def test_a_drain_longer_than_the_grace_period_is_refused():
    with pytest.raises(ValueError, match="pre-stop-drain-s"):
        Rollout(termination_grace_period_s=30, pre_stop_drain_s=30)
