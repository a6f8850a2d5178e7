"""What promotion checks about its evidence before writing anything (sglab/promotion/promote.py calls these).

The result must be what it claims: sealed at bench time and unchanged since (sglab/results/integrity.py),
with its request samples, measured on the stack's own servers (an interactive run: sglab/report/provenance.py),
launched with exactly the commands the stack gives, and judged under the policy recorded with it, which
the stack's policy may tighten but never loosen. Confounds and the plan consistency of the result are
blockers of the verdict itself (sglab/analysis/checks.py). On a machine with a result key, a plain SHA-256
seal (which anyone can recompute after rewriting a result) is evidence only as the cluster's record or on
an explicit, logged opt-in (`check_seal`).
"""

from __future__ import annotations

from sglab.analysis.checks import policy_weakenings
from sglab.analysis.nodes import BALANCED, PARALLEL_NOTE, design_of
from sglab.analysis.samples import comparison_arms
from sglab.analysis.verdict import Verdict, judge, policy_of
from sglab.config.arms import baseline_arm, candidate_arm
from sglab.core.errors import ConfigError
from sglab.config.loader import LoadedStack
from pathlib import Path
from typing import Any

from sglab.report.provenance import real_evidence_fix  # the reports name the same steps
from sglab.results import integrity
from sglab.results.pull import PROVENANCE_FILE, pulled_provenance
from sglab.schema.result import RunResult


class PromotionRefused(Exception):
    """Why a promotion cannot happen and what would fix it; the CLI prints both and exits 2."""

    def __init__(self, why: str, fix: str):
        self.why = why
        self.fix = fix
        super().__init__(f"{why}\n  fix: {fix}")


def _rerun(stack: str) -> str:
    return f"re-run the benchmark (`sglab bench --stack {stack}`) with this sglab, then promote that run"


def stack_service_urls(source: LoadedStack) -> dict[str, str]:
    """The in-cluster URLs of the stack's arms (what an in-cluster interactive run must have measured)."""
    from sglab.deploy.naming import arm_url

    config = source.config
    return {role: arm_url(config, role, config.server.port) for role in ("baseline", "candidate")}


def check_evidence(source: LoadedStack, result: RunResult) -> None:
    """The result is sealed and unchanged, holds its samples, records its policy, and measured the stack."""
    stack, run = source.name, result.run_id
    if result.kind == "interactive":
        from sglab.report.provenance import refusal

        found = refusal(result, stack_service_urls(source) if result.target.kind == "in-cluster" else None)
        if found is not None:
            raise PromotionRefused(found.problem, found.fix)
    problem = integrity.verify(result)
    if problem is not None:
        raise PromotionRefused(f"run {run} cannot be trusted as evidence: {problem}", _rerun(stack))
    bare = [lv.concurrency for lv in result.levels if lv.rounds and not lv.requests]
    if bare:
        raise PromotionRefused(f"run {run} holds no request samples at level(s) {bare}, so its round counts "
                               "cannot be checked against the requests sent", _rerun(stack))
    if result.policy is None:
        raise PromotionRefused(f"run {run} records no promotion policy, so what it was judged under is unknown",
                               _rerun(stack))


def check_seal(stack: str, result: RunResult, result_file: Path, *, accept_unkeyed: bool = False) -> dict[str, Any]:
    """How the result's (already verified) seal is accepted, for the log; refuses a plain SHA-256 seal on a
    machine that holds a key unless it is the cluster's record, still as pulled, or `accept_unkeyed`."""
    record = result.integrity
    if record is not None and record.algorithm == "hmac-sha256":
        return {"accepted": "hmac"}
    key = integrity.machine_key()
    if key is None:  # nothing here could have sealed it better
        return {"accepted": "no-local-key"}
    pulled, problem = pulled_provenance(result_file, result)
    if pulled is not None and problem is None:
        return {"accepted": "cluster-record", **{k: pulled.get(k) for k in ("configmap", "namespace", "context",
                                                                              "pulled_at")}}
    if accept_unkeyed:
        return {"accepted": "unkeyed-opt-in"}
    why = (f"{result_file}: run {result.run_id} is sealed with a plain SHA-256 digest, not an HMAC under this "
           f"machine's result key (key id {integrity.key_id(key)}); anyone who can write results/ can rewrite a "
           "result self-consistently and re-seal it that way")
    if problem is not None:
        why += f", and {problem}"
    raise PromotionRefused(why, (
        f"re-run `sglab bench --stack {stack}` on this machine (sealed with its key); for a run of the "
        f"benchmark Job, `sglab results pull --stack {stack}` it afresh (the pull signs {PROVENANCE_FILE}: the "
        "ConfigMap it came from); or pass --accept-unkeyed-seal to promote it anyway (recorded in "
        "promotions.jsonl with its digest)"))


