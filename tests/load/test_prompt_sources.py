"""`load.prompts.source` suite / sharegpt / openai, the chat default and natural stopping."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from sglab.config.loadplan import LoadPlan, PromptSpec
from sglab.core.errors import ConfigError
from sglab.load.datasets import SUITE_CATEGORIES, load_suite
from sglab.load.prompts import build_prompts
from sglab.load.settings import LoadSettings

from .conftest import ROOT, child_env, load, run_dirs

DATA = ROOT / "tests" / "data"
SHAREGPT = DATA / "sharegpt_small.json"
OPENAI = DATA / "openai_small.jsonl"


def plan(**prompts) -> LoadPlan:
    return LoadPlan.model_validate({"prompts": prompts})


def test_the_suite_maps_every_record_interleaved_across_its_categories() -> None:
    prompts = build_prompts(PromptSpec(source="suite"))
    records = {r.id: r for r in load_suite()}
    assert len(prompts) == len(records) == 310
    assert [p.category for p in prompts[:7]] == list(SUITE_CATEGORIES)  # every run of 7 mixes all categories
    assert [p.index for p in prompts] == list(range(310))
    by_text = {r.text: r for r in records.values()}
    for prompt in prompts:
        record = by_text[prompt.text]
        assert prompt.messages == record.messages and prompt.category == record.category
        assert prompt.output_tokens == record.output_tokens and prompt.max_tokens == record.max_tokens
    subset = build_prompts(PromptSpec(source="suite", categories="code, maths", limit=5))
    assert [p.category for p in subset] == ["code", "maths", "code", "maths", "code"]


def test_sharegpt_maps_conversations_up_to_the_last_human_turn_with_the_given_categories() -> None:
    prompts = build_prompts(PromptSpec(source="sharegpt", file=str(SHAREGPT), categories="field:topic"))
    assert [p.category for p in prompts] == ["code", "chat", "maths"]  # conv-c has no human turn: skipped
    first, second, third = prompts
    assert first.messages == ({"role": "user", "content": "Write a Python function that reverses a list in place."},)
    assert first.output_tokens == round(16 * 1.3) and first.max_tokens is None
    assert [m["role"] for m in second.messages] == ["system", "user", "assistant", "user"]
    assert second.output_tokens == round(1 * 1.3) and second.max_tokens == 64  # the reply "Ash."
    assert third.output_tokens == 256  # ends on a human turn: the loader's default
    fixed = build_prompts(PromptSpec(source="sharegpt", file=str(SHAREGPT), categories="mine", limit=2))
    assert [p.category for p in fixed] == ["mine", "mine"]


def test_openai_jsonl_maps_messages_lengths_and_categories() -> None:
    prompts = build_prompts(PromptSpec(source="openai", file=str(OPENAI), categories="field:route"))
    assert [p.category for p in prompts] == ["support", "code", "support"]
    assert prompts[0].messages[0] == {"role": "system", "content": "You answer billing questions."}
    assert (prompts[0].output_tokens, prompts[0].max_tokens) == (40, 80)
    assert prompts[1].messages == ({"role": "user", "content": "Fix this SQL: SELEC name FROM users"},)
    assert prompts[1].output_tokens == round(9 * 1.3)  # the logged reply's length, dropped from the prompt
    assert (prompts[2].output_tokens, prompts[2].max_tokens) == (32, 32)
    unlabelled = build_prompts(PromptSpec(source="openai", file=str(OPENAI)))
    assert {p.category for p in unlabelled} == {"unlabelled"}


@pytest.mark.parametrize("source", ["suite", "sharegpt", "openai"])
def test_chat_shaped_sources_default_to_the_chat_endpoint(source: str) -> None:
    file = {"sharegpt": str(SHAREGPT), "openai": str(OPENAI)}.get(source)
    assert plan(source=source, **({"file": file} if file else {})).endpoint == "chat"
    assert LoadPlan.model_validate({"prompts": {"source": "suite"}, "endpoint": "generate"}).endpoint == "generate"
    assert plan(source="random").endpoint == "generate"
    dumped = plan(source="suite").model_dump()
    assert LoadPlan.model_validate(dumped).endpoint == "chat"  # --quick and overrides re-validate the dump


def test_a_plan_without_prompts_sends_the_bundled_suite_on_the_chat_endpoint() -> None:
    """Random words give a draft model nothing to predict: the default is the traffic speculation is judged on."""
    for default in (LoadPlan(), LoadPlan.model_validate({}), LoadPlan.model_validate({"prompts": {"seed": 3}})):
        assert (default.prompts.source, default.endpoint) == ("suite", "chat")


def test_both_arms_get_the_identical_request_sequence() -> None:
    """Prompts, and so every request body, come from the plan alone: two builds (two arms, two workers) agree."""
    a, b = (LoadSettings.from_plan(plan(source="openai", file=str(OPENAI), categories="field:route"))
            for _ in range(2))
    assert [a.payload(p) for p in a.prompts] == [b.payload(p) for p in b.prompts]
    suite_a, suite_b = (LoadSettings.from_plan(plan(source="suite")) for _ in range(2))
    assert [suite_a.payload(p) for p in suite_a.prompts] == [suite_b.payload(p) for p in suite_b.prompts]
    again = LoadSettings.from_message(suite_a.to_message())  # what a distributed worker rebuilds
    assert [p.text for p in again.prompts] == [p.text for p in suite_a.prompts]


def test_fixed_length_body_and_check_are_unchanged_by_default() -> None:
    settings = LoadSettings.from_plan(plan(source="openai", file=str(OPENAI)))
    prompt = settings.prompts[0]
    body = settings.payload(prompt)
    assert settings.endpoint == "chat" and body["ignore_eos"] is True and body["max_tokens"] == 40
    assert body["messages"] == [dict(m) for m in prompt.messages]
    assert settings.token_count_error(prompt, 40) is None
    assert settings.token_count_error(prompt, 39) == "wrong token count: got 39, expected 40"


def test_natural_stop_sends_ignore_eos_false_and_the_cap_and_accepts_a_shorter_reply() -> None:
    natural = LoadPlan.model_validate({"natural-stop": True, "prompts": {"source": "openai", "file": str(OPENAI)}})
    settings = LoadSettings.from_plan(natural)
    capped, uncapped = settings.prompts[0], settings.prompts[1]
    body = settings.payload(capped)
    assert body["ignore_eos"] is False and body["max_tokens"] == 80  # the record's max_tokens, not its 40
    assert settings.payload(uncapped)["max_tokens"] == uncapped.output_tokens  # no cap given: its length
    assert settings.token_count_error(capped, 7) is None and settings.token_count_error(capped, 80) is None
    assert settings.token_count_error(capped, 81) == "wrong token count: got 81, expected 1 to 80"
    assert settings.token_count_error(capped, 0) is not None
    generate = LoadSettings.from_plan(LoadPlan.model_validate({"natural-stop": True, "max-new-tokens": 16,
                                                               "prompts": {"source": "random"}}))
    assert generate.payload(generate.prompts[0])["sampling_params"]["ignore_eos"] is False
    assert generate.payload(generate.prompts[0])["sampling_params"]["max_new_tokens"] == 16


def test_bad_prompt_sources_name_the_file_key_and_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as missing:
        build_prompts(PromptSpec(source="sharegpt", file=str(tmp_path / "nope.json")))
    assert "nope.json" in str(missing.value) and "load.prompts.file" in str(missing.value)
    assert "fix:" in str(missing.value)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"messages": [{"role": "user", "content": "hi"}]}\n{"messages": [{"role": "robot", "content": '
                   '"x"}]}\n')
    with pytest.raises(ConfigError) as row:
        build_prompts(PromptSpec(source="openai", file=str(bad)))
    assert "bad.jsonl:2" in str(row.value) and "unknown role 'robot'" in str(row.value)
    with pytest.raises(ConfigError) as field:
        build_prompts(PromptSpec(source="openai", file=str(OPENAI), categories="field:nosuch"))
    assert "nosuch" in str(field.value) and "fix:" in str(field.value)
    with pytest.raises(ConfigError) as suite:
        build_prompts(PromptSpec(source="suite", categories="code,poetry"))
    assert "load.prompts.categories" in str(suite.value) and "poetry" in str(suite.value)
    for spec, words in (({"source": "openai"}, "file is missing"),
                        ({"source": "suite", "file": "x.jsonl"}, "reads no file"),
                        ({"source": "random", "categories": "chat"}, "not random")):
        with pytest.raises(ValidationError, match=words):
            PromptSpec.model_validate(spec)


def _stack_dir(tmp_path: Path, load_yaml: str) -> Path:
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    text = (ROOT / "stacks" / "Pulumi.eagle-nccl-ll.yaml").read_text()
    text = "\n".join(line for line in text.splitlines())  # the shipped stack, plus our sglab:load
    if "  sglab:load:" in text:
        text = text.split("  sglab:load:")[0].rstrip()
    (stacks / "Pulumi.eagle-nccl-ll.yaml").write_text(text + "\n  sglab:load:\n" + load_yaml)
    return stacks


def _bench(stacks: Path, out: Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "sglab.cli", "bench", "--stack", "eagle-nccl-ll", "--target", "sim", "--out", str(out),
           "--no-progress", *args]
    return subprocess.run(cmd, cwd=ROOT, env=child_env({"SGLAB_STACKS_DIR": str(stacks)}), capture_output=True,
                          text=True, timeout=timeout)


def test_a_bad_dataset_in_the_stack_exits_2_without_a_traceback(tmp_path: Path) -> None:
    stacks = _stack_dir(tmp_path, "    prompts:\n      source: sharegpt\n      file: missing/conversations.json\n")
    proc = _bench(stacks, tmp_path / "results", "--quick", timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "conversations.json" in proc.stderr and "load.prompts.file" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_a_short_suite_bench_on_the_simulator_is_complete_and_labels_each_request_by_category(tmp_path: Path) -> None:
    stacks = _stack_dir(tmp_path, "    prompts:\n      source: suite\n")
    out = tmp_path / "results"
    proc = _bench(stacks, out, "--quick", "--rounds", "4")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (run_dir,) = run_dirs(out, "eagle-nccl-ll")
    result = load(run_dir)
    suite = build_prompts(PromptSpec(source="suite"))
    assert result["complete"] is True and result["load_plan"]["endpoint"] == "chat"
    assert result["load_plan"]["prompts"]["source"] == "suite" and result["load_plan"]["natural_stop"] is False
    for level in result["levels"]:
        samples = [s for s in level["requests"] if not s["warmup"]]
        assert samples and all(s["error"] is None for s in samples)
        # each request is labelled with its own prompt's category (the suite's interleaving of all seven is the
        # unit test's above: how many of them a 4-round level reaches is the machine's pace)
        assert all(s["category"] == suite[s["prompt_index"]].category for s in samples)
        for s in samples:
            assert s["output_tokens"] == s["expected_output_tokens"]  # fixed length: exactly the suite's own
        rounds = {(s["round_index"], s["arm"]) for s in samples}
        for round_index in {r for r, _ in rounds}:
            sequences = [[s["prompt_index"] for s in sorted(samples, key=lambda s: s["start_s"])
                          if s["round_index"] == round_index and s["arm"] == arm] for arm in ("baseline", "candidate")]
            shorter = min(map(len, sequences))
            assert sequences[0][:shorter] == sequences[1][:shorter]  # the same prompts, in the same order


@pytest.mark.slow
def test_natural_stop_on_the_simulator_lets_replies_end_early_without_errors(tmp_path: Path) -> None:
    stacks = _stack_dir(tmp_path, "    natural-stop: true\n    prompts:\n      source: suite\n")
    out = tmp_path / "results"
    proc = _bench(stacks, out, "--concurrency", "1", "--rounds", "2", "--ungated-rounds", "2", "--round-requests", "6",
                  "--warmup-requests", "1", "--time-scale", "10")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (run_dir,) = run_dirs(out, "eagle-nccl-ll")
    result = load(run_dir)
    assert result["complete"] is True and result["load_plan"]["natural_stop"] is True
    samples = [s for level in result["levels"] for s in level["requests"] if not s["warmup"]]
    assert samples and all(s["error"] is None for s in samples)
    assert all(1 <= s["output_tokens"] <= s["expected_output_tokens"] for s in samples)
    assert any(s["output_tokens"] < s["expected_output_tokens"] for s in samples), "some replies stop by themselves"
