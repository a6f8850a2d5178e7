"""Every launch command sglab renders, parsed and resolved by the pinned SGLang's own ServerArgs (PyPI).

What runs: `prepare_server_args` (SGLang's argparse: unknown flags, refused values, ambiguous prefixes)
and `ServerArgs.resolve_once` (its whole resolution pipeline, the post-init checks: the speculative
handlers per algorithm, adaptive tiers, max-running-requests, draft/target config reads, memory and
backend defaults) with `--device cuda`, what SGLang detects on the GPU node. What cannot run here: anything
that asks the GPU itself (compute capability, free memory: resolution then takes its no-GPU defaults, e.g.
the triton attention backend instead of fa3/flashinfer, and platform checks such as is_sm100 answer
False), weight loading, CUDA-graph capture and NCCL initialisation, which happen after resolution, at start.
"""

from __future__ import annotations

from pathlib import Path

from sglab.config import load_stack
from sglab.config.arms import attribution_arms
from ruamel.yaml import YAML

from sglab.config.arms import candidate_arm
from sglab.core.paths import list_stacks, project_root
from sglab.sglang import flags, rules
from sglab.sglang.flags import SGLANG_VERSION
from sglab.sweep.grid import expand
from .conftest import FIXTURES, command


def shipped_commands() -> list[dict]:
    """Both arms (and the two attribution arms) of every shipped stack, and every arm of every sweep grid."""
    out = []
    for name in list_stacks():
        loaded = load_stack(name)
        out += [command(f"{name}/{arm.name}", arm) for arm in attribution_arms(loaded.config)]
        if loaded.config.sweep is not None:
            out += [command(f"{name}/sweep/{a.name}", a.arm) for a in expand(loaded).arms]
    return out


def test_every_shipped_launch_command_parses_and_resolves_with_the_pinned_sglang(sglang_launch) -> None:
    commands = shipped_commands()
    assert len(commands) >= 50  # 6 stacks x 4 arms + the sweep's 32 arms
    results = sglang_launch(commands)
    failed = [f"{r['name']}: {r['error']}" for r in results if not r["resolved"]]
    assert not failed, "SGLang refuses:\n" + "\n".join(failed)
    by_name = {r["name"]: r["resolved_args"] for r in results}
    # SGLang runs what sglab rendered: nothing silently changed by its resolution
    cand = by_name["eagle-nccl-ll/candidate"]
    assert (cand["speculative_algorithm"], cand["speculative_num_steps"], cand["speculative_eagle_topk"],
            cand["speculative_num_draft_tokens"], cand["max_running_requests"]) == ("EAGLE3", 2, 1, 3, 48)
    assert by_name["eagle-nccl-ll/baseline"]["speculative_algorithm"] is None
    assert by_name["eagle-sweep/sweep/s5-k1-d6-LL-adaptive"]["speculative_adaptive"] is True


def test_the_check_fails_for_an_unknown_flag_a_refused_value_and_a_refused_combination(sglang_launch) -> None:
    base = next(c for c in shipped_commands() if c["name"] == "eagle-nccl-ll/candidate")
    bad = [
        {**base, "name": "unknown flag", "args": base["args"] + ["--speculative-bogus", "1"]},
        {**base, "name": "refused value", "args": base["args"] + ["--speculative-ngram-match-type", "DFS"]},
        {**base, "name": "ambiguous prefix", "args": base["args"] + ["--cuda-graph-bs", "1"]},
        {**base, "name": "unknown algorithm", "args": base["args"] + ["--speculative-algorithm", "MEDUSA"]},
        {**base, "name": "adaptive off-tier", "args": base["args"] + ["--speculative-adaptive"]},
    ]
    results = {r["name"]: r for r in sglang_launch(bad)}
    assert not results["unknown flag"]["parsed"] and "--speculative-bogus" in results["unknown flag"]["error"]
    assert not results["refused value"]["parsed"] and "invalid choice: 'DFS'" in results["refused value"]["error"]
    assert not results["ambiguous prefix"]["parsed"] and "ambiguous option" in results["ambiguous prefix"]["error"]
    assert results["unknown algorithm"]["parsed"] and not results["unknown algorithm"]["resolved"]
    assert "Unknown speculative algorithm name: MEDUSA" in results["unknown algorithm"]["error"]
    assert not results["adaptive off-tier"]["resolved"]
    assert "is not in the adaptive config candidate_steps" in results["adaptive off-tier"]["error"]


