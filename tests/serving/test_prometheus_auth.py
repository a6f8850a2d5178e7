"""The judge reaches an authenticated Prometheus (bearer token file re-read per query, a CA, extra headers such
as a tenant id), the cluster's pods get them mounted from the declared Secret/ConfigMap, and the default query
endpoint is a load-balanced Service, not the operator's headless one."""

from __future__ import annotations

import json

import httpx
import pytest
from ruamel.yaml import YAML

from sglab.config.loader import load_stack
from sglab.config.serving import Monitoring
from sglab.core.paths import stacks_dir
from sglab.deploy.render import render_stack
from sglab.serving.prometheus import Prometheus, PrometheusError
from sglab.serving.spec import SPEC_ENV, JudgeSpec

OK = {"status": "success", "data": {"resultType": "vector", "result": []}}


def _recording_client(seen: list[httpx.Request]) -> httpx.Client:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=OK)

    return httpx.Client(transport=httpx.MockTransport(handler))


def test_queries_carry_the_token_read_each_time_and_the_headers(tmp_path):
    token = tmp_path / "token"
    token.write_text("first\n")
    seen: list[httpx.Request] = []
    with Prometheus("http://p:9090", client=_recording_client(seen), bearer_token_file=str(token),
                    headers={"X-Scope-OrgID": "inference"}) as prom:
        prom.query("up", 1.0)
        token.write_text("rotated")
        prom.query("up", 2.0)
    assert [r.headers["Authorization"] for r in seen] == ["Bearer first", "Bearer rotated"]
    assert {r.headers["X-Scope-OrgID"] for r in seen} == {"inference"}


def test_an_unreadable_token_or_ca_is_a_prometheus_error_naming_the_file(tmp_path):
    missing = str(tmp_path / "nope")
    with Prometheus("http://p:9090", client=_recording_client([]), bearer_token_file=missing) as prom:
        with pytest.raises(PrometheusError, match="nope"):
            prom.query("up", 1.0)
    with pytest.raises(PrometheusError, match="nope"):
        Prometheus("https://p:9090", ca_file=missing)


def test_the_default_endpoint_is_not_the_headless_service():
    assert "prometheus-operated" not in Monitoring().prometheus_url


def test_the_judge_and_watch_pods_mount_the_declared_credentials(tmp_path):
    yaml_rt = YAML()
    doc = yaml_rt.load((stacks_dir() / "Pulumi.production.yaml").read_text())
    doc["config"]["sglab:serving"]["monitoring"].update({
        "prometheus-url": "https://thanos-querier.monitoring.svc:9091",
        "bearer-token-secret": {"name": "prom-reader", "key": "token"},
        "ca-configmap": {"name": "prom-ca", "key": "ca.crt"},
        "headers": {"X-Scope-OrgID": "inference"}})
    (tmp_path / "stacks").mkdir()
    path = tmp_path / "stacks" / "Pulumi.production.yaml"
    with open(path, "w") as fh:
        yaml_rt.dump(doc, fh)
    objects = render_stack(load_stack("production", path=path)).objects
    (template,) = [o for o in objects if o["kind"] == "AnalysisTemplate"]
    (cron,) = [o for o in objects if o["kind"] == "CronJob" and o["metadata"]["name"].endswith("-watch")]
    for pod in (template["spec"]["metrics"][0]["provider"]["job"]["spec"]["template"]["spec"],
                cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]):
        (container,) = pod["containers"]
        spec = JudgeSpec.model_validate(json.loads({e["name"]: e["value"] for e in container["env"]}[SPEC_ENV]))
        assert spec.prometheus_headers == {"X-Scope-OrgID": "inference"}
        mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
        volumes = {v["name"]: v for v in pod["volumes"]}
        token_dir = mounts["prometheus-token"]
        assert spec.prometheus_bearer_token_file == f"{token_dir}/token"
        assert volumes["prometheus-token"]["secret"] == {"secretName": "prom-reader",
                                                         "items": [{"key": "token", "path": "token"}]}
        assert spec.prometheus_ca_file == f"{mounts['prometheus-ca']}/ca.crt"
        assert volumes["prometheus-ca"]["configMap"] == {"name": "prom-ca", "items": [{"key": "ca.crt",
                                                                                       "path": "ca.crt"}]}
