"""Stream parsing on recorded SSE bytes (wire format of SGLang /generate and OpenAI chat)."""

import json

import pytest

from sglab.load.stream_parser import StreamParser, parse_recorded


def gen_chunk(text, completion, *, finish=None, prompt=7, **extra):
    meta = {"id": "r1", "finish_reason": finish, "prompt_tokens": prompt, "completion_tokens": completion,
            "cached_tokens": 0, **extra}
    return f"data: {json.dumps({'text': text, 'meta_info': meta})}\n\n".encode()


def feed(chunks_at, endpoint="generate", end_at=None):
    parser = StreamParser(endpoint)
    last = 0.0
    for data, at in chunks_at:
        parser.feed_bytes(data, at)
        last = at
    return parser.finish(end_at if end_at is not None else last)


def test_generate_counts_k_gaps_per_multi_token_chunk():
    m = feed([
        (gen_chunk("a", 1), 0.100),
        (gen_chunk("a b c", 3), 0.130),  # 2 tokens in 30 ms -> two gaps of 15 ms
        (gen_chunk("a b c d", 4, finish={"type": "length", "length": 4}, spec_verify_ct=2,
                   e2e_latency=0.14), 0.140),
        (b"data: [DONE]\n\n", 0.141),
    ])
    assert m.error is None and m.done
    assert m.output_tokens == 4
    assert m.ttft_s == pytest.approx(0.100)
    assert m.itl_s == pytest.approx([0.015, 0.015, 0.010])
    assert m.e2e_s == pytest.approx(0.141)
    assert m.decode_tok_per_s == pytest.approx(3 / 0.041)
    assert m.accept_length == pytest.approx(2.0)  # completion_tokens / spec_verify_ct
    assert m.prompt_tokens == 7


def test_chunks_without_new_tokens_add_no_gap_and_fall_back_to_spec_accept_length():
    m = feed([
        (gen_chunk("x", 1), 0.05),
        (gen_chunk("x", 1), 0.06),
        (gen_chunk("x y", 2, finish={"type": "length", "length": 2}, spec_accept_length=1.5), 0.08),
        (b"data: [DONE]\n\n", 0.08),
    ])
    assert m.itl_s == pytest.approx([0.03])
    assert m.accept_length == 1.5


def test_split_across_reads_and_keepalive_comments():
    body = gen_chunk("a", 1) + b": keep-alive\n\n" + gen_chunk("a b", 2,
                                                               finish={"type": "length"}) + b"data: [DONE]\n\n"
    parser = StreamParser()
    for i in range(0, len(body), 7):  # arbitrary byte boundaries
        parser.feed_bytes(body[i:i + 7], i / 1000)
    m = parser.finish(1.0)
    assert m.error is None and m.output_tokens == 2


def test_stream_without_done_is_an_error():
    m = feed([(gen_chunk("a", 1), 0.1), (gen_chunk("a b", 2), 0.2)])
    assert m.error == "stream ended before [DONE]"
    assert m.output_tokens == 2


def test_error_chunk_and_abort_are_errors_with_reason():
    m = feed([(gen_chunk("a", 1), 0.1), (b'data: {"error": {"message": "boom"}}\n\n', 0.2), (b"data: [DONE]\n\n", 0.3)])
    assert m.error == "server error in stream: boom"
    m = feed([(gen_chunk("a", 1, finish={"type": "abort", "message": "kv full"}), 0.1), (b"data: [DONE]\n\n", 0.2)])
    assert "aborted" in m.error and "kv full" in m.error


def test_garbage_is_an_error():
    m = parse_recorded(b"data: {not json\n\ndata: [DONE]\n\n")
    assert m.error.startswith("unparsable stream chunk")


def chat_chunk(content, usage=None, finish=None):
    chunk = {"id": "c", "object": "chat.completion.chunk", "choices": [
        {"index": 0, "delta": {"content": content}, "finish_reason": finish}]}
    if usage is not None:
        chunk["usage"] = usage
    return f"data: {json.dumps(chunk)}\n\n".encode()


