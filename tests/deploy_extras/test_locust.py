"""charts/locust and the LocustLoadGenerator component: values captured under mocks, rendered by the real
Helm engine, validated strictly against two Kubernetes versions."""

from __future__ import annotations

import json

import kubernetes_validate
import pytest
import yaml
from helm_python.chart import Chart, lint
from helm_python.errors import HelmError

from sglab.config.loader import load_stack
from sglab.core.paths import project_root
from sglab.deploy.locust import (LOGIN_SECRET, MASTER_PORT, RELEASE, UI_PLUGIN, WEB_PORT, main, port_forward_command,
                                 values_yaml_text)
from sglab.deploy.naming import chart_dir
from sglab.load.settings import URL_ENV
from sglab.ui.auth import PASSWORD_ENV, USERNAME_ENV

from pulumi_harness import run_program

STACK = "eagle-nccl-ll"
K8S_VERSIONS = ("1.31.0", "1.37.0")
CHART = "kubernetes:helm.sh/v4:Chart"
SECRET = "kubernetes:core/v1:Secret"
CONFIGMAP = "kubernetes:core/v1:ConfigMap"
PASSWORD = {"locust-password": "hunter2-test"}
SECRET_SIG = "4dabf18193072939515e22adb298388d"  # Pulumi's wire marker of a secret value


def unsecret(value):
    """A secret input as the mock monitor sees it -> (plain value, whether it was marked secret)."""
    if isinstance(value, dict) and SECRET_SIG in value:
        return value["value"], True
    return value, False


def locust_run(locust: dict | None = None, *, secrets: dict | None = PASSWORD, **overrides):
    return run_program(STACK, {"locust": {"enabled": True, **(locust or {})}, **overrides}, secrets=secrets)


def chart_inputs(run) -> dict:
    (chart,) = [r for r in run.of_type(CHART) if r.name == "locust"]
    return chart.inputs


def render(inputs: dict) -> list[dict]:
    with Chart.load(inputs["chart"]) as chart:
        manifests = chart.render(values=inputs["values"], name=inputs["name"], namespace=inputs["namespace"])
    return [doc for path, text in manifests.items() if path.endswith(".yaml")
            for doc in yaml.safe_load_all(text) if doc]


def by_kind(objects: list[dict], kind: str) -> list[dict]:
    return [o for o in objects if o["kind"] == kind]


def container(deployment: dict) -> dict:
    (c,) = deployment["spec"]["template"]["spec"]["containers"]
    return c


@pytest.fixture(scope="module")
def default_run():
    run = locust_run()
    assert run.error is None
    return run


@pytest.fixture(scope="module")
def objects(default_run):
    return render(chart_inputs(default_run))


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("variant", [{}, {"web-login": False, "workers": 5}, {"service-type": "LoadBalancer"}])
def test_rendered_objects_are_schema_valid(variant, version):
    run = locust_run(variant)
    objects = render(chart_inputs(run))
    assert sorted(o["kind"] for o in objects) == ["Deployment", "Deployment", "Service", "Service"]
    for obj in objects:
        kubernetes_validate.validate(obj, version, strict=True)
    extra = [(r, "Secret") for r in run.of_type(SECRET)] + [(r, "ConfigMap") for r in run.of_type(CONFIGMAP)
                                                             if r.name == "locust-stack"]
    for resource, kind in extra:
        manifest = {"apiVersion": "v1", "kind": kind, **{k: unsecret(v)[0] for k, v in resource.inputs.items()
                                                         if k not in ("apiVersion", "kind")}}
        kubernetes_validate.validate(manifest, version, strict=True)
    assert len(extra) == (3 if variant.get("web-login", True) else 2)  # + the worker-token Secret


def test_chart_lints_clean_with_the_program_values(default_run):
    inputs = chart_inputs(default_run)
    report = lint(inputs["chart"], inputs["values"], strict=True, namespace=inputs["namespace"])
    assert report["errors"] == [] and report["messages"] == []
    assert lint(inputs["chart"], strict=True) == {"total_charts_linted": 1, "messages": [], "errors": []}


