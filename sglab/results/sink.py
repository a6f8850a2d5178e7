"""The result transport's writing end, the result ConfigMaps: how an in-cluster run hands its result JSON to `pulumi up`
and `sglab results pull`.

A ConfigMap holds at most 1 MiB and a full run is several MB of JSON (per-token ITLs of every
request), so the result is gzipped, base64-encoded and split over up to RESULT_PARTS ConfigMaps that
the Pulumi program pre-creates: `<name>` (the index: part 0, the part count, and a small summary with
the verdict, which is all the program reads back) and `<name>-1` ... `<name>-<RESULT_PARTS-1>`.
Only if even that is too small are the request samples' ITL lists dropped, then the request samples
(the per-round and per-level data the verdict uses are always kept); the index says so in an
annotation. The benchmark Job's pod calls `write_result_configmap` (`sglab bench --result-configmap NAME`).
"""

from __future__ import annotations

import base64
import gzip
import json
import math
import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from sglab.core.untrusted_json import JsonLimits, JsonRefused, parse

SUMMARY_LIMITS = JsonLimits("a result summary", max_bytes=1024 * 1024, max_depth=16)
PAYLOAD_KEY = "result.json.gz"
SUMMARY_KEY = "summary.json"
RESULT_LABEL = "sglab/result"
INDEX = "true"
PART = "part"
PARTS_ANNOTATION = "sglab/parts"
PART_ANNOTATION = "sglab/part"
RUN_ID_ANNOTATION = "sglab/run-id"
TRIMMED_ANNOTATION = "sglab/trimmed"
NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
RESULT_PARTS = 8
# 1 MiB is the API server's limit for a whole object; leave room for metadata and the summary.
MAX_PART_BYTES = 900 * 1024


def part_names(name: str, parts: int = RESULT_PARTS) -> list[str]:
    """The index ConfigMap first, then the extra parts."""
    return [name] + [f"{name}-{i}" for i in range(1, parts)]


@dataclass(frozen=True)
class EncodedResult:
    parts: list[str]
    summary: str
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


def summary_of(document: dict[str, Any]) -> str:
    """What the Pulumi program reads back: enough for the stack outputs, a few KB."""
    keys = ("schema_version", "run_id", "stack", "kind", "complete", "verdict")
    return json.dumps({k: document.get(k) for k in keys}, separators=(",", ":"))


def read_summary(summary_json: str | None) -> dict[str, Any] | str | None:
    """summary_of's text read back: None while there is none, the summary, or why it is not one."""
    if not summary_json:
        return None
    try:
        summary = parse(summary_json, SUMMARY_LIMITS)
    except JsonRefused as exc:
        return f"the result ConfigMap's summary is refused: {exc}"
    if not isinstance(summary, dict) or not isinstance(summary.get("run_id"), str):
        return "the result ConfigMap holds no sglab result summary"
    return summary


def encode_result(result_json: str, *, max_part_bytes: int | None = None,
                  max_parts: int | None = None) -> EncodedResult:
    """The ConfigMap payload for a result; raises ValueError if even the trimmed result cannot fit."""
    max_part_bytes = max_part_bytes or MAX_PART_BYTES
    max_parts = max_parts or RESULT_PARTS
    document = json.loads(result_json)
    run_id = str(document.get("run_id", ""))
    steps: tuple[tuple[str, Callable[[dict], dict]], ...] = (
        ("", lambda d: d), ("requests.itl_ms", _without_itl), ("requests", _without_requests))
    for trimmed, transform in steps:
        payload = _gzip_b64(json.dumps(transform(document), separators=(",", ":")))
        count = max(1, math.ceil(len(payload) / max_part_bytes))
        if count <= max_parts:
            parts = [payload[i * max_part_bytes:(i + 1) * max_part_bytes] for i in range(count)]
            annotations = {RUN_ID_ANNOTATION: run_id, PARTS_ANNOTATION: str(count)}
            if trimmed:
                annotations[TRIMMED_ANNOTATION] = trimmed
            return EncodedResult(parts, summary_of(document), annotations)
    raise ValueError(f"result {run_id} does not fit in {max_parts} ConfigMaps even without request samples "
                     f"({len(payload)} bytes); lower load.rounds or load.concurrency")


def decode_parts(parts: list[str | None], max_bytes: int | None = None) -> str | None:
    """The result JSON from its parts in order (None while any part is missing). With `max_bytes`, a payload
    that inflates past it raises ValueError after reading at most that much (a gzip bomb stays small)."""
    if not parts or any(not p for p in parts):
        return None
    packed = base64.b64decode("".join(parts), validate=True)
    if max_bytes is None:
        return gzip.decompress(packed).decode("utf-8")
    inflate = zlib.decompressobj(wbits=31)  # gzip framing
    data = inflate.decompress(packed, max_bytes + 1)
    if len(data) > max_bytes or inflate.unconsumed_tail:
        raise ValueError(f"it inflates to more than {max_bytes} bytes")
    return data.decode("utf-8")


def parts_count(annotations: dict[str, str] | None) -> int:
    """How many parts the index ConfigMap says the result has (0: not written yet)."""
    try:
        return int((annotations or {}).get(PARTS_ANNOTATION, "0"))
    except ValueError:
        return 0


def current_namespace() -> str:
    """The pod's namespace (env POD_NAMESPACE, else the service-account mount)."""
    env = os.environ.get("POD_NAMESPACE")
    if env:
        return env
    return NAMESPACE_FILE.read_text().strip()


def _write(core_api: Any, namespace: str, name: str, *, label: str, binary: dict[str, str],
           data: dict[str, str] | None, annotations: dict[str, str]) -> None:
    """Update ConfigMap `name` (get + update: all the Job's Role allows), or create it if it is absent."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    try:
        existing = core_api.read_namespaced_config_map(name, namespace)
    except ApiException as exc:
        if exc.status != 404:
            raise
        existing = None
    if existing is None:
        body = client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name=name, namespace=namespace, labels={RESULT_LABEL: label},
                                         annotations=annotations),
            binary_data=binary, data=data)
        core_api.create_namespaced_config_map(namespace, body)
        return
    existing.binary_data = {**(existing.binary_data or {}), **binary}
    if data is not None:
        existing.data = {**(existing.data or {}), **data}
    kept = {k: v for k, v in (existing.metadata.annotations or {}).items() if k != TRIMMED_ANNOTATION}
    existing.metadata.annotations = {**kept, **annotations}
    core_api.replace_namespaced_config_map(name, namespace, existing)


def write_result_configmap(result_json: str, name: str, namespace: str | None = None, *, core_api: Any = None) -> str:
    """Store `result_json` in ConfigMap `name` (and `name-1`... when it needs more room). Extra parts are
    written first and the index last, so a reader that sees the index finds every part. Returns the
    namespace used. In a pod it uses the service account; elsewhere the kubeconfig and POD_NAMESPACE."""
    from kubernetes import client, config

    if core_api is None:
        try:
            config.load_incluster_config()
        except config.ConfigException:  # outside a pod: the kubeconfig, as kubectl would use it
            config.load_kube_config()
        core_api = client.CoreV1Api()
    namespace = namespace or current_namespace()
    encoded = encode_result(result_json)
    names = part_names(name, len(encoded.parts))
    for index in reversed(range(len(encoded.parts))):
        is_index = index == 0
        _write(core_api, namespace, names[index], label=INDEX if is_index else PART,
               binary={PAYLOAD_KEY: encoded.parts[index]},
               data={SUMMARY_KEY: encoded.summary} if is_index else None,
               annotations={**encoded.annotations, PART_ANNOTATION: str(index)})
    return namespace
