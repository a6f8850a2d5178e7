"""docs/deploy.md's table of the keys that name a cluster (what a user changes to deploy a shipped stack on their
own): every key is a real stack key, and every one the production stack sets is in the table, so the guide and the
shipped stack cannot drift apart."""

from __future__ import annotations

import re
import typing
from pathlib import Path

from pydantic import BaseModel
from ruamel.yaml import YAML

from sglab.config.stack import StackConfig

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "deploy.md"
# What the production stack sets about the experiment or the serving shape, not about the cluster (a key and all
# below it).
EXPERIMENT = ("sglab:production", "sglab:server", "sglab:env", "sglab:candidate.speculative.algorithm",
              "sglab:candidate.speculative.num-steps", "sglab:candidate.speculative.eagle-topk",
              "sglab:candidate.speculative.num-draft-tokens", "sglab:placement.gpus-per-node", "sglab:rollout",
              "sglab:model.volume.kind", "sglab:serving.replicas", "sglab:serving.traffic-router",
              "sglab:serving.steps", "sglab:serving.canary.window-s", "sglab:serving.canary.max-windows",
              "sglab:serving.canary.http-responses.code-label", "sglab:serving.monitoring.scrape", "sglab:policy",
              "sglab:load")


def _table_keys() -> list[str]:
    text = DOC.read_text()
    table = re.search(r"<!-- cluster-keys:begin -->\n(.*?)<!-- cluster-keys:end -->", text, re.S)
    assert table is not None
    return re.findall(r"^\| `([^`]+)` \|", table.group(1), re.M)


def _model_has(path: list[str]) -> bool:
    """Does the stack model have this kebab-case key path (under sglab:)?"""
    model: type[BaseModel] = StackConfig
    for i, part in enumerate(path):
        field = next((f for name, f in model.model_fields.items() if (f.alias or name.replace("_", "-")) == part),
                     None)
        if field is None:
            return False
        inner = [a for a in typing.get_args(field.annotation) if isinstance(a, type)] or [field.annotation]
        nested = next((a for a in inner if isinstance(a, type) and issubclass(a, BaseModel)), None)
        if nested is None:
            return i == len(path) - 1
        model = nested
    return True


def _set_paths(node, prefix: str) -> set[str]:
    """Every key path the stack file sets (dicts only; a list is a value)."""
    paths = {prefix}
    if isinstance(node, dict):
        for key, value in node.items():
            paths |= _set_paths(value, f"{prefix}.{key}" if prefix.startswith("sglab:") else str(key))
    return paths


def test_every_key_in_the_table_is_a_stack_key() -> None:
    keys = _table_keys()
    assert len(keys) >= 15
    unknown = [k for k in keys if k.startswith("sglab:") and not _model_has(k.removeprefix("sglab:").split("."))]
    assert not unknown, unknown
    assert all(k.startswith(("sglab:", "kubernetes:")) for k in keys)


def test_every_cluster_key_the_production_stack_sets_is_in_the_table() -> None:
    config = YAML(typ="safe").load((ROOT / "stacks" / "Pulumi.production.yaml").read_text())["config"]
    paths = set().union(*(_set_paths(value, key) for key, value in config.items()))
    table = _table_keys()

    def under(path: str, keys) -> bool:
        return any(path == k or path.startswith(k + ".") for k in keys)

    parents = {p for p in paths if any(k.startswith(p + ".") for k in [*table, *EXPERIMENT])}
    missing = sorted(p for p in paths - parents if not under(p, table) and not under(p, EXPERIMENT))
    assert not missing, f"add these to docs/deploy.md's cluster-keys table, or to EXPERIMENT here: {missing}"