def test_master_and_workers_target_both_arms_and_are_load_generators(default_run, objects):
    master, worker = (next(d for d in by_kind(objects, "Deployment") if d["metadata"]["name"].endswith(role))
                      for role in ("-master", "-worker"))
    assert worker["spec"]["replicas"] == 2 and master["spec"]["replicas"] == 1
    for deployment in (master, worker):
        env = {e["name"]: e.get("value") for e in container(deployment)["env"]}
        assert env[URL_ENV["baseline"]] == default_run.outputs["baseline_url"]
        assert env[URL_ENV["candidate"]] == default_run.outputs["candidate_url"]
        assert deployment["spec"]["template"]["metadata"]["labels"]["sglab/role"] == "loadgen"
        assert container(deployment)["image"] == load_stack(STACK).config.project_image  # a registry's, pullable
    # The master serves the UI: the A/B tab and its login are a plugin beside the locustfile.
    assert container(worker)["args"][:2] == ["-f", "loadtests/locustfile.py"]
    assert container(master)["args"][:2] == ["-f", f"loadtests/locustfile.py,{UI_PLUGIN}"]
    assert (project_root() / UI_PLUGIN).is_file()
    args = container(worker)["args"]
    assert args[args.index("--master-host") + 1] == f"{RELEASE}-master"
    assert args[args.index("--master-port") + 1] == str(MASTER_PORT)
    assert "--master" in container(master)["args"]


def test_pods_carry_the_configured_allowed_from_label():
    run = locust_run(**{"network-policy": {"allowed-from": {"team": "perf"}}})
    for deployment in by_kind(render(chart_inputs(run)), "Deployment"):
        assert deployment["spec"]["template"]["metadata"]["labels"]["team"] == "perf"


def test_web_login_reads_the_password_from_the_pulumi_secret(default_run, objects):
    (secret,) = [r for r in default_run.of_type(SECRET) if r.name != "locust-worker-token"]
    assert secret.inputs["metadata"]["name"] == LOGIN_SECRET
    assert unsecret(secret.inputs["stringData"]) == ({"password": PASSWORD["locust-password"]}, True)
    master = next(d for d in by_kind(objects, "Deployment") if d["metadata"]["name"].endswith("-master"))
    assert "--web-login" in container(master)["args"]
    env = {e["name"]: e for e in container(master)["env"]}
    assert env[PASSWORD_ENV]["valueFrom"]["secretKeyRef"] == {"name": LOGIN_SECRET, "key": "password"}
    assert env[USERNAME_ENV]["value"] == "sglab"
    rendered = json.dumps(objects)
    assert PASSWORD["locust-password"] not in rendered and PASSWORD["locust-password"] not in json.dumps(
        chart_inputs(default_run)["values"])


def test_login_without_a_password_is_refused_with_the_fix():
    run = locust_run(secrets=None)
    assert run.error is not None
    message = str(run.error)
    assert "Pulumi.eagle-nccl-ll.yaml" in message and "sglab:locust-password" in message
    assert "pulumi config set --secret sglab:locust-password" in message
    assert not run.of_type(CHART) or all(r.name != "locust" for r in run.of_type(CHART))


def test_without_login_there_is_no_secret_and_no_login_flag():
    run = locust_run({"web-login": False}, secrets=None)
    assert run.error is None and [r.name for r in run.of_type(SECRET)] == ["locust-worker-token"]
    master = next(d for d in by_kind(render(chart_inputs(run)), "Deployment")
                  if d["metadata"]["name"].endswith("-master"))
    assert "--web-login" not in container(master)["args"]
    assert PASSWORD_ENV not in {e["name"] for e in container(master)["env"]}


def test_without_login_the_master_listens_on_loopback_only():
    """The UI plugin refuses an open bind without login (exit 2), so a no-login master binds 127.0.0.1
    (reached by `kubectl port-forward`) and its readiness cannot probe the web port over the pod IP."""
    run = locust_run({"web-login": False}, secrets=None)
    master = next(d for d in by_kind(render(chart_inputs(run)), "Deployment")
                  if d["metadata"]["name"].endswith("-master"))
    args = container(master)["args"]
    assert args[args.index("--web-host") + 1] == "127.0.0.1"
    assert container(master)["readinessProbe"]["tcpSocket"]["port"] != "web"
    logged_in = next(d for d in by_kind(render(chart_inputs(locust_run())), "Deployment")
                     if d["metadata"]["name"].endswith("-master"))
    assert "--web-host" not in container(logged_in)["args"]


