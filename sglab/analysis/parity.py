"""Output parity: are the candidate's answers the baseline's? Speculative decoding is lossless, so at
temperature 0 they should be, up to the batch-variant numerics of real GPUs.

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

from sglab.analysis.samples import comparison_arms
from sglab.schema.result import LevelResult, RequestSample, RunResult
from sglab.schema.verdict import Check, LevelParity, OutputParity, ParityCount

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
