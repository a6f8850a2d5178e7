"""The benchmark Job's disruption guard against a real `kubernetes` client and a fake API server on 127.0.0.1: it
holds the arms' PodDisruptionBudgets at 0 while the benchmark runs and lowers them when it is told to stop, also
as a process stopped by SIGTERM (what the kubelet sends a native sidecar when the Job's main container ends)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

from kubernetes import client

from sglab.deploy.disruption_guard import HELD_BY, run

from .fake_api import FakeConfigMapApi

NS = "sglab-eagle-nccl-ll"
BUDGETS = ["sglang-baseline", "sglang-candidate"]


def wait_for(path, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def budget(api: FakeConfigMapApi, name: str) -> tuple[int, str | None]:
    pdb = api.pdbs[(NS, name)]
    return pdb["spec"]["maxUnavailable"], (pdb["metadata"].get("annotations") or {}).get(HELD_BY)


def test_the_guard_holds_while_the_benchmark_runs_and_lets_go_at_the_end(tmp_path, monkeypatch):
    monkeypatch.setenv("POD_NAME", "sglab-bench-abc-xyz")
    with FakeConfigMapApi() as fake:
        for name in BUDGETS:
            fake.add_pdb(NS, name, 1)
        fake.add_pdb(NS, "someone-elses", 1)
        stop, ready, codes = threading.Event(), tmp_path / "held", []
        guard = threading.Thread(target=lambda: codes.append(run(
            BUDGETS, 1, namespace=NS, ready_file=str(ready), api=client.PolicyV1Api(fake.api_client()), stop=stop)))
        guard.start()
        wait_for(ready)
        assert [budget(fake, n) for n in BUDGETS] == [(0, "sglab-bench-abc-xyz")] * 2  # a drain now waits
        stop.set()
        guard.join(20)
        assert codes == [0]
        assert [budget(fake, n) for n in BUDGETS] == [(1, None)] * 2  # back to the standing budget
        assert budget(fake, "someone-elses") == (1, None)
        touched = {path.rsplit("/", 1)[1] for method, path, _ in fake.requests if method == "PATCH"}
        assert touched == set(BUDGETS)  # its Role allows exactly these, and nothing else is asked for


def test_a_budget_it_cannot_hold_stops_the_benchmark_and_leaves_none_held(tmp_path):
    with FakeConfigMapApi() as fake:
        fake.add_pdb(NS, BUDGETS[0], 1)  # the candidate's is missing
        code = run(BUDGETS, 1, namespace=NS, ready_file=str(tmp_path / "held"),
                   api=client.PolicyV1Api(fake.api_client()), stop=threading.Event())
        assert code == 2 and not (tmp_path / "held").exists()  # the startup probe never passes: no benchmark
        assert budget(fake, BUDGETS[0]) == (1, None)


def test_the_guard_process_lets_go_on_sigterm(tmp_path):
    with FakeConfigMapApi() as fake:
        for name in BUDGETS:
            fake.add_pdb(NS, name, 1)
        kubeconfig = fake.kubeconfig(tmp_path / "kubeconfig")
        ready = tmp_path / "held"
        argv = [sys.executable, "-m", "sglab.deploy.disruption_guard", "--release-to", "1", "--namespace", NS,
                "--ready-file", str(ready), *[f"--pdb={n}" for n in BUDGETS]]
        env = {**os.environ, "KUBECONFIG": str(kubeconfig), "POD_NAME": "bench-pod"}
        process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_for(ready, 60)
            assert [budget(fake, n)[0] for n in BUDGETS] == [0, 0]
            process.send_signal(signal.SIGTERM)
            out, err = process.communicate(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(10)
        assert process.returncode == 0, err
        assert [budget(fake, n) for n in BUDGETS] == [(1, None)] * 2
        assert "released" in out
