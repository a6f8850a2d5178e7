"""`--stack` takes a stack file's path as well as a name; validate tells a GPU stack without sglab:traffic that
only its policy levels are judged."""

from __future__ import annotations

from pathlib import Path

import pytest

from sglab.cli import main
from sglab.config.loader import load_stack
from sglab.core import paths
from sglab.core.paths import project_root, stack_path

SHIPPED = (project_root() / "stacks" / "Pulumi.eagle-nccl-ll.yaml").read_text()


@pytest.fixture(autouse=True)
def no_registered_files(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(paths, "_STACK_FILES", {})


def test_validate_takes_the_path_of_a_stack_file_anywhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "mine").mkdir()
    file = tmp_path / "mine" / "my-stack.yaml"
    file.write_text(SHIPPED)
    monkeypatch.chdir(tmp_path)
    assert main(["validate", "--stack", "mine/my-stack.yaml"]) == 0
    assert capsys.readouterr().out.startswith(f"{file}: valid\n")


def test_a_path_names_the_stack_by_its_file_and_loads_that_file(tmp_path: Path) -> None:
    file = tmp_path / "Pulumi.newcomer-lab.yaml"
    file.write_text(SHIPPED)
    assert paths.use_stack_file(str(file)) == "newcomer-lab"  # as Pulumi names it
    assert stack_path("newcomer-lab") == file and load_stack("newcomer-lab").path == file
    assert paths.use_stack_file("eagle-nccl-ll") == "eagle-nccl-ll"  # a name stays a name


def test_a_missing_stack_file_is_one_message_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.yaml"
    assert main(["validate", "--stack", str(missing)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {missing}: stack file not found") and "check the path" in err
    assert "Traceback" not in err


def test_validate_says_a_gpu_stack_without_traffic_is_judged_at_its_policy_levels(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "--stack", "eagle-nccl-ll"]) == 0
    [note] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("traffic: ")]
    assert "no sglab:traffic declared" in note and "(concurrency 1) are judged" in note
    declared = tmp_path / "traffic.yaml"
    declared.write_text(SHIPPED.replace("config:\n", "config:\n  sglab:traffic:\n    levels: [1, 4]\n", 1))
    assert main(["validate", "--stack", str(declared)]) == 0
    assert "traffic: " not in capsys.readouterr().out
