"""Offline render of everything `pulumi up` would apply for a stack, through the real Helm v4 engine.

No Pulumi CLI, no cluster: the stack file is read directly, the arm releases come from the same
plan the program uses, and Secrets carry a placeholder instead of their value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import helm_python as helm
import yaml

from sglab.config.arms import Confound, confounds
from sglab.config.loader import LoadedStack
from sglab.core.errors import ConfigError
from sglab.deploy.benchmark_job import benchmark_plan
from sglab.deploy.capacity import check_capacity
from sglab.deploy.namespace import hf_cache_manifest, namespace_manifest
from sglab.deploy.naming import SECRET_PLACEHOLDER, chart_dir
from sglab.deploy.objects import hf_token_secret_manifest
from sglab.deploy.plan import arm_releases
from sglab.deploy.preflight import preflight_plan

# Helm's install order (the subset our charts use): dependencies before dependents.
KIND_ORDER = (
    "Namespace", "NetworkPolicy", "PodDisruptionBudget", "ServiceAccount", "Secret", "ConfigMap",
    "PersistentVolumeClaim", "Role", "RoleBinding", "Service", "Deployment", "StatefulSet", "Job",
)


@dataclass
class RenderedStack:
    name: str
    path: Path
    objects: list[dict[str, Any]]
    confounds: list[Confound]
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # the deployment's order and capacity, for the header


def _kind_rank(obj: dict[str, Any]) -> int:
    kind = obj.get("kind", "")
    return KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER)


def render_chart(chart: Path | str, values: dict[str, Any], *, release: str, namespace: str) -> list[dict[str, Any]]:
    """The objects a Helm install of `chart` with exactly `values` creates, in install order.

    Raises helm_python.HelmError (e.g. HelmValuesError when values.schema.json rejects a value).
    """
    with helm.Chart.load(str(chart)) as loaded:
        rendered = loaded.render(values=values, name=release, namespace=namespace, is_install=True)
    objects: list[dict[str, Any]] = []
    for template in sorted(rendered):
        if not template.endswith((".yaml", ".yml")):
            continue
        objects.extend(doc for doc in yaml.safe_load_all(rendered[template]) if doc)
    return sorted(objects, key=_kind_rank)


def render_stack(loaded: LoadedStack) -> RenderedStack:
    """Namespace (when the stack creates it), HF token Secret (placeholder), HF cache claim, the preflight Job,
    the probe Job, both arms' chart objects and the load generators, in apply order."""
    stack = loaded.config
    capacity, warnings = check_capacity(stack, loaded.name)  # a plan that could deadlock is refused here too
    objects: list[dict[str, Any]] = []
    notes = [capacity.describe()] if capacity is not None else []
    namespace = namespace_manifest(stack, loaded.name)
    if namespace is not None:
        objects.append(namespace)
    else:
        notes.append(f"namespace {stack.namespace}: existing (namespace.create false), read, never created or deleted")
    secret = hf_token_secret_manifest(stack, loaded.name, SECRET_PLACEHOLDER)
    if secret is not None:
        objects.append(secret)
    cache = hf_cache_manifest(stack, loaded.name)
    if cache is not None:
        objects.append(cache)
    releases = arm_releases(stack, loaded.name)
    preflight = preflight_plan(stack, loaded.name, releases)
    if preflight is not None:  # before every GPU-holding object: the servers depend on it
        objects += preflight.manifests()
        notes.append(f"order: Job {preflight.name} (preflight, no GPU) completes before any server is created "
                     f"or replaced: {', '.join(r.release for r in releases)}")
    if stack.probe.enabled:  # on demand: runs on a fresh deploy or when asked; nothing waits for it
        from sglab.probe.job import probe_plan

        objects += probe_plan(stack, loaded.name).manifests()
    for release in releases:
        objects += _render_checked(loaded, release.chart, release.values, release=release.release,
                                   namespace=release.namespace, what=f"the {release.arm.role} arm")
    objects += _load_generators(loaded)
    return RenderedStack(loaded.name, loaded.path, objects, confounds(stack), [*loaded.warnings, *warnings], notes)


def _render_checked(loaded: LoadedStack, chart: Path, values: dict[str, Any], *, release: str, namespace: str,
                    what: str) -> list[dict[str, Any]]:
    try:
        return render_chart(chart, values, release=release, namespace=namespace)
    except helm.HelmError as exc:
        raise ConfigError(loaded.path, None, f"{what}'s chart values were rejected by "
                          f"{Path(chart).name}/values.schema.json: {exc}",
                          "fix the stack setting behind that value (see docs/config.md)") from None


def _load_generators(loaded: LoadedStack) -> list[dict[str, Any]]:
    """Locust and the benchmark Job, as the program's builders declare them (imported only when enabled)."""
    stack, objects = loaded.config, []
    if stack.locust.enabled:
        from sglab.deploy import locust

        password = SECRET_PLACEHOLDER if stack.locust_password is not None else None
        release = locust.locust_release(stack, loaded.name, password)
        objects += release.manifests()
        objects += _render_checked(loaded, chart_dir(locust.CHART), release.values, release=locust.RELEASE,
                                   namespace=release.namespace, what="Locust")
    if stack.benchmark_job.enabled:
        objects += benchmark_plan(stack, loaded.name).manifests()
    return objects


def object_filename(index: int, obj: dict[str, Any]) -> str:
    return f"{index:02d}-{obj['kind'].lower()}-{obj['metadata']['name']}.yaml"


def to_yaml(obj: dict[str, Any]) -> str:
    return yaml.safe_dump(obj, sort_keys=False, default_flow_style=False, width=4096)


def to_multidoc(objects: list[dict[str, Any]]) -> str:
    return "".join("---\n" + to_yaml(obj) for obj in objects)


def header_comment(rendered: RenderedStack) -> str:
    lines = [f"# sglab render --stack {rendered.name}: {len(rendered.objects)} objects, what "
             f"`pulumi up --stack {rendered.name}` would apply (secrets shown as placeholders)"]
    lines += [f"# {note}" for note in rendered.notes]
    if rendered.confounds:
        lines.append(f"# confounds ({len(rendered.confounds)}): the candidate differs beyond speculation in")
        lines += [f"#   - {c.describe()}" for c in rendered.confounds]
    else:
        lines.append("# confounds: none (baseline and candidate differ only in the speculative block)")
    return "\n".join(lines) + "\n"


