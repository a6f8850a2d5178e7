"""Prompt datasets: the bundled suite, ShareGPT JSON and OpenAI messages JSONL, and their error messages."""

from __future__ import annotations

import fnmatch
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from sglab.core.errors import ConfigError
from sglab.load.datasets import (SUITE_CATEGORIES, CategorySource, PromptRecord, load_openai_jsonl, load_sharegpt,
                                 load_suite)

ROOT = Path(__file__).resolve().parents[2]


def test_suite_has_hundreds_of_labelled_prompts_in_every_category():
    suite = load_suite()
    assert len(suite) >= 280
    counts = suite.categories()
    assert set(counts) == set(SUITE_CATEGORIES)
    assert min(counts.values()) >= 35
    texts = [r.text for r in suite]
    assert len(set(texts)) == len(texts), "duplicate prompts"
    assert all(r.messages and r.messages[-1]["role"] == "user" for r in suite)
    assert all(1 <= r.output_tokens < r.max_tokens for r in suite)
    lengths = {c: [len(r.text.split()) for r in suite if r.category == c] for c in counts}
    assert min(lengths["long-context"]) > 3 * max(lengths["chat"])  # long context is long


def test_suite_subset_and_unknown_category():
    code = load_suite(categories=("code",))
    assert len(code) == 45 and {r.category for r in code} == {"code"}
    with pytest.raises(ValueError, match="unknown suite categories"):
        load_suite(categories=("poetry",))


def test_suite_file_is_what_the_generator_writes():
    proc = subprocess.run([sys.executable, "tools/gen_prompt_suite.py", "--check"], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_suite_is_shipped_as_package_data():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["sglab.load"]
    assert any(fnmatch.fnmatch("data/prompt_suite.jsonl", p) for p in patterns)


def test_record_request_bodies():
    record = PromptRecord(id="a", category="chat", output_tokens=50, prompt="hello there", max_tokens=200)
    assert record.chat_body() == {"messages": [{"role": "user", "content": "hello there"}], "max_tokens": 50,
                                  "ignore_eos": True}
    assert record.completion_body(natural_stop=True) == {"prompt": "hello there", "max_tokens": 200,
                                                         "ignore_eos": False}
    with pytest.raises(ValueError):
        PromptRecord(id="b", category="x", output_tokens=5)


def test_category_source_cli_forms():
    assert CategorySource.parse("field:topic") == CategorySource(field="topic")
    assert CategorySource.parse("code") == CategorySource(fixed="code")
    assert CategorySource.parse(None).fixed == "unlabelled"
    with pytest.raises(ValueError):
        CategorySource.parse("field:")


SHAREGPT = [
    {"id": "c1", "topic": "cooking", "conversations": [
        {"from": "human", "value": "How do I make rice?"},
        {"from": "gpt", "value": " ".join(["word"] * 100)},
        {"from": "human", "value": "And quinoa?"},
        {"from": "gpt", "value": " ".join(["word"] * 20)}]},
    {"id": "c2", "topic": "travel", "conversations": [
        {"from": "system", "value": "Be brief."}, {"from": "human", "value": "Where to go in May?"}]},
    {"id": "c3", "topic": "none", "conversations": [{"from": "gpt", "value": "orphan reply"}]},
]


def test_sharegpt_maps_turns_and_reply_lengths(tmp_path):
    path = tmp_path / "share.json"
    path.write_text(json.dumps(SHAREGPT))
    data = load_sharegpt(path, categories=CategorySource(field="topic"), default_output_tokens=77)
    assert [r.id for r in data] == ["c1", "c2"]  # c3 has no human turn
    first, second = data.records
    assert [m["role"] for m in first.messages] == ["user", "assistant", "user"]
    assert first.messages[-1]["content"] == "And quinoa?"
    assert first.output_tokens == 26  # 20 words x 1.3
    assert second.output_tokens == 77 and second.messages[0] == {"role": "system", "content": "Be brief."}
    assert data.categories() == {"cooking": 1, "travel": 1}
    assert {r.category for r in load_sharegpt(path, categories=CategorySource(fixed="web"))} == {"web"}


def test_sharegpt_jsonl_form(tmp_path):
    path = tmp_path / "share.jsonl"
    path.write_text("\n".join(json.dumps(c) for c in SHAREGPT[:2]) + "\n")
    assert len(load_sharegpt(path, limit=1)) == 1


@pytest.mark.parametrize("content, problem, fix", [
    ('[{"conversations": [}]', "not valid JSON", "fix the JSON syntax"),
    ('[{"conversations": [{"from": "robot", "value": "hi"}]}]', "unknown speaker 'robot'", "human or gpt"),
    ('[{"chat": []}]', "[0].conversations: missing", "\"conversations\""),
    ('[{"conversations": [{"from": "gpt", "value": "x"}]}]', "no conversation with a human turn", "human"),
])
def test_sharegpt_errors_name_the_problem_and_the_fix(tmp_path, content, problem, fix):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(ConfigError) as info:
        load_sharegpt(path)
    message = str(info.value)
    assert message.startswith(str(path)) and problem in message and "fix:" in message and fix in message


def test_sharegpt_missing_category_field(tmp_path):
    path = tmp_path / "share.json"
    path.write_text(json.dumps(SHAREGPT[:1]))
    with pytest.raises(ConfigError, match="category field 'lang' is missing"):
        load_sharegpt(path, categories=CategorySource(field="lang"))


def test_openai_jsonl_logs(tmp_path):
    path = tmp_path / "logs.jsonl"
    rows = [
        {"messages": [{"role": "user", "content": "Write a haiku."},
                      {"role": "assistant", "content": "one two three four five six seven eight nine ten"}],
         "route": "poetry"},
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "Sum 2 and 3."}]}], "output_tokens": 40,
         "max_tokens": 90, "route": "maths", "id": "q7"},
        {"messages": [{"role": "user", "content": "hi"}], "route": "chat"},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    data = load_openai_jsonl(path, categories=CategorySource.parse("field:route"), default_output_tokens=64)
    first, second, third = data.records
    assert first.messages == ({"role": "user", "content": "Write a haiku."},) and first.output_tokens == 13
    assert (second.id, second.output_tokens, second.max_tokens, second.text) == ("q7", 40, 90, "Sum 2 and 3.")
    assert third.output_tokens == 64 and third.id == "line-3"
    assert data.categories() == {"poetry": 1, "maths": 1, "chat": 1}


@pytest.mark.parametrize("line, problem, fix", [
    ("{not json", "line 2 is not JSON", "one JSON object per line"),
    ('{"prompt": "hi"}', "line 2 has no non-empty \"messages\" list", "\"messages\""),
    ('{"messages": [{"role": "bot", "content": "x"}]}', "unknown role 'bot'", "user"),
    ('{"messages": [{"role": "user", "content": "x"}], "output_tokens": 0}', "output_tokens: must be a positive",
     "whole number"),
    ('{"messages": [{"role": "system", "content": "x"}]}', "has no user message", "user"),
])
def test_openai_jsonl_errors_name_file_line_and_fix(tmp_path, line, problem, fix):
    path = tmp_path / "logs.jsonl"
    path.write_text('{"messages": [{"role": "user", "content": "fine"}]}\n' + line + "\n")
    with pytest.raises(ConfigError) as info:
        load_openai_jsonl(path)
    message = str(info.value)
    assert message.startswith(f"{path}:2:") and problem in message and fix in message


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_openai_jsonl(tmp_path / "nope.jsonl")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(ConfigError, match="holds no records"):
        load_openai_jsonl(empty)
