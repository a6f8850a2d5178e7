"""NCCL lints: each fires on its fixture, stays silent on the shipped stacks, and shows in validate / render."""

from __future__ import annotations

import pytest

from sglab.cli import main
from sglab.config.arms import ArmSpec
from sglab.config.lints import lint_arms, stack_lints
from sglab.core.errors import ConfigError
from sglab.core.paths import list_stacks, project_root, stack_path
from sglab.config.loader import load_mapping, load_stack

from .helpers import raw_stack, stack_with

BASE = raw_stack()
ARGS_ON = ("--model-path", "/m", "--tp-size", "8")
ARGS_OFF = ARGS_ON + ("--disable-custom-all-reduce",)


def arm(env: dict[str, str], args: tuple[str, ...] = ARGS_ON, name: str = "baseline") -> ArmSpec:
    return ArmSpec(name=name, role="baseline", speculative=False, image="i", command=("python3",), args=args, env=env)


@pytest.mark.parametrize("name", list_stacks(project_root()))
def test_silent_on_every_shipped_stack_but_what_it_accepts(name):
    """Production ships its images by tag, accepted by name (no registry to take digests from): a note."""
    lints = stack_lints(load_stack(name).config)
    assert [(lint.code, lint.severity) for lint in lints] == (
        [("image-tag-in-production", "note")] if name == "production" else [])


def test_nccl_settings_under_custom_all_reduce_warn():
    (lint,) = lint_arms([arm({"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"})])
    assert lint.code == "custom-all-reduce-shadows-nccl" and lint.severity == "warning"
    assert "8 MiB" in lint.message and "NCCL_ALGO=Ring NCCL_PROTO=LL" in lint.message
    assert lint.key == "server.disable-custom-all-reduce"
    assert lint_arms([arm({"NCCL_PROTO": "LL"}, ARGS_OFF)]) == []
    assert lint_arms([arm({"NCCL_DEBUG": "INFO", "NCCL_SOCKET_IFNAME": "eth0"})]) == []  # no all-reduce tuning
    assert lint_arms([arm({"NCCL_PROTO": "LL"}, ("--tp", "3"))]) == []  # custom all-reduce off at TP 3
    assert lint_arms([arm({"NCCL_PROTO": "LL"}, ARGS_ON + ("--nnodes", "2"))]) == []  # off across nodes
    assert [x.code for x in lint_arms([arm({"NCCL_PROTO": "LL"}, ("--tp", "8"))])] == ["custom-all-reduce-shadows-nccl"]


def test_sglang_owned_variables_say_which_flag_to_use():
    lints = lint_arms([arm({"NCCL_NVLS_ENABLE": "1", "NCCL_CUMEM_ENABLE": "0"}, ARGS_OFF)])
    by_key = {lint.key: lint for lint in lints}
    assert set(by_key) == {"nccl.NCCL_NVLS_ENABLE", "nccl.NCCL_CUMEM_ENABLE"}
    assert "--enable-nccl-nvls to server.extra-args" in by_key["nccl.NCCL_NVLS_ENABLE"].fix
    assert "remove NCCL_CUMEM_ENABLE" in by_key["nccl.NCCL_CUMEM_ENABLE"].fix
    (cumem,) = lint_arms([arm({"NCCL_CUMEM_ENABLE": "1"}, ARGS_OFF)])
    assert "--enable-symm-mem" in cumem.fix and cumem.code == "sglang-overwrites-nccl-env"


def test_forced_ll128_needs_the_opt_in():
    (lint,) = lint_arms([arm({"NCCL_PROTO": "LL,LL128"}, ARGS_OFF)])
    assert lint.severity == "error" and "silent data corruption" in lint.message
    assert "sglab:accept-lints: [nccl-proto-ll128]" in lint.fix
    (accepted,) = lint_arms([arm({"NCCL_PROTO": "LL128"}, ARGS_OFF)], accepted=["nccl-proto-ll128"])
    assert accepted.severity == "note"
    assert lint_arms([arm({"NCCL_PROTO": "^LL128"}, ARGS_OFF)]) == []  # excluding LL128 forces nothing


def test_a_lint_shared_by_both_arms_is_reported_once_and_candidate_only_names_its_key():
    both = stack_with({"server.disable-custom-all-reduce": False})
    (lint,) = stack_lints(both)
    assert lint.arms == ("baseline", "candidate")
    replay = stack_with({"server.disable-custom-all-reduce": False}, stack="article-replay")
    (lint,) = stack_lints(replay)
    assert lint.arms == ("candidate",)
    nvls = stack_with({"candidate.confounds.nccl.NCCL_NVLS_ENABLE": "0"}, stack="article-replay")
    (lint,) = stack_lints(nvls)
    assert lint.key == "candidate.confounds.nccl.NCCL_NVLS_ENABLE"


def _write_stack(tmp_path, monkeypatch, changes: dict) -> str:
    import copy

    from ruamel.yaml import YAML

    raw = copy.deepcopy(BASE)
    for path, value in changes.items():
        *parents, last = path.split(".")
        node = raw
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    with open(tmp_path / "Pulumi.lint-fixture.yaml", "w") as fh:
        YAML().dump({"config": {f"sglab:{k}": v for k, v in raw.items()}}, fh)
    monkeypatch.setenv("SGLAB_STACKS_DIR", str(tmp_path))
    return "lint-fixture"


def test_validate_and_render_show_lints_and_refuse_ll128_until_accepted(tmp_path, monkeypatch, capsys):
    name = _write_stack(tmp_path, monkeypatch, {"server.disable-custom-all-reduce": False})
    assert main(["validate", "--stack", name]) == 0
    out = capsys.readouterr().out
    assert "lints (1):" in out and "custom-all-reduce-shadows-nccl" in out
    assert main(["render", "--stack", name]) == 0
    captured = capsys.readouterr()
    assert "# lints (1):" in captured.out and "warning: lint warning [custom-all-reduce-shadows-nccl]" in captured.err
    name = _write_stack(tmp_path, monkeypatch, {"nccl.NCCL_PROTO": "LL128"})
    assert main(["validate", "--stack", name]) == 2
    err = capsys.readouterr().err
    assert "nccl.NCCL_PROTO" in err and "fix:" in err and "accept-lints" in err
    assert main(["render", "--stack", name]) == 2
    capsys.readouterr()
    name = _write_stack(tmp_path, monkeypatch, {"nccl.NCCL_PROTO": "LL128", "accept-lints": ["nccl-proto-ll128"]})
    assert main(["validate", "--stack", name]) == 0
    assert "note [nccl-proto-ll128]" in capsys.readouterr().out


def test_unknown_lint_code_is_refused_naming_the_key():
    raw = {**raw_stack(), "accept-lints": ["nccl-proto-ll129"]}
    with pytest.raises(ConfigError) as caught:
        load_mapping("eagle-nccl-ll", stack_path("eagle-nccl-ll"), raw)
    assert "accept-lints" in str(caught.value)

