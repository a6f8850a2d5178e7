"""A sweep stack on a cluster under Pulumi's mocks: `sglab:sweep.wave` deploys the baseline and one wave of the grid,
later waves change only the candidate resources, the benchmark Job runs `sglab sweep` against the wave's Services,
and the wave's ranking and leader come back as stack outputs (no Locust in this process: tests/pulumi_harness.py)."""

from __future__ import annotations

import json
import re

import kubernetes_validate
import pytest

from sglab.config.arms import baseline_arm
from sglab.config.loader import load_mapping, load_stack
from sglab.deploy.benchmark_job import RESULT_CONFIGMAP_FLAG, benchmark_plan, names
from sglab.deploy.naming import arm_label, slot_release_name
from sglab.deploy.render import render_stack
from sglab.results.sink import SUMMARY_KEY, encode_result
from sglab.sweep.arms import ARM_URL_FLAG, plan_wave, sweep_grid, wave_slices
from sglab.deploy.values import chart_values
from sglab.core.errors import ConfigError
from sglab.sweep.grid import expand
from pulumi_harness import run_program

STACK = "eagle-sweep"
CHART = "kubernetes:helm.sh/v4:Chart"
SERVER = "sglab:index:SGLangServer"
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def sweep(**keys) -> dict:
    """eagle-sweep's sglab:sweep with `keys` (underscores as dashes) changed: a `pulumi config set --path` override."""
    raw = json.loads(json.dumps(load_stack(STACK).raw["sweep"]))
    raw.update({k.replace("_", "-"): v for k, v in keys.items()})
    return {"sweep": raw}


def stack_with(**keys):
    loaded = load_stack(STACK)
    raw = {**json.loads(json.dumps(loaded.raw)), **sweep(**keys)}
    return load_mapping(STACK, loaded.path, raw).config


def grid_names() -> list[str]:
    return [a.name for a in expand(load_stack(STACK)).arms]


@pytest.fixture(scope="module")
def waves():
    """Wave 1, wave 2 carrying wave 1's (pretend) leader, and the last wave."""
    arms = grid_names()
    return {1: run_program(STACK, sweep(wave=1)),
            2: run_program(STACK, sweep(wave=2, carry_arm=arms[2])),
            11: run_program(STACK, sweep(wave=11, carry_arm=arms[5]))}


def wire(value):
    return json.loads(json.dumps(value), parse_int=float)


def test_waves_slice_the_grid_in_its_order():
    assert wave_slices(40, 4) == [(0, 4)] + [(4 + 3 * i, min(7 + 3 * i, 40)) for i in range(12)]
    assert wave_slices(5, 1) == [(i, i + 1) for i in range(5)]
    assert wave_slices(3, 4) == [(0, 3)]
    assert wave_slices(0, 4) == []
    covered = [i for start, stop in wave_slices(40, 4) for i in range(start, stop)]
    assert covered == list(range(40))  # every arm in exactly one wave


def test_wave_1_deploys_the_baseline_and_the_first_parallel_arms(waves):
    run = waves[1]
    assert run.error is None, run.error
    arms = grid_names()[:4]
    releases = [slot_release_name(i) for i in range(1, 5)]  # fixed slots, in the grid's order
    assert sorted(r.name for r in run.of_type(SERVER)) == sorted(["baseline", *releases])
    charts = {r.name: r for r in run.of_type(CHART)}
    assert "candidate" not in charts  # the stack's own candidate is only the grid's template
    assert {n: c.inputs["name"] for n, c in charts.items()} == {"baseline": "sglang-baseline",
                                                                **{r: r for r in releases}}
    grid = expand(load_stack(STACK))
    stack = stack_with(wave=1)
    for name, release in zip(arms, releases):
        arm = grid.arm(name).arm
        assert charts[release].inputs["values"] == wire(chart_values(stack, arm, stack_name=STACK, arm_name=name))
        assert charts[release].inputs["values"]["configHash"] == arm.config_hash
    out = run.outputs
    assert out["sweep_wave"] == 1 and out["sweep_waves"] == 11 and out["sweep_carried"] is None
    assert list(out["sweep_arms"]) == arms
    ns = stack.namespace
    for name, release in zip(arms, releases):
        entry = out["sweep_arms"][name]
        assert entry == {"url": f"http://{release}.{ns}.svc.cluster.local:30000",
                         "config_hash": grid.arm(name).config_hash, "release": release, "carried": False}
    assert out["config_hashes"] == {"baseline": grid.baseline.config_hash,
                                    **{a: grid.arm(a).config_hash for a in arms}}
    assert out["baseline_url"] == f"http://sglang-baseline.{ns}.svc.cluster.local:30000"


