"""`sglab results pull`: sglab/results/pull.py, with the namespace taken from the stack file when not given, and
the cluster's retention: after a pull, the result ConfigMaps of runs beyond the newest `benchmark-job.keep-results`
are deleted from the cluster, but only those whose result is now on disk as pulled (so nothing is lost).

The transport itself lives next to the result store (sglab/results/pull.py, which imports no config); this
module adds the stack lookup and the pruning. Each run's ConfigMaps hold at most ~7 MiB of etcd
(docs/in-cluster.md); the result ConfigMaps are kept by Pulumi on purpose (retainOnDelete), so without pruning
they would stay forever.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sglab.core.errors import ConfigError
from sglab.config.loader import load_stack
from sglab.results import pull as _pull
from sglab.results.pull import (STACK_LABEL, PulledResult, PullReport, group_parts, label_selector,  # noqa: F401
                                list_result_configmaps, parse_result, store_pulled)
from sglab.results.store import RESULT_FILE, results_root


def pull_report(stack: str, *, namespace: str | None = None, context: str | None = None,
                kubeconfig: str | None = None, base: Path | None = None, core_api: Any = None) -> PullReport:
    """Pull with the full account (what was written, skipped, pending, rejected)."""
    return _pull.pull_report(stack, namespace=namespace or load_stack(stack).config.namespace, context=context,
                             kubeconfig=kubeconfig, base=base, core_api=core_api)


def pull_results(stack: str, *, namespace: str | None = None, context: str | None = None,
                 kubeconfig: str | None = None, base: Path | None = None, core_api: Any = None) -> list[Path]:
    """Backend of `sglab results pull`: the result files written by this pull (newest last)."""
    return sorted(pull_report(stack, namespace=namespace, context=context, kubeconfig=kubeconfig, base=base,
                              core_api=core_api).written)


@dataclass
class Pruned:
    kept: list[str] = field(default_factory=list)  # run ids left in the cluster (the newest `keep`)
    deleted: list[tuple[str, Path]] = field(default_factory=list)  # (run id, where it is on disk)
    not_home: list[str] = field(default_factory=list)  # older runs left because they are not on disk as pulled


def _core_api(core_api: Any, context: str | None, kubeconfig: str | None) -> Any:
    if core_api is not None:
        return core_api
    from kubernetes import client, config

    config.load_kube_config(config_file=kubeconfig, context=context)
    return client.CoreV1Api()


def _age_key(parts: list[Any], result: Any) -> tuple[str, str]:
    created = getattr(parts[0].metadata, "creation_timestamp", None)
    return (created.isoformat() if hasattr(created, "isoformat") else str(created or ""), result.run_id)


def prune_results(stack: str, keep: int, *, report: PullReport, namespace: str | None = None,
                  context: str | None = None, kubeconfig: str | None = None, base: Path | None = None,
                  core_api: Any = None, spare: set[str] | frozenset[str] = frozenset()) -> Pruned:
    """Delete from the cluster every result beyond the newest `keep` whose file is on disk (this pull wrote it, or an
    identical copy was already there); pending, refused and conflicting results are never deleted, nor the runs in
    `spare` (a sweep's calibration step, which its waves' Jobs read: sweep.calibration-run)."""
    if keep < 1:
        raise ValueError("keep at least the newest run in the cluster (the stack's outputs read it back)")
    namespace = namespace or load_stack(stack).config.namespace
    api = _core_api(core_api, context, kubeconfig)
    try:
        items = list(api.list_namespaced_config_map(namespace, label_selector=label_selector(stack)).items)
    except Exception as exc:
        raise ConfigError(kubeconfig or "kubeconfig", f"namespace {namespace}",
                          f"cannot list result ConfigMaps to prune: {exc}", "check kubectl access") from None
    home = set(report.written) | set(report.unchanged)
    root = (base or results_root()) / stack
    runs = []
    for parts in group_parts(items):
        pulled = parse_result(parts, stack)
        if pulled.result is not None:
            runs.append((_age_key(parts, pulled.result), parts, pulled))
    runs.sort(key=lambda run: run[0], reverse=True)  # newest first
    spared = [run for run in runs[keep:] if run[2].result.run_id in spare]
    pruned = Pruned(kept=[run[2].result.run_id for run in [*runs[:keep], *spared]])
    for _, parts, pulled in [run for run in runs[keep:] if run not in spared]:
        target = root / pulled.result.run_id / RESULT_FILE
        if target not in home:
            pruned.not_home.append(pulled.result.run_id)
            continue
        for part in parts:  # index first: a reader that finds no index reads no parts
            if part is not None:
                api.delete_namespaced_config_map(part.metadata.name, namespace)
        pruned.deleted.append((pulled.result.run_id, target))
    return pruned
