"""The simulator's acceptance follows the prompt's content: classifier, per-category profiles, position
decay, natural stopping, and per-category accept lengths measured by a real client against the truth."""

from __future__ import annotations

import random
from collections import Counter

import httpx
import pytest

from sglab.config.loadplan import PromptSpec
from sglab.load.datasets import load_suite
from sglab.load.prompts import build_prompts
from sglab.sim import acceptance, timing
from sglab.sim.acceptance import (ACCEPT_DECAY_START_TOKENS, CATEGORY_PROFILES, AcceptanceModel, ContentAcceptance,
                                  position_factor)
from sglab.sim.tokens import CATEGORIES, RANDOM, classify
from sglab.sim.profile import SimProfile
from sglab.sim.testing import running_sim
from sglab.sim.tokens import chat_prompt_key, make_prompt, prompt_content

from .helpers import CHART_COMMON, TUNED_NCCL

PROFILE = SimProfile()
FIVE_STEP = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/shared/kimi-k2.5-eagle3",
             "--speculative-num-steps", "5", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "6"]


def test_suite_prompts_are_classified_as_their_label():
    suite = load_suite()
    hits = Counter(classify(r.text) == r.category for r in suite)
    assert hits[True] / len(suite) >= 0.95, hits


def test_random_words_and_token_ids_stay_random():
    """Today's prompts (runner vocabulary, make_prompt, test strings, token ids) keep the calibrated acceptance."""
    texts = [p.text for seed in range(4) for p in build_prompts(PromptSpec(source="random", count=100, seed=seed))]
    texts += [make_prompt(n, seed) for n in (1, 7, 40, 300, 2000) for seed in range(20)]
    texts += ["x", "a b c", "hello from locust", "stop early please", ""]
    assert {classify(t) for t in texts} == {RANDOM}
    assert prompt_content("[1, 2, 3]") == ("", False)


# written for this test, not from the suite's templates
HELD_OUT = [
    ("How can I make my Rust program compile faster? It takes 4 minutes on every change.", "code"),
    ("```go\nfunc main() {\n    fmt.Println(\"hi\")\n}\n```\nWhy does this print nothing in my container?", "code"),
    ("What is 17% of 2,340? Please calculate it step by step.", "maths"),
    ("If 3y - 7 = 2y + 5, solve for y.", "maths"),
    ("Pull the names and phone numbers out of this text as JSON: Ana 555-1234, Bo 555-9876.", "extraction"),
    ("Please summarize this thread for me: the team argued about tabs versus spaces for an hour.", "summarisation"),
    ("Translate 'good morning, see you tomorrow' into Korean.", "translation"),
    ("¿Dónde está la estación de tren? Necesito traducción al inglés, por favor.", "translation"),
    ("What should I cook tonight? I'm tired and have eggs and bread.", "chat"),
    ("Do you think it's worth learning to drive in a big city?", "chat"),
]


def test_held_out_prompts_are_mostly_right():
    right = [classify(text) == label for text, label in HELD_OUT]
    assert sum(right) >= 9, [(t[:30], classify(t)) for t, _ in HELD_OUT]


def test_long_prompts_are_long_context():
    document = " ".join(f"Paragraph {i} talks about the harbour, the market and the old bridge." for i in range(200))
    assert classify(document + "\n\nWhat is said about the bridge?") == "long-context"


def test_chat_keys_carry_contents_and_the_template():
    key = chat_prompt_key(["system: You are terse.", "user: Write a Python function `add` that adds two ints."])
    text, templated = prompt_content(key)
    assert templated and classify(text) == "code" and "system:" not in text
    assert prompt_content("<|im_start|>user\nhi<|im_end|>")[1] is True
    assert prompt_content("Write a function.")[1] is False


def test_random_keeps_the_calibrated_profile():
    for depth, topk in ((2, 1), (5, 1), (3, 2)):
        content = ContentAcceptance(PROFILE.accept_prob_by_position, PROFILE.accept_prob_tail, depth=depth, topk=topk)
        calibrated = AcceptanceModel.build(PROFILE.accept_prob_by_position, PROFILE.accept_prob_tail,
                                           depth=depth, topk=topk)
        assert content.model(RANDOM, True) == content.model(RANDOM, False) == calibrated


