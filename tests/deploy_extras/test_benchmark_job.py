"""The post-`pulumi up` benchmark Job: identity (hypothesis), minimal RBAC, timeouts, wiring, schema validity."""

from __future__ import annotations

import copy

import kubernetes_validate
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from sglab.config.arms import baseline_arm, candidate_arm
from sglab.config.loader import load_stack
from sglab.core.paths import stack_path
from sglab.config.stack import StackConfig
from sglab.deploy.naming import BENCH_SERVICE_ACCOUNT
from sglab.deploy.benchmark_job import (STACKS_MOUNT, arm_read_rules, benchmark_plan, names,
                                        role_rules, stack_file_text)
from sglab.results.sink import RESULT_PARTS

from pulumi_harness import run_program

STACK = "eagle-nccl-ll"
K8S_VERSIONS = ("1.31.0", "1.37.0")
JOB = "kubernetes:batch/v1:Job"
ROLE = "kubernetes:rbac.authorization.k8s.io/v1:Role"
BINDING = "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding"
SA = "kubernetes:core/v1:ServiceAccount"
CLUSTER_ROLE = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole"
CLUSTER_BINDING = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding"
CONFIGMAP = "kubernetes:core/v1:ConfigMap"
CHART = "kubernetes:helm.sh/v4:Chart"
CRON_JOB = "kubernetes:batch/v1:CronJob"


def bench_jobs(run) -> list:
    """The benchmark Job the program declares (the preflight is a Job too: tests/deploy/test_preflight.py)."""
    return [r for r in run.of_type(JOB) if r.name == "benchmark-job"]


def raw_stack(stack: str = STACK) -> dict:
    config = YAML(typ="safe").load(stack_path(stack).read_text())["config"]
    return {key.partition(":")[2]: value for key, value in config.items() if key.startswith("sglab:")}


BASE = raw_stack()


def put(raw: dict, path: str, value) -> None:
    *parents, last = path.split(".")
    node = raw
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value


def set_steps(raw: dict, steps: int) -> None:
    put(raw, "candidate.speculative.num-steps", steps)
    put(raw, "candidate.speculative.num-draft-tokens", steps + 1)


label_text = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=8)

# Settings the Job's result depends on (arms, load plan, policy, rerun) or its instrument (image, size, labels).
RELEVANT = {
    "server.mem-fraction-static": st.sampled_from([0.8, 0.85, 0.9]),
    "server.num-continuous-decode-steps": st.sampled_from([1, 2, 8]),
    "nccl.NCCL_ALGO": st.just("Tree"),
    "env.SGLAB_TEST_FLAG": label_text,
    "candidate.speculative.num-steps": st.sampled_from([3, 4, 5]),
    "image": st.sampled_from(["lmsysorg/sglang:v0.5.4-cu129", "lmsysorg/sglang:dev"]),
    "load.rounds": st.integers(2, 12).filter(lambda n: n != 6),
    "load.max-new-tokens": st.sampled_from([32, 64, 256]),
    "load.concurrency": st.sampled_from([[1], [1, 2, 8], [1, 4, 16, 64]]),
    "policy.min-gain": st.sampled_from([0.0, 0.02, 0.05]),
    "benchmark-job.rerun": label_text,
    "benchmark-job.quick": st.just(True),
    "benchmark-job.image": st.sampled_from(["registry.example/sglab:0.2.0"]),
    "benchmark-job.cpu": st.sampled_from(["1", "4"]),
    "project-image": st.sampled_from(["registry.example/sglab:0.1.1"]),
    "image-pull-policy": st.sampled_from(["Always", "Never"]),
    "network-policy.allowed-from": st.dictionaries(st.sampled_from(["team", "sglab/role"]), label_text,
                                                   min_size=1).filter(lambda d: d != {"sglab/role": "loadgen"}),
    # Where the pod may schedule (a tainted GPU-only pool) and the disruption guard beside it: in its pod template.
    "placement.tolerations": st.lists(st.fixed_dictionaries({"key": label_text, "operator": st.just("Exists")}),
                                      max_size=3),
    "placement.priority-class-name": label_text,
    "disruption-budget.enabled": st.just(False),
    "image-pull-secrets": st.lists(label_text, min_size=1, max_size=2, unique=True),
}
# Settings that do not change what the Job measures.
IRRELEVANT = {
    "placement.node-selector": st.dictionaries(st.sampled_from(["zone", "pool"]), label_text),
    "rollout.startup-timeout-min": st.integers(1, 90),
    "rollout.probe-period-s": st.integers(1, 60),
    "resources.shm-size": st.sampled_from(["32Gi", "128Gi"]),
    "benchmark-job.timeout-min": st.integers(1, 600),
    "locust.workers": st.integers(1, 16),
    "locust.service-type": st.sampled_from(["NodePort", "LoadBalancer"]),
    "network-policy.enabled": st.just(False),
}


