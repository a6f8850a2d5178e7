"""The key reference of docs/config.md, generated from the models so no key or default is documented by hand.

    .venv/bin/python -m sglab.config.reference          # rewrite the generated block of docs/config.md
    .venv/bin/python -m sglab.config.reference --check  # exit 1 if it is stale
"""

from __future__ import annotations

import sys
import typing
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from sglab.config.base import TypeName
from sglab.config.stack import StackConfig
from sglab.config.nccl import NcclEnv
from sglab.core.paths import project_root, write_or_check
from sglab.sglang import nccl as nccl_contract

BEGIN = "<!-- BEGIN GENERATED KEY REFERENCE (python -m sglab.config.reference) -->"
END = "<!-- END GENERATED KEY REFERENCE -->"


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        named = [m.name for m in args[1:] if isinstance(m, TypeName)]
        return named[0] if named else _type_name(args[0])
    if origin is typing.Literal:
        return " \\| ".join(f"`{a}`" for a in args)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        names = [_type_name(a) for a in args if a is not type(None)]
        suffix = " or null" if type(None) in args else ""
        return " or ".join(names) + suffix
    if origin is list:
        return f"list of {_type_name(args[0])}" if args else "list"
    if origin is dict:
        return "map" if not args else f"map of {_type_name(args[1])}"
    if annotation is Any:
        return "secret"
    if isinstance(annotation, type):
        if issubclass(annotation, BaseModel):
            return "section"
        return {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}.get(
            annotation.__name__, annotation.__name__)
    return str(annotation)


def _default(field: Any) -> str:
    extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
    if extra.get("default_text"):  # a default that depends on another key, said as the validator applies it
        return str(extra["default_text"])
    if field.is_required():
        return "**required**"
    if getattr(field.default_factory, "reference", None):
        return field.default_factory.reference
    if field.default_factory is not None:
        value = field.default_factory()
    else:
        value = field.default
    if value is PydanticUndefined:
        return "**required**"
    if isinstance(value, BaseModel):
        return "(section)"
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if value in ({}, [], ""):
        return "empty"
    if isinstance(value, dict):
        return ", ".join(f"`{k}: {v}`" for k, v in value.items())
    return f"`{value}`"


def _bounds(metadata: list[Any]) -> list[str]:
    parts = []
    for meta in metadata:
        for attr, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"), ("max_length", "at most")):
            value = getattr(meta, attr, None)
            if value is not None:
                parts.append(f"{sign} {value}" + (" items" if attr == "max_length" else ""))
        parts += _bounds(getattr(meta, "metadata", []))
    return parts


def _constraint(field: Any) -> str:
    """The field's bounds, also those inside `X | None` and a list's items ("each >= 1, <= 4096")."""
    parts, each = _bounds(field.metadata), list[str]()
    stack: list[tuple[Any, bool]] = [(field.annotation, False)]
    while stack:
        annotation, item = stack.pop()
        for bound in _bounds(list(getattr(annotation, "__metadata__", ()))):
            (each if item and not bound.endswith("items") else parts).append(bound)
        inner = typing.get_origin(annotation) is list
        stack += [(a, item or inner) for a in reversed(typing.get_args(annotation))]
    each = list(dict.fromkeys(each))
    return ", ".join([*dict.fromkeys(parts), *(["each " + " and ".join(each)] if each else [])])


def rows(model: type[BaseModel] = StackConfig, prefix: str = "sglab:") -> list[tuple[str, str, str, str]]:
    """(key path, type, default, bounds) for every key, depth first, in declaration order."""
    out: list[tuple[str, str, str, str]] = []
    for name, field in model.model_fields.items():
        key = (field.alias or name).replace("_", "-")
        path = f"{prefix}{key}"
        set_from = (field.json_schema_extra or {}).get("set_from") if isinstance(field.json_schema_extra, dict) \
            else None
        if set_from:  # derived by the stack from another key: one row that says where to write it
            out.append((path, f"set from `{set_from}` (do not write it here)", "", ""))
            continue
        nested = _model_in(field.annotation)
        if nested is NcclEnv:
            out.append((path, "map of NCCL_* variables (see [NCCL](#nccl))", _default(field), ""))
            continue
        if nested is not None:
            is_list = typing.get_origin(field.annotation) is list
            kind = f"list of {nested.__name__.lower()} entries" if is_list else "section"
            out.append((path, kind, _default(field) if is_list else "", "required" if field.is_required() else ""))
            out.extend(rows(nested, path + ("[]." if is_list else ".")))
            continue
        named = [m.name for m in field.metadata if isinstance(m, TypeName)]  # pydantic's home for a top Annotated
        out.append((path, named[0] if named else _type_name(field.annotation), _default(field), _constraint(field)))
    return out


def nccl_rows() -> list[tuple[str, str]]:
    return [(var.name, nccl_contract.describe(var)) for var in nccl_contract.NCCL_VARS]


def generated_block() -> str:
    lines = [BEGIN, "", "| key | type | default | bounds |", "|---|---|---|---|"]
    lines += [f"| `{k}` | {t} | {d} | {b} |" for k, t, d, b in rows()]
    lines += ["", "Typed NCCL variables (under `sglab:nccl`, or `sglab:candidate.confounds.nccl`):", "",
              "| variable | allowed values |", "|---|---|"]
    lines += [f"| `{k}` | {t} |" for k, t in nccl_rows()]
    lines += ["", END]
    return "\n".join(lines)


def main() -> int:
    doc = project_root() / "docs" / "config.md"
    text = doc.read_text()
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    updated = head + generated_block() + tail
    return write_or_check({doc: updated}, "python -m sglab.config.reference")


if __name__ == "__main__":
    sys.exit(main())
