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

A guard that dies without SIGTERM (its pod force-deleted, its node lost) cannot let go, and a budget left at 0
blocks every drain and node upgrade for good. So a hold is a lease: each budget it holds carries `sglab/held-by`
(the guard's pod) and `sglab/held-until` (an RFC 3339 UTC time, now + `--lease-s`), renewed every third of the
lease while the guard waits. The reaper (`--reap`, a CronJob beside the Job) releases a budget whose lease has
lapsed or whose holder pod is gone or has ended, and leaves a live holder and an unheld budget alone. Its release
names the resourceVersion it read, so a holder that renews in between wins (the API answers 409 Conflict). A lost
node's pods can keep phase Running in the API, which is why the lapsed lease counts on its own.

The lease length is LEASE_S, not a stack key: it weighs how long a dead guard's hold outlives it (at most a lease
plus the reaper's period) against a renewal write per budget every LEASE_S / 3, and neither depends on the
comparison or the cluster. It reaches the guard as `--lease-s`, in the Job's pod template.

    python -m sglab.deploy.disruption_guard --pdb sglang-baseline --pdb sglang-candidate --release-to 1 \\
        --ready-file /run/sglab-guard/held --lease-s 300
    python -m sglab.deploy.disruption_guard --reap --pdb sglang-baseline --pdb sglang-candidate --release-to 1
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sglab.core.errors import USAGE

HELD_BY = "sglab/held-by"
HELD_UNTIL = "sglab/held-until"
LEASE_S = 300  # a dead guard's hold outlives it by at most this and the reaper's period (module docstring)
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"  # RFC 3339, UTC, as Kubernetes writes times
ENDED = ("Succeeded", "Failed")  # pod phases after which no container of the pod runs again
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


def lease_end(lease_s: float, now: float | None = None) -> str:
    """held-until for a lease taken now, rounded up to the second."""
    end = math.ceil((time.time() if now is None else now) + lease_s)
    return datetime.fromtimestamp(end, timezone.utc).strftime(TIME_FORMAT)


def _parse_time(text: str | None) -> float | None:
    try:
        return datetime.strptime(text or "", TIME_FORMAT).replace(tzinfo=timezone.utc).timestamp()
    except ValueError:
        return None


def set_budget(api: Any, namespace: str, name: str, max_unavailable: int, held_by: str | None,
               held_until: str | None = None, resource_version: str | None = None) -> None:
    """maxUnavailable of one budget, who holds it and until when (both annotations removed when released); with
    `resource_version`, only if the budget is still the one read."""
    body: dict[str, Any] = {"metadata": {"annotations": {HELD_BY: held_by, HELD_UNTIL: held_until}},
                            "spec": {"maxUnavailable": max_unavailable}}
    if resource_version is not None:
        body["metadata"]["resourceVersion"] = resource_version
    api.patch_namespaced_pod_disruption_budget(name, namespace, body)


def hold(api: Any, namespace: str, budgets: list[str], holder: str, lease_s: float = LEASE_S) -> None:
    for name in budgets:
        until = lease_end(lease_s)
        set_budget(api, namespace, name, 0, holder, until)
        print(f"disruption guard: holding PodDisruptionBudget {namespace}/{name} at maxUnavailable 0 "
              f"(lease until {until}, renewed while the benchmark runs)", flush=True)


def renew(api: Any, namespace: str, budgets: list[str], holder: str, lease_s: float) -> list[str]:
    """Move held-until on for each budget still held by `holder`; returns the ones it holds no longer (released
    by the reaper after a lapsed lease, or by someone else), which it stops renewing. A failed renewal is said and
    tried again at the next one."""
    lost = []
    for name in budgets:
        try:
            pdb = api.read_namespaced_pod_disruption_budget(name, namespace)
            if (pdb.metadata.annotations or {}).get(HELD_BY) != holder:
                lost.append(name)
                print(f"disruption guard: {namespace}/{name} is no longer held by {holder} (its lease lapsed and "
                      "the reaper released it?); not renewing it", file=sys.stderr, flush=True)
                continue
            body = {"metadata": {"resourceVersion": pdb.metadata.resource_version,
                                 "annotations": {HELD_UNTIL: lease_end(lease_s)}}}
            api.patch_namespaced_pod_disruption_budget(name, namespace, body)
        except Exception as exc:  # the API may be briefly unreachable: the lease leaves time for the next try
            print(f"disruption guard: could not renew the lease on {namespace}/{name}: {type(exc).__name__}: {exc}",
                  file=sys.stderr, flush=True)
    return lost


def wait_renewing(api: Any, namespace: str, budgets: list[str], holder: str, lease_s: float,
                  stop: threading.Event, max_hold_s: float | None) -> None:
    """Until `stop` (or max_hold_s), renewing the lease every third of it."""
    end = None if max_hold_s is None else time.monotonic() + max_hold_s
    renewed = list(budgets)
    while True:
        left = None if end is None else end - time.monotonic()
        if left is not None and left <= 0:
            return
        if stop.wait(lease_s / 3 if left is None else min(lease_s / 3, left)):
            return
        if renewed and (end is None or time.monotonic() < end):
            lost = renew(api, namespace, renewed, holder, lease_s)
            renewed = [name for name in renewed if name not in lost]


def release(api: Any, namespace: str, budgets: list[str], standing: int, holder: str) -> list[str]:
    """Lower every budget `holder` still holds (or nobody does) back; one another guard holds now (this one's lease
    lapsed, the reaper released it and the next benchmark's guard took it) is left to that guard. Returns the ones
    that failed (each is tried)."""
    failed = []
    for name in budgets:
        try:
            pdb = api.read_namespaced_pod_disruption_budget(name, namespace)
            held_by = (pdb.metadata.annotations or {}).get(HELD_BY)
            if held_by and held_by != holder:
                print(f"disruption guard: left {namespace}/{name} alone: it is held by {held_by} now", flush=True)
                continue
            set_budget(api, namespace, name, standing, None, resource_version=pdb.metadata.resource_version)
            print(f"disruption guard: released {namespace}/{name} to maxUnavailable {standing}", flush=True)
        except Exception as exc:  # the API may be briefly unreachable: report, try the others
            failed.append(name)
            print(f"disruption guard: could not release {namespace}/{name}: {type(exc).__name__}: {exc}",
                  file=sys.stderr, flush=True)
    return failed


def _apps_api() -> Any:
    from kubernetes import client

    return client.AppsV1Api()  # the configuration _policy_api loaded


def _core_api() -> Any:
    from kubernetes import client

    return client.CoreV1Api()  # the configuration _policy_api loaded


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
        scale_to_zero: list[str] | None = None, apps_api: Any = None, lease_s: float = LEASE_S) -> int:
    """Hold, signal readiness, wait for SIGTERM (or `stop`, or max_hold_s) renewing the lease, release, scale the
    arms down."""
    api = api or _policy_api()
    namespace = _namespace(namespace)
    stop = stop or threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        if threading.current_thread() is threading.main_thread():
            signal.signal(sig, lambda *_: stop.set())
    holder = os.environ.get("POD_NAME") or "sglab-bench"
    try:
        hold(api, namespace, budgets, holder, lease_s)
    except Exception as exc:
        release(api, namespace, budgets, standing, holder)  # never leave a partial hold behind
        print(f"disruption guard: cannot hold the budgets ({type(exc).__name__}: {exc}); the benchmark will not "
              "start: the Job's Role must allow get/patch on them", file=sys.stderr, flush=True)
        return USAGE
    Path(ready_file).parent.mkdir(parents=True, exist_ok=True)
    Path(ready_file).write_text(f"{time.time():.0f}\n", encoding="utf-8")
    wait_renewing(api, namespace, budgets, holder, lease_s, stop, max_hold_s)
    failed = release(api, namespace, budgets, standing, holder)
    if scale_to_zero:
        failed += scale_down(apps_api or _apps_api(), namespace, scale_to_zero)
    return 1 if failed else 0


