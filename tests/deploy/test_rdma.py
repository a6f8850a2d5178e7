"""Multi-node that NCCL can use: `sglab:placement.rdma` renders the RDMA device resources, the
secondary network (Multus) or the host network, IPC_LOCK and the NCCL/Gloo interface variables into both
LeaderWorkerSet templates of both arms, identically; strict-valid on Kubernetes 1.31 and 1.37 (the pod templates)
and against the LeaderWorkerSet v0.10.0 CRD (vendored: tests/data/README.md)."""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from sglab.cli import main
from sglab.config.arms import baseline_arm, candidate_arm, confounds
from sglab.config.lints import stack_lints
from sglab.config.loader import load_mapping, load_stack
from sglab.deploy.render import render_stack
from sglab.core.errors import ConfigError

K8S = ("1.31", kubernetes_validate.latest_version())
CRD = Path(__file__).resolve().parents[1] / "data" / "lws-v0.10.0-leaderworkersets.yaml.gz"
RDMA = {"resource": "rdma/rdma_shared_device_a", "count": 1, "networks": ["gpu-net/sriov-ib0", "gpu-net/sriov-ib1"],
        "socket-ifname": "net1", "ib-hca": "=mlx5_0,mlx5_1", "ib-gid-index": 3}


def two_node(rdma: dict | None = RDMA, **more):
    loaded = load_stack("eagle-nccl-ll")
    raw = json.loads(json.dumps(loaded.raw))
    raw["placement"] = {**raw["placement"], "nodes": 2, **({"rdma": rdma} if rdma is not None else {})}
    raw["server"] = {**raw["server"], "tp-size": 16}
    raw.update(more)
    return load_mapping("two-node-rdma", loaded.path, raw)


def lws_objects(loaded) -> list[dict]:
    return [o for o in render_stack(loaded).objects if o["kind"] == "LeaderWorkerSet"]


def strict(schema: dict) -> dict:
    """The CRD's structural schema as the API server prunes with it: unknown fields are errors here."""
    schema = copy.deepcopy(schema)

    def walk(node: dict) -> None:
        if not isinstance(node, dict):
            return
        if "properties" in node and "additionalProperties" not in node \
                and not node.get("x-kubernetes-preserve-unknown-fields"):
            node["additionalProperties"] = False
        for child in node.get("properties", {}).values():
            walk(child)
        for key in ("items", "additionalProperties"):
            if isinstance(node.get(key), dict):
                walk(node[key])
        for key in ("allOf", "anyOf", "oneOf"):
            for child in node.get(key, []):
                walk(child)

    walk(schema)
    return schema


@pytest.fixture(scope="module")
def lws_schema() -> dict:
    crd = yaml.safe_load(gzip.decompress(CRD.read_bytes()))
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    return strict(version["schema"]["openAPIV3Schema"])


def test_both_templates_of_both_arms_carry_the_fabric(lws_schema):
    objects = lws_objects(two_node())
    assert sorted(o["metadata"]["name"] for o in objects) == ["sglang-baseline", "sglang-candidate"]
    envs = []
    for lws in objects:
        group = lws["spec"]["leaderWorkerTemplate"]
        for which in ("leaderTemplate", "workerTemplate"):
            pod = group[which]
            assert (pod["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"]
                    == "gpu-net/sriov-ib0,gpu-net/sriov-ib1")
            (container,) = pod["spec"]["containers"]
            resources = container["resources"]
            assert (resources["limits"]["rdma/rdma_shared_device_a"]
                    == resources["requests"]["rdma/rdma_shared_device_a"] == 1)
            assert resources["limits"]["nvidia.com/gpu"] == 8
            assert container["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["IPC_LOCK"]}
            assert container["securityContext"]["allowPrivilegeEscalation"] is False
            assert "privileged" not in container["securityContext"]  # a device plugin hands over the devices
            env = {e["name"]: e.get("value") for e in container["env"]}
            assert {k: env[k] for k in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_IB_HCA",
                                        "NCCL_IB_GID_INDEX")} == {"NCCL_SOCKET_IFNAME": "net1",
                                                                  "GLOO_SOCKET_IFNAME": "net1",
                                                                  "NCCL_IB_HCA": "=mlx5_0,mlx5_1",
                                                                  "NCCL_IB_GID_INDEX": "3"}
            assert "hostNetwork" not in pod["spec"]
            envs.append(env)
            for version in K8S:
                kubernetes_validate.validate({"apiVersion": "v1", "kind": "PodTemplate",
                                              "metadata": {"name": f"{lws['metadata']['name']}-{which.lower()}"},
                                              "template": pod}, version, strict=True)
        jsonschema.validate(lws, lws_schema)
    assert all(e == envs[0] for e in envs)  # leader and workers, baseline and candidate: the same fabric


