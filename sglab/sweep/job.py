"""The benchmark Job's sweep side: its `sglab sweep` command against a wave's Services, and the wave's stack
outputs read back from the result it stored (sglab/deploy/benchmark_job.py declares the Job itself)."""

from __future__ import annotations

from typing import Any

from sglab.config.arms import baseline_arm
from sglab.config.stack import StackConfig
from sglab.deploy.naming import PENDING, RESULT_CONFIGMAP_FLAG, release_host, service_url
from sglab.sweep.arms import Wave
from sglab.results.sink import read_summary

ARM_URL_FLAG = "--arm-url"


def sweep_command(stack: StackConfig, stack_name: str, result_configmap: str, wave: Wave) -> list[str]:
    """`sglab sweep` against the baseline and this wave's arm Services; no confirmation (it needs the winner's
    NCCL variant on both arms: a deployment of its own, docs/sweep.md)."""
    base = baseline_arm(stack)
    command = ["sglab", "sweep", "--stack", stack_name, "--target", "in-cluster",
               "--baseline-url", service_url(stack.namespace, "baseline", base.port)]
    for a in wave.arms:
        command += [ARM_URL_FLAG, f"{a.arm.name}=http://{release_host(stack.namespace, a.release)}:{a.arm.arm.port}"]
    command += [RESULT_CONFIGMAP_FLAG, result_configmap, "--no-confirm", "--no-progress"]
    if stack.benchmark_job.quick:
        command.append("--quick")
    return command


def summarize_sweep(summary_json: str | None) -> dict[str, Any]:
    """A sweep wave's outputs from the summary its Job wrote (`sglab sweep --result-configmap`: the result's
    verdict is sglab.sweep.outputs.sweep_verdict): status, ranking, the leader and its config hash."""
    empty = {"status": PENDING, "sentence": "", "run_id": "", "ranking": [], "leader": None,
             "leader_config_hash": None, "leader_cleared_min": False}
    summary = read_summary(summary_json)
    if summary is None:
        return empty
    if isinstance(summary, str):
        return {**empty, "status": "invalid", "sentence": summary}
    verdict = summary.get("verdict")
    if not isinstance(verdict, dict) or summary.get("kind") != "sweep":
        return {**empty, "status": "invalid", "sentence": "the result ConfigMap holds no sglab sweep result summary"}
    ranking = [row for row in verdict.get("ranking") or [] if isinstance(row, dict)]
    return {"status": str(verdict.get("outcome") or PENDING), "sentence": str(verdict.get("sentence") or ""),
            "run_id": summary["run_id"], "ranking": ranking, "leader": verdict.get("winner"),
            "leader_config_hash": verdict.get("winner_config_hash"),
            "leader_cleared_min": bool(verdict.get("winner_cleared_min"))}


def next_command(stack_name: str) -> str:
    return f"sglab sweep --stack {stack_name} --target cluster --next"


def next_step(wave: Wave, sweep: dict[str, Any], stack_name: str) -> str:
    """What to run after this wave: the one command (sglab/sweep/next_wave.py), and what it runs: the next wave
    with its leader carried, or the confirmation A/B."""
    leader = sweep.get("leader")
    if sweep.get("status") in (PENDING, "invalid"):
        return (f"wait for the benchmark Job's sweep result; if the Job failed or pulumi up was interrupted, "
                f"{next_command(stack_name)} resumes this wave")
    if wave.number < wave.count:
        carry = (f" && pulumi config set --path sglab:sweep.carry-arm {leader}" if leader
                 else " && pulumi config rm --path sglab:sweep.carry-arm")
        return (f"{next_command(stack_name)}  (runs: pulumi config set --path sglab:sweep.wave {wave.number + 1}"
                f"{carry} && pulumi up)")
    if not leader:
        return "last wave: no leader (no arm beat the baseline by policy.min-gain); nothing to confirm"
    return (f"{next_command(stack_name)}  (last wave: makes {leader} the stack's candidate, unsets sglab:sweep.wave "
            "and runs pulumi up: the confirmation A/B on fresh rounds; then sglab results pull and sglab promote)")
