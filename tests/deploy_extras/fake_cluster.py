"""A stand-in for the Kubernetes API of two whole-node GPU servers, served on 127.0.0.1 for the real `kubernetes`
client: Deployments (get, patch) with the chart's Recreate strategy, their pods (list by label), a scheduler that
honours a required node affinity on kubernetes.io/hostname and lets one server per node run (the GPUs), and a
kubelet that makes a pod Ready after `start_s` (never on a node in `broken`). `/arms/<deployment>/health` answers
200 while that Deployment has a Ready pod: the arm's Service, for the mover's health wait.

Every request is recorded (method, path, query, body) so tests can check the order of operations and that each
one is allowed by the Job's Role.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from kubernetes import client

HOSTNAME = "kubernetes.io/hostname"


def _merge(target: dict, patch: dict) -> dict:
    """A JSON merge patch (RFC 7386): what a strategic merge patch of these fields amounts to (node selector
    terms have no merge key, so the list is replaced)."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)
    return target


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _pinned_node(template: dict) -> str | None:
    terms = (template["spec"].get("affinity", {}).get("nodeAffinity", {})
             .get("requiredDuringSchedulingIgnoredDuringExecution", {}).get("nodeSelectorTerms", []))
    for term in terms:
        for expr in term.get("matchExpressions", []):
            if expr["key"] == HOSTNAME and expr["operator"] == "In":
                return expr["values"][0]
    return None


