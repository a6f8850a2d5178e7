"""The real Pulumi program (sglab.program.run) under Pulumi's official mocks, for every shipped stack."""

from __future__ import annotations

import json
from pathlib import Path

import kubernetes_validate
import pulumi
import pytest
from pulumi.runtime import rpc

from sglab.config import baseline_arm, candidate_arm, confounds, load_stack
from sglab.config.arms import parse_launch_args
from sglab.deploy.naming import HF_TOKEN_SECRET, arm_release_name, chart_dir
from sglab.deploy.values import chart_values
from sglab.serving.objects import server_api_keys
from pulumi_harness import SECRET_PREFIX as TEST_SECRET_PREFIX
from pulumi_harness import arm_resource, pulumi_config, run_program, shipped_stacks

CHART = "kubernetes:helm.sh/v4:Chart"
SERVER = "sglab:index:SGLangServer"
NAMESPACE = "kubernetes:core/v1:Namespace"
SECRET = "kubernetes:core/v1:Secret"


def wire(value):
    """Values as they cross the Pulumi wire (numbers become floats); compare like with like."""
    def norm(v):
        if isinstance(v, dict):
            return {k: norm(x) for k, x in v.items()}
        if isinstance(v, list):
            return [norm(x) for x in v]
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return v
        return float(v)
    return norm(json.loads(json.dumps(value)))


@pytest.fixture(scope="module", params=shipped_stacks())
def deployed(request):
    return request.param, load_stack(request.param), run_program(request.param)


def test_every_stack_is_covered():
    assert {"eagle-nccl-ll", "eagle-default"} <= set(shipped_stacks())


def keys(loaded) -> dict[str, str]:
    """role -> the arm's Pulumi resource name (a sweep stack's candidate runs in its leader slot)."""
    return {role: arm_resource(loaded.config, role) for role in ("baseline", "candidate")}


def test_program_registers_namespace_two_servers_and_two_charts(deployed):
    name, loaded, run = deployed
    assert run.error is None, run.error
    if loaded.config.production:  # the platform's namespace: read, never created (tests/deploy/test_namespaces.py)
        assert run.of_type(NAMESPACE) == []
    else:
        (ns,) = run.of_type(NAMESPACE)
        assert ns.inputs["metadata"]["name"] == loaded.config.namespace
        assert ns.inputs["metadata"]["labels"]["sglab/stack"] == name
    key = keys(loaded)
    assert sorted(r.name for r in run.of_type(SERVER)) == sorted(key.values())
    charts = {r.name: r for r in run.of_type(CHART)}
    assert sorted(charts) == sorted(key.values())
    for role, resource in key.items():
        chart = charts[resource]
        assert Path(chart.inputs["chart"]).is_absolute()
        assert Path(chart.inputs["chart"]) == chart_dir()
        assert (Path(chart.inputs["chart"]) / "Chart.yaml").is_file()
        assert chart.inputs["name"] == (f"sglang-{role}" if resource == role else resource)
        assert chart.inputs["namespace"] == loaded.config.namespace
        options = run.options_of(CHART, resource)
        assert options["remote"] is True
        assert options["parent"].endswith(f"{SERVER}::{resource}")


def test_chart_values_are_the_config_models_values(deployed):
    name, loaded, run = deployed
    stack = loaded.config
    for arm in (baseline_arm(stack), candidate_arm(stack)):
        chart = run.named(CHART, keys(loaded)[arm.role])
        assert chart.inputs["values"] == wire(chart_values(stack, arm, stack_name=name))
        assert chart.inputs["values"]["command"] == list(arm.command)
        assert chart.inputs["values"]["args"] == list(arm.args) + server_api_keys(stack)[0]  # serving: key refs
        assert chart.inputs["values"]["arm"] == arm.role
        assert chart.inputs["values"]["configHash"] == arm.config_hash


def test_only_the_candidate_runs_speculation(deployed):
    _, loaded, run = deployed
    base = parse_launch_args(run.named(CHART, "baseline").inputs["values"]["args"])
    cand = parse_launch_args(run.named(CHART, keys(loaded)["candidate"]).inputs["values"]["args"])
    assert not any(flag.startswith("--speculative-") for flag in base)
    assert "--speculative-algorithm" in cand
    server_confounds = {c["key"].split(" ", 1)[1] for c in run.outputs["confounds"] if c["key"].startswith("server ")}
    shared = {k: v for k, v in cand.items() if not k.startswith("--speculative-") and k not in server_confounds}
    assert shared == {k: v for k, v in base.items() if k not in server_confounds}


def test_custom_timeouts_come_from_rollout(deployed):
    _, loaded, run = deployed
    minutes = loaded.config.rollout.pulumi_timeout_min
    for role in keys(loaded).values():
        timeouts = run.options_of(CHART, role)["custom_timeouts"]
        assert timeouts["create"] == f"{minutes}m"
        assert timeouts["update"] == f"{minutes}m"