def test_later_waves_change_only_the_candidates(waves):
    arms = grid_names()
    baselines = [w.named(CHART, "baseline").inputs for w in waves.values()]
    assert baselines[0] == baselines[1] == baselines[2]
    assert baselines[0]["values"]["configHash"] == baseline_arm(load_stack(STACK).config).config_hash
    options = [w.options_of(CHART, "baseline") for w in waves.values()]
    assert options[0] == options[1] == options[2]
    server_options = [w.options_of(SERVER, "baseline") for w in waves.values()]
    assert server_options[0] == server_options[1] == server_options[2]
    # wave 2: the next parallel-arms - 1 arms and the carried leader
    two = waves[2].outputs
    assert list(two["sweep_arms"]) == [*arms[4:7], arms[2]]
    assert two["sweep_carried"] == arms[2] and two["sweep_arms"][arms[2]]["carried"] is True
    last = waves[11].outputs
    assert list(last["sweep_arms"]) == [arms[31], arms[5]]  # 32 arms (SGLang 0.5.23 refuses 8 adaptive ones): 11 waves
    # the Job is renamed (a new comparison), its ConfigMap of results too
    jobs = {w: run.outputs["benchmark_job"] for w, run in waves.items()}
    assert len(set(jobs.values())) == 3


def test_the_namespace_secret_and_probe_are_the_same_in_every_wave(waves):
    def shared(run):
        return sorted((r.typ, r.name, json.dumps(r.inputs, sort_keys=True)) for r in run.applied()
                      if not r.name.startswith(("benchmark", "preflight")))  # both check the wave's own arms
    assert shared(waves[1]) == shared(waves[2]) == shared(waves[11])


