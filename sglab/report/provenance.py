"""The evidence's provenance in the reports: output parity (a verdict line and an HTML table) and what served
each arm (console lines for `sglab compare`, rows of the HTML report's run table).

Everything shown here is recomputed or read from the result; the texts a server reported (its version, an
image name, node labels) are untrusted, so console lines go through sglab.core.untrusted.printable and the HTML
report escapes them (sglab/report/html.py).
"""

from __future__ import annotations

from sglab.analysis.parity import parity_phrase
from sglab.analysis.provenance import machine_facts, producer_of
from sglab.schema.result import ArmMachine, RunResult
from sglab.schema.verdict import OutputParity
from sglab.core.untrusted import printable


def parity_line(parity: OutputParity | None) -> str | None:
    """One line of the verdict table; None when the run recorded no temperature-0 answers (older results)."""
    if parity is None:
        return None
    return (f"output parity (temperature 0, same request): candidate = baseline in {parity_phrase(parity.candidate)}; "
            f"A/A, the baseline against itself in other rounds: {parity_phrase(parity.aa)}")


def machine_text(machine: ArmMachine | None) -> str:
    """What served one arm, in one line."""
    if machine is None:
        return "not recorded (a result written before sglab recorded it)"
    parts = []
    if machine.producer == "simulator":
        scale = f" at time scale {machine.time_scale:g}" if machine.time_scale is not None else ""
        parts.append(f"sglab simulator{scale}")
    elif machine.producer == "sglang":
        parts.append("SGLang")
    if machine.server_version:
        parts.append(f"version {machine.server_version}")
    if machine.image:
        digest = (f"@{machine.image_digest}" if machine.image_digest and machine.image_digest not in machine.image
                  else "")
        parts.append(f"image {machine.image}{digest} ({machine.image_source or '?'})")
    if machine.node_name:
        parts.append(f"node {machine.node_name}" + (f" (pod {machine.pod})" if machine.pod else ""))
    facts = machine_facts(machine)
    for key in ("GPU product", "GPU count", "GPU driver", "CUDA runtime"):
        if key in facts:
            parts.append(f"{key} {facts[key]}")
    parts += [f"note: {n}" for n in machine.notes]
    return ", ".join(parts) or "nothing recorded"


def machine_lines(result: RunResult) -> list[str]:
    """`produced by: ...` and one `machine <arm>: ...` line per arm, for the console."""
    lines = [f"produced by: {printable(producer_of(result).describe())}"]
    lines += [f"machine {printable(a.name)}: {printable(machine_text(a.machine))}" for a in result.arms]
    return lines


def parity_rows(parity: OutputParity | None) -> list[tuple[int, str, str]]:
    """(level, candidate vs baseline, A/A) per level for the HTML report."""
    if parity is None:
        return []
    return [(lv.concurrency, parity_phrase(lv.candidate), parity_phrase(lv.aa)) for lv in parity.levels]