def test_servers_depend_on_the_namespace(deployed):
    _, loaded, run = deployed
    for role in keys(loaded).values():
        deps = run.options_of(SERVER, role)["dependencies"]
        assert any(d.endswith((f"{NAMESPACE}::namespace", f"{NAMESPACE}::existing-namespace")) for d in deps), deps


def test_secret_present_iff_hf_token_set(deployed):
    _, loaded, run = deployed
    secrets = run.of_type(SECRET)
    if loaded.config.hf_token is None:
        assert secrets == []  # a serving stack's API key Secret is provisioned outside the stack
        assert all(run.named(CHART, r).inputs["values"]["secretEnv"] == server_api_keys(loaded.config)[1]
                   for r in keys(loaded).values())
    else:
        assert [s.inputs["metadata"]["name"] for s in secrets] == [HF_TOKEN_SECRET]


def test_outputs(deployed):
    name, loaded, run = deployed
    stack = loaded.config
    out = run.outputs
    assert out["namespace"] == stack.namespace
    for arm in (baseline_arm(stack), candidate_arm(stack)):
        release = arm_release_name(stack, arm.role)
        assert out[f"{arm.role}_release"] == release
        assert out[f"{arm.role}_service"] == f"{release}.{stack.namespace}.svc.cluster.local"
        assert out[f"{arm.role}_port"] == arm.port == stack.server.port
        assert out[f"{arm.role}_url"] == f"http://{release}.{stack.namespace}.svc.cluster.local:{arm.port}"
        assert out[f"{arm.role}_launch_command"] == arm.launch_command
        assert out["config_hashes"][arm.role] == arm.config_hash
    assert out["confounds"] == [c.as_dict() for c in confounds(stack)]
    assert out["config_hashes"]["baseline"] != out["config_hashes"]["candidate"]


def test_article_replay_reports_its_nccl_confound():
    run = run_program("article-replay")
    keys = {c["key"] for c in run.outputs["confounds"]}
    assert {"env NCCL_PROTO", "env NCCL_ALGO", "env NCCL_P2P_LEVEL"} <= keys


def _config(stack: str = "eagle-nccl-ll"):
    from sglab.core.paths import project_root, stack_path

    return pulumi_config(stack_path(stack, project_root()))


@pytest.fixture()
def config_only(monkeypatch, tmp_path):
    """The Pulumi config of eagle-nccl-ll with no stack file to read: only Pulumi config is checked."""
    monkeypatch.setenv("SGLAB_STACKS_DIR", str(tmp_path))
    return _config()


def test_hf_token_secret_becomes_a_kubernetes_secret_and_secret_key_ref():
    config, secret_keys = _config()
    config["sglab:hf-token"] = "hf_real_looking_token"
    run = run_program("eagle-nccl-ll", config=config, secret_keys=secret_keys + ["sglab:hf-token"])
    assert run.error is None, run.error
    (secret,) = run.of_type(SECRET)
    assert secret.inputs["metadata"] == {"name": HF_TOKEN_SECRET, "namespace": "sglab-eagle-nccl-ll",
                                        "labels": secret.inputs["metadata"]["labels"]}
    # The value crosses the wire as a Pulumi secret (encrypted in state, masked in output).
    assert secret.inputs["stringData"] == {rpc._special_sig_key: rpc._special_secret_sig,
                                           "value": {"token": "hf_real_looking_token"}}
    assert secret.inputs["type"] == "Opaque"
    applied = {**secret.inputs, "stringData": secret.inputs["stringData"]["value"]}
    for version in ("1.31", kubernetes_validate.latest_version()):
        kubernetes_validate.validate(applied, version, strict=True)
    for role in ("baseline", "candidate"):
        values = run.named(CHART, role).inputs["values"]
        assert values["secretEnv"] == [{"name": "HF_TOKEN", "secretName": HF_TOKEN_SECRET, "secretKey": "token"}]
        assert "hf_real_looking_token" not in json.dumps(values)
        deps = run.options_of(SERVER, role)["dependencies"]
        assert any(d.endswith(f"{SECRET}::hf-token") for d in deps)
    assert "hf_real_looking_token" not in json.dumps(run.outputs)


def test_secret_listed_only_in_the_language_host_env_is_a_secret(monkeypatch):
    """Under `pulumi up` the secret-key list arrives in PULUMI_CONFIG_SECRET_KEYS, not via set_all_config."""
    config, _ = _config()
    config["sglab:hf-token"] = "hf_from_cli"
    monkeypatch.setenv("PULUMI_CONFIG_SECRET_KEYS", json.dumps(["sglab:hf-token"]))
    run = run_program("eagle-nccl-ll", config=config, secret_keys=[])
    assert run.error is None, run.error
    (secret,) = run.of_type(SECRET)
    assert secret.inputs["stringData"][rpc._special_sig_key] == rpc._special_secret_sig


