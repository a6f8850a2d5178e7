"""`sglab sweep --target urls`: the benchmark Job's sweep of one wave, rehearsed on this machine against simulators
standing in for the arms' Services (the Job's own stack file and command, its result stored in the pre-created
ConfigMap with get + update only), the live flags checked as bench checks them, and bad URL arguments refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from deploy_extras.fake_api import FakeConfigMapApi
from sglab.cli import main
from sglab.config.loader import load_stack
from sglab.deploy.benchmark_job import RESULT_CONFIGMAP_FLAG, benchmark_plan
from sglab.deploy.pull import pull_results
from sglab.results.sink import PAYLOAD_KEY, SUMMARY_KEY, decode_parts
from sglab.sweep.arms import ARM_URL_FLAG, plan_wave, summarize_sweep
from sglab.load.request import stack_sim_env
from sglab.load.targets import start_sims
from sglab.sglang.env import without_server_env
from sglab.sweep.grid import expand

from .conftest import write_stack

ROOT = Path(__file__).resolve().parents[2]
GRID = {"num-steps": [1, 3], "num-draft-tokens": "steps+1", "max-rounds": 4, "parallel-arms": 2,
        "nccl-variants": {"default": {}, "LL": {"NCCL_PROTO": "LL"}}}


def wave_stack(root: Path, name: str = "wavy", **sweep) -> str:
    """Four arms (s1-k1-d2, s3-k1-d4, s1-k1-d2-LL, s3-k1-d4-LL) at parallel-arms 2: waves [0:2], [2:3], [3:4]."""
    write_stack(root, name, {**GRID, **sweep}, policy={"metric": "output_tok_per_s"},
                **{"benchmark-job": {"quick": True}})
    return name


def pod_command(plan, services: dict[str, str]) -> list[str]:
    """The Job's command with each Service URL replaced by the simulator standing in for it."""
    out = []
    for part in plan.job["spec"]["template"]["spec"]["containers"][0]["command"]:
        name, sep, url = part.partition("=")
        out.append(f"{name}={services[url]}" if sep and url in services else services.get(part, part))
    return out


