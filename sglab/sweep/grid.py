"""The sweep's grid expanded into candidate arms with SGLang's rules (sglab/sglang/rules.py).

A combination SGLang would refuse or silently change (eagle-topk 1 with num-draft-tokens other than
num-steps + 1, a draft tree too small, --speculative-adaptive where SGLang falls back to static or at a
num-steps outside its tiers) is listed as skipped with the reason, never adjusted. The algorithm is a
factor too (`sweep.speculative-algorithm`): each algorithm takes the shape factors SGLang reads for it
(the EAGLE family all three; NGRAM only num-draft-tokens, its breadth is the stack's ngram block). Each arm is the
stack's candidate with the
combination applied (the NCCL variant on the candidate only, so every arm shares the one baseline),
with a stable name and the config hash of its effective launch args + env.
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, field
from typing import Any

from sglab.config.arms import ArmSpec, baseline_arm, build_arm
from sglab.core.errors import ConfigError
from sglab.config.loader import LoadedStack, load_mapping
from sglab.config.sweep import DEFAULT_VARIANT, STEPS_PLUS_ONE, SweepSpec
from sglab.sglang import rules


QUICK_REASON = "not in sweep.quick-arms (--quick)"


@dataclass(frozen=True)
class SweepArm:
    """One candidate of the grid."""

    name: str
    num_steps: int
    eagle_topk: int
    num_draft_tokens: int
    adaptive: bool
    variant: str
    nccl: dict[str, str]
    arm: ArmSpec  # the candidate server as the sweep runs it (baseline's settings + this combination)
    algorithm: str | None = None  # None: the stack's candidate algorithm
    draft_model_path: str | None = None  # the algorithm's own draft (sweep.draft-model-path)

    @property
    def config_hash(self) -> str:
        return self.arm.config_hash

    def record(self) -> dict[str, Any]:
        """What a result stores to rebuild this arm from the stack (sglab.sweep.confirm.confirmed_source)."""
        record = {"name": self.name, "num_steps": self.num_steps, "eagle_topk": self.eagle_topk,
                  "num_draft_tokens": self.num_draft_tokens, "adaptive": self.adaptive, "variant": self.variant,
                  "nccl": dict(self.nccl), "config_hash": self.config_hash}
        if self.algorithm is not None:
            record["algorithm"] = self.algorithm
            record["draft_model_path"] = self.draft_model_path
        return record


@dataclass(frozen=True)
class SkippedArm:
    name: str
    reason: str


@dataclass
class Grid:
    baseline: ArmSpec
    arms: list[SweepArm] = field(default_factory=list)
    skipped: list[SkippedArm] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def arm(self, name: str) -> SweepArm | None:
        return next((a for a in self.arms if a.name == name), None)


def arm_name(steps: int, topk: int, draft: int, variant: str, adaptive: bool, algorithm: str | None = None) -> str:
    """s2-k1-d3[-variant][-adaptive]; another algorithm than the stack's is a prefix (ngram-d12, standalone-s2-...)."""
    ngram = algorithm is not None and rules.family(algorithm) == "ngram"
    shape = f"d{draft}" if ngram else f"s{steps}-k{topk}-d{draft}"
    return ("" if algorithm is None else f"{algorithm.lower()}-") + shape + \
        ("" if variant == DEFAULT_VARIANT else f"-{variant}") + ("-adaptive" if adaptive else "")


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def arm_stack(loaded: LoadedStack, *, num_steps: int, eagle_topk: int, num_draft_tokens: int, adaptive: bool,
              nccl: dict[str, str], shared_nccl: bool, algorithm: str | None = None,
              draft_model_path: str | None = None) -> LoadedStack:
    """The stack with this combination as its candidate, validated like a stack file.

    shared_nccl False (the sweep): the NCCL variant is a candidate-only setting (candidate.confounds.nccl),
    so the baseline is the stack's. True (the confirmation A/B and its promotion): the variant is in
    sglab:nccl for both arms, so the confirmation measures speculation's own gain, without a confound.
    --speculative-adaptive goes into candidate.speculative.extra-args (SGLang's --speculative-* flags are
    the speculative block, never a confound). `algorithm` (another than the stack's) replaces the
    speculative block's algorithm, with `draft_model_path` where it loads its own draft."""
    raw = copy.deepcopy(_plain(loaded.raw))
    candidate = raw.setdefault("candidate", {})
    speculative = dict(candidate.get("speculative", {}))
    if algorithm is not None and algorithm != speculative.get("algorithm", "EAGLE3"):
        speculative = {k: v for k, v in speculative.items() if k in ("ngram",) and algorithm == "NGRAM"}
        speculative["algorithm"] = algorithm
        if draft_model_path:
            speculative["draft-model-path"] = draft_model_path
    if rules.family(speculative.get("algorithm", "EAGLE3")) == "ngram":
        speculative.pop("num-steps", None)
        speculative.pop("eagle-topk", None)
        speculative["num-draft-tokens"] = num_draft_tokens
    else:
        speculative.update({"num-steps": num_steps, "eagle-topk": eagle_topk, "num-draft-tokens": num_draft_tokens})
    if adaptive:
        speculative["extra-args"] = [*speculative.get("extra-args", []), rules.ADAPTIVE_FLAG]
    candidate["speculative"] = speculative
    confounds = candidate.get("confounds") or {}
    if nccl:
        if shared_nccl:
            raw["nccl"] = {**(raw.get("nccl") or {}), **nccl}
        else:
            confounds["nccl"] = {**(raw.get("nccl") or {}), **(confounds.get("nccl") or {}), **nccl}
    if confounds:
        candidate["confounds"] = confounds
    return load_mapping(loaded.name, loaded.path, raw)


