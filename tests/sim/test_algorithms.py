"""The simulator's speculative algorithms beyond the EAGLE family: STANDALONE and NGRAM modelled with SGLang's
rules, the ones it does not model refused with a clear message (docs/simulator.md)."""

from __future__ import annotations

import pytest

from sglab.sim import timing
from sglab.sim.adaptive import SpecTiers
from sglab.sim.cli_args import SimArgsError, parse_sim_args
from sglab.sim.acceptance import repetition
from sglab.sim.profile import SimProfile

PROFILE = SimProfile()
BASE = ["--model-path", "m", "--max-running-requests", "48"]


def spec_of(*extra: str):
    return parse_sim_args(BASE + list(extra), env={})


def test_ngram_is_resolved_as_sglang_does_topk_from_the_breadth_default_draft_tokens_12() -> None:
    config = spec_of("--speculative-algorithm", "NGRAM")
    assert (config.spec.kind, config.spec.topk, config.spec.num_draft_tokens, config.spec.num_steps) == \
        ("ngram", 10, 12, 1)
    args = config.server_args
    assert (args["speculative_eagle_topk"], args["speculative_num_draft_tokens"]) == (10, 12)
    assert any("set to 12 by default for ngram" in n for n in config.notes)
    tuned = spec_of("--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens", "16",
                    "--speculative-ngram-max-bfs-breadth", "4")
    assert (tuned.spec.topk, tuned.spec.num_steps, tuned.spec.depth) == (4, 4, 15)


def test_ngram_refuses_what_sglang_refuses() -> None:
    with pytest.raises(SimArgsError, match="external-sam-budget"):
        spec_of("--speculative-algorithm", "NGRAM", "--speculative-ngram-external-corpus-path", "/c.jsonl")


def test_ngram_acceptance_follows_the_repetition_of_the_context() -> None:
    assert repetition("the quick brown fox jumps over the lazy dog") == 0.0
    copied = "def area(r): return 3.14 * r * r\n" * 6
    assert repetition(copied) > 0.7
    spec = spec_of("--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens", "8").spec
    tiers = SpecTiers(PROFILE, spec, None)
    plain = tiers.model("chat", True, repetition("tell me about your day and what you enjoy doing"))
    repetitive = tiers.model("code", True, repetition(copied))
    assert plain.expected_accept_length() < 1.2 < 2.5 < repetitive.expected_accept_length()
    # no draft passes, no draft prefill: only the CPU lookup before the verify
    cycle = timing.spec_cycle_ms(PROFILE, 1, spec, 1.0)
    assert cycle == pytest.approx(PROFILE.scheduler_overhead_ms + PROFILE.ngram_lookup_fixed_ms +
                                  PROFILE.ngram_lookup_per_request_ms + timing.verify_ms(PROFILE, 1, 8, 1.0))
    assert timing.prefill_ms(PROFILE, 1000, 1.0, "ngram") < timing.prefill_ms(PROFILE, 1000, 1.0, "eagle")


def test_standalone_is_a_small_draft_model_slower_to_draft_and_less_accepted_than_eagle3() -> None:
    shape = ["--speculative-draft-model-path", "d", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
             "--speculative-num-draft-tokens", "4"]
    eagle = spec_of("--speculative-algorithm", "EAGLE3", *shape).spec
    standalone = spec_of("--speculative-algorithm", "STANDALONE", *shape).spec
    assert standalone.kind == "standalone" and eagle.kind == "eagle"
    assert timing.spec_cycle_ms(PROFILE, 1, standalone, 1.0) > timing.spec_cycle_ms(PROFILE, 1, eagle, 1.0)
    assert timing.acceptance_model(PROFILE, standalone).expected_accept_length() < \
        timing.acceptance_model(PROFILE, eagle).expected_accept_length()
    assert spec_of("--speculative-algorithm", "STANDALONE", "--speculative-draft-model-path", "d").spec.num_steps == 3
    with pytest.raises(SimArgsError, match="needs --speculative-draft-model-path"):
        spec_of("--speculative-algorithm", "STANDALONE")


@pytest.mark.parametrize("algorithm", ["DFLASH", "DSPARK", "UNO"])
def test_algorithms_the_simulator_does_not_model_are_refused_with_the_fix(algorithm: str) -> None:
    with pytest.raises(SimArgsError) as err:
        spec_of("--speculative-algorithm", algorithm, "--speculative-draft-model-path", "d")
    text = str(err.value)
    assert f"--speculative-algorithm {algorithm} is accepted by SGLang but not modelled by the simulator" in text
    assert "--target" in text and "STANDALONE, NGRAM" in text
