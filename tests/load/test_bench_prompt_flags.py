"""`sglab bench --prompts/--categories/--prompt-limit/--endpoint/--natural-stop`: flag -> plan field.

The flags override the stack's `load` through plan_for, so the model's own defaults (the chat endpoint for
chat-shaped sources) apply as they do for the stack file. build_request imports no Locust.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sglab.cli import UsageError, build_parser, main
from sglab.cli.bench import build_request
from sglab.core.paths import project_root
from sglab.core.errors import ConfigError
from sglab.load.datasets import SUITE_CATEGORIES

from .conftest import ROOT, bench, load, run_dirs

DATA = ROOT / "tests" / "data"


@pytest.fixture
def stack(tmp_path: Path, monkeypatch):
    """Write stacks/Pulumi.lab.yaml: the shipped eagle-nccl-ll with the given `sglab:load` section."""

    def write(load_section: dict | None = None) -> str:
        doc = yaml.safe_load((project_root() / "stacks" / "Pulumi.eagle-nccl-ll.yaml").read_text())
        doc["config"].pop("sglab:load", None)
        if load_section is not None:
            doc["config"]["sglab:load"] = load_section
        folder = tmp_path / "stacks"
        folder.mkdir(exist_ok=True)
        (folder / "Pulumi.lab.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
        monkeypatch.setenv("SGLAB_STACKS_DIR", str(folder))
        return "lab"

    return write


def plan(name: str, *flags: str):
    args = build_parser("bench").parse_args(["bench", "--stack", name, *flags])
    return build_request(args).plan


def test_no_prompt_flags_keep_the_stacks_plan(stack) -> None:
    p = plan(stack({"prompts": {"source": "suite", "categories": "code,maths"}, "natural-stop": True}))
    assert (p.prompts.source, p.prompts.categories, p.endpoint, p.natural_stop) == ("suite", "code,maths", "chat", True)
    p = plan(stack())  # no load section: the default prompts, the bundled suite on the chat endpoint
    assert (p.prompts.source, p.endpoint, p.natural_stop) == ("suite", "chat", False)


def test_prompts_suite_turns_the_default_endpoint_to_chat_unless_endpoint_is_given(stack) -> None:
    name = stack()
    p = plan(name, "--prompts", "suite")
    assert (p.prompts.source, p.prompts.file, p.endpoint) == ("suite", None, "chat")
    assert plan(name, "--prompts", "suite", "--endpoint", "generate").endpoint == "generate"
    assert plan(name, "--endpoint", "chat").endpoint == "chat"


def test_prompts_random_over_a_suite_stack_drops_the_suites_keys_and_goes_back_to_generate(stack) -> None:
    p = plan(stack({"prompts": {"source": "suite", "categories": "code", "limit": 20}}), "--prompts", "random")
    assert (p.prompts.source, p.prompts.categories, p.prompts.limit, p.endpoint) == ("random", None, None, "generate")


def test_an_endpoint_the_stack_declares_holds_when_the_source_changes(stack) -> None:
    # as for the stack file: the model derives the endpoint only where none is written
    assert plan(stack({"endpoint": "generate"}), "--prompts", "suite").endpoint == "generate"


def test_import_paths_resolve_against_the_cwd_with_categories_and_limit(stack, monkeypatch, tmp_path) -> None:
    name = stack()
    monkeypatch.chdir(DATA)
    p = plan(name, "--prompts", "sharegpt:sharegpt_small.json", "--categories", "field:topic", "--prompt-limit", "2")
    assert (p.prompts.source, p.prompts.file) == ("sharegpt", str(DATA / "sharegpt_small.json"))
    assert (p.prompts.categories, p.prompts.limit, p.endpoint) == ("field:topic", 2, "chat")
    p = plan(name, "--prompts", "openai:openai_small.jsonl", "--categories", "mine")
    assert (p.prompts.source, p.prompts.file, p.prompts.categories) == ("openai", str(DATA / "openai_small.jsonl"),
                                                                        "mine")
    prompts_file = tmp_path / "prompts.jsonl"
    prompts_file.write_text('{"prompt": "one"}\n{"prompt": "two"}\n')
    monkeypatch.chdir(tmp_path)
    p = plan(name, "--prompts", "file:prompts.jsonl")
    assert (p.prompts.source, p.prompts.file, p.endpoint) == ("file", str(prompts_file.resolve()), "generate")


def test_categories_and_limit_alone_apply_to_the_stacks_suite(stack) -> None:
    p = plan(stack({"prompts": {"source": "suite"}}), "--categories", "code,maths", "--prompt-limit", "5")
    assert (p.prompts.source, p.prompts.categories, p.prompts.limit) == ("suite", "code,maths", 5)


def test_natural_stop_flags_override_the_stack_both_ways(stack) -> None:
    name = stack({"natural-stop": True})
    assert plan(name).natural_stop is True
    assert plan(name, "--no-natural-stop").natural_stop is False
    assert plan(stack(), "--natural-stop").natural_stop is True


@pytest.mark.parametrize("flags, words", [
    (["--prompts", "bogus"], ["--prompts 'bogus'", "random", "suite", "file:PATH", "sharegpt:PATH", "openai:PATH"]),
    (["--prompts", "sharegpt"], ["--prompts 'sharegpt'", "sharegpt:PATH"]),
    (["--prompts", "suite:x.json"], ["--prompts 'suite:x.json'", "reads no file"]),
    (["--prompts", "openai:missing.jsonl"], ["--prompts", "missing.jsonl", "not found"]),
    (["--prompts", "random", "--categories", "code"], ["--categories", "random", "--prompts suite"]),
    (["--prompts", "random", "--prompt-limit", "4"], ["--prompt-limit", "random"]),
    (["--prompt-limit", "0"], ["--prompt-limit", "at least 1", "load.prompts.limit"]),
    (["--prompts", "suite", "--categories", "code,poetry"], ["--categories", "poetry", ", ".join(SUITE_CATEGORIES)]),
])
def test_bad_prompt_flags_exit_2_with_one_line_naming_the_flag_and_the_fix(stack, tmp_path, capsys, flags,
                                                                          words) -> None:
    name = stack()
    with pytest.raises((UsageError, ConfigError)):
        plan(name, *flags)
    assert main(["bench", "--stack", name, "--out", str(tmp_path / "results"), *flags]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    for word in words:
        assert word in err, err
    assert not (tmp_path / "results").exists()


def test_an_import_the_flags_cannot_read_is_refused_before_anything_starts(stack, tmp_path, capsys) -> None:
    flags = ["--prompts", f"sharegpt:{DATA / 'sharegpt_small.json'}", "--categories", "field:nosuch"]
    assert main(["bench", "--stack", stack(), "--out", str(tmp_path / "results"), *flags]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "sharegpt_small.json" in err and "nosuch" in err and "fix:" in err, err
    assert not (tmp_path / "results").exists()


@pytest.mark.slow
def test_a_quick_run_with_the_suite_and_natural_stop_records_both(stack, out) -> None:
    name = stack()  # the stack's policy gates level 1 (the default), so --concurrency 1 can still decide
    proc = bench(["--stack", name, "--quick", "--concurrency", "1", "--rounds", "6", "--prompts", "suite",
                  "--categories", "code,chat", "--natural-stop"], out, timeout=180)
    (run_dir,) = run_dirs(out, name)
    result = load(run_dir)
    assert result["complete"] is True, proc.stderr
    recorded = result["load_plan"]
    assert recorded["prompts"]["source"] == "suite" and recorded["prompts"]["categories"] == "code,chat"
    assert recorded["endpoint"] == "chat" and recorded["natural_stop"] is True
    samples = result["levels"][0]["requests"]
    assert {s["category"] for s in samples} == {"code", "chat"}
    assert "verdict:" in proc.stdout
    assert "prompts suite (code,chat) to chat, natural stop" in proc.stderr  # the start line says what is sent


def test_max_new_tokens_is_refused_where_every_request_carries_its_own_length(stack, tmp_path, capsys) -> None:
    """The suite's records send their own output lengths: a --max-new-tokens that would be ignored is an error."""
    name = stack()
    assert main(["bench", "--stack", name, "--out", str(tmp_path / "results"), "--prompts", "suite",
                 "--max-new-tokens", "16"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "--max-new-tokens" in err and "--prompts random" in err, err
    assert not (tmp_path / "results").exists()
    assert plan(name, "--prompts", "random", "--max-new-tokens", "16").max_new_tokens == 16
