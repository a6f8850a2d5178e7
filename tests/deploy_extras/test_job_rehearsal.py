"""The benchmark Job's pod, rehearsed on this machine: its stack file (from the ConfigMap), its `sglab bench`
command against two simulators standing in for the arms' Services, its result written to the pre-created
ConfigMap (get + update only, as its Role allows), the stack outputs computed from it, and `results pull`."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from sglab.config.arms import baseline_arm, candidate_arm
from sglab.config.loader import load_stack
from sglab.deploy.benchmark_job import RESULT_CONFIGMAP_FLAG, benchmark_plan, summarize_result
from sglab.deploy.naming import service_url
from sglab.deploy.pull import pull_results
from sglab.results.sink import PAYLOAD_KEY, SUMMARY_KEY, decode_parts, write_result_configmap
from sglab.load.targets import start_sims

from .fake_api import FakeConfigMapApi

STACK = "eagle-nccl-ll"


@pytest.mark.slow
def test_job_pod_rehearsal_end_to_end(tmp_path, monkeypatch):
    stack = load_stack(STACK).config
    plan = benchmark_plan(stack, STACK)
    stacks_dir = tmp_path / "stacks"
    stacks_dir.mkdir()
    for filename, text in plan.stack_configmap["data"].items():
        (stacks_dir / filename).write_text(text)
    monkeypatch.setenv("SGLAB_STACKS_DIR", str(stacks_dir))
    in_pod = load_stack(STACK).config  # what the pod's `sglab bench` loads
    assert baseline_arm(in_pod).config_hash == baseline_arm(stack).config_hash
    assert candidate_arm(in_pod).config_hash == candidate_arm(stack).config_hash

    container = plan.job["spec"]["template"]["spec"]["containers"][0]
    command = list(container["command"])
    result_configmap = command[command.index(RESULT_CONFIGMAP_FLAG) + 1]
    bench_help = subprocess.run([sys.executable, "-m", "sglab.cli", "bench", "--help"], capture_output=True,
                                text=True, timeout=120).stdout
    bench_writes_configmap = RESULT_CONFIGMAP_FLAG in bench_help
    if not bench_writes_configmap:  # until `sglab bench` has the flag, the sink is called below instead
        flag = command.index(RESULT_CONFIGMAP_FLAG)
        del command[flag:flag + 2]
    results_dir = tmp_path / "pod-results"
    namespace = stack.namespace
    with FakeConfigMapApi() as api:
        for precreated in plan.result_configmaps:
            api.add(namespace, precreated)
        env = {**os.environ, "SGLAB_STACKS_DIR": str(stacks_dir), "SGLAB_RESULTS_DIR": str(results_dir),
               "KUBECONFIG": str(api.kubeconfig(tmp_path / "kubeconfig")), "POD_NAMESPACE": namespace}
        with start_sims([baseline_arm(in_pod), candidate_arm(in_pod)]) as sims:
            services = {service_url(namespace, "baseline", baseline_arm(stack).port): sims.urls["baseline"],
                        service_url(namespace, "candidate", candidate_arm(stack).port): sims.urls["candidate"]}
            command = [services.get(part, part) for part in command] + ["--quick", "--rounds", "4", "--no-progress"]
            assert command[:2] == ["sglab", "bench"]
            done = subprocess.run([sys.executable, "-m", "sglab.cli", *command[1:]], env=env, capture_output=True,
                                  text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        (result_file,) = results_dir.glob(f"{STACK}/*/result.json")
        result_json = result_file.read_text()
        if not bench_writes_configmap:
            write_result_configmap(result_json, result_configmap, namespace, core_api=api.core_api())
        assert [m for m, _, _ in api.requests] == ["GET", "PUT"]  # what the Job's Role allows
        stored = api.configmaps[(namespace, result_configmap)]
        summary = summarize_result(stored["data"][SUMMARY_KEY])
        assert json.loads(decode_parts([stored["binaryData"][PAYLOAD_KEY]])) == json.loads(result_json)
        pulled = pull_results(STACK, kubeconfig=env["KUBECONFIG"], base=tmp_path / "results")
    verdict = json.loads(result_json)["verdict"]
    assert summary["verdict"] == verdict["outcome"] in ("promote", "reject", "inconclusive")
    assert [lv["concurrency"] for lv in summary["levels"]] == [lv["concurrency"] for lv in verdict["levels"]]
    assert all(lv["gain"] is not None for lv in summary["levels"])
    assert pulled == [tmp_path / "results" / STACK / result_file.parent.name / "result.json"]
    assert json.loads(pulled[0].read_text()) == json.loads(result_json)
