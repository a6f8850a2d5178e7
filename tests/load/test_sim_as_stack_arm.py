"""`sglab sim --stack NAME --arm ARM`: a simulator serving one arm of a stack with its exact flags, to stand in
for your own servers: `sglab bench` given their URLs passes the live-flag check and labels the numbers."""

from __future__ import annotations

import subprocess
import sys
import time

import httpx
import pytest

from sglab.config import baseline_arm, candidate_arm, load_stack
from sglab.load.targets import live_mismatches
from sglab.sglang.client import get_server_info
from sglab.sim.testing import free_port

from .conftest import ROOT, bench, child_env, load, run_dirs

STACK = "eagle-nccl-ll"


def _start(arm: str, port: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "sglab.cli", "sim", "--stack", STACK, "--arm", arm, "--port",
                             str(port)], cwd=ROOT, env=child_env({"SGLAB_SIM_TIME_SCALE": "5"}),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _healthy(url: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{url} never became healthy")


def test_two_stack_arms_stand_in_for_your_servers(out):
    ports = {"baseline": free_port(), "candidate": free_port()}
    procs = {arm: _start(arm, port) for arm, port in ports.items()}
    try:
        urls = {arm: f"http://127.0.0.1:{port}" for arm, port in ports.items()}
        for url in urls.values():
            _healthy(url)
        assert live_mismatches(candidate_arm(load_stack(STACK).config), get_server_info(urls["candidate"])) == []
        bench(["--stack", STACK, "--baseline-url", urls["baseline"], "--candidate-url", urls["candidate"],
               "--prompts", "random", "--concurrency", "1", "--rounds", "3", "--round-s", "1",
               "--warmup-requests", "1", "--max-new-tokens", "16", "--own-gate-only"], out)
    finally:
        for proc in procs.values():
            proc.terminate()
        for proc in procs.values():
            proc.wait(timeout=30)
    first_line = procs["candidate"].stderr.readline()
    assert first_line.startswith(f"sglab sim: stack {STACK}'s candidate on http://127.0.0.1:{ports['candidate']}")
    (run_dir,) = run_dirs(out, STACK)
    result = load(run_dir)
    assert result["target"]["kind"] == "urls"
    assert {a["name"]: a["machine"]["producer"] for a in result["arms"]} == {"baseline": "simulator",
                                                                          "candidate": "simulator"}


def test_an_arm_a_stack_does_not_have_is_refused_with_the_choices():
    proc = subprocess.run([sys.executable, "-m", "sglab.cli", "sim", "--stack", STACK, "--arm", "leader"], cwd=ROOT,
                          env=child_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "choose from 'baseline', 'candidate'" in proc.stderr


def test_a_stack_file_given_by_its_path_names_the_arm(tmp_path):
    """`--stack ./my-stack.yaml`, as every other command takes it: the file outside stacks/ is the stack."""
    from sglab.cli.sim import arm_command
    from sglab.core.paths import stacks_dir, use_stack_file

    copy = tmp_path / "Pulumi.my-copy.yaml"
    copy.write_text((stacks_dir() / f"Pulumi.{STACK}.yaml").read_text())
    argv, env, name = arm_command(str(copy), "candidate", 30123)
    assert name == "my-copy" and "--speculative-algorithm" in argv and "30123" in argv
    assert arm_command(STACK, "candidate", 30123)[0] == argv  # the same arm as the stack of that name
    assert use_stack_file("my-copy") == "my-copy"


def test_each_arm_runs_on_its_node_of_the_stack_as_the_bench_places_it_and_node_moves_it():
    """The bench's placement (baseline on the first of sim.nodes, candidate on the second) by default, so two
    `sglab sim` report different machines; `--node` swaps them for the second run of a URL crossover."""
    from sglab.cli import UsageError
    from sglab.cli.sim import arm_command
    from sglab.config import load_stack

    first, second = list(load_stack(STACK).config.sim.nodes)
    assert arm_command(STACK, "baseline", 30001)[1]["SGLAB_SIM_NODE"] == first
    assert arm_command(STACK, "candidate", 30002)[1]["SGLAB_SIM_NODE"] == second
    moved = arm_command(STACK, "baseline", 30001, node=second)[1]
    assert moved["SGLAB_SIM_NODE"] == second
    assert float(moved["SGLAB_SIM_NODE_SPEED"]) == load_stack(STACK).config.sim.nodes[second]
    with pytest.raises(UsageError, match=f"--node elsewhere.*{first}"):
        arm_command(STACK, "baseline", 30001, node="elsewhere")


def _start_raw(argv: list[str], env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "sglab.cli", "sim", *argv], cwd=ROOT, env=child_env(env),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _init(baseline: str, candidate: str, out) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sglab.cli", "init", "--baseline-url", baseline, "--candidate-url",
                           candidate, "--out", str(out)], cwd=ROOT, env=child_env(), capture_output=True, text=True,
                          timeout=60)


def test_init_writes_a_stack_from_two_running_servers_that_matches_them(tmp_path):
    """The candidate also runs another mem-fraction-static: written as a declared confound, which validate lists."""
    from sglab.cli.sim import arm_command

    ports = {"baseline": free_port(), "candidate": free_port()}
    procs = []
    try:
        for arm, port in ports.items():
            argv, env, _ = arm_command(STACK, arm, port)
            if arm == "candidate":
                argv[argv.index("--mem-fraction-static") + 1] = "0.8"
            procs.append(_start_raw(argv, env))
        urls = {arm: f"http://127.0.0.1:{port}" for arm, port in ports.items()}
        for url in urls.values():
            _healthy(url)
        out = tmp_path / "my-stack.yaml"
        proc = _init(urls["baseline"], urls["candidate"], out)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith(f"wrote {out}: both arms match their servers' live flags")
        again = _init(urls["baseline"], urls["candidate"], out)
        assert again.returncode == 2 and "exists" in again.stderr  # never overwritten
        swapped = _init(urls["candidate"], urls["baseline"], tmp_path / "other.yaml")
        assert swapped.returncode == 2 and "(the two URLs look swapped)" in swapped.stderr
        assert not (tmp_path / "other.yaml").exists()
        from sglab.config.loader import load_stack as load_path

        stack = load_path("my-stack", path=out).config
        assert stack.candidate.speculative.algorithm == "EAGLE3" and stack.server.mem_fraction_static == 0.88
        assert stack.candidate.confounds.server.mem_fraction_static == 0.8
        assert {k: v for k, v in dict(stack.nccl).items() if v is not None} == {
            "NCCL_ALGO": "Ring", "NCCL_P2P_LEVEL": "SYS", "NCCL_PROTO": "LL"}
        for arm in (baseline_arm(stack), candidate_arm(stack)):
            assert live_mismatches(arm, get_server_info(urls[arm.name])) == []
        validate = subprocess.run([sys.executable, "-m", "sglab.cli", "validate", "--stack", str(out)], cwd=ROOT,
                                  env=child_env(), capture_output=True, text=True, timeout=60)
        shown = validate.stdout + validate.stderr
        assert validate.returncode == 0, shown
        assert "confounds (1)" in shown and "- server --mem-fraction-static: baseline=0.88 candidate=0.8" in shown
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=30)
