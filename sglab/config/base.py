"""What every config model shares, and what no stack value may be, whatever its key.

Every config model (`Model`) has kebab-case keys, refuses unknown keys, reports a cross-field problem at its key
(`KeyedValueError`), and runs `text_problem` and `type_problem` on each of its fields before pydantic coerces
them, so a new key gets these rules without a line of its own:

- Strict types: pydantic would read `"yes"`, `1` or `"true"` as a boolean and `"8"` or `8.0` as an integer; in a
  stack file each is a mistake (a quoted number, a typo), so only a YAML boolean is a boolean and only a YAML
  integer an integer. Number keys take YAML integers and decimals alike.
- No control or invisible characters (C0/C1, DEL, bidi, zero-width, separator and no-break space characters:
  sglab.core.untrusted.is_control): a name or path with them would print as something else or as nothing, and
  no server, registry or file system means them.
- No credentials in a URL: `https://user:pass@host` or `https://host/x?token=...` in a model path or a flag
  would be printed by validate and render and stored in plain text in the Deployment and the stack ConfigMap.
- No directory the pod or the node must not hand out (`dir_problem`), and Kubernetes syntax for labels,
  quantities and environment variable names.
"""

from __future__ import annotations

import math
import re
import types
import typing
import unicodedata
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union

from pydantic import (AfterValidator, AliasGenerator, BaseModel, BeforeValidator, ConfigDict, ValidationInfo,
                      field_validator)

from sglab.sglang.env import NCCL_ENV_PREFIX, is_hf_token_env
from sglab.sglang.secret_names import credential_kind, has_url_credentials, redact_url_credentials, secret_word
from sglab.sglang.honesty import faked_acceptance, refusal
from sglab.sglang.sim_knobs import is_sim_env
from sglab.core.untrusted import is_control, printable


SECRETS_FIX = ("the only secret sglab hands a server is the Hugging Face token, as the Pulumi secret sglab:hf-token "
               "(pulumi config set --secret sglab:hf-token <token>), which the pods read through a Kubernetes Secret "
               "reference; keep any other credential out of the stack file")

FIT, SILENT = object(), ""  # value_problem: fits the type / does not fit, pydantic says why


def _shown(value: Any) -> str:
    """The value as a message quotes it (repr escapes what would not print; KeyedValueError escapes the rest)."""
    shown = repr(value)
    return shown if len(shown) <= 60 else shown[:60] + "..."


_LAX_BOOLEANS = {"0", "off", "f", "false", "n", "no", "1", "on", "t", "true", "y", "yes"}


def _number(text: str) -> float | None:
    try:
        return float(text.strip())
    except ValueError:
        return None


def _scalar_problem(kind: type, value: Any) -> Any:
    """The problem only where pydantic would coerce; a value it refuses anyway is left to its own message."""
    if kind is bool:
        if isinstance(value, bool):
            return FIT
        lax = (isinstance(value, str) and value.strip().lower() in _LAX_BOOLEANS) or \
            (isinstance(value, (int, float)) and value in (0, 1))
        return (f"is {_shown(value)}, but this key takes true or false (quoted words, yes/no, on/off and 0/1 are not "
                "booleans here); write true or false") if lax else SILENT
    if isinstance(value, bool):
        return (f"is a boolean ({str(value).lower()}), but this key takes a number; write the number itself, "
                "not true/false")
    number = _number(value) if isinstance(value, str) else None
    if kind is int:
        if isinstance(value, int):
            return FIT
        if isinstance(value, float) and value.is_integer():
            return f"is {_shown(value)}, a decimal number, but this key takes an integer; write {int(value)}"
        if number is not None and number.is_integer():
            return (f"is the string {_shown(value)}, but this key takes an integer; write {int(number)} "
                    "without quotes")
        return SILENT
    if isinstance(value, float) and not math.isfinite(value):
        return f"is {_shown(value)}, which is not a setting; write a finite number"
    if isinstance(value, (int, float)):
        return FIT
    if number is not None:
        return f"is the string {_shown(value)}, but this key takes a number; write {value.strip()} without quotes"
    return SILENT


