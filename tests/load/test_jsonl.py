"""The one JSONL reader behind prompt files, OpenAI message logs and traces: each bad line is one clear
ConfigError naming the file, the key, the line and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from sglab.core.errors import ConfigError
from sglab.config.loadplan import PromptSpec
from sglab.load.datasets import jsonl_rows, load_openai_jsonl
from sglab.load.profiles import read_trace
from sglab.load.prompts import build_prompts


def write(tmp_path: Path, text: str | bytes, name: str = "rows.jsonl") -> Path:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


def test_rows_skip_blank_lines_and_keep_file_line_numbers(tmp_path: Path) -> None:
    path = write(tmp_path, '{"a": 1}\n\n   \n{"a": 2}\n')
    assert list(jsonl_rows(path, key="k")) == [(1, {"a": 1}), (4, {"a": 2})]
    assert list(jsonl_rows(path, key="k", text='"x"\n', objects=False)) == [(1, "x")]


@pytest.mark.parametrize("body, words", [
    ('{"a": 1}\n{not json\n', ["line 2 is not JSON"]),
    ('{"a": 1}\n[1, 2]\n', ["line 2 is not an object"]),
    (b'{"a": "\xff"}\n', ["not UTF-8"]),
])
def test_a_bad_line_names_file_key_line_and_fix(tmp_path: Path, body, words: list[str]) -> None:
    path = write(tmp_path, body)
    with pytest.raises(ConfigError) as info:
        list(jsonl_rows(path, key="load.trace.file"))
    message = str(info.value)
    assert str(path) in message and "load.trace.file" in message
    assert all(w in message for w in words)
    assert info.value.fix


@pytest.mark.parametrize("reader", ["prompts", "openai", "trace"])
def test_every_jsonl_reader_reports_bad_json_the_same_way(tmp_path: Path, reader: str) -> None:
    good = {"prompts": '{"prompt": "hi"}', "openai": '{"messages": [{"role": "user", "content": "hi"}]}',
            "trace": '{"timestamp_s": 0, "prompt": "hi", "output_tokens": 4}'}[reader]
    path = write(tmp_path, good + "\n\n{oops\n")
    read = {"prompts": lambda: build_prompts(PromptSpec(source="file", file=str(path), count=5)),
            "openai": lambda: load_openai_jsonl(path),
            "trace": lambda: read_trace(path)}[reader]
    with pytest.raises(ConfigError) as info:
        read()
    assert "line 3 is not JSON" in str(info.value) and str(path) in str(info.value)
    assert "one JSON object per line" in info.value.fix
