"""The probe's table: per size, each variant's median [interval], and which variant wins by how much.

A win is "clear" only when the winner's interval lies wholly below every other variant's; otherwise the
row says the intervals overlap, and the gain is the point estimate only.
"""

from __future__ import annotations

from dataclasses import dataclass

from sglab.probe.result import ProbeResult, SizeResult
from sglab.probe.sizes import human_bytes
from sglab.probe.spec import DEFAULT_VARIANT


@dataclass(frozen=True)
class SizeWinner:
    bytes: int
    decode: bool
    winner: str
    clear: bool
    gain_vs_default: float | None  # (default - winner) / default, 0.12 = 12% faster than NCCL's default


def winners(result: ProbeResult) -> list[SizeWinner]:
    ok = [v for v in result.variants if v.status == "ok"]
    if not ok:
        return []
    default = result.variant(DEFAULT_VARIANT)
    rows = []
    for size in ok[0].sizes:
        cells = [(v.name, v.size(size.bytes)) for v in ok]
        cells = [(name, cell) for name, cell in cells if cell is not None]
        name, best = min(cells, key=lambda item: item[1].median_us)
        clear = all(best.ci_high_us < cell.ci_low_us for other, cell in cells if other != name)
        ref = default.size(size.bytes) if default is not None and default.status == "ok" else None
        gain = (ref.median_us - best.median_us) / ref.median_us if ref is not None and ref.median_us > 0 else None
        rows.append(SizeWinner(size.bytes, size.decode, name, clear and len(cells) > 1, gain))
    return rows


def _cell(size: SizeResult | None) -> str:
    if size is None:
        return "-"
    flag = "" if size.correct else " WRONG SUM"
    return f"{size.median_us:.2f} [{size.ci_low_us:.2f}, {size.ci_high_us:.2f}]{flag}"


def render_table(result: ProbeResult) -> str:
    """Plain-text table (also valid Markdown)."""
    ok = [v for v in result.variants if v.status == "ok"]
    lines = [f"NCCL probe {result.run_id} (stack {result.stack or '-'}): {result.backend}, {result.mode}, "
             f"world size {result.world_size}, hidden {result.hidden_size} ({result.hidden_size_source}), "
             f"{result.samples} samples x {result.ops_per_graph} all-reduces, median [{result.confidence:.0%} CI] us "
             "per all-reduce"]
    if result.backend == "gloo":
        lines.append("  gloo on CPU: a smoke test of the probe itself; NCCL settings have no effect on these numbers")
    for v in result.variants:
        env = " ".join(f"{k}={val}" for k, val in sorted(v.env.items()))
        lines.append(f"  {v.name}: {env}" + (f"  FAILED: {v.error.splitlines()[0]}" if v.error else ""))
    if not ok:
        return "\n".join(lines) + "\n"
    header = ["size", "decode steps"] + [v.name for v in ok] + ["winner"]
    body = []
    by_size = {w.bytes: w for w in winners(result)}
    for size in ok[0].sizes:
        win = by_size[size.bytes]
        if len(ok) == 1:
            verdict = "-"
        else:
            gain = f" {win.gain_vs_default:.1%} faster than {DEFAULT_VARIANT}" if win.gain_vs_default is not None \
                and win.winner != DEFAULT_VARIANT else ""
            verdict = f"{win.winner}{gain}" + ("" if win.clear else " (intervals overlap)")
        steps = ", ".join(size.sources[:3]) + (f" +{len(size.sources) - 3}" if len(size.sources) > 3 else "")
        body.append([human_bytes(size.bytes), steps or "(sweep)"] + [_cell(v.size(size.bytes)) for v in ok]
                    + [verdict])
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]

    def fmt(row: list[str]) -> str:
        return "| " + " | ".join(cell.ljust(w) for cell, w in zip(row, widths)) + " |"

    lines += ["", fmt(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *(fmt(r) for r in body)]
    return "\n".join(lines) + "\n"
