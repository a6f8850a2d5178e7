"""`sglab results pull`: sglab/results/pull.py, with the namespace taken from the stack file when not given.

The transport itself lives next to the result store (sglab/results/pull.py, which imports no config);
this module only adds the stack lookup.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sglab.config.loader import load_stack
from sglab.results import pull as _pull
from sglab.results.pull import (STACK_LABEL, PulledResult, PullReport, group_parts, label_selector,  # noqa: F401
                                list_result_configmaps, parse_result, store_pulled)


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
