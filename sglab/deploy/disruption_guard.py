"""The benchmark Job's disruption guard: the arms' PodDisruptionBudgets at maxUnavailable 0 while it measures.

Outside a benchmark the budgets let a drain, a node upgrade or the autoscaler evict a server (their standing
maxUnavailable, `disruption-budget.max-unavailable`); a drain that evicts a server mid-run would spoil the
comparison and reload the model. The guard runs as a native sidecar of the Job's pod (an init container with
`restartPolicy: Always`, Kubernetes 1.29+): it holds every budget at 0 before the benchmark container starts
(its startup probe waits for the file `--ready-file`), and when the benchmark ends (the kubelet stops the
sidecar after the main container, on success, failure or deadline) it lowers each budget back to its standing
value. Its Role may get and patch exactly those budgets (by name), nothing else. In a lab stack it then scales
the arms' Deployments to 0 (`--scale-to-zero`, benchmark-job.scale-arms-to-zero): the GPUs go back to the pool
when the measurement is done; its Role may patch exactly those Deployments' scale. `pulumi up --refresh` brings
them back (docs/in-cluster.md).

    python -m sglab.deploy.disruption_guard --pdb sglang-baseline --pdb sglang-candidate --release-to 1 \\
        --ready-file /run/sglab-guard/held
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from sglab.core.errors import USAGE

HELD_BY = "sglab/held-by"
NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
READY_DIR = "/run/sglab-guard"
READY_FILE = f"{READY_DIR}/held"


def _policy_api(api_client: Any = None) -> Any:
    from kubernetes import client, config

    if api_client is None:
        try:
            config.load_incluster_config()
        except config.ConfigException:
            config.load_kube_config()
    return client.PolicyV1Api(api_client)


def _namespace(given: str | None) -> str:
    if given:
        return given
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    return NAMESPACE_FILE.read_text(encoding="utf-8").strip()


def set_budget(api: Any, namespace: str, name: str, max_unavailable: int, held_by: str | None) -> None:
    """maxUnavailable of one budget, and who holds it (annotation removed when released)."""
    body = {"metadata": {"annotations": {HELD_BY: held_by}}, "spec": {"maxUnavailable": max_unavailable}}
    api.patch_namespaced_pod_disruption_budget(name, namespace, body)


def hold(api: Any, namespace: str, budgets: list[str], holder: str) -> None:
    for name in budgets:
        set_budget(api, namespace, name, 0, holder)
        print(f"disruption guard: holding PodDisruptionBudget {namespace}/{name} at maxUnavailable 0", flush=True)


def release(api: Any, namespace: str, budgets: list[str], standing: int) -> list[str]:
    """Lower every budget back; returns the ones that failed (each is tried)."""
    failed = []
    for name in budgets:
        try:
            set_budget(api, namespace, name, standing, None)
            print(f"disruption guard: released {namespace}/{name} to maxUnavailable {standing}", flush=True)
        except Exception as exc:  # the API may be briefly unreachable: report, try the others
            failed.append(name)
            print(f"disruption guard: could not release {namespace}/{name}: {type(exc).__name__}: {exc}",
                  file=sys.stderr, flush=True)
    return failed


def _apps_api() -> Any:
    from kubernetes import client

    return client.AppsV1Api()  # the configuration _policy_api loaded


def scale_down(apps: Any, namespace: str, deployments: list[str]) -> list[str]:
    """Scale each Deployment to 0 replicas; returns the ones that failed (each is tried)."""
    failed = []
    for name in deployments:
        try:
            apps.patch_namespaced_deployment_scale(name, namespace, {"spec": {"replicas": 0}})
            print(f"disruption guard: scaled {namespace}/{name} to 0 replicas (its GPUs are free; "
                  "`pulumi up --refresh` brings it back)", flush=True)
        except Exception as exc:
            failed.append(name)
            print(f"disruption guard: could not scale {namespace}/{name} to 0: {type(exc).__name__}: {exc}",
                  file=sys.stderr, flush=True)
    return failed


def run(budgets: list[str], standing: int, *, namespace: str | None = None, ready_file: str = READY_FILE,
        max_hold_s: float | None = None, api: Any = None, stop: threading.Event | None = None,
        scale_to_zero: list[str] | None = None, apps_api: Any = None) -> int:
    """Hold, signal readiness, wait for SIGTERM (or `stop`, or max_hold_s), release, scale the arms down."""
    api = api or _policy_api()
    namespace = _namespace(namespace)
    stop = stop or threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        if threading.current_thread() is threading.main_thread():
            signal.signal(sig, lambda *_: stop.set())
    holder = os.environ.get("POD_NAME") or "sglab-bench"
    try:
        hold(api, namespace, budgets, holder)
    except Exception as exc:
        release(api, namespace, budgets, standing)  # never leave a partial hold behind
        print(f"disruption guard: cannot hold the budgets ({type(exc).__name__}: {exc}); the benchmark will not "
              "start: the Job's Role must allow get/patch on them", file=sys.stderr, flush=True)
        return USAGE
    Path(ready_file).parent.mkdir(parents=True, exist_ok=True)
    Path(ready_file).write_text(f"{time.time():.0f}\n", encoding="utf-8")
    stop.wait(max_hold_s)
    failed = release(api, namespace, budgets, standing)
    if scale_to_zero:
        failed += scale_down(apps_api or _apps_api(), namespace, scale_to_zero)
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="hold the arms' PodDisruptionBudgets while the benchmark runs")
    parser.add_argument("--pdb", action="append", default=[], help="a PodDisruptionBudget to hold (repeat)")
    parser.add_argument("--scale-to-zero", action="append", default=[],
                        help="a Deployment to scale to 0 replicas at the end (repeat)")
    parser.add_argument("--release-to", type=int, required=True, help="maxUnavailable to restore at the end")
    parser.add_argument("--namespace")
    parser.add_argument("--ready-file", default=READY_FILE)
    parser.add_argument("--max-hold-s", type=float, help="release after this long even without a signal")
    args = parser.parse_args(argv)
    if not args.pdb and not args.scale_to_zero:
        parser.error("give --pdb or --scale-to-zero (nothing to hold or scale down)")
    return run(args.pdb, args.release_to, namespace=args.namespace, ready_file=args.ready_file,
               max_hold_s=args.max_hold_s, scale_to_zero=args.scale_to_zero)


if __name__ == "__main__":
    sys.exit(main())
