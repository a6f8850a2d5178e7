"""`sglab bench --help`: its options in named groups, and examples that parse."""

from __future__ import annotations

import shlex

from sglab.cli import build_parser
from sglab.cli.bench import EXAMPLES


def bench_parser():
    parser = build_parser("bench")
    return next(a for a in parser._subparsers._group_actions if a.dest == "command").choices["bench"]


def test_every_bench_option_is_in_a_named_group() -> None:
    groups = {g.title: [a for a in g._group_actions] for g in bench_parser()._action_groups}
    loose = [a.option_strings for title in ("positional arguments", "options") for a in groups.pop(title, [])
             if "-h" not in a.option_strings]
    assert loose == []
    assert list(groups) == ["what is compared", "how long", "where the arms run", "load", "requests", "simulators",
                            "output"]
    assert sum(len(actions) for actions in groups.values()) >= 37


def test_the_help_ends_with_examples_that_parse() -> None:
    text = bench_parser().format_help()
    assert text.rstrip().endswith(EXAMPLES.rstrip())
    commands = [line.split("#")[0].split() for line in EXAMPLES.splitlines() if line.strip().startswith("sglab ")]
    assert len(commands) >= 2
    for words in commands:
        args = build_parser("bench").parse_args(words[1:])
        assert args.command == "bench" and args.stack, shlex.join(words)
