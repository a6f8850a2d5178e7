"""The NCCL_* variables sglab type-checks: one declaration per variable, one parser, one normal form.

What NCCL itself does with the values (NVIDIA/nccl src/graph/tuning.cc `parseList`, src/graph/paths.cc
`ncclGetLevel`, src/misc/param.cc):
- NCCL_PROTO / NCCL_ALGO: a comma list, optionally negated by a leading '^'. Each token is compared
  with `strcasecmp`, so `ll` is LL. Tokens are not trimmed: in "Ring, Tree" the second token is " Tree",
  which matches nothing; NCCL <= 2.18 silently ignores it (the run uses Ring only), newer NCCL fails
  init with "Unrecognized element token". Newer NCCL also takes per-collective lists
  ("allreduce:tree;broadcast:ring"), which sglab does not check and refuses.
- NCCL_P2P_LEVEL: compared with `strcmp` (case-sensitive) against LOC, NVL, PIX, PXB, PHB, SYS, or
  a legacy integer 0-5; anything else is silently ignored (NCCL picks the level itself).
- integer parameters (NCCL_PARAM) are read with strtoll; a 0/1 switch is an integer parameter.

sglab normalises instead of guessing: list tokens are trimmed and written in NCCL's own spelling
("ring, tree" -> "Ring,Tree"), NCCL_P2P_LEVEL is upper-cased (so `sys` means SYS instead of
nothing), YAML integers and booleans become the strings NCCL reads ('1', not 1 or true). What is
rendered into the pod is the normal form, so NCCL reads exactly what was validated.
Adding a variable is one `NcclVar(...)` line in NCCL_VARS.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

Kind = Literal["list", "choice", "switch", "int", "str"]


class NcclValueError(ValueError):
    """A value NCCL would ignore, mis-read or refuse. The message is 'problem; fix'."""


@dataclass(frozen=True)
class NcclVar:
    name: str
    kind: Kind
    choices: tuple[str, ...] = ()
    minimum: int | None = None
    case_sensitive: bool = False  # how NCCL compares; sglab accepts any case and writes NCCL's spelling
    doc: str = ""


NCCL_VARS: tuple[NcclVar, ...] = (
    NcclVar("NCCL_PROTO", "list", ("LL", "LL128", "Simple")),
    NcclVar("NCCL_ALGO", "list", ("Ring", "Tree", "CollnetDirect", "CollnetChain", "NVLS", "NVLSTree", "PAT")),
    NcclVar("NCCL_P2P_LEVEL", "choice", ("LOC", "NVL", "PIX", "PXB", "PHB", "SYS", "0", "1", "2", "3", "4", "5"),
            case_sensitive=True),
    NcclVar("NCCL_P2P_DISABLE", "switch"),
    NcclVar("NCCL_SHM_DISABLE", "switch"),
    NcclVar("NCCL_IB_DISABLE", "switch"),
    NcclVar("NCCL_IB_HCA", "str"),
    NcclVar("NCCL_IB_GID_INDEX", "int", minimum=0),
    NcclVar("NCCL_IB_TC", "int", minimum=0),
    NcclVar("NCCL_IB_TIMEOUT", "int", minimum=0),
    NcclVar("NCCL_IB_RETRY_CNT", "int", minimum=0),
    NcclVar("NCCL_SOCKET_IFNAME", "str"),
    NcclVar("NCCL_NVLS_ENABLE", "switch"),
    NcclVar("NCCL_CUMEM_ENABLE", "switch"),
    NcclVar("NCCL_MIN_NCHANNELS", "int", minimum=1),
    NcclVar("NCCL_MAX_NCHANNELS", "int", minimum=1),
    NcclVar("NCCL_BUFFSIZE", "int", minimum=1),
    NcclVar("NCCL_DEBUG", "choice", ("VERSION", "WARN", "INFO", "TRACE")),
    NcclVar("NCCL_DEBUG_SUBSYS", "str"),
    NcclVar("NCCL_TUNER_PLUGIN", "str"),
)

NCCL_NAME = re.compile(r"^NCCL_[A-Z0-9_]+$")


def nccl_var(name: str) -> NcclVar | None:
    """The declaration of a variable, read from NCCL_VARS at call time (None: not type-checked)."""
    return next((v for v in NCCL_VARS if v.name == name), None)


def known_names() -> tuple[str, ...]:
    return tuple(v.name for v in NCCL_VARS)


def _scalar_text(name: str, value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (str, int, float)):
        return str(value)
    raise NcclValueError(f"{name} must be a scalar value, got {type(value).__name__}; write it as a string")


def parse_list(text: str, choices: tuple[str, ...]) -> tuple[bool, tuple[str, ...]]:
    """'^a,b' -> (negated, tokens in NCCL's spelling); trims spaces, compares case-insensitively.

    Raises NcclValueError naming every unknown token. The simulator's timing model reads lists with
    this function too, so what is validated and what is modelled are the same tokens.
    """
    body = text.strip()
    negated = body.startswith("^")
    if negated:
        body = body[1:]
    if ";" in body or ":" in body:
        raise NcclValueError(f"{text!r} uses NCCL's per-collective syntax, which sglab does not check; "
                             f"give one comma list of {', '.join(choices)}")
    tokens = [t.strip() for t in body.split(",")]
    if not any(tokens):
        raise NcclValueError(f"{text!r} is empty; give a comma list of {', '.join(choices)}")
    by_lower = {c.lower(): c for c in choices}
    bad = [t for t in tokens if t.lower() not in by_lower]
    if bad:
        raise NcclValueError(f"{text!r}: {', '.join(repr(b) for b in bad)} not one of {', '.join(choices)}; "
                             f"use a comma list of {', '.join(choices)} (a leading ^ excludes them)")
    return negated, tuple(by_lower[t.lower()] for t in tokens)


def normalise(name: str, value: Any) -> str:
    """The string NCCL should see for a declared variable (or any NCCL_* scalar), or NcclValueError."""
    var = nccl_var(name)
    if var is None:
        return _scalar_text(name, value)
    if var.kind == "int" and isinstance(value, bool):
        raise NcclValueError(f"{str(value).lower()} is a boolean, but {name} takes an integer; write the number")
    if var.kind in ("int", "switch") and isinstance(value, str):
        stripped = value.strip()
        value = int(stripped) if re.fullmatch(r"-?[0-9]+", stripped) else value
    text = _scalar_text(name, value).strip()
    if var.kind == "list":
        negated, tokens = parse_list(text, var.choices)
        return ("^" if negated else "") + ",".join(tokens)
    if var.kind == "choice":
        by_upper = {c.upper(): c for c in var.choices}
        if text.upper() not in by_upper:
            raise NcclValueError(f"{text!r} is not a value of {name}; use one of "
                                 f"{', '.join(repr(c) for c in var.choices)}")
        return by_upper[text.upper()]
    if var.kind == "switch":
        if text not in ("0", "1"):
            raise NcclValueError(f"{text!r} is not a value of {name}; use '0' or '1'")
        return text
    if var.kind == "int":
        if not re.fullmatch(r"-?[0-9]+", text):
            raise NcclValueError(f"{text!r} is not an integer; {name} takes a whole number")
        if var.minimum is not None and int(text) < var.minimum:
            raise NcclValueError(f"{name} is {text}, must be >= {var.minimum}; give a value >= {var.minimum}")
        return text
    return text


def describe(var: NcclVar) -> str:
    """The allowed values of a variable, as docs/config.md shows them."""
    if var.kind == "list":
        return (f"comma list of {', '.join(f'`{c}`' for c in var.choices)}; a leading `^` excludes them "
                "(any case, spaces trimmed)")
    if var.kind == "choice":
        return " \\| ".join(f"`{c}`" for c in var.choices) + " (any case; written as shown)"
    if var.kind == "switch":
        return "`0` \\| `1`"
    if var.kind == "int":
        return "integer" + (f" >= {var.minimum}" if var.minimum is not None else "")
    return "string"