@pytest.mark.parametrize("service_type", ["ClusterIP", "NodePort", "LoadBalancer"])
def test_only_the_web_service_follows_service_type(service_type):
    services = by_kind(render(chart_inputs(locust_run({"service-type": service_type}))), "Service")
    types = {s["metadata"]["name"]: s["spec"]["type"] for s in services}
    assert types == {f"{RELEASE}-web": service_type, f"{RELEASE}-master": "ClusterIP"}
    ports = {s["metadata"]["name"]: [p["port"] for p in s["spec"]["ports"]] for s in services}
    assert ports == {f"{RELEASE}-web": [WEB_PORT], f"{RELEASE}-master": [MASTER_PORT]}


def test_port_forward_command_is_a_stack_output(default_run):
    namespace = chart_inputs(default_run)["namespace"]
    assert default_run.outputs["locust_port_forward"] == port_forward_command(namespace) == (
        f"kubectl port-forward -n {namespace} svc/{RELEASE}-web 8089:8089")


def test_locust_is_off_unless_the_stack_enables_it():
    run = run_program(STACK)
    assert all(r.name != "locust" for r in run.of_type(CHART)) and "locust_port_forward" not in run.outputs


def test_values_yaml_is_generated_from_the_model(monkeypatch):
    assert (chart_dir("locust") / "values.yaml").read_text() == values_yaml_text()
    monkeypatch.setattr("sys.argv", ["locust", "--check"])
    assert main() == 0


@pytest.mark.parametrize("bad", [
    {"service": {"type": "Ingress"}},
    {"workers": 0},
    {"webLogin": {"enabled": True, "username": "sglab", "existingSecret": "", "secretKey": "password"}},
    {"targets": {"baselineUrl": "not a url", "candidateUrl": "http://x:1"}},
    {"workerz": 3},
    {"stack": "", "stackFile": {"configMap": "sglab-locust-stack", "mountPath": "/etc/sglab/stacks"}},
    {"service": {"type": "LoadBalancer"},
     "webLogin": {"enabled": False, "username": "", "existingSecret": "", "secretKey": ""}},
])
def test_schema_rejects_bad_values_at_template_time(bad):
    with Chart.load(chart_dir("locust")) as chart:
        with pytest.raises(HelmError):
            chart.render(values=bad, name=RELEASE, namespace="lab")


def test_validate_refuses_login_without_password_naming_file_key_and_fix(tmp_path, monkeypatch, capsys):
    from sglab.cli import main as sglab

    text = (chart_dir("locust").parents[1] / "stacks" / f"Pulumi.{STACK}.yaml").read_text()
    (tmp_path / "Pulumi.lab.yaml").write_text(text + "  sglab:locust:\n    enabled: true\n")
    monkeypatch.setenv("SGLAB_STACKS_DIR", str(tmp_path))
    assert sglab(["validate", "--stack", "lab"]) == 2
    err = capsys.readouterr().err
    assert "Pulumi.lab.yaml" in err and "sglab:locust.web-login" in err
    assert "fix: pulumi config set --secret sglab:locust-password" in err and "Traceback" not in err
    (tmp_path / "Pulumi.lab.yaml").write_text(text + "  sglab:locust:\n    enabled: true\n"
                                              "  sglab:locust-password:\n    secure: v1:abc\n")
    assert sglab(["validate", "--stack", "lab"]) == 0


def test_an_exposed_ui_without_login_is_refused():
    run = locust_run({"web-login": False, "service-type": "LoadBalancer"}, secrets=None)
    assert run.error is not None
    assert "sglab:locust.service-type" in str(run.error) and "web-login" in str(run.error)
    assert all(r.name != "locust" for r in run.of_type(CHART))
