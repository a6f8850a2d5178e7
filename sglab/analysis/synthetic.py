"""Synthetic RunResults with known truth: for tests, the decision-quality benchmark and demos of the report.

Per round, each arm's mean decode rate is rate x (1 + gain) x exp(shared + own noise): `shared_cv` is
drift that hits both arms of a round alike (pairing cancels it), `round_cv` is each arm's own
round-to-round noise, `request_cv` the spread of requests inside a round (`candidate_request_cv` for
speculative arms, whose accept length varies request to request).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence

import numpy as np

from sglab.schema.result import (AcceptLength, ArmInfo, ArmLevelSummary, ArmMachine, LevelResult, Percentiles,
                                  RequestSample, RoundSample, RunResult, Target)

PerLevel = float | Mapping[int, float]


def answer_text(level: int, prompt_index: int) -> str:
    """The synthetic temperature-0 answer to a prompt: both arms give the same (lossless speculative decoding)."""
    return f" synthetic answer {level}:{prompt_index}"


def answer_sha(level: int, prompt_index: int) -> str:
    return hashlib.sha256(answer_text(level, prompt_index).encode()).hexdigest()


def _at(value: PerLevel, level: int) -> float:
    return float(value[level]) if isinstance(value, Mapping) else float(value)


def _pcts(values: list[float]) -> Percentiles:
    if not values:
        return Percentiles()
    a = np.asarray(values)
    return Percentiles(p50=float(np.percentile(a, 50)), p90=float(np.percentile(a, 90)),
                       p99=float(np.percentile(a, 99)), mean=float(a.mean()))


def synthetic_result(
    *,
    kind: str = "ab",
    stack: str = "synthetic",
    levels: Sequence[int] = (1, 4, 16),
    rounds: int = 6,
    baseline_tok_per_s: PerLevel = 88.8,
    gain: PerLevel = 0.059,
    attribution: tuple[float, float, float] | None = None,
    round_cv: float = 0.015,
    shared_cv: float = 0.01,
    request_cv: float = 0.02,
    candidate_request_cv: float | None = None,
    round_duration_s: float = 10.0,
    output_tokens: int = 64,
    ttft_ms: float = 60.0,
    candidate_ttft_factor: float = 1.1,
    accept_length: PerLevel = 2.3,
    error_rate: Mapping[str, float] | None = None,
    confounds: list[dict[str, str | None]] | None = None,
    live_mismatches: list[str] | None = None,
    complete: bool = True,
    with_requests: bool = True,
    policy: dict | None = None,
    config_hash: Mapping[str, str] | None = None,
    run_id: str = "20260101T000000Z-synth",
    seed: int = 0,
    producer: str = "simulator",
    design: str = "parallel",
    node_effect: float = 0.0,
    nodes: tuple[str, str] = ("sim-node-a", "sim-node-b"),
) -> RunResult:
    """A RunResult whose true relative gain per level is `gain` (or, for kind 'attribute', the
    (confounds, speculation, interaction) parts in `attribution`). `producer` 'sglang' records it as measured
    on real servers given by URL (sglab/analysis/provenance.py), 'simulator' as on simulators sglab started."""
    rng = np.random.default_rng(seed)
    error_rate = dict(error_rate or {})
    if kind == "aa":
        arms = [("baseline", "baseline", False), ("baseline-b", "baseline", False)]
    elif kind == "attribute":
        arms = [("baseline", "baseline", False), ("baseline+confounds", "baseline", False),
                ("candidate-confounds", "candidate", True), ("candidate", "candidate", True)]
    else:
        arms = [("baseline", "baseline", False), ("candidate", "candidate", True)]

    def arm_gain(name: str, level: int) -> float:
        if kind == "aa" or name == "baseline":
            return 0.0
        if kind == "attribute":
            g_conf, g_spec, g_inter = attribution or (0.025, 0.033, 0.001)
            return {"baseline+confounds": g_conf, "candidate-confounds": g_spec,
                    "candidate": g_conf + g_spec + g_inter}[name]
        return _at(gain, level)

    level_results: list[LevelResult] = []
    clock_s = 0.0
    for level in levels:
        base_rate = _at(baseline_tok_per_s, level)
        round_rows: list[RoundSample] = []
        request_rows: list[RequestSample] = []
        per_arm_values: dict[str, dict[str, list[float]]] = {a[0]: {"decode": [], "ttft": [], "itl": [], "acc": []}
                                                               for a in arms}
        counts = {a[0]: [0, 0, 0] for a in arms}  # ok, errors, tokens
        for round_index in range(rounds):
            shared = rng.normal(0.0, shared_cv)
            order = rng.permutation(len(arms))
            period, placed = _placement(design, round_index, rounds, [a[0] for a in arms], nodes, node_effect)
            for position, arm_i in enumerate(order):
                name, _, speculative = arms[arm_i]
                if name not in placed:
                    continue
                node = placed[name]
                speed = 1 + node_effect if node == nodes[1] else 1.0
                rate = (base_rate * (1 + arm_gain(name, level)) * speed
                        * float(np.exp(shared + rng.normal(0.0, round_cv))))
                per_request_s = output_tokens / rate + ttft_ms / 1000
                n = max(1, int(round(round_duration_s * level / per_request_s)))
                cv = candidate_request_cv if speculative and candidate_request_cv is not None else request_cv
                decode = rate * np.exp(rng.normal(0.0, cv, n) - cv ** 2 / 2)
                errors = rng.random(n) < error_rate.get(name, 0.0)
                accept = _at(accept_length, level) if speculative else None
                ttft_scale = candidate_ttft_factor if speculative else 1.0
                ttfts = ttft_ms * ttft_scale * np.exp(rng.normal(0.0, 0.1, n))
                ok = int((~errors).sum())
                tokens = ok * output_tokens
                for i in range(n):
                    itl_ms = 1000.0 / float(decode[i])
                    if with_requests:
                        request_rows.append(RequestSample(
                            arm=name, level=level, round_index=round_index, start_s=clock_s,
                            prompt_index=i, output_tokens=0 if errors[i] else output_tokens,
                            expected_output_tokens=output_tokens,
                            ttft_ms=float(ttfts[i]),
                            e2e_ms=float(ttfts[i] + itl_ms * (output_tokens - 1)),
                            itl_ms=[] if errors[i] else [itl_ms] * (output_tokens - 1),
                            decode_tok_per_s=None if errors[i] else float(decode[i]),
                            accept_length=None if accept is None else accept * float(decode[i]) / rate,
                            temperature=0.0, output_sha256=None if errors[i] else answer_sha(level, i),
                            error="HTTP 500: synthetic failure" if errors[i] else None))
                    if not errors[i]:
                        per_arm_values[name]["decode"].append(float(decode[i]))
                        per_arm_values[name]["ttft"].append(float(ttfts[i]))
                        per_arm_values[name]["itl"].append(itl_ms)
                ok_decode = decode[~errors]
                round_rows.append(RoundSample(
                    level=level, round_index=round_index, position=position, arm=name, started_at_s=clock_s,
                    duration_s=round_duration_s, requests=n, errors=int(errors.sum()), output_tokens=tokens,
                    output_tok_per_s=(rate * level * ok / n * float(np.exp(rng.normal(0.0, request_cv / 2)))
                                      if ok else None),
                    decode_tok_per_s_mean=float(ok_decode.mean()) if ok else None,
                    decode_tok_per_s_p50=float(np.median(ok_decode)) if ok else None,
                    ttft_ms_p50=float(np.median(ttfts)), itl_ms_p50=1000.0 / rate,
                    client_accept_length=accept, server_accept_length=accept, node=node, period=period))
                counts[name][0] += ok
                counts[name][1] += int(errors.sum())
                counts[name][2] += tokens
                clock_s += round_duration_s
        summaries: dict[str, ArmLevelSummary] = {}
        for name, _, speculative in arms:
            vals = per_arm_values[name]
            ok, errs, tokens = counts[name]
            summaries[name] = ArmLevelSummary(
                requests=ok + errs, errors=errs, output_tokens=tokens, duration_s=rounds * round_duration_s,
                output_tok_per_s=tokens / (rounds * round_duration_s),
                decode_tok_per_s=_pcts(vals["decode"]), ttft_ms=_pcts(vals["ttft"]), itl_ms=_pcts(vals["itl"]),
                accept_length=AcceptLength(client_mean=_at(accept_length, level),
                                           server_mean=_at(accept_length, level)) if speculative else None)
        level_results.append(LevelResult(concurrency=level, arms=summaries, rounds=round_rows,
                                         requests=request_rows))

    hashes = dict(config_hash or {name: f"{i:064x}" for i, (name, _, _) in enumerate(arms, start=1)})
    if kind == "aa":
        hashes["baseline-b"] = hashes["baseline"]
    return RunResult(
        run_id=run_id, stack=stack, kind=kind, started_at="2026-01-01T00:00:00+00:00",
        finished_at="2026-01-01T00:10:00+00:00" if complete else None, complete=complete,
        incomplete_reason=None if complete else "interrupted (SIGINT)", git_commit="0" * 40,
        target=Target(kind="sim") if producer == "simulator" else
        Target(kind="urls", urls={name: f"http://{name}:30000" for name, _, _ in arms}, urls_source="sglab"),
        arms=[ArmInfo(name=name, role=role, speculative=spec, config_hash=hashes.get(name, "0" * 64),
                      launch_command=f"sglab sim ({name})", live_flags_checked=True,
                      machine=None if producer == "simulator" else ArmMachine(producer="sglang",
                                                                              server_version="synthetic"))
              for name, role, spec in arms],
        config_hash=hashes, confounds=list(confounds or []), live_mismatches=list(live_mismatches or []),
        load_plan={"concurrency": list(levels), "rounds": rounds, "round-duration-s": round_duration_s,
                   "seed": seed},
        policy=dict(policy or {}), levels=level_results,
        output_texts={answer_sha(lv.concurrency, s.prompt_index): answer_text(lv.concurrency, s.prompt_index)
                      for lv in level_results for s in lv.requests if s.output_sha256 is not None},
    )


def _placement(design: str, round_index: int, rounds: int, names: list[str], nodes: tuple[str, str],
               node_effect: float) -> tuple[int | None, dict[str, str | None]]:
    """(period, arm -> node) of one round under `design` (names[0] the baseline, names[1] the candidate)."""
    base, cand = names[0], names[1]
    if design == "crossover":
        period = 1 if round_index < (rounds + 1) // 2 else 2
        first = {base: nodes[0], cand: nodes[1]}
        placed = first if period == 1 else {base: nodes[1], cand: nodes[0]}
        return period, {**{n: nodes[0] for n in names}, **placed}
    if design == "switchback":
        period = round_index + 1
        return period, {base if round_index % 4 in (0, 3) else cand: nodes[0]}
    if design != "parallel":
        raise ValueError(f"unknown design {design!r} (parallel, crossover or switchback)")
    known = node_effect != 0.0
    return None, {n: (nodes[min(i, 1)] if known else None) for i, n in enumerate(names)}