def mutate(raw: dict, changes: dict) -> dict:
    out = copy.deepcopy(raw)
    for path, value in changes.items():
        if path == "candidate.speculative.num-steps":
            set_steps(out, value)
        else:
            put(out, path, value)
    return out


@st.composite
def variations(draw):
    relevant = draw(st.lists(st.sampled_from(sorted(RELEVANT)), unique=True, max_size=3))
    irrelevant = draw(st.lists(st.sampled_from(sorted(IRRELEVANT)), unique=True, max_size=4))
    changes = {k: draw(RELEVANT[k]) for k in relevant} | {k: draw(IRRELEVANT[k]) for k in irrelevant}
    return relevant, changes


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(variations())
def test_job_name_changes_iff_a_comparison_relevant_setting_changes(variation):
    relevant, changes = variation
    base = StackConfig.model_validate(BASE)
    changed = StackConfig.model_validate(mutate(BASE, changes))
    assert (names(changed, STACK).job != names(base, STACK).job) == bool(relevant), changes
    if not relevant:
        # Nothing in the Job's immutable pod template moves, so Pulumi has nothing to replace.
        before, after = benchmark_plan(base, STACK).job, benchmark_plan(changed, STACK).job
        assert after["metadata"] == before["metadata"]
        assert after["spec"]["template"] == before["spec"]["template"]


EXAMPLES = {
    "server.mem-fraction-static": 0.9, "server.num-continuous-decode-steps": 1, "nccl.NCCL_ALGO": "Tree",
    "env.SGLAB_TEST_FLAG": "1", "candidate.speculative.num-steps": 3, "image": "lmsysorg/sglang:dev",
    "load.rounds": 8, "load.max-new-tokens": 64, "load.concurrency": [1], "policy.min-gain": 0.02,
    "benchmark-job.rerun": "again", "benchmark-job.quick": True, "benchmark-job.image": "registry.example/sglab:2",
    "benchmark-job.cpu": "4", "project-image": "registry.example/sglab:0.1.1",
    "image-pull-policy": "Always", "network-policy.allowed-from": {"team": "bench"},
    "placement.tolerations": [{"key": "dedicated", "operator": "Exists"}], "placement.priority-class-name": "batch",
    "disruption-budget.enabled": False, "image-pull-secrets": ["registry-creds"],
}


def test_each_relevant_setting_alone_renames_the_job():
    assert set(EXAMPLES) == set(RELEVANT)
    base = names(StackConfig.model_validate(BASE), STACK).job
    for key, value in EXAMPLES.items():
        assert names(StackConfig.model_validate(mutate(BASE, {key: value})), STACK).job != base, key


def test_names_fit_kubernetes_limits():
    n = names(StackConfig.model_validate(BASE), STACK)
    assert n.job.startswith("sglab-bench-") and len(n.comparison) == 12
    assert all(len(x) <= 63 for x in (n.job, n.result_configmap, n.stack_configmap))


@pytest.fixture(scope="module")
def program():
    run = run_program(STACK, {"benchmark-job": {"timeout-min": 45, "read-node-labels": True},
                              "rollout": {"pulumi-timeout-min": 120}})
    assert run.error is None
    return run


