"""A request's snapshot (the TokenEvent a stream renders) carries the request's own counts, field by field."""

from __future__ import annotations

from sglab.sim.engine import SimRequest


def _request() -> SimRequest:
    return SimRequest(rid="r1", prompt_tokens=4, max_new_tokens=8, ignore_eos=True, prompt_key="k")


def test_snapshot_carries_the_proposed_drafts_the_request_counted():
    """spec_meta reads event.proposed_drafts (the sum over verify passes, whose tier may change); an event that
    dropped it would make every meta_info fall back to verify_ct x (num_draft_tokens - 1)."""
    request = _request()
    request.completion_tokens, request.verify_ct, request.accepted_drafts, request.proposed_drafts = 5, 2, 3, 7
    event = request.snapshot(0, now=1.0)
    assert (event.verify_ct, event.accepted_drafts, event.proposed_drafts) == (2, 3, 7)


def test_a_request_has_no_custom_metric_labels_until_the_route_sets_them():
    """metric_labels is a declared field (the engine reads it for every routed request), not an attribute each
    route must remember to add."""
    assert _request().metric_labels == ()