def check_launch_commands(source: LoadedStack, result: RunResult) -> None:
    """The launch commands recorded in the result are the stack's (its config hashes already match)."""
    for arm in (baseline_arm(source.config), candidate_arm(source.config)):
        info = result.arm(arm.name)
        if info is None or info.launch_command != arm.launch_command:
            raise PromotionRefused(
                f"the recorded launch command of the {arm.name} arm of run {result.run_id} is not the one stack "
                f"'{source.name}' gives, though its config hash is (the result was edited)", _rerun(source.name))


def check_producer(source: LoadedStack, result: RunResult, target: LoadedStack) -> dict[str, Any]:
    """The evidence was produced by what the target runs: simulator evidence only into a simulator stack that
    requests no GPUs (within the simulator's faithful time scales), real-server evidence only into an SGLang
    stack, and the target's backend is the benchmarked stack's. Returns the producer for the log."""
    from sglab.analysis.provenance import producer_of
    from sglab.sglang.sim_knobs import time_scale_problem

    producer = producer_of(result)
    run, backend, name = result.run_id, target.config.backend, target.name
    if backend != source.config.backend:
        raise PromotionRefused(
            f"the {name} stack runs backend {backend} ({target.path.name}: sglab:backend), the benchmarked stack "
            f"'{source.name}' backend {source.config.backend}: its servers would not run what was benchmarked",
            f"promote into a stack of backend {source.config.backend}, or restore sglab:backend in {target.path.name}")
    if backend == "sglang" and producer.kind != "sglang":
        what = (f"comes from simulators, not from GPU servers: {producer.describe()}, whose speed is a timing "
                "model" if producer.kind == "simulator" else f"does not record what served it ({producer.describe()}), "
                "so nothing shows it was measured on real SGLang servers")
        raise PromotionRefused(f"run {run} {what}; the {name} stack runs SGLang on GPUs, and only evidence "
                               "measured on SGLang servers can change it", real_evidence_fix(source.name))
    if backend == "sim":
        if producer.kind != "simulator":
            raise PromotionRefused(f"run {run} was produced by {producer.describe()}; the {name} stack runs sglab's "
                                   "simulator (sglab:backend: sim), which that evidence says nothing about",
                                   f"benchmark stack '{source.name}' with `sglab bench --stack {source.name}`")
        gpus = target.config.placement.gpus_per_node
        if gpus:
            raise PromotionRefused(f"the {name} stack requests {gpus} GPUs per node (placement.gpus-per-node), so it "
                                   "is a GPU config whatever its backend, and simulator evidence never changes one",
                                   real_evidence_fix(source.name))
        closed = (result.loadgen.profile or "concurrency") == "concurrency" and result.levels
        streams = -(-max(lv.concurrency for lv in result.levels) // max(1, result.loadgen.workers)) if closed else None
        problem = time_scale_problem(producer.time_scale, streams) if producer.time_scale is not None else None
        if problem is not None:
            raise PromotionRefused(f"run {run} ran the simulators at time scale {producer.time_scale:g}: {problem}",
                                   f"re-run `sglab bench --stack {source.name}` within that range")
    return {"kind": producer.kind, "time_scale": producer.time_scale, "versions": list(producer.versions),
            "why": producer.why}


def check_design(source: LoadedStack, result: RunResult, target: LoadedStack) -> None:
    """Where the target's policy asks for a node-balanced design (policy.design crossover or switchback), the
    evidence must have been measured in one: read from its rounds' periods and nodes at the levels the target
    gates (sglab/analysis/nodes.py), never from what the result says of itself. Parallel evidence's gain
    includes any difference between the two nodes, which a same-SKU node alone makes up to 8%."""
    wanted = target.config.policy.design
    if wanted not in BALANCED:
        return
    arms = comparison_arms(result)
    gated = [lv for lv in result.levels if lv.concurrency in target.config.policy.levels] or result.levels
    found = sorted({design_of(lv, arms) for lv in gated})
    if found and all(d in BALANCED for d in found):
        return
    measured = " and ".join(found) or "no"
    why = (f"run {result.run_id} measured its arms in a {measured} design, so its gain {PARALLEL_NOTE}; stack "
           f"'{target.name}' asks for a node-balanced design (policy.design: {wanted} in {target.path.name})")
    if result.target.kind == "sim":
        raise PromotionRefused(why, f"set `sglab:policy.design: crossover` in {source.path.name} (the arms swap "
                               f"nodes and the node difference cancels), re-run `sglab bench --stack {source.name}` "
                               "and promote that run")
    if result.target.kind == "in-cluster":
        raise PromotionRefused(why, f"with `sglab:policy.design: crossover` in {source.path.name} the benchmark Job "
                               "swaps the arms' nodes between periods (docs/in-cluster.md, \"Moving the arms between "
                               "nodes\"): `pulumi up` with a new benchmark-job.rerun token and promote that run (if "
                               "the stack asked for it already, the result's design.notes say why the Job could not "
                               "move them)")
    raise PromotionRefused(why, "sglab cannot move servers given by URL, so swap them yourself: serve the baseline "
                           "where the candidate ran and the candidate where the baseline ran, run `sglab bench "
                           f"--stack {source.name} --baseline-url ... --candidate-url ... --crossover-of "
                           f"{result.run_id}`, and promote that run (the two join into a crossover); or measure them "
                           f"with the benchmark Job in the cluster, which swaps their nodes; or, to promote this run, "
                           f"{target.path.name} must accept gains that include the node difference: "
                           "`sglab:policy.design: parallel` there, knowingly")


def refuse_on_verdict(stack: str, verdict: Verdict, under: str = "") -> None:
    if verdict.outcome == "promote":
        return
    if verdict.blockers:
        fix = "; ".join(b.fix for b in verdict.blockers if b.fix) or f"re-run `sglab bench --stack {stack}`"
    elif verdict.outcome == "reject":
        fix = ("the candidate does not beat the baseline by the policy's margin: change the candidate "
               f"(e.g. candidate.speculative) and re-run `sglab bench --stack {stack}`")
    elif verdict.more_rounds:
        fix = (f"measure more: about {verdict.more_rounds} more rounds would likely decide (raise load.rounds) "
               f"and re-run `sglab bench --stack {stack}`")
    else:
        fix = "the gain sits at the policy's minimum; more rounds are unlikely to decide it"
    raise PromotionRefused(f"run {verdict.run_id} does not support promotion{under}: {verdict.sentence}", fix)


def judge_under_policies(source: LoadedStack, result: RunResult) -> Verdict:
    """The verdict under the recorded policy; the stack's policy must not be weaker in any key, and where it
    is stricter the run must pass it too."""
    stack = source.name
    try:
        recorded = policy_of(result)
    except ConfigError as exc:
        raise PromotionRefused(f"run {result.run_id} records an invalid policy: {exc}", _rerun(stack)) from None
    now = source.config.policy
    weaker = policy_weakenings(recorded, now)
    if weaker:
        keys = ", ".join(w.split(":")[0].removeprefix("policy.") for w in weaker)
        raise PromotionRefused(
            f"the stack's policy is weaker than the one run {result.run_id} was judged under: " + "; ".join(weaker),
            f"restore {keys} under sglab:policy in {source.path.name} (a policy cannot be loosened after the "
            f"bench), or re-run `sglab bench --stack {stack}` so the new policy is recorded with the run")
    verdict = judge(result, recorded)
    refuse_on_verdict(stack, verdict)
    if now.model_dump() != recorded.model_dump():
        refuse_on_verdict(stack, judge(result, now), under=" under the stack's policy (stricter than the recorded one)")
    return verdict
