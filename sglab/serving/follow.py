"""The standing control follows the stable revision, never ahead of it.

`pulumi up` gives the control Deployment its next pod template only as an annotation (`follow-template`, with its
digest); the template itself has one manager, this follower (Pulumi ignores `spec.template` on the control:
sglab/deploy/plan.py). A CronJob runs it every few minutes. It copies the next template into the control only
when the Rollout's current revision is its stable one (Argo's own "completed": `status.stableRS ==
status.currentPodHash`, for the spec the controller has observed) and that revision runs the same shared config
(image, server flags, env, NCCL: the `sglab/shared-config` label) as the next template. So while a canary runs the
control keeps the stable's config; an abort leaves both on the old one (and fails the Job, naming the rollback that
puts the stack file back); a promotion moves the control after it completes; a rollback Argo takes without steps
moves it back. Every run prints what it found and did.

    python -m sglab.serving.follow --rollout sglang-candidate --control sglang-baseline --namespace N --stack S
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from typing import Any

from sglab.core.errors import USAGE
from sglab.deploy.naming import release_name
from sglab.serving.spec import SHARED_CONFIG_LABEL

NEXT_TEMPLATE = "sglab/follow-template"  # on the control Deployment: the pod template it should run (JSON)
NEXT_DIGEST = "sglab/follow-digest"  # on the control Deployment: that template's digest
RUNNING_DIGEST = "sglab/template-digest"  # on the pod template: the digest of the template it is
SCHEDULE = "*/10 * * * *"  # a 1T-parameter control then loads for 20-60 min: no need to look more often
FOLLOWER = f"{release_name('baseline')}-follower"  # its CronJob, ServiceAccount and Role


@dataclass(frozen=True)
class Step:
    """What one look decided: the template to write into the control (None: leave it), and why."""

    template: dict[str, Any] | None
    reason: str
    ok: bool = True


def _shared_config(template: dict[str, Any]) -> str | None:
    return (template.get("metadata") or {}).get("labels", {}).get(SHARED_CONFIG_LABEL)


def next_step(rollout: dict[str, Any], control: dict[str, Any], rollback: str = "sglab rollback") -> Step:
    """Whether the control moves to its next template now, from the Rollout and the control as the API returns them
    (`rollback`: the command that puts the stack file back after an abort)."""
    annotations = control.get("metadata", {}).get("annotations") or {}
    if NEXT_TEMPLATE not in annotations or NEXT_DIGEST not in annotations:
        return Step(None, "the control carries no next template (rendered without a follower): nothing to do")
    status = rollout.get("status") or {}
    stable, current = status.get("stableRS", ""), status.get("currentPodHash", "")
    if stable and stable != current and status.get("abort"):  # whatever the control runs: the file is ahead
        return Step(None, f"the rollout was aborted: the stable revision {stable} runs the config from before, and "
                          f"the stack file holds the aborted one ({current}), which no pod runs. Put the file back: "
                          f"{rollback} (or fix it and promote again); the control keeps the stable's config",
                    ok=False)
    running = (control["spec"]["template"].get("metadata") or {}).get("annotations", {}).get(RUNNING_DIGEST)
    if running == annotations[NEXT_DIGEST]:
        return Step(None, "the control runs its declared template: nothing to do")
    generation = str(rollout.get("metadata", {}).get("generation", ""))
    if str(status.get("observedGeneration", "")) != generation:
        return Step(None, f"waiting: Argo has not observed the Rollout's generation {generation} yet")
    if not stable or stable != current:
        return Step(None, f"waiting: a rollout is in progress (stable revision {stable or 'none'}, latest "
                          f"{current}); the control keeps the stable's config")
    template = json.loads(annotations[NEXT_TEMPLATE])
    stable_config = _shared_config(rollout["spec"]["template"])
    next_config = _shared_config(template)
    if stable_config != next_config:
        return Step(None, f"the stable revision {stable} runs shared config {stable_config}, the control's next "
                          f"template {next_config}: not following; run `pulumi up` for the stack so both come "
                          "from one stack file", ok=False)
    return Step(template, f"following: the stable revision {stable} runs shared config {stable_config}; the control "
                          f"moves to its next template (digest {annotations[NEXT_DIGEST][:12]}): it restarts and "
                          "loads, and serves no request meanwhile")


def _apis() -> tuple[Any, Any]:
    from kubernetes import client, config

    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
    return client.CustomObjectsApi(), client.AppsV1Api()


def run(rollout_name: str, control_name: str, namespace: str, *, stack: str = "<stack>",
        apis: tuple[Any, Any] | None = None) -> int:
    """One look: read both, decide, replace the control's template when it follows. Exit 0, or 1 (an abort to
    put right, or unlike configs)."""
    custom, apps = apis or _apis()
    rollout = custom.get_namespaced_custom_object("argoproj.io", "v1alpha1", namespace, "rollouts", rollout_name)
    response = apps.read_namespaced_deployment(control_name, namespace, _preload_content=False)
    control = json.loads(response.data)
    step = next_step(rollout, control, rollback=f"sglab rollback --stack {stack} && pulumi up --stack {stack}")
    if step.template is not None:
        # a JSON patch replaces the whole template: a merge would keep env or volumes the next one dropped
        apps.patch_namespaced_deployment(control_name, namespace,
                                         [{"op": "replace", "path": "/spec/template", "value": step.template}],
                                         _preload_content=False)
    print(f"control follower: {namespace}/{control_name}: {step.reason}", flush=True)
    return 0 if step.ok else 1


def main(argv: list[str] | None = None) -> int:
    from kubernetes.client.exceptions import ApiException
    from kubernetes.config import ConfigException

    parser = argparse.ArgumentParser(description="move the standing control to the stable revision's config")
    parser.add_argument("--rollout", required=True, help="the serving Rollout")
    parser.add_argument("--control", required=True, help="the standing control's Deployment")
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--stack", required=True, help="the stack's name, for the rollback command it names")
    args = parser.parse_args(argv)
    try:
        return run(args.rollout, args.control, args.namespace, stack=args.stack)
    except ApiException as exc:  # a missing object or a Role that does not allow it: say which, change nothing
        if exc.status == 404:  # the first pulumi up declares this CronJob beside them: it may run first
            print(f"control follower: the Rollout {args.rollout} or the Deployment {args.control} is not there yet "
                  "(a first pulumi up still declaring them): nothing to do", flush=True)
            return 0
        print(f"control follower: the API refused ({exc.status} {exc.reason}); its Role must allow get on the "
              f"Rollout {args.rollout} and get/patch on the Deployment {args.control}", file=sys.stderr)
        return 1
    except ConfigException as exc:
        print(f"control follower: no cluster to talk to ({exc}); it runs in the cluster, as its CronJob",
              file=sys.stderr)
        return USAGE


if __name__ == "__main__":
    sys.exit(main())
