"""The evidence says which machine produced it: the server's identity, the image and digest, and in the cluster the
pod, node and GPU Feature Discovery labels (read through the Kubernetes API, here with the client's real models);
arms on different GPUs, drivers or server versions are a blocker."""

from __future__ import annotations

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from sglab.analysis.provenance import machine_confounds, producer_of
from sglab.analysis.synthetic import synthetic_result
from sglab.analysis.verdict import judge
from sglab.load.targets import arm_machine, cluster_placement, image_digest, server_identity
from sglab.schema.result import ArmMachine
from sglab.sglang.client import ServerInfo

H200 = {"nvidia.com/gpu.product": "NVIDIA-H200", "nvidia.com/gpu.count": "8",
        "nvidia.com/cuda.driver-version.full": "580.95.05", "nvidia.com/cuda.driver.major": "580",
        "nvidia.com/cuda.driver.minor": "95", "nvidia.com/cuda.driver.rev": "05",
        "nvidia.com/cuda.runtime-version.full": "13.0", "nvidia.com/gfd.timestamp": "1760000000",
        "kubernetes.io/hostname": "gpu-a", "cloud.google.com/gke-accelerator": "nvidia-h200-141gb"}
DIGEST = "sha256:" + "ab" * 32


class FakeCore:
    """CoreV1Api's three reads, answering with the client's own models."""

    def __init__(self, *, forbid: str | None = None, labels: dict[str, str] | None = None) -> None:
        self.forbid, self.labels, self.calls = forbid, labels or H200, []

    def _call(self, name: str) -> None:
        self.calls.append(name)
        if name == self.forbid:
            raise ApiException(status=403, reason="Forbidden")

    def read_namespaced_service(self, name, namespace):
        self._call("service")
        assert (name, namespace) == ("sglang-candidate", "sglab")
        return client.V1Service(spec=client.V1ServiceSpec(selector={"app.kubernetes.io/instance": "sglang-candidate",
                                                                    "app.kubernetes.io/name": "sglang-server"}))

    def list_namespaced_pod(self, namespace, label_selector):
        self._call("pods")
        assert label_selector == "app.kubernetes.io/instance=sglang-candidate,app.kubernetes.io/name=sglang-server"
        status = client.V1ContainerStatus(name="sglang", image="lmsysorg/sglang:v0.5.23-cu130",
                                          image_id=f"docker.io/lmsysorg/sglang@{DIGEST}", ready=True, restart_count=0)
        ready = client.V1PodCondition(type="Ready", status="True")
        pod = client.V1Pod(metadata=client.V1ObjectMeta(name="sglang-candidate-7f9c-x2"),
                           spec=client.V1PodSpec(node_name="gpu-a", containers=[client.V1Container(name="sglang")]),
                           status=client.V1PodStatus(conditions=[ready], container_statuses=[status]))
        return client.V1PodList(items=[pod])

    def read_node(self, name):
        self._call("node")
        return client.V1Node(metadata=client.V1ObjectMeta(name=name, labels=self.labels))


URL = "http://sglang-candidate.sglab.svc.cluster.local:30000"


def test_the_pod_node_and_gpu_labels_behind_a_service() -> None:
    found = cluster_placement(URL, core_api=FakeCore())
    assert found["pod"] == "sglang-candidate-7f9c-x2" and found["node_name"] == "gpu-a"
    assert found["image"] == "lmsysorg/sglang:v0.5.23-cu130" and found["image_digest"] == DIGEST
    assert found["image_source"] == "pod" and found["notes"] == []
    labels = found["node_labels"]
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H200" and "nvidia.com/gfd.timestamp" not in labels
    assert "kubernetes.io/hostname" not in labels and labels["cloud.google.com/gke-accelerator"]


@pytest.mark.parametrize("step, words", [("service", "cannot get Service"), ("pods", "cannot list pods"),
                                         ("node", "cannot get node")])
def test_what_rbac_forbids_is_a_note_not_a_failure(step: str, words: str) -> None:
    found = cluster_placement(URL, core_api=FakeCore(forbid=step))
    assert any(words in n and "Forbidden" in n for n in found["notes"]), found