def _status(exc: Exception) -> int | None:
    return getattr(exc, "status", None)  # kubernetes.client.ApiException's HTTP status


def stale(core: Any, namespace: str, holder: str, held_until: str | None, now: float) -> str | None:
    """Why a hold is stale (its lease has lapsed; its holder pod is gone or has ended), or None while its holder may
    still be running and renewing. A held-until that is missing (a guard from before the lease) or not a time
    leaves the holder pod to decide."""
    end = _parse_time(held_until)
    if end is not None and end <= now:
        return f"its lease lapsed at {held_until} ({now - end:.0f} s ago)"
    try:
        pod = core.read_namespaced_pod(holder, namespace)
    except Exception as exc:
        if _status(exc) == 404:
            return f"its holder pod {holder} no longer exists"
        raise
    phase = pod.status.phase if pod.status else None
    return f"its holder pod {holder} has ended ({phase})" if phase in ENDED else None


def reap_one(api: Any, core: Any, namespace: str, name: str, standing: int, now: float) -> str:
    """Release one budget if its hold is stale; what it did and why."""
    try:
        pdb = api.read_namespaced_pod_disruption_budget(name, namespace)
    except Exception as exc:
        if _status(exc) == 404:
            return "no such PodDisruptionBudget: nothing to release"
        raise
    annotations = pdb.metadata.annotations or {}
    holder, until = annotations.get(HELD_BY), annotations.get(HELD_UNTIL)
    if not holder:
        return f"not held (no {HELD_BY}): left alone"
    why = stale(core, namespace, holder, until, now)
    if why is None:
        lease = f"until {until}" if _parse_time(until) is not None else f"with no lease ({HELD_UNTIL}: {until})"
        return f"held by pod {holder} {lease}, which is still running: left alone"
    try:
        set_budget(api, namespace, name, standing, None, None, resource_version=pdb.metadata.resource_version)
    except Exception as exc:
        if _status(exc) == 409:  # changed since it was read: the holder renewed (or let go) meanwhile
            return f"{why}, but it changed while the reaper decided (renewed by {holder}?): left alone"
        raise
    return f"released to maxUnavailable {standing}: {why}"


