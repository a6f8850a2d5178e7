"""A sweep stack on a shared GPU pool: waves and the confirmation A/B deploy into fixed slots, so moving between
them never needs more GPUs than a wave; the capacity preflight refuses a plan that does not fit `max-nodes`.

Pulumi creates resources whose name (URN) is new before it deletes the ones that went away (pulumi/pulumi#9979),
and updates a resource whose name stays. So between two `pulumi up`s, every server whose Pulumi name is in
either run exists at once; a slot's server is updated in place (its Deployment's Recreate strategy stops the old
pod first, and its selector never changes, so nothing forces a second copy).
"""

from __future__ import annotations

import json

import pulumi
import pytest

from sglab.config.loader import load_mapping, load_stack
from sglab.deploy.capacity import capacity, check_capacity
from sglab.deploy.naming import slot_release_name
from sglab.deploy.render import render_stack
from sglab.core.errors import ConfigError
from sglab.sweep.grid import expand
from pulumi_harness import run_program

STACK = "eagle-sweep"
SERVER = "sglab:index:SGLangServer"
CHART = "kubernetes:helm.sh/v4:Chart"
SLOTS = {"sglang-baseline", *(slot_release_name(i) for i in range(1, 5))}


def arms() -> list[str]:
    return [a.name for a in expand(load_stack(STACK)).arms]


def sweep(**keys) -> dict:
    raw = json.loads(json.dumps(load_stack(STACK).raw["sweep"]))
    raw.update({k.replace("_", "-"): v for k, v in keys.items()})
    return {"sweep": raw}


def loaded_with(overrides: dict):
    loaded = load_stack(STACK)
    return load_mapping(STACK, loaded.path, {**json.loads(json.dumps(loaded.raw)), **overrides})


def deployments(overrides: dict) -> dict[str, dict]:
    objects = render_stack(loaded_with(overrides)).objects
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == "Deployment"}


SHAPES = {"wave 1": sweep(wave=1), "wave 2": sweep(wave=2, carry_arm="s2-k1-d3"),
          "wave 11": sweep(wave=11, carry_arm="s2-k1-d3"), "confirmation": {}}


def test_waves_and_the_confirmation_render_the_same_gpu_holding_releases():
    rendered = {shape: deployments(keys) for shape, keys in SHAPES.items()}
    assert set(rendered["wave 1"]) == set(rendered["wave 2"]) == SLOTS
    # the last wave (one fresh arm and the leader) and the confirmation use fewer slots: only deletions
    assert set(rendered["wave 11"]) == {"sglang-baseline", slot_release_name(1), slot_release_name(4)}
    assert set(rendered["confirmation"]) == {"sglang-baseline", slot_release_name(4)}
    for name in SLOTS:  # in place: the same selector in every shape, Recreate (old pod stops before the new starts)
        shapes = [r[name] for r in rendered.values() if name in r]
        assert len({json.dumps(d["spec"]["selector"], sort_keys=True) for d in shapes}) == 1
        assert all(d["spec"]["strategy"] == {"type": "Recreate"} for d in shapes)
    wave2 = rendered["wave 2"]  # the slot's identity: what arm it serves, on the objects (not the pod template)
    assert wave2[slot_release_name(1)]["metadata"]["annotations"]["sglab/arm-name"] == arms()[4]
    assert wave2[slot_release_name(4)]["metadata"]["annotations"]["sglab/arm-name"] == "s2-k1-d3"  # the leader
    assert "sglab/arm-name" not in wave2[slot_release_name(4)]["spec"]["template"]["metadata"]["annotations"]


@pytest.fixture(scope="module")
def runs():
    return {shape: run_program(STACK, keys) for shape, keys in SHAPES.items()}


@pytest.mark.parametrize("before, after", [("wave 1", "wave 2"), ("wave 2", "wave 11"), ("wave 11", "confirmation"),
                                           ("confirmation", "wave 1")])
def test_no_step_from_one_shape_to_the_next_holds_more_servers_than_a_wave(runs, before, after):
    old, new = runs[before], runs[after]
    assert old.error is None and new.error is None, (old.error, new.error)
    servers = lambda run: {r.name for r in run.of_type(SERVER)}  # noqa: E731  (Pulumi names: the URNs)
    releases = lambda run: {r.inputs["name"] for r in run.of_type(CHART)}  # noqa: E731
    # Pulumi's order: keep (update) the names in both, create the new ones, delete the others at the end.
    at_once = servers(old) | servers(new)
    assert len(at_once) <= 5  # the baseline and parallel-arms 4 slots: one wave
    assert releases(old) | releases(new) <= SLOTS
    for name in servers(old) & servers(new):  # a kept name serves the same release (an in-place update)
        assert {c.inputs["name"] for c in old.of_type(CHART) if c.name == name} == \
               {c.inputs["name"] for c in new.of_type(CHART) if c.name == name}


