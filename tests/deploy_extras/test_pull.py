"""`sglab results pull` backend: in-cluster result ConfigMaps -> results/<stack>/<run-id>/result.json."""

from __future__ import annotations

import json

import pytest
from kubernetes import client

from sglab.config.loader import ConfigError
from sglab.deploy.pull import label_selector, parse_configmap, pull_report, pull_results, store_pulled
from sglab.deploy.result_sink import RESULT_LABEL, encode_result

from .fake_api import FakeConfigMapApi
from .results_fixtures import judged_result

STACK = "eagle-nccl-ll"


def configmap(name: str, result_json: str | None, stack: str = STACK) -> client.V1ConfigMap:
    encoded = encode_result(result_json) if result_json else None
    return client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name=name, labels={RESULT_LABEL: "true", "sglab/stack": stack},
                                     annotations=encoded.annotations if encoded else {}),
        binary_data=encoded.binary_data if encoded else None)


def manifest(cm: client.V1ConfigMap) -> dict:
    return client.ApiClient().sanitize_for_serialization(cm)


def test_parse_accepts_a_result_of_the_stack_and_explains_everything_else():
    good = judged_result(run_id="20260101T000000Z-aaaaaa")
    assert parse_configmap(configmap("ok", good.model_dump_json()), STACK).result == good
    assert parse_configmap(configmap("empty", None), STACK).result is None
    assert parse_configmap(configmap("empty", None), STACK).problem is None
    other = judged_result(stack="eagle-default").model_dump_json()
    assert "not 'eagle-nccl-ll'" in parse_configmap(configmap("other", other), STACK).problem
    old = json.loads(good.model_dump_json()) | {"schema_version": 0}
    assert "schema_version 0" in parse_configmap(configmap("old", json.dumps(old)), STACK).problem
    escape = json.loads(good.model_dump_json()) | {"run_id": "../../etc"}
    assert "safe directory name" in parse_configmap(configmap("evil", json.dumps(escape)), STACK).problem
    broken = json.loads(good.model_dump_json()) | {"levels": "nope"}
    assert "levels" in parse_configmap(configmap("broken", json.dumps(broken)), STACK).problem
    garbage = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="garbage"),
                                 binary_data={"result.json.gz": "bm90IGd6aXA="})
    assert "undecodable" in parse_configmap(garbage, STACK).problem


def test_store_never_overwrites(tmp_path):
    first = judged_result(run_id="20260101T000000Z-aaaaaa")
    pulled = [parse_configmap(configmap("a", first.model_dump_json()), STACK)]
    report = store_pulled(pulled, STACK, tmp_path)
    target = tmp_path / STACK / first.run_id / "result.json"
    assert report.written == [target]
    assert json.loads(target.read_text()) == first.model_dump(mode="json")
    again = store_pulled(pulled, STACK, tmp_path)
    assert again.written == [] and again.unchanged == [target]
    changed = judged_result(run_id=first.run_id, seed=7)
    before = target.read_bytes()
    conflict = store_pulled([parse_configmap(configmap("a", changed.model_dump_json()), STACK)], STACK, tmp_path)
    assert conflict.conflicts == [target] and conflict.written == []
    assert target.read_bytes() == before


def test_pull_through_the_kubernetes_client(tmp_path):
    runs = [judged_result(run_id=f"20260101T00000{i}Z-aaaaa{i}", seed=i) for i in range(2)]
    with FakeConfigMapApi() as api:
        for i, run in enumerate(runs):
            api.add("sglab-eagle-nccl-ll", manifest(configmap(f"sglab-result-{i}", run.model_dump_json())))
        api.add("sglab-eagle-nccl-ll", manifest(configmap("sglab-result-pending", None)))
        api.add("sglab-eagle-nccl-ll", manifest(configmap("other-stack", runs[0].model_dump_json(),
                                                          stack="eagle-default")))
        kubeconfig = api.kubeconfig(tmp_path / "kubeconfig", context="lab")
        written = pull_results(STACK, kubeconfig=str(kubeconfig), context="lab", base=tmp_path / "results")
        (method, path, query), = api.requests
        report = pull_report(STACK, kubeconfig=str(kubeconfig), context="lab", base=tmp_path / "results")
    assert (method, path) == ("GET", "/api/v1/namespaces/sglab-eagle-nccl-ll/configmaps")
    assert query["labelSelector"] == label_selector(STACK)
    assert written == sorted(tmp_path / "results" / STACK / r.run_id / "result.json" for r in runs)
    for run, path in zip(runs, written):
        assert json.loads(path.read_text()) == run.model_dump(mode="json")
    assert report.written == [] and len(report.unchanged) == 2 and report.pending == ["sglab-result-pending"]


def test_pull_without_a_reachable_cluster_is_one_clear_error(tmp_path):
    with FakeConfigMapApi() as api:
        kubeconfig = api.kubeconfig(tmp_path / "kubeconfig")
    with pytest.raises(ConfigError, match="cannot list result ConfigMaps"):
        pull_results(STACK, kubeconfig=str(kubeconfig), base=tmp_path)
    assert not (tmp_path / STACK).exists()


def test_sglab_results_pull_command(tmp_path, capsys):
    from sglab.cli import main as sglab

    run = judged_result(run_id="20260101T000000Z-cccccc")
    with FakeConfigMapApi() as api:
        api.add("sglab-eagle-nccl-ll", manifest(configmap("sglab-result-a", run.model_dump_json())))
        kubeconfig = str(api.kubeconfig(tmp_path / "kubeconfig"))
        argv = ["results", "pull", "--stack", STACK, "--kubeconfig", kubeconfig, "--out", str(tmp_path / "r")]
        assert sglab(argv) == 0
        assert sglab(argv) == 0
    out = capsys.readouterr().out
    assert f"pulled: {tmp_path / 'r' / STACK / run.run_id / 'result.json'}" in out
    assert "nothing new to pull" in out
    assert sglab(argv) == 2  # the API server is gone now
    err = capsys.readouterr().err
    assert "cannot list result ConfigMaps" in err and "Traceback" not in err
