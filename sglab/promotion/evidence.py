"""What promotion checks before it writes anything: a table of named checks (`EVIDENCE_CHECKS` here, the write's
own in sglab/promotion/promote.py), run in order on one `Case`; the first that fails refuses the promotion with its
name, its reason and its fix, and nothing is written. docs/promotion.md's table is generated from them
(`python -m sglab.promotion.promote`).

The result must be what it claims: sealed at bench time and unchanged since (sglab/results/integrity.py),
with its request samples, measured on the stack's own servers (an interactive run: sglab/report/provenance.py),
launched with exactly the commands the stack gives, and judged under the policy recorded with it, which
the stack's policy may tighten but never loosen. Confounds and the plan consistency of the result are
blockers of the verdict itself (sglab/analysis/checks.py). On a machine with a result key, a plain SHA-256
seal (which anyone can recompute after rewriting a result) is evidence only as the cluster's record or on
an explicit, logged opt-in (`seal_strength`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from sglab.analysis.checks import policy_weakenings
from sglab.analysis.nodes import BALANCED, PARALLEL_NOTE, design_of
from sglab.analysis.samples import comparison_arms
from sglab.analysis.verdict import Verdict, judge, policy_of, target_gate_refusal
from sglab.config.arms import baseline_arm, candidate_arm, confounds
from sglab.config.loader import LoadedStack, load_stack
from sglab.config.policy import PromotionPolicy
from sglab.core.errors import ConfigError
from sglab.core.paths import stack_path
from sglab.report.provenance import real_evidence_fix  # the reports name the same steps
from sglab.results import integrity
from sglab.results.pull import PROVENANCE_FILE, pulled_provenance
from sglab.results.store import latest_complete, load_result, results_root
from sglab.schema.records import Confound
from sglab.schema.result import RunResult
from sglab.schema.verdict import Check


class PromotionRefused(Exception):
    """Why a promotion cannot happen and what would fix it; the CLI prints both and exits 2. `check` names the
    entry of the checks' table that refused (set by `run_checks`)."""

    def __init__(self, why: str, fix: str, check: str | None = None):
        self.why = why
        self.fix = fix
        self.check = check
        super().__init__(f"{why}\n  fix: {fix}")

    def as_check(self) -> Check:
        return Check(name=self.check or "promotion", ok=False, detail=self.why, fix=self.fix)


@dataclass
class Case:
    """One promotion, from its arguments to the write: what the checks read, and what each leaves for the ones
    after it (the evidence found, the stack as the evidence's arm, the target loaded, the verdict, the seal)."""

    stack: str
    target: str
    root: Path | None  # None: the stacks directory the command line uses (sglab.core.paths.stacks_dir)
    results_base: Path | None
    result_path: Path | None
    accept_unkeyed_seal: bool
    source: LoadedStack
    run_dir: Path = field(init=False)
    result: RunResult = field(init=False)
    target_stack: LoadedStack = field(init=False)
    recorded_policy: PromotionPolicy = field(init=False)
    verdict: Verdict = field(init=False)
    producer: dict[str, Any] = field(default_factory=dict)
    seal: dict[str, Any] = field(default_factory=dict)
    before: str = ""  # the target file as the write found it (promote.py's checks)
    after: str = ""
    promoted_stack: LoadedStack = field(init=False)


@dataclass(frozen=True)
class PromotionCheck:
    """One entry of the table: its name, when it refuses and what its fix says (docs/promotion.md's row), and the
    check itself, which returns what it found (the passing Check's detail) or raises PromotionRefused."""

    name: str
    refused_when: str
    fix_says: str
    run: Callable[[Case], str]


def run_checks(case: Case, checks: tuple[PromotionCheck, ...]) -> list[Check]:
    """Every check in order; the first refusal is raised with its check's name, else the passed checks."""
    passed = []
    for check in checks:
        try:
            detail = check.run(case)
        except PromotionRefused as refused:
            refused.check = check.name
            raise
        passed.append(Check(name=check.name, ok=True, detail=detail))
    return passed


