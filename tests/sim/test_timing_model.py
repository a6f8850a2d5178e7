"""The timing model's pure functions against the article's calibration points (no HTTP)."""

from __future__ import annotations

import random

import pytest

from sglab.sim import timing
from sglab.sim.acceptance import AcceptanceModel
from sglab.sim.profile import ProfileError, SimProfile, load_profile, parse_overrides
from sglab.sim.timing import SpecSetup

PROFILE = SimProfile()
TUNED = {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring", "NCCL_P2P_LEVEL": "SYS"}
DEFAULT_COMM = timing.comm_factor(PROFILE, {}, disable_custom_all_reduce=True)
TUNED_COMM = timing.comm_factor(PROFILE, TUNED, disable_custom_all_reduce=True)
FIVE_STEP = SpecSetup(num_steps=5, topk=1, num_draft_tokens=6)
TWO_STEP = SpecSetup(num_steps=2, topk=1, num_draft_tokens=3)


def tok_s(batch: int, spec: SpecSetup | None, comm: float) -> float:
    return timing.steady_decode_tok_per_s(PROFILE, batch, spec, comm)


@pytest.mark.parametrize(("spec", "comm", "target"), [
    (None, DEFAULT_COMM, 88.8),
    (None, TUNED_COMM, 91.0),
    (FIVE_STEP, DEFAULT_COMM, 75.0),
    (TWO_STEP, TUNED_COMM, 94.0),
])
def test_calibration_points_at_concurrency_1(spec, comm, target):
    assert tok_s(1, spec, comm) == pytest.approx(target, rel=0.005)


def test_accept_lengths_match_the_article():
    assert timing.acceptance_model(PROFILE, FIVE_STEP).expected_accept_length() == pytest.approx(2.1, abs=0.01)
    assert timing.acceptance_model(PROFILE, TWO_STEP).expected_accept_length() == pytest.approx(1.69, abs=0.02)


def test_verify_is_fixed_overhead_dominated_and_nccl_sensitive():
    verify6 = timing.verify_ms(PROFILE, 1, 6, DEFAULT_COMM)
    verify3 = timing.verify_ms(PROFILE, 1, 3, DEFAULT_COMM)
    verify3_tuned = timing.verify_ms(PROFILE, 1, 3, TUNED_COMM)
    assert 25.0 <= verify6 <= 28.0
    assert 1 - verify3 / verify6 == pytest.approx(0.11, abs=0.01)
    assert 1 - verify3_tuned / verify3 == pytest.approx(0.27, abs=0.01)
    cycle = timing.spec_cycle_ms(PROFILE, 1, FIVE_STEP, DEFAULT_COMM)
    drafts = FIVE_STEP.num_steps * timing.draft_pass_ms(PROFILE, 1, 1)
    assert drafts / cycle < 0.05 and (cycle - drafts) / cycle > 0.95  # the article: draft < 5% of the cycle


def test_speculative_advantage_shrinks_and_crosses_over_with_concurrency():
    gains = {b: tok_s(b, TWO_STEP, TUNED_COMM) / tok_s(b, None, TUNED_COMM) - 1 for b in (1, 4, 8, 16, 48)}
    assert gains[1] == pytest.approx(94.0 / 91.0 - 1, abs=0.003)
    assert gains[1] > gains[4] > 0 > gains[16] > gains[48]
    replay = {b: tok_s(b, TWO_STEP, TUNED_COMM) / tok_s(b, None, DEFAULT_COMM) - 1 for b in (1, 48)}
    assert replay[1] == pytest.approx(94.0 / 88.8 - 1, abs=0.003) and replay[48] < 0
    assert all(tok_s(b, FIVE_STEP, DEFAULT_COMM) < tok_s(b, None, DEFAULT_COMM) for b in (1, 4, 16, 48))


def test_comm_factor_reads_nccl_env_and_custom_all_reduce():
    assert DEFAULT_COMM == 1.0
    assert TUNED_COMM == pytest.approx(0.45, abs=0.001)
    assert timing.comm_factor(PROFILE, {}, disable_custom_all_reduce=False) == PROFILE.custom_all_reduce_factor
    assert timing.comm_factor(PROFILE, {"NCCL_PROTO": "^LL"}, True) == 1.0
    assert timing.comm_factor(PROFILE, {"NCCL_PROTO": "LL128,LL"}, True) == PROFILE.nccl_proto_factor["LL"]


def test_costs_grow_with_batch_and_tokens_per_request():
    assert timing.decode_step_ms(PROFILE, 16, 1.0) > timing.decode_step_ms(PROFILE, 1, 1.0)
    assert timing.verify_ms(PROFILE, 8, 3, 1.0) > timing.verify_ms(PROFILE, 4, 3, 1.0)
    assert timing.target_forward_ms(PROFILE, 24, 1.0) == pytest.approx(
        timing.target_forward_ms(PROFILE, 1, 1.0) + 23 * (PROFILE.target_per_token_compute_ms
                                                          + PROFILE.target_per_token_comm_ms))
    assert timing.prefill_ms(PROFILE, 512, 1.0, False) > timing.prefill_ms(PROFILE, 256, 1.0, False)


def test_acceptance_sampling_is_seeded_and_matches_its_expectation():
    model = timing.acceptance_model(PROFILE, FIVE_STEP)
    assert sum(model.distribution()) == pytest.approx(1.0)
    draws = [model.sample_accepted_drafts(random.Random(7)) for _ in range(3)]
    assert len(set(draws)) == 1
    rng = random.Random(1)
    mean = sum(model.sample_accepted_drafts(rng) + 1 for _ in range(40000)) / 40000
    assert mean == pytest.approx(model.expected_accept_length(), rel=0.01)
    wide = AcceptanceModel.build((0.5,), 0.5, depth=3, topk=4)
    assert wide.expected_accept_length() > AcceptanceModel.build((0.5,), 0.5, depth=3).expected_accept_length()


def test_profile_overrides_and_errors(tmp_path):
    assert parse_overrides("accept_prob_tail=0.7,accept_prob_by_position=[0.5, 0.6]") == {
        "accept_prob_tail": 0.7, "accept_prob_by_position": [0.5, 0.6]}
    profile = load_profile("default", {"draft_fixed_ms": 1.5})
    assert profile.draft_fixed_ms == 1.5 and profile.verify_fixed_comm_ms == PROFILE.verify_fixed_comm_ms
    path = tmp_path / "p.yaml"
    path.write_text("scheduler_overhead_ms: 0.5\n")
    assert load_profile(str(path)).scheduler_overhead_ms == 0.5
    with pytest.raises(ProfileError, match="draft_fixd_ms"):
        load_profile("default", {"draft_fixd_ms": 1})
    with pytest.raises(ProfileError, match="neither a built-in"):
        load_profile("no-such-profile")


def test_ngram_has_no_draft_passes():
    ngram = SpecSetup(num_steps=2, topk=1, num_draft_tokens=3, kind="ngram")
    gap = timing.spec_cycle_ms(PROFILE, 4, TWO_STEP, 1.0) - timing.spec_cycle_ms(PROFILE, 4, ngram, 1.0)
    lookup = PROFILE.ngram_lookup_fixed_ms + 4 * PROFILE.ngram_lookup_per_request_ms  # the CPU trie match instead
    assert gap == pytest.approx(2 * timing.draft_pass_ms(PROFILE, 4, 1) - lookup)