class FakeCluster:
    def __init__(self, nodes: list[str], *, namespace: str = "lab", start_s: float = 0.2,
                 terminate_s: float = 0.1) -> None:
        self.nodes, self.namespace = list(nodes), namespace
        self.start_s, self.terminate_s = start_s, terminate_s
        self.broken: set[str] = set()
        self.deployments: dict[str, dict] = {}
        self.home: dict[str, str] = {}  # where an unpinned pod of a Deployment goes (the scheduler's choice)
        self.pods: dict[str, dict] = {}
        self.timers: dict[str, float] = {}  # pod -> when it turns Ready (or vanishes, if being deleted)
        self.requests: list[tuple[str, str, dict, Any]] = []
        self.lock = threading.RLock()
        self.stopping = threading.Event()
        self.serial = 0
        cluster = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _send(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _route(self, method: str) -> None:
                url = urlparse(self.path)
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                parts = url.path.strip("/").split("/")
                with cluster.lock:
                    if parts[0] != "arms":
                        cluster.requests.append((method, url.path, query, body))
                    status, answer = cluster.answer(method, parts, query, body)
                self._send(status, answer)

            def do_GET(self) -> None:
                self._route("GET")

            def do_PATCH(self) -> None:
                self._route("PATCH")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.threads = [threading.Thread(target=self.server.serve_forever, daemon=True),
                        threading.Thread(target=self._control_loop, daemon=True)]

    # ---- setup -----------------------------------------------------------------------------
    def add_deployment(self, name: str, node: str) -> None:
        """A chart Deployment (one replica, Recreate, no node affinity) with its pod Ready on `node`."""
        labels = {"app.kubernetes.io/name": "sglang-server", "app.kubernetes.io/instance": name}
        self.deployments[name] = {
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": self.namespace, "generation": 1, "annotations": {}},
            "spec": {"replicas": 1, "strategy": {"type": "Recreate"}, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {
                         "containers": [{"name": "sglang", "image": "lmsysorg/sglang:v0.5.23"}],
                         "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                             {"topologyKey": HOSTNAME,
                              "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "sglang-server"}}}]}}}}},
            "status": {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "readyReplicas": 1},
        }
        self.home[name] = node
        pod = self._new_pod(name, 1)
        pod["spec"]["nodeName"] = node
        self._set_ready(pod)

    def url_of(self, deployment: str) -> str:
        return f"{self.url}/arms/{deployment}"

    def api_client(self) -> client.ApiClient:
        configuration = client.Configuration()
        configuration.host = self.url
        return client.ApiClient(configuration)

    def apps_api(self) -> client.AppsV1Api:
        return client.AppsV1Api(self.api_client())

    def core_api(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api_client())

    def __enter__(self) -> "FakeCluster":
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()

    # ---- what a test reads -------------------------------------------------------------------
    def node_of(self, deployment: str) -> str | None:
        with self.lock:
            live = [p for p in self._pods_of(deployment) if "deletionTimestamp" not in p["metadata"]]
            return live[0]["spec"].get("nodeName") if len(live) == 1 and self._is_ready(live[0]) else None

    def replace_pod(self, deployment: str) -> None:
        """Something else than the run restarts a server (a `pulumi up` that changed it, an eviction)."""
        with self.lock:
            dep = self.deployments[deployment]
            dep["metadata"]["generation"] += 1

    # ---- the API -----------------------------------------------------------------------------
    def answer(self, method: str, parts: list[str], query: dict, body: Any) -> tuple[int, dict]:
        if parts[0] == "arms" and len(parts) == 3 and parts[2] == "health":
            return (200, {}) if self.node_of(parts[1]) else (503, {"error": "no ready pod"})
        if parts[:4] == ["apis", "apps", "v1", "namespaces"] and len(parts) == 7 and parts[5] == "deployments":
            dep = self.deployments.get(parts[6]) if parts[4] == self.namespace else None
            if dep is None:
                return 404, {"kind": "Status", "code": 404, "reason": "NotFound"}
            if method == "PATCH":
                before = json.dumps(dep["spec"], sort_keys=True)
                _merge(dep, body or {})
                if json.dumps(dep["spec"], sort_keys=True) != before:
                    dep["metadata"]["generation"] += 1
            return 200, dep
        if parts == ["api", "v1", "namespaces", self.namespace, "pods"] and method == "GET":
            terms = dict(t.split("=", 1) for t in query.get("labelSelector", "").split(",") if t)
            items = [p for p in self.pods.values()
                     if all(p["metadata"]["labels"].get(k) == v for k, v in terms.items())]
            return 200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items}
        return 404, {"kind": "Status", "code": 404, "reason": "NotFound"}

    # ---- the controllers ---------------------------------------------------------------------
    def _pods_of(self, deployment: str) -> list[dict]:
        return [p for p in self.pods.values() if p["metadata"]["labels"]["app.kubernetes.io/instance"] == deployment]

    @staticmethod
    def _is_ready(pod: dict) -> bool:
        return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions", []))

    def _new_pod(self, deployment: str, generation: int) -> dict:
        self.serial += 1
        name = f"{deployment}-g{generation}-{self.serial}"
        dep = self.deployments[deployment]
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": self.namespace, "creationTimestamp": _now(),
                            "labels": {**dep["spec"]["template"]["metadata"]["labels"], "generation": str(generation)}},
               "spec": copy.deepcopy(dep["spec"]["template"]["spec"]),
               "status": {"phase": "Pending", "conditions": [
                   {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                    "message": "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."}]}}
        self.pods[name] = pod
        return pod

    def _set_ready(self, pod: dict) -> None:
        pod["status"] = {"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"},
                                                            {"type": "Ready", "status": "True"}]}

    def _control_loop(self) -> None:
        while not self.stopping.wait(0.02):
            with self.lock:
                self._tick(time.monotonic())

    def _tick(self, now: float) -> None:
        for name, pod in list(self.pods.items()):  # the kubelet: terminations end, started servers turn Ready
            due = self.timers.get(name)
            if due is None or now < due:
                continue
            del self.timers[name]
            if "deletionTimestamp" in pod["metadata"]:
                del self.pods[name]
            elif pod["spec"].get("nodeName") not in self.broken:
                self._set_ready(pod)
        for name, dep in self.deployments.items():  # the Deployment controller, Recreate
            generation = dep["metadata"]["generation"]
            pods = self._pods_of(name)
            if dep["status"]["observedGeneration"] < generation:
                for pod in pods:
                    if "deletionTimestamp" not in pod["metadata"]:
                        pod["metadata"]["deletionTimestamp"] = _now()
                        self.timers[pod["metadata"]["name"]] = now + self.terminate_s
                dep["status"]["observedGeneration"] = generation
            pods = self._pods_of(name)
            current = [p for p in pods if p["metadata"]["labels"]["generation"] == str(generation)]
            if not any("deletionTimestamp" in p["metadata"] for p in pods):
                for _ in range(dep["spec"]["replicas"] - len(current)):
                    current.append(self._new_pod(name, generation))
            live = [p for p in pods if "deletionTimestamp" not in p["metadata"]]
            dep["status"].update(replicas=len(live), updatedReplicas=len(current),
                                 readyReplicas=sum(self._is_ready(p) for p in live))
        for name, pod in self.pods.items():  # the scheduler: one server per node
            if pod["spec"].get("nodeName") or "deletionTimestamp" in pod["metadata"]:
                continue
            deployment = pod["metadata"]["labels"]["app.kubernetes.io/instance"]
            wanted = _pinned_node(pod)
            taken = {p["spec"].get("nodeName") for p in self.pods.values() if p is not pod}
            choices = [wanted] if wanted else [self.home[deployment], *self.nodes]
            free = [n for n in choices if n in self.nodes and n not in taken]
            if free:
                pod["spec"]["nodeName"] = free[0]
                pod["status"] = {"phase": "Pending", "conditions": [
                    {"type": "PodScheduled", "status": "True"},
                    {"type": "Ready", "status": "False", "reason": "ContainersNotReady",
                     "message": "containers with unready status: [sglang]"}]}
                self.timers[name] = now + self.start_s
