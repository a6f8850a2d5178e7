"""The result ConfigMap format and the in-cluster writer (real kubernetes client, fake API server on 127.0.0.1)."""

from __future__ import annotations

import json

import pytest

from sglab.deploy.result_sink import (RESULT_KEY, RESULT_LABEL, RUN_ID_ANNOTATION, TRIMMED_ANNOTATION,
                                      decode_result, encode_result, write_result_configmap)
from sglab.results.schema import RunResult

from .fake_api import FakeConfigMapApi
from .results_fixtures import judged_result


def test_round_trip_keeps_every_byte_of_the_result():
    text = judged_result().model_dump_json()
    encoded = encode_result(text)
    assert set(encoded.binary_data) == {RESULT_KEY}
    assert TRIMMED_ANNOTATION not in encoded.annotations
    assert encoded.annotations[RUN_ID_ANNOTATION] == "20260101T000000Z-abc123"
    assert json.loads(decode_result(encoded.binary_data)) == json.loads(text)


def test_a_result_too_large_for_a_configmap_drops_itl_lists_first_then_requests():
    result = judged_result()
    text = result.model_dump_json()
    full = len(encode_result(text).binary_data[RESULT_KEY])
    without_itl = json.loads(text)
    for level in without_itl["levels"]:
        for request in level["requests"]:
            request["itl_ms"] = []
    budget = len(encode_result(json.dumps(without_itl)).binary_data[RESULT_KEY])
    assert budget < full
    trimmed = encode_result(text, max_bytes=budget)
    assert trimmed.annotations[TRIMMED_ANNOTATION] == "requests.itl_ms"
    back = RunResult.model_validate_json(decode_result(trimmed.binary_data))
    assert all(not r.itl_ms for lv in back.levels for r in lv.requests)
    assert back.levels[0].rounds == result.levels[0].rounds and back.verdict == result.verdict
    smaller = encode_result(text, max_bytes=budget - 1)
    assert smaller.annotations[TRIMMED_ANNOTATION] == "requests"
    assert all(not lv.requests for lv in RunResult.model_validate_json(decode_result(smaller.binary_data)).levels)
    with pytest.raises(ValueError, match="does not fit"):
        encode_result(text, max_bytes=100)


def test_decode_of_an_unwritten_configmap_is_none():
    assert decode_result(None) is None
    assert decode_result({}) is None


def test_writer_updates_the_precreated_configmap_and_keeps_its_metadata():
    text = judged_result().model_dump_json()
    with FakeConfigMapApi() as api:
        api.add("lab", {"metadata": {"name": "sglab-result-x", "namespace": "lab",
                                     "labels": {RESULT_LABEL: "true", "sglab/stack": "eagle-nccl-ll"},
                                     "annotations": {"sglab/job": "sglab-bench-x"}}})
        write_result_configmap(text, "sglab-result-x", "lab", core_api=api.core_api())
        methods = [m for m, _, _ in api.requests]
        stored = api.configmaps[("lab", "sglab-result-x")]
    assert methods == ["GET", "PUT"]  # what the Job's Role allows: get and update, no create
    assert stored["metadata"]["labels"]["sglab/stack"] == "eagle-nccl-ll"
    assert stored["metadata"]["annotations"]["sglab/job"] == "sglab-bench-x"
    assert json.loads(decode_result(stored["binaryData"])) == json.loads(text)


def test_writer_creates_the_configmap_when_absent(monkeypatch):
    text = judged_result().model_dump_json()
    monkeypatch.setenv("POD_NAMESPACE", "lab")
    with FakeConfigMapApi() as api:
        assert write_result_configmap(text, "sglab-result-y", core_api=api.core_api()) == "lab"
        methods = [m for m, _, _ in api.requests]
        stored = api.configmaps[("lab", "sglab-result-y")]
    assert methods == ["GET", "POST"]
    assert stored["metadata"]["labels"] == {RESULT_LABEL: "true"}
    assert json.loads(decode_result(stored["binaryData"])) == json.loads(text)


def test_outside_a_pod_the_writer_uses_the_kubeconfig(tmp_path):
    import os
    import subprocess
    import sys

    text = judged_result().model_dump_json()
    (tmp_path / "result.json").write_text(text)
    with FakeConfigMapApi() as api:
        env = {**os.environ, "KUBECONFIG": str(api.kubeconfig(tmp_path / "kubeconfig")), "POD_NAMESPACE": "lab"}
        env.pop("KUBERNETES_SERVICE_HOST", None)
        code = ("import sys; from pathlib import Path; from sglab.deploy.result_sink import write_result_configmap; "
                "write_result_configmap(Path(sys.argv[1]).read_text(), 'sglab-result-z')")
        done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "result.json")], env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        stored = api.configmaps[("lab", "sglab-result-z")]
    assert json.loads(decode_result(stored["binaryData"])) == json.loads(text)
