"""`sglab results pull` backend: in-cluster result ConfigMaps -> results/<stack>/<run-id>/result.json."""

from __future__ import annotations

import json

import pytest
from kubernetes import client

from sglab.core.errors import ConfigError
from sglab.deploy.pull import group_parts, label_selector, parse_result, pull_report, pull_results, store_pulled
from sglab.results.sink import (INDEX, PART, PART_ANNOTATION, PAYLOAD_KEY, RESULT_LABEL, SUMMARY_KEY,
                                      encode_result, part_names)

from .fake_api import FakeConfigMapApi
from .results_fixtures import judged_result

STACK = "eagle-nccl-ll"


def configmaps(name: str, result_json: str | None, stack: str = STACK,
               max_part_bytes: int | None = None) -> list[client.V1ConfigMap]:
    """What the Job leaves: the index and its parts (as `write_result_configmap` writes them)."""
    labels = {"sglab/stack": stack}
    if result_json is None:
        return [client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name, labels={**labels, RESULT_LABEL: INDEX}))]
    encoded = encode_result(result_json, max_part_bytes=max_part_bytes)
    return [client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name=part, labels={**labels, RESULT_LABEL: INDEX if i == 0 else PART},
                                     annotations={**encoded.annotations, PART_ANNOTATION: str(i)}),
        binary_data={PAYLOAD_KEY: encoded.parts[i]}, data={SUMMARY_KEY: encoded.summary} if i == 0 else None)
        for i, part in enumerate(part_names(name, len(encoded.parts)))]


def parse(cms: list[client.V1ConfigMap], stack: str = STACK):
    (parts,) = group_parts(cms)
    return parse_result(parts, stack)


def manifest(cm: client.V1ConfigMap) -> dict:
    return client.ApiClient().sanitize_for_serialization(cm)


def test_parse_accepts_a_result_of_the_stack_and_explains_everything_else():
    good = judged_result(run_id="20260101T000000Z-aaaaaa")
    text = good.model_dump_json()
    assert parse(configmaps("ok", text)).result == good
    split = configmaps("big", text, max_part_bytes=len(encode_result(text).parts[0]) // 3 + 1)
    assert len(split) == 3 and parse(split).result == good
    missing = parse([split[0], split[2]])
    assert missing.result is None and "part(s) 1 of 3 missing" in missing.problem
    assert parse(configmaps("empty", None)).result is None
    assert parse(configmaps("empty", None)).problem is None
    other = judged_result(stack="eagle-default").model_dump_json()
    assert "not 'eagle-nccl-ll'" in parse(configmaps("other", other)).problem
    old = json.loads(text) | {"schema_version": 0}
    assert "schema_version 0" in parse(configmaps("old", json.dumps(old))).problem
    escape = json.loads(text) | {"run_id": "../../etc"}
    assert "safe directory name" in parse(configmaps("evil", json.dumps(escape))).problem
    broken = json.loads(text) | {"levels": "nope"}
    assert "levels" in parse(configmaps("broken", json.dumps(broken))).problem
    (garbage,) = configmaps("garbage", text)
    garbage.binary_data = {PAYLOAD_KEY: "bm90IGd6aXA="}
    assert "undecodable" in parse([garbage]).problem


def test_store_never_overwrites(tmp_path):
    first = judged_result(run_id="20260101T000000Z-aaaaaa")
    pulled = [parse(configmaps("a", first.model_dump_json()))]
    report = store_pulled(pulled, STACK, tmp_path)
    target = tmp_path / STACK / first.run_id / "result.json"
    assert report.written == [target]
    assert json.loads(target.read_text()) == first.model_dump(mode="json")
    again = store_pulled(pulled, STACK, tmp_path)
    assert again.written == [] and again.unchanged == [target]
    changed = judged_result(run_id=first.run_id, seed=7)
    before = target.read_bytes()
    conflict = store_pulled([parse(configmaps("a", changed.model_dump_json()))], STACK, tmp_path)
    assert conflict.conflicts == [target] and conflict.written == []
    assert target.read_bytes() == before


def test_pull_through_the_kubernetes_client(tmp_path):
    runs = [judged_result(run_id=f"20260101T00000{i}Z-aaaaa{i}", seed=i) for i in range(2)]
    with FakeConfigMapApi() as api:
        big = len(encode_result(runs[1].model_dump_json()).parts[0]) // 2 + 1
        for i, run in enumerate(runs):
            for cm in configmaps(f"sglab-result-{i}", run.model_dump_json(), max_part_bytes=big):
                api.add("sglab-eagle-nccl-ll", manifest(cm))
        api.add("sglab-eagle-nccl-ll", manifest(configmaps("sglab-result-pending", None)[0]))
        for cm in configmaps("other-stack", runs[0].model_dump_json(), stack="eagle-default"):
            api.add("sglab-eagle-nccl-ll", manifest(cm))
        api.add("sglab-eagle-nccl-ll", {"metadata": {"name": "sglab-stack-x", "labels": {"sglab/stack": STACK}},
                                        "data": {"Pulumi.eagle-nccl-ll.yaml": "config: {}"}})
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
        for cm in configmaps("sglab-result-a", run.model_dump_json()):
            api.add("sglab-eagle-nccl-ll", manifest(cm))
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
