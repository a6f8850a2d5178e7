"""The driver check: the servers' image is a CUDA build (the pinned release, CUDA 13, needs NVIDIA driver R580 or
newer); before anything is declared, the GPU nodes the servers could land on are read, and one whose GPU Feature
Discovery driver label is older than that stops `pulumi up`, named, with the fix. A node without the label, or
nodes that cannot be read, are a warning: not checked, said.

Run in its own pytest process (Pulumi mocks), never beside Locust's tests.
"""

from __future__ import annotations

import json

import pulumi
import pytest

from sglab.config.loader import load_mapping, load_stack
from sglab.core.errors import ConfigError
from sglab.deploy.capacity import MIN_DRIVER_MAJOR, Node, Taint, check_drivers, landing_nodes
from sglab.sglang.flags import DEFAULT_IMAGE, parse_image
from pulumi_harness import run_program

CHART = "kubernetes:helm.sh/v4:Chart"
POOL = {"nvidia.com/gpu.product": "NVIDIA-H200", "pool": "inference-prod"}  # production's node selector
GPU_TAINT = Taint("nvidia.com/gpu", "present", "NoSchedule")  # production tolerates it


def node(name: str, driver: int | None, *, label: str = "nvidia.com/cuda.driver-version.major", gpus: int = 8,
         labels: dict | None = None, taints: tuple = (GPU_TAINT,)) -> Node:
    return Node(name, {**(labels if labels is not None else POOL), **({label: str(driver)} if driver else {})},
                gpus, taints)


def production(**sections):
    loaded = load_stack("production")
    return load_mapping("production", loaded.path, {**json.loads(json.dumps(loaded.raw)), **sections}).config


@pytest.mark.parametrize("image, cuda", [
    (DEFAULT_IMAGE, 13),  # the pinned release's plain tag: CUDA 13 (sglab/sglang/flags.py)
    (f"{DEFAULT_IMAGE}@sha256:{'a' * 64}", 13),
    ("lmsysorg/sglang:v0.5.23-cu129", 12),
    ("lmsysorg/sglang:v0.5.8-cu130-amd64-runtime", 13),
    ("lmsysorg/sglang:v0.5.3.post1-cu126", 12),
    ("registry.example.com/team/sglang:v0.5.23-cu130", 13),  # a -cuNNN build tag says it in any repository
    ("lmsysorg/sglang:v0.5.9", None),  # another release's plain tag: not known here
    ("lmsysorg/sglang:latest", None),
    (f"lmsysorg/sglang@sha256:{'a' * 64}", None),  # a digest alone says nothing
    ("sglab:0.1.0", None),
])
def test_the_cuda_major_an_image_needs_is_read_from_its_reference(image, cuda):
    assert parse_image(image).cuda_major == cuda


def test_the_minimum_driver_per_cuda_major_is_nvidias_table():
    assert MIN_DRIVER_MAJOR == {13: 580, 12: 525}


def test_nodes_with_a_new_enough_driver_pass_and_are_counted():
    stack = load_stack("production").config
    summary, warnings = check_drivers(stack, "production", [node(f"gpu-{i}", 580 + i) for i in range(3)])
    assert warnings == []
    assert "3 of 3 GPU nodes" in summary and "R580" in summary and "CUDA 13" in summary


def test_a_node_with_an_older_driver_is_named_with_the_fix():
    stack = load_stack("production").config
    nodes = [node("gpu-ok", 580), node("gpu-old", 570),
             node("gpu-older", 550, label="nvidia.com/cuda.driver.major")]  # an older GFD's (deprecated) label
    with pytest.raises(ConfigError) as refused:
        check_drivers(stack, "production", nodes)
    error = refused.value
    assert error.key == "image" and error.file.endswith("Pulumi.production.yaml")
    assert "gpu-old (R570)" in error.problem and "gpu-older (R550)" in error.problem
    assert "gpu-ok" not in error.problem
    assert "R580" in error.problem and "CUDA 13" in error.problem and DEFAULT_IMAGE in error.problem
    assert "upgrade the driver" in error.fix
    assert f"{DEFAULT_IMAGE}-cu129" in error.fix  # the same release built for CUDA 12
    assert "placement.node-selector" in error.fix


def test_only_nodes_the_servers_could_land_on_are_checked():
    placement = load_stack("production").config.placement
    elsewhere = node("training-0", 470, labels={"nvidia.com/gpu.product": "NVIDIA-H200", "pool": "training"})
    small = node("small-0", 470, gpus=4)  # a server takes gpus-per-node (8) GPUs
    tainted = node("reserved-0", 470, taints=(GPU_TAINT, Taint("team", "research", "NoExecute")))
    soft = node("soft-0", 590, taints=(Taint("team", "research", "PreferNoSchedule"),))  # a preference only
    assert [n.name for n in landing_nodes(placement, [elsewhere, small, tainted, soft])] == ["soft-0"]
    summary, warnings = check_drivers(load_stack("production").config, "production", [elsewhere, small, tainted, soft])
    assert warnings == [] and "1 of 1" in summary


