"""Checks on what produced the evidence, recomputed from what the result recorded (never from its verdict).

- faked or lossy acceptance in either arm's recorded launch command (sglab/sglang/honesty.py): a blocker;
- the arms measured on different machines: GPU product, driver or CUDA runtime of their nodes, or a
  different server version (sglab/schema/result.py ArmMachine): a blocker, like any other confound;
- output parity below the A/A parity minus `policy.output-parity-margin` (below): a guard.
Registered in sglab/analysis/checks.py.

Output parity: are the candidate's answers the baseline's? Speculative decoding is lossless, so at temperature 0
they should be, up to the batch-variant numerics of real GPUs.

Pairs are recomputed from the request samples (RequestSample.output_sha256, the texts in
RunResult.output_texts), measured rounds only, requests sent at temperature 0 that succeeded:
- candidate vs baseline: every arm of a round walks the same prompts from the same offset
  (sglab/load/collector.py), so the k-th request of prompt p in round r of the candidate asked what the
  baseline's k-th request of p in round r asked;
- A/A: the baseline against itself, each prompt's first answer in a round against its first answer in
  the next round that sent it (another batch around it: how much a plain server varies by itself).
Per pair: equal text or not, and for those that differ the position of the first different character
(characters, not tokens: the stream gives text, and token ids are not sent on the chat endpoint).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Literal

from sglab.analysis.samples import comparison_arms
from sglab.schema.result import ArmMachine, LevelResult, RequestSample, RunResult
from sglab.schema.verdict import Check, LevelParity, OutputParity, ParityCount
from sglab.sglang.flags import FlagError
from sglab.sglang.honesty import faked_acceptance, launch_env_and_args

def faked_acceptance_check(result: RunResult) -> Check | None:
    """Either compared arm launched with a setting that fakes or loosens acceptance (both may carry it, so
    it is no confound: it is checked on each arm's own recorded command)."""
    try:
        names = comparison_arms(result)
    except ValueError:
        return None
    found: dict[str, list[str]] = {}
    for name in names:
        info = result.arm(name)
        try:
            env, args = launch_env_and_args(info.launch_command)
            fakes = faked_acceptance(env, args)
        except (ValueError, FlagError) as exc:  # unreadable: the confounds check says so too
            return Check(name="faked-acceptance", ok=False,
                         detail=f"the recorded launch command of {name} cannot be checked for faked acceptance "
                                f"({exc})", fix=f"re-run `sglab bench --stack {result.stack}`")
        for fake in fakes:
            found.setdefault(fake.key, []).append(name)
    if not found:
        return None
    keys = ", ".join(f"{key} ({' and '.join(arms)})" for key, arms in found.items())
    settings = ", ".join(key.split(" ", 1)[1] for key in found)
    return Check(name="faked-acceptance", ok=False,
                 detail=f"the servers ran with settings that fake or loosen speculative acceptance ({keys}), so "
                        "their speed is not what real verification gives",
                 fix=f"remove {settings} from the stack and re-run `sglab bench --stack {result.stack}`")


def _joined(labels: dict[str, str], *keys: str) -> str | None:
    parts = [labels.get(k) for k in keys]
    return ".".join(p for p in parts if p) if all(parts) else None


def machine_facts(machine: ArmMachine | None) -> dict[str, str]:
    """What must be the same on both arms' machines (only the facts recorded), each from the first label that
    is there: GFD publishes `cuda.driver-version.full` and, deprecated, `cuda.driver.major/minor/rev`; GKE
    names its accelerator and driver."""
    if machine is None:
        return {}
    labels = machine.node_labels
    facts = {
        "GPU product": labels.get("nvidia.com/gpu.product") or labels.get("cloud.google.com/gke-accelerator"),
        "GPU driver": labels.get("nvidia.com/cuda.driver-version.full")
        or _joined(labels, "nvidia.com/cuda.driver.major", "nvidia.com/cuda.driver.minor", "nvidia.com/cuda.driver.rev")
        or labels.get("cloud.google.com/gke-gpu-driver-version"),
        "CUDA runtime": labels.get("nvidia.com/cuda.runtime-version.full")
        or _joined(labels, "nvidia.com/cuda.runtime.major", "nvidia.com/cuda.runtime.minor"),
        "GPU count": labels.get("nvidia.com/gpu.count"),
        "server version": machine.server_version,
        "image digest": machine.image_digest,
        "producer": machine.producer,
    }
    return {k: v for k, v in facts.items() if v}


def machine_confounds(result: RunResult) -> list[tuple[str, str, str]]:
    """(fact, baseline's, candidate's) for every machine fact both compared arms recorded and that differs."""
    try:
        base, cand = comparison_arms(result)
    except ValueError:
        return []
    facts = {name: machine_facts(info.machine) if (info := result.arm(name)) is not None else {}
             for name in (base, cand)}
    return [(key, facts[base][key], facts[cand][key]) for key in facts[base]
            if key in facts[cand] and facts[base][key] != facts[cand][key]]


def machine_check(result: RunResult) -> Check | None:
    """A baseline and candidate measured on different GPUs, drivers, CUDA or server versions: the gain could be
    the machine's. A blocker, recomputed from the arms' recorded machines."""
    found = machine_confounds(result)
    if not found:
        return None
    shown = "; ".join(f"{key}: baseline {b}, candidate {c}" for key, b, c in found)
    return Check(name="machines", ok=False,
                 detail=f"the arms ran on different machines ({shown}), so the gain cannot be credited to speculation",
                 fix="pin both arms to the same GPU product and driver (placement.node-selector, e.g. "
                     "nvidia.com/gpu.product) and the same image digest (image@sha256:...), redeploy and re-run "
                     f"`sglab bench --stack {result.stack}`")


@dataclass(frozen=True)
class Producer:
    """What produced a run's numbers: 'simulator', 'sglang' (real servers) or 'unknown' (not recorded)."""

    kind: Literal["simulator", "sglang", "unknown"]
    time_scale: float | None = None  # simulators: the scale their durations were divided by
    versions: tuple[str, ...] = ()  # the server versions the arms reported
    why: str = ""

    def describe(self) -> str:
        if self.kind == "simulator":
            scale = f" at time scale {self.time_scale:g}" if self.time_scale is not None else ""
            return f"sglab's simulator{scale}, {self.why}"
        if self.kind == "sglang":
            shown = ", ".join(self.versions) or "version not reported"
            return f"real SGLang servers, version {shown}, {self.why}"
        return f"an unknown producer: {self.why}"


def producer_of(result: RunResult) -> Producer:
    """The producer, recomputed from what the run recorded: sglab started simulators (target 'sim'), or the
    servers described themselves as the simulator or as SGLang (ArmInfo.machine, from /get_server_info).
    A file written before the machine was recorded, against URLs, is 'unknown'."""
    try:
        names = comparison_arms(result)
    except ValueError:
        names = tuple(a.name for a in result.arms)
    machines = [m for name in names if (info := result.arm(name)) is not None and (m := info.machine) is not None]
    reported = {m.producer for m in machines if m.producer is not None}
    versions = tuple(sorted({m.server_version for m in machines if m.server_version}))
    scales = {m.time_scale for m in machines if m.time_scale is not None}
    if result.target.kind == "sim" or "simulator" in reported:
        why = ("started by sglab (target sim)" if result.target.kind == "sim"
               else "as the servers reported themselves")
        recorded = result.target.time_scale
        scale = recorded if recorded is not None else (max(scales) if scales else None)
        if scale is None and result.target.kind == "sim":
            scale = 1.0  # no SGLAB_SIM_TIME_SCALE given: the simulator's default
        if len(scales | ({recorded} if recorded is not None else set())) > 1:
            why += f"; the arms disagree on the time scale ({', '.join(f'{s:g}' for s in sorted(scales))})"
            scale = max(scales | {recorded or 0.0})
        return Producer("simulator", scale, versions, why)
    if len(machines) == len(names) and reported == {"sglang"}:
        return Producer("sglang", None, versions, "as their /get_server_info says")
    missing = [n for n in names if (info := result.arm(n)) is None or info.machine is None
               or info.machine.producer is None]
    return Producer("unknown", None, versions,
                    f"target {result.target.kind}, no server identity recorded for {', '.join(missing) or 'the arms'} "
                    "(a result written before sglab recorded it)")


def provenance_blockers(result: RunResult) -> list[Check]:
    """The blockers of this module, in the order the verdict lists them."""
    return [check for check in (faked_acceptance_check(result), machine_check(result)) if check is not None]


# Output parity.

Key = tuple[int, int, int]  # (round, prompt, occurrence)


def first_difference(a: str, b: str) -> int:
    """The 0-based index of the first character where a and b differ (the shorter length if one is a prefix)."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def _answers(level: LevelResult, arm: str) -> dict[Key, str]:
    out: dict[Key, str] = {}
    seen: dict[tuple[int, int], int] = defaultdict(int)
    for sample in sorted((s for s in level.requests if _usable(s, arm)), key=lambda s: s.start_s):
        k = (sample.round_index, sample.prompt_index)
        out[k + (seen[k],)] = sample.output_sha256
        seen[k] += 1
    return out


def _usable(sample: RequestSample, arm: str) -> bool:
    return (sample.arm == arm and not sample.warmup and sample.round_index >= 0 and sample.error is None
            and sample.output_sha256 is not None and sample.temperature == 0 and sample.prompt_index is not None)


def _count(pairs: list[tuple[str, str]], texts: dict[str, str]) -> ParityCount:
    equal = sum(a == b for a, b in pairs)
    positions = [first_difference(texts[a], texts[b]) for a, b in pairs if a != b and a in texts and b in texts]
    return ParityCount(pairs=len(pairs), equal=equal,
                       first_difference_chars_mean=sum(positions) / len(positions) if positions else None)


def _level_pairs(level: LevelResult, base: str, cand: str) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    baseline, candidate = _answers(level, base), _answers(level, cand)
    ab = [(baseline[k], candidate[k]) for k in sorted(baseline.keys() & candidate.keys())]
    by_prompt: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for (round_index, prompt, occurrence), sha in baseline.items():
        if occurrence == 0:
            by_prompt[prompt].append((round_index, sha))
    aa = [(x[1], y[1]) for answers in by_prompt.values() for x, y in zip(sorted(answers), sorted(answers)[1:])]
    return ab, aa


def output_parity(result: RunResult) -> OutputParity | None:
    """Candidate vs baseline and A/A parity, per level and over all levels; None when no temperature-0 answer
    was recorded (a result written before sglab recorded them, or one that sent none)."""
    try:
        base, cand = comparison_arms(result)
    except ValueError:
        return None
    texts = result.output_texts
    levels, all_ab, all_aa = [], [], []
    for level in sorted(result.levels, key=lambda lv: lv.concurrency):
        ab, aa = _level_pairs(level, base, cand)
        if ab or aa:
            levels.append(LevelParity(concurrency=level.concurrency, candidate=_count(ab, texts), aa=_count(aa, texts)))
        all_ab += ab
        all_aa += aa
    if not levels:
        return None
    return OutputParity(candidate=_count(all_ab, texts), aa=_count(all_aa, texts), levels=levels)


def parity_phrase(count: ParityCount) -> str:
    if not count.pairs:
        return "no pairs"
    text = f"{count.share:.1%} of {count.pairs}"
    if count.first_difference_chars_mean is not None:
        text += f" (the others first differ at character {count.first_difference_chars_mean:.0f} on average)"
    return text


def parity_floor(parity: OutputParity, margin: float, *, lossless: bool) -> tuple[float, str]:
    """The least candidate parity that passes, and what it was measured against: the A/A parity (100% where the
    arms are lossless by construction, the simulator, or where no A/A pair was measured) minus the margin."""
    if lossless or parity.aa.share is None:
        why = "the simulator is lossless" if lossless else "no A/A pairs were measured"
        return max(0.0, 1.0 - margin), f"100% ({why}) - policy.output-parity-margin {margin:.1%}"
    return max(0.0, parity.aa.share - margin), (f"A/A {parity_phrase(parity.aa)} - policy.output-parity-margin "
                                                 f"{margin:.1%}")


def parity_guard(parity: OutputParity | None, margin: float, unmeasurable: str, *, lossless: bool) -> Check:
    """The output-parity guard: the candidate's share of equal temperature-0 answers against the floor
    (`parity_floor`); unmeasured is a check that could not be evaluated (`unmeasurable` marks it, so the verdict
    blocks: no answers, no evidence that the candidate answers as the baseline does)."""
    if parity is None or not parity.candidate.pairs:
        return Check(name="output-parity", ok=False,
                     detail=f"output parity {unmeasurable}: the run recorded no temperature-0 answers of both arms to "
                            "the same requests", fix="re-run the benchmark with this sglab (it records the answers)")
    share = parity.candidate.share
    floor, against = parity_floor(parity, margin, lossless=lossless)
    ok = share >= floor
    return Check(name="output-parity", ok=ok,
                 detail=f"output parity {share:.1%} of {parity.candidate.pairs} temperature-0 pairs "
                        f"({'≥' if ok else '<'} {floor:.1%} = {against})",
                 fix=None if ok else "the candidate's temperature-0 answers differ from the baseline's more than the "
                                     "baseline's differ from its own: speculative decoding should not change them; "
                                     "look for lossy settings or a draft/target mismatch (a larger "
                                     "policy.output-parity-margin only if the servers' own numerics explain it)")
