"""The preflight Job: before any GPU-holding object changes, the server image checks every launch
command with its own SGLang parser, the model and draft paths, and their architectures; a failure leaves the
running servers untouched.

The checks run here on crafted inputs (a stand-in `sglang` whose parser accepts a handful of flags, model dirs
with config.json); against the real parser of the pinned SGLang they run in tests/sglang_contract (its own venv).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from sglab.cli import main
from sglab.config import load_stack
from sglab.config.loader import load_mapping
from sglab.deploy import preflight_check as check
from sglab.deploy.plan import arm_releases
from sglab.deploy.preflight import MOUNT, preflight_plan
from pulumi_harness import run_program
from sglang_contract.conftest import fixture_args

JOB = "kubernetes:batch/v1:Job"
CHART = "kubernetes:helm.sh/v4:Chart"
SERVER = "sglab:index:SGLangServer"
K8S = ("1.31", kubernetes_validate.latest_version())


def rendered(stack: str = "eagle-nccl-ll", capsys=None) -> list[dict]:
    assert main(["render", "--stack", stack]) == 0
    return [d for d in yaml.safe_load_all(io.StringIO(capsys.readouterr().out)) if d]


def test_render_shows_the_preflight_before_both_arms(capsys):
    objects = rendered(capsys=capsys)
    kinds = [(o["kind"], o["metadata"]["name"]) for o in objects]
    (job,) = [o for o in objects if o["kind"] == "Job" and o["metadata"]["name"].startswith("sglab-preflight-")]
    first_server = min(i for i, (kind, _) in enumerate(kinds) if kind == "Deployment")
    assert kinds.index(("Job", job["metadata"]["name"])) < first_server
    assert ("ConfigMap", job["metadata"]["name"]) in kinds[:first_server]
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    stack = load_stack("eagle-nccl-ll").config
    assert container["image"] == stack.image  # the servers' own image and SGLang
    assert "nvidia.com/gpu" not in json.dumps(container["resources"])  # no GPU: it runs beside busy servers
    assert container["terminationMessagePolicy"] == "FallbackToLogsOnError"
    assert {"name": "model", "mountPath": "/shared", "readOnly": True} in container["volumeMounts"]
    assert pod["nodeSelector"] == stack.placement.node_selector  # a hostPath of weights is only on those nodes
    assert pod["tolerations"][0]["key"] == "nvidia.com/gpu"
    configmap = next(o for o in objects if o["kind"] == "ConfigMap"
                     and o["metadata"]["name"] == job["metadata"]["name"])
    spec = json.loads(configmap["data"]["spec-0.json"])
    releases = arm_releases(stack, "eagle-nccl-ll")
    assert [a["args"] for a in spec["arms"]] == [list(r.arm.args) for r in releases]  # the exact launch commands
    assert [p["path"] for p in spec["paths"]] == ["/shared/kimi-k2.5-int4", "/shared/kimi-k2.5-eagle3"]
    assert configmap["data"]["preflight_check.py"] == Path(check.__file__).read_text()
    assert container["command"] == ["python3", f"{MOUNT}/preflight_check.py", "--spec", f"{MOUNT}/spec-0.json"]
    for obj in (job, configmap):
        for version in K8S:
            kubernetes_validate.validate(obj, version, strict=True)


def test_every_server_waits_for_the_preflight():
    run = run_program("eagle-nccl-ll")
    assert run.error is None, run.error
    for server in run.of_type(SERVER):
        deps = run.options_of(SERVER, server.name)["dependencies"]
        assert any(d.endswith(f"{JOB}::preflight-job") for d in deps), (server.name, deps)
    assert run.outputs["preflight_job"].startswith("sglab-preflight-")


FAILED_RUN = """
import json, sys
sys.path.insert(0, {tests!r})
from pulumi_harness import run_program
run = run_program("eagle-nccl-ll", fail={{({job!r}, "preflight-job"): {message!r}}})
print(json.dumps({{"error": str(run.error), "registered": sorted({{r.typ + "::" + r.name for r in run.resources}})}}))
"""


def test_a_failed_preflight_leaves_the_arms_unreplaced(tmp_path):
    """The provider reports the Job failed (Pulumi's awaiter prints its termination message): no server chart is
    registered, so `pulumi up` changes none, and the error carries the problems and their fixes. (In a process of
    its own: the failed registrations leave asyncio tasks whose finalizers would break a later ast.parse.)"""
    problems, _ = check.run({"stack": "eagle-nccl-ll", "image": "x", "arms": [],
                             "paths": [{"key": "model.path", "path": str(tmp_path / "missing")}]}, {})
    message = f"Job failed: [Error] {check.report(problems, [], str(tmp_path / 'log'))}"
    code = FAILED_RUN.format(tests=str(Path(__file__).resolve().parents[1]), job=JOB, message=message)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    run = json.loads(done.stdout.strip().splitlines()[-1])
    assert "model.path" in run["error"] and "does not exist on the model volume" in run["error"]
    registered = run["registered"]
    assert f"{JOB}::preflight-job" not in registered  # the failed one
    assert not [r for r in registered if r.startswith((f"{CHART}::", f"{SERVER}::", f"{JOB}::benchmark"))]
    assert "kubernetes:core/v1:Namespace::namespace" in registered  # what comes before it was declared


def test_the_preflight_reruns_exactly_when_what_it_checks_changes():
    loaded = load_stack("eagle-nccl-ll")
    raw = json.loads(json.dumps(loaded.raw))

    def name(**changes) -> str:
        stack = load_mapping(loaded.name, loaded.path, {**raw, **changes}).config
        return preflight_plan(stack, loaded.name, arm_releases(stack, loaded.name)).name

    base = name()
    assert name(image="lmsysorg/sglang:v0.5.23@sha256:" + "0" * 64) != base  # another image: its own parser
    assert name(server={**raw["server"], "mem-fraction-static": 0.85}) != base  # another launch command
    assert name(rollout={"startup-timeout-min": 70, "pulumi-timeout-min": 90}) == base  # not checked by it


def test_no_preflight_for_the_simulator_or_when_turned_off():
    sim = load_stack("sim")
    assert preflight_plan(sim.config, "sim", arm_releases(sim.config, "sim")) is None
    run = run_program("eagle-nccl-ll", {"preflight": {"enabled": False}})
    assert run.error is None and [r for r in run.of_type(JOB) if r.name == "preflight-job"] == []


# --- the checks, as they run in the server image -------------------------------------------------------------

STAND_IN_PARSER = '''
class ServerArgs:
    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--model-path", required=True)
        parser.add_argument("--tp-size", type=int, default=1)
        parser.add_argument("--node-rank", type=int, default=0)
        parser.add_argument("--dist-init-addr")
        parser.add_argument("--model-impl", default="auto")
        parser.add_argument("--device", default=None)

    def resolve_once(self):  # SGLang's post-init value checks, one rule standing in for them
        if self.tp_size == 3:
            raise ValueError("tp_size 3 does not divide the attention heads")


def prepare_server_args(argv):
    import argparse
    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    args = ServerArgs()
    args.__dict__.update(vars(parser.parse_args(argv)))
    return args
'''


@pytest.fixture()
def image(tmp_path, monkeypatch):
    """A stand-in server image's Python: an `sglang` with a parser and a models/ package, and model dirs."""
    srt = tmp_path / "site" / "sglang" / "srt"
    (srt / "models").mkdir(parents=True)
    for init in (srt.parent / "__init__.py", srt / "__init__.py", srt / "models" / "__init__.py"):
        init.write_text("")
    (srt / "server_args.py").write_text(STAND_IN_PARSER)
    (srt / "models" / "kimi_k25.py").write_text("class KimiK25ForConditionalGeneration: ...\n"
                                                "EntryClass = [KimiK25ForConditionalGeneration]\n")
    (srt / "models" / "llama.py").write_text("class LlamaForCausalLM: ...\nclass Phi3ForCausalLM: ...\n"
                                             "EntryClass = [LlamaForCausalLM, Phi3ForCausalLM]\n")
    (srt / "models" / "eagle.py").write_text("import x\nEntryClass = x.Eagle3DeepseekV2ForCausalLM\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    for name in [m for m in sys.modules if m == "sglang" or m.startswith("sglang.")]:
        monkeypatch.delitem(sys.modules, name)
    yield_dir = tmp_path
    weights = tmp_path / "weights"
    for sub, arch in (("model", "KimiK25ForConditionalGeneration"), ("draft", "Eagle3DeepseekV2ForCausalLM")):
        (weights / sub).mkdir(parents=True)
        (weights / sub / "config.json").write_text(json.dumps({"architectures": [arch]}))
    yield yield_dir
    for name in [m for m in sys.modules if m == "sglang" or m.startswith("sglang.")]:
        del sys.modules[name]  # this test's stand-in must not leak into the next


def spec(weights: Path, *arms: list[str]) -> dict:
    return {"stack": "s", "image": "img",
            "arms": [{"name": f"arm{i}", "args": a, "env": {}} for i, a in enumerate(arms)],
            "paths": [{"key": "model.path", "path": str(weights / "model")},
                      {"key": "candidate.speculative.draft-model-path", "path": str(weights / "draft")}]}


def test_a_good_stack_passes(image):
    args = ["--model-path", "/m", "--tp-size", "16", "--node-rank", "$(LWS_WORKER_INDEX)",
            "--dist-init-addr", "$(LWS_LEADER_ADDRESS):20000"]
    problems, notes = check.run(spec(image / "weights", args, args), {})
    assert problems == [] and notes == []


def test_a_value_the_parser_takes_but_sglangs_own_checks_refuse_fails_naming_its_arm(image):
    good = ["--model-path", "/m", "--tp-size", "16"]
    problems, notes = check.run(spec(image / "weights", good, ["--model-path", "/m", "--tp-size", "3"]), {})
    assert notes == [] and len(problems) == 1
    assert problems[0].startswith("arm arm1: SGLang's own value checks (ServerArgs resolution) refuse")
    assert "ValueError: tp_size 3 does not divide the attention heads" in problems[0]


def test_a_hub_model_id_is_not_resolved_and_says_so(image):
    problems, notes = check.run(spec(image / "weights", ["--model-path", "org/model", "--tp-size", "3"]), {})
    assert problems == [] and notes == ["arm arm0: SGLang's value checks skipped (the model is not a mounted path)"]


def test_every_problem_is_reported_with_its_fix(image, tmp_path):
    bad = spec(image / "weights", ["--model-path", "/m", "--tp-size", "eight"], ["--model-path", "/m", "--unknown"])
    bad["paths"][1]["path"] = str(tmp_path / "nowhere")
    (image / "weights" / "model" / "config.json").write_text(json.dumps({"architectures": ["NoSuchModel"]}))
    problems, _ = check.run(bad, {})
    assert len(problems) == 4
    assert "arm0" in problems[0] and "invalid int value: 'eight'" in problems[0] and "sglab validate" in problems[0]
    assert "arm1" in problems[1] and "unrecognized arguments: --unknown" in problems[1]
    assert "['NoSuchModel'] are not registered" in problems[2] and "--model-impl transformers" in problems[2]
    assert "draft-model-path" in problems[3] and "does not exist" in problems[3]
    log = tmp_path / "termination-log"
    text = check.report(problems, [], str(log))
    assert log.read_text() == text[:check.MAX_MESSAGE] and text.startswith("preflight failed (4 problems)")


def test_the_registry_is_read_as_sglang_builds_it(image):
    models = image / "site" / "sglang" / "srt" / "models"
    assert check.registered_architectures(models) == {"KimiK25ForConditionalGeneration", "LlamaForCausalLM",
                                                     "Phi3ForCausalLM", "Eagle3DeepseekV2ForCausalLM"}
    assert "LlamaForCausalLM" not in check.registry({"SGLANG_DISABLED_MODEL_ARCHS": "llama, eagle"})
    external = image / "site" / "mymodels"
    external.mkdir()
    (external / "__init__.py").write_text("")
    (external / "m.py").write_text("class Mine: ...\nEntryClass = Mine\n")
    assert check.registry({"SGLANG_EXTERNAL_MODEL_PACKAGE": "mymodels"}) == {"Mine"}


def test_without_sglang_the_image_is_named(monkeypatch):
    for name in [m for m in sys.modules if m.startswith("sglang.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "sglang", None)  # import sglang fails, as in an image without it
    problems, _ = check.run({"stack": "s", "image": "busybox:1", "arms": [{"name": "a", "args": [], "env": {}}],
                             "paths": []}, {})
    assert problems and "busybox:1 has no importable sglang" in problems[0]


def test_the_script_runs_standalone_with_exit_status_and_termination_message(image, tmp_path):
    """As the Job runs it: `python3 preflight_check.py --spec ...` with nothing of sglab importable."""
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec(image / "weights", ["--model-path", "/m", "--nope"])))
    script = tmp_path / "preflight_check.py"
    script.write_text(Path(check.__file__).read_text())
    log = tmp_path / "term"
    done = subprocess.run([sys.executable, str(script), "--spec", str(path), "--termination-log", str(log)],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(image / "site")})
    assert done.returncode == 1, done.stderr
    assert "unrecognized arguments: --nope" in log.read_text()
    standalone = textwrap.dedent(Path(check.__file__).read_text())
    assert "import sglab" not in standalone and "from sglab" not in standalone


# --- with the pinned SGLang's real parser (.venv-sglang, built by `make test`: tools/sglang-contract-venv.sh) -----

def sglang_python() -> Path | None:
    given = os.environ.get("SGLAB_SGLANG_PYTHON")
    built = Path(__file__).resolve().parents[2] / ".venv-sglang" / "bin" / "python"
    path = Path(given) if given else built
    return path if path.exists() else None


SHIPPED_GPU_STACKS = ("eagle-nccl-ll", "eagle-default", "article-replay", "production", "eagle-sweep")


def test_the_real_parser_accepts_every_shipped_launch_command(tmp_path):
    """What the preflight Job runs, with SGLang's own parser, value checks and model registry: every arm of every
    shipped GPU stack (the sweep's first wave too) passes against checkpoint dirs holding Kimi-K2.5's architectures
    (their configs, as the contract test's fixtures give them, for SGLang's resolution), a flag SGLang does not know
    fails, and so does a value its parser takes but its resolution refuses, each naming its arm. One process:
    importing sglang takes tens of seconds."""
    python = sglang_python()
    if python is None:
        pytest.skip("the pinned SGLang's venv (.venv-sglang) is built by `make test` (tools/sglang-contract-venv.sh)")
    from sglab.deploy.preflight import specs

    arms = []
    for name in SHIPPED_GPU_STACKS:
        loaded = load_stack(name)
        if loaded.config.sweep is not None:
            sweep = {**json.loads(json.dumps(loaded.raw["sweep"])), "wave": 1}
            loaded = load_mapping(name, loaded.path, {**json.loads(json.dumps(loaded.raw)), "sweep": sweep})
        (spec,) = specs(loaded.config, name, arm_releases(loaded.config, name)).values()
        arms += [{**arm, "name": f"{name}/{arm['name']}", "args": fixture_args(arm["args"])} for arm in spec["arms"]]
    paths = []
    for key, arch in (("model.path", "KimiK25ForConditionalGeneration"),
                      ("candidate.speculative.draft-model-path", "Eagle3DeepseekV2ForCausalLM")):
        (tmp_path / key).mkdir()
        (tmp_path / key / "config.json").write_text(json.dumps({"architectures": [arch]}))
        paths.append({"key": key, "path": str(tmp_path / key)})
    bad = {**arms[0], "name": "bad", "args": [*arms[0]["args"], "--no-such-sglang-flag"]}
    refused = {**arms[0], "name": "refused", "args": [*arms[0]["args"], "--speculative-algorithm", "MEDUSA"]}
    spec = {"stack": "shipped", "image": "pinned", "arms": [*arms, bad, refused], "paths": paths}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    log = tmp_path / "log"
    done = subprocess.run([str(python), check.__file__, "--spec", str(tmp_path / "spec.json"), "--termination-log",
                           str(log)], capture_output=True, text=True, timeout=900)
    assert done.returncode == 1, done.stdout + done.stderr
    assert len(arms) >= 11
    text = log.read_text()
    assert text.startswith("preflight failed (2 problems):"), text  # only the two bad arms
    assert "arm bad: SGLang's launch_server parser refuses" in text
    assert "unrecognized arguments: --no-such-sglang-flag" in text
    assert "arm refused: SGLang's own value checks (ServerArgs resolution) refuse" in text
    assert "Unknown speculative algorithm name: MEDUSA" in text
