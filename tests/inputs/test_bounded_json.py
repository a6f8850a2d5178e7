"""sglab/core/untrusted_json.py, the one reader of JSON sglab did not just write: what it refuses and what it keeps."""

from __future__ import annotations

import json

import pytest

from sglab.core.errors import ConfigError
from sglab.core.untrusted_json import MAX_NUMBER, JsonLimits, JsonRefused, jsonl_lines, parse, read_json

LIMITS = JsonLimits("a test document", max_bytes=1 << 20, max_depth=8)


@pytest.mark.parametrize("text, words", [
    ('{"complete": false, "complete": true}', 'the key "complete" appears twice'),
    ('[{"a": {"b": 1, "b": 2}}]', 'the key "b" appears twice'),
    ("[NaN]", "NaN is not a number JSON allows"),
    ('{"x": Infinity}', "Infinity is not a number JSON allows"),
    ('{"samples": [1.0, 1e308]}', "the number 1e+308 at .samples[1] is outside +-2**53"),
    ('{"x": 1e400}', "the number inf at .x is outside"),
    ('{"x": -1e16}', "outside +-2**53"),
    ("[" + "9" * 30 + "]", "the number with 30 digits at [0] is outside"),
    ("[" + "9" * 5000 + "]", "an integer of thousands of digits"),
    ('["\\ud800"]', "lone UTF-16 surrogate"),
    ('{"\\udfff": 1}', "lone UTF-16 surrogate"),
    ("[" * 9 + "]" * 9, "nested deeper than 8 levels"),
    ("[" * 100_000 + "]" * 100_000, "nested deeper than 8 levels"),
    ('{"a": [1, 2', "not valid JSON"),
])
def test_refused_with_the_reason(text, words):
    with pytest.raises(JsonRefused) as info:
        parse(text, LIMITS)
    assert words in str(info.value)


@pytest.mark.parametrize("text", ['{"a": [1, 2.5, -3e10, null, true, "x"]}', "[" * 8 + "]" * 8,
                                  f'[{MAX_NUMBER}, {-MAX_NUMBER}, 1e-300, 0]', '["\\ud83d\\ude00 ok"]', '"text"',
                                  '{"a": {"b": 1}, "c": {"b": 2}}'])
def test_kept(text):
    assert parse(text, LIMITS) == json.loads(text)


def test_a_file_reader_names_the_file_and_its_limits(tmp_path):
    path = tmp_path / "doc.json"
    path.write_bytes(b"x" * (LIMITS.max_bytes + 1))
    with pytest.raises(ConfigError) as info:
        read_json(path, LIMITS)
    assert str(path) in str(info.value) and "over the limit for a test document (1 MiB)" in str(info.value)
    path.write_bytes(b'\xef\xbb\xbf{"a": 1}')  # a BOM is not a reason to refuse
    assert read_json(path, LIMITS) == {"a": 1}
    path.write_bytes(b'{"a": "\xff"}')
    with pytest.raises(ConfigError, match="not UTF-8 text .byte 7"):
        read_json(path, LIMITS)


def test_jsonl_limits_refuse_before_parsing(tmp_path):
    limits = JsonLimits("a trace", max_bytes=1 << 20, max_lines=4, max_line_chars=10)
    path = tmp_path / "t.jsonl"
    path.write_text("{}\n\n{}\n{}\n")
    assert [n for n, _ in jsonl_lines(path, limits)] == [1, 3, 4]
    path.write_text("{}\n" * 5)
    with pytest.raises(ConfigError, match="has 5 lines, over the limit for a trace .4 lines."):
        list(jsonl_lines(path, limits))
    path.write_text('{}\n{"a": "0123456789"}\n')
    with pytest.raises(ConfigError) as info:
        list(jsonl_lines(path, limits))
    assert info.value.line == 2 and "over the limit for one line of a trace (10)" in str(info.value)


def test_describe_names_every_limit():
    limits = JsonLimits("a trace", max_bytes=512 << 20, max_depth=16, max_lines=100_000, max_line_chars=4 << 20)
    assert limits.describe() == "512 MiB, nesting depth 16, 100,000 lines, 4,194,304 characters per line"


def test_a_configmap_payload_that_inflates_past_the_limit_is_refused_after_reading_that_much():
    import base64
    import gzip
    from types import SimpleNamespace

    from sglab.results.pull import read_document
    from sglab.results.sink import PARTS_ANNOTATION, PAYLOAD_KEY

    bomb = base64.b64encode(gzip.compress(b" " * (64 << 20))).decode()  # 64 MiB of spaces in ~64 KiB
    meta = SimpleNamespace(name="sglab-result", annotations={PARTS_ANNOTATION: "1"}, labels={})
    document, problem = read_document([SimpleNamespace(metadata=meta, binary_data={PAYLOAD_KEY: bomb})],
                                      JsonLimits("a result document", max_bytes=1 << 20))
    assert document is None and "inflates to more than 1048576 bytes" in problem
