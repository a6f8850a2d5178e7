"""charts/locust's master and worker command lines, run for real: distributed Locust with our locustfile,
web login from the Secret, the stack file from its ConfigMap, both arms (two simulators standing in for
the arms' Services) measured in the A/B tab of the master's UI."""

from __future__ import annotations

import subprocess
import sys
import time

import httpx
import pytest

from sglab.config.arms import baseline_arm, candidate_arm
from sglab.config.loader import load_stack
from sglab.core.paths import project_root
from sglab.load.targets import start_sims
from sglab.core.children import free_port

from .test_locust import by_kind, chart_inputs, container, locust_run, render, unsecret

STACK = "eagle-nccl-ll"


def replace_after(args: list[str], flag: str, value: str) -> list[str]:
    out = list(args)
    out[out.index(flag) + 1] = value
    return out


def pod_env(deployment: dict, substitutions: dict[str, str], secrets: dict[str, str]) -> dict[str, str]:
    env = {}
    for item in container(deployment)["env"]:
        if "value" in item:
            env[item["name"]] = substitutions.get(item["value"], item["value"])
        else:
            ref = item["valueFrom"]["secretKeyRef"]
            env[item["name"]] = secrets[f"{ref['name']}/{ref['key']}"]
    return env


def wait_until(check, timeout_s: float, what: str, interval_s: float = 0.5):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(interval_s)
    raise AssertionError(f"timed out waiting for {what}")


def ab_rows(stats: dict) -> dict[str, dict]:
    (table,) = [e for e in stats.get("extended_stats", []) if e.get("key") == "sglab-ab"]
    return {row["arm"]: row for row in table["data"]}


@pytest.mark.slow
def test_chart_commands_run_a_distributed_ab_swarm_behind_login(tmp_path):
    run = locust_run()
    objects = render(chart_inputs(run))
    master = next(d for d in by_kind(objects, "Deployment") if d["metadata"]["name"].endswith("-master"))
    worker = next(d for d in by_kind(objects, "Deployment") if d["metadata"]["name"].endswith("-worker"))
    secrets = {f"{secret.inputs['metadata']['name']}/{k}": v for secret in run.of_type("kubernetes:core/v1:Secret")
               for k, v in unsecret(secret.inputs["stringData"])[0].items()}  # the login and the worker token
    (stack_cm,) = [c for c in run.of_type("kubernetes:core/v1:ConfigMap") if c.name == "locust-stack"]
    stacks_dir = tmp_path / "stacks"
    stacks_dir.mkdir()
    for filename, text in stack_cm.inputs["data"].items():
        (stacks_dir / filename).write_text(text)
    mount = container(master)["volumeMounts"][0]["mountPath"]
    assert master["spec"]["template"]["spec"]["volumes"][0]["configMap"]["name"] == stack_cm.inputs["metadata"]["name"]

    stack = load_stack(STACK).config
    web_port, master_port = free_port(), free_port()
    processes: list[subprocess.Popen] = []
    with start_sims([baseline_arm(stack), candidate_arm(stack)]) as sims:
        substitutions = {run.outputs["baseline_url"]: sims.urls["baseline"],
                         run.outputs["candidate_url"]: sims.urls["candidate"], mount: str(stacks_dir)}
        master_args = replace_after(replace_after(container(master)["args"], "--web-port", str(web_port)),
                                    "--master-bind-port", str(master_port))
        worker_args = replace_after(replace_after(container(worker)["args"], "--master-host", "127.0.0.1"),
                                    "--master-port", str(master_port))
        assert container(master)["command"] == container(worker)["command"] == ["locust"]
        assert master_args[master_args.index("--stack") + 1] == STACK
        logs = {}
        try:
            for role, args, deployment in (("master", master_args + ["--web-host", "127.0.0.1",
                                                                      "--master-bind-host", "127.0.0.1"], master),
                                           ("worker", worker_args, worker)):
                logs[role] = tmp_path / f"{role}.log"
                with open(logs[role], "wb") as log:
                    processes.append(subprocess.Popen(
                        [sys.executable, "-m", "locust", *args], cwd=project_root(), stdout=log,
                        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                             **pod_env(deployment, substitutions, secrets)}))
            url = f"http://127.0.0.1:{web_port}"

            def up():
                for p in processes:
                    assert p.poll() is None, "\n".join(f.read_text()[-2000:] for f in logs.values())
                try:
                    return httpx.get(url + "/", timeout=1.0).status_code in (200, 302)
                except httpx.HTTPError:
                    return False

            wait_until(up, 90, "the master's web UI")
            assert httpx.post(url + "/swarm", data={"user_count": 2, "spawn_rate": 2}, timeout=10).status_code in (
                302, 401)
            env = pod_env(master, substitutions, secrets)
            with httpx.Client(base_url=url, timeout=10) as user:
                login = user.post("/sglab/login_submit", data={"username": env["SGLAB_UI_USERNAME"],
                                                               "password": env["SGLAB_UI_PASSWORD"]})
                assert login.status_code == 302 and "/login" not in login.headers["location"]
                wait_until(lambda: user.get("/stats/requests").json().get("worker_count") == 1, 60, "the worker")
                assert user.post("/swarm", data={"user_count": 2, "spawn_rate": 2}).json()["success"]

                def both_arms_measured():
                    rows = ab_rows(user.get("/stats/requests").json())
                    arms = [rows.get("baseline"), rows.get("candidate")]
                    return rows if all(a and (a.get("decode_tok_s") or 0) > 0 for a in arms) else None

                rows = wait_until(both_arms_measured, 120, "tok/s for both arms in the A/B tab", 1.0)
                user.get("/stop")
        finally:
            for p in processes:
                p.terminate()
            for p in processes:
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=5)
    assert rows["baseline"]["decode_tok_s"] > 0 and rows["candidate"]["decode_tok_s"] > 0
    assert "sglab A/B tab:" not in logs["master"].read_text()  # the stack file loaded
