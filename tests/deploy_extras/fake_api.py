"""A tiny stand-in for the Kubernetes API server's ConfigMap endpoints, served on 127.0.0.1.

Enough for the real `kubernetes` client to list (with a label selector), read, create and replace
ConfigMaps, to read and patch PodDisruptionBudgets (a patch that names a resourceVersion other than the
budget's is refused with 409 Conflict, as the API server refuses it), and to read pods by name; every request is
recorded so tests can assert what the client asked for.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

from kubernetes import client


def _merge(target: dict, patch: dict) -> dict:
    """A JSON merge patch (RFC 7386), what a strategic merge patch of scalar fields and annotations amounts to."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = value
    return target


class FakeConfigMapApi:
    def __init__(self) -> None:
        self.configmaps: dict[tuple[str, str], dict] = {}
        self.pdbs: dict[tuple[str, str], dict] = {}  # PodDisruptionBudgets (policy/v1): get and patch
        self.pods: dict[tuple[str, str], dict] = {}  # pods (v1): get by name
        self.requests: list[tuple[str, str, dict]] = []
        self.content_types: list[str] = []
        api = self

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
                api.requests.append((method, url.path, query))
                api.content_types.append(self.headers.get("Content-Type", ""))
                parts = url.path.strip("/").split("/")
                if parts[:4] == ["apis", "policy", "v1", "namespaces"] and len(parts) == 7 \
                        and parts[5] == "poddisruptionbudgets":
                    key = (parts[4], parts[6])
                    if key not in api.pdbs:
                        return self._send(404, {"kind": "Status", "code": 404, "reason": "NotFound"})
                    if method == "PATCH":
                        meta = api.pdbs[key]["metadata"]
                        wanted = (body or {}).get("metadata", {}).pop("resourceVersion", None)
                        if wanted is not None and wanted != meta["resourceVersion"]:
                            return self._send(409, {"kind": "Status", "code": 409, "reason": "Conflict"})
                        _merge(api.pdbs[key], body or {})
                        meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)
                    return self._send(200, api.pdbs[key]) if method in ("GET", "PATCH") else self._send(405, {})
                if parts[:3] == ["api", "v1", "namespaces"] and len(parts) == 6 and parts[4] == "pods" \
                        and method == "GET":
                    pod = api.pods.get((parts[3], parts[5]))
                    return self._send(200, pod) if pod else self._send(
                        404, {"kind": "Status", "code": 404, "reason": "NotFound"})
                if parts[:3] != ["api", "v1", "namespaces"] or len(parts) < 5 or parts[4] != "configmaps":
                    return self._send(404, {"kind": "Status", "code": 404, "reason": "NotFound"})
                namespace = parts[3]
                name = parts[5] if len(parts) > 5 else None
                if method == "GET" and name is None:
                    terms = [s for s in query.get("labelSelector", "").split(",") if s]

                    def selected(labels: dict) -> bool:  # `key=value` and `key` (exists) terms
                        return all(labels.get(k) == v if sep else k in labels
                                   for k, sep, v in (term.partition("=") for term in terms))

                    items = [cm for (ns, _), cm in sorted(api.configmaps.items()) if ns == namespace
                             and selected(cm["metadata"].get("labels") or {})]
                    return self._send(200, {"kind": "ConfigMapList", "apiVersion": "v1", "metadata": {},
                                            "items": items})
                key = (namespace, name or (body or {}).get("metadata", {}).get("name"))
                if method == "GET":
                    if key not in api.configmaps:
                        return self._send(404, {"kind": "Status", "code": 404, "reason": "NotFound"})
                    return self._send(200, api.configmaps[key])
                if method == "POST":
                    if key in api.configmaps:
                        return self._send(409, {"kind": "Status", "code": 409, "reason": "AlreadyExists"})
                    api.configmaps[key] = body
                    return self._send(201, body)
                if method == "PUT":
                    if key not in api.configmaps:
                        return self._send(404, {"kind": "Status", "code": 404, "reason": "NotFound"})
                    api.configmaps[key] = body
                    return self._send(200, body)
                if method == "DELETE":
                    if key not in api.configmaps:
                        return self._send(404, {"kind": "Status", "code": 404, "reason": "NotFound"})
                    del api.configmaps[key]
                    return self._send(200, {"kind": "Status", "apiVersion": "v1", "status": "Success"})
                return self._send(405, {"kind": "Status", "code": 405})

            def do_GET(self) -> None:
                self._route("GET")

            def do_POST(self) -> None:
                self._route("POST")

            def do_PUT(self) -> None:
                self._route("PUT")

            def do_PATCH(self) -> None:
                self._route("PATCH")

            def do_DELETE(self) -> None:
                self._route("DELETE")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "FakeConfigMapApi":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def add(self, namespace: str, manifest: dict) -> None:
        self.configmaps[(namespace, manifest["metadata"]["name"])] = {"apiVersion": "v1", "kind": "ConfigMap",
                                                                      **manifest}

    def add_pdb(self, namespace: str, name: str, max_unavailable: int) -> None:
        self.pdbs[(namespace, name)] = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                                        "metadata": {"name": name, "namespace": namespace, "resourceVersion": "1"},
                                        "spec": {"maxUnavailable": max_unavailable,
                                                 "unhealthyPodEvictionPolicy": "AlwaysAllow"}}

    def add_pod(self, namespace: str, name: str, phase: str = "Running") -> None:
        self.pods[(namespace, name)] = {"apiVersion": "v1", "kind": "Pod",
                                        "metadata": {"name": name, "namespace": namespace},
                                        "spec": {"containers": [{"name": "bench", "image": "sglab"}]},
                                        "status": {"phase": phase}}

    def api_client(self) -> client.ApiClient:
        configuration = client.Configuration()
        configuration.host = self.url
        return client.ApiClient(configuration)

    def core_api(self) -> client.CoreV1Api:
        configuration = client.Configuration()
        configuration.host = self.url
        return client.CoreV1Api(client.ApiClient(configuration))

    def kubeconfig(self, path: Path, context: str = "fake") -> Path:
        path.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": context,
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": {"token": "not-a-secret"}}],
            "contexts": [{"name": context, "context": {"cluster": "fake", "user": "fake"}}],
        }))
        return path
