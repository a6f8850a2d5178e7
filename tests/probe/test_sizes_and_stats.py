"""The probe's message sizes derive from the stack; the median interval covers as promised."""

from __future__ import annotations

import math
import random

import pytest

from sglab.config.loader import load_stack
from sglab.probe.plan import probe_sizes, probe_spec, probe_variants
from sglab.probe.spec import hidden_size_for, sweep_sizes
from sglab.probe.result import median_ci

from .helpers import stack_with

KIMI_HIDDEN = 7168


def test_hidden_size_from_the_model_table_longest_match():
    assert hidden_size_for("/shared/kimi-k2.5-int4") == KIMI_HIDDEN
    assert hidden_size_for("/models/Llama-3.1-405B-Instruct/") == 16384
    assert hidden_size_for("/models/Llama-3.1-8B") == 4096
    assert hidden_size_for("/models/my-own-model") is None


def test_decode_sizes_of_eagle_nccl_ll():
    """Levels 1, 4, 16; EAGLE3 with 3 draft tokens, topk 1: baseline c tokens, verify 3c, draft c."""
    sizes, hidden, source = probe_sizes(load_stack("eagle-nccl-ll").config)
    assert hidden == KIMI_HIDDEN and "known-model table" in source
    decode = {s.bytes: s.sources for s in sizes if s.decode}
    expected_tokens = {1: ["baseline decode c=1", "candidate draft c=1"], 3: ["candidate verify c=1"],
                       4: ["baseline decode c=4", "candidate draft c=4"], 12: ["candidate verify c=4"],
                       16: ["baseline decode c=16", "candidate draft c=16"], 48: ["candidate verify c=16"]}
    assert decode == {t * KIMI_HIDDEN * 2: labels for t, labels in expected_tokens.items()}
    assert min(decode) == 14336  # the "about 14 KB" at batch 1
    assert [s.bytes for s in sizes if not s.decode] == [b for b in sweep_sizes() if b not in decode]
    assert [s.bytes for s in sizes] == sorted(s.bytes for s in sizes)


def test_sizes_follow_the_stack():
    stack = stack_with({"load.concurrency": [1, 64], "policy.levels": [1], "server.max-running-requests": 32,
                        "candidate.speculative.num-steps": 5, "candidate.speculative.num-draft-tokens": 6,
                        "probe": {"hidden-size": 1000, "sweep-min-bytes": 65536, "sweep-max-bytes": 131072}})
    sizes, hidden, source = probe_sizes(stack)
    assert (hidden, source) == (1000, "sglab:probe.hidden-size")
    decode = {s.bytes for s in sizes if s.decode}
    # c=64 runs 32 requests at most (max-running-requests): 32 tokens, verify 32 x 6
    assert decode == {1 * 2000, 6 * 2000, 32 * 2000, 192 * 2000}
    assert [s.bytes for s in sizes if not s.decode] == [65536, 131072]


def test_unknown_model_without_hidden_size_is_a_clear_error():
    from sglab.core.errors import ConfigError

    stack = stack_with({"model.path": "/shared/mystery-7b", "candidate.speculative.draft-model-path": "/shared/d"})
    with pytest.raises(ConfigError, match="probe.hidden-size"):
        probe_sizes(stack)


def test_variants_keep_nvls_explicit_and_dedupe():
    names = {v.name: v.env for v in probe_variants(load_stack("eagle-nccl-ll").config)}
    assert list(names) == ["nccl-default", "arms"]
    assert names["nccl-default"] == {"NCCL_CUMEM_ENABLE": "0", "NCCL_NVLS_ENABLE": "0"}
    assert names["arms"]["NCCL_PROTO"] == "LL" and names["arms"]["NCCL_NVLS_ENABLE"] == "0"
    replay = [v.name for v in probe_variants(load_stack("article-replay").config)]
    assert replay == ["nccl-default", "candidate"]  # the baseline runs NCCL's default: measured once
    extra = stack_with({"probe": {"variants": {"tree": {"NCCL_ALGO": "Tree"}, "same-as-arms": {
        "NCCL_PROTO": "LL", "NCCL_ALGO": "Ring", "NCCL_P2P_LEVEL": "SYS"}}}})
    assert [v.name for v in probe_variants(extra)] == ["nccl-default", "arms", "tree"]


def test_a_server_with_nvls_needs_allow_nvls():
    stack = stack_with({"server.extra-args": ["--enable-nccl-nvls"]})
    with pytest.raises(ValueError, match="NVLink multicast"):
        probe_spec(stack, "eagle-nccl-ll")
    spec = probe_spec(stack, "eagle-nccl-ll", allow_nvls=True)
    assert spec.variants[0].env["NCCL_NVLS_ENABLE"] == "1"


def test_cpu_stack_probes_with_gloo():
    spec = probe_spec(load_stack("sim").config, "sim")
    assert (spec.backend, spec.world_size) == ("gloo", 2)


@pytest.mark.parametrize("n", [5, 20, 200])
def test_median_interval_ranks_are_the_binomial_ones(n):
    ci = median_ci(list(range(n)), 0.95)
    assert ci.coverage >= 0.95 or n == 5
    assert ci.low <= ci.median <= ci.high
    if n == 200:  # textbook: ranks 86 and 115 (1-based) for n=200 at 95%
        assert (ci.low, ci.high) == (85, 114)


def test_median_interval_covers_the_true_median_of_a_skewed_distribution():
    rng = random.Random(7)
    trials, hits = 600, 0
    for _ in range(trials):
        sample = [rng.expovariate(1.0) for _ in range(60)]
        ci = median_ci(sample, 0.95)
        hits += ci.low <= math.log(2) <= ci.high
    assert hits / trials >= 0.93  # nominal >= 95%; a normal-theory interval on a mean would not target this