def test_a_node_without_the_driver_label_is_a_warning_not_a_failure():
    summary, warnings = check_drivers(load_stack("production").config, "production",
                                      [node("gpu-ok", 580), node("gke-0", None), node("gke-1", None)])
    assert "1 of 3" in summary
    assert len(warnings) == 1
    assert "not checked" in warnings[0] and "gke-0" in warnings[0] and "gke-1" in warnings[0]
    assert "nvidia.com/cuda.driver-version.major" in warnings[0]


def test_no_node_to_land_on_is_said_not_failed():
    summary, warnings = check_drivers(load_stack("production").config, "production", [])
    assert summary is None and len(warnings) == 1 and "not checked" in warnings[0]


def test_a_cuda_12_image_needs_r525():
    stack = production(image="lmsysorg/sglang:v0.5.23-cu129")
    summary, _ = check_drivers(stack, "production", [node("gpu-0", 550)])
    assert "R525" in summary and "CUDA 12" in summary
    with pytest.raises(ConfigError) as refused:
        check_drivers(stack, "production", [node("gpu-0", 470)])
    assert "gpu-0 (R470)" in refused.value.problem and "cu129" not in refused.value.fix  # nothing older to offer


def test_an_image_that_names_no_cuda_build_is_not_checked_and_says_so():
    stack = production(image="registry.example.com/team/sglang:custom")
    summary, warnings = check_drivers(stack, "production", [node("gpu-0", 470)])
    assert summary is None
    assert len(warnings) == 1 and "registry.example.com/team/sglang:custom" in warnings[0]
    assert "not checked" in warnings[0]


def test_a_simulator_stack_has_no_driver_to_check():
    assert check_drivers(load_stack("sim").config, "sim", [node("gpu-0", 470)]) == (None, [])


def test_pulumi_up_stops_before_anything_is_declared_on_an_old_driver():
    run = run_program("production", nodes=[node("gpu-a", 580), node("gpu-b", 535)])
    assert run.error is not None and "gpu-b (R535)" in str(run.error) and "fix:" in str(run.error)
    assert run.of_type(CHART) == []  # no server, preflight or anything else was declared
    assert run_program("production", nodes=[node("gpu-a", 580)]).error is None


def test_nodes_that_cannot_be_read_leave_the_deploy_unchecked_not_failed(monkeypatch):
    """A namespace-scoped deployer may not list nodes (Forbidden), and a preview may have no cluster at all."""
    warned: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *args, **kwargs: warned.append(message))
    run = run_program("production")  # the harness's reader: no cluster under Pulumi's mocks
    assert run.error is None, run.error
    assert len(run.of_type(CHART)) == 2
    (note,) = [w for w in warned if w.startswith("driver:")]
    assert "could not be read" in note and "not checked" in note


def test_the_cluster_reader_keeps_each_nodes_labels_gpus_and_taints(monkeypatch, tmp_path):
    from kubernetes import client, config

    from sglab.deploy.capacity import read_cluster_nodes

    loaded: list = []
    monkeypatch.setattr(config, "load_kube_config", lambda config_file=None, context=None: loaded.append(
        (config_file, context)))
    monkeypatch.setattr(config, "load_kube_config_from_dict", lambda config_dict, context=None: loaded.append(
        (config_dict, context)))
    items = [client.V1Node(metadata=client.V1ObjectMeta(name="gpu-0", labels={"pool": "inference-prod"}),
                           status=client.V1NodeStatus(allocatable={"nvidia.com/gpu": "8", "cpu": "96"}),
                           spec=client.V1NodeSpec(taints=[client.V1Taint(key="nvidia.com/gpu", value="present",
                                                                         effect="NoSchedule")])),
             client.V1Node(metadata=client.V1ObjectMeta(name="cpu-0"), status=client.V1NodeStatus(),
                           spec=client.V1NodeSpec())]
    monkeypatch.setattr(client.CoreV1Api, "list_node", lambda self, **kw: client.V1NodeList(items=items))
    nodes = read_cluster_nodes("prod-h200")
    assert nodes == [Node("gpu-0", {"pool": "inference-prod"}, 8, (GPU_TAINT,)), Node("cpu-0", {}, 0, ())]
    assert loaded == [(None, "prod-h200")]  # $KUBECONFIG or ~/.kube/config, the provider's context
    path = tmp_path / "kubeconfig"
    path.write_text("apiVersion: v1\n")
    read_cluster_nodes(None, str(path))
    read_cluster_nodes("ctx", "apiVersion: v1\nkind: Config\n")  # kubernetes:kubeconfig holding the file's text
    assert loaded[1:] == [(str(path), None), ({"apiVersion": "v1", "kind": "Config"}, "ctx")]