def type_problem(annotation: Any, value: Any) -> Any:
    """FIT, None (not ours to judge: pydantic decides), SILENT (does not fit; pydantic says why) or the problem
    ('problem; fix') when only pydantic's lax coercion would make `value` fit `annotation`."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return type_problem(args[0], value)
    if origin in (Union, types.UnionType):
        results = [type_problem(arg, value) for arg in args]
        if any(r is FIT or r is None for r in results):
            return FIT
        return next((r for r in results if r), SILENT)
    if origin is Literal:
        return FIT if any(value == a and type(value) is type(a) for a in args) else SILENT
    if annotation is type(None):
        return FIT if value is None else SILENT
    if annotation in (bool, int, float):
        return _scalar_problem(annotation, value)
    if annotation is str:
        return FIT if isinstance(value, str) else SILENT
    if origin in (list, tuple, set, frozenset) and isinstance(value, list) and args:
        for index, item in enumerate(value):
            problem = type_problem(args[0], item)
            if isinstance(problem, str) and problem:
                return f"item {index + 1} {problem}"
        return FIT
    if origin is dict and isinstance(value, dict) and len(args) == 2:
        for key, item in value.items():
            problem = type_problem(args[1], item)
            if isinstance(problem, str) and problem:
                return f"{key} {problem}"  # text_problem refused a hidden character in it first
        return FIT
    return None


def _has_control(text: str) -> bool:
    return any(is_control(ch) for ch in text)


def text_problem(value: Any, *, skip: tuple[type, ...] = ()) -> tuple[tuple[str | int, ...], str] | None:
    """(key path below the value, 'problem; fix') for the first string inside `value` (keys included) that
    holds a control character or a URL with credentials; the message never repeats a credential."""
    if isinstance(value, skip):
        return None
    if isinstance(value, str):
        hidden = next((ch for ch in value if is_control(ch)), None)
        if hidden is not None:
            return (), (f"{_shown(value)} contains U+{ord(hidden):04X} "
                        f"({unicodedata.name(hidden, 'a control code').lower()}), a control character or an invisible "
                        "one (shown escaped) that prints as something else, nothing or a plain space, which no path "
                        "or name may hold; retype the value by hand (pasted text often carries a zero-width or "
                        "no-break space) and check for a stray escape in a quoted YAML string")
        kind = credential_kind(value)
        if kind is not None:
            return (), (f"holds what looks like {kind}, which validate and render would print; remove it: "
                        f"{SECRETS_FIX}")
        if has_url_credentials(value):
            return (), (f"holds a URL with credentials ({_shown(redact_url_credentials(value))}), which "
                        "validate and render would print; remove the user:password@ part or the secret query "
                        f"parameter: {SECRETS_FIX}")
        return None
    if isinstance(value, dict):
        if set(value) == {"secure"}:
            return None  # a Pulumi secret's ciphertext
        for key, item in value.items():
            if isinstance(key, str) and _has_control(key):
                return (), (f"the key {_shown(key)} contains a control character (shown escaped); "
                            "rename it")
            found = text_problem(item, skip=skip)
            if found is not None:
                return (key, *found[0]), found[1]
        return None
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            found = text_problem(item, skip=skip)
            if found is not None:  # a scalar item is reported at its list (extra-args), a mapping at its index
                return ((index, *found[0]), found[1]) if isinstance(item, (dict, list)) else found
        return None
    return None


# Directories of the image a mount or an emptyDir must not cover (the image's programs, libraries and
# configuration, the kernel's interfaces, the runtime's sockets).
CONTAINER_SYSTEM_DIRS = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/run",
                         "/sbin", "/sys", "/usr", "/var/run")
# Directories of the node a hostPath must not reach, even read-only: besides the above, the kubelet's and the
# container runtime's state (other pods' volumes and secrets, /var/lib/kubelet), logs and root's home.
NODE_SYSTEM_DIRS = CONTAINER_SYSTEM_DIRS + ("/root", "/var/lib", "/var/log")
# Where a weights hostPath may live unless model.volume.host-path-prefixes says otherwise.
DEFAULT_HOST_PATH_PREFIXES = ("/shared", "/models", "/mnt", "/data")


def normal_dir(path: str) -> str:
    """`/a//b/` -> `/a/b` (the path as a mount sees it)."""
    return "/" + "/".join(part for part in path.split("/") if part)


def is_under(path: str, directory: str) -> bool:
    """True when `path` is `directory` or inside it, by whole path segments (/shared-x is not under /shared)."""
    path, directory = normal_dir(path), normal_dir(directory)
    return directory == "/" or path == directory or path.startswith(directory + "/")


def dir_problem(path: str, system_dirs: tuple[str, ...], example: str, why: str = "") -> str | None:
    """Why `path` is not a directory of its own outside `system_dirs` ('problem; fix'), or None."""
    if not path.startswith("/"):
        return f"{path} is not an absolute path; write it from the root, like {example}"
    if any(part in (".", "..") for part in path.split("/")):
        return (f"{path} has a '.' or '..' segment, which hides where it really points; "
                f"write the directory itself, like {example}")
    norm = normal_dir(path)
    inside = next((d for d in system_dirs if is_under(norm, d)), None)
    if norm == "/" or inside is not None:
        what = "the root directory, a system directory" if norm == "/" else "a system directory" if inside == norm \
            else f"inside the system directory {inside}"
        return (f"{norm} is {what} (these are: /, {', '.join(system_dirs)}){why}; use a directory of its own, "
                f"like {example}")
    return None


class KeyedValueError(ValueError):
    """A check failing at a key below the validated model (`loc`, kebab-case, e.g. server.tp-size; () the field
    itself).

    The loader reports that key path and its line instead of the whole section. The message is made `printable`
    here, once: it may quote the raw value that was refused (a control character in it is shown escaped).
    """

    def __init__(self, loc: str | tuple[str | int, ...], message: str) -> None:
        super().__init__(printable(message, limit=2000))
        if isinstance(loc, str):
            loc = tuple(int(p) if p.isdigit() else p for p in loc.split("."))
        self.loc = loc


def _kebab(name: str) -> str:
    return name.replace("_", "-")


class Model(BaseModel):
    """Base: kebab-case keys in YAML, unknown keys refused (a typo must never be silently ignored)."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        populate_by_name=True,
        alias_generator=AliasGenerator(validation_alias=_kebab, serialization_alias=_kebab),
    )

    @field_validator("*", mode="before")
    @classmethod
    def _strict_values(cls, value: Any, info: ValidationInfo) -> Any:
        """Strict types, no control characters, no URL credentials, before coercion."""
        found = text_problem(value, skip=(SecretValue,))
        if found is not None:
            raise KeyedValueError(found[0], found[1])
        field = cls.model_fields.get(info.field_name or "")
        if field is not None:
            problem = type_problem(field.annotation, value)
            if isinstance(problem, str) and problem:
                raise KeyedValueError((), problem)
        return value


