"""The benchmark Job's disruption guard against a real `kubernetes` client and a fake API server on 127.0.0.1: it
holds the arms' PodDisruptionBudgets at 0 while the benchmark runs, on a lease it renews, and lowers them when it
is told to stop, also as a process stopped by SIGTERM (what the kubelet sends a native sidecar when the Job's main
container ends). Its reaper releases a hold whose guard died without one: a lapsed lease, a holder pod that is gone
or has ended; it leaves a live holder and an unheld budget alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta, timezone

import pytest
from kubernetes import client

from sglab.deploy.disruption_guard import HELD_BY, HELD_UNTIL, reap, run

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


def lease_of(api: FakeConfigMapApi, name: str) -> str | None:
    return (api.pdbs[(NS, name)]["metadata"].get("annotations") or {}).get(HELD_UNTIL)


def rfc3339(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_the_guard_leases_its_hold_and_renews_the_lease_while_it_holds(tmp_path, monkeypatch):
    monkeypatch.setenv("POD_NAME", "sglab-bench-abc-xyz")
    with FakeConfigMapApi() as fake:
        for name in BUDGETS:
            fake.add_pdb(NS, name, 1)
        stop, ready, codes = threading.Event(), tmp_path / "held", []
        guard = threading.Thread(target=lambda: codes.append(run(
            BUDGETS, 1, namespace=NS, ready_file=str(ready), api=client.PolicyV1Api(fake.api_client()), stop=stop,
            lease_s=1.5)))  # renewed every 0.5 s
        guard.start()
        try:
            wait_for(ready)
            first = [lease_of(fake, n) for n in BUDGETS]
            now = datetime.now(timezone.utc)
            for until in first:  # an RFC 3339 UTC time, a lease length ahead
                held_until = datetime.strptime(until, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
                assert now - timedelta(seconds=1) < held_until <= now + timedelta(seconds=3), until
            deadline = time.monotonic() + 10
            while not all(lease_of(fake, n) > f for n, f in zip(BUDGETS, first)):
                assert time.monotonic() < deadline, "the lease was never renewed"
                time.sleep(0.1)
            assert [budget(fake, n) for n in BUDGETS] == [(0, "sglab-bench-abc-xyz")] * 2  # still held, by it
        finally:
            stop.set()
            guard.join(20)
        assert codes == [0]
        assert [budget(fake, n) for n in BUDGETS] == [(1, None)] * 2
        assert [lease_of(fake, n) for n in BUDGETS] == [None, None]  # the release removes the lease too


def test_a_guard_whose_hold_was_reaped_stops_renewing_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("POD_NAME", "sglab-bench-abc-xyz")
    with FakeConfigMapApi() as fake:
        for name in BUDGETS:
            fake.add_pdb(NS, name, 1)
        stop, ready = threading.Event(), tmp_path / "held"
        guard = threading.Thread(target=lambda: run(
            BUDGETS, 1, namespace=NS, ready_file=str(ready), api=client.PolicyV1Api(fake.api_client()), stop=stop,
            lease_s=0.6))
        guard.start()
        try:
            wait_for(ready)
            client.PolicyV1Api(fake.api_client()).patch_namespaced_pod_disruption_budget(  # as the reaper releases
                BUDGETS[0], NS, {"metadata": {"annotations": {HELD_BY: None, HELD_UNTIL: None}},
                                 "spec": {"maxUnavailable": 1}})
            time.sleep(1.0)  # several renewals
            assert budget(fake, BUDGETS[0]) == (1, None) and lease_of(fake, BUDGETS[0]) is None  # not taken back
            assert budget(fake, BUDGETS[1]) == (0, "sglab-bench-abc-xyz")  # the other one it still holds
        finally:
            stop.set()
            guard.join(20)
        assert "no longer held by sglab-bench-abc-xyz" in capsys.readouterr().err


def test_a_guard_leaves_a_hold_another_guard_took_over_at_its_end(tmp_path, monkeypatch, capsys):
    """Its lease lapsed (cut off from the API), the reaper released it, and the next benchmark's guard holds the
    budget now: this guard's end lowers only what it still holds."""
    monkeypatch.setenv("POD_NAME", "sglab-bench-abc-xyz")
    with FakeConfigMapApi() as fake:
        for name in BUDGETS:
            fake.add_pdb(NS, name, 1)
        stop, ready, codes = threading.Event(), tmp_path / "held", []
        guard = threading.Thread(target=lambda: codes.append(run(
            BUDGETS, 1, namespace=NS, ready_file=str(ready), api=client.PolicyV1Api(fake.api_client()), stop=stop)))
        guard.start()
        try:
            wait_for(ready)
            client.PolicyV1Api(fake.api_client()).patch_namespaced_pod_disruption_budget(  # the next guard's hold
                BUDGETS[0], NS, {"metadata": {"annotations": {HELD_BY: "sglab-bench-next-pod"}}})
        finally:
            stop.set()
            guard.join(20)
        assert codes == [0]
        assert budget(fake, BUDGETS[0]) == (0, "sglab-bench-next-pod")  # still held, by the other guard
        assert budget(fake, BUDGETS[1]) == (1, None)
    assert "held by sglab-bench-next-pod now" in capsys.readouterr().out


