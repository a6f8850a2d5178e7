"""Run the real Pulumi program (sglab.program.run) under Pulumi's official mocks: the one harness of
tests/deploy and tests/deploy_extras.

Config is set the way `pulumi up` sets it (strings, JSON for objects, secrets decrypted). `reads` supplies the
live state a `Resource.get` returns (e.g. the result ConfigMap the Job filled), keyed by the provider id
`<namespace>/<name>`; `outputs` adds what a provider computes, by resource type. Everything registered is
recorded with its resource options.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import settings
from ruamel.yaml import YAML

from sglab.core.paths import stack_path
from sglab.config.loader import stacks_dir

PROJECT = "sglab"
SECRET_PREFIX = "test-secret-value-"
UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"  # Pulumi's wire value of an unknown output


def shipped_stacks() -> list[str]:
    return sorted(p.name[len("Pulumi."):-len(".yaml")] for p in stacks_dir().glob("Pulumi.*.yaml"))


def pulumi_config(path: Path, overrides: dict[str, Any] | None = None,
                  secrets: dict[str, str] | None = None) -> tuple[dict[str, str], list[str]]:
    """What the Pulumi CLI hands the program for a stack file, with `sglab:` overrides and extra secrets."""
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


def arm_resource(stack, role: str) -> str:
    """The Pulumi resource name of an arm of a stack's A/B pair: the role, except a sweep stack's candidate, which is
    its leader slot (the same resource in every wave and in the confirmation)."""
    from sglab.deploy.naming import arm_release_name, release_name

    release = arm_release_name(stack, role)
    return role if release == release_name(role) else release


@dataclass
class Registered:
    typ: str
    name: str
    inputs: dict[str, Any]
    custom: bool
    read_id: str | None = None  # set for a `Resource.get` of an existing object
    transforms: list[Any] = field(default_factory=list)  # its `transforms` option (the mocks do not run them)


class Mocks(pulumi.runtime.Mocks):
    def __init__(self, reads: dict[str, dict[str, Any]] | None = None,
                 outputs: dict[str, dict[str, Any]] | None = None,
                 fail: dict[tuple[str, str], str] | None = None) -> None:
        self.reads = reads or {}
        self.outputs = outputs or {}
        self.fail = fail or {}  # (type, name) -> the error the provider reports (a failed Job, say)
        self.resources: list[Registered] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        if (args.typ, args.name) in self.fail:
            raise RuntimeError(self.fail[(args.typ, args.name)])
        self.resources.append(Registered(args.typ, args.name, dict(args.inputs), bool(args.custom),
                                         args.resource_id or None, list(args.transforms)))
        if args.resource_id:
            return args.resource_id, dict(self.reads.get(args.resource_id, {}))
        # outputs the provider computes, by type (UNKNOWN: what a preview of a new resource cannot know)
        return f"{args.name}-id", {**args.inputs, **self.outputs.get(args.typ, {})}

    def call(self, args: pulumi.runtime.MockCallArgs):
        return {}


class Monitor(pulumi_mocks.MockMonitor):
    """The official mock monitor, also keeping the resource options Mocks.new_resource does not see."""

    def __init__(self, mocks: Mocks) -> None:
        super().__init__(mocks)
        self.options: dict[str, dict[str, Any]] = {}

    def RegisterResource(self, request):
        timeouts = request.customTimeouts
        self.options[f"{request.type}::{request.name}"] = {
            "parent": request.parent,
            "custom_timeouts": {k: getattr(timeouts, k) for k in ("create", "update", "delete")
                                if getattr(timeouts, k)},
            "dependencies": list(request.dependencies),
            "remote": request.remote,
            "retain_on_delete": request.retainOnDelete,
            "ignore_changes": list(request.ignoreChanges),
        }
        return super().RegisterResource(request)


@dataclass
class ProgramRun:
    stack: str
    resources: list[Registered]
    options: dict[str, dict[str, Any]]  # by "<type>::<name>"
    outputs: dict[str, Any] = field(default_factory=dict)
    error: Exception | None = None

    def of_type(self, typ: str) -> list[Registered]:
        """What the program declares of `typ` (not reads of existing objects)."""
        return [r for r in self.resources if r.typ == typ and r.read_id is None]

    def named(self, typ: str, name: str) -> Registered:
        (found,) = [r for r in self.of_type(typ) if r.name == name]
        return found

    def reads(self) -> list[Registered]:
        return [r for r in self.resources if r.read_id is not None]

    def applied(self) -> list[Registered]:
        """Kubernetes objects the program creates directly (not components, charts or reads of existing ones)."""
        return [r for r in self.resources
                if r.custom and not r.read_id and r.typ.startswith("kubernetes:") and "helm.sh" not in r.typ]

    def options_of(self, typ: str, name: str) -> dict[str, Any]:
        """The resource's options; `dependencies` sorted (Pulumi records them in the order its awaits finish)."""
        options = dict(self.options[f"{typ}::{name}"])
        if isinstance(options.get("dependencies"), list):
            options["dependencies"] = sorted(options["dependencies"])
        return options


