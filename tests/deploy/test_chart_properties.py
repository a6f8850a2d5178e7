"""Property test: any stack the model accepts renders, through the real Helm engine, to schema-valid objects."""

from __future__ import annotations

import kubernetes_validate
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sglab.config import baseline_arm, candidate_arm
from sglab.config.loader import _plain, load_stack
from sglab.config.stack import StackConfig
from sglab.deploy.naming import chart_dir
from sglab.deploy.render import render_chart
from sglab.deploy.values import chart_values
from sglab.sglang.secret_names import secret_word

VERSIONS = ("1.31", kubernetes_validate.latest_version())
label_part = st.from_regex(r"[a-z0-9]([a-z0-9._-]{0,10}[a-z0-9])?", fullmatch=True)
label_key = st.one_of(label_part, st.builds(lambda p, n: f"{p}.io/{n}", st.from_regex(r"[a-z]{1,8}", fullmatch=True),
                                            label_part))
labels = st.dictionaries(label_key, label_part, max_size=3)
toleration = st.one_of(
    st.fixed_dictionaries({"key": label_key, "operator": st.just("Exists"),
                           "effect": st.sampled_from(["NoSchedule", "PreferNoSchedule"])}),
    st.fixed_dictionaries({"key": label_key, "operator": st.just("Equal"), "value": label_part,
                           "effect": st.just("NoExecute"), "toleration-seconds": st.integers(0, 3600)}),
)
quantity = st.builds(lambda n, unit: f"{n}{unit}", st.integers(1, 512), st.sampled_from(["Mi", "Gi", ""]))
# Controls, format (bidi, zero-width) and separator characters but the plain space, private-use and unassigned
# code points, and credentials shaped user:pass@host, are refused in any stack value (sglab/config/base.py).
env_value = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc", "Cf", "Zl", "Zp", "Zs", "Co", "Cn"),
                                  exclude_characters="@", include_characters=" "), max_size=20)


@st.composite
def stacks(draw) -> StackConfig:
    data = _plain(load_stack("eagle-nccl-ll").raw)
    gpus = draw(st.sampled_from([1, 2, 4, 8]))
    nodes = draw(st.sampled_from([1, 1, 2]))
    data["server"]["tp-size"] = gpus * nodes
    data["server"]["port"] = draw(st.integers(1024, 65535))
    data["server"]["extra-args"] = draw(st.lists(st.sampled_from(
        ["--log-level", "debug", "--chunked-prefill-size", "8192", "--json-model-override-args", '{"a": [1, "b"]}',
         "--enable-cache-report"]), max_size=4))
    # names the stack refuses as secret-shaped (SGLANG_DSN, SGLANG_PASS...) are not stacks it accepts
    env_name = st.from_regex(r"SGLANG_[A-Z]{1,8}", fullmatch=True).filter(lambda name: secret_word(name) is None)
    data["env"] = {**data["env"], **draw(st.dictionaries(env_name, env_value, max_size=3))}
    data["placement"] = {
        "gpus-per-node": gpus, "nodes": nodes, "node-selector": draw(labels),
        "tolerations": draw(st.lists(toleration, max_size=2)),
        "separate-nodes": draw(st.booleans()),
        **({"priority-class-name": "gpu-high"} if draw(st.booleans()) else {}),
    }
    data["resources"] = {"shm-size": draw(quantity), **({"memory": draw(quantity)} if draw(st.booleans()) else {}),
                         **({"cpu": draw(st.sampled_from(["500m", "2", "1.5"]))} if draw(st.booleans()) else {})}
    period = draw(st.integers(1, 60))
    startup = draw(st.integers(1, 120))
    data["rollout"] = {"probe-period-s": period, "startup-timeout-min": startup,
                       "pulumi-timeout-min": startup + draw(st.integers(0, 60))}
    data["network-policy"] = {"enabled": draw(st.booleans()), "allowed-from": draw(labels) or {"sglab/role": "x"}}
    data["disruption-budget"] = {"enabled": draw(st.booleans()), "max-unavailable": draw(st.integers(0, 2))}
    if draw(st.booleans()):
        data["hf-token"] = {"secure": "v1:abc"}
    if draw(st.booleans()):
        data["model"]["volume"] = {"kind": "pvc", "claim-name": "weights", "mount-path": "/shared"}
    return StackConfig.model_validate(data)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stack=stacks(), speculative=st.booleans())
def test_every_accepted_stack_renders_valid_objects(stack, speculative):
    arm = candidate_arm(stack) if speculative else baseline_arm(stack)
    objects = render_chart(chart_dir(), chart_values(stack, arm, stack_name="prop"),
                           release=f"sglang-{arm.role}", namespace=stack.namespace)
    for obj in objects:
        if obj["kind"] == "LeaderWorkerSet":
            templates = obj["spec"]["leaderWorkerTemplate"]
            pods = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "rank", **templates[t]["metadata"]},
                     "spec": templates[t]["spec"]} for t in ("leaderTemplate", "workerTemplate")]
        else:
            pods = [obj]
        for pod in pods:
            for version in VERSIONS:
                kubernetes_validate.validate(pod, version, strict=True)
        if obj["kind"] in ("Deployment", "LeaderWorkerSet"):
            spec = (obj["spec"]["template"] if obj["kind"] == "Deployment"
                    else obj["spec"]["leaderWorkerTemplate"]["leaderTemplate"])["spec"]
            container = spec["containers"][0]
            assert container["args"] == list(arm.args)
            assert {e["name"]: e["value"] for e in container.get("env", []) if "value" in e} == arm.env
