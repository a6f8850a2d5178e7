"""Reading a result back out of the ConfigMaps the in-cluster Jobs fill (sglab/results/sink.py writes them).

Shared by `sglab results pull` (benchmark results, sglab/results/pull.py) and the probe pull
(sglab/probe/store.py): group each index ConfigMap with its parts, decode the payload to a JSON document,
and store it once under results/ (never overwritten; an identical copy is "unchanged", a different one a
conflict). What the document must be is the caller's business.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from zlib import error as zlib_error

from sglab.core.errors import ConfigError
from sglab.results.sink import PAYLOAD_KEY, RESULT_LABEL, decode_parts, parts_count
from sglab.results.store import RESULT_LIMITS, write_json_atomic
from sglab.core.untrusted_json import JsonLimits, JsonRefused, parse, read_json


@dataclass
class StoreReport:
    """What a pull did: files written, identical copies left, conflicting copies left, results the Job has not
    written yet (ConfigMap names), and ConfigMaps refused ("name: why")."""

    written: list[Path] = field(default_factory=list)
    unchanged: list[Path] = field(default_factory=list)
    conflicts: list[Path] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)


def group_parts(configmaps: list[Any], label_value: str) -> list[list[Any]]:
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
