"""Pure parts of the load stage: schedule, prompts, summaries, live-flag comparison."""

from __future__ import annotations

from collections import Counter

import pytest

from sglab.config.arms import baseline_arm, candidate_arm
from sglab.config.loader import load_stack
from sglab.config.loadplan import PromptSpec
from sglab.load.prompts import build_prompts
from sglab.load.schedule import QUICK_PLAN, plan_for, prompt_offset, round_orders
from sglab.load.targets import live_mismatches
from sglab.load.summary import arm_level_summary, percentiles, round_sample
from sglab.schema.result import RequestSample
from sglab.sglang.client import ServerInfo
from sglab.sglang.flags import flag_key


def test_round_orders_are_seeded_and_balanced():
    arms = ["baseline", "candidate"]
    a = round_orders(arms, 0, 1, 6)
    assert a == round_orders(arms, 0, 1, 6)
    assert a != round_orders(arms, 1, 1, 6) or a != round_orders(arms, 0, 4, 6)
    for block in (a[0:2], a[2:4], a[4:6]):
        assert sorted(o[0] for o in block) == arms  # each arm first once per block
    four = ["b", "b+c", "c-c", "c"]
    orders = round_orders(four, 3, 1, 8)
    for position in range(4):
        assert Counter(o[position] for o in orders) == Counter({arm: 2 for arm in four})
    assert 0 <= prompt_offset(0, 1, 2, 10) < 10


def test_prompts_are_reproducible_and_within_the_length_range():
    spec = PromptSpec(source="random", count=20, input_len=40, range_ratio=0.5, seed=7)
    first, again = build_prompts(spec), build_prompts(spec)
    assert [p.text for p in first] == [p.text for p in again]
    assert all(20 <= p.approx_tokens <= 40 for p in first)
    other = build_prompts(PromptSpec(source="random", count=20, input_len=40, seed=8))
    assert [p.text for p in other] != [p.text for p in first]