def _refuse_under_gevent() -> None:
    """Pulumi's mocks re-enter asyncio's loop from inside a task; under Locust's gevent monkey-patching that
    deadlocks (no timeout fires), so a mixed pytest process must fail loudly instead of hanging."""
    import sys

    monkey = sys.modules.get("gevent.monkey")
    if monkey is not None and monkey.is_module_patched("threading"):
        raise RuntimeError("Pulumi mocks cannot run in a process that imported Locust (gevent monkey-patching "
                           "deadlocks them): run the Pulumi tests in their own pytest process, as `make test` "
                           "does (PULUMI_TESTS in the Makefile)")


def _no_cluster() -> list[Any]:
    raise RuntimeError("no cluster under Pulumi's mocks")


def run_program(stack: str, overrides: dict[str, Any] | None = None, *, config: dict[str, str] | None = None,
                secret_keys: list[str] | None = None, secrets: dict[str, str] | None = None,
                reads: dict[str, dict[str, Any]] | None = None, preview: bool = False,
                outputs: dict[str, dict[str, Any]] | None = None,
                fail: dict[tuple[str, str], str] | None = None, nodes: list[Any] | None = None,
                version: str | None = None) -> ProgramRun:
    """Run the program for `stack`: config is the stack file's with `overrides`/`secrets`, or `config` verbatim.
    `nodes` are the cluster's nodes the driver check reads (sglab/deploy/capacity.py `Node`) and `version` the API
    server's gitVersion; by default there is no cluster to read, as in a preview without one."""
    from sglab.program import run

    _refuse_under_gevent()
    if config is None:
        config, secret_keys = pulumi_config(stack_path(stack), overrides, secrets)
    mocks = Mocks(reads, outputs, fail)
    monitor = Monitor(mocks)
    settings.ROOT.set(None)  # a fresh root Stack per run, named after this stack
    pulumi.runtime.set_mocks(mocks, project=PROJECT, stack=stack, preview=preview, monitor=monitor)
    pulumi.runtime.set_all_config(config, secret_keys or [])
    result = ProgramRun(stack, mocks.resources, monitor.options)

    @pulumi.runtime.test
    def program():
        try:
            dep = run(read_nodes=(lambda: nodes) if nodes is not None else _no_cluster,
                      read_version=(lambda: version) if version is not None else _no_cluster)
        except Exception as exc:  # the program's own refusal is what some tests assert on
            result.error = exc
            return None
        return pulumi.Output.all(**{k: pulumi.Output.from_input(v) for k, v in dep.outputs.items()}).apply(
            result.outputs.update)

    try:
        program()
    except Exception as exc:  # a resource the provider failed (Mocks.fail): the engine stops there; run such a
        result.error = result.error or exc  # test in a process of its own (its leftover tasks break ast.parse)
    return result