def _rerun(stack: str) -> str:
    return f"re-run the benchmark (`sglab bench --stack {stack}`) with this sglab, then promote that run"


def stack_service_urls(source: LoadedStack) -> dict[str, str]:
    """The in-cluster URLs of the stack's arms (what an in-cluster interactive run must have measured)."""
    from sglab.deploy.naming import arm_url

    config = source.config
    return {role: arm_url(config, role, config.server.port) for role in ("baseline", "candidate")}


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and a.samefile(b))
    except OSError:
        return False


def target(case: Case) -> str:
    stack, target_name, root = case.stack, case.target, case.root
    if target_name == stack or _same_file(stack_path(target_name, root), stack_path(stack, root)):
        names = (stack_path(target_name, root).name, stack_path(stack, root).name)
        same = "" if target_name == stack else f" ({names[0]} is {names[1]})"
        raise PromotionRefused(f"the target stack '{target_name}' is the stack being promoted{same}",
                               "promote into another stack, e.g. --to production")
    return f"into {target_name}"


def _check_stack(stack: str, result: RunResult, where: Path) -> None:
    if result.stack != stack:
        raise PromotionRefused(f"{where} is a result of stack '{result.stack}', not '{stack}'",
                               f"pass a result of {stack}, or promote --stack {result.stack}")


def evidence(case: Case) -> str:
    stack, result_path = case.stack, case.result_path
    if result_path is not None:
        result = load_result(result_path)
        _check_stack(stack, result, result_path)
        if not result.complete:
            raise PromotionRefused(f"{result_path} is an incomplete run ({result.incomplete_reason or 'no reason'})",
                                   f"run `sglab bench --stack {stack}` to completion")
        case.run_dir, case.result = (result_path if result_path.is_dir() else result_path.parent), result
    else:
        found = latest_complete(stack, case.results_base)
        if found is None:
            where = (case.results_base or results_root()) / stack
            raise PromotionRefused(f"no complete A/B run of stack '{stack}' under {where}",
                                   f"run `sglab bench --stack {stack}` first")
        _check_stack(stack, found[1], found[0])  # a run copied into this stack's directory is not its run
        case.run_dir, case.result = found
    return f"run {case.result.run_id} ({case.run_dir})"


def sweep_arm(case: Case) -> str:
    """A sweep's confirmation is evidence for the arm it confirms (sglab/sweep/): the stack as that arm."""
    if case.result.sweep is None:
        return "the stack's own candidate"
    from sglab.sweep.confirm import confirmed_source

    source, refusal = confirmed_source(case.source, case.result, explicit=case.result_path is not None)
    if refusal is not None or source is None:
        raise PromotionRefused(*(refusal or ("no arm confirmed", "promote a sweep's confirmation run")))
    case.source = source
    return f"sweep arm {case.result.sweep.arm.name} of sweep {case.result.sweep.sweep_run_id}"


def kind(case: Case) -> str:
    result = case.result
    if result.kind not in ("ab", "interactive"):
        raise PromotionRefused(f"run {result.run_id} is a '{result.kind}' run; only A/B runs are evidence",
                               f"run `sglab bench --stack {case.stack}` (without --aa/--attribute)")
    return result.kind


def provenance(case: Case) -> str:
    result = case.result
    if result.kind != "interactive":
        return "measured by sglab bench"
    from sglab.report.provenance import refusal

    found = refusal(result, stack_service_urls(case.source) if result.target.kind == "in-cluster" else None)
    if found is not None:
        raise PromotionRefused(found.problem, found.fix)
    return "an interactive run on the stack's servers"


def integrity_check(case: Case) -> str:
    problem = integrity.verify(case.result)
    if problem is not None:
        raise PromotionRefused(f"run {case.result.run_id} cannot be trusted as evidence: {problem}",
                               _rerun(case.stack))
    return f"sealed ({case.result.integrity.algorithm if case.result.integrity else '?'}), unchanged"


