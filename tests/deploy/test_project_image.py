"""A project image a cluster can pull: a fully qualified default, `make image` (built and, with
a registry, pushed; run here with a stand-in `docker` that records its arguments: no Docker engine here), the CI
workflow publishing it on a tag, validate refusing a local tag on a GPU stack, and image pull secrets on every pod."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from sglab import __version__
from sglab.config.cluster import DEFAULT_PROJECT_IMAGE, image_problem
from sglab.config.loader import load_mapping, load_stack
from sglab.deploy.naming import reference
from sglab.deploy.render import render_stack
from sglab.core.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def test_the_default_project_image_is_fully_qualified_with_the_version():
    assert DEFAULT_PROJECT_IMAGE == f"ghcr.io/sglab-dev/sglab:{__version__}"
    assert image_problem(DEFAULT_PROJECT_IMAGE) is None
    assert load_stack("eagle-nccl-ll").config.project_image == DEFAULT_PROJECT_IMAGE
    assert load_stack("sim").config.project_image == "sglab:0.1.0"  # kind/minikube keep their local tag


@pytest.mark.parametrize("image, words", [
    ("sglab:0.1.0", "names no registry"), ("library/sglab:0.1.0", "names no registry"),
    ("localhost:5000/sglab:0.1.0", "local registry"), ("registry.local/sglab:1", "local registry"),
    ("ghcr.io/acme/sglab", "no tag"), ("ghcr.io/acme/sglab:latest", ":latest"),
    ("ghcr.io/acme/sglab@sha256:abc", "malformed digest"),
])
def test_validate_refuses_an_image_a_cluster_cannot_pull_on_a_gpu_stack(image, words):
    loaded = load_stack("eagle-nccl-ll")
    raw = {**json.loads(json.dumps(loaded.raw)), "project-image": image}
    with pytest.raises(ConfigError) as refused:
        load_mapping(loaded.name, loaded.path, raw)
    message = str(refused.value)
    assert "sglab:project-image" in message and words in message and "make image REGISTRY=" in message
    sim = load_stack("sim")
    assert load_mapping("sim", sim.path, {**json.loads(json.dumps(sim.raw)), "project-image": image}).config


@pytest.mark.parametrize("key", ["benchmark-job", "locust"])
def test_the_per_pod_images_are_held_to_the_same_rule(key):
    loaded = load_stack("eagle-nccl-ll")
    raw = {**json.loads(json.dumps(loaded.raw)), key: {"image": "sglab:dev"}}
    with pytest.raises(ConfigError, match=f"sglab:{key}.image"):
        load_mapping(loaded.name, loaded.path, raw)


def test_pinned_references_pass():
    for ok in ("ghcr.io/acme/sglab:0.1.0", "registry.example.com:5000/team/sglab:1.2",
               "ghcr.io/acme/sglab@sha256:" + "a" * 64):
        assert image_problem(ok) is None, ok


def fake_docker(tmp_path: Path) -> tuple[Path, Path]:
    log = tmp_path / "docker.log"
    docker = tmp_path / "docker"
    docker.write_text(f"#!/bin/sh\necho \"$*\" >> {log}\n")
    docker.chmod(0o755)
    return docker, log


def make_image(tmp_path: Path, *extra: str) -> list[str]:
    docker, log = fake_docker(tmp_path)
    done = subprocess.run(["make", "-s", "image", f"DOCKER={docker}", *extra], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "MAKEFLAGS": ""})
    assert done.returncode == 0, done.stderr
    return log.read_text().splitlines()


def test_make_image_builds_the_local_and_the_default_names(tmp_path):
    (build,) = make_image(tmp_path)
    assert build.startswith(f"build --build-arg SGLAB_VERSION={__version__} ")
    tags = re.findall(r"-t (\S+)", build)
    assert tags == [f"sglab:{__version__}", DEFAULT_PROJECT_IMAGE] and build.endswith(" .")


def test_make_image_with_a_registry_pushes_there(tmp_path):
    build, push = make_image(tmp_path, "REGISTRY=ghcr.io/acme")
    assert f"-t ghcr.io/acme/sglab:{__version__}" in build
    assert push == f"push ghcr.io/acme/sglab:{__version__}"
    assert reference("registry.example.com:5000/team/") == f"registry.example.com:5000/team/sglab:{__version__}"
    with pytest.raises(ValueError, match="local registry"):
        reference("localhost:5000")


def test_the_dockerfile_builds_what_the_pods_run():
    text = (ROOT / "Dockerfile").read_text()
    assert "ARG SGLAB_VERSION" in text and 'org.opencontainers.image.version="${SGLAB_VERSION}"' in text
    assert "USER 10001" in text  # the uid the benchmark Job, Locust and the guard run as
    for path in ("sglab", "stacks", "charts", "loadtests"):
        assert f"COPY {path} {path}" in text


def test_the_ci_workflow_publishes_on_a_version_tag():
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "image.yml").read_text())
    assert workflow[True]["push"]["tags"] == ["v*"]  # YAML 1.1 reads the key `on` as true
    assert workflow["permissions"]["packages"] == "write"
    steps = workflow["jobs"]["publish"]["steps"]
    runs = " ".join(s.get("run", "") for s in steps)
    assert "make image REGISTRY=" in runs and "ghcr.io/" in runs and 'v${version}' in runs


def pull_secrets(template: dict) -> list[str]:
    return [s["name"] for s in template["spec"].get("imagePullSecrets", [])]


def test_image_pull_secrets_reach_every_pod():
    loaded = load_stack("eagle-nccl-ll")
    raw = {**json.loads(json.dumps(loaded.raw)), "image-pull-secrets": ["registry-creds"],
           "locust": {"enabled": True}, "locust-password": {"secure": "x"},
           "probe": {"enabled": True, "hidden-size": 7168}}
    objects = render_stack(load_mapping(loaded.name, loaded.path, raw)).objects
    pods = {f"{o['kind']}/{o['metadata']['name']}": o["spec"]["template"] for o in objects
            if o["kind"] in ("Deployment", "Job")}
    pods.update({f"CronJob/{o['metadata']['name']}": o["spec"]["jobTemplate"]["spec"]["template"] for o in objects
                 if o["kind"] == "CronJob"})
    kinds = {what.split("-")[0] + "-" + what.split("-")[1] for what in pods}
    assert {"Deployment/sglang-baseline", "Deployment/sglang-candidate", "Deployment/sglab-locust"} <= kinds
    assert {"Job/sglab-bench", "Job/sglab-probe", "Job/sglab-preflight", "CronJob/sglab-guard"} <= kinds
    for what, template in pods.items():
        assert pull_secrets(template) == ["registry-creds"], what
