"""The probe's result document (schema-versioned) and how it is built from the ranks' raw timings.

Per variant and size: the per-sample time (the slowest rank's, since an all-reduce is done when its last
rank is), its median with an order-statistic interval, and whether the sum came out right. Written as
results/<stack>/probe-<id>/probe.json next to the benchmark runs; `kind` tells readers it is no RunResult.

The interval (`median_ci`, in this module because the result is its one user) is the order-statistic confidence
interval of the median. Latency samples are skewed (a long tail from preemption and clock changes), so no normal
approximation: the number of samples below the true median is Binomial(n, 1/2), which gives ranks j < k with
P(x_(j) <= median <= x_(k)) >= confidence exactly, whatever the distribution (no scipy: this runs in
the server image too).

Read back, a result gives the probe's table (per size, each variant's median [interval], and which variant wins
by how much: a win is "clear" only when the winner's interval lies wholly below every other variant's; otherwise
the row says the intervals overlap, and the gain is the point estimate only) and the sweep's pruning: skip NCCL
variants the probe shows slower than NCCL's default at every decode size. Pruning is deliberately conservative (a
skipped variant is a win nobody will find): a variant is skipped only when, at every decode-path size, its
interval's low end is above the default's high end by more than `margin`. Variants the probe did not measure (or
that failed there) are kept, with the reason saying so; the sweep's opt-out skips calling it at all.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field

from sglab.probe.spec import DEFAULT_VARIANT, SGLANG_OWNED_KEYS, ProbeRunSpec, Variant, human_bytes

PROBE_SCHEMA_VERSION: Final = 1
PROBE_KIND: Final = "nccl-probe"
PROBE_FILE = "probe.json"
RUN_PREFIX = "probe-"


# ---- the median and its distribution-free interval ----------------------------------------------------------

@dataclass(frozen=True)
class MedianCI:
    median: float
    low: float
    high: float
    n: int
    coverage: float


def _binom_cdf(k: int, n: int) -> float:
    """P(B <= k) for B ~ Binomial(n, 1/2)."""
    if k < 0:
        return 0.0
    return math.fsum(math.comb(n, i) for i in range(min(k, n) + 1)) / 2.0 ** n


def median(values: list[float]) -> float:
    ordered = sorted(values)
    n = len(ordered)
    mid = n // 2
    return ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def median_ci(values: list[float], confidence: float = 0.95) -> MedianCI:
    """The median and the narrowest symmetric order-statistic interval covering it with >= confidence.

    With too few samples for that coverage the interval is the whole range and `coverage` says what it
    actually is (n=5 covers 94%, n=6 97%).
    """
    if not values:
        raise ValueError("no samples")
    ordered = sorted(values)
    n = len(ordered)
    # ranks (1-based) j and n-j+1; coverage = 1 - 2 P(B <= j-1)
    best_j = 1
    for j in range(1, n // 2 + 1):
        if 1 - 2 * _binom_cdf(j - 1, n) >= confidence:
            best_j = j
        else:
            break
    coverage = 1 - 2 * _binom_cdf(best_j - 1, n)
    return MedianCI(median(ordered), ordered[best_j - 1], ordered[n - best_j], n, coverage)


# ---- the result document -----------------------------------------------------------------------------------


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SizeResult(_Model):
    bytes: int
    decode: bool
    sources: list[str] = Field(default_factory=list)
    median_us: float
    ci_low_us: float
    ci_high_us: float
    ci_coverage: float
    min_us: float
    samples: int
    correct: bool
    algbw_gb_s: float
    times_us: list[float] = Field(default_factory=list)


class VariantResult(_Model):
    name: str
    env: dict[str, str]
    source: str = ""
    status: Literal["ok", "failed"]
    error: str | None = None
    sizes: list[SizeResult] = Field(default_factory=list)

    def size(self, size_bytes: int) -> SizeResult | None:
        return next((s for s in self.sizes if s.bytes == size_bytes), None)


class ProbeResult(_Model):
    schema_version: Literal[1] = PROBE_SCHEMA_VERSION
    kind: Literal["nccl-probe"] = PROBE_KIND
    run_id: str
    stack: str | None = None
    created_at: str
    complete: bool
    backend: Literal["nccl", "gloo"]
    mode: Literal["cuda-graph", "eager"]
    world_size: int
    hidden_size: int
    hidden_size_source: str
    dtype: str
    ops_per_graph: int
    samples: int
    warmup_replays: int
    confidence: float
    ci_method: str = "order-statistic interval of the median (binomial, distribution-free)"
    sample_definition: str = ("ops_per_graph back-to-back all-reduces (one graph replay, or as many eager calls "
                              "until the stream is idle) divided by ops_per_graph; the slowest rank's time")
    environment: dict[str, Any] = Field(default_factory=dict)
    variants: list[VariantResult]

    def variant(self, name: str) -> VariantResult | None:
        return next((v for v in self.variants if v.name == name), None)

    @property
    def decode_sizes(self) -> list[int]:
        first = next((v for v in self.variants if v.status == "ok"), None)
        return [s.bytes for s in first.sizes if s.decode] if first else []


def new_probe_id(now: dt.datetime | None = None) -> str:
    now = now or dt.datetime.now(dt.timezone.utc)
    return RUN_PREFIX + now.strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


def size_results(spec: ProbeRunSpec, ranks: list[dict[str, Any]]) -> list[SizeResult]:
    """Combine the ranks' raw timings: per sample the slowest rank, then median and interval."""
    out = []
    for index, size in enumerate(spec.sizes):
        per_rank = [r["sizes"][index] for r in ranks]
        if any(p["bytes"] != size.bytes for p in per_rank):
            raise ValueError(f"ranks disagree on the size at position {index}")
        samples = [max(values) for values in zip(*(p["times_us"] for p in per_rank))]
        ci = median_ci(samples, spec.confidence)
        out.append(SizeResult(
            bytes=size.bytes, decode=size.decode, sources=list(size.sources), median_us=ci.median,
            ci_low_us=ci.low, ci_high_us=ci.high, ci_coverage=round(ci.coverage, 6), min_us=min(samples),
            samples=len(samples), correct=all(p["correct"] for p in per_rank),
            algbw_gb_s=size.bytes / (ci.median * 1e-6) / 1e9 if ci.median > 0 else 0.0,
            times_us=[round(t, 4) for t in samples]))
    return out