def run_cli(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    assert command[:2] == ["sglab", "sweep"]
    return subprocess.run([sys.executable, "-m", "sglab.cli", *command[1:]], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=420)


@pytest.mark.slow
def test_the_jobs_sweep_of_a_wave_runs_against_urls_and_stores_its_ranking(root, tmp_path):
    name = wave_stack(root, wave=2, **{"carry-arm": "s1-k1-d2"})
    loaded = load_stack(name, root)
    stack = loaded.config
    wave = plan_wave(stack, name)
    assert [a.arm.name for a in wave.arms] == ["s1-k1-d2-LL", "s1-k1-d2"] and wave.count == 3
    plan = benchmark_plan(stack, name)
    pod_stacks = tmp_path / "pod-stacks"
    pod_stacks.mkdir()
    for filename, text in plan.stack_configmap["data"].items():
        (pod_stacks / filename).write_text(text)
    grid = expand(loaded)
    specs = [grid.baseline, *(a.arm.arm for a in wave.arms)]
    results_dir = tmp_path / "pod-results"
    with FakeConfigMapApi() as api:
        for precreated in plan.result_configmaps:
            api.add(stack.namespace, precreated)
        env = {**without_server_env(os.environ), "SGLAB_STACKS_DIR": str(pod_stacks),
               "SGLAB_RESULTS_DIR": str(results_dir), "POD_NAMESPACE": stack.namespace,
               "KUBECONFIG": str(api.kubeconfig(tmp_path / "kubeconfig"))}
        with start_sims(specs, extra_env={**stack_sim_env(loaded), "SGLAB_SIM_TIME_SCALE": "10"}) as sims:
            command = pod_command(plan, {
                f"http://sglang-baseline.{stack.namespace}.svc.cluster.local:{grid.baseline.port}":
                    sims.urls["baseline"],
                **{f"http://{a.release}.{stack.namespace}.svc.cluster.local:{a.arm.arm.port}": sims.urls[a.arm.name]
                   for a in wave.arms}})
            assert command.count(ARM_URL_FLAG) == 2 and "--no-confirm" in command
            done = run_cli(command + ["--round-s", "0.5"], env)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
        assert {m for m, _, _ in api.requests} <= {"GET", "PUT"}  # what the Job's Role allows
        configmap = command[command.index(RESULT_CONFIGMAP_FLAG) + 1]
        stored = api.configmaps[(stack.namespace, configmap)]
        pulled = pull_results(name, namespace=stack.namespace, kubeconfig=env["KUBECONFIG"], base=tmp_path / "results")
    (result_file,) = results_dir.glob(f"{name}/*/result.json")
    result = json.loads(result_file.read_text())
    state = json.loads((result_file.parent / "sweep.json").read_text())
    assert json.loads(decode_parts([stored["binaryData"][PAYLOAD_KEY]])) == result
    assert result["kind"] == "sweep" and state["target"] == "in-cluster"
    assert [json.loads(p.read_text()) for p in pulled] == [result]  # `sglab results pull` brings the wave home
    assert sorted(a["name"] for a in state["arms"]) == ["s1-k1-d2", "s1-k1-d2-LL"]  # only the wave's arms
    assert all(a["live_flags_checked"] and not a["live_mismatches"] for a in result["arms"])
    outputs = summarize_sweep(stored["data"][SUMMARY_KEY])
    assert outputs["status"] == state["status"] in ("swept", "no-winner")
    assert outputs["run_id"] == result["run_id"]
    level_1 = [row for row in outputs["ranking"] if row["level"] == 1]
    assert sorted(row["arm"] for row in level_1) == ["s1-k1-d2", "s1-k1-d2-LL"]
    for row in level_1:  # the recorded eliminations, each with its interval
        (arm,) = [a for a in state["records"]["1"]["arms"] if a["arm"] == row["arm"]]
        assert (row["gain"], row["low"], row["high"], row["eliminated_at"], row["reason"]) == (
            arm["estimate"], arm["low"], arm["high"], arm["eliminated_at"], arm["reason"])
        assert row["gain"] is not None and row["rounds"] >= 1
        assert (row["low"] is None or row["low"] <= row["gain"]) and (row["high"] is None or row["gain"] <= row["high"])
    assert outputs["leader"] == state["winner"]
    if state["winner"]:
        assert outputs["leader_config_hash"] == grid.arm(state["winner"]).config_hash
    assert state["confirmation"] is None  # --no-confirm: the confirmation is its own deployment


@pytest.mark.slow
def test_the_calibration_steps_job_runs_the_baseline_config_in_every_slot_and_ends_calibrated(root, tmp_path):
    """sweep.wave 0 (docs/sweep.md, "On a cluster"): the Job's own command against simulators standing in for the
    baseline and the two slots, each slot serving the baseline's config; calibration-rounds rounds of all three at
    the gated level, no race, the result stored and summarized `calibrated`."""
    name = wave_stack(root, wave=0, **{"calibration-rounds": 3})
    loaded = load_stack(name, root)
    stack = loaded.config
    wave = plan_wave(stack, name)
    assert [a.arm.name for a in wave.arms] == ["baseline@sglang-slot-1", "baseline@sglang-slot-2"]
    plan = benchmark_plan(stack, name)
    pod_stacks = tmp_path / "pod-stacks"
    pod_stacks.mkdir()
    for filename, text in plan.stack_configmap["data"].items():
        (pod_stacks / filename).write_text(text)
    grid = expand(loaded)
    specs = [grid.baseline, *(a.arm.arm for a in wave.arms)]
    with FakeConfigMapApi() as api:
        for precreated in plan.result_configmaps:
            api.add(stack.namespace, precreated)
        env = {**without_server_env(os.environ), "SGLAB_STACKS_DIR": str(pod_stacks),
               "SGLAB_RESULTS_DIR": str(tmp_path / "pod-results"), "POD_NAMESPACE": stack.namespace,
               "KUBECONFIG": str(api.kubeconfig(tmp_path / "kubeconfig"))}
        with start_sims(specs, extra_env={**stack_sim_env(loaded), "SGLAB_SIM_TIME_SCALE": "10"}) as sims:
            command = pod_command(plan, {
                f"http://sglang-baseline.{stack.namespace}.svc.cluster.local:{grid.baseline.port}":
                    sims.urls["baseline"],
                **{f"http://{a.release}.{stack.namespace}.svc.cluster.local:{a.arm.arm.port}": sims.urls[a.arm.name]
                   for a in wave.arms}})
            done = run_cli(command + ["--round-s", "0.5"], env)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
        stored = api.configmaps[(stack.namespace, command[command.index(RESULT_CONFIGMAP_FLAG) + 1])]
    (result_file,) = (tmp_path / "pod-results").glob(f"{name}/*/result.json")
    result = json.loads(result_file.read_text())
    state = json.loads((result_file.parent / "sweep.json").read_text())
    assert state["status"] == "calibrated" and state["arms"] == [] and state["calibration_rounds"] == 3
    assert all(a["live_flags_checked"] and not a["live_mismatches"] for a in result["arms"])
    (level,) = [lv for lv in result["levels"] if lv["rounds"]]
    measured = [r for r in level["rounds"] if r["round_index"] >= 0]
    assert sorted({r["round_index"] for r in measured}) == [0, 1, 2]
    assert sorted(r["arm"] for r in measured if r["round_index"] == 0) == ["baseline", *(a.arm.name for a in wave.arms)]
    outputs = summarize_sweep(stored["data"][SUMMARY_KEY])
    assert outputs["status"] == "calibrated" and outputs["leader"] is None and outputs["ranking"] == []
    assert "calibration of the slot nodes" in outputs["sentence"]


@pytest.mark.slow
def test_a_calibrated_waves_job_reads_the_calibration_steps_sealed_block_and_races_net_of_it(root, tmp_path):
    """A wave after the calibration step (sweep.calibration-run, sweep.calibration-configmap set by `--next`): the
    Job's pod gets the step's result ConfigMap by name, verifies its seal and identity, and every look of its race
    carries the step's block (here the rounds record no node: this rehearsal checks the wiring, the correction itself
    is tests/sweep/test_slot_calibration.py's)."""
    from sglab.analysis.synthetic import synthetic_result
    from sglab.results import integrity
    from sglab.results.sink import write_result_configmap

    from .test_controllers import rounds_of

    name = wave_stack(root, wave=1, **{"calibration-run": "cal-run", "calibration-configmap": "sglab-result-cal",
                                       "slot-nodes": ["gpu-a", "gpu-b"]})
    loaded = load_stack(name, root)
    stack = loaded.config
    wave = plan_wave(stack, name)
    plan = benchmark_plan(stack, name)
    pod_stacks = tmp_path / "pod-stacks"
    pod_stacks.mkdir()
    for filename, text in plan.stack_configmap["data"].items():
        (pod_stacks / filename).write_text(text)
    grid = expand(loaded)
    specs = [grid.baseline, *(a.arm.arm for a in wave.arms)]
    slots = ["baseline@sglang-slot-1", "baseline@sglang-slot-2"]
    block = rounds_of({s: 0.0 for s in slots}, 3, seed=3)
    step = synthetic_result(levels=(1,), rounds=2, stack=name).model_copy(
        update={"kind": "sweep", "run_id": "cal-run", "levels": [block], "complete": True})
    with FakeConfigMapApi() as api:
        for precreated in plan.result_configmaps:
            api.add(stack.namespace, precreated)
        write_result_configmap(integrity.seal(step, key=None).model_dump_json(), "sglab-result-cal", stack.namespace,
                               core_api=api.core_api())
        env = {**without_server_env(os.environ), "SGLAB_STACKS_DIR": str(pod_stacks),
               "SGLAB_RESULTS_DIR": str(tmp_path / "pod-results"), "POD_NAMESPACE": stack.namespace,
               "KUBECONFIG": str(api.kubeconfig(tmp_path / "kubeconfig"))}
        with start_sims(specs, extra_env={**stack_sim_env(loaded), "SGLAB_SIM_TIME_SCALE": "10"}) as sims:
            command = pod_command(plan, {
                f"http://sglang-baseline.{stack.namespace}.svc.cluster.local:{grid.baseline.port}":
                    sims.urls["baseline"],
                **{f"http://{a.release}.{stack.namespace}.svc.cluster.local:{a.arm.arm.port}": sims.urls[a.arm.name]
                   for a in wave.arms}})
            done = run_cli(command + ["--round-s", "0.5"], env)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
        read = [path for method, path, _ in api.requests if method == "GET" and path.endswith("/sglab-result-cal")]
        assert read, api.requests
    assert "calibrated: the race is net of the slot nodes measured by calibration step cal-run" in done.stdout
    assert "uncorrected" not in done.stdout
    (result_file,) = (tmp_path / "pod-results").glob(f"{name}/*/result.json")
    state = json.loads((result_file.parent / "sweep.json").read_text())
    record = state["records"]["1"]
    assert record["calibration_rounds"] == 3 and len(record["calibration"]) == 2


@pytest.mark.slow
def test_a_url_that_serves_another_config_is_refused_before_any_round(root, tmp_path, capfd):
    name = wave_stack(root, wave=1)
    loaded = load_stack(name, root)
    grid = expand(loaded)
    env = {**without_server_env(os.environ), "SGLAB_STACKS_DIR": str(root / "stacks")}
    with start_sims([grid.baseline, grid.arms[0].arm], extra_env=stack_sim_env(loaded)) as sims:
        # s3-k1-d4's URL is the s1-k1-d2 server: the live flags differ from what the stack declares
        done = run_cli(["sglab", "sweep", "--stack", name, "--target", "urls", "--baseline-url", sims.urls["baseline"],
                        ARM_URL_FLAG, f"s3-k1-d4={sims.urls['s1-k1-d2']}", "--no-confirm", "--no-progress",
                        "--out", str(tmp_path / "results")], env)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "live servers differ" in done.stderr and "s3-k1-d4" in done.stderr
    assert not list((tmp_path / "results").glob("*/*/result.json"))  # nothing recorded


@pytest.mark.parametrize("args, words", [
    ([ARM_URL_FLAG, "s1-k1-d2=http://127.0.0.1:9"], ["--baseline-url"]),
    (["--baseline-url", "http://127.0.0.1:9"], ["at least one --arm-url"]),
    (["--baseline-url", "http://127.0.0.1:9", ARM_URL_FLAG, "s9-k1-d10=http://127.0.0.1:9"], ["not arms", "s9-k1-d10"]),
    (["--baseline-url", "http://127.0.0.1:9", ARM_URL_FLAG, "s1-k1-d2"], ["NAME=URL"]),
    (["--baseline-url", "http://127.0.0.1:9", ARM_URL_FLAG, "s1-k1-d2=http://a", ARM_URL_FLAG,
      "s1-k1-d2=http://b"], ["twice"]),
    (["--baseline-url", "http://127.0.0.1:9", ARM_URL_FLAG, "s1-k1-d2=http://a", "--time-scale", "5"],
     ["--time-scale"]),
    (["--target", "sim", RESULT_CONFIGMAP_FLAG, "cm"], ["--result-configmap", "--target in-cluster"]),
    (["--baseline-url", "http://127.0.0.1:9", ARM_URL_FLAG, "s1-k1-d2=http://a", RESULT_CONFIGMAP_FLAG, "cm"],
     ["--result-configmap", "--target in-cluster"]),  # never a silent switch of the target
])
def test_bad_url_arguments_are_refused_with_exit_2(root, monkeypatch, capsys, args, words):
    name = wave_stack(root)
    monkeypatch.setenv("SGLAB_STACKS_DIR", str(root / "stacks"))
    assert main(["sweep", "--stack", name, *args]) == 2
    err = capsys.readouterr().err
    for word in words:
        assert word in err, err


def test_list_names_the_cluster_wave_of_every_arm(root, monkeypatch, capsys):
    name = wave_stack(root)
    monkeypatch.setenv("SGLAB_STACKS_DIR", str(root / "stacks"))
    assert main(["sweep", "--stack", name, "--list"]) == 0
    lines = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert [(arm, wave) for arm, _, _, wave in lines] == [("s1-k1-d2", "1"), ("s3-k1-d4", "1"), ("s1-k1-d2-LL", "2"),
                                                         ("s3-k1-d4-LL", "3")]
