"""Stack files written by an attacker or a careless user: refused with one clear message, exit 2, nothing printed.

Classes: YAML that costs unbounded time or memory; secrets under other names;
values that would be silently wrong (unrealistic shapes, booleans for numbers, NCCL spellings);
odd files, names and pipes.
"""

from __future__ import annotations

import resource
import subprocess
import sys
import time

import pytest

from sglab.cli import main
from sglab.config import baseline_arm, candidate_arm, load_stack
from sglab.core.paths import project_root, stack_path

BASE = stack_path("eagle-nccl-ll", project_root()).read_text()
TOKEN = "hf_SuperSecretValue123"


def edit(old: str, new: str) -> str:
    assert old in BASE, old
    return BASE.replace(old, new, 1)


@pytest.fixture
def stacks(tmp_path, monkeypatch):
    monkeypatch.setenv("SGLAB_STACKS_DIR", str(tmp_path))
    return tmp_path


def refused(stacks, name: str, text: str | bytes, capsys, *, key: str | None, words: list[str],
            hidden: str | None = None) -> str:
    path = stacks / f"Pulumi.{name}.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    assert main(["validate", "--stack", name]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("error: ") and str(path) in err, err
    if key is not None:
        assert f": {key}: " in err, err
    for word in words:
        assert word in err, (word, err)
    assert "\n  fix: " in err and "Traceback" not in err
    if hidden is not None:
        assert hidden not in err
    return err


