"""The standing control follows the stable revision, never ahead of it: `pulumi up` writes the control's next pod
template only as an annotation, and the follower copies it in once the Rollout's stable revision runs the same
shared config. Driven by the rendered production objects: a promotion of a new image mid-canary, aborted,
completed, and rolled back, as the API returns the Rollout and the control."""

from __future__ import annotations

import copy
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from kubernetes import client
from ruamel.yaml import YAML

from sglab.config.loader import load_stack
from sglab.core.paths import stacks_dir
from sglab.deploy.render import render_stack
from sglab.serving import follow
from sglab.serving.follow import NEXT_DIGEST, NEXT_TEMPLATE, RUNNING_DIGEST, next_step
from sglab.serving.spec import SHARED_CONFIG_LABEL

OLD_HASH, NEW_HASH = "6d4f9c7b8", "7f8b5c9d6"


def _render(tmp_path: Path, image_tag: str | None = None) -> list[dict]:
    yaml_rt = YAML()
    doc = yaml_rt.load((stacks_dir() / "Pulumi.production.yaml").read_text())
    if image_tag:
        doc["config"]["sglab:image"] = str(doc["config"]["sglab:image"]).rsplit(":", 1)[0] + ":" + image_tag
    (tmp_path / "stacks").mkdir(exist_ok=True)
    path = tmp_path / "stacks" / f"Pulumi.production-{image_tag or 'old'}.yaml"
    with open(path, "w") as fh:
        yaml_rt.dump(doc, fh)
    return render_stack(load_stack("production", path=path)).objects


