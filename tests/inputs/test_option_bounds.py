"""Every number is bounded where it enters. A command-line option is refused before anything
starts (exit 2, one line naming the option, the stack key and the limit), with the bound read from the
model field that the same value in a stack file meets; a trace's or dataset's token count is refused at
its file and line."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sglab.cli import UsageError, build_parser, main
from sglab.cli.bounds import bound
from sglab.config.loadplan import LoadPlan, PromptSpec, RateSpec, TraceSpec
from sglab.config.loader import load_stack
from sglab.core.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
BENCH = ["bench", "--stack", "eagle-nccl-ll"]

# argv, words the one error line must hold
REFUSED = [
    (BENCH + ["--concurrency", "1,100000"], ["--concurrency", "'100000'", "at most 4096", "load.concurrency"]),
    (BENCH + ["--concurrency", "1,0"], ["--concurrency", "at least 1"]),
    (BENCH + ["--concurrency", ",".join(str(i) for i in range(1, 40))], ["--concurrency", "at most 32 items"]),
    (BENCH + ["--rounds", "1001"], ["--rounds", "at most 1000", "load.rounds"]),
    (BENCH + ["--rounds", "1e9"], ["--rounds", "whole number"]),
    (BENCH + ["--rounds", "1000000000"], ["--rounds", "at most 1000"]),
    (BENCH + ["--ungated-rounds", "0"], ["--ungated-rounds", "at least 1"]),
    (BENCH + ["--round-s", "inf"], ["--round-s", "finite number", "load.round-duration-s"]),
    (BENCH + ["--round-s", "nan"], ["--round-s", "finite number"]),
    (BENCH + ["--round-s", "-1"], ["--round-s", "greater than 0"]),
    (BENCH + ["--round-s", "1e9"], ["--round-s", "at most 3600"]),
    (BENCH + ["--round-requests", "1000000"], ["--round-requests", "at most 100000"]),
    (BENCH + ["--warmup-requests", "-1"], ["--warmup-requests", "at least 0"]),
    (BENCH + ["--max-new-tokens", "1000000000"], ["--max-new-tokens", "at most 131072", "load.max-new-tokens"]),
    (BENCH + ["--request-timeout-s", "inf"], ["--request-timeout-s", "finite number"]),
    (BENCH + ["--rates", "1,1000000"], ["--rates", "at most 1000", "load.rate.levels"]),
    (BENCH + ["--max-in-flight", "100000"], ["--max-in-flight", "at most 4096"]),
    (BENCH + ["--trace-time-scale", "inf"], ["--trace-time-scale", "finite number"]),
    (BENCH + ["--trace-time-scale", "0"], ["--trace-time-scale", "greater than 0"]),
    (BENCH + ["--prompt-limit", "10000000"], ["--prompt-limit", "at most 1000000"]),
    (BENCH + ["--seed", "-1"], ["--seed", "at least 0", "load.seed"]),
    (BENCH + ["--seed", str(2 ** 64)], ["--seed", "at most 4294967295"]),
    (["sweep", "--stack", "eagle-sweep", "--rounds", "1000000000"], ["--rounds", "sweep.max-rounds"]),
    (["sweep", "--stack", "eagle-sweep", "--round-s", "inf"], ["--round-s", "finite number"]),
    (["ui", "--stack", "eagle-nccl-ll", "--users", "100000"], ["--users", "at most 4096"]),
    (["ui", "--stack", "eagle-nccl-ll", "--spawn-rate", "inf"], ["--spawn-rate", "at most 4096"]),
    (["ui", "--stack", "eagle-nccl-ll", "--web-port", "70000"], ["--web-port", "1 to 65535"]),
    (["probe", "run", "--stack", "eagle-nccl-ll", "--world-size", "100000"], ["--world-size", "at most 64"]),
    (["probe", "run", "--stack", "eagle-nccl-ll", "--samples", "1000000000"], ["--samples", "at most 100000"]),
    (["results", "pull", "--stack", "eagle-nccl-ll", "--keep", "1000000"], ["--keep", "benchmark-job.keep-results"]),
    (["sweep", "--stack", "eagle-sweep", "--max-nodes", "0"], ["--max-nodes", "placement.max-nodes"]),
    (["canary", "--stack", "production", "--target", "sim", "--weight", "inf"], ["--weight", "at most 100"]),
    (["canary", "--stack", "production", "--target", "sim", "--users", "100000"], ["--users", "at most 4096"]),
    (["canary", "--stack", "production", "--target", "sim", "--max-windows", "1e9"], ["--max-windows"]),
    (["canary", "--stack", "production", "--target", "sim", "--window-s", "nan"], ["--window-s", "at most 3600"]),
    (["canary", "--stack", "production", "--target", "sim", "--max-new-tokens", "0"],
     ["--max-new-tokens", "load.max-new-tokens"]),
    (["watch", "--stack", "production", "--horizon-windows", "1000000"], ["--horizon-windows", "at most 1000"]),
    (["watch", "--stack", "production", "--target", "sim", "--window-s", "inf"], ["--window-s"]),
]


@pytest.mark.parametrize("argv, words", REFUSED, ids=[" ".join(a[2:] if a[0] == "bench" else a) for a, _ in REFUSED])
def test_an_out_of_range_option_is_refused_at_once_with_its_limit(tmp_path, capsys, monkeypatch, argv, words):
    monkeypatch.setenv("SGLAB_RESULTS_DIR", str(tmp_path / "results"))
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    for word in words:
        assert word in err, err
    assert not (tmp_path / "results").exists(), "nothing may start"


@pytest.mark.parametrize("option, model, field", [
    ("--rounds", LoadPlan, "rounds"), ("--round-s", LoadPlan, "round_duration_s"),
    ("--round-requests", LoadPlan, "round_requests"), ("--max-new-tokens", LoadPlan, "max_new_tokens"),
    ("--request-timeout-s", LoadPlan, "request_timeout_s"), ("--concurrency", LoadPlan, "concurrency"),
    ("--rates", RateSpec, "levels"), ("--max-in-flight", RateSpec, "max_in_flight"),
    ("--trace-time-scale", TraceSpec, "time_scale"), ("--prompt-limit", PromptSpec, "limit"),
    ("--seed", LoadPlan, "seed"),
])
def test_the_command_line_limit_is_the_model_fields(option, model, field):
    """The option accepts the field's bound and refuses the next value: one declaration, in sglab/config."""
    limit = bound(model, field)
    assert limit is not None
    parser = build_parser("bench")
    edge = f"{limit:g}" if isinstance(limit, float) else str(limit)
    parsed = parser.parse_args([*BENCH, option, edge])
    value = getattr(parsed, option.lstrip("-").replace("-", "_"))
    assert value == limit or value == [limit]
    beyond = f"{limit * 1.5:g}" if isinstance(limit, float) else str(limit + 1)
    with pytest.raises(UsageError, match=option):
        parser.parse_args([*BENCH, option, beyond])


