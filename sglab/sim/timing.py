"""The timing model: pure functions from (profile, server setup, batch) to iteration durations in ms.

One scheduler iteration is either a prefill of newly admitted requests or one decode step for every
running request (baseline), or one speculative cycle for every running request:
  decode step  = scheduler overhead + target forward over B tokens
  EAGLE cycle  = scheduler overhead + num_steps draft passes + verify
  STANDALONE   = the same with a separate small draft model's passes (a whole model, not one layer)
  NGRAM        = scheduler overhead + the n-gram trie lookup (CPU, no draft forward) + verify
  verify       = target forward over B x num_draft_tokens tokens + verify overhead (per draft position)
Each target forward and verify overhead is split into compute and communication; only communication is
scaled by the NCCL environment and custom all-reduce. docs/simulator.md derives the default constants.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from sglab.sglang import nccl
from sglab.sim.acceptance import AcceptanceModel, ngram_model
from sglab.sim.profile import SimProfile


SpecKind = Literal["eagle", "standalone", "ngram"]


@dataclass(frozen=True)
class SpecSetup:
    """The candidate's speculative shape as the server resolved it, and how it drafts."""

    num_steps: int
    topk: int
    num_draft_tokens: int
    kind: SpecKind = "eagle"  # eagle: a draft head on the target; standalone: a small model; ngram: no model
    max_trie_depth: int = 18  # NGRAM: the longest match its trie proposes

    @property
    def draft_model(self) -> bool:
        """NGRAM drafts from a CPU-side n-gram trie: no draft forward passes, no draft prefill."""
        return self.kind != "ngram"

    @property
    def depth(self) -> int:
        """Draft tokens one verify can accept: a chain of num_steps (EAGLE family); NGRAM's trie proposes a
        match of up to num_draft_tokens - 1 tokens (its breadth spends the rest of the verify window)."""
        if self.kind == "ngram":
            return max(0, min(self.num_draft_tokens - 1, self.max_trie_depth))
        return max(0, min(self.num_steps, self.num_draft_tokens - 1))


def _list_factor(name: str, value: str | None, table: Mapping[str, float]) -> float:
    """NCCL_PROTO/NCCL_ALGO: a list (NCCL picks the best of them), or '^' exclusions (auto), read by NCCL's rules."""
    var = nccl.nccl_var(name)
    if not value or var is None:
        return 1.0
    try:
        negated, items = nccl.parse_list(value, var.choices)
    except nccl.NcclValueError:
        return 1.0  # a value NCCL would not use: it picks its own
    if negated:
        return 1.0
    return min(table.get(item, 1.0) for item in items)


def comm_factor(profile: SimProfile, nccl_env: Mapping[str, str], disable_custom_all_reduce: bool) -> float:
    """Multiplier on every communication part, from the NCCL_* env the server process sees."""
    factor = _list_factor("NCCL_PROTO", nccl_env.get("NCCL_PROTO"), profile.nccl_proto_factor)
    factor *= _list_factor("NCCL_ALGO", nccl_env.get("NCCL_ALGO"), profile.nccl_algo_factor)
    factor *= profile.nccl_p2p_level_factor.get(nccl_env.get("NCCL_P2P_LEVEL", ""), 1.0)
    if not disable_custom_all_reduce:
        factor *= profile.custom_all_reduce_factor
    return factor


def target_forward_ms(profile: SimProfile, tokens: int, comm: float) -> float:
    compute = profile.target_fixed_compute_ms + profile.target_per_token_compute_ms * tokens
    communication = profile.target_fixed_comm_ms + profile.target_per_token_comm_ms * tokens
    return compute + communication * comm


def decode_step_ms(profile: SimProfile, batch: int, comm: float) -> float:
    return profile.scheduler_overhead_ms + target_forward_ms(profile, batch, comm)


def draft_pass_ms(profile: SimProfile, batch: int, topk: int, kind: SpecKind = "eagle") -> float:
    if kind == "standalone":
        return profile.standalone_draft_fixed_ms + profile.standalone_draft_per_token_ms * batch * topk
    return profile.draft_fixed_ms + profile.draft_per_token_ms * batch * topk


def verify_ms(profile: SimProfile, batch: int, num_draft_tokens: int, comm: float) -> float:
    overhead_compute = profile.verify_fixed_compute_ms + profile.verify_per_draft_token_compute_ms * num_draft_tokens
    overhead_comm = profile.verify_fixed_comm_ms + profile.verify_per_draft_token_comm_ms * num_draft_tokens
    return target_forward_ms(profile, batch * num_draft_tokens, comm) + overhead_compute + overhead_comm * comm


def spec_cycle_ms(profile: SimProfile, batch: int, spec: SpecSetup, comm: float) -> float:
    if spec.kind == "ngram":
        drafting = profile.ngram_lookup_fixed_ms + profile.ngram_lookup_per_request_ms * batch
    else:
        drafting = spec.num_steps * draft_pass_ms(profile, batch, spec.topk, spec.kind)
    return profile.scheduler_overhead_ms + drafting + verify_ms(profile, batch, spec.num_draft_tokens, comm)


def prefill_ms(profile: SimProfile, prompt_tokens: int, comm: float, draft: bool | SpecKind | None) -> float:
    """One extend iteration over all admitted prompts; its sampled token is each request's first output.
    `draft`: the speculative kind whose draft also extends over the prompt (True: eagle; NGRAM/None: none)."""
    duration = (profile.scheduler_overhead_ms + profile.prefill_fixed_ms + profile.prefill_per_token_ms * prompt_tokens
                + (profile.target_fixed_comm_ms + profile.target_per_token_comm_ms * prompt_tokens) * comm)
    kind = "eagle" if draft is True else draft or None
    if kind == "eagle":
        duration += profile.draft_fixed_ms + profile.draft_prefill_per_token_ms * prompt_tokens
    elif kind == "standalone":
        duration += profile.standalone_draft_fixed_ms + profile.standalone_draft_prefill_per_token_ms * prompt_tokens
    return duration


def acceptance_model(profile: SimProfile, spec: SpecSetup) -> AcceptanceModel:
    """The profile's acceptance for random text (NGRAM: text with no repetition, sim/acceptance.py)."""
    if spec.kind == "ngram":
        return ngram_model(profile, spec.depth, repetition=0.0)
    factor = profile.standalone_accept_factor if spec.kind == "standalone" else 1.0
    return AcceptanceModel.build(profile.accept_prob_by_position, profile.accept_prob_tail,
                                 depth=spec.depth, topk=spec.topk, factor=factor)


def iteration_ms(profile: SimProfile, batch: int, spec: SpecSetup | None, comm: float) -> float:
    """One decode iteration for a batch: a plain step, or an EAGLE cycle."""
    if spec is None:
        return decode_step_ms(profile, batch, comm)
    return spec_cycle_ms(profile, batch, spec, comm)


def steady_decode_tok_per_s(profile: SimProfile, batch: int, spec: SpecSetup | None, comm: float) -> float:
    """Per-request decode tok/s once all `batch` requests are decoding (no truncation, no prefill)."""
    tokens_per_iteration = 1.0 if spec is None else acceptance_model(profile, spec).expected_accept_length()
    return tokens_per_iteration * 1000.0 / iteration_ms(profile, batch, spec, comm)