def test_secret_field_without_secret_key_information_is_still_kept_secret():
    config, _ = _config()
    config["sglab:hf-token"] = "hf_unknown"
    run = run_program("eagle-nccl-ll", config=config, secret_keys=[])
    assert run.error is None, run.error
    (secret,) = run.of_type(SECRET)
    assert secret.inputs["stringData"][rpc._special_sig_key] == rpc._special_secret_sig


def test_plain_text_hf_token_in_pulumi_config_stops_the_program(monkeypatch):
    config, secret_keys = _config()
    config["sglab:hf-token"] = "hf_plain"
    monkeypatch.setenv("PULUMI_CONFIG_SECRET_KEYS", json.dumps(secret_keys))  # as the CLI passes it
    run = run_program("eagle-nccl-ll", config=config, secret_keys=secret_keys)
    assert isinstance(run.error, pulumi.RunError)
    assert "sglab:hf-token" in str(run.error) and "--secret" in str(run.error)
    assert "hf_plain" not in str(run.error)
    assert run.of_type(CHART) == []


def test_unknown_pulumi_config_key_stops_the_program(config_only):
    config, secret_keys = config_only
    config["sglab:namspace"] = "x"
    run = run_program("scratch", config=config, secret_keys=secret_keys)
    assert isinstance(run.error, pulumi.RunError)
    assert "sglab:namspace" in str(run.error) and "did you mean 'namespace'" in str(run.error)


def test_nested_typo_in_pulumi_config_names_the_key_path(config_only):
    config, secret_keys = config_only
    server = json.loads(config["sglab:server"])
    server["tp-sise"] = server.pop("tp-size")
    config["sglab:server"] = json.dumps(server)
    run = run_program("scratch", config=config, secret_keys=secret_keys)
    assert isinstance(run.error, pulumi.RunError)
    assert "sglab:server.tp-sise" in str(run.error) and "tp-size" in str(run.error)


def test_pulumi_config_alone_deploys_when_no_stack_file(config_only):
    config, secret_keys = config_only
    config["sglab:namespace"] = "from-pulumi-config"
    run = run_program("scratch", config=config, secret_keys=secret_keys)
    assert run.error is None, run.error
    assert run.outputs["namespace"] == "from-pulumi-config"
    assert run.outputs["baseline_service"] == "sglang-baseline.from-pulumi-config.svc.cluster.local"


def test_typo_in_stack_file_fails_pulumi_up_with_the_file_line(monkeypatch, tmp_path):
    from sglab.core.paths import project_root, stack_path

    text = stack_path("eagle-nccl-ll", project_root()).read_text().replace("  sglab:nccl:",
                                                                           "  sglab:nccl:\n    NCCL_PROTOO: LL")
    text = text.replace("    num-continuous-decode-steps: 4", "    num-continuous-decode-step: 4")
    (tmp_path / "Pulumi.eagle-nccl-ll.yaml").write_text(text)
    monkeypatch.setenv("SGLAB_STACKS_DIR", str(tmp_path))
    config, secret_keys = _config()  # Pulumi config itself is fine: only the file has the typo
    run = run_program("eagle-nccl-ll", config=config, secret_keys=secret_keys)
    assert isinstance(run.error, pulumi.RunError)
    message = str(run.error)
    assert f"{tmp_path / 'Pulumi.eagle-nccl-ll.yaml'}:" in message
    assert "sglab:server.num-continuous-decode-step" in message and "num-continuous-decode-steps" in message


def test_string_fields_are_not_json_coerced(config_only):
    """A numeric-looking image tag from Pulumi config stays a string."""
    config, secret_keys = config_only
    config["sglab:image"] = "12345"
    run = run_program("scratch", config=config, secret_keys=secret_keys)
    assert run.error is None, run.error
    assert run.named(CHART, "baseline").inputs["values"]["image"]["name"] == "12345"
    assert TEST_SECRET_PREFIX not in json.dumps(run.outputs)


def test_multi_node_stack_deploys_through_the_same_component(config_only):
    config, secret_keys = config_only
    placement = json.loads(config["sglab:placement"])
    placement["nodes"] = 2
    config["sglab:placement"] = json.dumps(placement)
    server = json.loads(config["sglab:server"])
    server["tp-size"] = 16
    config["sglab:server"] = json.dumps(server)
    run = run_program("two-node", config=config, secret_keys=secret_keys)
    assert run.error is None, run.error
    values = run.named(CHART, "candidate").inputs["values"]
    assert values["nodes"] == 2
    assert "--nnodes 2 --node-rank '$(LWS_WORKER_INDEX)'" in run.outputs["candidate_launch_command"]
