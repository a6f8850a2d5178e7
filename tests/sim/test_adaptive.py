"""--speculative-adaptive on the simulator: SGLang's EMA tier rule, its static fallback, and a real server
whose tier (read from /metrics) and decode rate follow the content's acceptance."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time

import httpx
import pytest

from sglab.sim.adaptive import AdaptiveConfig, AdaptiveConfigError, AdaptiveController, load_adaptive_config
from sglab.sim.cli_args import SimArgsError, parse_sim_args
from sglab.sim.profile import load_profile
from sglab.sim.server import server_info
from sglab.sim.state import SimState
from sglab.sim.testing import running_sim
from sglab.sim.timing import SpecSetup, steady_decode_tok_per_s
from sglab.sim.tokens import make_prompt

from .helpers import CHART_COMMON

EAGLE3 = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/shared/kimi-k2.5-eagle3"]


def shape(steps: int, topk: int = 1, draft: int | None = None) -> list[str]:
    return ["--speculative-num-steps", str(steps), "--speculative-eagle-topk", str(topk),
            "--speculative-num-draft-tokens", str(steps + 1 if draft is None else draft)]


def feed(controller: AdaptiveController, values: list[float]) -> list[int]:
    """The active tier after each batch (one request per batch, so the batch mean is the value)."""
    out = []
    for value in values:
        controller.observe([value])
        out.append(controller.current_steps)
    return out


# ---- the tier rule on synthetic accept lengths ------------------------------------------------------

def test_defaults_are_sglangs():
    config = AdaptiveConfig()
    assert config.candidate_steps == (1, 3, 7)
    assert (config.ema_alpha, config.warmup_batches, config.update_interval) == (0.2, 10, 5)
    assert (config.down_hysteresis, config.up_hysteresis) == (-0.25, 0.0)
    controller = AdaptiveController(config, 3)
    assert controller.ema_accept_len == 2.0  # starts at initial_steps - 1


def test_warmup_then_update_interval():
    """All drafts accepted from the first batch: no move during the 10 warm-up batches nor before the first
    update (batch 15); then up at 15 (3 -> 7); nothing between updates."""
    controller = AdaptiveController(AdaptiveConfig(), 3)
    tiers = feed(controller, [3] * 14)
    assert tiers == [3] * 14
    assert controller.ema_accept_len > 2.9  # it would have asked for 7 long before
    assert feed(controller, [3]) == [7]
    assert controller.switches == 1
    # at 7, a collapse to 0 accepted drafts: the EMA falls at once, the tier only at batches 20, 25, 30
    tiers = feed(controller, [0] * 15)
    assert tiers[:4] == [7] * 4  # batches 16-19
    assert tiers[4:14] == [3] * 10  # batch 20: EMA 2.965 * 0.8**5 = 0.97 <= 3 - 0.5 - 0.25, not <= 0.25;
    # batch 25: EMA 0.32 still holds 3 (down_hysteresis -0.25)
    assert tiers[14] == 1  # batch 30: EMA 0.10 -> 1


def test_multi_tier_moves_and_round_plus_one():
    """With alpha 1 the EMA is the batch mean: the tier is the smallest candidate above EMA + 0.5,
    i.e. about round(EMA) + 1, and a move may cross several tiers at once."""
    config = AdaptiveConfig(candidate_steps=(1, 2, 3, 4, 5, 6, 7), ema_alpha=1.0, warmup_batches=0, update_interval=1)
    controller = AdaptiveController(config, 1)
    assert feed(controller, [0.9]) == [2]
    assert feed(controller, [5.0]) == [6]  # 2 -> 6 in one update: round(5) + 1
    assert feed(controller, [1.0]) == [2]  # down several tiers: the next lower (1) needs <= 0.25
    assert feed(controller, [0.2]) == [1]


def test_hysteresis_down():
    """Down from 3 to 1 needs EMA <= 1 - 0.5 + down_hysteresis; SGLang's -0.25 holds 3 at EMA 0.4."""
    held = AdaptiveController(AdaptiveConfig(ema_alpha=1.0, warmup_batches=0, update_interval=1), 3)
    assert feed(held, [0.4, 0.3, 0.26]) == [3, 3, 3]
    assert feed(held, [0.25]) == [1]
    no_hysteresis = AdaptiveController(
        AdaptiveConfig(ema_alpha=1.0, warmup_batches=0, update_interval=1, down_hysteresis=0.0), 3)
    assert feed(no_hysteresis, [0.4]) == [1]


