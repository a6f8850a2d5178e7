"""`sglab:serving`: production's serving shape, validated with keyed messages (file, key, fix)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ruamel.yaml import YAML

from sglab.core.errors import ConfigError
from sglab.config.loader import load_stack
from sglab.config.serving import CanaryStep, Serving, argo_steps
from sglab.core.paths import stacks_dir


def _write(tmp_path: Path, serving: dict | None, **extra) -> Path:
    yaml = YAML()
    doc = yaml.load((stacks_dir() / "Pulumi.production.yaml").read_text())
    config = doc["config"]
    if serving is None:
        config.pop("sglab:serving", None)
    else:
        config["sglab:serving"] = serving
    for key, value in extra.items():
        config[f"sglab:{key}"] = value
    (tmp_path / "stacks").mkdir(exist_ok=True)
    path = tmp_path / "stacks" / "Pulumi.production.yaml"
    with open(path, "w") as fh:
        yaml.dump(doc, fh)
    return path


def _load(path: Path):
    return load_stack("production", path=path).config


def test_shipped_production_serves_with_defaults_right_for_production():
    stack = load_stack("production").config
    serving = stack.serving
    assert serving is not None
    assert serving.replicas >= 2
    assert serving.traffic_router == "gateway-api"
    assert serving.control.replicas >= 1
    assert sum(1 for s in serving.steps if s.analysis) == 1
    assert not stack.benchmark_job.enabled, "a serving stack must not drive synthetic load at production"


def test_benchmark_job_is_off_by_default_in_a_serving_stack(tmp_path):
    assert not _load(_write(tmp_path, {"replicas": 2})).benchmark_job.enabled
    assert _load(_write(tmp_path, None)).benchmark_job.enabled  # a stack without serving keeps its Job
    # only by an explicit choice (a staging copy, say)
    assert _load(_write(tmp_path, {"replicas": 2}, **{"benchmark-job": {"enabled": True}})).benchmark_job.enabled


@pytest.mark.parametrize("serving, key, words", [
    ({"replicas": 1}, "serving.replicas", "greater than or equal to 2"),
    ({"steps": [{"set-weight": 20}]}, "serving.steps", "analysis"),
    ({"steps": [{"analysis": True}, {"set-weight": 50}]}, "serving.steps", "before the analysis"),
    ({"steps": [{"set-weight": 20, "pause-s": 60}, {"analysis": True}]}, "serving.steps.0", "exactly one"),
    ({"steps": [{"canary-replicas": 3}, {"analysis": True}], "replicas": 2}, "serving.steps.0.canary-replicas",
     "replicas"),
    ({"steps": [{"set-wieght": 20}, {"analysis": True}]}, "serving.steps.0.set-wieght", "set-weight"),
    ({"canary": {"max-windows": 3, "min-windows": 5}}, "serving.canary.max-windows", "min-windows"),
    ({"canary": {"confidence": 1.5}}, "serving.canary.confidence", "less than 1"),
    ({"gateway": {"inference-pool": True}}, "serving.gateway.inference-pool", "traffic-router: replicas"),
    ({"gateway": {"namespace": "Not_A_Namespace"}}, "serving.gateway.namespace", "namespace"),
    ({"gateway": {"paths": [{"path": "/", "match": "PathPrefix"}]}}, "serving.gateway.paths.0.path",
     "control endpoints"),
    ({"gateway": {"peers": [{"cidr": "10.0.0.0/8", "pod-labels": {"a": "b"}}]}}, "serving.gateway.peers.0",
     "either pods"),
    ({"gateway": {"peers": [{"cidr": "10.0.0.999/8"}]}}, "serving.gateway.peers.0.cidr", "10.0.0.999"),
    ({"monitoring": {"headers": {"Authorization": "Bearer x"}}}, "serving.monitoring.headers",
     "bearer-token-secret"),
    ({"canary": {"category-label": "category"}}, "serving.canary.category-label",
     "--tokenizer-metrics-allowed-custom-labels"),
])
def test_bad_serving_config_names_key_and_fix(tmp_path, serving, key, words):
    with pytest.raises(ConfigError) as info:
        _load(_write(tmp_path, serving))
    text = str(info.value)
    assert key in text and words in text, text


def test_category_label_with_the_server_flag_is_accepted(tmp_path):
    path = _write(tmp_path, {"canary": {"category-label": "category"}})
    yaml = YAML()
    doc = yaml.load(path.read_text())
    doc["config"]["sglab:server"]["extra-args"] = ["--tokenizer-metrics-allowed-custom-labels", "category"]
    with open(path, "w") as fh:
        yaml.dump(doc, fh)
    assert _load(path).serving.canary.category_label == "category"


def test_steps_become_argo_steps_with_equal_per_pod_load():
    """canary-replicas k beside N stable pods: weight 100k/(N+k) through the gateway, so a canary pod and a stable
    pod see the same load (what the paired comparison needs); by replica count the weight is k/N of the pods."""
    serving = Serving.model_validate({"replicas": 4, "steps": [
        {"canary-replicas": 1}, {"analysis": True}, {"set-weight": 50}, {"pause-s": 600},
        {"pause-until-resumed": True}]})
    steps = argo_steps(serving, analysis={"templates": [{"templateName": "judge"}]})
    assert steps == [{"setCanaryScale": {"replicas": 1}}, {"setWeight": 20},
                     {"analysis": {"templates": [{"templateName": "judge"}]}},
                     {"setCanaryScale": {"matchTrafficWeight": True}}, {"setWeight": 50},
                     {"pause": {"duration": "600s"}}, {"pause": {}}]
    by_replicas = Serving.model_validate({"replicas": 3, "traffic-router": "replicas",
                                          "steps": [{"canary-replicas": 1}, {"analysis": True}]})
    assert argo_steps(by_replicas, analysis={}) == [{"setWeight": 33}, {"analysis": {}}]


def test_a_step_is_one_action():
    with pytest.raises(ValueError):
        CanaryStep.model_validate({})
    assert CanaryStep.model_validate({"pause-s": 30}).pause_s == 30

def test_category_label_with_the_server_flag_given_no_labels_names_the_fix(tmp_path):
    """The flag without a value decodes to True (a switch): that lists no label, so it is the same clear
    refusal as a missing flag, never a TypeError."""
    path = _write(tmp_path, {"canary": {"category-label": "category"}})
    yaml = YAML()
    doc = yaml.load(path.read_text())
    doc["config"]["sglab:server"]["extra-args"] = ["--tokenizer-metrics-allowed-custom-labels"]
    with open(path, "w") as fh:
        yaml.dump(doc, fh)
    with pytest.raises(ConfigError) as info:
        _load(path)
    assert "--tokenizer-metrics-allowed-custom-labels" in str(info.value)