def _candidate(root: Path, speculative: dict, extra: list[str] | None = None):
    yaml = YAML()
    doc = yaml.load((project_root() / "stacks" / "Pulumi.eagle-nccl-ll.yaml").read_text())
    doc["config"]["sglab:candidate"]["speculative"] = speculative
    if extra:
        doc["config"]["sglab:server"]["extra-args"] = extra
    (root / "stacks").mkdir(exist_ok=True)
    with (root / "stacks" / "Pulumi.t.yaml").open("w") as handle:
        yaml.dump(doc, handle)
    return load_stack("t", root)


ALGORITHM_STACKS = {
    "EAGLE": {"algorithm": "EAGLE", "draft-model-path": "/shared/d", "num-steps": 3, "eagle-topk": 4,
              "num-draft-tokens": 8},
    "NEXTN": {"algorithm": "NEXTN", "draft-model-path": "/shared/d", "num-steps": 2, "eagle-topk": 1,
              "num-draft-tokens": 3},
    "STANDALONE": {"algorithm": "STANDALONE", "draft-model-path": "/shared/small", "num-steps": 4, "eagle-topk": 1,
                   "num-draft-tokens": 5},
    "NGRAM": {"algorithm": "NGRAM", "num-draft-tokens": 16, "ngram": {"max-bfs-breadth": 8}},
}


def test_config_rules_per_algorithm_agree_with_sglangs_resolution(sglang_launch, tmp_path: Path) -> None:
    """What sglab's config accepts, SGLang resolves to exactly the shape sglab says it runs."""
    commands, expected = [], {}
    for name, speculative in ALGORITHM_STACKS.items():
        spec = _candidate(tmp_path, speculative).config
        draft = FIXTURES / ("small-draft" if name == "STANDALONE" else "kimi-k2.5-eagle3")
        commands.append(command(name, candidate_arm(spec), draft=draft))
        expected[name] = spec.candidate.speculative.resolved_shape()
    results = {r["name"]: r for r in sglang_launch(commands)}
    for name, shape in expected.items():
        got = results[name]
        assert got["resolved"], f"{name}: {got['error']}"
        args = got["resolved_args"]
        assert (args["speculative_num_steps"], args["speculative_eagle_topk"],
                args["speculative_num_draft_tokens"]) == shape, name
        assert args["speculative_algorithm"] == rules.canonical_algorithm(name)
        assert args["max_running_requests"] == 48


def test_sglabs_flag_table_is_the_pinned_parsers(sglang_parser) -> None:
    """Each flag sglab knows exists in SGLang's parser with the same aliases, kind, list-ness and default."""
    assert sglang_parser["version"] == SGLANG_VERSION
    options = sglang_parser["options"]
    problems = []
    for flag in flags.FLAGS:
        real = options.get(flag.name)
        if real is None:
            problems.append(f"{flag.name}: not in SGLang {SGLANG_VERSION}")
            continue
        if set(flag.aliases) != set(real["aliases"]):
            problems.append(f"{flag.name}: aliases {sorted(flag.aliases)}, SGLang has {sorted(real['aliases'])}")
        if flag.is_switch != real["switch"]:
            problems.append(f"{flag.name}: switch {flag.is_switch}, SGLang {real['switch']}")
        if flag.is_list != (real["nargs"] in ("+", "*")):
            problems.append(f"{flag.name}: list-valued {flag.is_list}, SGLang nargs {real['nargs']}")
        if not flag.is_switch and flag.default != real["default"]:
            problems.append(f"{flag.name}: default {flag.default!r}, SGLang {real['default']!r}")
        # SGLang checks the algorithm name at resolution (upper-cased), sglab at validation: same names
        choices = real["choices"] or (list(rules.SPECULATIVE_ALGORITHMS) if flag.name == "--speculative-algorithm"
                                      else None)
        if flag.choices and list(flag.choices) != choices:
            problems.append(f"{flag.name}: choices {list(flag.choices)}, SGLang {choices}")
    assert not problems, "sglab's flag table (sglab/sglang/flags.py) disagrees with SGLang:\n" + "\n".join(problems)


def test_every_builtin_algorithm_is_one_sglang_knows(sglang_launch) -> None:
    """The names sglab accepts are SGLang's builtins (its resolution may still refuse the bare flag for its own
    reasons, e.g. DFLASH without a draft; never as an unknown name)."""
    base = next(c for c in shipped_commands() if c["name"] == "eagle-nccl-ll/baseline")
    results = sglang_launch([{**base, "name": name, "args": base["args"] + ["--speculative-algorithm", name]}
                             for name in rules.SPECULATIVE_ALGORITHMS])
    for result in results:
        assert result["parsed"], result
        assert "Unknown speculative algorithm" not in (result["error"] or ""), result