def test_hysteresis_up():
    """Up from 3 needs EMA > 3 - 0.5 + up_hysteresis (SGLang's 0: above 2.5)."""
    controller = AdaptiveController(AdaptiveConfig(ema_alpha=1.0, warmup_batches=0, update_interval=1), 3)
    assert feed(controller, [2.5]) == [3]
    assert feed(controller, [2.51]) == [7]
    stiff = AdaptiveController(
        AdaptiveConfig(ema_alpha=1.0, warmup_batches=0, update_interval=1, up_hysteresis=0.3), 3)
    assert feed(stiff, [2.7, 2.8]) == [3, 3]
    assert feed(stiff, [2.81]) == [7]


def test_batch_mean_and_empty_batch():
    controller = AdaptiveController(AdaptiveConfig(ema_alpha=1.0, warmup_batches=0, update_interval=1), 3)
    controller.observe([0, 0, 6])  # mean 2: stays at 3
    assert controller.current_steps == 3 and controller.ema_accept_len == 2.0
    assert controller.observe([]) is False and controller.batches == 1


def test_initial_steps_join_the_candidates():
    controller = AdaptiveController(AdaptiveConfig(), 5)
    assert controller.candidate_steps == (1, 3, 5, 7) and controller.current_steps == 5
    with pytest.raises(AdaptiveConfigError, match="at least 2 distinct"):
        AdaptiveController(AdaptiveConfig(candidate_steps=(4,)), 4)


# ---- the config file and the fallback --------------------------------------------------------------

def _args(*extra: str) -> list[str]:
    return ["--model-path", "m", *EAGLE3, *shape(3), "--speculative-adaptive", *extra]


def test_config_file_is_read(tmp_path):
    path = tmp_path / "adaptive.json"
    path.write_text(json.dumps({"candidate_steps": [2, 5], "ema_alpha": 0.5, "update_interval": 2,
                                "strategy": "ema"}))
    config = parse_sim_args(_args("--speculative-adaptive-config", str(path)), {})
    assert config.adaptive.candidate_steps == (2, 5) and config.adaptive.ema_alpha == 0.5
    assert config.adaptive.warmup_batches == 10  # unset keys keep SGLang's defaults
    assert config.server_args["speculative_adaptive"] is True
    assert config.server_args["speculative_adaptive_config"] == str(path)
    assert any("'strategy' is not read" in note for note in config.notes)


@pytest.mark.parametrize("content, message", [
    (None, "no such file"),
    ("{not json", "not valid JSON (line 1"),
    ("[1, 3, 7]", "must be a JSON object, got list"),
    ('{"candidate_steps": [0, 3]}', "candidate_steps must be a non-empty list of integers >= 1"),
    ('{"candidate_steps": [3, 99]}', "use at most 32"),
    ('{"ema_alpha": 0}', "ema_alpha must be > 0.0 and <= 1.0"),
    ('{"update_interval": 0}', "update_interval must be >= 1"),
    ('{"warmup_batches": 2.5}', "warmup_batches must be an integer"),
    ('{"down_hysteresis": "low"}', "down_hysteresis must be a number"),
    ('{"candidate_steps": [3]}', "at least 2 distinct"),
])
def test_bad_config_is_refused_naming_file_and_key(tmp_path, content, message):
    path = tmp_path / "adaptive.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(SimArgsError, match=re.escape(message)) as info:
        parse_sim_args(_args("--speculative-adaptive-config", str(path)), {})
    if "distinct" not in message:
        assert str(path) in str(info.value)


@pytest.mark.slow
def test_bad_config_exits_2_without_traceback(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "sglab.sim", *_args("--speculative-adaptive-config",
                                                                      str(tmp_path / "nope.json"))],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "no such file" in proc.stderr and "Traceback" not in proc.stderr


def test_load_without_path_gives_defaults():
    assert load_adaptive_config(None) == AdaptiveConfig()


@pytest.mark.parametrize("argv, reason", [
    ([*EAGLE3, *shape(3, topk=2, draft=4)], "eagle-topk is 2, not 1"),
    (["--speculative-algorithm", "NGRAM", *shape(3)], "algorithm NGRAM is not EAGLE/EAGLE3"),
    ([], "speculative_algorithm=None (only EAGLE/EAGLE3 are supported)"),
])
def test_fallback_to_static_is_logged_and_reported(argv, reason):
    config = parse_sim_args(["--model-path", "m", *argv, "--speculative-adaptive"], {})
    assert config.adaptive is None
    assert config.server_args["speculative_adaptive"] is False  # as SGLang resets it
    assert config.warnings == (f"speculative_adaptive disabled: {reason}. Falling back to static speculative params.",)
    info = server_info(SimState(config))
    assert info["speculative_adaptive"] is False
    if config.spec is not None:
        assert info["sglab_sim"]["speculative"]["adaptive"] is None
    assert info["sglab_sim"]["warnings"] == list(config.warnings)