def limited(cmd: list[str], env: dict[str, str], timeout_s: float) -> subprocess.CompletedProcess:
    """Run with 1 GiB of address space, so a YAML bomb fails the test instead of the machine."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s, preexec_fn=limit)


# --- item 8: YAML denial of service -------------------------------------------------------------

BOMB = "config:\n  sglab:namespace: x\n  a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"  a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, "
    f"*a{i - 1}]\n" for i in range(1, 10)) + "  sglab:model: *a9\n"


def test_a_billion_laughs_file_is_refused_fast(stacks):
    assert len(BOMB) < 2000
    (stacks / "Pulumi.bomb.yaml").write_text(BOMB)
    import os
    started = time.monotonic()
    result = limited([sys.executable, "-m", "sglab.cli", "validate", "--stack", "bomb"],
                     {**os.environ, "SGLAB_STACKS_DIR": str(stacks)}, timeout_s=60)
    elapsed = time.monotonic() - started
    assert result.returncode == 2, result.stderr[-2000:]
    assert "alias" in result.stderr and "Traceback" not in result.stderr and result.stdout == ""
    assert elapsed < 30


def test_a_huge_file_is_refused_by_size_before_parsing(stacks, capsys):
    text = BASE + ("# padding comment line\n" * 120_000)  # ~2.8 MB of comments
    err = refused(stacks, "huge", text, capsys, key=None, words=["MiB", "larger than"])
    assert "stack file" in err


def test_aliases_within_bounds_still_work(stacks):
    text = edit("  sglab:placement:\n    gpus-per-node: 8\n    node-selector:\n      nvidia.com/gpu.product: "
                "NVIDIA-H200",
                "  sglab:placement:\n    gpus-per-node: 8\n    node-selector: &sel\n      nvidia.com/gpu.product: "
                "NVIDIA-H200"
                ).replace("  sglab:network-policy:", "") + "  sglab:network-policy:\n    allowed-from: *sel\n"
    (stacks / "Pulumi.alias.yaml").write_text(text)
    assert load_stack("alias").config.network_policy.allowed_from == {"nvidia.com/gpu.product": "NVIDIA-H200"}


# --- item 9: secrets by other names -------------------------------------------------------------

SECRETS = {
    "confounds-env-hf-token": (edit("      num-draft-tokens: 3",
                                    f"      num-draft-tokens: 3\n    confounds:\n      env:\n"
                                    f"        HF_TOKEN: {TOKEN}"), "sglab:candidate.confounds.env.HF_TOKEN"),
    "env-hugging-face-hub-token": (edit("  sglab:env:\n", f"  sglab:env:\n    HUGGING_FACE_HUB_TOKEN: {TOKEN}\n"),
                                   "sglab:env.HUGGING_FACE_HUB_TOKEN"),
    "env-hf-hub-token": (edit("  sglab:env:\n", f"  sglab:env:\n    HF_HUB_TOKEN: {TOKEN}\n"),
                         "sglab:env.HF_HUB_TOKEN"),
    "env-other-api-key": (edit("  sglab:env:\n", f"  sglab:env:\n    OPENAI_API_KEY: {TOKEN}\n"),
                          "sglab:env.OPENAI_API_KEY"),
    "extra-args-api-key": (edit("    tp-size: 8", f"    tp-size: 8\n    extra-args: [--api-key, {TOKEN}]"),
                           "sglab:server.extra-args"),
    "extra-args-api-key-equals": (edit("    tp-size: 8",
                                       f"    tp-size: 8\n    extra-args: ['--admin-api-key={TOKEN}']"),
                                  "sglab:server.extra-args"),
    "extra-args-api-key-prefix": (edit("    tp-size: 8", f"    tp-size: 8\n    extra-args: [--api-k, {TOKEN}]"),
                                  "sglab:server.extra-args"),
    "candidate-extra-args-api-key": (edit("      num-draft-tokens: 3", "      num-draft-tokens: 3\n    confounds:\n"
                                          f"      server:\n        extra-args: [--api-key, {TOKEN}]"),
                                     "sglab:candidate.confounds.server.extra-args"),
    "env-secret-as-number": (edit("  sglab:env:\n", "  sglab:env:\n    HF_TOKEN: 12345678987654321\n"),
                             "sglab:env.HF_TOKEN"),
}


@pytest.mark.parametrize("case", sorted(SECRETS))
def test_a_secret_by_any_name_is_refused_and_never_printed(case, stacks, capsys):
    text, key = SECRETS[case]
    hidden = "12345678987654321" if case == "env-secret-as-number" else TOKEN
    refused(stacks, case, text, capsys, key=key, words=["secret", "pulumi config set --secret sglab:hf-token"],
            hidden=hidden)


CONFOUND_ENV = {
    "confounds-env-bad-name": ("        1BAD: x", "sglab:candidate.confounds.env.1BAD", ["not a valid environment"]),
    "confounds-env-nccl": ("        NCCL_PROTO: LL256", "sglab:candidate.confounds.env.NCCL_PROTO",
                           ["belongs under", "confounds.nccl"]),
    "confounds-env-sim": ("        SGLAB_SIM_SEED: '3'", "sglab:candidate.confounds.env.SGLAB_SIM_SEED",
                          ["simulator knob"]),
}


@pytest.mark.parametrize("case", sorted(CONFOUND_ENV))
def test_confounds_env_is_checked_like_env(case, stacks, capsys):
    line, key, words = CONFOUND_ENV[case]
    text = edit("      num-draft-tokens: 3", f"      num-draft-tokens: 3\n    confounds:\n      env:\n{line}")
    refused(stacks, case, text, capsys, key=key, words=words)


# --- item 10: silently wrong values -------------------------------------------------------------

WRONG = {
    "num-steps-huge": (edit("      num-steps: 2", "      num-steps: 1000000000").replace(
        "num-draft-tokens: 3", "num-draft-tokens: 1000000001"), "sglab:candidate.speculative.num-steps",
        ["1000000000", "at most 32"]),
    "topk-huge": (edit("      eagle-topk: 1\n      num-draft-tokens: 3", "      eagle-topk: 100000\n"
                       "      num-draft-tokens: 3"), "sglab:candidate.speculative.eagle-topk", ["at most 64"]),
    "bool-for-int": (edit("    max-running-requests: 48", "    max-running-requests: true"),
                     "sglab:server.max-running-requests", ["boolean", "number"]),
    "bool-for-float": (edit("    mem-fraction-static: 0.88", "    mem-fraction-static: false"),
                       "sglab:server.mem-fraction-static", ["boolean", "number"]),
    "bool-in-number-list": (edit("  sglab:load:\n", "  sglab:load:\n    concurrency: [1, true]\n"),
                            "sglab:load.concurrency", ["boolean", "number"]),
    "bool-for-nccl-int": (edit("    NCCL_P2P_LEVEL: SYS", "    NCCL_P2P_LEVEL: SYS\n    NCCL_IB_TIMEOUT: true"),
                          "sglab:nccl.NCCL_IB_TIMEOUT", ["boolean", "integer"]),
    "nccl-per-collective": (edit("NCCL_ALGO: Ring", "NCCL_ALGO: 'allreduce:tree;broadcast:ring'"),
                            "sglab:nccl.NCCL_ALGO", ["per-collective"]),
    "nccl-empty-item": (edit("NCCL_ALGO: Ring", "NCCL_ALGO: 'Ring,,Tree'"), "sglab:nccl.NCCL_ALGO", ["''"]),
}


@pytest.mark.parametrize("case", sorted(WRONG))
def test_silently_wrong_values_are_refused(case, stacks, capsys):
    text, key, words = WRONG[case]
    refused(stacks, case, text, capsys, key=key, words=words)


def test_nccl_values_are_normalised_the_way_nccl_reads_them(stacks):
    text = edit("NCCL_PROTO: LL", "NCCL_PROTO: ll").replace("NCCL_ALGO: Ring", 'NCCL_ALGO: "ring, Tree"').replace(
        "NCCL_P2P_LEVEL: SYS", "NCCL_P2P_LEVEL: 1\n    NCCL_IB_DISABLE: 1")
    (stacks / "Pulumi.nccl.yaml").write_text(text)
    stack = load_stack("nccl").config
    for arm in (baseline_arm(stack), candidate_arm(stack)):
        assert {k: v for k, v in arm.env.items() if k.startswith("NCCL_")} == {
            "NCCL_ALGO": "Ring,Tree", "NCCL_IB_DISABLE": "1", "NCCL_P2P_LEVEL": "1", "NCCL_PROTO": "LL"}
    (stacks / "Pulumi.lower.yaml").write_text(edit("NCCL_P2P_LEVEL: SYS", "NCCL_P2P_LEVEL: sys"))
    assert load_stack("lower").config.nccl.as_env()["NCCL_P2P_LEVEL"] == "SYS"


BODY = "".join(line for line in BASE.splitlines(keepends=True) if not line.startswith("#"))


@pytest.mark.parametrize("data", [b"\xef\xbb\xbf" + BASE.encode(), b"\xef\xbb\xbf" + BODY.encode(),
                                  BODY.encode("utf-16"), BODY.encode("utf-32")], ids=["bom-comment", "bom-config",
                                                                                    "utf-16", "utf-32"])
def test_a_byte_order_mark_is_read(data, stacks, capsys):
    (stacks / "Pulumi.bom.yaml").write_bytes(data)
    assert main(["validate", "--stack", "bom"]) == 0
    assert "valid" in capsys.readouterr().out


def test_a_file_that_is_not_utf8_is_a_clean_error(stacks, capsys):
    refused(stacks, "latin", edit("    tp-size: 8", "    tp-size: 8\n    # caf\xe9").encode("latin-1"), capsys,
            key=None, words=["not UTF-8", "save the file as UTF-8"])


def test_deep_nesting_is_a_clean_error(stacks, capsys):
    refused(stacks, "deep", edit("    tp-size: 8", "    tp-size: 8\n    extra-args: " + "[" * 5000 + "]" * 5000),
            capsys, key=None, words=["nested"])


def test_a_300_character_stack_name_is_a_clean_error(stacks, capsys):
    assert main(["validate", "--stack", "a" * 300]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("error: ") and "Traceback" not in err
    assert "stack name" in err and "\n  fix: " in err


def test_a_closed_stdout_pipe_ends_quietly(tmp_path):
    import os
    read_end, write_end = os.pipe()
    os.close(read_end)  # what `| head -0` does: nobody reads
    with open(tmp_path / "stderr", "wb") as stderr:
        reader = subprocess.Popen([sys.executable, "-m", "sglab.cli", "validate", "--stack", "eagle-nccl-ll"],
                                  stdout=write_end, stderr=stderr)
        os.close(write_end)
        reader.wait(timeout=60)
    err = (tmp_path / "stderr").read_bytes()
    assert b"Traceback" not in err and b"BrokenPipe" not in err, err
    assert reader.returncode != 0 or err == b""
