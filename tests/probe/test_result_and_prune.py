"""The result schema round-trips and refuses what it is not; the table names winners; pruning is conservative."""

from __future__ import annotations

import json

import pytest

from sglab.probe.result import (PROBE_SCHEMA_VERSION, load_probe, parse_probe, prune_variants, render_table, to_json,
                                winners)

from .helpers import probe_result, size, variant

DECODE = (14336, 43008)
LL = {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"}
TREE = {"NCCL_ALGO": "Tree"}
SIMPLE = {"NCCL_PROTO": "Simple"}


def three_variants():
    return probe_result([
        variant("nccl-default", {}, [size(DECODE[0], 20.0, 0.5), size(DECODE[1], 22.0, 0.5),
                                     size(1048576, 60.0, 1.0, decode=False)]),
        variant("arms", LL, [size(DECODE[0], 15.0, 0.5), size(DECODE[1], 21.8, 0.5),
                             size(1048576, 80.0, 1.0, decode=False)]),
        variant("tree", TREE, [size(DECODE[0], 30.0, 0.5), size(DECODE[1], 35.0, 0.5),
                               size(1048576, 50.0, 1.0, decode=False)]),
    ])


def test_schema_round_trip(tmp_path):
    result = three_variants()
    path = tmp_path / "probe.json"
    path.write_text(to_json(result))
    assert load_probe(path) == result
    assert load_probe(tmp_path) == result  # the probe-<id> directory works too
    document = json.loads(to_json(result))
    assert document["schema_version"] == PROBE_SCHEMA_VERSION and document["kind"] == "nccl-probe"


@pytest.mark.parametrize("change, message", [({"kind": "ab"}, "not an NCCL probe"),
                                             ({"schema_version": 99}, "schema_version 99"),
                                             ({"world_size": "eight"}, "world_size")])
def test_parse_refuses_other_documents(change, message):
    document = {**json.loads(to_json(three_variants())), **change}
    with pytest.raises(ValueError, match=message):
        parse_probe(document)


def test_table_names_the_winner_per_size_and_by_how_much():
    result = three_variants()
    rows = {w.bytes: w for w in winners(result)}
    assert rows[DECODE[0]].winner == "arms" and rows[DECODE[0]].clear
    assert rows[DECODE[0]].gain_vs_default == pytest.approx(0.25)
    assert rows[DECODE[1]].winner == "arms" and not rows[DECODE[1]].clear  # 21.8 +- 0.5 vs 22.0 +- 0.5
    assert rows[1048576].winner == "tree"
    text = render_table(result)
    assert "arms 25.0% faster than nccl-default" in text and "(intervals overlap)" in text
    assert "| 14 KiB" in text and "(sweep)" in text


def test_prune_skips_only_variants_clearly_slower_at_every_decode_size():
    result = three_variants()
    decision = prune_variants(result, {"ll-ring": LL, "tree": TREE, "default": {}}, margin=0.05)
    assert decision.kept == ["ll-ring", "default"]
    (skipped,) = decision.skipped
    assert skipped.name == "tree" and "every decode size" in skipped.reason and "14 KiB 30.0 vs 20.0" in skipped.reason
    # a 60% margin: tree's 35 vs 22 at 42 KiB is not slower by that much, so it stays
    assert prune_variants(result, {"tree": TREE}, margin=0.6).kept == ["tree"]


def test_prune_keeps_what_it_cannot_judge():
    result = three_variants()
    decision = prune_variants(result, {"simple": SIMPLE}, margin=0.0)
    assert decision.kept == ["simple"] and "not measured" in decision.notes[0]
    failed = probe_result([variant("nccl-default", {}, [size(DECODE[0], 20.0, 0.5)]),
                           variant("tree", TREE, [], status="failed")])
    assert prune_variants(failed, {"tree": TREE}).kept == ["tree"]
    no_default = probe_result([variant("tree", TREE, [size(DECODE[0], 30.0, 0.5)])])
    decision = prune_variants(no_default, {"tree": TREE})
    assert decision.kept == ["tree"] and "nothing pruned" in decision.notes[0]
    with pytest.raises(ValueError):
        prune_variants(result, {}, margin=-0.1)


def test_prune_matches_by_settings_not_name():
    """A sweep calls the LL variant anything; the probe measured the same NCCL settings as `arms`."""
    slow = probe_result([variant("nccl-default", {}, [size(DECODE[0], 10.0, 0.5), size(DECODE[1], 11.0, 0.5)]),
                         variant("arms", LL, [size(DECODE[0], 30.0, 0.5), size(DECODE[1], 31.0, 0.5)])])
    decision = prune_variants(slow, {"proto-ll-algo-ring": {"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL",
                                                            "NCCL_NVLS_ENABLE": "0"}})
    assert [s.name for s in decision.skipped] == ["proto-ll-algo-ring"]