def held(fake: FakeConfigMapApi, name: str, holder: str, until: datetime | None) -> None:
    fake.add_pdb(NS, name, 0)
    annotations = {HELD_BY: holder}
    if until is not None:
        annotations[HELD_UNTIL] = rfc3339(until)
    fake.pdbs[(NS, name)]["metadata"]["annotations"] = annotations


def reaped(fake: FakeConfigMapApi, capsys, policy=None) -> tuple[int, str]:
    code = reap(["sglang-baseline"], 1, namespace=NS, api=policy or client.PolicyV1Api(fake.api_client()),
                core_api=fake.core_api())
    return code, capsys.readouterr().out


SOON = timedelta(minutes=4)


def test_the_reaper_releases_a_hold_whose_holder_pod_is_gone(capsys):
    with FakeConfigMapApi() as fake:
        held(fake, "sglang-baseline", "sglab-bench-abc-xyz", datetime.now(timezone.utc) + SOON)  # force-deleted
        code, out = reaped(fake, capsys)
        assert code == 0
        assert budget(fake, "sglang-baseline") == (1, None) and lease_of(fake, "sglang-baseline") is None
        assert "released" in out and "sglab-bench-abc-xyz" in out and "no longer exists" in out


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_the_reaper_releases_a_hold_whose_holder_pod_has_ended(capsys, phase):
    with FakeConfigMapApi() as fake:
        held(fake, "sglang-baseline", "sglab-bench-abc-xyz", datetime.now(timezone.utc) + SOON)
        fake.add_pod(NS, "sglab-bench-abc-xyz", phase)
        code, out = reaped(fake, capsys)
        assert code == 0 and budget(fake, "sglang-baseline") == (1, None)
        assert "released" in out and phase in out


def test_the_reaper_releases_an_expired_lease_even_while_its_pod_still_shows_running(capsys):
    """A lost node: its pods can keep phase Running in the API while nothing on them runs."""
    with FakeConfigMapApi() as fake:
        held(fake, "sglang-baseline", "sglab-bench-abc-xyz", datetime.now(timezone.utc) - timedelta(minutes=1))
        fake.add_pod(NS, "sglab-bench-abc-xyz", "Running")
        code, out = reaped(fake, capsys)
        assert code == 0
        assert budget(fake, "sglang-baseline") == (1, None) and lease_of(fake, "sglang-baseline") is None
        assert "released" in out and "lease" in out


