"""A sweep's outputs: the ranked table with P(correct selection), the heatmap, the Pareto plot, the cost, the verdict.

Written into the sweep's run directory: ranking.txt (the console table), ranking.csv, heatmap.png,
pareto.png, cost.json; `sweep_verdict` is what result.json (and the benchmark Job's ConfigMap) carries.
Every number is read from result.json and the race records that sglab/sweep/run.py recomputed from it.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

from sglab.analysis.operating_point import level_phrase
from sglab.analysis.samples import per_round
from sglab.schema.result import NodeOffset, RunResult
from sglab.sweep.run import BASELINE, SweepState

DEFAULT_GPUS_PER_ARM = 8  # a simulator arm has no GPUs; its cost is reported as if each arm held 8


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:+.1%}"


def pick_record(state: SweepState) -> dict:
    """The race record of the last gated level that picked the sweep's winner ({} when none did)."""
    if not state.winner:
        return {}
    return next((raw for _, raw in sorted(state.records.items(), key=lambda kv: -int(kv[0]))
                 if raw.get("winner") == state.winner), {})


def chance_phrase(raw: dict) -> str:
    """`P(correct selection) >= 95% (every other arm eliminated)` or `≈ 87% (estimated from the paired gaps)`."""
    p = raw.get("p_correct")
    if p is None:
        return "P(correct selection) n/a"
    if raw.get("p_correct_guaranteed"):
        return f"P(correct selection) >= {raw['confidence']:.0%} (every other arm eliminated)"
    return f"P(correct selection) ≈ {p:.0%} (estimated from the paired gaps)"


def ranking_rows(state: SweepState) -> list[dict[str, Any]]:
    rows = []
    for level, raw in sorted(state.records.items(), key=lambda kv: int(kv[0])):
        for a in raw["arms"]:
            rows.append({"level": int(level), "rank": a["rank"], "arm": a["arm"], "status": a["status"],
                         "rounds": a["rounds"], "baseline_rounds": a.get("baseline_rounds"),
                         "gain": a["estimate"], "low": a["low"], "high": a["high"],
                         "eliminated_at": a["eliminated_at"], "reason": a["reason"], "node": a.get("node"),
                         "gap_to_pick": a.get("gap_to_pick"), "p_beats_pick": a.get("p_beats_pick"),
                         "p_correct": raw.get("p_correct") if a["arm"] == raw.get("winner") else None})
    return rows


def _node_lines(raw: dict) -> list[str]:
    """Where the arms ran and what the calibration block measured: the gains below are net of it, or say they are
    not."""
    where = {a["arm"]: a.get("node") for a in raw["arms"]}
    base = raw.get("baseline_node")
    if not base or all(node == base for node in where.values()):
        return []
    slots = sorted({node for node in where.values() if node and node != base})
    lines = [f"  nodes: the baseline on {base}; arms on {', '.join(slots)}"]
    calibration = raw.get("calibration") or []
    if not calibration:
        return lines + ["  not calibrated in this run: each gain includes any difference between its arm's node and "
                        "the baseline's (simulators: sweep.calibration-rounds 0; a cluster wave: `sglab sweep --next` "
                        "recomputes it net of the calibration step)"]
    lines.append(f"  calibration ({raw.get('calibration_rounds', 0)} rounds of the baseline config on every slot "
                 "node beside the baseline); the gains below are net of it, their intervals widened by it:")
    return lines + [f"    {NodeOffset.model_validate(o).describe(base)}" for o in calibration]


