"""The benchmark Job's stacks/ carries the promotion target's stack file, so its bench runs the target's gate."""

from __future__ import annotations

import shutil

import pytest
from ruamel.yaml import YAML

from sglab.config.loader import load_stack
from sglab.deploy.benchmark_job import benchmark_plan, stack_files
from sglab.core.errors import ConfigError
from sglab.bench.sequential import promotion_target
from sglab.core.paths import stack_path


def test_the_pod_gets_the_production_stack_and_gates_what_production_gates(tmp_path, monkeypatch):
    production_policy = load_stack("production").config.policy
    plan = benchmark_plan(load_stack("eagle-nccl-ll").config, "eagle-nccl-ll")
    files = plan.stack_configmap["data"]
    assert sorted(files) == ["Pulumi.eagle-nccl-ll.yaml", "Pulumi.production.yaml"]
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    monkeypatch.setenv("SGLAB_STACKS_DIR", str(tmp_path))
    name, policy, note = promotion_target(load_stack("eagle-nccl-ll"))  # what the pod's bench asks
    assert (name, note) == ("production", None)
    assert policy == production_policy


def _stack_dir(tmp_path, promote_to: str | None):
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    yaml = YAML()
    data = yaml.load(stack_path("eagle-nccl-ll").read_text())
    if promote_to is not None:
        data["config"]["sglab:promote-to"] = promote_to
    with (stacks / "Pulumi.eagle-nccl-ll.yaml").open("w") as f:
        yaml.dump(data, f)
    return stacks


def test_an_absent_default_target_is_left_out_and_the_pod_file_does_not_name_it(tmp_path, monkeypatch):
    stacks = _stack_dir(tmp_path, None)
    monkeypatch.setenv("SGLAB_STACKS_DIR", str(stacks))
    stack = load_stack("eagle-nccl-ll").config
    files = stack_files(stack, "eagle-nccl-ll")
    assert list(files) == ["Pulumi.eagle-nccl-ll.yaml"] and "promote-to" not in files["Pulumi.eagle-nccl-ll.yaml"]
    pod = tmp_path / "pod"
    pod.mkdir()
    (pod / "Pulumi.eagle-nccl-ll.yaml").write_text(files["Pulumi.eagle-nccl-ll.yaml"])
    monkeypatch.setenv("SGLAB_STACKS_DIR", str(pod))
    name, policy, note = promotion_target(load_stack("eagle-nccl-ll"))
    assert policy is None and "only this stack's own gate is run" in note


def test_a_named_target_that_does_not_exist_stops_the_program_naming_the_key(tmp_path, monkeypatch):
    stacks = _stack_dir(tmp_path, "staging")
    monkeypatch.setenv("SGLAB_STACKS_DIR", str(stacks))
    with pytest.raises(ConfigError) as err:
        stack_files(load_stack("eagle-nccl-ll").config, "eagle-nccl-ll")
    assert err.value.key == "sglab:promote-to" and "staging" in str(err.value)
    with pytest.raises(ConfigError, match="staging"):  # the bench on a checkout refuses it the same way
        promotion_target(load_stack("eagle-nccl-ll"))


def test_a_named_target_that_exists_travels_with_the_stack(tmp_path, monkeypatch):
    stacks = _stack_dir(tmp_path, "staging")
    shutil.copy(stack_path("production"), stacks / "Pulumi.staging.yaml")
    monkeypatch.setenv("SGLAB_STACKS_DIR", str(stacks))
    files = stack_files(load_stack("eagle-nccl-ll").config, "eagle-nccl-ll")
    assert sorted(files) == ["Pulumi.eagle-nccl-ll.yaml", "Pulumi.staging.yaml"]
    assert "sglab:promote-to: staging" in files["Pulumi.eagle-nccl-ll.yaml"]