def test_prompt_file(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text('{"prompt": "hello there"}\n\n{"text": "second"}\n')
    prompts = build_prompts(PromptSpec(source="file", file=str(path)))
    assert [p.text for p in prompts] == ["hello there", "second"]
    path.write_text('{"prompt": "ok"}\nnot json\n')
    from sglab.core.errors import ConfigError

    with pytest.raises(ConfigError, match="line 2"):
        build_prompts(PromptSpec(source="file", file=str(path)))


@pytest.mark.parametrize("levels, scale", [("1", "10"), ("1,4", "10"), ("1,16", "3"), ("1,32", "1.5")])
def test_quick_runs_the_simulators_as_fast_as_its_highest_level_still_measures(levels, scale):
    """--quick's 10x, or lower where the load generator would not keep up with the highest level's streams."""
    from sglab.cli import build_parser
    from sglab.cli.bench import build_request

    args = build_parser("bench").parse_args(["bench", "--stack", "eagle-nccl-ll", "--target", "sim", "--quick",
                                             "--concurrency", levels])
    assert build_request(args).sim_env["SGLAB_SIM_TIME_SCALE"] == scale


def test_quick_plan_and_overrides():
    loaded = load_stack("eagle-nccl-ll")
    quick = plan_for(loaded, quick=True)
    assert quick.rounds == QUICK_PLAN["rounds"] and quick.round_requests is None
    assert set(loaded.config.policy.levels) <= set(quick.concurrency)
    plan = plan_for(loaded, overrides={"round_requests": 5, "rounds": 2, "concurrency": [2]})
    assert plan.round_requests == 5 and plan.round_duration_s is None and plan.concurrency == [2]
    assert plan.max_new_tokens == loaded.config.load.max_new_tokens


def sample(arm, tokens=4, itl=(10.0, 10.0, 10.0), error=None, warmup=False, round_index=0, accept=None):
    return RequestSample(arm=arm, level=1, round_index=round_index, warmup=warmup, start_s=0.0,
                         output_tokens=tokens, expected_output_tokens=4, ttft_ms=50.0, e2e_ms=80.0,
                         itl_ms=list(itl), decode_tok_per_s=100.0, accept_length=accept, error=error)


def test_summaries_exclude_warmup_and_failures():
    samples = [sample("c", accept=2.0), sample("c", accept=1.0), sample("c", error="HTTP 500", tokens=0, itl=()),
               sample("c", warmup=True, round_index=-1, accept=3.0)]
    rounds = [round_sample([s for s in samples if not s.warmup], level=1, round_index=0, position=0, arm="c",
                           warmup=False, started_at_s=1.0, duration_s=2.0, server_accept_length=1.4),
              round_sample([samples[3]], level=1, round_index=-1, position=0, arm="c", warmup=True,
                           started_at_s=0.0, duration_s=1.0, server_accept_length=9.0)]
    assert rounds[0].requests == 3 and rounds[0].errors == 1 and rounds[0].output_tokens == 8
    summary = arm_level_summary(samples, rounds)
    assert summary.requests == 3 and summary.errors == 1 and summary.output_tokens == 8
    assert summary.duration_s == 2.0 and summary.output_tok_per_s == 4.0
    assert summary.accept_length.client_mean == 1.5 and summary.accept_length.server_mean == 1.4
    assert summary.itl_ms.p50 == 10.0 and summary.ttft_ms.p99 == 50.0
    assert percentiles([]).p50 is None


def test_live_flags_compare_every_declared_flag_and_nccl():
    stack = load_stack("eagle-nccl-ll").config
    cand = candidate_arm(stack)
    from sglab.config.arms import parse_launch_args

    declared = parse_launch_args(cand.args)
    info = {flag_key(k): (True if v == "true" else v) for k, v in declared.items()}
    info["port"] = 12345  # substituted per target, never compared
    info["mem_fraction_static"] = 0.88
    info["nccl_env"] = {k: v for k, v in cand.env.items() if k.startswith("NCCL_")}
    assert live_mismatches(cand, ServerInfo("u", info)) == []
    wrong = dict(info, speculative_num_steps=3, nccl_env={**info["nccl_env"], "NCCL_PROTO": "Simple"})
    found = live_mismatches(cand, ServerInfo("u", wrong))
    assert any("--speculative-num-steps" in m for m in found)
    assert any("NCCL_PROTO" in m for m in found)
    nested = {k: v for k, v in info.items() if k != "nccl_env"}
    nested["sglab_sim"] = {"nccl_env": {}}  # where our simulator reports it
    assert any("NCCL_PROTO" in m for m in live_mismatches(cand, ServerInfo("u", nested)))
    base = baseline_arm(stack)
    found = live_mismatches(base, ServerInfo("u", info))
    assert any("speculative decoding" in m for m in found)


def test_server_accept_length_from_either_era():
    assert ServerInfo("u", {"internal_states": [{"avg_spec_accept_length": 2.5}]}).accept_length == 2.5
    assert ServerInfo("u", {"avg_spec_accept_length": 1.5}).accept_length == 1.5
    assert ServerInfo("u", {"internal_states": [{}]}).accept_length is None


def test_duration_rounds_count_only_tokens_inside_the_window():
    # starts at 1.0 s, first token at 1.05 s, then one token every 10 ms: 4 tokens by 1.08 s
    s = RequestSample(arm="c", level=1, round_index=0, start_s=1.0, output_tokens=10, expected_output_tokens=10,
                      ttft_ms=50.0, e2e_ms=140.0, itl_ms=[10.0] * 9, decode_tok_per_s=100.0)
    from sglab.load.summary import tokens_before

    assert tokens_before(s, 1.0) == 0 and tokens_before(s, 1.0801) == 4 and tokens_before(s, 9.0) == 10
    late = s.model_copy(update={"start_s": 1.5})
    r = round_sample([s, late], level=1, round_index=0, position=0, arm="c", warmup=False, started_at_s=1.0,
                     duration_s=0.7, server_accept_length=None, window_s=0.58)
    assert r.output_tokens == 20 and r.window_output_tokens == 10 + 4
    assert r.output_tok_per_s == pytest.approx(14 / 0.58)
    summary = arm_level_summary([s, late], [r])
    assert summary.output_tok_per_s == pytest.approx(14 / 0.58) and summary.output_tokens == 20