def variant_result(spec: ProbeRunSpec, variant: Variant, ranks: list[dict[str, Any]] | None,
                   error: str | None) -> VariantResult:
    if error is not None or not ranks:
        return VariantResult(name=variant.name, env=dict(variant.env), source=variant.source, status="failed",
                             error=error or "no rank reported")
    return VariantResult(name=variant.name, env=dict(variant.env), source=variant.source, status="ok",
                         sizes=size_results(spec, ranks))


def build_result(spec: ProbeRunSpec, variants: list[VariantResult], *, run_id: str,
                 environment: dict[str, Any]) -> ProbeResult:
    return ProbeResult(
        run_id=run_id, stack=spec.stack, created_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        complete=all(v.status == "ok" for v in variants), backend=spec.backend,
        mode=spec.mode, world_size=spec.world_size,
        hidden_size=spec.hidden_size, hidden_size_source=spec.hidden_size_source, dtype=spec.dtype,
        ops_per_graph=spec.ops_per_graph, samples=spec.samples, warmup_replays=spec.warmup_replays,
        confidence=spec.confidence, environment=environment, variants=variants)


def to_json(result: ProbeResult) -> str:
    return json.dumps(result.model_dump(mode="json"), indent=1) + "\n"


def load_probe(path: Path | str) -> ProbeResult:
    """A probe.json (or a probe-<id> directory holding one); ValueError says why it is not one."""
    # not at the top: the probe Job ships this module without the rest of sglab (only the CLI reads files)
    from sglab.core.errors import ConfigError
    from sglab.core.untrusted_json import JsonLimits, MiB, read_json

    path = Path(path)
    if path.is_dir():
        path = path / PROBE_FILE
    try:
        document = read_json(path, JsonLimits("a probe result", max_bytes=64 * MiB, max_depth=16,
                                              fix="give a probe.json sglab wrote (`sglab probe show --stack S`)"))
    except ConfigError as exc:
        raise ValueError(str(exc)) from None
    return parse_probe(document, str(path))