def samples(case: Case) -> str:
    bare = [lv.concurrency for lv in case.result.levels if lv.rounds and not lv.requests]
    if bare:
        raise PromotionRefused(f"run {case.result.run_id} holds no request samples at level(s) {bare}, so its round "
                               "counts cannot be checked against the requests sent", _rerun(case.stack))
    return "every measured level holds its requests"


def recorded_policy(case: Case) -> str:
    result = case.result
    if result.policy is None:
        raise PromotionRefused(f"run {result.run_id} records no promotion policy, so what it was judged under is "
                               "unknown", _rerun(case.stack))
    try:
        case.recorded_policy = policy_of(result)
    except ConfigError as exc:
        raise PromotionRefused(f"run {result.run_id} records an invalid policy: {exc}", _rerun(case.stack)) from None
    return "recorded with the run"


def sequence(case: Case) -> str:
    """A continued sequence: its earlier runs, verified again (sglab/analysis/accumulate.py)."""
    from sglab.analysis.accumulate import recheck

    if (problem := recheck(case.result, case.results_base, case.recorded_policy)) is not None:
        raise PromotionRefused(f"run {case.result.run_id} continues a sequence whose {problem}",
                               f"restore that run, or re-run `sglab bench --stack {case.stack} --fresh-sequence` (a "
                               "new sequence, recorded as such)")
    return "its earlier runs verified again, where it continues some"


def crossover_periods(case: Case) -> str:
    """A crossover across two URL runs: its period 1, verified again (sglab/bench/crossover.py)."""
    from sglab.bench.crossover import check_joined

    if (problem := check_joined(case.result, case.results_base)) is not None:
        raise PromotionRefused(f"run {case.result.run_id} is period 2 of a crossover whose {problem}",
                               f"restore that run, or measure both periods again (`sglab bench --stack {case.stack}`, "
                               "then `--crossover-of` that run with the machines swapped)")
    return "period 1 verified again, where it joins one"


def target_file(case: Case) -> str:
    try:
        case.target_stack = load_stack(case.target, case.root)
    except ConfigError as exc:
        raise PromotionRefused(f"the target stack is not usable: {exc}",
                               f"create or fix {stack_path(case.target, case.root)} (see "
                               "stacks/Pulumi.production.yaml)") from None
    return str(case.target_stack.path.name)