def ranking_table(state: SweepState) -> str:
    lines = [f"sweep {state.run_id} of stack {state.stack}: {len(state.arms)} arms vs one baseline, "
             f"gate {state.metric}; status {state.status}, winner {state.winner or 'none'}"]
    label = state.plan.get("profile") or "concurrency"
    for level, raw in sorted(state.records.items(), key=lambda kv: int(kv[0])):
        pick = raw.get("winner") or raw.get("leader")
        spent = f" ({raw['arm_rounds']} arm-rounds)" if raw.get("arm_rounds") is not None else ""
        lines.append(f"\n{level_phrase(label, int(level))}: {raw['outcome']} after {raw['rounds']} rounds{spent}"
                     + (f": pick {pick}, {chance_phrase(raw)}" if pick else ""))
        if raw.get("p_clears_min") is not None:
            lines.append(f"  P(the pick beats the baseline by min gain {raw['min_gain']:+.1%}) ≈ "
                         f"{raw['p_clears_min']:.0%}; eliminations at {raw['arm_confidence']:.2%} per sequence "
                         f"(family-wise {raw['confidence']:.0%}: the best arm is eliminated with probability <= "
                         f"{1 - raw['confidence']:.0%})")
        lines += _node_lines(raw)
        lines.append("  gain: against the baseline over the rounds both ran (base), with its confidence sequence; "
                     "vs pick: paired over the rounds both ran, and the estimated chance of beating the pick")
        nodes = _node_lines(raw) != []
        node_head = f" {'node':<12}" if nodes else ""
        lines.append(f"  {'#':>3} {'arm':<26}{node_head} {'status':<10} {'rounds':>6} {'base':>4} {'gain':>8} "
                     f"{'interval':>20} {'vs pick':>8} {'P(beats)':>8}  eliminated")
        for a in raw["arms"]:
            interval = f"[{_pct(a['low'])}, {_pct(a['high'])}]"
            gone = f"round {a['eliminated_at']}: {a['reason']}" if a["eliminated_at"] else ""
            beats = "-" if a.get("p_beats_pick") is None else f"{a['p_beats_pick']:.1%}"
            node = f" {a.get('node') or '-':<12}" if nodes else ""
            lines.append(f"  {a['rank']:>3} {a['arm']:<26}{node} {a['status']:<10} {a['rounds']:>6} "
                         f"{a.get('baseline_rounds', a['rounds']):>4} {_pct(a['estimate']):>8} {interval:>20} "
                         f"{_pct(a.get('gap_to_pick')):>8} {beats:>8}  {gone}")
        if raw.get("off_plan"):
            lines.append(f"  note: rounds {raw['off_plan']} measured other arms than the race asked for (a segment "
                         "without a value, or a resumed round); the decisions use what was measured")
    if state.status == "calibrated":
        lines.append(sweep_verdict(state)["sentence"])
    lines += [f"note: {note}" for note in state.notes]
    quick = [s for s in state.skipped if s["reason"].endswith("(--quick)")]
    rest = [s for s in state.skipped if s not in quick]
    if rest:
        lines.append(f"\nskipped ({len(rest)}):")
        lines += [f"  {s['name']}: {s['reason']}" for s in rest]
    if quick:
        lines.append(f"left out by --quick: {len(quick)} arms not in sweep.quick-arms")
    if state.confirmation:
        c = state.confirmation
        lines.append(f"\nconfirmation A/B of {state.winner}: run {c['run_id']} -> {c['outcome']}"
                     + (f": {c['sentence']}" if c.get("sentence") else ""))
    return "\n".join(lines)