_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DNS_SUBDOMAIN = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_NAME = re.compile(r"^(?=.{1,63}$)[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(?=.{0,63}$)(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def _check_labels(labels: dict[str, str]) -> dict[str, str]:
    """Kubernetes label syntax, so a bad key fails here (with its key path) rather than at apply time."""
    for key, value in labels.items():
        prefix, _, name = key.rpartition("/")
        if (prefix and not _DNS_SUBDOMAIN.match(prefix)) or not _LABEL_NAME.match(name):
            raise KeyedValueError((key,), f"{key!r} is not a valid label key; write [prefix/]name with a name of "
                                          "up to 63 letters, digits, '-', '_' or '.'")
        if not isinstance(value, str) or not _LABEL_VALUE.match(value):
            raise KeyedValueError((key,), f"{value!r} is not a valid label value; use up to 63 letters, digits, "
                                          "'-', '_' or '.', starting and ending with a letter or digit")
    return labels


def number_as_text(value: Any) -> Any:
    """`cpu: 2` or `rerun: 2` in YAML is a number; these keys take text (a Kubernetes quantity is a string)."""
    return str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value


def _matching(pattern: str, problem: str) -> AfterValidator:
    def check(value: str) -> str:
        if not re.fullmatch(pattern, value):
            raise ValueError(f"{value!r} {problem}")
        return value
    return AfterValidator(check)


@dataclass(frozen=True)
class TypeName:
    """How the key reference (docs/config.md) names an annotated type: what a value must be, not `string`."""

    name: str


# Kubernetes quantities, a YAML number included (`cpu: 2`), refused with their key here rather than at apply time.
CpuQuantity = Annotated[str, TypeName("CPU quantity"), BeforeValidator(number_as_text), _matching(
    r"[0-9]+(\.[0-9]+)?|[0-9]+m", "is not a CPU quantity; write cores or millicores, like 2, 1.5 or 500m")]
ByteQuantity = Annotated[str, TypeName("byte quantity"), BeforeValidator(number_as_text), _matching(  # sizes
    r"[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|k|M|G|T)?", "is not a Kubernetes quantity; write a number and a unit, "
    "like 64Gi, 512Mi or 2Ti")]


class SecretValue(str):
    """A resolved secret (inside the Pulumi program). str subclass so it never prints by accident."""

    def __repr__(self) -> str:
        return "SecretValue('***')"


def check_env(env: Any, nccl_key: str) -> Any:
    """Names of plain env variables: valid, not NCCL_* (typed under `nccl_key`), not SGLAB_SIM_*, no secret.

    Runs before type coercion, so a secret's value is never echoed in an error.
    """
    if not isinstance(env, dict):
        return env
    for key in env:
        key = str(key)
        if faked := faked_acceptance({key: ""}, ()):  # sglab/sglang/honesty.py: any backend
            raise KeyedValueError((key,), refusal(faked, "the stack"))
        if is_hf_token_env(key):
            raise KeyedValueError((key,), f"{key} carries the Hugging Face token, which must not be plain text "
                                          "(validate and render would print it, and it would be stored in the "
                                          "Deployment and the stack ConfigMap); delete it and set the secret: "
                                          "pulumi config set --secret sglab:hf-token <token>")
        if not _ENV_NAME.match(key):
            raise KeyedValueError((key,), f"{_shown(key)} is not a valid environment variable "
                                          "name; use letters, digits and '_', not starting with a digit")
        word = secret_word(key)
        if word is not None:
            raise KeyedValueError((key,), f"{key} is named like a secret (the word '{word}'), which must not be plain "
                                          f"text in the stack file (validate and render would print it); delete it: "
                                          f"{SECRETS_FIX}. A variable that only looks like one is listed in "
                                          "sglab/sglang/secret_names.py")
        if key.startswith(NCCL_ENV_PREFIX):
            raise KeyedValueError((key,), f"{key} belongs under {nccl_key}, where it is type-checked; move it there")
        if is_sim_env(key):
            raise KeyedValueError((key,), f"{key} is a simulator knob; set it under sim instead")
    return env
