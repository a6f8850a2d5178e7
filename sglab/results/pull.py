"""The result transport's reading end (`sglab results pull --stack NAME`): read results back out of the
ConfigMaps the in-cluster Jobs fill (sglab/results/sink.py writes them) into results/<stack>/<run-id>/.

Every benchmark Job leaves its result in ConfigMaps labelled `sglab/stack=<stack>` (kept when the
comparison changes): the index `sglab/result=true` and, for a large result, its parts `sglab/result=part`. The
generic half (`group_labelled`, `read_document`, `store_once`), which the probe pull (sglab/probe/store.py)
shares, groups each index with its parts, decodes the payload to a JSON document and stores it once (never
overwritten; an identical copy is "unchanged", a different one a conflict). Pulling benchmark results then
validates each one as a RunResult of this stack and writes it like any local run.

Each pulled result gets a provenance record beside it (provenance.json: the ConfigMap, its namespace, the
result's digest and the sha256 of result.json's bytes), signed with this machine's result key: the Job's
pod holds no key, so its plain SHA-256 seal is accepted by `sglab promote` as the cluster's record only
while that signed record holds (sglab/promotion/evidence.py).
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from zlib import error as zlib_error

from pydantic import ValidationError

from sglab.core.errors import ConfigError
from sglab.results import integrity
from sglab.schema.result import SAFE_NAME, SCHEMA_VERSION, RunResult
from sglab.results.sink import INDEX, PAYLOAD_KEY, RESULT_LABEL, TRIMMED_ANNOTATION, decode_parts, parts_count
from sglab.results.store import RESULT_FILE, RESULT_LIMITS, results_root, utc_now_iso, write_json_atomic
from sglab.core.untrusted_json import JsonLimits, JsonRefused, parse, read_bytes, read_json

STACK_LABEL = "sglab/stack"
PROVENANCE_FILE = "provenance.json"
_RUN_ID = SAFE_NAME
PROVENANCE_LIMITS = JsonLimits("a provenance record", max_bytes=64 * 1024, max_depth=4)


@dataclass
class StoreReport:
    """What a pull did: files written, identical copies left, conflicting copies left, results the Job has not
    written yet (ConfigMap names), and ConfigMaps refused ("name: why")."""

    written: list[Path] = field(default_factory=list)
    unchanged: list[Path] = field(default_factory=list)
    conflicts: list[Path] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)


def group_labelled(configmaps: list[Any], label_value: str) -> list[list[Any]]:
    """Each result whose index is labelled `sglab/result=<label_value>` as [index, part 1, ...] (None where a
    part is missing), sorted by the index's name."""
    by_name = {cm.metadata.name: cm for cm in configmaps}
    results = []
    for cm in configmaps:
        if (cm.metadata.labels or {}).get(RESULT_LABEL) != label_value:
            continue
        count = parts_count(cm.metadata.annotations)
        results.append([cm] + [by_name.get(f"{cm.metadata.name}-{i}") for i in range(1, count)])
    return sorted(results, key=lambda parts: parts[0].metadata.name)


def read_document(parts: list[Any], limits: JsonLimits = RESULT_LIMITS) -> tuple[Any, str | None]:
    """(the decoded JSON document, None); (None, None) while the Job has not written it; (None, why) else.
    The payload is inflated and parsed under `limits` (size, depth, finite numbers, no duplicate keys)."""
    count = parts_count(parts[0].metadata.annotations)
    if count == 0:
        return None, None
    payloads = [(cm.binary_data or {}).get(PAYLOAD_KEY) if cm is not None else None for cm in parts[:count]]
    missing = [str(i) for i, p in enumerate(payloads) if not p] + [str(i) for i in range(len(payloads), count)]
    if missing:
        return None, f"part(s) {', '.join(missing)} of {count} missing"
    try:
        text = decode_parts(payloads, max_bytes=limits.max_bytes)
    except (OSError, ValueError, EOFError, zlib_error) as exc:
        return None, f"undecodable payload: {str(exc)[:200]}"
    try:
        document = parse(text or "", limits)
    except JsonRefused as exc:
        return None, f"{limits.what}: {exc}"
    return document, None if document is not None else "the payload is JSON null"


