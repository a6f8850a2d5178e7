"""No faked or lossy acceptance: SGLang's runtime simulations and accept thresholds below 1, by any spelling and
in any place, fail validation, and a result whose recorded launch commands carry them can never promote."""

from __future__ import annotations

from pathlib import Path

import pytest

from sglab.analysis.synthetic import synthetic_result
from sglab.analysis.verdict import judge
from sglab.core.errors import ConfigError
from sglab.config.loader import load_stack
from sglab.core.paths import project_root, stack_path
from sglab.sglang.honesty import faked_acceptance, faked_env, launch_env_and_args, lossy_args

GPU = stack_path("eagle-nccl-ll", project_root()).read_text()
SIM = stack_path("sim", project_root()).read_text()
FAKED_NAMES = ["SGLANG_SIMULATE_ACC_LEN", "SGLANG_SIMULATE_ACC_METHOD", "SGLANG_SIMULATE_ACC_TOKEN_MODE",
               "SGLANG_SIMULATE_ACC_GREEDY", "SGLANG_SIMULATE_ACC_SOMETHING_NEWER", "SGL_SIMULATE_ACC_LEN",
               "sglang_simulate_acc_len", "Sglang_Simulate_Acc_Len", "SIMULATE_ACC_LEN", "SIMULATE_ACC_METHOD",
               "SGLANG_SIMULATE_UNIFORM_EXPERTS"]
LOSSY_ARGS = [["--speculative-accept-threshold-single", "0.5"], ["--speculative-accept-threshold-acc=0.9"],
              ["--speculative-accept-threshold-s", "0.3"], ["--speculative-accept-threshold-a", "0"],
              ["--speculative-accept-threshold-single", "nan"]]


@pytest.mark.parametrize("name", FAKED_NAMES)
def test_every_spelling_of_the_simulation_family_is_found(name: str) -> None:
    assert faked_env(name) is not None
    assert faked_env(f" {name} ") is not None


@pytest.mark.parametrize("name", ["SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", "NCCL_PROTO", "SIMULATED",
                                  "MY_SGLANG_SIMULATE_ACC_LEN", "SGLAB_SIM_TIME_SCALE", "SGLANG_ENABLE_SPEC_V2"])
def test_other_variables_are_not(name: str) -> None:
    assert faked_env(name) is None


@pytest.mark.parametrize("args", LOSSY_ARGS)
def test_lossy_thresholds_by_any_spelling(args: list[str]) -> None:
    found = lossy_args(args)
    assert len(found) == 1 and "rejected" in found[0].detail


@pytest.mark.parametrize("args", [[], ["--speculative-accept-threshold-single", "1"],
                                  ["--speculative-accept-threshold-acc", "1.0"], ["--tp", "8"]])
def test_lossless_thresholds_pass(args: list[str]) -> None:
    assert lossy_args(args) == []


def _with_env(text: str, name: str) -> str:
    assert "  sglab:env:\n" in text
    return text.replace("  sglab:env:\n", f"  sglab:env:\n    {name}: \"3\"\n", 1)


def _load(tmp_path: Path, text: str, name: str = "s") -> None:
    path = tmp_path / f"Pulumi.{name}.yaml"
    path.write_text(text)
    load_stack(name, path=path)


@pytest.mark.parametrize("name", ["SGLANG_SIMULATE_ACC_LEN", "SGL_SIMULATE_ACC_LEN", "sglang_simulate_acc_len",
                                  "SIMULATE_ACC_LEN", "SGLANG_SIMULATE_ACC_GREEDY"])
def test_validate_refuses_it_in_the_shared_env(tmp_path: Path, name: str) -> None:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, _with_env(GPU, name))
    text = str(info.value)
    assert f"sglab:env.{name}" in text and "runtime simulation" in text and "remove" in text


def test_validate_refuses_it_in_the_candidates_confounds(tmp_path: Path) -> None:
    text = GPU.replace("  sglab:candidate:\n", "  sglab:candidate:\n    confounds:\n      env:\n"
                       "        SGLANG_SIMULATE_ACC_LEN: \"4\"\n", 1)
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, text)
    assert "candidate.confounds.env.SGLANG_SIMULATE_ACC_LEN" in str(info.value)


