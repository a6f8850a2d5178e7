"""Whole argument lists, SGLang's flag aliases and argparse prefix abbreviations in confounds and extra-args.

SGLang's launch_server parser is a plain argparse parser (allow_abbrev on), so `--max-running-req 64`
means --max-running-requests 64 on a real server: sglab must read extra-args the same way.
"""

from __future__ import annotations

import pytest

from sglab.cli import main
from sglab.config import confounds, load_stack
from sglab.core.paths import project_root, stack_path

BASE = stack_path("eagle-nccl-ll", project_root()).read_text()


def with_extra_args(base: list[str] | None, candidate: list[str] | None) -> str:
    text = BASE
    if base is not None:
        text = text.replace("    tp-size: 8", f"    tp-size: 8\n    extra-args: {base!r}", 1)
    if candidate is not None:
        text = text.replace("      num-draft-tokens: 3",
                            "      num-draft-tokens: 3\n    confounds:\n      server:\n        extra-args: "
                            f"{candidate!r}", 1)
    return text


@pytest.fixture
def stacks(tmp_path, monkeypatch):
    monkeypatch.setenv("SGLAB_STACKS_DIR", str(tmp_path))
    return tmp_path


def stack_of(stacks, text: str, name: str = "t"):
    (stacks / f"Pulumi.{name}.yaml").write_text(text)
    return load_stack(name).config


def server_confounds(stack) -> dict[str, tuple[str | None, str | None]]:
    return {c.key: (c.baseline, c.candidate) for c in confounds(stack) if c.key.startswith("server ")}


def test_a_list_valued_flag_is_compared_whole(stacks):
    stack = stack_of(stacks,
                     with_extra_args(["--cuda-graph-bs-decode", "1"], ["--cuda-graph-bs-decode", "1", "2", "4", "8"]))
    assert server_confounds(stack) == {"server --cuda-graph-bs-decode": ("1", "1 2 4 8")}


def test_same_list_is_no_confound(stacks):
    stack = stack_of(stacks,
                     with_extra_args(["--cuda-graph-bs-decode", "1", "2"], ["--cuda-graph-bs-decode", "1", "2"]))
    assert server_confounds(stack) == {}


def test_alias_and_prefix_spellings_of_one_flag_are_the_same_flag(stacks):
    stack = stack_of(stacks, with_extra_args(["--dp-size", "2", "--cuda-graph-max-bs-decode", "8"],
                                             ["--data-parallel-size", "2", "--cuda-graph-max-bs-d", "8"]))
    assert server_confounds(stack) == {}
    stack = stack_of(stacks, with_extra_args(["--dp-size", "2"], ["--data-parallel-size", "4"]), "t2")
    assert server_confounds(stack) == {"server --dp-size": ("2", "4")}


def test_a_flag_only_one_arm_sets_is_a_confound(stacks):
    stack = stack_of(stacks, with_extra_args(None, ["--schedule-conservativeness", "0.3"]))
    assert server_confounds(stack) == {"server --schedule-conservativeness": (None, "0.3")}


BAD_EXTRA_ARGS = {
    "prefix-of-managed": (["--max-running-req", "64"], ["--max-running-req", "--max-running-requests",
                                                        "managed by sglab", "server.max-running-requests"]),
    "alias-of-managed": (["--tensor-parallel-size", "8"], ["--tensor-parallel-size", "--tp-size", "managed by sglab"]),
    "equals-prefix-of-managed": (["--mem-fraction=0.5"], ["--mem-fraction", "--mem-fraction-static",
                                                           "managed by sglab"]),
    "prefix-of-speculative": (["--speculative-num-st", "3"], ["--speculative-num-steps", "candidate.speculative"]),
    "ambiguous-prefix": (["--enable", "x"], ["ambiguous", "--enable"]),
}


@pytest.mark.parametrize("case", sorted(BAD_EXTRA_ARGS))
@pytest.mark.parametrize("arm", ["server", "candidate"])
def test_extra_args_cannot_reach_a_managed_flag_by_another_spelling(case, arm, stacks, capsys):
    args, words = BAD_EXTRA_ARGS[case]
    text = with_extra_args(args, None) if arm == "server" else with_extra_args(None, args)
    path = stacks / f"Pulumi.{case}.yaml"
    path.write_text(text)
    assert main(["validate", "--stack", case]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    key = "sglab:server.extra-args" if arm == "server" else "sglab:candidate.confounds.server.extra-args"
    assert f"{path}" in err and f": {key}" in err, err
    for word in words:
        assert word in err, (word, err)
    assert "\n  fix: " in err and "Traceback" not in err


def test_the_live_check_compares_whole_lists_under_the_canonical_name(stacks):
    from sglab.config import candidate_arm
    from sglab.load.targets import live_mismatches
    from sglab.sglang.client import ServerInfo
    from sglab.sglang.flags import decode, flag_key

    stack = stack_of(stacks,
                     with_extra_args(["--cuda-graph-bs-decode", "1", "2", "4", "8", "--max-total", "9000"], None))
    arm = candidate_arm(stack)
    live = {flag_key(k): v for k, v in decode(arm.args).items()}
    live.update(cuda_graph_bs_decode=[1, 2, 4, 8], max_total_tokens=9000)
    assert live_mismatches(arm, ServerInfo("u", live)) == []
    wrong = live_mismatches(arm, ServerInfo("u", {**live, "cuda_graph_bs_decode": [1]}))
    assert wrong == ["candidate: --cuda-graph-bs-decode is [1] on the server, the stack declares '1 2 4 8'"]
