"""Run the real Pulumi program (sglab.deploy.program.run) under Pulumi's official mocks.

`reads` supplies the live state a `Resource.get` returns (e.g. the result ConfigMap the Job filled),
keyed by the provider id `<namespace>/<name>`; everything registered is recorded with its options.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime import mocks as pulumi_mocks
from ruamel.yaml import YAML

from sglab.config.loader import stack_path

PROJECT = "sglab"
SECRET_PREFIX = "test-secret-"


def pulumi_config(path: Path, overrides: dict[str, Any] | None = None,
                  secrets: dict[str, str] | None = None) -> tuple[dict[str, str], list[str]]:
    """What the Pulumi CLI hands the program for a stack file (objects as JSON, secrets decrypted)."""
    document = YAML(typ="safe").load(path.read_text())
    raw: dict[str, Any] = dict(document.get("config") or {})
    raw.update({f"sglab:{k}": v for k, v in (overrides or {}).items()})
    config: dict[str, str] = {}
    secret_keys: list[str] = []
    for key, value in raw.items():
        if isinstance(value, dict) and set(value) == {"secure"}:
            config[key] = SECRET_PREFIX + key
            secret_keys.append(key)
        elif isinstance(value, (dict, list)):
            config[key] = json.dumps(value)
        elif isinstance(value, bool):
            config[key] = "true" if value else "false"
        else:
            config[key] = str(value)
    for key, value in (secrets or {}).items():
        config[f"sglab:{key}"] = value
        secret_keys.append(f"sglab:{key}")
    return config, secret_keys


@dataclass
class Registered:
    typ: str
    name: str
    inputs: dict[str, Any]
    read_id: str | None = None


UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"  # Pulumi's wire value of an unknown output


class Mocks(pulumi.runtime.Mocks):
    def __init__(self, reads: dict[str, dict[str, Any]] | None = None,
                 outputs: dict[str, dict[str, Any]] | None = None) -> None:
        self.reads = reads or {}
        self.outputs = outputs or {}
        self.resources: list[Registered] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        self.resources.append(Registered(args.typ, args.name, dict(args.inputs), args.resource_id or None))
        if args.resource_id:
            return args.resource_id, dict(self.reads.get(args.resource_id, {}))
        # outputs the provider computes, by type (UNKNOWN: what a preview of a new resource cannot know)
        return f"{args.name}-id", {**args.inputs, **self.outputs.get(args.typ, {})}

    def call(self, args: pulumi.runtime.MockCallArgs):
        return {}


class Monitor(pulumi_mocks.MockMonitor):
    """The official mock monitor, also keeping the options Mocks.new_resource does not see."""

    def __init__(self, mocks: Mocks) -> None:
        super().__init__(mocks)
        self.options: dict[str, dict[str, Any]] = {}

    def RegisterResource(self, request):
        timeouts = request.customTimeouts
        self.options[request.name] = {
            "custom_timeouts": {k: getattr(timeouts, k) for k in ("create", "update", "delete") if getattr(timeouts, k)},
            "dependencies": list(request.dependencies),
            "retain_on_delete": request.retainOnDelete,
            "ignore_changes": list(request.ignoreChanges),
            "parent": request.parent,
        }
        return super().RegisterResource(request)


@dataclass
class Run:
    resources: list[Registered]
    options: dict[str, dict[str, Any]]
    outputs: dict[str, Any] = field(default_factory=dict)
    error: Exception | None = None

    def of_type(self, typ: str) -> list[Registered]:
        return [r for r in self.resources if r.typ == typ and r.read_id is None]

    def named(self, name: str) -> Registered:
        (found,) = [r for r in self.resources if r.name == name and r.read_id is None]
        return found

    def reads(self) -> list[Registered]:
        return [r for r in self.resources if r.read_id is not None]


def run_program(stack: str, overrides: dict[str, Any] | None = None, *, secrets: dict[str, str] | None = None,
                reads: dict[str, dict[str, Any]] | None = None, preview: bool = False,
                outputs: dict[str, dict[str, Any]] | None = None) -> Run:
    from sglab.deploy.program import run

    config, secret_keys = pulumi_config(stack_path(stack), overrides, secrets)
    mocks = Mocks(reads, outputs)
    monitor = Monitor(mocks)
    pulumi.runtime.set_mocks(mocks, project=PROJECT, stack=stack, preview=preview, monitor=monitor)
    pulumi.runtime.set_all_config(config, secret_keys)
    result = Run(mocks.resources, monitor.options)

    @pulumi.runtime.test
    def program():
        try:
            dep = run()
        except Exception as exc:  # the program's refusal is what some tests assert on
            result.error = exc
            return None
        return pulumi.Output.all(**{k: pulumi.Output.from_input(v) for k, v in dep.outputs.items()}).apply(
            result.outputs.update)

    program()
    return result
