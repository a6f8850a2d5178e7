"""Simulated nodes: a node's speed divides every modelled duration, and the server reports its node."""

from __future__ import annotations

import httpx
import pytest

from sglab.config.server import SimSpec, node_env
from sglab.sim import timing
from sglab.sim.cli_args import SimArgsError, parse_sim_args
from sglab.sim.profile import SimProfile
from sglab.sim.testing import running_sim

from .helpers import CHART_COMMON, FAST


def _steps(env: dict[str, str]) -> tuple[list[float], dict]:
    with running_sim(CHART_COMMON, {**FAST, "SGLANG_RECORD_STEP_TIME": "1", **env}) as url:
        httpx.post(url + "/generate", json={"text": "a b", "sampling_params": {"max_new_tokens": 6,
                                                                                "ignore_eos": True}}, timeout=30)
        info = httpx.get(url + "/get_server_info").json()
    return info["step_time_dict"]["1"], info


@pytest.mark.slow
def test_a_node_at_half_speed_takes_twice_as_long_per_modelled_step():
    model_s = timing.decode_step_ms(SimProfile(), 1, 1.0) / 1000 / 50
    fast, _ = _steps(node_env("sim-node-a", 1.0))
    slow, info = _steps(node_env("sim-node-b", 0.5))
    assert fast[0] == pytest.approx(model_s)
    assert slow[0] == pytest.approx(2 * model_s)
    assert info["sglab_sim"]["node"] == "sim-node-b" and info["sglab_sim"]["node_speed"] == 0.5


def test_an_unnamed_node_reports_none_at_speed_one():
    config = parse_sim_args(CHART_COMMON, {})
    assert config.node is None and config.node_speed == 1.0 and config.speed == config.time_scale


def test_the_speed_multiplies_the_time_scale():
    config = parse_sim_args(CHART_COMMON, {"SGLAB_SIM_TIME_SCALE": "4", **node_env("n1", 0.96)})
    assert config.node == "n1" and config.speed == pytest.approx(4 * 0.96)


@pytest.mark.parametrize("env, words", [
    ({"SGLAB_SIM_NODE": "Node_A"}, "not a node name"),
    ({"SGLAB_SIM_NODE_SPEED": "0.1"}, "node_speed"),
    ({"SGLAB_SIM_NODE_SPEED": "3"}, "node_speed"),
])
def test_a_bad_node_is_refused_with_the_variable_named(env, words):
    with pytest.raises(SimArgsError, match=words):
        parse_sim_args(CHART_COMMON, env)


def test_the_stack_declares_two_equal_nodes_unless_it_names_its_own():
    assert SimSpec().nodes == {"sim-node-a": 1.0, "sim-node-b": 1.0}
    assert SimSpec.model_validate({"nodes": {"sim-node-a": 1.0, "sim-node-b": 0.96}}).nodes["sim-node-b"] == 0.96


@pytest.mark.parametrize("nodes", [{}, {"Bad_Name": 1.0}, {"a": 0.2}, {"a": float("nan")},
                                   {f"n{i}": 1.0 for i in range(9)}])
def test_stack_nodes_are_bounded(nodes):
    with pytest.raises(ValueError):
        SimSpec.model_validate({"nodes": nodes})
