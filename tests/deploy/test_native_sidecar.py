"""The benchmark Job's disruption guard is a native sidecar (an init container with `restartPolicy: Always`),
which Kubernetes runs from 1.29. An API server before that drops the field (1.28 keeps it behind an alpha
feature gate), so the guard would become a plain init container that never ends and the benchmark would never
start: `pulumi up` reads the API server's version (`/version`, readable by any deployer) and stops before
declaring anything, naming the version and the fix. A version that cannot be read is a warning.

Run in its own pytest process (Pulumi mocks), never beside Locust's tests.
"""

from __future__ import annotations

import pytest

from sglab.config.loader import load_stack
from sglab.core.errors import ConfigError
from sglab.deploy.capacity import check_native_sidecar, kubernetes_version
from pulumi_harness import run_program


@pytest.mark.parametrize("git_version, parsed", [
    ("v1.29.0", (1, 29)), ("v1.28.15-gke.1020000", (1, 28)), ("v1.31.2+k3s1", (1, 31)),
    ("v1.30.4-eks-a737599", (1, 30)), ("1.33.1", (1, 33)), ("v1", None), ("", None), ("v1.x", None)])
def test_the_api_servers_version_is_read_from_its_git_version(git_version, parsed):
    assert kubernetes_version(git_version) == parsed


def test_a_cluster_before_native_sidecars_is_refused_naming_the_version_and_the_fix():
    stack = load_stack("eagle-default").config
    with pytest.raises(ConfigError) as refused:
        check_native_sidecar(stack, "eagle-default", "v1.28.9")
    text = str(refused.value)
    assert "1.28" in text and "1.29" in text and "disruption-budget.hold-during-benchmark" in text
    assert check_native_sidecar(stack, "eagle-default", "v1.29.0") is None


def test_a_stack_without_the_guard_runs_on_any_version():
    stack = load_stack("production").config  # the benchmark Job is off in a serving stack
    assert check_native_sidecar(stack, "production", "v1.27.0") is None


def test_pulumi_up_stops_before_declaring_anything_on_an_old_cluster():
    run = run_program("eagle-default", version="v1.28.9")
    assert run.error is not None and "1.29" in str(run.error)
    assert run.resources == []
    assert run_program("eagle-default", version="v1.30.1").error is None


def test_an_unreadable_version_is_a_warning_not_a_refusal(caplog):
    run = run_program("eagle-default")  # no cluster under the mocks: /version cannot be read
    assert run.error is None
    assert any("kubernetes version: " in r.getMessage() and "not checked" in r.getMessage() for r in caplog.records)


def test_validate_states_the_kubernetes_version_the_guard_needs(capsys):
    from sglab.cli import main

    assert main(["validate", "--stack", "eagle-default"]) == 0
    (line,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("kubernetes:")]
    assert "1.29 or newer" in line and "native sidecar" in line
    assert main(["validate", "--stack", "production"]) == 0  # no benchmark Job: no guard
    assert not [line for line in capsys.readouterr().out.splitlines() if line.startswith("kubernetes:")]