def test_server_info_reports_adaptive():
    config = parse_sim_args(_args(), {})
    info = server_info(SimState(config))
    assert info["speculative_adaptive"] is True
    block = info["sglab_sim"]["speculative"]["adaptive"]
    assert block["candidate_steps"] == [1, 3, 7] and block["active_num_steps"] == 3
    assert block["active_num_draft_tokens"] == 4 and block["config"]["ema_alpha"] == 0.2
    static = server_info(SimState(parse_sim_args(["--model-path", "m", *EAGLE3, *shape(3)], {})))
    assert static["speculative_adaptive"] is False and static["sglab_sim"]["speculative"]["adaptive"] is None


# ---- a real server ---------------------------------------------------------------------------------

SCALE = 5
HIGH = "accept_prob_by_position=[0.95,0.95,0.95,0.95,0.95],accept_prob_tail=0.95"
LOW = "accept_prob_by_position=[0.1,0.1,0.1,0.1,0.1],accept_prob_tail=0.1"


def gauges(url: str) -> dict[str, float]:
    text = httpx.get(url + "/metrics", timeout=10).text
    return {m.group(1): float(m.group(2))
            for m in re.finditer(r"^sglang:(spec_num_steps|spec_num_draft_tokens)\{[^}]*\} (\S+)$", text, re.M)}


def generate(url: str, tokens: int) -> float:
    """One streamed request; its decode tok/s in model time ((tokens - 1) / (last - first event) / scale)."""
    payload = {"text": make_prompt(32), "sampling_params": {"max_new_tokens": tokens, "ignore_eos": True},
               "stream": True}
    stamps = []
    with httpx.stream("POST", url + "/generate", json=payload, timeout=60) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith("data: {"):
                stamps.append(time.perf_counter())
    return (tokens - 1) / (stamps[-1] - stamps[0]) / SCALE


def warm(url: str, rounds: int = 2, concurrency: int = 4, tokens: int = 256) -> None:
    """Bounded: `rounds` rounds of `concurrency` parallel requests (enough verify batches to settle)."""
    for _ in range(rounds):
        threads = [threading.Thread(target=generate, args=(url, tokens)) for _ in range(concurrency)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)


@pytest.mark.slow
def test_real_server_tier_follows_content_and_decode_rate_follows_the_model():
    env = {"SGLAB_SIM_TIME_SCALE": str(SCALE)}
    adaptive = CHART_COMMON + EAGLE3 + shape(3) + ["--speculative-adaptive"]
    with running_sim(adaptive + ["--sim-set", HIGH], env) as high, \
            running_sim(adaptive + ["--sim-set", LOW], env) as low:
        before = gauges(high)
        assert before == {"spec_num_steps": 0.0, "spec_num_draft_tokens": 0.0}  # set at the first decode log
        warm(high)
        warm(low, rounds=1, tokens=128)
        settled_high, settled_low = gauges(high), gauges(low)
        adaptive_rate = sorted(generate(high, 256) for _ in range(3))[1]
        info = httpx.get(high + "/server_info", timeout=10).json()
    assert settled_high == {"spec_num_steps": 7.0, "spec_num_draft_tokens": 8.0}
    assert settled_low == {"spec_num_steps": 1.0, "spec_num_draft_tokens": 2.0}
    block = info["sglab_sim"]["speculative"]["adaptive"]
    assert block["active_num_steps"] == 7 and block["switches"] == 1 and info["speculative_adaptive"] is True

    with running_sim(CHART_COMMON + EAGLE3 + shape(3) + ["--sim-set", HIGH], env) as static:
        static_rate = sorted(generate(static, 256) for _ in range(3))[1]
        assert gauges(static) == {"spec_num_steps": 3.0, "spec_num_draft_tokens": 4.0}
    profile = load_profile("default", {"accept_prob_by_position": [0.95] * 5, "accept_prob_tail": 0.95})
    model = (steady_decode_tok_per_s(profile, 1, SpecSetup(7, 1, 8), 1.0)
             / steady_decode_tok_per_s(profile, 1, SpecSetup(3, 1, 4), 1.0))
    measured = adaptive_rate / static_rate
    assert model > 1.4
    assert abs(measured / model - 1) < 0.08, (measured, model, adaptive_rate, static_rate)
