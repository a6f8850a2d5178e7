"""Tenant-scoped by default: a stack renders no cluster-scoped RBAC unless it opts in."""

from __future__ import annotations

import pytest

from sglab.cli import main
from sglab.config.loader import load_stack
from sglab.deploy.namespace import cluster_scoped
from sglab.deploy.benchmark_job import benchmark_plan
from sglab.deploy.render import render_stack
from sglab.core.paths import stacks_dir

SHIPPED = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in stacks_dir().glob("Pulumi.*.yaml"))


@pytest.mark.parametrize("stack_name", SHIPPED)
def test_no_shipped_stack_grants_cluster_wide_rbac(stack_name):
    kinds = {o["kind"] for o in render_stack(load_stack(stack_name)).objects}
    assert not kinds & {"ClusterRole", "ClusterRoleBinding"}


def test_the_node_reader_is_an_opt_in():
    stack = load_stack("sim").config
    assert benchmark_plan(stack, "sim").node_role is None
    opted = stack.model_copy(update={"benchmark_job": stack.benchmark_job.model_copy(
        update={"read_node_labels": True})})
    plan = benchmark_plan(opted, "sim")
    assert plan.node_role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]
    assert plan.node_role_binding["kind"] == "ClusterRoleBinding"


CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding"}


@pytest.mark.parametrize("stack_name", SHIPPED)
def test_the_stated_cluster_scoped_objects_are_what_renders(stack_name):
    loaded = load_stack(stack_name)
    rendered = sorted(f"{o['kind']} {o['metadata']['name']}" for o in render_stack(loaded).objects
                      if o["kind"] in CLUSTER_SCOPED)
    assert sorted(f"{kind} {name}" for kind, name, _ in cluster_scoped(loaded.config, stack_name)) == rendered


def test_validate_states_pod_security_cluster_scope_and_production_capacity(capsys):
    assert main(["validate", "--stack", "production"]) == 0
    out = capsys.readouterr().out
    assert "pod security: restricted" in out or "pod security: baseline" in out
    assert "existing namespace sglab-production" in out
    assert "cluster-scoped objects: none" in out
    assert "GPU nodes at once" in out
    assert "priority: inference-critical" in out and "preempt" in out
    assert "api keys: the servers read --api-key and --admin-api-key from Secret sglang-api-keys" in out


def test_validate_names_each_cluster_scoped_object_and_why(capsys):
    assert main(["validate", "--stack", "sim"]) == 0
    out = capsys.readouterr().out
    assert "cluster-scoped objects (1): Namespace sglab-sim (namespace.create)" in out


def _container_images(node) -> set[str]:
    """Every container image in a rendered object, wherever its pod template sits."""
    found: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("containers", "initContainers") and isinstance(value, list):
                found |= {c["image"] for c in value if isinstance(c, dict) and "image" in c}
            else:
                found |= _container_images(value)
    elif isinstance(node, list):
        for item in node:
            found |= _container_images(item)
    return found


@pytest.mark.parametrize("stack_name", SHIPPED)
def test_validate_states_every_image_the_render_runs_and_whether_a_digest_pins_it(stack_name, capsys):
    rendered = _container_images(render_stack(load_stack(stack_name)).objects)
    assert main(["validate", "--stack", stack_name]) == 0
    (line,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("images")]
    assert rendered and all(image in line for image in rendered), (rendered, line)


def test_production_on_tags_is_told_to_pin_each_image_by_digest(capsys):
    assert main(["validate", "--stack", "production"]) == 0
    out = capsys.readouterr().out
    (line,) = [line for line in out.splitlines() if line.startswith("images")]
    assert "lmsysorg/sglang:v0.5.23 (image): a tag" in line
    (lint,) = [line for line in out.splitlines() if "[image-tag-in-production]" in line]
    assert "pin each by digest" in lint and "@sha256:" in lint and "docker buildx imagetools inspect" in lint


def test_images_pinned_by_digest_are_said_pinned(tmp_path, monkeypatch, capsys):
    digest = "sha256:" + "a" * 64
    text = (stacks_dir() / "Pulumi.production.yaml").read_text()
    tagged = "  sglab:image: lmsysorg/sglang:v0.5.23\n"
    assert tagged in text
    text = text.replace(tagged, f"  sglab:image: lmsysorg/sglang:v0.5.23@{digest}\n")
    (tmp_path / "Pulumi.production.yaml").write_text(text)
    monkeypatch.setenv("SGLAB_STACKS_DIR", str(tmp_path))
    assert main(["validate", "--stack", "production"]) == 0
    (line,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("images")]
    assert f"lmsysorg/sglang:v0.5.23@{digest} (image): pinned by digest" in line


def _production_copy(tmp_path, monkeypatch, edit) -> None:
    text = edit((stacks_dir() / "Pulumi.production.yaml").read_text())
    (tmp_path / "Pulumi.production.yaml").write_text(text)
    monkeypatch.setenv("SGLAB_STACKS_DIR", str(tmp_path))


ACCEPTED = "  sglab:accept-lints: [image-tag-in-production]\n"


def test_production_on_tags_is_refused_until_each_image_is_pinned_or_the_tags_are_accepted(tmp_path, monkeypatch,
                                                                                           capsys):
    """A tag can point to other bits by the time a pod starts (a canary's pod, a node's later pull of the stable's
    image): production refuses tags at validate, render and pulumi up, naming each image's key and the fix, unless
    the stack accepts them by name, as the shipped one does (it has no registry to take a digest from)."""
    assert ACCEPTED in (stacks_dir() / "Pulumi.production.yaml").read_text()
    _production_copy(tmp_path, monkeypatch, lambda text: text.replace(ACCEPTED, ""))
    assert main(["validate", "--stack", "production"]) == 2
    err = capsys.readouterr().err
    assert "lmsysorg/sglang:v0.5.23 (image)" in err and "project-image" in err
    assert "@sha256:" in err and "accept-lints: [image-tag-in-production]" in err
    assert main(["render", "--stack", "production"]) == 2
    capsys.readouterr()
    monkeypatch.delenv("SGLAB_STACKS_DIR")  # the shipped stack
    assert main(["validate", "--stack", "production"]) == 0
    assert "note [image-tag-in-production]" in capsys.readouterr().out


def test_production_pinned_by_digest_needs_no_acceptance(tmp_path, monkeypatch, capsys):
    from sglab.config.lints import stack_images

    digest = "@sha256:" + "b" * 64
    images = stack_images(load_stack("production").config)
    assert set(images) == {"lmsysorg/sglang:v0.5.23", load_stack("production").config.project_image}

    def pin(text: str) -> str:
        text = text.replace(ACCEPTED, "").replace("sglab:image: lmsysorg/sglang:v0.5.23\n",
                                                  f"sglab:image: lmsysorg/sglang:v0.5.23{digest}\n")
        project = load_stack("production").config.project_image
        return text.replace("config:\n", f"config:\n  sglab:project-image: {project}{digest}\n", 1)

    _production_copy(tmp_path, monkeypatch, pin)
    assert main(["validate", "--stack", "production"]) == 0
    out = capsys.readouterr().out
    assert "image-tag-in-production" not in out and out.count("pinned by digest") == 2
