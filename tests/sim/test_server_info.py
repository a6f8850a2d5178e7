"""/server_info, /get_model_info, /flush_cache and /metrics."""

from __future__ import annotations

import httpx
import pytest

from sglab.sglang.flags import SGLANG_VERSION
from sglab.sim.testing import running_sim

from .helpers import CHART_COMMON, FAST, TUNED_NCCL


def _generate(url: str, n: int = 40) -> dict:
    return httpx.post(url + "/generate", json={"text": "a b", "sampling_params": {
        "max_new_tokens": n, "ignore_eos": True}}, timeout=30).json()["meta_info"]


@pytest.mark.slow
def test_server_info_echoes_args_env_and_accept_length(eagle_url):
    before = httpx.get(eagle_url + "/server_info").json()
    assert "avg_spec_accept_length" not in before["internal_states"][0] or before["internal_states"][0][
        "avg_spec_accept_length"] > 0
    httpx.post(eagle_url + "/flush_cache")
    metas = [_generate(eagle_url) for _ in range(3)]
    info = httpx.get(eagle_url + "/get_server_info").json()
    expected = {"model_path": "/shared/kimi-k2.5-int4", "tp_size": 8, "mem_fraction_static": 0.88,
                "num_continuous_decode_steps": 4, "disable_custom_all_reduce": True, "trust_remote_code": True,
                "max_running_requests": 48, "enable_metrics": True, "speculative_algorithm": "EAGLE3",
                "speculative_num_steps": 2, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 3,
                "speculative_draft_model_path": "/shared/kimi-k2.5-eagle3", "host": "127.0.0.1"}
    assert {k: info[k] for k in expected} == expected
    assert info["version"] == SGLANG_VERSION
    tokens = sum(m["completion_tokens"] - 1 for m in metas)  # cycle tokens: the first comes from prefill
    verifies = sum(m["spec_verify_ct"] for m in metas)
    state = info["internal_states"][0]
    assert state["avg_spec_accept_length"] == pytest.approx(tokens / verifies)
    assert info["avg_spec_accept_length"] == state["avg_spec_accept_length"]
    assert "last_gen_throughput" in state
    sim = info["sglab_sim"]
    assert sim["nccl_env"] == TUNED_NCCL
    assert sim["time_scale"] == 50.0 and sim["profile"] == "default" and sim["seed"] == 0
    assert sim["model_decode_tok_per_s_c1"] == pytest.approx(94.0, rel=0.005)
    assert httpx.get(eagle_url + "/server_info").json()["internal_states"][0]["avg_spec_accept_length"] == \
        state["avg_spec_accept_length"]


@pytest.mark.slow
def test_flush_cache_resets_accept_length(eagle_url):
    _generate(eagle_url)
    response = httpx.post(eagle_url + "/flush_cache")
    assert response.status_code == 200 and response.text.startswith("Cache flushed.")
    info = httpx.get(eagle_url + "/server_info").json()
    assert "avg_spec_accept_length" not in info["internal_states"][0]
    assert "avg_spec_accept_length" not in info


@pytest.mark.slow
def test_baseline_has_no_accept_length(baseline_url):
    _generate(baseline_url)
    info = httpx.get(baseline_url + "/server_info").json()
    assert info["speculative_algorithm"] is None
    assert "avg_spec_accept_length" not in info["internal_states"][0]


@pytest.mark.slow
def test_model_info(eagle_url):
    info = httpx.get(eagle_url + "/get_model_info").json()
    assert info["model_path"] == "/shared/kimi-k2.5-int4" and info["is_generation"] is True


def _metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not in /metrics")


