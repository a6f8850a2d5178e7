"""Strict validation of rendered custom objects against the vendored CRDs (sglab/deploy/crds/, README there).

The API server prunes or (with fieldValidation=Strict) refuses a field a structural schema does not declare;
JSON Schema does not, so each object schema without `x-kubernetes-preserve-unknown-fields` gets
`additionalProperties: false` here. `metadata` is checked as an ObjectMeta and embedded pod/Job templates
with kubernetes-validate (strict), at every Kubernetes version the caller names.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

from sglab.config.base import _DNS_SUBDOMAIN, _LABEL_NAME, _LABEL_VALUE

CRD_DIR = Path(__file__).parent / "crds"
K8S_VERSIONS = ("1.31", kubernetes_validate.latest_version())


class CrdValidationError(ValueError):
    """A rendered object the cluster would refuse; the message names the kind, object and field."""


def _structural(node: Any) -> Any:
    """The CRD's openAPIV3Schema as a JSON Schema the API server's strict field validation would match."""
    if isinstance(node, list):
        return [_structural(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: _structural(v) for k, v in node.items()
           if k not in ("x-kubernetes-validations", "description", "format")}
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    if (out.get("type") == "object" and "properties" in out and "additionalProperties" not in out
            and not node.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False
    return out


@lru_cache(maxsize=None)
def _schemas() -> dict[tuple[str, str], dict[str, Any]]:
    """(apiVersion, kind) -> JSON Schema, for every served version of every vendored CRD."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for path in sorted(CRD_DIR.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc or doc.get("kind") != "CustomResourceDefinition":
                continue
            spec = doc["spec"]
            for version in spec["versions"]:
                if not version.get("served", True):
                    continue
                schema = _structural(version["schema"]["openAPIV3Schema"])
                found[(f"{spec['group']}/{version['name']}", spec["names"]["kind"])] = schema
    return found


def known_kinds() -> set[tuple[str, str]]:
    return set(_schemas())


def is_custom(obj: dict[str, Any]) -> bool:
    """Whether obj is one of the vendored custom kinds (any version of its group)."""
    group = str(obj.get("apiVersion", "")).split("/")[0]
    return any(g.split("/")[0] == group and k == obj.get("kind") for g, k in _schemas())


def _path(error: jsonschema.ValidationError) -> str:
    return ".".join(str(p) for p in error.absolute_path) or "(top level)"


def _check_labels(what: str, labels: Any) -> None:
    for key, value in (labels or {}).items():
        prefix, _, name = str(key).rpartition("/")
        if (prefix and not _DNS_SUBDOMAIN.match(prefix)) or not _LABEL_NAME.match(name):
            raise CrdValidationError(f"{what}: metadata.labels key {key!r} is not a valid label key")
        if not isinstance(value, str) or not _LABEL_VALUE.match(value):
            raise CrdValidationError(f"{what}: metadata.labels[{key!r}] = {value!r} is not a valid label value")


def _builtin(what: str, obj: dict[str, Any], versions: tuple[str, ...]) -> None:
    for version in versions:
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            where = ".".join(str(p) for p in exc.path) if getattr(exc, "path", None) else ""
            raise CrdValidationError(f"{what}: {obj['kind']} at Kubernetes {version}: {where} {exc.message}"
                                     ) from None


def validate(obj: dict[str, Any], versions: tuple[str, ...] = K8S_VERSIONS) -> None:
    """Raise CrdValidationError unless `obj` is valid under its vendored CRD (strict) at every version."""
    api, kind = str(obj.get("apiVersion", "")), str(obj.get("kind", ""))
    name = (obj.get("metadata") or {}).get("name", "?")
    what = f"{kind} {name}"
    schema = _schemas().get((api, kind))
    if schema is None:
        served = sorted(a for a, k in _schemas() if k == kind)
        if served:
            raise CrdValidationError(f"{what}: apiVersion {api} is not served by the vendored CRD (served: "
                                     f"{', '.join(served)})")
        raise CrdValidationError(f"{what}: no vendored CRD for {api} {kind} (sglab/deploy/crds/)")
    errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(obj), key=lambda e: list(e.absolute_path))
    if errors:
        first = errors[0]
        raise CrdValidationError(f"{what}: {_path(first)}: {first.message}")
    meta = obj.get("metadata") or {}
    _check_labels(what, meta.get("labels"))
    _builtin(what, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}, versions)
    for where, embedded in _embedded(obj):
        _builtin(f"{what} {where}", embedded, versions)


def _embedded(obj: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Built-in objects inside a custom one: a Rollout's pod template, an AnalysisTemplate's Job specs."""
    spec = obj.get("spec") or {}
    out: list[tuple[str, dict[str, Any]]] = []
    if obj.get("kind") == "Rollout" and "template" in spec:
        out.append(("spec.template", {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"},
                                      "template": spec["template"]}))
    for i, metric in enumerate(spec.get("metrics") or [] if obj.get("kind") == "AnalysisTemplate" else []):
        job = ((metric.get("provider") or {}).get("job") or {})
        if "spec" in job:
            out.append((f"spec.metrics.{i}.provider.job", {"apiVersion": "batch/v1", "kind": "Job",
                                                           "metadata": {"name": "j"}, "spec": job["spec"]}))
    return out
