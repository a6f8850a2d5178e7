"""Bad stack input: one clear message naming file, key (and line), problem and fix; exit 2; nothing rendered."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sglab.cli import main
from sglab.core.paths import project_root, stack_path

BASE = stack_path("eagle-nccl-ll", project_root()).read_text()


def edit(old: str, new: str) -> str:
    assert old in BASE, old
    return BASE.replace(old, new, 1)


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


# name -> (stack text, key path in the message, words the message must contain, line marker or None)
CASES = {
    "typo-nested-key": (edit("    tp-size: 8", "    tp-sise: 8"), "sglab:server.tp-sise",
                        ["unknown key", "did you mean 'tp-size'"], "tp-sise"),
    "typo-top-level-key": (edit("  sglab:namespace:", "  sglab:namspace:"), "sglab:namspace",
                           ["unknown key", "did you mean 'namespace'"], "namspace"),
    "typo-deep-key": (edit("      num-steps: 2", "      num-step: 2"), "sglab:candidate.speculative.num-step",
                      ["unknown key", "did you mean 'num-steps'"], "num-step:"),
    "wrong-type": (edit("    tp-size: 8", "    tp-size: eight"), "sglab:server.tp-size",
                   ["valid integer", "eight"], "tp-size: eight"),
    "invalid-nccl-value": (edit("NCCL_PROTO: LL", "NCCL_PROTO: LL256"), "sglab:nccl.NCCL_PROTO",
                           ["LL256", "LL, LL128, Simple"], "LL256"),
    "invalid-nccl-level": (edit("NCCL_P2P_LEVEL: SYS", "NCCL_P2P_LEVEL: SYSTEM"), "sglab:nccl.NCCL_P2P_LEVEL",
                           ["SYSTEM", "'SYS'"], "SYSTEM"),
    "impossible-speculative": (edit("      num-draft-tokens: 3", "      num-draft-tokens: 5"),
                               "sglab:candidate.speculative.num-draft-tokens",
                               ["eagle-topk is 1", "silently adjust", "num-draft-tokens: 3"], "num-draft-tokens: 5"),
    "draft-tree-too-small": (edit("      eagle-topk: 1\n      num-draft-tokens: 3",
                                  "      eagle-topk: 2\n      num-draft-tokens: 9"),
                             "sglab:candidate.speculative.num-draft-tokens", ["exceeds", "5"], "num-draft-tokens: 9"),
    "speculative-partly-set": (edit("      num-steps: 2\n", ""), "sglab:candidate.speculative",
                               ["all be set or all unset"], "speculative:"),
    "eagle-without-draft-model": (edit("      draft-model-path: /shared/kimi-k2.5-eagle3\n", ""),
                                  "sglab:candidate.speculative.algorithm", ["needs draft-model-path"], "algorithm:"),
    "broken-yaml": (edit("    tp-size: 8", "    tp-size: 8\n   oops: [1"), None, ["broken YAML"], None),
    "plain-text-secret": (edit("  sglab:env:", "  sglab:hf-token: hf_plaintext123\n  sglab:env:"), "sglab:hf-token",
                          ["plain text", "pulumi config set --secret sglab:hf-token"], "hf-token"),
    "tp-size-gpu-mismatch": (edit("    gpus-per-node: 8", "    gpus-per-node: 4"), "sglab:server.tp-size",
                             ["requests 4 GPUs", "set server.tp-size: 4"], "tp-size: 8"),
    "model-outside-volume": (edit("    path: /shared/kimi-k2.5-int4", "    path: /models/kimi"), "sglab:model.path",
                             ["outside the model volume", "/shared"], "path: /models/kimi"),
    "absolute-model-path-without-volume": (
        edit("    volume:\n      kind: hostPath\n      host-path: /shared\n      mount-path: /shared\n", ""),
        "sglab:model.path", ["absolute path", "model.volume is not set", "fail on the GPU nodes",
                             "mount-path: /shared", "Hugging Face model id"], "path: /shared/kimi"),
    "draft-outside-volume": (edit("draft-model-path: /shared/kimi-k2.5-eagle3", "draft-model-path: /data/e3"),
                             "sglab:candidate.speculative.draft-model-path", ["outside the model volume"], "/data/e3"),
    "multi-node-tp-mismatch": (edit("    gpus-per-node: 8", "    gpus-per-node: 8\n    nodes: 2"),
                               "sglab:server.tp-size", ["requests 16 GPUs", "x nodes 2", "tp-size: 16",
                                                        "gpus-per-node: 4"], "tp-size: 8"),
    "multi-node-simulator": (edit("  sglab:namespace:", "  sglab:backend: sim\n  sglab:namespace:").replace(
        "    gpus-per-node: 8", "    gpus-per-node: 8\n    nodes: 2"), "sglab:placement.nodes",
        ["not supported with backend sim", "nodes: 1"], "nodes: 2"),
    "nccl-under-env": (edit('  sglab:env:\n', '  sglab:env:\n    NCCL_DEBUG: INFO\n'), "sglab:env.NCCL_DEBUG",
                       ["belongs under nccl"], "NCCL_DEBUG"),
    "hf-token-under-env": (edit('  sglab:env:\n', '  sglab:env:\n    HF_TOKEN: hf_x\n'), "sglab:env.HF_TOKEN",
                           ["--secret"], "HF_TOKEN"),
    "managed-flag-in-extra-args": (edit("    tp-size: 8", "    tp-size: 8\n    extra-args: [--tp-size, '4']"),
                                   "sglab:server.extra-args", ["--tp-size is managed by sglab"], "extra-args"),
    "bad-toleration-operator": (edit("operator: Exists", "operator: Exist"),
                                "sglab:placement.tolerations.0.operator", ["'Exist'", "Exists"], "operator: Exist"),
    "unknown-namespace": (edit("  sglab:namespace:", "  sglb:namespace:"), "sglb:namespace",
                          ["unknown config namespace", "did you mean sglab:namespace"], "sglb:namespace"),
    "bad-node-selector-value": (edit("nvidia.com/gpu.product: NVIDIA-H200", "nvidia.com/gpu.product: NVIDIA H200"),
                                "sglab:placement.node-selector.nvidia.com/gpu.product",
                                ["not a valid label value"], "NVIDIA H200"),
    "toleration-exists-with-value": (edit("        operator: Exists", "        operator: Exists\n        value: x"),
                                     "sglab:placement.tolerations.0.value", ["remove value"], "value: x"),
    "bad-priority-class": (edit("    gpus-per-node: 8",
                                "    gpus-per-node: 8\n    priority-class-name: Inference_Critical"),
                           "sglab:placement.priority-class-name", ["not a valid Kubernetes object name"],
                           "Inference_Critical"),
    "bad-cpu-quantity": (edit("  sglab:placement:", "  sglab:resources:\n    cpu: two cores\n  sglab:placement:"),
                         "sglab:resources.cpu", ["not a CPU quantity"], "two cores"),
    "empty-allowed-from": (edit("  sglab:placement:",
                                "  sglab:network-policy:\n    allowed-from: {}\n  sglab:placement:"),
                           "sglab:network-policy.allowed-from", ["no load generator could reach"], "allowed-from"),
    "bad-k8s-namespace": (edit("  sglab:namespace: sglab-eagle-nccl-ll", "  sglab:namespace: Sglab_Eagle"),
                          "sglab:namespace", ["not a valid namespace"], "Sglab_Eagle"),
    "pulumi-timeout-too-short": (edit("  sglab:placement:", "  sglab:rollout:\n    startup-timeout-min: 60\n"
                                      "    pulumi-timeout-min: 30\n  sglab:placement:"),
                                 "sglab:rollout.pulumi-timeout-min", ["shorter than startup-timeout-min"],
                                 "pulumi-timeout-min"),
}


@pytest.fixture
def stacks(tmp_path, monkeypatch):
    monkeypatch.setenv("SGLAB_STACKS_DIR", str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("command", ["validate", "render"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_gets_one_clear_message(case, command, stacks, capsys):
    text, key, words, marker = CASES[case]
    path = stacks / f"Pulumi.{case}.yaml"
    path.write_text(text)
    assert main([command, "--stack", case]) == 2
    out, err = capsys.readouterr()
    assert out == ""  # nothing rendered, nothing validated
    assert err.startswith("error: ")
    assert str(path) in err
    if key is not None:
        assert f": {key}: " in err, err
    for word in words:
        assert word in err, (word, err)
    assert "\n  fix: " in err
    if marker is not None:
        assert f"{path}:{line_of(text, marker)}:" in err, err
    assert "Traceback" not in err


def test_broken_yaml_points_at_the_line(stacks, capsys):
    text, *_ = CASES["broken-yaml"]
    (stacks / "Pulumi.b.yaml").write_text(text)
    assert main(["validate", "--stack", "b"]) == 2
    err = capsys.readouterr().err
    assert f"Pulumi.b.yaml:{line_of(text, 'oops')}:" in err


def test_missing_stack_file_lists_known_stacks(stacks, capsys):
    (stacks / "Pulumi.present.yaml").write_text(BASE)
    assert main(["render", "--stack", "absent"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert str(stacks / "Pulumi.absent.yaml") in err and "not found" in err and "known stacks: present" in err


def test_empty_file_and_missing_config_section(stacks, capsys):
    (stacks / "Pulumi.empty.yaml").write_text("")
    (stacks / "Pulumi.noconfig.yaml").write_text("encryptionsalt: v1:abc\n")
    assert main(["validate", "--stack", "empty"]) == 2
    assert "empty" in capsys.readouterr().err
    assert main(["validate", "--stack", "noconfig"]) == 2
    assert ": config: " in capsys.readouterr().err


def test_unknown_nccl_key_is_a_warning_not_an_error(stacks, capsys):
    (stacks / "Pulumi.w.yaml").write_text(edit("    NCCL_PROTO: LL", "    NCCL_PROTO: LL\n    NCCL_NEW_KNOB: '1'"))
    assert main(["render", "--stack", "w"]) == 0
    out, err = capsys.readouterr()
    assert "NCCL_NEW_KNOB" in err and "unchecked" in err
    assert "NCCL_NEW_KNOB" in out  # passed through to both arms


@pytest.mark.parametrize("case", ["typo-nested-key", "multi-node-simulator"])
def test_cli_process_exits_2_without_traceback(case, stacks):
    text, key, *_ = CASES[case]
    (stacks / f"Pulumi.{case}.yaml").write_text(text)
    proc = subprocess.run([sys.executable, "-m", "sglab.cli", "render", "--stack", case], capture_output=True,
                          text=True, env={**os.environ, "SGLAB_STACKS_DIR": str(stacks)}, timeout=120)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert key in proc.stderr and "Traceback" not in proc.stderr


def test_render_out_dir_untouched_on_bad_input(stacks, tmp_path_factory, capsys):
    out_dir = tmp_path_factory.mktemp("render-out") / "objects"
    text, *_ = CASES["invalid-nccl-value"]
    (stacks / "Pulumi.bad.yaml").write_text(text)
    assert main(["render", "--stack", "bad", "--out", str(out_dir)]) == 2
    assert not out_dir.exists()


def test_render_out_writes_one_file_per_object(tmp_path, capsys):
    assert main(["render", "--stack", "eagle-nccl-ll", "--out", str(tmp_path)]) == 0
    files = sorted(p.name for p in Path(tmp_path).iterdir())
    assert files[0] == "00-namespace-sglab-eagle-nccl-ll.yaml"
    assert any(f.endswith("-deployment-sglang-baseline.yaml") for f in files)
    assert any(f.endswith("-deployment-sglang-candidate.yaml") for f in files)
    assert [f[:2] for f in files] == [f"{i:02d}" for i in range(len(files))]  # numbered in apply order
    assert capsys.readouterr().out == ""


def test_numeric_quantities_are_accepted(stacks, capsys):
    (stacks / "Pulumi.n.yaml").write_text(edit("  sglab:placement:", "  sglab:resources:\n    cpu: 2\n"
                                               "    memory: 1024\n  sglab:placement:"))
    assert main(["validate", "--stack", "n"]) == 0


def test_an_absolute_model_path_without_a_volume_is_fine_for_the_simulator(stacks, capsys):
    """The simulator reads no weights, so a sim stack needs no volume for its (absolute) model path."""
    text = edit("    volume:\n      kind: hostPath\n      host-path: /shared\n      mount-path: /shared\n", "")
    text = text.replace("  sglab:namespace:", "  sglab:backend: sim\n  sglab:namespace:", 1)
    text = text.replace("    gpus-per-node: 8", "    gpus-per-node: 0", 1)
    (stacks / "Pulumi.simweights.yaml").write_text(text)
    assert main(["validate", "--stack", "simweights"]) == 0, capsys.readouterr().err