def test_the_benchmark_job_runs_the_sweep_against_the_wave_services(waves):
    stack = stack_with(wave=2, carry_arm=grid_names()[2])
    plan = benchmark_plan(stack, STACK)
    command = plan.job["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[:4] == ["sglab", "sweep", "--stack", STACK]
    assert command[command.index("--target") + 1] == "in-cluster"
    assert command[command.index("--baseline-url") + 1] == waves[2].outputs["baseline_url"]
    given = dict(command[i + 1].split("=", 1) for i, part in enumerate(command) if part == ARM_URL_FLAG)
    assert given == {name: entry["url"] for name, entry in waves[2].outputs["sweep_arms"].items()}
    assert command[command.index(RESULT_CONFIGMAP_FLAG) + 1] == plan.names.result_configmap
    assert "--no-confirm" in command
    (job,) = [r for r in waves[2].of_type("kubernetes:batch/v1:Job") if r.name == "benchmark-job"]
    assert job.inputs["spec"]["template"]["spec"]["containers"][0]["command"] == command
    deps = waves[2].options_of("kubernetes:batch/v1:Job", "benchmark-job")["dependencies"]
    for server in ["baseline", *(e["release"] for e in waves[2].outputs["sweep_arms"].values())]:
        assert any(d.endswith(f"{CHART}::{server}") for d in deps), (server, deps)  # a component: its chart


def test_the_pods_stack_file_expands_to_the_same_arms():
    """The Job loads the stack from its ConfigMap: the same arms, names and config hashes as the program's."""
    stack = stack_with(wave=3, carry_arm=grid_names()[1])
    plan = benchmark_plan(stack, STACK)
    from ruamel.yaml import YAML

    text = plan.stack_configmap["data"][f"Pulumi.{STACK}.yaml"]
    document = YAML(typ="safe").load(text)["config"]
    in_pod = load_mapping(STACK, load_stack(STACK).path, {k.split(":", 1)[1]: v for k, v in document.items()})
    assert in_pod.config.sweep.wave == 3
    pod_grid = expand(in_pod)
    program_grid = sweep_grid(stack, STACK)
    assert [(a.name, a.config_hash) for a in pod_grid.arms] == [(a.name, a.config_hash) for a in program_grid.arms]
    assert [(a.name, a.config_hash) for a in program_grid.arms] == [
        (a.name, a.config_hash) for a in expand(load_stack(STACK)).arms]


def sweep_summary(stack, *, winner: str, ranking: list[dict]) -> dict:
    n = names(stack, STACK)
    document = {"schema_version": 1, "run_id": "20261201-120000-abcd", "stack": STACK, "kind": "sweep",
                "complete": True,
                "verdict": {"kind": "sweep", "outcome": "swept", "sentence": f"leader {winner}", "winner": winner,
                            "winner_config_hash": "f" * 64, "winner_cleared_min": True, "ranking": ranking}}
    encoded = encode_result(json.dumps(document))
    state = {"metadata": {"name": n.result_configmap, "namespace": stack.namespace},
             "binaryData": {"result.json.gz": encoded.parts[0]}, "data": {SUMMARY_KEY: encoded.summary}}
    return {f"{stack.namespace}/{n.result_configmap}": state}


def test_the_waves_ranking_and_leader_are_stack_outputs():
    arms = grid_names()
    stack = stack_with(wave=2, carry_arm=arms[2])
    ranking = [{"level": 1, "rank": 1, "arm": arms[2], "status": "leader", "rounds": 32, "gain": 0.12, "low": 0.09,
                "high": 0.15, "eliminated_at": None, "reason": None},
               {"level": 1, "rank": 2, "arm": arms[4], "status": "eliminated", "rounds": 6, "gain": -0.1,
                "low": -0.2, "high": -0.01, "eliminated_at": 6, "reason": "below-min"}]
    run = run_program(STACK, sweep(wave=2, carry_arm=arms[2]), reads=sweep_summary(stack, winner=arms[2],
                                                                                 ranking=ranking))
    assert run.error is None, run.error
    out = run.outputs
    assert out["sweep_status"] == "swept" and out["sweep_leader"] == arms[2]
    assert out["sweep_leader_config_hash"] == "f" * 64
    assert out["sweep_ranking"] == wire(ranking) or out["sweep_ranking"] == ranking
    assert out["sweep_next"] == (f"sglab sweep --stack {STACK} --next  (runs: pulumi config set "
                                 f"--path sglab:sweep.wave 3 && pulumi config set --path sglab:sweep.carry-arm "
                                 f"{arms[2]} && pulumi up)")
    assert "benchmark_verdict" not in out  # a sweep is no A/B verdict


def test_before_the_job_has_stored_its_result_the_outputs_say_pending():
    run = run_program(STACK, sweep(wave=1))
    assert run.outputs["sweep_status"] == "pending" and run.outputs["sweep_leader"] is None
    assert run.outputs["sweep_ranking"] == [] and run.outputs["sweep_next"].startswith("wait for")


@pytest.mark.parametrize("keys, key, words", [
    ({"wave": 12}, "sweep.wave", ["12", "11 waves", "1..11"]),
    ({"wave": 1, "carry_arm": "s1-k1-d2"}, "sweep.carry-arm", ["wave 1 has no previous wave"]),
    ({"wave": 2, "carry_arm": "s9-k1-d10"}, "sweep.carry-arm", ["not an arm of the grid"]),
    ({"wave": 2, "carry_arm": "s5-k1-d6-SYS-adaptive"}, "sweep.carry-arm", ["this or a later wave"]),
    ({"wave": 2, "parallel_arms": 1, "carry_arm": "s1-k1-d2"}, "sweep.carry-arm", ["parallel-arms 2 or more"]),
])
def test_a_bad_wave_stops_pulumi_up_naming_the_key(keys, key, words):
    run = run_program(STACK, sweep(**keys))
    assert run.error is not None
    message = str(run.error)
    assert f"Pulumi.{STACK}.yaml: {key}: " in message and "fix:" in message
    for word in words:
        assert word in message
    assert run.of_type(CHART) == []  # nothing is deployed


def test_wave_0_is_the_calibration_step_every_slot_serves_the_baselines_config():
    """The calibration step before wave 1 (docs/sweep.md, "On a cluster"): the same slots, each serving the
    baseline's config (`baseline@<slot>`, a candidate-role server: not selected by the baseline's objects), and a Job
    that runs `sglab sweep` against them beside the baseline; nothing pins a slot yet (the step finds the nodes)."""
    run = run_program(STACK, sweep(wave=0))
    assert run.error is None, run.error
    stack = stack_with(wave=0)
    releases = [slot_release_name(i) for i in range(1, 5)]
    out = run.outputs
    assert out["sweep_wave"] == 0 and list(out["sweep_arms"]) == [f"baseline@{r}" for r in releases]
    base = baseline_arm(stack).config_hash
    assert all(e["config_hash"] == base and not e["carried"] for e in out["sweep_arms"].values())
    assert [e["release"] for e in out["sweep_arms"].values()] == releases
    charts = {r.name: r for r in run.of_type(CHART)}
    for release in releases:
        values = charts[release].inputs["values"]
        assert values["configHash"] == base and values["arm"] == "candidate"
        assert values["nodeSelector"] == dict(stack.placement.node_selector)  # no pin
    command = benchmark_plan(stack, STACK).job["spec"]["template"]["spec"]["containers"][0]["command"]
    given = dict(command[i + 1].split("=", 1) for i, part in enumerate(command) if part == ARM_URL_FLAG)
    assert given == {name: entry["url"] for name, entry in out["sweep_arms"].items()}
    assert out["sweep_next"].startswith("wait for")


def test_a_calibration_step_without_calibration_rounds_is_refused_naming_the_key():
    run = run_program(STACK, sweep(wave=0, calibration_rounds=0))
    assert run.error is not None and "sweep.wave" in str(run.error) and "calibration-rounds" in str(run.error)


def test_later_waves_pin_each_slot_to_its_calibrated_node_and_the_confirmation_does_not():
    nodes = ["gpu-a", "gpu-b", "gpu-c", "gpu-d"]
    run = run_program(STACK, sweep(wave=2, carry_arm=grid_names()[2], slot_nodes=nodes))
    assert run.error is None, run.error
    charts = {r.name: r for r in run.of_type(CHART)}
    pool = dict(stack_with(wave=1).placement.node_selector)
    for i, node in enumerate(nodes, 1):
        assert charts[slot_release_name(i)].inputs["values"]["nodeSelector"] == {**pool,
                                                                                 "kubernetes.io/hostname": node}
    assert charts["baseline"].inputs["values"]["nodeSelector"] == pool  # the baseline is never restarted to pin it
    confirmation = run_program(STACK, sweep(slot_nodes=nodes))  # sweep.wave unset: the crossover moves the arms
    assert all(c.inputs["values"]["nodeSelector"] == pool for c in confirmation.of_type(CHART))


def test_slot_nodes_that_do_not_match_the_slots_are_refused_naming_the_key():
    run = run_program(STACK, sweep(wave=1, slot_nodes=["gpu-a"]))
    assert run.error is not None and "sweep.slot-nodes" in str(run.error) and "4" in str(run.error)


def test_a_wave_without_the_previous_leader_is_deployed_with_a_note():
    wave = plan_wave(stack_with(wave=2), STACK)
    assert [a.arm.name for a in wave.arms] == grid_names()[4:7] and wave.carried is None
    assert "sweep.carry-arm" in wave.notes[0] and "wave 1" in wave.notes[0]
    run = run_program(STACK, sweep(wave=2))
    assert run.error is None and run.outputs["sweep_carried"] is None


def test_in_cluster_locust_is_refused_for_a_wave():
    run = run_program(STACK, {**sweep(wave=1), "locust": {"enabled": True}})
    assert run.error is not None and "locust.enabled" in str(run.error)


def test_without_a_wave_the_sweep_stack_deploys_its_own_pair_in_the_leader_slot():
    run = run_program(STACK)
    assert sorted(r.name for r in run.of_type(SERVER)) == ["baseline", slot_release_name(4)]
    assert run.outputs["candidate_release"] == slot_release_name(4)
    assert "sweep_wave" not in run.outputs


def test_arm_labels_are_label_values_stable_and_distinct():
    grid = expand(load_stack(STACK))
    labels = [arm_label(a.name) for a in grid.arms]
    assert len(set(labels)) == len(labels) and labels == [a.name for a in grid.arms]  # valid names stay as they are
    long = "s3-k1-d4-" + "a" * 60 + "-adaptive"
    assert len(arm_label(long)) <= 63 and LABEL_VALUE.match(arm_label(long))
    assert arm_label(long) != arm_label(long.replace("-adaptive", ""))
    assert arm_label("s3 k1") != arm_label("s3_k1") and LABEL_VALUE.match(arm_label("s3 k1"))


def test_render_shows_the_wave_and_its_manifests_validate():
    loaded = load_stack(STACK)
    raw = {**json.loads(json.dumps(loaded.raw)), **sweep(wave=2, carry_arm=grid_names()[0])}
    rendered = render_stack(load_mapping(STACK, loaded.path, raw))
    services = sorted(o["metadata"]["name"] for o in rendered.objects if o["kind"] == "Service")
    assert services == sorted(["sglang-baseline", *(slot_release_name(i) for i in range(1, 5))])
    arms = [*grid_names()[4:7], grid_names()[0]]
    deployments = [o for o in rendered.objects if o["kind"] == "Deployment"]
    assert len(deployments) == 5
    assert {d["metadata"]["annotations"].get("sglab/arm-name") for d in deployments} == {None, *arms}
    (job,) = [o for o in rendered.objects if o["kind"] == "Job" and o["metadata"]["name"].startswith("sglab-bench")]
    assert job["spec"]["template"]["spec"]["containers"][0]["command"][:2] == ["sglab", "sweep"]
    for obj in rendered.objects:
        for version in ("1.31", kubernetes_validate.latest_version()):
            kubernetes_validate.validate(obj, version, strict=True)


def test_a_wave_beyond_the_grid_is_refused_by_render_too():
    loaded = load_stack(STACK)
    raw = {**json.loads(json.dumps(loaded.raw)), **sweep(wave=99)}
    with pytest.raises(ConfigError, match="sweep.wave: is 99"):
        render_stack(load_mapping(STACK, loaded.path, raw))


def test_a_calibrated_waves_next_step_recomputes_its_leader_from_the_pulled_results():
    """After a calibration step the Job's own leader is the uncorrected race's: sweep_next says to pull the results
    and let `--next` recompute the leader net of the slot nodes, never to carry the Job's leader as it is."""
    arms = grid_names()
    keys = dict(wave=2, carry_arm=arms[2], slot_nodes=["gpu-a", "gpu-b", "gpu-c", "gpu-d"], calibration_run="cal-run")
    stack = stack_with(**keys)
    run = run_program(STACK, sweep(**keys), reads=sweep_summary(stack, winner=arms[4], ranking=[]))
    assert run.error is None, run.error
    assert run.outputs["sweep_next"] == (f"sglab results pull --stack {STACK} && sglab sweep --stack {STACK} --next  "
                                         "(recomputes wave 2's leader net of the slot nodes from its and the "
                                         "calibration step's sealed results, then runs wave 3 carrying it)")


def test_a_calibrated_waves_job_may_get_the_calibration_steps_result_configmaps_and_nothing_else():
    """The wave's Job reads the calibration step's sealed block itself (its race is net of the slot nodes from its
    first look): its Role gets exactly those ConfigMaps by name (get only); an uncalibrated wave's gets none."""
    from sglab.results.sink import part_names

    keys = dict(wave=2, carry_arm=grid_names()[2], slot_nodes=["gpu-a", "gpu-b", "gpu-c", "gpu-d"],
                calibration_run="cal-run", calibration_configmap="sglab-result-0123456789ab")
    rules = benchmark_plan(stack_with(**keys), STACK).role["rules"]
    reads = [r for r in rules if r.get("resources") == ["configmaps"] and r["verbs"] == ["get"]]
    assert reads == [{"apiGroups": [""], "resources": ["configmaps"],
                      "resourceNames": part_names("sglab-result-0123456789ab"), "verbs": ["get"]}]
    plain = benchmark_plan(stack_with(wave=2, carry_arm=grid_names()[2]), STACK).role["rules"]
    assert not [r for r in plain if r.get("resources") == ["configmaps"] and r["verbs"] == ["get"]]


@pytest.mark.parametrize("keys", [
    {"wave": 0},
    {"wave": 2, "carry_arm": "s1-k1-d2", "slot_nodes": ["gpu-a", "gpu-b", "gpu-c", "gpu-d"],
     "calibration_run": "cal-run", "calibration_configmap": "sglab-result-0123456789ab"},
])
def test_render_of_the_calibration_step_and_of_a_calibrated_wave_validates(keys):
    """`baseline@<slot>` becomes label values and annotations, the pins a nodeSelector, the step's read a Role rule:
    every manifest validates (kubernetes-validate strict)."""
    loaded = load_stack(STACK)
    raw = {**json.loads(json.dumps(loaded.raw)), **sweep(**keys)}
    rendered = render_stack(load_mapping(STACK, loaded.path, raw))
    deployments = [o for o in rendered.objects if o["kind"] == "Deployment"]
    assert len(deployments) == 5
    for d in deployments:
        for value in d["spec"]["template"]["metadata"]["labels"].values():
            assert LABEL_VALUE.match(value) and len(value) <= 63, value
    if keys["wave"] == 0:
        assert {d["metadata"]["annotations"].get("sglab/arm-name") for d in deployments} == {
            None, *(f"baseline@{slot_release_name(i)}" for i in range(1, 5))}
    else:
        pinned = {d["metadata"]["name"]: d["spec"]["template"]["spec"]["nodeSelector"].get("kubernetes.io/hostname")
                  for d in deployments}
        assert pinned == {"sglang-baseline": None, **{slot_release_name(i): n for i, n in
                                                      enumerate(keys["slot_nodes"], 1)}}
    for obj in rendered.objects:
        for version in ("1.31", kubernetes_validate.latest_version()):
            kubernetes_validate.validate(obj, version, strict=True)