@pytest.mark.parametrize("args", LOSSY_ARGS[:3])
def test_validate_refuses_lossy_thresholds_in_extra_args(tmp_path: Path, args: list[str]) -> None:
    shared = GPU.replace("    max-running-requests: 48\n",
                         f"    max-running-requests: 48\n    extra-args: {args!r}\n".replace("'", '"'), 1)
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, shared)
    assert "sglab:server.extra-args" in str(info.value) and "lossy" in str(info.value)
    confounded = GPU.replace("  sglab:candidate:\n", "  sglab:candidate:\n    confounds:\n      server:\n"
                             f"        extra-args: {args!r}\n".replace("'", '"'), 1)
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, confounded)
    assert "candidate.confounds.server.extra-args" in str(info.value) and "lossy" in str(info.value)


def test_a_sim_stack_refuses_it_too(tmp_path: Path) -> None:
    """The simulator ignores SGLANG_SIMULATE_*: on a sim stack it is a dead line that reads as a faked win, and
    promoted values carry env into the target."""
    with pytest.raises(ConfigError, match="runtime simulation"):
        _load(tmp_path, _with_env(SIM, "SGLANG_SIMULATE_ACC_LEN"), "sim")


def test_the_launch_command_reads_back_as_env_and_args() -> None:
    env, args = launch_env_and_args("NCCL_PROTO=LL SGLANG_SIMULATE_ACC_LEN=3 HF_TOKEN=$HF_TOKEN python3 -m "
                                    "sglang.launch_server --tp-size 8 --speculative-accept-threshold-acc 0.5")
    assert env == {"NCCL_PROTO": "LL", "SGLANG_SIMULATE_ACC_LEN": "3", "HF_TOKEN": "$HF_TOKEN"}
    assert args == ["--tp-size", "8", "--speculative-accept-threshold-acc", "0.5"]
    assert [f.key for f in faked_acceptance(env, args)] == ["env SGLANG_SIMULATE_ACC_LEN",
                                                             "server --speculative-accept-threshold-acc"]


@pytest.mark.parametrize("prefix, suffix", [("SGLANG_SIMULATE_ACC_LEN=3 ", ""), ("SGL_SIMULATE_ACC_METHOD=x ", ""),
                                            ("", " --speculative-accept-threshold-single 0.4")])
def test_the_verdict_blocks_a_result_recorded_with_it(prefix: str, suffix: str) -> None:
    """Both arms carry it (so it is no confound): the blocker comes from the recorded launch commands."""
    result = synthetic_result(gain=0.08, round_cv=0.005, shared_cv=0.005, request_cv=0.01, levels=(1,))
    for info in result.arms:
        info.launch_command = f"{prefix}NCCL_PROTO=LL python3 -m sglang.launch_server --tp-size 8{suffix}"
    verdict = judge(result)
    names = [b.name for b in verdict.blockers]
    assert "faked-acceptance" in names and verdict.outcome != "promote", names
    blocker = next(b for b in verdict.blockers if b.name == "faked-acceptance")
    assert "remove" in blocker.fix and "sglab bench --stack synthetic" in blocker.fix


def test_a_stack_that_fakes_acceptance_cannot_be_promoted(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The evidence was measured; then the stack gained SGLANG_SIMULATE_ACC_LEN: promotion reads the stack first."""
    import shutil

    from sglab.cli import main
    from tests.promote.test_promote import bench, point_cli_at

    (tmp_path / "stacks").mkdir()
    for name in ("eagle-nccl-ll", "production"):
        shutil.copy(project_root() / "stacks" / f"Pulumi.{name}.yaml", tmp_path / "stacks")
    bench(tmp_path, "eagle-nccl-ll")
    path = tmp_path / "stacks" / "Pulumi.eagle-nccl-ll.yaml"
    path.write_text(_with_env(path.read_text(), "SGL_SIMULATE_ACC_LEN"))
    before = (tmp_path / "stacks" / "Pulumi.production.yaml").read_bytes()
    point_cli_at(monkeypatch, tmp_path)
    assert main(["promote", "--stack", "eagle-nccl-ll"]) == 2
    err = capsys.readouterr().err
    assert "SGL_SIMULATE_ACC_LEN" in err and "runtime simulation" in err
    assert (tmp_path / "stacks" / "Pulumi.production.yaml").read_bytes() == before