def test_the_capacity_preflight_counts_the_baseline_and_every_slot():
    stack = load_stack(STACK).config
    cap = capacity(stack)
    assert (cap.servers, cap.nodes_per_server, cap.nodes, cap.max_nodes) == (5, 1, 5, 5)
    assert check_capacity(stack, STACK)[0] == cap
    two_node = loaded_with({"placement": {**load_stack(STACK).raw["placement"], "nodes": 2},
                            "server": {**load_stack(STACK).raw["server"], "tp-size": 16}}).config
    assert capacity(two_node).nodes == 10  # a multi-node server holds placement.nodes nodes


def test_a_wave_that_does_not_fit_max_nodes_is_refused_before_anything_changes():
    overrides = {**sweep(wave=1, parallel_arms=5)}
    with pytest.raises(ConfigError) as refused:
        render_stack(loaded_with(overrides))
    message = str(refused.value)
    assert "placement.max-nodes" in message and "6 GPU nodes" in message and "max-nodes 5" in message
    assert "sweep.parallel-arms to at most 4" in message
    run = run_program(STACK, overrides)
    assert isinstance(run.error, pulumi.RunError) and "placement.max-nodes" in str(run.error)
    assert run.resources == []  # refused before the namespace, a Secret or a server is declared


def test_the_caller_may_say_how_many_nodes_there_are():
    stack = load_stack(STACK).config
    with pytest.raises(ConfigError, match="more than placement.max-nodes 3"):
        check_capacity(stack, STACK, max_nodes=3)
    assert check_capacity(stack, STACK, max_nodes=8)[0].max_nodes == 8


def test_an_ab_stack_needs_two_servers_and_a_simulator_stack_none():
    assert capacity(load_stack("eagle-nccl-ll").config).servers == 2
    assert capacity(load_stack("sim").config) is None  # no GPUs
    without_serving = {k: v for k, v in json.loads(json.dumps(load_stack("production").raw)).items() if k != "serving"}
    ab = load_mapping("production", load_stack("production").path, without_serving).config
    assert capacity(ab).servers == 2


def production_with(**sections):
    loaded = load_stack("production")
    return load_mapping("production", loaded.path, {**json.loads(json.dumps(loaded.raw)), **sections}).config


def test_a_serving_stack_counts_the_control_and_both_revisions_of_its_rollout():
    """Routed through the Gateway API, the stable pods all stay until the canary is promoted (an abort reloads
    nothing), so at full promotion the new revision's replicas run beside the old: 2 x 4 + the control."""
    cap, warnings = check_capacity(load_stack("production").config, "production")
    assert (cap.servers, cap.nodes, cap.max_nodes) == (9, 9, 9) and warnings == []
    serving = load_stack("production").raw["serving"]
    by_replicas = production_with(serving={**serving, "traffic-router": "replicas", "max-surge": 1})
    assert capacity(by_replicas).servers == 1 + 4 + 1
    with pytest.raises(ConfigError) as refused:
        check_capacity(production_with(placement={**load_stack("production").raw["placement"], "max-nodes": 5}),
                       "production")
    message = str(refused.value)
    assert "9 GPU nodes" in message and "Argo Rollouts runs the new revision beside the stable one" in message
    assert "serving.replicas" in message and "serving.traffic-router: replicas" in message


def test_a_probe_beside_a_full_pool_is_a_warning_not_a_deadlock():
    loaded = load_stack("production")
    stack = load_mapping("production", loaded.path, {**json.loads(json.dumps(loaded.raw)),
                                                     "probe": {"enabled": True, "hidden-size": 7168}}).config
    _, warnings = check_capacity(stack, "production")
    assert len(warnings) == 1 and "free GPU node" in warnings[0] and "the servers are not affected" in warnings[0]


def test_validate_refuses_it_too(tmp_path, monkeypatch, capsys):
    from sglab.cli import main
    from sglab.core.paths import stack_path

    text = stack_path(STACK).read_text().replace("    parallel-arms: 4\n", "    parallel-arms: 5\n")
    (tmp_path / f"Pulumi.{STACK}.yaml").write_text(text)
    monkeypatch.setenv("SGLAB_STACKS_DIR", str(tmp_path))
    assert main(["validate", "--stack", STACK]) == 2
    assert "placement.max-nodes" in capsys.readouterr().err
