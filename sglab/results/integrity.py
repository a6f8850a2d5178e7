"""The integrity record of a result: a digest over the whole document, written at bench time.

Every save of a result (`store.write_result`, the web UI's download, the in-cluster Job's ConfigMap,
which stores result.json's text) seals it: `digest` is over the canonical JSON (sorted keys, no
spaces) of the document without `integrity` and `verdict` (a snapshot that is never trusted).
With a per-machine key it is an HMAC-SHA256 ("hmac-sha256", `key_id` names the key); without one a
plain SHA-256 ("sha256"). The key is $SGLAB_RESULT_KEY, else the file
$XDG_DATA_HOME/sglab/result-key (default ~/.local/share/sglab/result-key), created 0600 with 32
random bytes on the first seal; where it cannot be created (a read-only pod) the seal is a plain
digest. A plain digest is evidence for `sglab promote` on a machine with a key only as the cluster's
record (a pull's provenance, sglab/results/pull.py) or on an explicit opt-in (sglab/promotion/evidence.py).
docs/promotion.md says what this protects against and what not.

`schedule` is what the run set out to measure (level -> measured rounds), recorded by the bench
runner before the first request, so the verdict can check the result against its own plan.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from sglab.schema.result import IntegrityRecord

if TYPE_CHECKING:
    from sglab.schema.result import RunResult

KEY_ENV = "SGLAB_RESULT_KEY"
KEY_FILE = Path("sglab") / "result-key"
UNSEALED = ("integrity", "verdict")


def key_path() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / KEY_FILE


def machine_key(*, create: bool = False) -> bytes | None:
    """The HMAC key: $SGLAB_RESULT_KEY, else the key file (created when `create`); None where there is none."""
    env = os.environ.get(KEY_ENV)
    if env:
        return env.encode()
    path = key_path()
    try:
        if path.is_file():
            return path.read_bytes().strip() or None
        if not create:
            return None
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as fh:
            fh.write(secrets.token_hex(32) + "\n")
        return path.read_bytes().strip()
    except FileExistsError:
        return path.read_bytes().strip() or None
    except OSError:
        return None


def key_id(key: bytes) -> str:
    return hashlib.sha256(key).hexdigest()[:16]


def canonical(document: dict[str, Any]) -> bytes:
    """The sealed bytes: the document without `integrity` and `verdict`, plus the recorded schedule."""
    body = {k: v for k, v in document.items() if k not in UNSEALED}
    body["integrity.schedule"] = (document.get("integrity") or {}).get("schedule")
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _digest(document: dict[str, Any], key: bytes | None) -> str:
    data = canonical(document)
    if key is None:
        return hashlib.sha256(data).hexdigest()
    return hmac.new(key, data, hashlib.sha256).hexdigest()


def seal(result: "RunResult", *, key: bytes | None | Literal["machine"] = "machine") -> "RunResult":
    """Set result.integrity (keeping its schedule) from the document as it is now; returns the result."""
    if key == "machine":
        key = machine_key(create=True)
    schedule = result.integrity.schedule if result.integrity is not None else None
    result.integrity = IntegrityRecord(algorithm="sha256", digest="", schedule=schedule)
    digest = _digest(result.model_dump(mode="json"), key)
    result.integrity = IntegrityRecord(algorithm="hmac-sha256" if key else "sha256", digest=digest,
                                       key_id=key_id(key) if key else None, schedule=schedule)
    return result


def record_mac(record: dict[str, Any], key: bytes) -> str:
    """HMAC-SHA256 of a small record (a pull's provenance) as canonical JSON, its own `mac` left out."""
    body = {k: v for k, v in record.items() if k != "mac"}
    data = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    return hmac.new(key, data, hashlib.sha256).hexdigest()


def sealed_document(result: "RunResult") -> dict[str, Any]:
    """The result as JSON, sealed: what every writer of a result stores."""
    return seal(result).model_dump(mode="json")


def verify(result: "RunResult", *, key: bytes | None | Literal["machine"] = "machine") -> str | None:
    """None when the record matches the document; else what is wrong, in words."""
    record = result.integrity
    if record is None:
        return "the result has no integrity record (written before sglab recorded one, or stripped)"
    document = _sealed_form(result)
    if document is None:
        return "it was changed after the run (edited since it was read from its file)"
    if record.algorithm == "sha256":
        if not hmac.compare_digest(_digest(document, None), record.digest):
            return "its SHA-256 digest does not match its content: the file was changed after the run"
        return None
    if key == "machine":
        key = machine_key()
    if key is None or key_id(key) != record.key_id:
        return (f"it is sealed with a key this machine does not hold (key id {record.key_id}); set "
                f"${KEY_ENV} to that machine's key to verify it")
    if not hmac.compare_digest(_digest(document, key), record.digest):
        return "its HMAC does not match its content: the file was changed after the run"
    return None


def _sealed_form(result: "RunResult") -> dict[str, Any] | None:
    """The document the seal is checked against: as stored when the result was read from a file (None if it
    was edited since), else as the model dumps it now."""
    stored = result._stored_document
    if stored is None:
        return result.model_dump(mode="json")
    unchanged = type(result).model_validate(stored).model_dump(mode="json") == result.model_dump(mode="json")
    return stored if unchanged else None


def planned(schedule: dict[int, int]) -> IntegrityRecord:
    """An unsealed record holding only the schedule: the bench runner sets it before the first save."""
    return IntegrityRecord(algorithm="sha256", digest="", schedule=dict(schedule))