def test_category_ordering_and_the_template_effect():
    content = ContentAcceptance(PROFILE.accept_prob_by_position, PROFILE.accept_prob_tail, depth=5)
    expected = {c: content.model(c, True).expected_accept_length() for c in CATEGORIES}
    assert expected["code"] > expected["maths"] > expected["chat"] > expected["translation"]
    # random text keeps the calibration, which the suite's mix reproduces (tests/sim/test_acceptance_suite.py),
    # so it sits inside the real categories' spread: above the lowest, below code
    assert expected["translation"] < expected[RANDOM] < expected["code"]
    assert expected[RANDOM] == pytest.approx(2.1, abs=0.01)
    assert set(CATEGORY_PROFILES) | {RANDOM} == set(CATEGORIES)
    for category in CATEGORY_PROFILES:
        assert content.model(category, False).expected_accept_length() < expected[category]


def test_acceptance_decays_slowly_after_the_onset():
    assert position_factor(0) == position_factor(ACCEPT_DECAY_START_TOKENS) == 1.0
    assert 0.9 < position_factor(ACCEPT_DECAY_START_TOKENS + 512) < 1.0
    assert position_factor(ACCEPT_DECAY_START_TOKENS + acceptance.ACCEPT_DECAY_HALF_LIFE_TOKENS) == pytest.approx(0.5)
    model = timing.acceptance_model(PROFILE, timing.SpecSetup(5, 1, 6))
    early = sum(model.sample_accepted_drafts(random.Random(i)) for i in range(4000))
    same = sum(model.sample_accepted_drafts(random.Random(i), position_factor(100)) for i in range(4000))
    late = sum(model.sample_accepted_drafts(random.Random(i), position_factor(8000)) for i in range(4000))
    assert same == early and late < 0.6 * early  # bit-identical before the onset


@pytest.fixture(scope="module")
def five_step_url():
    with running_sim(CHART_COMMON + FIVE_STEP, {**TUNED_NCCL, "SGLAB_SIM_TIME_SCALE": "50"}) as url:
        yield url


@pytest.mark.slow
def test_natural_stopping_follows_the_category(five_step_url):
    suite = load_suite()
    code = [r for r in suite if r.category == "code"][:8]
    lengths, reasons = [], set()
    for record in code:
        body = {"model": "m", **record.chat_body(natural_stop=True), "max_tokens": 2000}
        result = httpx.post(five_step_url + "/v1/chat/completions", json=body, timeout=60).json()
        lengths.append(result["usage"]["completion_tokens"])
        reasons.add(result["choices"][0]["finish_reason"])
    low, high = CATEGORY_PROFILES["code"].natural_tokens
    assert reasons == {"stop"} and all(low <= n <= high for n in lengths) and len(set(lengths)) > 1
    capped = httpx.post(five_step_url + "/v1/chat/completions", json={
        "model": "m", **code[0].chat_body(natural_stop=True), "max_tokens": 20}, timeout=60).json()
    assert (capped["usage"]["completion_tokens"], capped["choices"][0]["finish_reason"]) == (20, "length")


def _measure(url: str, records, max_tokens: int) -> float:
    """Σ correct drafts / Σ verify passes + 1 from the client's own sglext details (the per-cycle mean)."""
    correct = verify = 0
    for record in records:
        body = {"model": "m", **record.chat_body(), "max_tokens": max_tokens, "return_spec_tokens_details": True}
        details = httpx.post(url + "/v1/chat/completions", json=body,
                             timeout=60).json()["sglext"]["spec_tokens_details"]
        correct += details["spec_num_correct_drafts"]
        verify += details["spec_verify_ct"]
    return 1 + correct / verify


@pytest.mark.slow
def test_two_categories_measured_by_a_client_match_the_truth(five_step_url):
    """Code and translation prompts from the suite, 5-step EAGLE: the client's per-category accept length is
    within 3% of the simulator's E[a] for that category, and the two are clearly apart."""
    suite = load_suite()
    content = ContentAcceptance(PROFILE.accept_prob_by_position, PROFILE.accept_prob_tail, depth=5)
    measured = {}
    for category in ("code", "translation"):
        records = [r for r in suite if r.category == category][:24]
        measured[category] = _measure(five_step_url, records, 240)
        truth = content.model(category, True).expected_accept_length()
        assert measured[category] == pytest.approx(truth, rel=0.03), (category, measured[category], truth)
    assert measured["code"] - measured["translation"] > 0.5