@pytest.fixture
def stack(tmp_path, monkeypatch):
    def write(section: str, values: dict) -> str:
        doc = yaml.safe_load((ROOT / "stacks" / "Pulumi.eagle-nccl-ll.yaml").read_text())
        doc["config"].setdefault(section, {}).update(values)
        folder = tmp_path / "stacks"
        folder.mkdir(exist_ok=True)
        (folder / "Pulumi.lab.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
        monkeypatch.setenv("SGLAB_STACKS_DIR", str(folder))
        return "lab"

    return write


@pytest.mark.parametrize("section, values, key", [
    ("sglab:load", {"concurrency": [1, 100000]}, "load.concurrency"),
    ("sglab:load", {"round-duration-s": float("inf")}, "load.round-duration-s"),
    ("sglab:load", {"rounds": 10 ** 9}, "load.rounds"),
    ("sglab:load", {"max-new-tokens": 10 ** 9}, "load.max-new-tokens"),
    ("sglab:load", {"request-timeout-s": float("nan")}, "load.request-timeout-s"),
    ("sglab:policy", {"min-rounds": 10 ** 9}, "policy.min-rounds"),
    ("sglab:policy", {"levels": [1, 10 ** 6]}, "policy.levels"),
    ("sglab:probe", {"samples": 10 ** 9}, "probe.samples"),
])
def test_the_same_values_in_a_stack_file_are_refused_naming_the_key(stack, section, values, key):
    with pytest.raises(ConfigError) as info:
        load_stack(stack(section, values))
    assert key.split(".")[-1] in str(info.value) and "lab" in str(info.value)


@pytest.mark.parametrize("row, words", [
    ('{"timestamp_s": 0, "prompt": "hi", "output_tokens": 1000000000}', ["output_tokens", "at most 131072"]),
    ('{"timestamp_s": 0, "prompt": "hi", "output_tokens": 1e9}', ["output_tokens", "positive integer"]),
    ('{"timestamp_s": 1e12, "prompt": "hi", "output_tokens": 4}', ["timestamp_s", "a day"]),
])
def test_a_traces_token_count_and_span_are_refused_at_its_line(tmp_path, row, words):
    from sglab.load.profiles import read_trace

    path = tmp_path / "trace.jsonl"
    path.write_text('{"timestamp_s": 0, "prompt": "first", "output_tokens": 4}\n' + row + "\n")
    with pytest.raises(ConfigError) as info:
        read_trace(path)
    message = str(info.value)
    assert message.startswith(f"{path}:2:") and all(w in message for w in words), message


def test_a_datasets_token_counts_are_bounded(tmp_path):
    from sglab.load.datasets import load_openai_jsonl, load_sharegpt

    path = tmp_path / "logs.jsonl"
    path.write_text('{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1000000000}\n')
    with pytest.raises(ConfigError, match=r"logs.jsonl:1: max_tokens: .*at most 131072"):
        load_openai_jsonl(path)
    share = tmp_path / "share.json"
    reply = "word " * 200_000  # about 260,000 tokens to ask for
    share.write_text('[{"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "%s"}]}]' % reply)
    with pytest.raises(ConfigError, match=r"about 260000 tokens .200000 words., over the 131072"):
        load_sharegpt(share)


def test_sweep_rounds_caps_the_gated_levels_without_changing_the_loaded_stack():
    """`sweep --rounds N` is bench's `--rounds`: the most rounds per gated level, in place of sweep.max-rounds."""
    from sglab.cli.sweep import _with_rounds

    args = build_parser().parse_args(["sweep", "--stack", "eagle-sweep", "--rounds", "5"])
    loaded = load_stack("eagle-sweep")
    judged = _with_rounds(loaded, args.rounds)
    assert judged.config.sweep.max_rounds == 5
    assert loaded.config.sweep.max_rounds != 5  # the stack as loaded is left as the file says
    assert _with_rounds(loaded, None) is loaded
    with pytest.raises(UsageError, match="--max-rounds"):  # one name for it, in every command
        build_parser().parse_args(["sweep", "--stack", "eagle-sweep", "--max-rounds", "5"])