@pytest.mark.slow
def test_metrics_exposition(eagle_url):
    before = httpx.get(eagle_url + "/metrics").text
    meta = _generate(eagle_url, 30)
    text = httpx.get(eagle_url + "/metrics").text
    assert _metric(text, "sglang:generation_tokens_total") - _metric(before, "sglang:generation_tokens_total") == 30
    assert _metric(text, "sglang:num_requests_total") - _metric(before, "sglang:num_requests_total") == 1
    assert _metric(text, "sglang:prompt_tokens_total") - _metric(before, "sglang:prompt_tokens_total") == 2
    itl_count = _metric(text, "sglang:inter_token_latency_seconds_count") - _metric(
        before, "sglang:inter_token_latency_seconds_count")
    assert itl_count == meta["completion_tokens"] - 1  # weighted by the new-token count of each chunk
    for name in ("sglang:spec_accept_length", "sglang:gen_throughput", "sglang:num_running_reqs",
                 "sglang:time_to_first_token_seconds_bucket", "sglang:e2e_request_latency_seconds_sum"):
        assert name in text
    assert '# TYPE sglang:time_to_first_token_seconds histogram' in text
    assert 'model_name="/shared/kimi-k2.5-int4"' in text


@pytest.mark.slow
def test_metrics_404_without_enable_metrics():
    args = [a for a in CHART_COMMON if a != "--enable-metrics"]
    with running_sim(args, FAST) as url:
        assert httpx.get(url + "/metrics").status_code == 404
        assert httpx.get(url + "/server_info").json()["enable_metrics"] is False


def _same(reported, rendered: str) -> bool:
    if rendered == "true":
        return reported is True
    if isinstance(reported, (int, float)) and not isinstance(reported, bool):
        return float(reported) == float(rendered)
    return str(reported) == rendered


@pytest.mark.slow
def test_live_server_echoes_every_rendered_flag_and_the_nccl_env():
    """What the benchmark's live-flag check relies on: rendered arm args/env == what /server_info reports."""
    from sglab.config import candidate_arm, load_stack
    from sglab.config.arms import parse_launch_args

    arm = candidate_arm(load_stack("sim").config)
    env = {**arm.env, "SGLAB_SIM_TIME_SCALE": "50", "SGLAB_SIM_WARMUP_S": "0"}
    with running_sim(list(arm.args), env) as url:
        info = httpx.get(url + "/server_info").json()
    for flag, value in parse_launch_args(arm.args).items():
        if flag in ("--host", "--port"):  # replaced by running_sim
            continue
        key = flag[2:].replace("-", "_")
        assert _same(info[key], value), (flag, info[key], value)
    assert info["sglab_sim"]["nccl_env"] == {k: v for k, v in arm.env.items() if k.startswith("NCCL_")}


@pytest.mark.slow
def test_step_time_dict_with_sglang_record_step_time():
    from sglab.sim import timing
    from sglab.sim.profile import SimProfile

    with running_sim(CHART_COMMON, {**FAST, "SGLANG_RECORD_STEP_TIME": "1"}) as url:
        _generate(url, 10)
        info = httpx.get(url + "/server_info").json()
    steps = info["internal_states"][0]["step_time_dict"]["1"]
    assert len(steps) == 9 and info["step_time_dict"] == info["internal_states"][0]["step_time_dict"]
    assert steps[0] == pytest.approx(timing.decode_step_ms(SimProfile(), 1, 1.0) / 1000 / 50)


@pytest.mark.slow
def test_metrics_parse_with_the_prometheus_client_parser(eagle_url):
    from prometheus_client.parser import text_string_to_metric_families

    _generate(eagle_url, 12)
    families = {f.name: f for f in text_string_to_metric_families(httpx.get(eagle_url + "/metrics").text)}
    assert families["sglang:time_to_first_token_seconds"].type == "histogram"
    assert families["sglang:spec_accept_length"].type == "gauge"
    assert families["sglang:generation_tokens"].type == "counter"  # the parser strips _total
    buckets = [s for s in families["sglang:inter_token_latency_seconds"].samples if s.name.endswith("_bucket")]
    counts = [s.value for s in buckets]
    assert counts == sorted(counts) and buckets[-1].labels["le"] == "+Inf"
