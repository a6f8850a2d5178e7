"""The benchmark pod reads the servers' API keys from the stack's Secret, as the servers do: a stack with
serving.api-keys renders servers that refuse requests without the key, so its benchmark must carry it."""

from __future__ import annotations

from sglab.config.loader import load_stack
from sglab.deploy.benchmark_job import bench_pod_template


def _env(stack_name: str) -> list[dict]:
    stack = load_stack(stack_name).config
    pod = bench_pod_template(stack, stack_name, command=["sglab", "bench"], stack_configmap="cm", budgets=[])
    (bench,) = [c for c in pod["spec"]["containers"] if c["name"] == "bench"]
    return bench["env"]


def test_a_serving_stacks_benchmark_reads_both_keys_from_the_secret_by_reference() -> None:
    keys = load_stack("production").config.serving.api_keys
    refs = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in _env("production") if "valueFrom" in e
            and "secretKeyRef" in e["valueFrom"]}
    assert refs == {"SGLAB_API_KEY": {"name": keys.secret, "key": keys.api_key_key},
                    "SGLAB_ADMIN_API_KEY": {"name": keys.secret, "key": keys.admin_api_key_key}}
    assert not any("value" in e and e["name"].endswith("API_KEY") for e in _env("production"))


def test_a_lab_stack_without_keys_carries_none() -> None:
    assert not [e for e in _env("eagle-nccl-ll") if e["name"].endswith("API_KEY")]
