"""The result ConfigMaps' format and the in-cluster writer (real kubernetes client, fake API server on 127.0.0.1)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from sglab.results import sink as result_sink
from sglab.results.sink import (INDEX, PART, PARTS_ANNOTATION, RESULT_LABEL, RUN_ID_ANNOTATION, SUMMARY_KEY,
                                      TRIMMED_ANNOTATION, decode_parts, encode_result, part_names,
                                      write_result_configmap)
from sglab.schema.result import RunResult

from .fake_api import FakeConfigMapApi
from .results_fixtures import judged_result


def stored_payloads(api: FakeConfigMapApi, namespace: str, name: str) -> list[str]:
    index = api.configmaps[(namespace, name)]
    count = int(index["metadata"]["annotations"][PARTS_ANNOTATION])
    return [api.configmaps[(namespace, n)]["binaryData"]["result.json.gz"] for n in part_names(name, count)]


def test_round_trip_keeps_every_byte_of_the_result():
    result = judged_result()
    text = result.model_dump_json()
    encoded = encode_result(text)
    assert len(encoded.parts) == 1 and TRIMMED_ANNOTATION not in encoded.annotations
    assert encoded.annotations[RUN_ID_ANNOTATION] == result.run_id
    assert json.loads(decode_parts(encoded.parts)) == json.loads(text)
    summary = json.loads(encoded.summary)
    assert summary["verdict"] == result.verdict.model_dump(mode="json") and summary["run_id"] == result.run_id
    assert len(encoded.summary) < len(text) / 10


def test_a_large_result_is_split_over_parts_before_anything_is_dropped():
    text = judged_result().model_dump_json()
    whole = len(encode_result(text).parts[0])
    encoded = encode_result(text, max_part_bytes=whole // 3 + 1)
    assert len(encoded.parts) == 3 and encoded.annotations[PARTS_ANNOTATION] == "3"
    assert TRIMMED_ANNOTATION not in encoded.annotations
    assert json.loads(decode_parts(encoded.parts)) == json.loads(text)
    assert decode_parts([encoded.parts[0], None, encoded.parts[2]]) is None


def test_past_the_last_part_itl_lists_go_first_then_requests():
    result = judged_result()
    text = result.model_dump_json()
    without_itl = json.loads(text)
    for level in without_itl["levels"]:
        for request in level["requests"]:
            request["itl_ms"] = []
    budget = len(encode_result(json.dumps(without_itl)).parts[0])
    assert budget < len(encode_result(text).parts[0])
    trimmed = encode_result(text, max_part_bytes=budget, max_parts=1)
    assert trimmed.annotations[TRIMMED_ANNOTATION] == "requests.itl_ms"
    back = RunResult.model_validate_json(decode_parts(trimmed.parts))
    assert all(not r.itl_ms for lv in back.levels for r in lv.requests)
    assert back.levels[0].rounds == result.levels[0].rounds and back.verdict == result.verdict
    smaller = encode_result(text, max_part_bytes=budget - 1, max_parts=1)
    assert smaller.annotations[TRIMMED_ANNOTATION] == "requests"
    assert all(not lv.requests for lv in RunResult.model_validate_json(decode_parts(smaller.parts)).levels)
    with pytest.raises(ValueError, match="does not fit"):
        encode_result(text, max_part_bytes=100, max_parts=2)


def test_decode_of_an_unwritten_result_is_none():
    assert decode_parts([]) is None
    assert decode_parts([None]) is None


def precreate(api: FakeConfigMapApi, namespace: str, name: str) -> None:
    for i, part in enumerate(part_names(name)):
        api.add(namespace, {"metadata": {"name": part, "namespace": namespace,
                                         "labels": {RESULT_LABEL: INDEX if i == 0 else PART,
                                                    "sglab/stack": "eagle-nccl-ll"},
                                         "annotations": {"sglab/job": "sglab-bench-x"}}})


def test_writer_updates_the_precreated_configmap_and_keeps_its_metadata():
    text = judged_result().model_dump_json()
    with FakeConfigMapApi() as api:
        precreate(api, "lab", "sglab-result-x")
        write_result_configmap(text, "sglab-result-x", "lab", core_api=api.core_api())
        requests = [(m, p.rsplit("/", 1)[1]) for m, p, _ in api.requests]
        index = api.configmaps[("lab", "sglab-result-x")]
        payloads = stored_payloads(api, "lab", "sglab-result-x")
    assert requests == [("GET", "sglab-result-x"), ("PUT", "sglab-result-x")]  # get + update: the Role's verbs
    assert index["metadata"]["labels"]["sglab/stack"] == "eagle-nccl-ll"
    assert index["metadata"]["annotations"]["sglab/job"] == "sglab-bench-x"
    assert json.loads(decode_parts(payloads)) == json.loads(text)
    assert json.loads(index["data"][SUMMARY_KEY])["run_id"] == json.loads(text)["run_id"]


def test_writer_fills_the_parts_first_and_the_index_last(monkeypatch):
    text = judged_result().model_dump_json()
    monkeypatch.setattr(result_sink, "MAX_PART_BYTES", len(encode_result(text).parts[0]) // 3 + 1)
    with FakeConfigMapApi() as api:
        precreate(api, "lab", "sglab-result-x")
        write_result_configmap(text, "sglab-result-x", "lab", core_api=api.core_api())
        puts = [p.rsplit("/", 1)[1] for m, p, _ in api.requests if m == "PUT"]
        payloads = stored_payloads(api, "lab", "sglab-result-x")
        untouched = api.configmaps[("lab", "sglab-result-x-3")]
    assert puts == ["sglab-result-x-2", "sglab-result-x-1", "sglab-result-x"]
    assert json.loads(decode_parts(payloads)) == json.loads(text)
    assert "binaryData" not in untouched


def test_writer_creates_the_configmap_when_absent(monkeypatch):
    text = judged_result().model_dump_json()
    monkeypatch.setenv("POD_NAMESPACE", "lab")
    with FakeConfigMapApi() as api:
        assert write_result_configmap(text, "sglab-result-y", core_api=api.core_api()) == "lab"
        methods = [m for m, _, _ in api.requests]
        stored = api.configmaps[("lab", "sglab-result-y")]
        payloads = stored_payloads(api, "lab", "sglab-result-y")
    assert methods == ["GET", "POST"]
    assert stored["metadata"]["labels"] == {RESULT_LABEL: INDEX}
    assert json.loads(decode_parts(payloads)) == json.loads(text)


def test_outside_a_pod_the_writer_uses_the_kubeconfig(tmp_path):
    text = judged_result().model_dump_json()
    (tmp_path / "result.json").write_text(text)
    with FakeConfigMapApi() as api:
        env = {**os.environ, "KUBECONFIG": str(api.kubeconfig(tmp_path / "kubeconfig")), "POD_NAMESPACE": "lab"}
        env.pop("KUBERNETES_SERVICE_HOST", None)
        code = ("import sys; from pathlib import Path; from sglab.results.sink import write_result_configmap; "
                "write_result_configmap(Path(sys.argv[1]).read_text(), 'sglab-result-z')")
        done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "result.json")], env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        payloads = stored_payloads(api, "lab", "sglab-result-z")
    assert json.loads(decode_parts(payloads)) == json.loads(text)
