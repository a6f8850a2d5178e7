"""In-cluster Locust: master and workers read SGLAB_WORKER_TOKEN from the same Secret (so a foreign worker
cannot join the master), its value random, secret in Pulumi's state, kept across runs, and nowhere else."""

from __future__ import annotations

import ast
import json

import kubernetes_validate
import pytest

from sglab.core.paths import project_root
from sglab.deploy.locust import WORKER_TOKEN_ENV, WORKER_TOKEN_KEY, WORKER_TOKEN_SECRET

from .test_locust import K8S_VERSIONS, SECRET, by_kind, chart_inputs, container, locust_run, render, unsecret


def token_secret(run):
    (secret,) = [r for r in run.of_type(SECRET) if r.inputs["metadata"]["name"] == WORKER_TOKEN_SECRET]
    return secret


@pytest.fixture(scope="module", params=[{}, {"web-login": False, "workers": 5}], ids=["login", "no-login"])
def variant_run(request):
    run = locust_run(request.param, secrets=None if request.param else {"locust-password": "hunter2-test"})
    assert run.error is None, run.error
    return run


def test_master_and_workers_read_the_token_from_one_secret_key(variant_run):
    objects = render(chart_inputs(variant_run))
    deployments = by_kind(objects, "Deployment")
    assert {d["metadata"]["name"].rsplit("-", 1)[1] for d in deployments} == {"master", "worker"}
    for deployment in deployments:
        env = {e["name"]: e for e in container(deployment)["env"]}
        assert env[WORKER_TOKEN_ENV] == {"name": WORKER_TOKEN_ENV, "valueFrom": {"secretKeyRef": {
            "name": WORKER_TOKEN_SECRET, "key": WORKER_TOKEN_KEY}}}
    secret = token_secret(variant_run)
    assert secret.inputs["metadata"]["namespace"] == chart_inputs(variant_run)["namespace"]
    assert set(unsecret(secret.inputs["stringData"])[0]) == {WORKER_TOKEN_KEY}


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_the_token_secret_is_schema_valid(variant_run, version):
    secret = token_secret(variant_run)
    manifest = {"apiVersion": "v1", "kind": "Secret", **{k: unsecret(v)[0] for k, v in secret.inputs.items()
                                                         if k not in ("apiVersion", "kind")}}
    kubernetes_validate.validate(manifest, version, strict=True)


def test_the_token_is_random_secret_kept_and_in_no_output(variant_run):
    value, marked = unsecret(token_secret(variant_run).inputs["stringData"])
    token = value[WORKER_TOKEN_KEY]
    assert marked and len(token) >= 32
    other = unsecret(token_secret(locust_run({"web-login": False}, secrets=None)).inputs["stringData"])[0]
    assert other[WORKER_TOKEN_KEY] != token  # generated, not a constant
    options = variant_run.options_of(SECRET, "locust-worker-token")
    assert "stringData" in (options.get("ignore_changes") or options.get("ignoreChanges") or [])
    # Nowhere but in the Secret's own (secret-marked) input: not the chart values, not the rendered pods,
    # not any other resource, not the stack outputs.
    elsewhere = [r for r in variant_run.resources if r.name != "locust-worker-token"]
    assert token not in json.dumps([r.inputs for r in elsewhere], default=str)
    assert token not in json.dumps(render(chart_inputs(variant_run)))
    assert token not in json.dumps(variant_run.outputs, default=str)


def test_the_env_name_is_the_one_the_master_checks():
    """sglab/load/distributed.py imports gevent (never in this process): read its constant from the source."""
    tree = ast.parse((project_root() / "sglab" / "load" / "distributed.py").read_text())
    (value,) = [node.value.value for node in tree.body if isinstance(node, ast.Assign)
                and any(getattr(t, "id", None) == "WORKER_TOKEN_ENV" for t in node.targets)]
    assert value == WORKER_TOKEN_ENV