def test_the_reaper_leaves_a_live_holder_within_its_lease_alone(capsys):
    with FakeConfigMapApi() as fake:
        until = datetime.now(timezone.utc) + SOON
        held(fake, "sglang-baseline", "sglab-bench-abc-xyz", until)
        fake.add_pod(NS, "sglab-bench-abc-xyz", "Running")
        code, out = reaped(fake, capsys)
        assert code == 0
        assert budget(fake, "sglang-baseline") == (0, "sglab-bench-abc-xyz")
        assert lease_of(fake, "sglang-baseline") == rfc3339(until)
        assert not [r for r in fake.requests if r[0] == "PATCH"]
        assert "left alone" in out and "sglab-bench-abc-xyz" in out


def test_the_reaper_leaves_an_unheld_budget_alone(capsys):
    with FakeConfigMapApi() as fake:
        fake.add_pdb(NS, "sglang-baseline", 1)
        code, out = reaped(fake, capsys)
        assert code == 0 and budget(fake, "sglang-baseline") == (1, None)
        assert [(m, p) for m, p, _ in fake.requests] == [
            ("GET", f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets/sglang-baseline")]  # no pod read, no patch
        assert "not held" in out and "left alone" in out


def test_a_lease_renewed_while_the_reaper_decides_is_left_alone(capsys):
    """The reaper releases only the budget it read: a holder that renews in between wins (409 Conflict)."""
    with FakeConfigMapApi() as fake:
        held(fake, "sglang-baseline", "sglab-bench-abc-xyz", datetime.now(timezone.utc) - timedelta(seconds=1))
        renewed = rfc3339(datetime.now(timezone.utc) + SOON)

        class RenewedMeanwhile(client.PolicyV1Api):
            def read_namespaced_pod_disruption_budget(self, name, namespace, **kwargs):
                pdb = super().read_namespaced_pod_disruption_budget(name, namespace, **kwargs)
                client.PolicyV1Api(fake.api_client()).patch_namespaced_pod_disruption_budget(
                    name, namespace, {"metadata": {"annotations": {HELD_UNTIL: renewed}}})  # the guard renews
                return pdb

        code, out = reaped(fake, capsys, RenewedMeanwhile(fake.api_client()))
        assert code == 0
        assert budget(fake, "sglang-baseline") == (0, "sglab-bench-abc-xyz")
        assert lease_of(fake, "sglang-baseline") == renewed
        assert "renewed" in out and "left alone" in out


def test_the_reaper_process_says_what_it_did_to_each_budget(tmp_path):
    with FakeConfigMapApi() as fake:
        held(fake, "sglang-baseline", "sglab-bench-gone", datetime.now(timezone.utc) + SOON)
        fake.add_pdb(NS, "sglang-candidate", 1)
        argv = [sys.executable, "-m", "sglab.deploy.disruption_guard", "--reap", "--release-to", "1",
                "--namespace", NS, *[f"--pdb={n}" for n in BUDGETS]]
        env = {**os.environ, "KUBECONFIG": str(fake.kubeconfig(tmp_path / "kubeconfig"))}
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert len(lines) == 2 and "sglang-baseline" in lines[0] and "released" in lines[0]
        assert "sglang-candidate" in lines[1] and "not held" in lines[1]
        assert [budget(fake, n) for n in BUDGETS] == [(1, None)] * 2


def test_a_release_the_reaper_cannot_make_exits_1(capsys):
    with FakeConfigMapApi() as fake:
        held(fake, "sglang-baseline", "sglab-bench-gone", datetime.now(timezone.utc) + SOON)

        class Refused(client.PolicyV1Api):
            def patch_namespaced_pod_disruption_budget(self, *args, **kwargs):
                raise client.ApiException(status=403, reason="Forbidden")

        code = reap(["sglang-baseline"], 1, namespace=NS, api=Refused(fake.api_client()), core_api=fake.core_api())
        assert code == 1
        assert "could not release" in capsys.readouterr().err
        assert budget(fake, "sglang-baseline") == (0, "sglab-bench-gone")