def parse_probe(document: Any, where: str = "document") -> ProbeResult:
    if not isinstance(document, dict) or document.get("kind") != PROBE_KIND:
        raise ValueError(f"{where}: not an NCCL probe result (kind {PROBE_KIND!r})")
    if document.get("schema_version") != PROBE_SCHEMA_VERSION:
        raise ValueError(f"{where}: probe schema_version {document.get('schema_version')!r}, "
                         f"this sglab reads {PROBE_SCHEMA_VERSION}")
    return ProbeResult.model_validate(document)


# The probe's table: per size, each variant's median [interval], and which variant wins by how much.
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


# Sweep pruning: skip NCCL variants the probe shows slower than NCCL's default at every decode size.
@dataclass(frozen=True)
class SkippedVariant:
    name: str
    reason: str


@dataclass
class PruneDecision:
    kept: list[str] = field(default_factory=list)
    skipped: list[SkippedVariant] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _tuned(env: Mapping[str, str]) -> dict[str, str]:
    return {k: str(v) for k, v in sorted(env.items()) if k.startswith("NCCL_") and k not in SGLANG_OWNED_KEYS}


def _match(probe: ProbeResult, name: str, env: Mapping[str, str]) -> VariantResult | None:
    """The probe's variant with the same NCCL settings (ignoring the SGLang-owned keys), else the same name."""
    wanted = _tuned(env)
    same_env = [v for v in probe.variants if _tuned(v.env) == wanted]
    if same_env:
        return same_env[0]
    return probe.variant(name)


def prune_variants(probe_result: ProbeResult, variants: Mapping[str, Mapping[str, str]],
                   margin: float = 0.05) -> PruneDecision:
    """`variants`: sweep variant name -> its NCCL env. Returns what to keep and what to skip, with reasons."""
    if margin < 0:
        raise ValueError("margin must be >= 0")
    decision = PruneDecision()
    default = probe_result.variant(DEFAULT_VARIANT)
    decode = probe_result.decode_sizes
    if default is None or default.status != "ok" or not decode:
        decision.kept = list(variants)
        decision.notes.append("the probe has no usable NCCL-default measurement at decode sizes; nothing pruned")
        return decision
    for name, env in variants.items():
        probed = _match(probe_result, name, env)
        if probed is None:
            decision.kept.append(name)
            decision.notes.append(f"{name}: not measured by probe {probe_result.run_id}; kept")
            continue
        if probed.status != "ok":
            decision.kept.append(name)
            decision.notes.append(f"{name}: failed in probe {probe_result.run_id} ({probed.error}); kept")
            continue
        if _tuned(probed.env) == _tuned(default.env):
            decision.kept.append(name)
            continue
        slower = []
        for size_bytes in decode:
            mine, ref = probed.size(size_bytes), default.size(size_bytes)
            if mine is None or ref is None or mine.ci_low_us <= ref.ci_high_us * (1 + margin):
                break
            slower.append(f"{human_bytes(size_bytes)} {mine.median_us:.1f} vs {ref.median_us:.1f} us")
        else:
            decision.skipped.append(SkippedVariant(name, (
                f"slower than {DEFAULT_VARIANT} by more than {margin:.0%} at every decode size in probe "
                f"{probe_result.run_id} (interval low end above the default's high end x {1 + margin:g}): "
                + "; ".join(slower))))
            continue
        decision.kept.append(name)
    return decision