def store_once(target: Path, payload: dict[str, Any], report: StoreReport) -> bool:
    """Write `payload` to `target` unless a file is there (identical: unchanged; different: a conflict);
    True when this call wrote it."""
    if target.exists():
        try:
            same = read_json(target, RESULT_LIMITS) == payload
        except ConfigError:
            same = False
        (report.unchanged if same else report.conflicts).append(target)
        return False
    try:
        report.written.append(write_json_atomic(target, payload))
    except FileExistsError:
        report.conflicts.append(target)
        return False
    return True


@dataclass
class PulledResult:
    configmap: str
    result: RunResult | None = None
    problem: str | None = None
    trimmed: str | None = None


@dataclass
class PullReport(StoreReport):
    trimmed: list[str] = field(default_factory=list)


def label_selector(stack: str) -> str:
    return f"{RESULT_LABEL},{STACK_LABEL}={stack}"


def group_parts(configmaps: list[Any]) -> list[list[Any]]:
    """Each result as [index, part 1, ...] (None where a part is missing), from a ConfigMap listing."""
    return group_labelled(configmaps, INDEX)


def parse_result(parts: list[Any], stack: str) -> PulledResult:
    """One result's ConfigMaps (kubernetes.client V1ConfigMap: index first) -> the validated result, or why
    there is none."""
    index = parts[0]
    annotations = index.metadata.annotations or {}
    pulled = PulledResult(configmap=index.metadata.name, trimmed=annotations.get(TRIMMED_ANNOTATION))
    document, pulled.problem = read_document(parts)
    if document is None:
        return pulled
    if not isinstance(document, dict) or document.get("schema_version") != SCHEMA_VERSION:
        found = document.get("schema_version") if isinstance(document, dict) else None
        pulled.problem = f"schema_version {found!r}, this sglab reads {SCHEMA_VERSION}"
        return pulled
    try:
        result = RunResult.model_validate(document)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        pulled.problem = f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}"
        return pulled
    if result.stack != stack:
        pulled.problem = f"holds a result of stack {result.stack!r}, not {stack!r}"
    elif not _RUN_ID.match(result.run_id):
        pulled.problem = f"run_id {result.run_id!r} is not a safe directory name"
    else:
        pulled.result = result
    return pulled


def store_pulled(pulled: list[PulledResult], stack: str, base: Path | None = None, *, namespace: str | None = None,
                 context: str | None = None) -> PullReport:
    """Write each valid result to <base>/<stack>/<run-id>/result.json unless one is already there, with its
    signed provenance (also beside an identical copy pulled before provenance was recorded)."""
    report = PullReport()
    root = (base or results_root()) / stack
    for item in pulled:
        if item.problem:
            report.rejected.append(f"{item.configmap}: {item.problem}")
            continue
        if item.result is None:
            report.pending.append(item.configmap)
            continue
        payload = item.result.model_dump(mode="json")
        target = root / item.result.run_id / RESULT_FILE
        if not store_once(target, payload, report):
            if target in report.unchanged and not (target.parent / PROVENANCE_FILE).exists():
                write_provenance(target, item, namespace, context)
            continue
        write_provenance(target, item, namespace, context)
        if item.trimmed:
            report.trimmed.append(f"{item.result.run_id}: {item.trimmed} dropped to fit the ConfigMap")
    return report


def _sha256_of(path: Path) -> str:
    return hashlib.sha256(read_bytes(path, RESULT_LIMITS)).hexdigest()