def test_the_servers_identity() -> None:
    sim = server_info_of({"version": "0.5.23", "sglab_sim": {"simulator": True, "time_scale": 3.0}})
    assert server_identity(sim) == {"producer": "simulator", "server_version": "0.5.23", "time_scale": 3.0}
    real = server_info_of({"version": "0.5.23", "tp_size": 8})
    assert server_identity(real) == {"producer": "sglang", "server_version": "0.5.23", "time_scale": None}


def server_info_of(raw: dict) -> ServerInfo:
    return ServerInfo("http://x", raw)


def test_image_digests() -> None:
    assert image_digest(f"lmsysorg/sglang@{DIGEST}") == DIGEST
    assert image_digest(f"docker-pullable://lmsysorg/sglang@{DIGEST}") == DIGEST
    assert image_digest("lmsysorg/sglang:v0.5.23") is None and image_digest(None) is None


def test_an_arm_in_the_cluster_records_all_of_it() -> None:
    machine = arm_machine(url=URL, target_kind="in-cluster", declared_image="lmsysorg/sglang:v0.5.23-cu130",
                          info=server_info_of({"version": "0.5.23"}),
                          placement=lambda url: cluster_placement(url, core_api=FakeCore()))
    assert machine.producer == "sglang" and machine.server_version == "0.5.23" and machine.node_name == "gpu-a"
    assert machine.image_source == "pod" and machine.image_digest == DIGEST


def test_a_simulator_sglab_started_is_a_simulator_whatever_it_says() -> None:
    machine = arm_machine(url="http://127.0.0.1:1", target_kind="sim", declared_image="lmsysorg/sglang:x",
                          info=server_info_of({"version": "0.5.23"}))
    assert machine.producer == "simulator" and machine.image is None


def _with_machines(baseline: dict, candidate: dict):
    result = synthetic_result(levels=(1,), gain=0.08, round_cv=0.005, shared_cv=0.005, request_cv=0.01,
                              producer="sglang")
    for info, labels in zip(result.arms, (baseline, candidate)):
        info.machine = ArmMachine(producer="sglang", server_version="0.5.23", node_labels=labels)
    return result


@pytest.mark.parametrize("change, fact", [({"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, "GPU product"),
                                          ({"nvidia.com/cuda.driver-version.full": "570.1.2"}, "GPU driver"),
                                          ({"nvidia.com/cuda.runtime-version.full": "12.8"}, "CUDA runtime")])
def test_arms_on_different_gpus_or_drivers_are_blocked(change: dict, fact: str) -> None:
    result = _with_machines(H200, {**H200, **change})
    assert [f for f, _, _ in machine_confounds(result)] == [fact]
    verdict = judge(result)
    blocker = next(b for b in verdict.blockers if b.name == "machines")
    assert verdict.outcome == "inconclusive" and fact in blocker.detail and "node-selector" in blocker.fix


def test_the_deprecated_gfd_driver_labels_count_too() -> None:
    old = {k: v for k, v in H200.items() if "driver-version" not in k}
    assert [f for f, _, _ in machine_confounds(_with_machines(old, {**old, "nvidia.com/cuda.driver.rev": "06"}))] == \
        ["GPU driver"]


def test_the_same_machines_pass() -> None:
    result = _with_machines(H200, dict(H200))
    assert machine_confounds(result) == [] and judge(result).outcome == "promote"
    assert producer_of(result).kind == "sglang" and producer_of(result).versions == ("0.5.23",)


def test_without_a_node_reader_the_pod_node_name_and_image_are_still_recorded() -> None:
    """A tenant-scoped stack grants no `get nodes` (benchmark-job.read-node-labels): the node's name comes from
    the pod itself, only its labels are missing."""
    found = cluster_placement(URL, core_api=FakeCore(forbid="node"))
    assert found["pod"] == "sglang-candidate-7f9c-x2" and found["node_name"] == "gpu-a"
    assert found["image_digest"] == DIGEST and "node_labels" not in found
    (note,) = found["notes"]
    assert "read-node-labels" in note