def sweep_verdict(state: SweepState) -> dict:
    """The sweep's decision as a result's verdict (result.json, and what `--result-configmap` hands to the Pulumi
    program): the ranking (arm, gain, interval, eliminated when and why, per gated level) and the pick with its
    config hash and P(correct selection). A pick is a candidate for the confirmation A/B, never a promotion."""
    winner = state.arm(state.winner) if state.winner else None
    rows = ranking_rows(state)
    last = pick_record(state)
    if state.status == "calibrated":  # a cluster sweep's calibration step: the slot nodes, no arms
        sentence = "calibration of the slot nodes (the baseline's config in every slot): " + "; ".join(
            f"c={level}: " + ", ".join(NodeOffset.model_validate(o).describe(cal.get("baseline_node") or "-")
                                       for o in cal.get("offsets") or [])
            for level, cal in sorted(state.calibration.items(), key=lambda kv: int(kv[0])))
    elif winner is None:
        sentence = (f"sweep of {len(state.arms)} arms: no arm beat the baseline by policy.min-gain; nothing to "
                    "confirm" if state.status == "no-winner" else f"sweep of {len(state.arms)} arms: {state.status}")
    else:
        row = next((r for r in reversed(rows) if r["arm"] == state.winner), None)
        shown = "" if row is None or row["gain"] is None else (
            f" {row['gain']:+.1%} at c={row['level']}" + ("" if row["low"] is None or row["high"] is None else
                                                         f" [{row['low']:+.1%}, {row['high']:+.1%}]"))
        clears = last.get("p_clears_min")
        sentence = (f"sweep of {len(state.arms)} arms: pick {state.winner}{shown}, {chance_phrase(last)}"
                    + ("" if clears is None else f", P(beats the baseline by policy.min-gain) ≈ {clears:.0%}")
                    + "; confirm it with a fresh A/B before promoting")
    return {"kind": "sweep", "outcome": state.status, "sentence": sentence, "metric": state.metric,
            "winner": state.winner, "winner_config_hash": winner["config_hash"] if winner else None,
            "winner_cleared_min": state.winner_cleared_min, "p_correct": last.get("p_correct"),
            "p_correct_guaranteed": bool(last.get("p_correct_guaranteed")), "p_clears_min": last.get("p_clears_min"),
            "arms": [a["name"] for a in state.arms], "ranking": rows}


def _arm_means(result: RunResult, level: int, metric: str) -> dict[str, float]:
    lv = result.level(level)
    if lv is None:
        return {}
    table = per_round(lv, metric)
    sums: dict[str, list[float]] = {}
    for values in table.values():
        for arm, v in values.items():
            sums.setdefault(arm, []).append(v)
    return {arm: sum(v) / len(v) for arm, v in sums.items() if v}


def cost(state: SweepState, result: RunResult, gpus_per_arm: int) -> dict[str, Any]:
    """Arm-seconds measured (warm-ups included) vs the full grid at max-rounds for every arm and level."""
    measured_s, segments, fixed_s = 0.0, 0, 0.0
    arms = len(state.arms) + 1
    for lv in result.levels:
        rows = [r for r in lv.rounds if r.round_index >= 0]
        per = [r.duration_s for r in rows]
        measured_s += sum(r.duration_s for r in lv.rounds)
        segments += len(rows)
        if per:
            rounds = state.max_rounds if lv.concurrency in state.gated_levels else max(r.round_index for r in rows) + 1
            fixed_s += arms * rounds * (sum(per) / len(per))
    gpu = gpus_per_arm / 60.0
    return {"arm_rounds": segments, "arm_seconds": round(measured_s, 3), "gpus_per_arm": gpus_per_arm,
            "gpu_minutes": round(measured_s * gpu, 3),
            "full_grid_arm_rounds": sum(arms * (state.max_rounds if lv.concurrency in state.gated_levels else
                                                 max((r.round_index for r in lv.rounds), default=-1) + 1)
                                        for lv in result.levels),
            "full_grid_gpu_minutes": round(fixed_s * gpu, 3),
            "saved_factor": round(fixed_s / measured_s, 2) if measured_s else None,
            "note": "arm time = the measured segments, baseline included (a wave holds its slots while it runs, so "
                    "its GPU time follows the segments it measures); full grid = every arm for max-rounds "
                    f"({state.max_rounds}) at the gated levels, which picks more accurately than this sweep only "
                    "when the race stopped early; benchmarks/sweep_quality.py compares at equal pick accuracy"}


def _grid(state: SweepState, values: dict[str, float]) -> tuple[list[int], list[int], dict]:
    steps = sorted({a["num_steps"] for a in state.arms})
    drafts = sorted({a["num_draft_tokens"] for a in state.arms})
    cells: dict[tuple[int, int], list[tuple[str, float]]] = {}
    for a in state.arms:
        if a["name"] in values:
            cells.setdefault((a["num_steps"], a["num_draft_tokens"]), []).append((a["name"], values[a["name"]]))
    return steps, drafts, cells