def reap(budgets: list[str], standing: int, *, namespace: str | None = None, api: Any = None,
         core_api: Any = None) -> int:
    """One line per budget: released (a stale hold), or left alone and why. 1 if one could not be read or released."""
    api = api or _policy_api()
    core = core_api or _core_api()
    namespace = _namespace(namespace)
    failed = 0
    for name in budgets:
        try:
            print(f"disruption guard reaper: {namespace}/{name}: "
                  f"{reap_one(api, core, namespace, name, standing, time.time())}", flush=True)
        except Exception as exc:
            failed += 1
            print(f"disruption guard reaper: could not release {namespace}/{name}: {type(exc).__name__}: {exc}",
                  file=sys.stderr, flush=True)
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
    parser.add_argument("--lease-s", type=float, default=LEASE_S,
                        help=f"the hold's lease, renewed every third of it (default {LEASE_S})")
    parser.add_argument("--reap", action="store_true",
                        help="release each --pdb whose hold is stale (a lapsed lease, a holder pod gone or ended), "
                             "leave the others alone, and exit")
    args = parser.parse_args(argv)
    if args.reap:
        if not args.pdb or args.scale_to_zero:
            parser.error("--reap takes the budgets to look at (--pdb) and nothing to scale down")
        return reap(args.pdb, args.release_to, namespace=args.namespace)
    if not args.pdb and not args.scale_to_zero:
        parser.error("give --pdb or --scale-to-zero (nothing to hold or scale down)")
    if args.lease_s <= 0:
        parser.error("--lease-s must be positive")
    return run(args.pdb, args.release_to, namespace=args.namespace, ready_file=args.ready_file,
               max_hold_s=args.max_hold_s, scale_to_zero=args.scale_to_zero, lease_s=args.lease_s)


if __name__ == "__main__":
    sys.exit(main())