def test_the_fabric_is_in_both_arms_config_hashes_and_never_a_confound():
    loaded = two_node()
    base, cand = baseline_arm(loaded.config), candidate_arm(loaded.config)
    assert base.env["NCCL_SOCKET_IFNAME"] == cand.env["NCCL_SOCKET_IFNAME"] == "net1"
    assert confounds(loaded.config) == []
    tcp = two_node(rdma=None)
    assert baseline_arm(tcp.config).config_hash != base.config_hash  # another fabric, another server


def test_the_host_network_shape(lws_schema):
    (lws, *_) = lws_objects(two_node({"host-network": True, "socket-ifname": "eth0", "ib-hca": "mlx5"}))
    pod = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    spec = pod["spec"]
    assert spec["hostNetwork"] is True and spec["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert {"name": "infiniband", "hostPath": {"path": "/dev/infiniband", "type": "Directory"}} in spec["volumes"]
    (container,) = spec["containers"]
    assert {"name": "infiniband", "mountPath": "/dev/infiniband"} in container["volumeMounts"]
    assert "k8s.v1.cni.cncf.io/networks" not in pod["metadata"]["annotations"]
    for version in K8S:
        kubernetes_validate.validate({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "w"},
                                      "template": pod}, version, strict=True)
    jsonschema.validate(lws, lws_schema)


def test_the_crd_check_can_fail(lws_schema):
    (lws, *_) = lws_objects(two_node())
    bad = copy.deepcopy(lws)
    bad["spec"]["leaderWorkerTemplate"]["sizee"] = 2
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, lws_schema)


def test_a_multi_node_stack_without_a_fabric_is_linted(capsys):
    lints = stack_lints(two_node(rdma=None).config)
    (lint,) = [lint for lint in lints if lint.code == "multi-node-without-rdma"]
    assert lint.severity == "warning" and lint.key == "placement.rdma" and "TCP sockets" in lint.message
    assert not [lint for lint in stack_lints(two_node().config) if lint.code == "multi-node-without-rdma"]
    accepted = two_node(rdma=None, **{"accept-lints": ["multi-node-without-rdma"]})
    assert [lint.severity for lint in stack_lints(accepted.config)
            if lint.code == "multi-node-without-rdma"] == ["note"]


@pytest.mark.parametrize("rdma, key, words", [
    ({"socket-ifname": "eth0"}, "placement.rdma.resource", ["device plugin", "host-network"]),
    ({"resource": "rdma", "socket-ifname": "eth0"}, "placement.rdma.resource", ["<domain>/<name>"]),
    ({"host-network": True, "networks": ["a"], "socket-ifname": "eth0"}, "placement.rdma.networks", ["one of the two"]),
    ({"resource": "rdma/hca"}, "placement.rdma.socket-ifname", ["NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"]),
])
def test_a_bad_fabric_is_refused_naming_the_key(rdma, key, words):
    with pytest.raises(ConfigError) as refused:
        two_node(rdma)
    message = str(refused.value)
    assert f"sglab:{key}" in message, message
    for word in words:
        assert word in message


def test_a_variable_set_twice_is_refused():
    with pytest.raises(ConfigError) as refused:
        two_node(nccl={"NCCL_SOCKET_IFNAME": "eth9"})
    assert "sglab:nccl.NCCL_SOCKET_IFNAME" in str(refused.value) and "placement.rdma" in str(refused.value)


def test_docs_name_the_leaderworkerset_minimum_version():
    text = (Path(__file__).resolve().parents[2] / "docs" / "deploy.md").read_text()
    assert "v0.6.0" in text and "placement.rdma" in text and "IPC_LOCK" in text


def test_validate_prints_the_fabric_lint(tmp_path, monkeypatch, capsys):
    loaded = load_stack("eagle-nccl-ll")
    text = loaded.path.read_text().replace("    gpus-per-node: 8\n", "    gpus-per-node: 8\n    nodes: 2\n")
    text = text.replace("    tp-size: 8\n", "    tp-size: 16\n")
    (tmp_path / "Pulumi.eagle-nccl-ll.yaml").write_text(text)
    monkeypatch.setenv("SGLAB_STACKS_DIR", str(tmp_path))
    assert main(["validate", "--stack", "eagle-nccl-ll"]) == 0
    assert "[multi-node-without-rdma]" in capsys.readouterr().out