def write_outputs(state: SweepState, result: RunResult, run_dir: Path, *,
                  gpus_per_arm: int | None = None) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    (run_dir / "ranking.txt").write_text(ranking_table(state) + "\n", encoding="utf-8")
    with open(run_dir / "ranking.csv", "w", newline="", encoding="utf-8") as fh:
        rows = ranking_rows(state)
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]) if rows else ["level"])
        writer.writeheader()
        writer.writerows(rows)
    spent = cost(state, result, gpus_per_arm or DEFAULT_GPUS_PER_ARM)
    (run_dir / "cost.json").write_text(json.dumps(spent, indent=1) + "\n", encoding="utf-8")
    written += [run_dir / "ranking.txt", run_dir / "ranking.csv", run_dir / "cost.json"]
    first = min(state.gated_levels) if state.gated_levels else None
    raw = state.records.get(str(first)) if first is not None else None
    if raw:
        gains = {a["arm"]: a["estimate"] for a in raw["arms"] if a["estimate"] is not None}
        steps, drafts, cells = _grid(state, gains)
        fig, ax = plt.subplots(figsize=(1.4 + 1.2 * len(drafts), 1.2 + 0.8 * len(steps)))
        best = [[max((g for _, g in cells.get((s, d), [])), default=math.nan) for d in drafts] for s in steps]
        lim = max((abs(v) for row in best for v in row if not math.isnan(v)), default=0.1) or 0.1
        im = ax.imshow(best, cmap="RdYlGn", vmin=-lim, vmax=lim, aspect="auto")
        for i, s in enumerate(steps):
            for j, d in enumerate(drafts):
                if (s, d) in cells:
                    name, g = max(cells[(s, d)], key=lambda t: t[1])
                    ax.text(j, i, f"{g:+.1%}\n{name.split('-', 3)[-1] if name.count('-') > 2 else 'default'}",
                            ha="center", va="center", fontsize=7)
        ax.set_xticks(range(len(drafts)), [str(d) for d in drafts])
        ax.set_yticks(range(len(steps)), [str(s) for s in steps])
        ax.set_xlabel("num-draft-tokens")
        ax.set_ylabel("num-steps")
        ax.set_title(f"{state.metric} gain vs baseline at c={first}\n(best NCCL/adaptive variant per cell)", fontsize=9)
        fig.colorbar(im, ax=ax, format=matplotlib.ticker.PercentFormatter(1.0))
        fig.tight_layout()
        fig.savefig(run_dir / "heatmap.png", dpi=110)
        plt.close(fig)
        written.append(run_dir / "heatmap.png")
    levels = [lv.concurrency for lv in result.levels]
    if first is not None and levels:
        single = _arm_means(result, first, "decode_tok_per_s")
        top = max(levels)
        aggregate = _arm_means(result, top, "output_tok_per_s")
        both = [a for a in single if a in aggregate]
        if both:
            fig, ax = plt.subplots(figsize=(6.5, 4.5))
            for a in both:
                ax.scatter(single[a], aggregate[a], color="black" if a == BASELINE else
                           "tab:green" if a == state.winner else "tab:blue")
                ax.annotate(a, (single[a], aggregate[a]), fontsize=7, xytext=(3, 3), textcoords="offset points")
            ax.set_xlabel(f"single-stream decode tok/s (c={first})")
            ax.set_ylabel(f"aggregate output tok/s (c={top})")
            ax.set_title("Pareto: arms measured at both levels (eliminated arms stop before the highest)", fontsize=9)
            fig.tight_layout()
            fig.savefig(run_dir / "pareto.png", dpi=110)
            plt.close(fig)
            written.append(run_dir / "pareto.png")
    return written
