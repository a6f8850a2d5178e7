"""Where probe results live: the result ConfigMaps the probe Job fills, and results/<stack>/probe-<id>/.

The Job's `store` step (`sglab probe store`) writes the result with the benchmark Job's sink; its index
ConfigMap is labelled `sglab/result=nccl-probe`, so `sglab results pull`'s RunResult reader passes it by
and `pull_probe_results` takes it. A result already on disk is never overwritten.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sglab.results.pull import StoreReport, group_labelled, read_document, store_once
from sglab.results.sink import encode_result
from sglab.probe.result import PROBE_FILE, PROBE_KIND, RUN_PREFIX, ProbeResult, load_probe, parse_probe, to_json

# Index + one part: a probe result is tens of KB gzipped; the Job's Role names exactly these ConfigMaps.
PROBE_RESULT_PARTS = 2


def fitting_json(result: ProbeResult) -> str:
    """The result as JSON that fits the pre-created ConfigMaps: raw samples dropped only if it must."""
    text = to_json(result)
    try:
        encode_result(text, max_parts=PROBE_RESULT_PARTS)
        return text
    except ValueError:
        trimmed = result.model_copy(deep=True)
        for variant in trimmed.variants:
            for size in variant.sizes:
                size.times_us = []
        return to_json(trimmed)


def store_to_configmap(path: Path | str, name: str, namespace: str | None = None, *, core_api: Any = None) -> str:
    """Write probe.json at `path` into ConfigMap `name` (the Job's store step); returns the namespace."""
    from sglab.results.sink import write_result_configmap

    result = load_probe(path)
    return write_result_configmap(fitting_json(result), name, namespace, core_api=core_api)


class ProbePullReport(StoreReport):
    """What a probe pull did (the benchmark pull's account, without trimming: a probe is never trimmed)."""


def _read(parts: list[Any], stack: str) -> ProbeResult | str | None:
    """The probe result of one index ConfigMap and its parts, a reason it is not one, or None while it is not
    written yet."""
    document, problem = read_document(parts)
    if document is None:
        return problem
    try:
        result = parse_probe(document, parts[0].metadata.name)
    except (ValueError, TypeError) as exc:
        return str(exc).splitlines()[0]
    if result.stack != stack:
        return f"holds a probe of stack {result.stack!r}, not {stack!r}"
    if not result.run_id.startswith(RUN_PREFIX) or "/" in result.run_id or ".." in result.run_id:
        return f"run_id {result.run_id!r} is not a probe directory name"
    return result


def store_pulled(configmaps: list[Any], stack: str, base: Path) -> ProbePullReport:
    """Write every probe result among `configmaps` to <base>/<stack>/<run_id>/probe.json unless one is there."""
    report = ProbePullReport()
    for parts in group_labelled(configmaps, PROBE_KIND):
        name = parts[0].metadata.name
        read = _read(parts, stack)
        if read is None:
            report.pending.append(name)
        elif isinstance(read, str):
            report.rejected.append(f"{name}: {read}")
        else:
            store_once(base / stack / read.run_id / PROBE_FILE, read.model_dump(mode="json"), report)
    return report


def pull_probe_results(stack: str, *, namespace: str | None = None, context: str | None = None,
                       kubeconfig: str | None = None, base: Path | None = None,
                       core_api: Any = None) -> ProbePullReport:
    """What `sglab results pull` adds for probes: the stack's probe results into results/<stack>/."""
    from sglab.config.loader import load_stack
    from sglab.results.pull import list_result_configmaps
    from sglab.results.store import results_root

    namespace = namespace or load_stack(stack).config.namespace
    items = list_result_configmaps(stack, namespace, context=context, kubeconfig=kubeconfig, core_api=core_api)
    return store_pulled(items, stack, base or results_root())


def list_probes(stack: str, base: Path | None = None) -> list[Path]:
    """The stack's probe directories holding a probe.json, oldest first."""
    from sglab.results.store import results_root

    folder = (base or results_root()) / stack
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob(f"{RUN_PREFIX}*") if (p / PROBE_FILE).is_file())
