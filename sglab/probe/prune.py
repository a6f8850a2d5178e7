"""Sweep pruning: skip NCCL variants the probe shows slower than NCCL's default at every decode size.

Deliberately conservative (a skipped variant is a win nobody will find): a variant is skipped only when,
at every decode-path size, its interval's low end is above the default's high end by more than `margin`.
Variants the probe did not measure (or that failed there) are kept, with the reason saying so; the
sweep's opt-out skips calling this at all.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from sglab.probe.result import ProbeResult, VariantResult
from sglab.probe.sizes import human_bytes
from sglab.probe.spec import DEFAULT_VARIANT, SGLANG_OWNED_KEYS


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
