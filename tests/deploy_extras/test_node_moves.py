"""The benchmark Job carries out the design itself: it swaps (crossover) or switches (switchback) the arms' nodes
by patching exactly their Deployments, all patches before any wait, waits until each server is Ready on its new
node, says which node served which arm, ends the run invalid when a server does not come back, and notices a
server replaced behind its back. Against a fake API server through the real `kubernetes` client."""

from __future__ import annotations

import pytest

from sglab.config.loader import load_stack
from sglab.deploy.benchmark_job import benchmark_plan
from sglab.load.design import FIELD_MANAGER, HOSTNAME_LABEL, PINNED_BY, CannotMove, ClusterMover, MoveFailed
from .fake_cluster import FakeCluster

ARMS = {"baseline": "sglang-baseline", "candidate": "sglang-candidate"}


def cluster(**kwargs) -> FakeCluster:
    fake = FakeCluster(["gpu-node-x", "gpu-node-y"], **kwargs)
    fake.add_deployment("sglang-baseline", "gpu-node-x")
    fake.add_deployment("sglang-candidate", "gpu-node-y")
    return fake


def mover(fake: FakeCluster, *, timeout_s: float = 10.0, scaled_down_after: bool = False) -> ClusterMover:
    return ClusterMover(dict(ARMS), {arm: fake.url_of(dep) for arm, dep in ARMS.items()}, fake.namespace,
                        fake.apps_api(), fake.core_api(), ready_timeout_s=timeout_s, holder="sglab-bench-abc12",
                        scaled_down_after=scaled_down_after, poll_s=0.05)


def patches(fake: FakeCluster) -> list[tuple[str, dict, dict]]:
    return [(path.rsplit("/", 1)[1], query, body) for method, path, query, body in fake.requests if method == "PATCH"]


def test_the_job_finds_the_arms_on_their_nodes():
    with cluster() as fake:
        assert mover(fake).start() == {"baseline": ("gpu-node-x", 1.0), "candidate": ("gpu-node-y", 1.0)}