def producer(case: Case) -> str:
    """The evidence was produced by what the target runs: simulator evidence only into a simulator stack that
    requests no GPUs (within the simulator's faithful time scales), real-server evidence only into an SGLang
    stack, and the target's backend is the benchmarked stack's. Keeps the producer for the log."""
    from sglab.analysis.provenance import producer_of
    from sglab.sglang.sim_knobs import time_scale_problem

    source, result, target_stack = case.source, case.result, case.target_stack
    found = producer_of(result)
    run, backend, name = result.run_id, target_stack.config.backend, target_stack.name
    if backend != source.config.backend:
        raise PromotionRefused(
            f"the {name} stack runs backend {backend} ({target_stack.path.name}: sglab:backend), the benchmarked "
            f"stack '{source.name}' backend {source.config.backend}: its servers would not run what was benchmarked",
            f"promote into a stack of backend {source.config.backend}, or restore sglab:backend in "
            f"{target_stack.path.name}")
    if backend == "sglang" and found.kind != "sglang":
        what = (f"comes from simulators, not from GPU servers: {found.describe()}, whose speed is a timing "
                "model" if found.kind == "simulator" else f"does not record what served it ({found.describe()}), "
                "so nothing shows it was measured on real SGLang servers")
        raise PromotionRefused(f"run {run} {what}; the {name} stack runs SGLang on GPUs, and only evidence "
                               "measured on SGLang servers can change it", real_evidence_fix(source.name))
    if backend == "sim":
        if found.kind != "simulator":
            raise PromotionRefused(f"run {run} was produced by {found.describe()}; the {name} stack runs sglab's "
                                   "simulator (sglab:backend: sim), which that evidence says nothing about",
                                   f"benchmark stack '{source.name}' with `sglab bench --stack {source.name}`")
        gpus = target_stack.config.placement.gpus_per_node
        if gpus:
            raise PromotionRefused(f"the {name} stack requests {gpus} GPUs per node (placement.gpus-per-node), so it "
                                   "is a GPU config whatever its backend, and simulator evidence never changes one",
                                   real_evidence_fix(source.name))
        closed = (result.loadgen.profile or "concurrency") == "concurrency" and result.levels
        streams = -(-max(lv.concurrency for lv in result.levels) // max(1, result.loadgen.workers)) if closed else None
        problem = time_scale_problem(found.time_scale, streams) if found.time_scale is not None else None
        if problem is not None:
            raise PromotionRefused(f"run {run} ran the simulators at time scale {found.time_scale:g}: {problem}",
                                   f"re-run `sglab bench --stack {source.name}` within that range")
    case.producer = {"kind": found.kind, "time_scale": found.time_scale, "versions": list(found.versions),
                     "why": found.why}
    return found.describe()


def design(case: Case) -> str:
    """Where the target's policy asks for a node-balanced design (policy.design crossover or switchback), the
    evidence must have been measured in one: read from its rounds' periods and nodes at the levels the target
    gates (sglab/analysis/nodes.py), never from what the result says of itself. Parallel evidence's gain
    includes any difference between the two nodes, which a same-SKU node alone makes up to 8%."""
    source, result, target = case.source, case.result, case.target_stack
    wanted = target.config.policy.design
    if wanted not in BALANCED:
        return f"{target.name} accepts any design (policy.design: {wanted})"
    arms = comparison_arms(result)
    gated = [lv for lv in result.levels if lv.concurrency in target.config.policy.levels] or result.levels
    found = sorted({design_of(lv, arms) for lv in gated})
    if found and all(d in BALANCED for d in found):
        return " and ".join(found)
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


def stale_evidence(case: Case) -> str:
    source, result = case.source, case.result
    benchmarked = {name: result.config_hash.get(name) for name in ("baseline", "candidate")}
    now = {"baseline": baseline_arm(source.config).config_hash, "candidate": candidate_arm(source.config).config_hash}
    stale = [name for name in now if benchmarked[name] != now[name]]
    if stale:
        raise PromotionRefused(
            f"stale evidence: the {' and '.join(stale)} arm of stack '{case.stack}' changed since run {result.run_id} "
            f"(config hash {', '.join(f'{n} {str(benchmarked[n])[:12]} -> {now[n][:12]}' for n in stale)})",
            f"re-run `sglab bench --stack {case.stack}` so the evidence matches the config, then promote")
    return "both arms hash to what was benchmarked"


def launch_commands(case: Case) -> str:
    """The launch commands recorded in the result are the stack's (its config hashes already match)."""
    for arm in (baseline_arm(case.source.config), candidate_arm(case.source.config)):
        info = case.result.arm(arm.name)
        if info is None or info.launch_command != arm.launch_command:
            raise PromotionRefused(
                f"the recorded launch command of the {arm.name} arm of run {case.result.run_id} is not the one stack "
                f"'{case.source.name}' gives, though its config hash is (the result was edited)",
                _rerun(case.source.name))
    return "as the stack gives them"


def weaker_policy(case: Case) -> str:
    weaker = policy_weakenings(case.recorded_policy, case.source.config.policy)
    if weaker:
        keys = ", ".join(w.split(":")[0].removeprefix("policy.") for w in weaker)
        raise PromotionRefused(
            f"the stack's policy is weaker than the one run {case.result.run_id} was judged under: "
            + "; ".join(weaker),
            f"restore {keys} under sglab:policy in {case.source.path.name} (a policy cannot be loosened after the "
            f"bench), or re-run `sglab bench --stack {case.stack}` so the new policy is recorded with the run")
    return "the stack's is as strict as the recorded one"


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


def verdict(case: Case) -> str:
    """The verdict recomputed under the recorded policy, and under the stack's where it is stricter, with the
    confounds taken from the stack's arms (they hash to what was benchmarked; the file's own list is not read)."""
    judged = case.result.model_copy(update={"confounds": [Confound(**c.as_dict())
                                                          for c in confounds(case.source.config)]})
    case.verdict = judge(judged, case.recorded_policy)
    refuse_on_verdict(case.stack, case.verdict)
    now = case.source.config.policy
    if now.model_dump() != case.recorded_policy.model_dump():
        refuse_on_verdict(case.stack, judge(judged, now),
                          under=" under the stack's policy (stricter than the recorded one)")
    return case.verdict.sentence


def seal_strength(case: Case) -> str:
    """How the result's (already verified) seal is accepted, kept for the log; refuses a plain SHA-256 seal on a
    machine that holds a key unless it is the cluster's record, still as pulled, or --accept-unkeyed-seal."""
    case.seal = _seal(case.stack, case.result, _result_file(case), accept_unkeyed=case.accept_unkeyed_seal)
    return case.seal["accepted"]


def _result_file(case: Case) -> Path:
    from sglab.results.store import RESULT_FILE

    path = case.result_path
    return path if path is not None and path.is_file() else case.run_dir / RESULT_FILE


def _seal(stack: str, result: RunResult, result_file: Path, *, accept_unkeyed: bool) -> dict[str, Any]:
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


def target_gate(case: Case) -> str:
    """The target's own gate, on the same evidence (sglab/analysis/verdict.py)."""
    if (refusal := target_gate_refusal(case.result, case.target_stack, case.stack)) is not None:
        raise PromotionRefused(*refusal)
    return f"passes {case.target_stack.name}'s gate"


# The checks before anything is written, in order (docs/promotion.md's table is generated from these and
# promote.py's WRITE_CHECKS: `python -m sglab.promotion.promote`).
EVIDENCE_CHECKS: tuple[PromotionCheck, ...] = (
    PromotionCheck("target",
                   "`--to` names the stack being promoted, or a file that is the source's under another name (a "
                   "symlink, a hard link, another spelling of the path: compared as resolved paths and inodes)",
                   "promote into another stack",
                   target),
    PromotionCheck("evidence",
                   "no complete run of the stack under `results/<stack>/` (`store.latest_complete`: kinds `ab`, "
                   "`interactive`), or the run found there or given with `--result` is incomplete or of another "
                   "stack (`result.stack`: a run copied into this stack's directory is still the other stack's)",
                   "run `sglab bench --stack NAME`",
                   evidence),
    PromotionCheck("sweep arm",
                   "the result is a sweep's confirmation (`result.sweep`) not named with `--result`, or its arm "
                   "is not the stack's grid's arm of that name as the grid is now (sglab/sweep/confirm.py)",
                   "promote it explicitly with `--result`, or re-run the sweep's confirmation",
                   sweep_arm),
    PromotionCheck("kind",
                   "the result is an `aa` or `attribute` run",
                   "run a plain A/B benchmark",
                   kind),
    PromotionCheck("provenance",
                   "an interactive run whose arm URLs came from the web-UI form, do not say where they came "
                   "from, or (in the cluster) are not the stack's Services (`sglab/report/provenance.py`)",
                   "measure with `sglab ui --stack NAME` without editing the URLs, or `sglab bench`",
                   provenance),
    PromotionCheck("integrity",
                   "the result has no integrity record (written before sglab recorded one), its digest/HMAC does"
                   " not match its content, or it is sealed with a key this machine does not hold",
                   "re-run the benchmark with this sglab",
                   integrity_check),
    PromotionCheck("samples",
                   "a level holds rounds but no request samples (its counts could not be checked)",
                   "re-run the benchmark",
                   samples),
    PromotionCheck("recorded policy",
                   "the result records no policy, or one that is not valid",
                   "re-run the benchmark",
                   recorded_policy),
    PromotionCheck("sequence",
                   "the run continues a sequence (a re-run of the same pair) and an earlier run of it is "
                   "missing, no longer sealed as recorded, recomputes to other log-ratios, reused a load seed, "
                   "or ran on other machines (sglab/analysis/accumulate.py)",
                   "restore that run, or re-run with `--fresh-sequence`",
                   sequence),
    PromotionCheck("crossover periods",
                   "the run is period 2 of a crossover across two URL runs and its period 1 is missing, no "
                   "longer sealed as recorded, or not exactly the rounds joined (sglab/bench/crossover.py)",
                   "restore that run, or measure both periods again",
                   crossover_periods),
    PromotionCheck("target file",
                   "`stacks/Pulumi.<target>.yaml` is missing or invalid",
                   "create or fix it",
                   target_file),
    PromotionCheck("producer",
                   "the evidence was not produced by what the target runs (below, \"What produced the evidence\"):"
                   " simulator evidence for an SGLang target, real-server or unknown evidence for a simulator "
                   "target, a simulator target that requests GPUs, a target whose `sglab:backend` is not the "
                   "source's, or simulators run outside the faithful time scales",
                   "measure the real servers (`pulumi up --stack NAME`, then `sglab results pull` and `sglab "
                   "promote`; or `sglab bench --stack NAME --baseline-url ... --candidate-url ...`)",
                   producer),
    PromotionCheck("design",
                   "the target's `sglab:policy.design` asks for a node-balanced design (`crossover` or "
                   "`switchback`; production asks for `crossover`) and the evidence's rounds, at the levels the "
                   "target gates, were measured in parallel (no period recorded: the gain includes any "
                   "difference between the two nodes). Read from the rounds' periods and nodes "
                   "(`sglab/analysis/nodes.py`), never from the result's own record; a crossover stopped after "
                   "period 1 has no estimate and fails the verdict (docs/verdict.md, \"Same conditions on real "
                   "nodes\")",
                   "set `sglab:policy.design: crossover` in the source stack, re-run `sglab bench --stack NAME` "
                   "and promote that run",
                   design),
    PromotionCheck("stale evidence",
                   "`baseline_arm(stack).config_hash` or `candidate_arm(stack).config_hash` now differs from the"
                   " hashes recorded in `result.config_hash`",
                   "re-run the benchmark so evidence matches config",
                   stale_evidence),
    PromotionCheck("launch commands",
                   "an arm's recorded `launch_command` is not the one the stack gives (the hashes match, so the "
                   "file was edited)",
                   "re-run the benchmark",
                   launch_commands),
    PromotionCheck("weaker policy",
                   "the stack's `sglab:policy` is now laxer than the recorded one in any key: lower `min-gain`, "
                   "`confidence`, `min-rounds`, `min-requests`; higher `error-cap`, `output-parity-margin`, "
                   "`ttft-p99-max-increase`, `itl-p99-max-increase` (or a cap removed); a gated level dropped; "
                   "another `metric` or `method`. The message names each key",
                   "restore those keys, or re-run so the new policy is recorded",
                   weaker_policy),
    PromotionCheck("verdict",
                   "`judge(result, <recorded policy>)` is not `promote` (the verdict stored in the result is "
                   "never read); where the stack's policy is stricter, `judge(result, <stack policy>)` must be "
                   "`promote` too",
                   "the blockers' own fixes; for `reject`, change the candidate; for `inconclusive`, the number "
                   "of extra rounds that would likely decide",
                   verdict),
    PromotionCheck("seal strength",
                   "on a machine that holds a result key, the result is sealed with a plain `sha256` digest "
                   "(anyone can recompute one after rewriting a result), unless it is the cluster's record "
                   "(pulled by `sglab results pull`, whose signed `provenance.json` still matches result.json) "
                   "or `--accept-unkeyed-seal` is given. The message names the file, the reason and, for a "
                   "pulled file, that it changed since the pull",
                   "re-run `sglab bench` on this machine; pull the Job's run afresh; or `--accept-unkeyed-seal` "
                   "(printed, logged)",
                   seal_strength),
    PromotionCheck("target gate",
                   "the same evidence, judged under the target stack's own policy (its levels, `sglab:traffic`, "
                   "min-gain), is not `promote`",
                   "measure the levels the target gates on, or tune the candidate for the load it loses at",
                   target_gate),
)
