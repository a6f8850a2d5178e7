"""The result ConfigMap: how an in-cluster run hands its result JSON to `pulumi up` and `sglab results pull`.

The benchmark Job's pod calls `write_result_configmap` (through `sglab bench --result-configmap NAME`);
the Pulumi program and `sglab results pull` read it back with `decode_result`. The JSON is stored
gzipped under `binaryData` because a ConfigMap holds at most 1 MiB; if a run is still too large, the
per-token ITL lists of the request samples are dropped first (the per-round and per-level summaries the
verdict uses are kept) and the ConfigMap says so in an annotation.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RESULT_KEY = "result.json.gz"
TRIMMED_ANNOTATION = "sglab/trimmed"
RUN_ID_ANNOTATION = "sglab/run-id"
RESULT_LABEL = "sglab/result"
NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
# 1 MiB is the API server's limit for the whole object; leave room for metadata.
MAX_PAYLOAD_BYTES = 900 * 1024


@dataclass(frozen=True)
class EncodedResult:
    binary_data: dict[str, str]
    annotations: dict[str, str]


def _gzip_b64(text: str) -> str:
    return base64.b64encode(gzip.compress(text.encode("utf-8"), compresslevel=6, mtime=0)).decode("ascii")


def _without_itl(document: dict[str, Any]) -> dict[str, Any]:
    trimmed = json.loads(json.dumps(document))
    for level in trimmed.get("levels") or []:
        for request in level.get("requests") or []:
            request["itl_ms"] = []
    return trimmed


def _without_requests(document: dict[str, Any]) -> dict[str, Any]:
    trimmed = json.loads(json.dumps(document))
    for level in trimmed.get("levels") or []:
        level["requests"] = []
    return trimmed


def encode_result(result_json: str, *, max_bytes: int = MAX_PAYLOAD_BYTES) -> EncodedResult:
    """The ConfigMap payload for a result; raises ValueError if even the trimmed result cannot fit."""
    document = json.loads(result_json)
    run_id = str(document.get("run_id", ""))
    attempts = (("", lambda d: d), ("requests.itl_ms", _without_itl), ("requests", _without_requests))
    for trimmed, transform in attempts:
        payload = _gzip_b64(json.dumps(transform(document), separators=(",", ":")))
        if len(payload) <= max_bytes:
            annotations = {RUN_ID_ANNOTATION: run_id}
            if trimmed:
                annotations[TRIMMED_ANNOTATION] = trimmed
            return EncodedResult({RESULT_KEY: payload}, annotations)
    raise ValueError(f"result {run_id} does not fit in a ConfigMap even without request samples "
                     f"({len(payload)} bytes > {max_bytes}); lower load.rounds or load.concurrency")


def decode_result(binary_data: dict[str, str] | None) -> str | None:
    """The result JSON held by a ConfigMap's binaryData, or None while the Job has not written it."""
    payload = (binary_data or {}).get(RESULT_KEY)
    if not payload:
        return None
    return gzip.decompress(base64.b64decode(payload)).decode("utf-8")


def current_namespace() -> str:
    """The pod's namespace (env POD_NAMESPACE, else the service-account mount)."""
    env = os.environ.get("POD_NAMESPACE")
    if env:
        return env
    return NAMESPACE_FILE.read_text().strip()


def write_result_configmap(result_json: str, name: str, namespace: str | None = None, *, core_api: Any = None) -> str:
    """Store `result_json` in ConfigMap `name`: update it if it exists (the Pulumi program pre-creates it,
    and the Job's Role allows only get/update of that name), else create it. Returns the namespace used.

    In a pod it uses the service account; elsewhere the kubeconfig (`KUBECONFIG`) and POD_NAMESPACE."""
    from kubernetes import client, config
    from kubernetes.client.exceptions import ApiException

    if core_api is None:
        try:
            config.load_incluster_config()
        except config.ConfigException:  # outside a pod: the kubeconfig, as kubectl would use it
            config.load_kube_config()
        core_api = client.CoreV1Api()
    namespace = namespace or current_namespace()
    encoded = encode_result(result_json)
    try:
        existing = core_api.read_namespaced_config_map(name, namespace)
    except ApiException as exc:
        if exc.status != 404:
            raise
        existing = None
    if existing is None:
        body = client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name=name, namespace=namespace, labels={RESULT_LABEL: "true"},
                                         annotations=encoded.annotations),
            binary_data=encoded.binary_data,
        )
        core_api.create_namespaced_config_map(namespace, body)
        return namespace
    existing.binary_data = {**(existing.binary_data or {}), **encoded.binary_data}
    existing.metadata.annotations = {**(existing.metadata.annotations or {}), **encoded.annotations}
    if TRIMMED_ANNOTATION not in encoded.annotations:
        existing.metadata.annotations.pop(TRIMMED_ANNOTATION, None)
    core_api.replace_namespaced_config_map(name, namespace, existing)
    return namespace