def test_a_crossover_swap_patches_both_deployments_before_waiting_and_ends_with_each_on_the_other_node():
    with cluster() as fake:
        m = mover(fake)
        m.start()
        before = len(fake.requests)
        started = m.move({"baseline": ("gpu-node-y", 1.0), "candidate": ("gpu-node-x", 1.0)})
        assert started == ["baseline", "candidate"]
        assert (fake.node_of("sglang-baseline"), fake.node_of("sglang-candidate")) == ("gpu-node-y", "gpu-node-x")
        methods = [method for method, *_ in fake.requests[before:]]
        # both patches first: each old pod must go before the other arm's new pod fits on its node
        assert methods[:2] == ["PATCH", "PATCH"] and "PATCH" not in methods[2:]
        for name, query, body in patches(fake):
            assert query["fieldManager"] == FIELD_MANAGER
            assert body["metadata"] == {"annotations": {PINNED_BY: "sglab-bench-abc12"}}
            assert "replicas" not in body["spec"]  # a swap never touches the field Pulumi owns
            (term,) = body["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
                "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
            want = "gpu-node-y" if name == "sglang-baseline" else "gpu-node-x"
            assert term == {"matchExpressions": [{"key": HOSTNAME_LABEL, "operator": "In", "values": [want]}]}
        assert m.check() is None


def test_a_server_that_does_not_come_back_ends_the_move_with_its_node_and_why():
    with cluster() as fake:
        fake.broken.add("gpu-node-y")  # the baseline's new pod never turns Ready there
        m = mover(fake, timeout_s=1.5)
        m.start()
        with pytest.raises(MoveFailed) as failed:
            m.move({"baseline": ("gpu-node-y", 1.0), "candidate": ("gpu-node-x", 1.0)})
        assert failed.value.arm == "baseline"
        assert "did not come back on node gpu-node-y within 1.5 s" in failed.value.reason
        assert "ContainersNotReady" in failed.value.reason  # what the API says it waits for


def test_a_switchback_stops_the_arm_out_of_turn_and_starts_the_other_on_the_one_node():
    with cluster() as fake:
        m = mover(fake)
        m.start()
        assert m.move({"candidate": None}) == []  # period 1: the baseline's turn on node x
        assert fake.node_of("sglang-candidate") is None and not fake._pods_of("sglang-candidate")
        started = m.move({"baseline": None, "candidate": ("gpu-node-x", 1.0)})  # period 2
        assert started == ["candidate"]
        assert fake.node_of("sglang-candidate") == "gpu-node-x" and not fake._pods_of("sglang-baseline")
        (stop, pin) = [body for _, _, body in patches(fake)][1:]
        assert stop["spec"] == {"replicas": 0}
        assert pin["spec"]["replicas"] == 1  # it was stopped: it starts again
        assert m.check() is None


def test_a_server_replaced_behind_the_runs_back_is_reported_at_the_periods_end():
    with cluster() as fake:
        m = mover(fake)
        m.start()
        m.move({"baseline": ("gpu-node-y", 1.0), "candidate": ("gpu-node-x", 1.0)})
        fake.replace_pod("sglang-candidate")
        import time

        time.sleep(0.5)
        changed = m.check()
        assert changed is not None and "candidate server changed while a period measured" in changed


def test_the_job_takes_its_pins_back_in_the_patch_that_scales_the_arms_to_zero():
    with cluster() as fake:
        m = mover(fake, scaled_down_after=True)
        m.start()
        m.move({"baseline": ("gpu-node-y", 1.0), "candidate": ("gpu-node-x", 1.0)})
        notes = m.finish()
        assert notes == ["the Job scaled sglang-baseline, sglang-candidate to 0 and took its node pins back in the "
                         "same patch"]
        for name in ARMS.values():
            dep = fake.deployments[name]
            assert dep["spec"]["replicas"] == 0 and "nodeAffinity" not in dep["spec"]["template"]["spec"]["affinity"]
            assert PINNED_BY not in dep["metadata"]["annotations"]


def test_without_scaling_down_the_pins_stay_and_the_result_says_so():
    with cluster() as fake:
        m = mover(fake)
        m.start()
        m.move({"baseline": ("gpu-node-y", 1.0), "candidate": ("gpu-node-x", 1.0)})
        (note,) = m.finish()
        assert "left Deployments sglang-baseline, sglang-candidate pinned" in note
        assert fake.deployments["sglang-baseline"]["spec"]["replicas"] == 1


def test_arms_the_job_may_not_read_are_not_moved_and_the_reason_is_given():
    with cluster() as fake:
        m = mover(fake)
        m.deployments = {"baseline": "sglang-baseline", "candidate": "not-granted"}
        with pytest.raises(CannotMove, match="cannot read Deployment lab/not-granted"):
            m.start()


def _allowed(rules: list[dict], method: str, path: str) -> bool:
    """Whether a Role's rules allow one recorded request (RBAC: verb, API group, resource, name)."""
    parts = path.strip("/").split("/")
    group = "" if parts[0] == "api" else parts[1]
    rest = parts[2:] if parts[0] == "api" else parts[3:]  # namespaces, NAMESPACE, RESOURCE[, NAME]
    resource = rest[2]
    name = rest[3] if len(rest) > 3 else None
    verb = {"PATCH": "patch", "GET": "get" if name else "list"}[method]
    return any(group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"]
               and (name is None and "resourceNames" not in r or name in r.get("resourceNames", [name]))
               for r in rules)


def test_every_call_of_a_swap_is_one_the_jobs_role_allows_and_no_more_is_granted():
    plan = benchmark_plan(load_stack("eagle-nccl-ll").config, "eagle-nccl-ll")
    rules = plan.role["rules"]
    assert {"apiGroups": ["apps"], "resources": ["deployments"], "resourceNames": list(ARMS.values()),
            "verbs": ["get", "patch"]} in rules
    command = plan.job["spec"]["template"]["spec"]["containers"][0]["command"]
    assert [command[i + 1] for i, part in enumerate(command) if part == "--deployment"] == \
        [f"{arm}={dep}" for arm, dep in ARMS.items()]
    with cluster() as fake:
        m = mover(fake, scaled_down_after=True)
        m.start()
        m.move({"baseline": ("gpu-node-y", 1.0), "candidate": ("gpu-node-x", 1.0)})
        m.move({"baseline": None})
        m.finish()
        refused = [(method, path) for method, path, *_ in fake.requests if not _allowed(rules, method, path)]
        assert refused == []
        assert _allowed(rules, "PATCH", "/apis/apps/v1/namespaces/lab/deployments/another-teams-server") is False


def test_production_traffic_is_never_moved():
    plan = benchmark_plan(load_stack("production").config, "production")
    command = plan.job["spec"]["template"]["spec"]["containers"][0]["command"]
    assert "--deployment" not in command
    assert not [r for r in plan.role["rules"] if r["resources"] == ["deployments"]]


# The bench runner in a child process (it imports Locust, whose gevent monkey-patching would break the Pulumi mocks
# of this process): two real simulators serve the arms, the fake API server above stands for the cluster the
# benchmark Job moves them in. argv: the fake's URL, the stack, the results directory.
_RUN = """
import locust, json, sys
from pathlib import Path
import sglab.load.design as design
from kubernetes import client
from sglab.config.loader import load_stack
from sglab.load.request import BenchRequest
from sglab.load.runner import run_bench
from sglab.load.schedule import plan_for
from sglab.load.targets import start_sims

configuration = client.Configuration()
configuration.host = sys.argv[1]
api = client.ApiClient(configuration)
design.cluster_apis = lambda: (client.AppsV1Api(api), client.CoreV1Api(api), "lab")
if len(sys.argv) > 4:  # a startup timeout shorter than the stack's (an hour at least)
    stack_timeout = design.ClusterMover
    design.ClusterMover = lambda *args, **kw: stack_timeout(*args, **{**kw, "ready_timeout_s": float(sys.argv[4])})
loaded = load_stack(sys.argv[2])
plan = plan_for(loaded, overrides={"concurrency": [1], "rounds": 4, "round_duration_s": 1, "period_rounds": 1,
                                   "warmup_requests": 1, "max_new_tokens": 16, "prompts": {"source": "random"}})
out = Path(sys.argv[3])
request = BenchRequest(loaded=loaded, plan=plan, target_kind="in-cluster", out=out, progress=False,
                       deployments={"baseline": "sglang-baseline", "candidate": "sglang-candidate"})
with start_sims(request.arms, extra_env={"SGLAB_SIM_TIME_SCALE": "5"}, log_dir=out) as targets:
    request.urls = dict(targets.urls)
    result, run_dir = run_bench(request)
print(run_dir)
"""


def _bench_in_cluster(fake: FakeCluster, tmp_path, *extra: str) -> dict:
    import json
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", _RUN, fake.url, "eagle-nccl-ll", str(tmp_path), *extra],
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_dir = proc.stdout.strip().splitlines()[-1]
    return json.loads((tmp_path / run_dir / "result.json").read_text())


@pytest.mark.slow
def test_the_jobs_bench_swaps_the_arms_nodes_between_periods_and_records_who_served_where(tmp_path):
    with cluster() as fake:
        result = _bench_in_cluster(fake, tmp_path)
        assert (fake.node_of("sglang-baseline"), fake.node_of("sglang-candidate")) == (None, None)  # scaled to 0
    assert result["complete"] is True and result["invalid_reason"] is None
    design = result["design"]
    assert design["design"] == "crossover"
    assert design["nodes"] == {"baseline": ["gpu-node-x", "gpu-node-y"] * 2,
                               "candidate": ["gpu-node-y", "gpu-node-x"] * 2}
    assert design["restarts"] == 6 and design["restart_s"] > 0  # three swaps, both servers each time
    assert design["notes"] == ["the Job scaled sglang-baseline, sglang-candidate to 0 and took its node pins back "
                               "in the same patch"]
    (level,) = result["levels"]
    measured = sorted((r["round_index"], r["arm"], r["period"], r["node"]) for r in level["rounds"] if not r["warmup"])
    assert measured == [(0, "baseline", 1, "gpu-node-x"), (0, "candidate", 1, "gpu-node-y"),
                        (1, "baseline", 2, "gpu-node-y"), (1, "candidate", 2, "gpu-node-x"),
                        (2, "baseline", 3, "gpu-node-x"), (2, "candidate", 3, "gpu-node-y"),
                        (3, "baseline", 4, "gpu-node-y"), (3, "candidate", 4, "gpu-node-x")]


@pytest.mark.slow
def test_a_server_that_does_not_come_back_after_a_swap_ends_the_jobs_run_invalid(tmp_path):
    with cluster() as fake:
        fake.broken.add("gpu-node-y")  # the baseline never turns Ready on the candidate's node
        result = _bench_in_cluster(fake, tmp_path, "2")
    assert result["invalid_reason"].startswith("baseline server did not come back on node gpu-node-y within 2 s")
    assert result["design"]["nodes"]["baseline"][0] == "gpu-node-x"
    (level,) = result["levels"]
    assert {r["period"] for r in level["rounds"] if not r["warmup"]} == {1}  # nothing measured after the swap


def test_the_bench_takes_one_deployment_per_arm_and_only_in_the_cluster():
    from sglab.cli import UsageError, build_parser
    from sglab.cli.bench import build_request

    urls = ["--baseline-url", "http://sglang-baseline:30000", "--candidate-url", "http://sglang-candidate:30000"]

    def request(*words: str):
        return build_request(build_parser("bench").parse_args(["bench", "--stack", "eagle-nccl-ll", *words]))

    job = ["--target", "in-cluster", *urls, "--result-configmap", "sglab-result-x"]
    found = request(*job, "--deployment", "baseline=sglang-baseline", "--deployment", "candidate=sglang-candidate")
    assert found.target_kind == "in-cluster"
    assert found.deployments == {"baseline": "sglang-baseline", "candidate": "sglang-candidate"}
    with pytest.raises(UsageError, match="goes with --target in-cluster"):
        request(*urls, "--deployment", "baseline=a", "--deployment", "candidate=b")
    with pytest.raises(UsageError, match="one per arm"):
        request(*job, "--deployment", "baseline=a")
    with pytest.raises(UsageError, match="ARM one of baseline, candidate"):
        request(*job, "--deployment", "leader=a", "--deployment", "baseline=b")


def test_the_in_cluster_target_is_said_never_implied_by_where_the_result_is_stored():
    from sglab.cli import UsageError, build_parser
    from sglab.cli.bench import build_request

    urls = ["--baseline-url", "http://sglang-baseline:30000", "--candidate-url", "http://sglang-candidate:30000"]

    def request(*words: str):
        return build_request(build_parser("bench").parse_args(["bench", "--stack", "eagle-nccl-ll", *words]))

    assert request("--target", "in-cluster", *urls).target_kind == "in-cluster"
    with pytest.raises(UsageError, match="--result-configmap.*--target in-cluster"):
        request(*urls, "--result-configmap", "sglab-result-x")  # it used to switch the target silently
    with pytest.raises(UsageError, match="--target in-cluster needs --baseline-url and --candidate-url"):
        request("--target", "in-cluster")


def test_a_sweep_waves_job_may_read_where_every_slot_runs_so_its_evidence_names_their_nodes():
    import json

    from sglab.config.loader import load_mapping

    loaded = load_stack("eagle-sweep")
    sweep = {**json.loads(json.dumps(loaded.raw["sweep"])), "wave": 1}
    stack = load_mapping("eagle-sweep", loaded.path, {**json.loads(json.dumps(loaded.raw)), "sweep": sweep}).config
    plan = benchmark_plan(stack, "eagle-sweep")
    assert plan.wave is not None
    slots = ["sglang-baseline", *(f"sglang-slot-{i}" for i in range(1, 5))]
    rules = plan.role["rules"]
    assert {"apiGroups": [""], "resources": ["services"], "resourceNames": slots, "verbs": ["get"]} in rules
    assert {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]} in rules
    assert not [r for r in rules if r["resources"] == ["deployments"]]  # a wave's race never moves
