"""The simulators' time scale is bounded to what they model faithfully (0.25 to 10) at every entry: `sglab bench
--time-scale` and `--sim-env`, `sglab sweep --time-scale`, the stack's `sim.time-scale`, `sglab sim`; each refusal
names the limit and the fix (benchmarks/time_scale_fidelity.py measures the range)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sglab.cli import main
from sglab.core.errors import ConfigError
from sglab.config.loader import load_stack
from sglab.core.paths import project_root, stack_path
from sglab.sglang.sim_knobs import TIME_SCALE_MAX, TIME_SCALE_MIN, time_scale_problem
from sglab.sim.cli_args import SimArgsError, parse_sim_args

OUTSIDE = ["1e300", "50", "10.5", "0.01", "nan", "inf"]


def test_the_range_is_the_measured_one() -> None:
    assert (TIME_SCALE_MIN, TIME_SCALE_MAX) == (0.25, 10.0)
    assert time_scale_problem(1.0) is None and time_scale_problem(10.0) is None and time_scale_problem(0.25) is None
    assert "0.25 to 10" in time_scale_problem(11.0)


@pytest.mark.parametrize("value", OUTSIDE)
def test_bench_refuses_it_before_anything_starts(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--stack", "eagle-nccl-ll", "--time-scale", value, "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "--time-scale" in err and "0.25 to 10" in err and "use a time scale from 0.25 to 10" in err


def test_bench_refuses_it_through_sim_env(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--stack", "eagle-nccl-ll", "--sim-env", "SGLAB_SIM_TIME_SCALE=200", "--no-progress"]) == 2
    assert "--sim-env" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["sweep", "--stack", "eagle-sweep"], ["watch", "--stack", "production",
                                     "--target", "sim"], ["canary", "--stack", "production", "--target", "sim"]])
def test_every_time_scale_option_refuses_it_as_it_is_parsed(command: list[str],
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """One option type (sglab/cli/bounds.py time_scale_option) for every command's --time-scale."""
    for value in ("50", "nan", "abc"):
        assert main([*command, "--time-scale", value]) == 2
        err = capsys.readouterr().err
        assert "--time-scale" in err and ("0.25 to 10" in err or "is not a number" in err), err


def test_sweep_refuses_it() -> None:
    done = subprocess.run([sys.executable, "-m", "sglab.cli", "sweep", "--stack", "eagle-sweep", "--time-scale", "200"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "0.25 to 10" in done.stderr, done.stderr


@pytest.mark.parametrize("value", ["50", "0.1"])
def test_the_stack_key_refuses_it(tmp_path: Path, value: str) -> None:
    text = stack_path("sim", project_root()).read_text().replace("    time-scale: 1\n", f"    time-scale: {value}\n")
    path = tmp_path / "Pulumi.s.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_stack("s", path=path)
    assert "sim.time-scale" in str(info.value) and ("10" in str(info.value) or "0.25" in str(info.value))


@pytest.mark.parametrize("value", OUTSIDE)
def test_sglab_sim_refuses_it(value: str) -> None:
    with pytest.raises(SimArgsError) as info:
        parse_sim_args(["--model-path", "m", "--sim-time-scale", value], env={})
    assert "must be" in str(info.value) and "use 0.25 to 10" in str(info.value)
    with pytest.raises(SimArgsError):
        parse_sim_args(["--model-path", "m"], env={"SGLAB_SIM_TIME_SCALE": value})


def test_a_behaviour_test_may_opt_in_and_the_server_says_it_is_not_faithful() -> None:
    from sglab.sim.server import sim_block  # noqa: F401  (the block reports time_scale_faithful)

    config = parse_sim_args(["--model-path", "m", "--sim-time-scale", "50", "--sim-allow-unfaithful-time-scale", "1"],
                            env={})
    assert config.time_scale == 50.0
    with pytest.raises(SimArgsError):
        parse_sim_args(["--model-path", "m", "--sim-time-scale", "0", "--sim-allow-unfaithful-time-scale", "1"], env={})


def _request(*argv: str):
    import argparse

    from sglab.cli.bench import build_request, register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    return build_request(parser.parse_args(["bench", "--stack", "eagle-nccl-ll", "--no-progress", *argv]))


def test_closed_loop_streams_x_scale_is_bounded_too(capsys: pytest.CaptureFixture[str]) -> None:
    """Measured: 16 streams stay faithful at 3x, 4 at 10x, 1 at 30x; 16 at 5x or 4 at 30x do not."""
    assert main(["bench", "--stack", "eagle-nccl-ll", "--time-scale", "5", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "16 concurrent streams is 80 streams x scale, beyond the 48" in err
    assert "at most 3 with concurrency 16" in err
    assert _request("--time-scale", "3").sim_env["SGLAB_SIM_TIME_SCALE"] == "3"  # the demo's
    assert _request("--quick").sim_env["SGLAB_SIM_TIME_SCALE"] == "10"  # levels 1 and 4
    assert _request("--time-scale", "5", "--workers", "2").plan.concurrency == [1, 4, 16]  # 8 streams per process
    assert _request("--time-scale", "10", "--profile", "rate", "--rates", "1,16")  # open loop: the range alone
