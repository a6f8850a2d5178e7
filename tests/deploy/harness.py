"""Run the real Pulumi program under Pulumi's official mocks, with config set the way `pulumi up` sets it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import settings
from ruamel.yaml import YAML

from sglab.config.loader import stacks_dir

PROJECT = "sglab"
TEST_SECRET_PREFIX = "test-secret-value-"


def shipped_stacks() -> list[str]:
    return sorted(p.name[len("Pulumi."):-len(".yaml")] for p in stacks_dir().glob("Pulumi.*.yaml"))


def pulumi_config_from_file(path: Path) -> tuple[dict[str, str], list[str]]:
    """What the Pulumi CLI hands the program for a stack file: strings, JSON for objects, secrets decrypted."""
    document = YAML(typ="safe").load(path.read_text())
    config: dict[str, str] = {}
    secret_keys: list[str] = []
    for key, value in (document.get("config") or {}).items():
        if isinstance(value, dict) and set(value) == {"secure"}:
            config[key] = TEST_SECRET_PREFIX + key
            secret_keys.append(key)
        elif isinstance(value, (dict, list)):
            config[key] = json.dumps(value)
        elif isinstance(value, bool):
            config[key] = "true" if value else "false"
        else:
            config[key] = str(value)
    return config, secret_keys


@dataclass
class Registered:
    typ: str
    name: str
    inputs: dict[str, Any]
    custom: bool
    resource_id: str | None = None
    parent: str = ""
    custom_timeouts: dict[str, str] = field(default_factory=dict)
    dependencies: list[str] = field(default_factory=list)


class RecordingMocks(pulumi.runtime.Mocks):
    def __init__(self) -> None:
        self.resources: list[Registered] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        self.resources.append(Registered(args.typ, args.name, dict(args.inputs), bool(args.custom),
                                         args.resource_id or None))
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args: pulumi.runtime.MockCallArgs):
        return {}


class RecordingMonitor(pulumi_mocks.MockMonitor):
    """The official mock monitor, also keeping the resource options Mocks.new_resource does not see."""

    def __init__(self, mocks: RecordingMocks) -> None:
        super().__init__(mocks)
        self.options: dict[str, dict[str, Any]] = {}

    def RegisterResource(self, request):
        timeouts = request.customTimeouts
        self.options[f"{request.type}::{request.name}"] = {
            "type": request.type,
            "parent": request.parent,
            "custom_timeouts": {k: getattr(timeouts, k) for k in ("create", "update", "delete") if getattr(timeouts, k)},
            "dependencies": list(request.dependencies),
            "remote": request.remote,
        }
        return super().RegisterResource(request)


@dataclass
class ProgramRun:
    stack: str
    resources: list[Registered]
    options: dict[str, dict[str, Any]]
    outputs: dict[str, Any]
    error: Exception | None = None

    def of_type(self, typ: str) -> list[Registered]:
        return [r for r in self.resources if r.typ == typ]

    def named(self, typ: str, name: str) -> Registered:
        (found,) = [r for r in self.resources if r.typ == typ and r.name == name]
        return found

    def applied(self) -> list[Registered]:
        """Kubernetes objects the program creates directly (not components, charts or reads of existing ones)."""
        return [r for r in self.resources
                if r.custom and not r.resource_id and r.typ.startswith("kubernetes:") and "helm.sh" not in r.typ]

    def options_of(self, typ: str, name: str) -> dict[str, Any]:
        return self.options[f"{typ}::{name}"]


def run_program(stack: str, config: dict[str, str] | None = None, secret_keys: list[str] | None = None) -> ProgramRun:
    """Run sglab.deploy.program.run() for `stack` under mocks; config defaults to the stack file's."""
    from sglab.config.loader import stack_path
    from sglab.deploy.program import run

    if config is None:
        config, secret_keys = pulumi_config_from_file(stack_path(stack))
    mocks = RecordingMocks()
    monitor = RecordingMonitor(mocks)
    settings.ROOT.set(None)  # a fresh root Stack per run, named after this stack
    pulumi.runtime.set_mocks(mocks, project=PROJECT, stack=stack, preview=False, monitor=monitor)
    pulumi.runtime.set_all_config(config, secret_keys or [])
    outputs: dict[str, Any] = {}
    captured: list[Exception] = []

    @pulumi.runtime.test
    def program():
        try:
            dep = run()
        except Exception as exc:  # the program's own failure is part of what tests assert on
            captured.append(exc)
            return None
        return pulumi.Output.all(**{k: pulumi.Output.from_input(v) for k, v in dep.outputs.items()}).apply(
            outputs.update)

    program()
    return ProgramRun(stack, mocks.resources, monitor.options, outputs, captured[0] if captured else None)