def _one(objects: list[dict], kind: str, name: str) -> dict:
    (found,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return copy.deepcopy(found)


@pytest.fixture(scope="module")
def renders(tmp_path_factory) -> tuple[list[dict], list[dict]]:
    tmp_path = tmp_path_factory.mktemp("follow")
    return _render(tmp_path), _render(tmp_path, "v9.9.9")


def control_after_up(created: list[dict], applied: list[dict]) -> dict:
    """The control as the API holds it after `pulumi up` of `applied` on a control created from `created`: Pulumi
    ignores the template, so the pod template is the created one and the annotations are the applied ones."""
    control = _one(applied, "Deployment", "sglang-baseline")
    control["spec"]["template"] = _one(created, "Deployment", "sglang-baseline")["spec"]["template"]
    return control


def rollout(objects: list[dict], *, stable: str, current: str, observed: int = 3, abort: bool = False) -> dict:
    live = _one(objects, "Rollout", "sglang-candidate")
    live["metadata"]["generation"] = 3
    live["status"] = {"stableRS": stable, "currentPodHash": current, "observedGeneration": str(observed),
                      **({"abort": True} if abort else {})}
    return live


def shared_config(template: dict) -> str:
    return template["metadata"]["labels"][SHARED_CONFIG_LABEL]


def test_the_rendered_control_carries_its_template_as_its_next_one(renders):
    old, _ = renders
    control = _one(old, "Deployment", "sglang-baseline")
    annotations = control["metadata"]["annotations"]
    assert json.loads(annotations[NEXT_TEMPLATE]) == control["spec"]["template"]
    assert control["spec"]["template"]["metadata"]["annotations"][RUNNING_DIGEST] == annotations[NEXT_DIGEST]
    step = next_step(rollout(old, stable=OLD_HASH, current=OLD_HASH), control)
    assert step.template is None and step.ok and "runs its declared template" in step.reason


def test_a_promotion_of_a_new_image_leaves_the_control_on_the_stable_config_until_it_completes(renders):
    old, new = renders
    control = control_after_up(old, new)
    assert shared_config(control["spec"]["template"]) != shared_config(json.loads(
        control["metadata"]["annotations"][NEXT_TEMPLATE]))  # a change of shared keys: the control must wait
    in_progress = next_step(rollout(new, stable=OLD_HASH, current=NEW_HASH), control)
    assert in_progress.template is None and in_progress.ok and "in progress" in in_progress.reason
    unobserved = next_step(rollout(new, stable=NEW_HASH, current=NEW_HASH, observed=2), control)
    assert unobserved.template is None and "not observed" in unobserved.reason
    completed = next_step(rollout(new, stable=NEW_HASH, current=NEW_HASH), control)
    assert completed.template == _one(new, "Deployment", "sglang-baseline")["spec"]["template"]
    assert completed.ok and "following" in completed.reason
    control["spec"]["template"] = completed.template
    assert next_step(rollout(new, stable=NEW_HASH, current=NEW_HASH), control).template is None


def test_an_abort_leaves_the_control_and_the_stable_alike_and_fails_the_job_until_the_file_is_put_back(renders):
    """The stack file now holds a config neither the stable nor the control runs: the follower's Job fails (the
    failed-Job alert) naming the rollback that puts the file back, until someone does it or retries the rollout."""
    old, new = renders
    control = control_after_up(old, new)
    step = next_step(rollout(new, stable=OLD_HASH, current=NEW_HASH, abort=True), control,
                     rollback="sglab rollback --stack production && pulumi up --stack production")
    assert step.template is None and not step.ok and "aborted" in step.reason
    assert "sglab rollback --stack production && pulumi up --stack production" in step.reason
    assert shared_config(control["spec"]["template"]) == shared_config(_one(old, "Rollout", "sglang-candidate")[
        "spec"]["template"])


def test_an_aborted_promotion_of_the_speculation_alone_fails_the_job_too(renders):
    """The control's template does not change with the speculation, so it already runs its declared one; the stack
    file still holds a config the stable does not run, and that is said the same way."""
    old, _ = renders
    control = _one(old, "Deployment", "sglang-baseline")
    step = next_step(rollout(old, stable=OLD_HASH, current=NEW_HASH, abort=True), control,
                     rollback="sglab rollback --stack production && pulumi up --stack production")
    assert step.template is None and not step.ok and "aborted" in step.reason


def test_a_rollback_argo_takes_without_steps_moves_the_control_back(renders):
    """After a completed promotion the control followed; `sglab rollback` + `pulumi up` renders the old config
    again, a revision within the rollback window: Argo returns to it at once, and the control follows it back."""
    old, new = renders
    control = control_after_up(new, old)  # it followed the promotion to the new template; the file says old
    step = next_step(rollout(old, stable=OLD_HASH, current=OLD_HASH), control)
    assert step.template == _one(old, "Deployment", "sglang-baseline")["spec"]["template"]


def test_a_stable_revision_on_another_shared_config_is_said_and_not_followed(renders):
    """The control's next template and the Rollout from two stack files (a `pulumi up` that stopped between the
    two releases): the follower changes nothing and fails its Job, naming both configs."""
    old, new = renders
    control = control_after_up(old, new)
    step = next_step(rollout(old, stable=OLD_HASH, current=OLD_HASH), control)
    assert step.template is None and not step.ok
    assert shared_config(_one(old, "Rollout", "sglang-candidate")["spec"]["template"]) in step.reason


class FakeApi:
    """The Rollout and the control's Deployment behind the real Kubernetes client, on 127.0.0.1."""

    def __init__(self, rollout: dict, control: dict, refuse_patch: bool = False) -> None:
        namespace = rollout["metadata"]["namespace"]
        self.control_path = f"/apis/apps/v1/namespaces/{namespace}/deployments/sglang-baseline"
        self.objects = {f"/apis/argoproj.io/v1alpha1/namespaces/{namespace}/rollouts/sglang-candidate": rollout,
                        self.control_path: control}
        self.patches: list[tuple[str, object]] = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _send(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                found = api.objects.get(self.path.split("?")[0])
                self._send(200, found) if found else self._send(404, {"kind": "Status", "code": 404})

            def do_PATCH(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                api.patches.append((self.headers["Content-Type"], body))
                if refuse_patch:
                    return self._send(403, {"kind": "Status", "code": 403, "reason": "Forbidden"})
                target = api.objects[self.path.split("?")[0]]
                for op in body:  # the follower sends one replace of /spec/template
                    assert op["op"] == "replace" and op["path"] == "/spec/template"
                    target["spec"]["template"] = op["value"]
                self._send(200, target)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def apis(self) -> tuple[client.CustomObjectsApi, client.AppsV1Api]:
        configuration = client.Configuration()
        configuration.host = self.url
        api_client = client.ApiClient(configuration)
        return client.CustomObjectsApi(api_client), client.AppsV1Api(api_client)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_the_follower_replaces_the_controls_whole_template_through_the_api(renders, capsys):
    """As its CronJob runs it (the command rendered beside the Rollout), against the real Kubernetes client."""
    old, new = renders
    (command,) = [c["command"] for c in _one(new, "CronJob", "sglang-baseline-follower")["spec"]["jobTemplate"][
        "spec"]["template"]["spec"]["containers"]]
    assert command[:3] == ["python", "-m", "sglab.serving.follow"]
    options = dict(zip(command[3::2], command[4::2]))
    namespace = options["--namespace"]
    assert options == {"--rollout": "sglang-candidate", "--control": "sglang-baseline", "--namespace": namespace,
                       "--stack": "production"}
    assert namespace == _one(new, "Rollout", "sglang-candidate")["metadata"]["namespace"]
    api = FakeApi(rollout(new, stable=NEW_HASH, current=NEW_HASH), control_after_up(old, new))
    try:
        assert follow.run("sglang-candidate", "sglang-baseline", namespace, apis=api.apis()) == 0
        (content_type, _), = api.patches
        assert content_type.startswith("application/json-patch+json")  # a replace, not a merge of two templates
        live = api.objects[api.control_path]
        assert live["spec"]["template"] == _one(new, "Deployment", "sglang-baseline")["spec"]["template"]
        assert follow.run("sglang-candidate", "sglang-baseline", namespace, apis=api.apis()) == 0
        assert len(api.patches) == 1  # the next look finds it on its declared template
    finally:
        api.close()
    out = capsys.readouterr().out
    assert "following" in out and "runs its declared template" in out


def test_a_role_that_refuses_the_patch_fails_the_job_naming_what_it_needs(renders, monkeypatch, capsys):
    old, new = renders
    api = FakeApi(rollout(new, stable=NEW_HASH, current=NEW_HASH), control_after_up(old, new), refuse_patch=True)
    monkeypatch.setattr(follow, "_apis", api.apis)
    namespace = _one(new, "Rollout", "sglang-candidate")["metadata"]["namespace"]
    try:
        assert follow.main(["--rollout", "sglang-candidate", "--control", "sglang-baseline",
                            "--namespace", namespace, "--stack", "production"]) == 1
    finally:
        api.close()
    err = capsys.readouterr().err
    assert "403" in err and "get/patch on the Deployment sglang-baseline" in err


def test_a_rollout_not_there_yet_is_said_and_fails_nothing(renders, monkeypatch, capsys):
    """The first `pulumi up` declares the CronJob beside the Rollout: a look before the Rollout exists waits."""
    old, _ = renders
    api = FakeApi(rollout(old, stable=OLD_HASH, current=OLD_HASH), _one(old, "Deployment", "sglang-baseline"))
    api.objects = {path: obj for path, obj in api.objects.items() if "rollouts" not in path}
    monkeypatch.setattr(follow, "_apis", api.apis)
    namespace = _one(old, "Rollout", "sglang-candidate")["metadata"]["namespace"]
    try:
        assert follow.main(["--rollout", "sglang-candidate", "--control", "sglang-baseline",
                            "--namespace", namespace, "--stack", "production"]) == 0
    finally:
        api.close()
    assert "not there yet" in capsys.readouterr().out and not api.patches
