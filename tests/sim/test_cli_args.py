"""`sglab sim` parses exactly what our charts render for each shipped stack, like SGLang would."""

from __future__ import annotations

import subprocess
import sys

import pytest

from sglab.config import baseline_arm, candidate_arm, load_stack
from sglab.core.paths import list_stacks
from sglab.sim.cli_args import SimArgsError, parse_sim_args

from .helpers import CHART_COMMON


@pytest.mark.parametrize("stack_name", list_stacks())
def test_rendered_chart_args_start_the_sim(stack_name):
    stack = load_stack(stack_name).config
    for arm in (baseline_arm(stack), candidate_arm(stack)):
        config = parse_sim_args(list(arm.args), env=arm.env)
        assert config.server_args["tp_size"] == stack.server.tp_size
        assert config.nccl_env == {k: v for k, v in arm.env.items() if k.startswith("NCCL_")}
        assert (config.spec is not None) == arm.speculative
        if arm.speculative:
            spec = stack.candidate.speculative
            assert (config.spec.num_steps, config.spec.num_draft_tokens) == (spec.num_steps, spec.num_draft_tokens)


def test_sim_env_from_a_sim_stack_is_read():
    stack = load_stack("sim").config
    arm = candidate_arm(stack)
    assert arm.command == ("sglab", "sim")
    config = parse_sim_args(list(arm.args), env=arm.env)
    assert config.seed == stack.sim.seed and config.time_scale == stack.sim.time_scale
    assert config.profile_name == stack.sim.profile and config.warmup_s == stack.sim.warmup_s


def test_unknown_flags_are_echoed():
    config = parse_sim_args(CHART_COMMON
                            + ["--enable-torch-compile", "--cuda-graph-bs-decode=1,2", "--chat-template", "x"],
                            env={})
    assert config.server_args["enable_torch_compile"] is True
    assert config.server_args["cuda_graph_bs_decode"] == "1,2"
    assert config.server_args["chat_template"] == "x"


def test_sglang_rules():
    eagle = ["--model-path", "m", "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "d"]
    config = parse_sim_args(eagle + ["--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
                                     "--speculative-num-draft-tokens", "8"], env={})
    assert config.max_running_requests == 48  # forced for EAGLE when unset
    assert config.server_args["speculative_num_draft_tokens"] == 4  # topk 1: steps + 1
    auto = parse_sim_args(eagle, env={})
    assert (auto.spec.num_steps, auto.spec.topk, auto.spec.num_draft_tokens) == (3, 1, 4)
    assert parse_sim_args(["--model-path", "m", "--speculative-algorithm", "NEXTN", "--speculative-draft-model-path",
                           "d"], env={}).server_args["speculative_algorithm"] == "EAGLE"
    with pytest.raises(SimArgsError, match="all three"):
        parse_sim_args(eagle + ["--speculative-eagle-topk", "2"], env={})
    with pytest.raises(SimArgsError, match="draft-model-path"):
        parse_sim_args(["--model-path", "m", "--speculative-algorithm", "EAGLE3"], env={})
    with pytest.raises(SimArgsError, match="context_length"):
        parse_sim_args(["--model-path", "m", "--context-length", "10000000"], env={})
    allowed = parse_sim_args(["--model-path", "m", "--context-length", "10000000"],
                             env={"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1"})
    assert allowed.context_length == 10000000


def test_sim_knobs_flag_beats_env():
    env = {"SGLAB_SIM_SEED": "5", "SGLAB_SIM_TIME_SCALE": "4", "SGLAB_SIM_SET": "draft_fixed_ms=0.5"}
    config = parse_sim_args(["--model-path", "m", "--sim-seed", "9"], env=env)
    assert (config.seed, config.time_scale, config.profile.draft_fixed_ms) == (9, 4.0, 0.5)
    with pytest.raises(SimArgsError, match="SGLAB_SIM_TIME_SCALE"):
        parse_sim_args(["--model-path", "m"], env={"SGLAB_SIM_TIME_SCALE": "fast"})
    with pytest.raises(SimArgsError, match="error_rate"):
        parse_sim_args(["--model-path", "m", "--sim-error-rate", "2"], env={})


@pytest.mark.parametrize(("argv", "message"), [
    (["--model-path", "m", "--tp-size", "eight"], "invalid int value"),
    (["--model-path", "m", "--speculative-algorithm", "MEDUSA"], "invalid choice"),
    (["--tp-size", "8"], "--model-path"),
    (["--model-path", "m", "--sim-set", "no_such_constant=1"], "no_such_constant"),
])
def test_malformed_values_exit_2_with_a_clear_message(argv, message):
    result = subprocess.run([sys.executable, "-m", "sglab.cli", "sim", *argv], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_sglab_sim_console_path_serves(tmp_path):
    """The container runs `sglab sim ...` (through the whole CLI), not `python -m sglab.sim`."""
    import time

    import httpx

    from sglab.sim.testing import free_port

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "sglab.cli", "sim", *CHART_COMMON[:2], "--host", "127.0.0.1",
                             "--port", str(port), "--sim-time-scale", "10"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        body = httpx.post(f"http://127.0.0.1:{port}/generate", json={"text": "x", "sampling_params": {
            "max_new_tokens": 3, "ignore_eos": True}}).json()
        assert body["meta_info"]["completion_tokens"] == 3
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0  # SIGTERM is a clean shutdown


def test_list_valued_flags_and_abbreviations_are_read_like_sglang():
    """SGLang's parser takes every value of a list flag and any unique prefix of a flag."""
    config = parse_sim_args(["--model-path", "m", "--cuda-graph-bs-decode", "1", "2", "4", "8", "--max-running-req",
                             "64", "--tensor-parallel-size", "2"], env={})
    assert config.server_args["cuda_graph_bs_decode"] == ["1", "2", "4", "8"]
    assert config.max_running_requests == 64 and config.server_args["tp_size"] == 2
    with pytest.raises(SystemExit):
        parse_sim_args(["--model-path", "m", "--enable", "x"], env={})  # ambiguous, as in SGLang


def test_an_unrealistic_draft_shape_is_refused_before_anything_is_allocated():
    eagle = ["--model-path", "m", "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "d"]
    with pytest.raises(SimArgsError, match="at most 32"):
        parse_sim_args(eagle + ["--speculative-num-steps", "1000000000", "--speculative-eagle-topk", "1",
                                "--speculative-num-draft-tokens", "1000000001"], env={})