def test_chat_with_continuous_usage_counts_exactly():
    m = feed([
        (chat_chunk("", usage={"prompt_tokens": 5, "completion_tokens": 0}), 0.01),
        (chat_chunk("Hi", usage={"prompt_tokens": 5, "completion_tokens": 1}), 0.10),
        (chat_chunk(" there you", usage={"prompt_tokens": 5, "completion_tokens": 3}), 0.14),
        (chat_chunk("", usage={"prompt_tokens": 5, "completion_tokens": 3}, finish="length"), 0.15),
        (b"data: [DONE]\n\n", 0.15),
    ], endpoint="chat")
    assert m.error is None
    assert m.output_tokens == 3 and m.prompt_tokens == 5
    assert m.ttft_s == pytest.approx(0.10)
    assert m.itl_s == pytest.approx([0.02, 0.02])
    assert m.finish_reason == "length"


def test_chat_without_usage_counts_content_chunks():
    m = feed([(chat_chunk("a"), 0.1), (chat_chunk("b"), 0.2), (b"data: [DONE]\n\n", 0.2)], endpoint="chat")
    assert m.output_tokens == 2 and m.itl_s == pytest.approx([0.1])


def test_fast_meta_path_is_safe_for_odd_chunks():
    tricky = json.dumps({"text": 'say "meta_info": {"completion_tokens": 99}', "output_ids": [1],
                         "meta_info": {"completion_tokens": 1, "finish_reason": None}})
    trailing_key = json.dumps({"text": "a b",
                               "meta_info": {"completion_tokens": 2, "finish_reason": {"type": "length"}}, "index": 0})
    m = feed([(f"data: {tricky}\n\n".encode(), 0.1), (f"data: {trailing_key}\n\n".encode(), 0.2),
              (b"data: [DONE]\n\n", 0.2)])
    assert m.error is None and m.output_tokens == 2 and m.finish_reason == "length"


# ---- per-request speculative stats on the OpenAI endpoints ----------------------------------

def spec_tail(details, *, key="sglext"):
    """The simulator's (and SGLang's) shape: its own `choices: []` chunk after the finish chunk."""
    chunk = {"id": "c", "object": "chat.completion.chunk", "choices": [], "usage": None}
    chunk[key] = details
    return f"data: {json.dumps(chunk)}\n\n".encode()


def chat_with(tail_chunks):
    return feed([
        (chat_chunk("a", usage={"prompt_tokens": 5, "completion_tokens": 1}), 0.10),
        (chat_chunk("bcd", usage={"prompt_tokens": 5, "completion_tokens": 6}), 0.20),
        (chat_chunk("", usage={"prompt_tokens": 5, "completion_tokens": 6}, finish="length"), 0.21),
        *[(c, 0.22) for c in tail_chunks],
        (b"data: [DONE]\n\n", 0.23),
    ], endpoint="chat")


DETAILS = {"spec_verify_ct": 3, "spec_accept_length": 2.0, "spec_num_correct_drafts": 3,
           "spec_num_proposed_drafts": 6, "spec_correct_drafts_histogram": [1, 1, 1]}


def test_chat_reads_spec_tokens_details_sent_after_the_finish_chunk():
    m = chat_with([spec_tail({"spec_tokens_details": DETAILS})])
    assert m.error is None and m.output_tokens == 6
    assert m.spec_verify_ct == 3 and m.accept_length == pytest.approx(2.0)  # 6 tokens / 3 verify steps
    assert m.spec_correct_drafts_histogram == [1, 1, 1] and m.spec_correct_drafts == 3  # sum = verify; Σ i·h = 3


def test_a_histogram_that_breaks_the_identities_is_dropped_not_trusted():
    m = chat_with([spec_tail({"spec_tokens_details": {**DETAILS, "spec_correct_drafts_histogram": [5, 0, 0]}})])
    assert m.spec_verify_ct == 3 and m.spec_correct_drafts_histogram is None


def test_proposed_speculative_decoding_stats_shape_is_read_too():
    stats = {"verify_lengths": [3, 3, 3], "accept_lengths": [1, 2, 3]}
    m = chat_with([spec_tail(stats, key="speculative_decoding_stats")])
    assert m.spec_verify_ct == 3 and m.accept_length == pytest.approx(2.0)


def test_without_spec_details_chat_has_no_accept_length_and_no_error():
    m = chat_with([])
    assert m.error is None and m.accept_length is None and m.spec_verify_ct is None
