"""What every plot of a run shares: the arms' colours, the outcome colours, saving a figure, the judged SLO.

Its own module so that plots.py (per-metric plots) and curves.py (latency-throughput curves, categories) both
read it without importing each other.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from sglab import metrics  # noqa: E402
from sglab.report.provenance import SIMULATOR_EVIDENCE, simulator_producer  # noqa: E402
from sglab.schema.result import RunResult  # noqa: E402
from sglab.schema.verdict import Verdict  # noqa: E402

COLORS = {"baseline": "#4C72B0", "candidate": "#DD8452", "baseline+confounds": "#55A868",
          "candidate-confounds": "#C44E52", "baseline-b": "#8172B3"}
OUTCOME_COLORS = {"promote": "#2E7D32", "reject": "#C62828", "inconclusive": "#EF6C00"}
SIMULATOR_COLOR = "#E65100"  # simulator evidence, in the report's banner and the plots' titles


def arm_color(arm: str) -> str:
    return COLORS.get(arm, "#555555")


def evidence_title(result: RunResult) -> str | None:
    """The title a plot of simulator numbers carries (a PNG travels without its report)."""
    producer = simulator_producer(result)
    if producer is None:
        return None
    scale = producer.time_scale if producer.time_scale is not None else 1.0
    return f"{SIMULATOR_EVIDENCE} (tok/s and ms at time scale {scale:g}, {scale:g}x real time)"


def mark_evidence(fig: plt.Figure, result: RunResult) -> None:
    title = evidence_title(result)
    if title is not None:
        fig.suptitle(title, color=SIMULATOR_COLOR, fontsize=10)


def save_figure(fig: plt.Figure, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def verdict_slo(verdict: Verdict) -> metrics.SloTargets | None:
    """The SLO the verdict judged under (its policy, as the stack spells it)."""
    slo = verdict.policy.get("slo") if verdict.policy else None
    if not isinstance(slo, dict):
        return None
    get = lambda key: slo.get(key, slo.get(key.replace("-", "_")))  # noqa: E731
    return metrics.SloTargets(ttft_ms=get("ttft-ms"), tpot_ms=get("tpot-ms"), itl_ms=get("itl-ms"),
                              itl_quantile=get("itl-quantile") or 0.99)