def test_program_declares_the_job_under_its_comparison_name(program):
    stack = load_stack(STACK).config
    (job,) = bench_jobs(program)
    assert job.inputs["metadata"]["name"] == names(stack, STACK).job
    rerun = run_program(STACK, {"benchmark-job": {"rerun": "again"}})
    placement = load_stack(STACK).raw["placement"]
    moved = run_program(STACK, {"placement": {**placement, "node-selector": {"pool": "gpu"}}})  # the servers only
    assert bench_jobs(rerun)[0].inputs["metadata"]["name"] != job.inputs["metadata"]["name"]
    assert bench_jobs(moved)[0].inputs == bench_jobs(run_program(STACK))[0].inputs


def test_rbac_is_exactly_get_and_update_of_the_result_configmap(program):
    stack = load_stack(STACK).config
    n = names(stack, STACK)
    (role,) = [r for r in program.of_type(ROLE) if r.name == "benchmark-role"]  # the guard's reaper has its own
    # the result ConfigMaps, and for the machine in the evidence the arms' two Services by name and their pods
    assert role.inputs["rules"] == [{"apiGroups": [""], "resources": ["configmaps"],
                                     "resourceNames": [n.result_configmap] + [f"{n.result_configmap}-{i}"
                                                                              for i in range(1, RESULT_PARTS)],
                                     "verbs": ["get", "update"]},
                                    # the disruption guard: the arms' budgets, by name (docs/deploy.md)
                                    {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"],
                                     "resourceNames": ["sglang-baseline", "sglang-candidate"],
                                     "verbs": ["get", "patch"]},
                                    # no idle GPUs: the arms scaled to 0 at the end, by name
                                    {"apiGroups": ["apps"], "resources": ["deployments/scale"],
                                     "resourceNames": ["sglang-baseline", "sglang-candidate"], "verbs": ["patch"]},
                                    # policy.design crossover: the Job pins each arm to its period's node, by name
                                    {"apiGroups": ["apps"], "resources": ["deployments"],
                                     "resourceNames": ["sglang-baseline", "sglang-candidate"],
                                     "verbs": ["get", "patch"]},
                                    # the machine in the evidence: the arms' Services by name, and their pods
                                    {"apiGroups": [""], "resources": ["services"],
                                     "resourceNames": ["sglang-baseline", "sglang-candidate"], "verbs": ["get"]},
                                    {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]
    assert role.inputs["rules"] == role_rules(n.result_configmap, ["sglang-baseline", "sglang-candidate"],
                                              ["sglang-baseline", "sglang-candidate"],
                                              ["sglang-baseline", "sglang-candidate"]) + \
        arm_read_rules(["sglang-baseline", "sglang-candidate"])
    (binding,) = [b for b in program.of_type(BINDING) if b.name == "benchmark-rolebinding"]
    assert binding.inputs["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                         "name": role.inputs["metadata"]["name"]}
    assert binding.inputs["subjects"] == [{"kind": "ServiceAccount", "name": BENCH_SERVICE_ACCOUNT,
                                           "namespace": stack.namespace}]
    (sa,) = [a for a in program.of_type(SA) if a.name == "benchmark-sa"]
    assert sa.inputs["automountServiceAccountToken"] is False
    (nodes,) = program.of_type(CLUSTER_ROLE)  # the only cluster-wide grant, opted in: get nodes (GPU labels)
    assert nodes.inputs["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]
    (node_binding,) = program.of_type(CLUSTER_BINDING)
    assert node_binding.inputs["subjects"] == binding.inputs["subjects"]
    assert node_binding.inputs["roleRef"]["name"] == nodes.inputs["metadata"]["name"]
    pod = bench_jobs(program)[0].inputs["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == BENCH_SERVICE_ACCOUNT and pod["automountServiceAccountToken"] is True
    precreated = [c for c in program.of_type(CONFIGMAP) if c.inputs["metadata"]["name"].startswith(n.result_configmap)]
    assert sorted(c.inputs["metadata"]["name"] for c in precreated) == sorted(role.inputs["rules"][0]["resourceNames"])
    assert all("data" not in c.inputs and "binaryData" not in c.inputs for c in precreated)
    for c in precreated:
        options = program.options_of(CONFIGMAP, c.name)
        assert options["retain_on_delete"] is True and set(options["ignore_changes"]) >= {"binaryData", "data"}


def test_program_declares_the_guards_reaper_with_its_own_role(program):
    plan = benchmark_plan(load_stack(STACK).config, STACK)
    declared = {typ: [r for r in program.of_type(typ) if r.name.startswith("benchmark-reaper")]
                for typ in (SA, ROLE, BINDING, CRON_JOB)}
    assert [len(found) for found in declared.values()] == [1, 1, 1, 1]
    (sa,), (role,), (binding,), (cron,) = declared.values()
    assert sa.inputs["automountServiceAccountToken"] is False
    assert role.inputs["rules"] == plan.reaper.role["rules"]
    assert binding.inputs["subjects"] == plan.reaper.role_binding["subjects"]
    assert binding.inputs["roleRef"]["name"] == role.inputs["metadata"]["name"]
    assert cron.inputs["spec"] == plan.reaper.cron_job["spec"]
    assert cron.inputs["metadata"]["namespace"] == load_stack(STACK).config.namespace
    deps = program.options_of(CRON_JOB, "benchmark-reaper")["dependencies"]
    assert any(d.endswith("::benchmark-reaper-rolebinding") for d in deps)  # its first run may already act


def test_job_waits_for_both_arms_and_takes_its_timeouts_from_config(program):
    options = program.options_of(JOB, "benchmark-job")
    deps = options["dependencies"]
    assert any(d.endswith("helm.sh/v4:Chart::baseline") for d in deps)
    assert any(d.endswith("helm.sh/v4:Chart::candidate") for d in deps)
    assert options["custom_timeouts"]["create"] == "50m"  # benchmark-job.timeout-min 45 + slack
    job = bench_jobs(program)[0].inputs
    assert job["spec"]["activeDeadlineSeconds"] == 45 * 60 and job["spec"]["backoffLimit"] == 0
    for arm in ("baseline", "candidate"):  # the arms' Deployments: rollout.pulumi-timeout-min
        assert program.options_of(CHART, arm)["custom_timeouts"]["create"] == "120m"


def test_job_targets_the_arms_services_and_is_a_load_generator(program):
    stack = load_stack(STACK).config
    job = bench_jobs(program)[0].inputs
    pod = job["spec"]["template"]
    command = pod["spec"]["containers"][0]["command"]
    assert command[:4] == ["sglab", "bench", "--stack", STACK]
    assert command[command.index("--baseline-url") + 1] == program.outputs["baseline_url"]
    assert command[command.index("--candidate-url") + 1] == program.outputs["candidate_url"]
    assert command[command.index("--result-configmap") + 1] == names(stack, STACK).result_configmap
    for key, value in stack.network_policy.allowed_from.items():
        assert pod["metadata"]["labels"][key] == value
    custom = run_program(STACK, {"network-policy": {"allowed-from": {"team": "bench"}}})
    assert bench_jobs(custom)[0].inputs["spec"]["template"]["metadata"]["labels"]["team"] == "bench"


def test_stack_file_in_the_configmap_reloads_to_the_same_arms_without_secrets(tmp_path, monkeypatch):
    run = run_program(STACK, {"hf-token": {"secure": "x"}})
    assert run.error is None
    stack = load_stack(STACK).config
    (stack_cm,) = [c for c in run.of_type(CONFIGMAP) if c.inputs["metadata"]["name"].startswith("sglab-stack-")]
    files = stack_cm.inputs["data"]  # its own stack file and its promotion target's (production)
    assert sorted(files) == sorted({f"Pulumi.{STACK}.yaml", "Pulumi.production.yaml"})
    assert not any("test-secret-" in t for t in files.values())
    filename = f"Pulumi.{STACK}.yaml"
    text = files[filename]
    job = bench_jobs(run)[0].inputs["spec"]["template"]["spec"]
    assert job["volumes"][0]["configMap"]["name"] == stack_cm.inputs["metadata"]["name"]
    assert {"name": "SGLAB_STACKS_DIR", "value": STACKS_MOUNT} in job["containers"][0]["env"]
    (tmp_path / filename).write_text(text)
    monkeypatch.setenv("SGLAB_STACKS_DIR", str(tmp_path))
    reloaded = load_stack(STACK).config
    assert reloaded.hf_token is not None
    hf = StackConfig.model_validate({**raw_stack(), "hf-token": {"secure": "x"}})
    assert baseline_arm(reloaded).config_hash == baseline_arm(hf).config_hash
    assert candidate_arm(reloaded).config_hash == candidate_arm(hf).config_hash
    assert stack_file_text(stack).count("sglab:") >= len(raw_stack())


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_job_and_rbac_objects_are_schema_valid(program, version):
    kinds = {JOB: ("batch/v1", "Job"), ROLE: ("rbac.authorization.k8s.io/v1", "Role"),
             BINDING: ("rbac.authorization.k8s.io/v1", "RoleBinding"), SA: ("v1", "ServiceAccount"),
             CONFIGMAP: ("v1", "ConfigMap"), CLUSTER_ROLE: ("rbac.authorization.k8s.io/v1", "ClusterRole"),
             CLUSTER_BINDING: ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
             CRON_JOB: ("batch/v1", "CronJob")}
    checked = 0
    for typ, (api_version, kind) in kinds.items():
        for resource in program.of_type(typ):
            if resource.name.startswith("preflight"):  # tests/deploy/test_preflight.py
                continue
            manifest = {"apiVersion": api_version, "kind": kind,
                        **{k: v for k, v in resource.inputs.items() if k not in ("apiVersion", "kind")}}
            kubernetes_validate.validate(manifest, version, strict=True)
            checked += 1
    assert checked == 7 + RESULT_PARTS + 4  # and the guard's reaper: ServiceAccount, Role, RoleBinding, CronJob
    bad = benchmark_plan(load_stack(STACK).config, STACK).job
    bad["spec"]["template"]["spec"]["containers"][0]["resourcez"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, version, strict=True)


def shipped_stacks() -> list[str]:
    return sorted(p.name[len("Pulumi."):-len(".yaml")] for p in stack_path(STACK).parent.glob("Pulumi.*.yaml"))


@pytest.mark.parametrize("stack_name", shipped_stacks())
def test_every_shipped_stack_declares_a_valid_job(stack_name):
    run = run_program(stack_name)
    assert run.error is None
    stack = load_stack(stack_name).config
    if not stack.benchmark_job.enabled:
        assert bench_jobs(run) == []
        return
    (job,) = bench_jobs(run)
    assert job.inputs["metadata"]["name"] == names(stack, stack_name).job
    manifest = {"apiVersion": "batch/v1", "kind": "Job",
                **{k: v for k, v in job.inputs.items() if k not in ("apiVersion", "kind")}}
    for version in K8S_VERSIONS:
        kubernetes_validate.validate(manifest, version, strict=True)


@pytest.mark.parametrize("section, key, value", [("benchmark-job", "cpu", "two"), ("benchmark-job", "memory", "lots"),
                                                 ("locust", "cpu", "1 core"), ("locust", "memory", "-1Gi")])
def test_bad_pod_sizes_are_refused_naming_the_key(section, key, value):
    from sglab.core.errors import ConfigError
    from sglab.config.loader import load_mapping

    raw = {**raw_stack(), section: {key: value}}
    with pytest.raises(ConfigError) as caught:
        load_mapping(STACK, stack_path(STACK), raw)
    assert f"sglab:{section}.{key}" in str(caught.value) and repr(value) in str(caught.value)


def test_a_numeric_rerun_token_counts_like_a_string():
    """`pulumi config set --path` stores digits as a number."""
    base = names(StackConfig.model_validate(BASE), STACK).job
    numeric = StackConfig.model_validate(mutate(BASE, {"benchmark-job.rerun": 1733000000}))
    assert numeric.benchmark_job.rerun == "1733000000" and names(numeric, STACK).job != base
