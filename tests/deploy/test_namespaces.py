"""Platform-owned namespaces and safe teardown, under Pulumi's mocks.

`pulumi destroy` deletes what the program created and nothing it only read (`Namespace.get`), and keeps what
it created with retainOnDelete: so production's namespace (created by the platform, where its weights' PVC
lives) is never deleted, and a namespace the stack creates survives while it holds results or claims.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sglab.config.loader import load_mapping, load_stack
from sglab.deploy.namespace import holds_state, namespace_manifest
from sglab.core.errors import ConfigError
from pulumi_harness import run_program

NAMESPACE = "kubernetes:core/v1:Namespace"
PVC = "kubernetes:core/v1:PersistentVolumeClaim"


def stack_with(name: str, **sections):
    loaded = load_stack(name)
    return load_mapping(name, loaded.path, {**json.loads(json.dumps(loaded.raw)), **sections})


def test_production_reads_its_namespace_and_never_creates_or_deletes_it():
    run = run_program("production")
    assert run.error is None, run.error
    assert run.of_type(NAMESPACE) == []  # nothing Pulumi created, so nothing `pulumi destroy` deletes
    (read,) = [r for r in run.reads() if r.typ == NAMESPACE]
    assert read.read_id == "sglab-production"  # Namespace.get: read, never owned
    assert run.outputs["namespace"] == "sglab-production" and run.outputs["namespace_created"] is False
    assert read.name == "existing-namespace"  # never the name of a created one: no read-replacement of it
    for server in run.of_type("sglab:index:SGLangServer"):  # the servers still wait for it
        deps = run.options_of(server.typ, server.name)["dependencies"]
        assert any(d.endswith(f"{NAMESPACE}::existing-namespace") for d in deps)
    assert run.of_type(PVC) == []  # the weights' claim is the platform's: referenced, never declared


def test_a_created_namespace_holding_results_is_kept_on_destroy():
    run = run_program("eagle-nccl-ll")
    (ns,) = run.of_type(NAMESPACE)
    assert run.options_of(NAMESPACE, "namespace")["retain_on_delete"] is True  # benchmark results live in it
    assert "benchmark results" in ns.inputs["metadata"]["annotations"]["sglab/kept-on-destroy"]
    bare = run_program("eagle-nccl-ll", {"benchmark-job": {"enabled": False}})
    assert bare.options_of(NAMESPACE, "namespace")["retain_on_delete"] is False  # nothing to keep: destroy removes it


def test_what_a_namespace_holds_decides_whether_it_is_kept():
    # production serves (sglab:serving): no benchmark Job, so no results unless the Job is switched on
    assert holds_state(load_stack("production").config) == ["the weights' PersistentVolumeClaim kimi-k2-5-weights"]
    benchmarked = stack_with("production", **{"benchmark-job": {"enabled": True}}).config
    assert holds_state(benchmarked) == [
        "the weights' PersistentVolumeClaim kimi-k2-5-weights", "benchmark results (ConfigMaps)"]
    pinned = stack_with("eagle-nccl-ll", namespace={"name": "lab", "protect": False}).config
    assert "annotations" not in namespace_manifest(pinned, "eagle-nccl-ll")["metadata"]


def test_namespace_shorthand_and_object_form():
    assert stack_with("eagle-nccl-ll", namespace="lab-1").config.namespace == "lab-1"
    spec = stack_with("eagle-nccl-ll", namespace={"name": "team-a", "create": False}).config.namespace_spec
    assert (spec.name, spec.create) == ("team-a", False)
    with pytest.raises(ConfigError) as bad:
        stack_with("eagle-nccl-ll", namespace={"name": "Team_A"})
    assert "sglab:namespace.name" in str(bad.value) and "not a valid namespace" in str(bad.value)
    with pytest.raises(ConfigError) as typo:
        stack_with("eagle-nccl-ll", namespace={"name": "a", "craete": False})
    assert "did you mean 'create'" in str(typo.value)


def test_pulumi_config_sets_the_namespace_by_path():
    """`pulumi config set --path sglab:namespace.create false` hands the program JSON; a plain name stays a string."""
    run = run_program("eagle-nccl-ll", {"namespace": {"name": "lab-7", "create": False}})
    assert run.error is None and run.of_type(NAMESPACE) == [] and run.outputs["namespace"] == "lab-7"
    plain = run_program("eagle-nccl-ll", {"namespace": "lab-8"})
    assert plain.error is None and plain.of_type(NAMESPACE)[0].inputs["metadata"]["name"] == "lab-8"


STRICT_NAMESPACE = """
import json, sys
sys.path.insert(0, {tests!r})
from pulumi_harness import run_program
run = run_program("production", reads={{"sglab-production": {{"metadata": {{"name": "sglab-production",
    "labels": {{"pod-security.kubernetes.io/enforce": "restricted"}}}}}}}})
print(json.dumps({{"error": str(run.error), "registered": sorted({{r.typ + "::" + r.name for r in run.resources}})}}))
"""


def test_an_existing_namespace_that_would_refuse_the_pods_stops_pulumi_up_before_any_server():
    """A restricted namespace refuses pods that may run as root: the program stops on the label it reads, before a
    server's chart or the preflight Job is declared. (A process of its own: see test_preflight.py.)"""
    code = STRICT_NAMESPACE.format(tests=str(Path(__file__).resolve().parents[1]))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    run = json.loads(done.stdout.strip().splitlines()[-1])
    assert "enforces the Pod Security Standard 'restricted'" in run["error"] and "need 'baseline'" in run["error"]
    assert "pod-security.run-as-user" in run["error"]
    assert not [r for r in run["registered"] if r.startswith(("kubernetes:helm.sh/v4:Chart::",
                                                              "kubernetes:batch/v1:Job::"))]
