"""The evidence's provenance in the reports: output parity (a verdict line and an HTML table), what served
each arm (console lines for `sglab bench` and `sglab compare`, rows of the HTML report's run table), and the
simulator-evidence label every output carries when simulators produced the numbers (a green PROMOTE at 3x real
time reads as promotable; it is not, for a GPU stack).

Everything shown here is recomputed or read from the result; the texts a server reported (its version, an
image name, node labels) are untrusted, so console lines go through sglab.core.untrusted.printable and the HTML
report escapes them (sglab/report/html.py).

It also holds the check promotion makes before trusting an interactive run (`refusal`): an interactive run's arm
URLs come from wherever its Locust process got them, and only two sources are the stack's own: URLs that
`sglab ui` started or was given (fixed for the session, `urls_source` "sglab"), and, in the cluster, the stack's
Services (kind "in-cluster", compared with `stack_urls`). URLs typed into the web-UI form, or a file that does
not say where its URLs came from, are not evidence.
"""

from __future__ import annotations

from dataclasses import dataclass

from sglab.analysis.provenance import Producer, machine_facts, parity_phrase, producer_of
from sglab.analysis.verdict import next_step
from sglab.schema.result import ArmMachine, RunResult
from sglab.schema.verdict import OutputParity, Verdict


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
    lines = [f"produced by: {producer_of(result).describe()}"]
    lines += [f"machine {a.name}: {machine_text(a.machine)}" for a in result.arms]
    lines += [f"unverified {a.name}: {unverified_text(a.unverified)}" for a in result.arms if a.unverified]
    return lines


def unverified_text(settings: list[str]) -> str:
    return (f"{', '.join(settings)} (the server does not report its environment, as SGLang does not: the stack's "
            "values are trusted, not checked)")


def parity_rows(parity: OutputParity | None) -> list[tuple[int, str, str]]:
    """(level, candidate vs baseline, A/A) per level for the HTML report."""
    if parity is None:
        return []
    return [(lv.concurrency, parity_phrase(lv.candidate), parity_phrase(lv.aa)) for lv in parity.levels]


SIMULATOR_EVIDENCE = "simulator evidence: not promotable to GPU stacks"


def simulator_producer(result: RunResult) -> Producer | None:
    """The producer when simulators produced the numbers (target sim, or arms that reported themselves as the
    simulator); None for real or unknown servers."""
    producer = producer_of(result)
    return producer if producer.kind == "simulator" else None


def time_scale_text(producer: Producer) -> str:
    """What the simulator's time scale does to the numbers shown."""
    scale = producer.time_scale if producer.time_scale is not None else 1.0
    speed = "real time" if scale == 1 else f"{scale:g}x real time"
    return (f"tok/s and ms are at the simulator's time scale {scale:g} ({speed}); gains, accept lengths and "
            "break-even accept lengths are ratios, unscaled")


def evidence_line(producer: Producer) -> str:
    """The console's line on simulator numbers (above `verdict:`)."""
    return f"simulator evidence, not promotable to GPU stacks: {time_scale_text(producer)}"


def real_evidence_fix(stack: str) -> str:
    """How to measure a stack on the servers it declares (what a GPU target needs as evidence)."""
    return (f"measure the real servers: `pulumi up --stack {stack}` runs the benchmark Job against both arms in the "
            f"cluster, then `sglab results pull --stack {stack}` and `sglab promote --stack {stack}`; or, with both "
            f"arms already serving, `sglab bench --stack {stack} --baseline-url http://BASELINE:30000 "
            f"--candidate-url http://CANDIDATE:30000`")


def evidence_next_step(result: RunResult, verdict: Verdict) -> str | None:
    """The `next:` command. For simulator evidence a promotion is refused unless the stack's promotion target runs
    the simulator on no GPUs, so anywhere else it names how to get real evidence instead."""
    step = next_step(verdict)
    if step is None or simulator_producer(result) is None or not step.startswith("sglab promote"):
        return step
    return step if _target_runs_simulators(result.stack) else real_evidence_fix(result.stack)


def _target_runs_simulators(stack: str) -> bool:
    """Whether the stack's promotion target (sglab:promote-to) is a simulator stack that requests no GPUs: the
    only kind simulator evidence can change (sglab/promotion/evidence.py check_producer). Unreadable: no."""
    from sglab.config.loader import load_stack
    from sglab.core.errors import ConfigError

    try:
        target = load_stack(load_stack(stack).config.promote_to).config
    except ConfigError:
        return False
    return target.backend == "sim" and not target.placement.gpus_per_node


def evidence_record(result: RunResult) -> dict[str, object]:
    """The `evidence` field of the JSON output: who produced the numbers and at which time scale."""
    producer = producer_of(result)
    simulated = producer.kind == "simulator"
    return {"producer": producer.kind, "described": producer.describe(),
            "time_scale": producer.time_scale if simulated else None,
            "promotable_to_gpu_stacks": producer.kind == "sglang",
            "rates": time_scale_text(producer) if simulated else "measured on the servers, real time",
            "label": SIMULATOR_EVIDENCE if simulated else None}


def label_console(lines: list[str], result: RunResult, verdict: Verdict) -> list[str]:
    """The console table labelled for simulator evidence: the last line `verdict: <outcome> (simulator evidence:
    ...)` (still grep-able by its prefix), a line on the time scale, and a `next:` that names real evidence."""
    producer = simulator_producer(result)
    if producer is None:
        return lines
    out = list(lines)
    step = evidence_next_step(result, verdict)
    out = [f"next: {step}" if line.startswith("next: ") and step else line for line in out]
    last = len(out) - 1 if out and out[-1].startswith("verdict: ") else len(out)
    out.insert(last, evidence_line(producer))
    if last < len(out) - 1:
        out[-1] = f"{out[-1]} ({SIMULATOR_EVIDENCE})"
    return out


# Whether an interactive run measured the stack's servers (promotion's check).
@dataclass(frozen=True)
class Refusal:
    problem: str
    fix: str


def refusal(result: RunResult, stack_urls: dict[str, str] | None = None) -> Refusal | None:
    """Why `result` cannot be promotion evidence because of its target, or None. Non-interactive runs pass."""
    if result.kind != "interactive":
        return None
    target, run, stack = result.target, result.run_id, result.stack
    rerun = (f"measure again with `sglab ui --stack {stack}` (do not edit the arm URLs), or "
             f"`sglab bench --stack {stack}`")
    urls = ", ".join(f"{arm} {url}" for arm, url in sorted(target.urls.items())) or "none recorded"
    if target.urls_source is None:
        return Refusal(f"interactive run {run} does not record where its arm URLs came from ({urls}); it was "
                       f"written before sglab recorded it, and its URLs may have been changed in the web-UI form",
                       rerun)
    if target.urls_source == "form":
        return Refusal(f"the arm URLs of interactive run {run} were changed in the web-UI form ({urls}); "
                       f"they are not the stack's servers", rerun)
    if target.kind == "in-cluster":
        if not stack_urls:
            return Refusal(f"interactive run {run} measured in-cluster URLs ({urls}) but the stack's service URLs "
                           f"were not given to compare them with", "pass the stack's service URLs to the check")
        differ = [f"{arm} measured {target.urls.get(arm) or 'nothing'}, the stack's service is {url}"
                  for arm, url in sorted(stack_urls.items()) if target.urls.get(arm) != url]
        if differ:
            return Refusal(f"interactive run {run} did not measure the stack's servers: {'; '.join(differ)}", rerun)
    return None
