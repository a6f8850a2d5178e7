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


def test_options_that_pick_one_value_of_a_key_offer_the_keys_own_choices():
    """--design, --arrival, --endpoint and the probe's --backend read their choices from the models they set."""
    import typing

    from sglab.cli import build_parser
    from sglab.config.loadplan import LoadPlan, RateSpec
    from sglab.config.policy import PromotionPolicy
    from sglab.probe.spec import ProbeRunSpec

    def literal(model, field):
        annotation = model.model_fields[field].annotation
        while typing.get_origin(annotation) is not typing.Literal:
            annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
        return list(typing.get_args(annotation))

    actions = {a.dest: a for a in bench_parser()._actions}
    assert actions["design"].choices == literal(PromotionPolicy, "design")
    assert actions["arrival"].choices == literal(RateSpec, "arrival")
    assert actions["endpoint"].choices == literal(LoadPlan, "endpoint")
    probe = build_parser("probe")._subparsers._group_actions[0].choices["probe"]
    run = probe._subparsers._group_actions[0].choices["run"]
    backend = next(a for a in run._actions if a.dest == "backend")
    assert backend.choices == literal(ProbeRunSpec, "backend")