def _rule_problem(algorithm: str, steps: int, topk: int, draft: int, adaptive: bool,
                  adaptive_config: bool = False) -> str | None:
    if rules.family(algorithm) == "ngram":
        return f"{rules.ADAPTIVE_FLAG}: algorithm NGRAM is not EAGLE/EAGLE3, so SGLang would silently run it " \
            "static" if adaptive else None
    if rules.family(algorithm) != "eagle":
        return None  # the stack validates the other families' own keys
    too_big = rules.out_of_bounds(steps, topk, draft)
    if too_big is not None:
        name, value, bound = too_big
        return f"{name.replace('_', '-')} {value} is beyond what SGLang can run (at most {bound})"
    adjusted = rules.adjusted_num_draft_tokens(steps, topk, draft)
    if adjusted != draft:
        return (f"eagle-topk 1: SGLang would silently run num-draft-tokens {adjusted} (num-steps + 1), "
                f"not {draft}")
    tree = rules.max_num_draft_tokens(steps, topk)
    if draft > tree:
        return f"num-draft-tokens {draft} exceeds num-steps * eagle-topk + 1 = {tree} (the draft tree)"
    if adaptive:
        why = rules.adaptive_fallback(algorithm, topk)
        if why:
            return f"{rules.ADAPTIVE_FLAG}: {why}, so SGLang would silently run it static"
        problem = None if adaptive_config else rules.adaptive_steps_problem(steps)
        if problem:
            return f"{rules.ADAPTIVE_FLAG}: {problem}"
    return None


def _algorithms(stack: Any, spec: SweepSpec) -> list[str | None]:
    """None = the stack's own algorithm (arm names without a prefix); each other one by name."""
    own = stack.candidate.speculative.algorithm
    return [None if a == own else a for a in spec.speculative_algorithm] or [None]


def expand(loaded: LoadedStack, spec: SweepSpec | None = None, *,
           skip_variants: dict[str, str] | None = None) -> Grid:
    """Every combination of the grid, as arms or skipped with the reason. `skip_variants`: NCCL variant
    name -> why it is left out (the probe's pruning)."""
    stack = loaded.config
    spec = spec or stack.sweep or SweepSpec()
    current = stack.candidate.speculative
    own_steps, own_topk, own_draft = current.resolved_shape()
    steps_list = spec.num_steps or [own_steps]
    topk_list = spec.eagle_topk or [own_topk]
    adaptive_config = "--speculative-adaptive-config" in " ".join(current.extra_args)
    grid = Grid(baseline=baseline_arm(stack))
    seen: dict[str, str] = {}
    skip_variants = skip_variants or {}
    for algorithm in _algorithms(stack, spec):
        runs = algorithm or current.algorithm
        ngram = rules.family(runs) == "ngram"
        for variant, nccl in spec.variants().items():
            combos = itertools.product(spec.speculative_adaptive, [0] if ngram else steps_list,
                                       [0] if ngram else topk_list)
            for adaptive, steps, topk in combos:
                if spec.num_draft_tokens == STEPS_PLUS_ONE:
                    drafts = [s + 1 for s in steps_list] if ngram else [steps + 1]
                else:
                    drafts = spec.num_draft_tokens or [own_draft]  # type: ignore[assignment]  # not steps+1 (above)
                for draft in drafts:
                    name = arm_name(steps, topk, draft, variant, adaptive, algorithm)
                    if variant in skip_variants:
                        grid.skipped.append(SkippedArm(name, f"NCCL variant {variant}: {skip_variants[variant]}"))
                        continue
                    problem = _rule_problem(runs, steps, topk, draft, adaptive, adaptive_config)
                    if problem:
                        grid.skipped.append(SkippedArm(name, problem))
                        continue
                    try:
                        swept = arm_stack(loaded, num_steps=steps, eagle_topk=topk, num_draft_tokens=draft,
                                          adaptive=adaptive, nccl=nccl, shared_nccl=False, algorithm=algorithm,
                                          draft_model_path=spec.draft_model_path.get(runs))
                    except ConfigError as exc:
                        grid.skipped.append(SkippedArm(name, f"the stack refuses it: {exc.problem}"))
                        continue
                    arm = build_arm(swept.config, speculative=True, with_confounds=True, name=name)
                    if arm.config_hash in seen:
                        grid.skipped.append(SkippedArm(name, f"the same server as arm {seen[arm.config_hash]} "
                                                             "(identical launch args and env)"))
                        continue
                    seen[arm.config_hash] = name
                    shape = swept.config.candidate.speculative.resolved_shape()
                    grid.arms.append(SweepArm(name, *shape, adaptive, variant, dict(nccl), arm, algorithm,
                                              spec.draft_model_path.get(runs) if algorithm else None))
    return grid


def quick_subset(grid: Grid, spec: SweepSpec) -> Grid:
    """`--quick`: only the arms sweep.quick-arms names (every name must be an arm of the grid)."""
    if not spec.quick_arms:
        return grid
    names = {a.name for a in grid.arms}
    unknown = [n for n in spec.quick_arms if n not in names]
    if unknown:
        raise ValueError(f"sweep.quick-arms names {unknown}, which are not arms of the grid "
                         f"(arms: {sorted(names)})")
    kept = [a for a in grid.arms if a.name in spec.quick_arms]
    left = [SkippedArm(a.name, QUICK_REASON) for a in grid.arms if a.name not in spec.quick_arms]
    return Grid(baseline=grid.baseline, arms=kept, skipped=grid.skipped + left, notes=list(grid.notes))