def write_provenance(result_file: Path, item: PulledResult, namespace: str | None, context: str | None) -> None:
    """Sign where `result_file` came from with this machine's key; without a key there is nothing to sign."""
    key = integrity.machine_key(create=True)
    if key is None or item.result is None or item.result.integrity is None:
        return
    record: dict[str, Any] = {
        "source": "configmap", "configmap": item.configmap, "namespace": namespace, "context": context,
        "run_id": item.result.run_id, "digest": item.result.integrity.digest, "result_sha256": _sha256_of(result_file),
        "pulled_at": utc_now_iso(), "key_id": integrity.key_id(key)}
    record["mac"] = integrity.record_mac(record, key)
    write_json_atomic(result_file.parent / PROVENANCE_FILE, record, overwrite=True)


def pulled_provenance(result_file: Path, result: RunResult) -> tuple[dict[str, Any] | None, str | None]:
    """(the provenance record, None) when `result_file` is still exactly what was pulled from the cluster;
    (None, None) when it was never pulled; (record or None, why not) otherwise."""
    path = result_file.parent / PROVENANCE_FILE
    if not path.exists():
        return None, None
    try:
        record = read_json(path, PROVENANCE_LIMITS)
    except ConfigError as exc:
        return None, f"its {PROVENANCE_FILE} is refused ({exc.problem})"
    if not isinstance(record, dict):
        return None, f"its {PROVENANCE_FILE} is not a JSON object"
    key = integrity.machine_key()
    if key is None or record.get("key_id") != integrity.key_id(key) or not isinstance(record.get("mac"), str) \
            or not hmac.compare_digest(record["mac"], integrity.record_mac(record, key)):
        return None, f"its {PROVENANCE_FILE} is not signed by this machine's result key"
    where = f"ConfigMap {record.get('namespace') or '?'}/{record.get('configmap')}"
    digest = result.integrity.digest if result.integrity is not None else None
    if (record.get("result_sha256") != _sha256_of(result_file) or record.get("digest") != digest
            or record.get("run_id") != result.run_id):
        return record, f"{result_file.name} changed since it was pulled from {where}"
    return record, None


def list_result_configmaps(stack: str, namespace: str, *, context: str | None = None,
                           kubeconfig: str | None = None, core_api: Any = None) -> list[Any]:
    """The stack's result ConfigMaps, through the kubernetes client (kubeconfig/context as kubectl's)."""
    if core_api is None:
        from kubernetes import client, config

        config.load_kube_config(config_file=kubeconfig, context=context)
        core_api = client.CoreV1Api()
    return list(core_api.list_namespaced_config_map(namespace, label_selector=label_selector(stack)).items)


def pull_report(stack: str, *, namespace: str, context: str | None = None,
                kubeconfig: str | None = None, base: Path | None = None, core_api: Any = None) -> PullReport:
    """Pull with the full account (what was written, skipped, pending, rejected). The namespace is the
    stack's (sglab.deploy.pull finds it from the stack file when the caller does not give it)."""
    try:
        items = list_result_configmaps(stack, namespace, context=context, kubeconfig=kubeconfig, core_api=core_api)
    except ConfigError:
        raise
    except Exception as exc:  # kubeconfig missing, API unreachable, forbidden: one message, no traceback
        raise ConfigError(kubeconfig or "kubeconfig", f"namespace {namespace}",
                          f"cannot list result ConfigMaps: {_short(exc)}",
                          "check `kubectl get configmaps -n <namespace> -l sglab/result=true` works "
                          "(context, credentials, namespace)") from None
    return store_pulled([parse_result(parts, stack) for parts in group_parts(items)], stack, base,
                        namespace=namespace, context=context)


def pull_results(stack: str, *, namespace: str, context: str | None = None,
                 kubeconfig: str | None = None, base: Path | None = None, core_api: Any = None) -> list[Path]:
    """Backend of `sglab results pull`: the result files written by this pull (newest last)."""
    report = pull_report(stack, namespace=namespace, context=context, kubeconfig=kubeconfig, base=base,
                         core_api=core_api)
    return sorted(report.written)


def _short(exc: Exception) -> str:
    status = getattr(exc, "status", None)
    reason = getattr(exc, "reason", None)
    if status is not None:
        return f"HTTP {status} {reason or ''}".strip()
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
