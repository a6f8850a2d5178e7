"""Strict types, sane paths and the confound hole: classes of stack input refused with one message, exit 2.

- secrets by shape: any env name or flag name with a token/secret/password/pass/key/pat/bearer/credential/auth
  word (a short allow-list of known-safe names aside), and credentials inside URLs; never printed;
- strict types: booleans only as booleans, integers only as integers (YAML floats for float keys stay fine);
  every CPU key takes a CPU quantity and every memory or size key a Kubernetes quantity, a YAML number included;
- no control characters in any name or path; mount, writable and host paths outside the system directories,
  a weights hostPath only under an allowed prefix;
- candidate-only --speculative-* flags outside candidate.speculative are refused, not dropped from the confounds.
"""

from __future__ import annotations

import pytest
import yaml

from sglab.cli import main
from sglab.config import candidate_arm, confounds, load_stack
from sglab.core.paths import list_stacks, project_root, stack_path

from .test_hardening import BASE, edit, refused, stacks  # noqa: F401 (stacks is a fixture)

SECRET_VALUE = "s3cr3t-Value-42"


def with_env(name: str, value: str = SECRET_VALUE) -> str:
    return edit("  sglab:env:\n", f"  sglab:env:\n    {name}: {value}\n")


def with_confounds(block: str) -> str:
    return edit("      num-draft-tokens: 3", "      num-draft-tokens: 3\n    confounds:\n" + block)


def with_extra_args(args: str) -> str:
    return edit("    tp-size: 8", f"    tp-size: 8\n    extra-args: {args}")


def accepted(stacks, name: str, text: str, capsys) -> str:
    (stacks / f"Pulumi.{name}.yaml").write_text(text)
    code = main(["validate", "--stack", name])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


# --- secrets by shape ----------------------------------------------------------------------------

SECRET_NAMES = ["TOKEN", "PASSWORD", "API_KEY", "APIKEY", "SECRET", "GITHUB_PAT", "BEARER", "DB_PASS", "WANDB_KEY",
                "PGPASSWORD", "DB_PASSWD", "AWS_SESSION_TOKEN", "GCP_CREDENTIALS", "AUTH", "X_AUTH_HEADER",
                "githubToken", "MyAppSecret", "OPENAI_APIKEY", "SLACK_SECRET_URL", "ACCESS_KEY_ID", "HF_TOKEN_2"]


@pytest.mark.parametrize("name", SECRET_NAMES)
def test_an_env_name_shaped_like_a_secret_is_refused_and_its_value_never_printed(name, stacks, capsys):
    err = refused(stacks, "secret-env", with_env(name), capsys, key=f"sglab:env.{name}",
                  words=["secret", "sglab:hf-token"], hidden=SECRET_VALUE)
    assert "Secret" in err  # the fix names the other way: a Kubernetes Secret reference


@pytest.mark.parametrize("name", ["TOKEN", "DB_PASS", "WANDB_KEY"])
def test_the_candidate_env_is_checked_by_shape_too(name, stacks, capsys):
    refused(stacks, "secret-confound", with_confounds(f"      env:\n        {name}: {SECRET_VALUE}"), capsys,
            key=f"sglab:candidate.confounds.env.{name}", words=["secret"], hidden=SECRET_VALUE)


# Names that contain a secret-looking word but are known not to be secrets (SGLang's own variables among them).
SAFE_NAMES = ["SGLANG_MINIMAX_VIT_TOKEN_BLOCK", "SGLANG_INIT_NEW_TOKEN_RATIO", "SGLANG_SYNC_TOKEN_IDS_ACROSS_TP",
              "SGLANG_LOG_DECODE_GRAPH_KEY", "TOKENIZERS_PARALLELISM", "SGLANG_MAX_THINK_TOKENS",
              "SGLANG_DIAG_BYPASS_HEALTH_GENERATE", "SGLANG_PATCH_TOKENIZER", "KEYBOARD_LAYOUT", "PASSTHROUGH_MODE",
              "SPATIAL_INDEX"]


@pytest.mark.parametrize("name", SAFE_NAMES)
def test_known_safe_names_and_words_that_only_contain_a_secret_word_pass(name, stacks, capsys):
    out = accepted(stacks, "safe-env", with_env(name, "'1'"), capsys)
    assert f"{name}=1" in out


SECRET_FLAGS = {
    "hf-token": "[--hf-token, VALUE]",
    "password-equals": "['--db-password=VALUE']",
    "bearer": "[--bearer, VALUE]",
    "github-pat": "[--github-pat, VALUE]",
    "auth-token": "[--auth-token, VALUE]",
    "client-secret": "[--client-secret, VALUE]",
    "api-key-known": "[--api-key, VALUE]",
    "private-key": "[--private-key, VALUE]",
    "apikey-glued": "[--openai-apikey, VALUE]",
}


@pytest.mark.parametrize("case", sorted(SECRET_FLAGS))
def test_a_flag_named_like_a_secret_is_refused_in_either_extra_args(case, stacks, capsys):
    args = SECRET_FLAGS[case].replace("VALUE", SECRET_VALUE)
    refused(stacks, "secret-flag", with_extra_args(args), capsys, key="sglab:server.extra-args",
            words=["secret", "sglab:hf-token"], hidden=SECRET_VALUE)
    refused(stacks, "secret-flag-c", with_confounds(f"      server:\n        extra-args: {args}"), capsys,
            key="sglab:candidate.confounds.server.extra-args", words=["secret"], hidden=SECRET_VALUE)


def test_sglang_flags_that_only_look_like_secrets_pass(stacks, capsys):
    out = accepted(stacks, "safe-flags", with_extra_args(
        "[--bucket-time-to-first-token, '0.1', '0.5', --ssl-keyfile, /certs/key.pem, --tokenizer-path, /shared/tok,"
        " --max-total-tokens, '4096']"), capsys)
    assert "--bucket-time-to-first-token 0.1 0.5" in out and "--ssl-keyfile /certs/key.pem" in out


PASSWORD = "hunter2pw"
URL_CREDENTIALS = {
    "model-path": (edit("    path: /shared/kimi-k2.5-int4", f"    path: https://alice:{PASSWORD}@models.example/kimi")
                   .replace("    volume:\n      kind: hostPath\n      host-path: /shared\n      mount-path: /shared\n",
                            ""),
                   "sglab:model.path"),
    "draft-path": (edit("      draft-model-path: /shared/kimi-k2.5-eagle3",
                        f"      draft-model-path: hf://bob:{PASSWORD}@hub.example/eagle3"),
                   "sglab:candidate.speculative.draft-model-path"),
    "tokenizer-path": (with_extra_args(f"[--tokenizer-path, 'https://carol:{PASSWORD}@h.example/tok']"),
                       "sglab:server.extra-args"),
    "tokenizer-path-equals": (with_extra_args(f"['--tokenizer-path=https://carol:{PASSWORD}@h.example/tok']"),
                              "sglab:server.extra-args"),
    "token-as-user": (with_extra_args(f"[--tokenizer-path, 'https://ghp_{PASSWORD}@github.example/tok']"),
                      "sglab:server.extra-args"),
    "env-url": (with_env("HF_ENDPOINT", f"https://dave:{PASSWORD}@mirror.example"), "sglab:env.HF_ENDPOINT"),
    "confound-image": (with_confounds(f"      image: 'erin:{PASSWORD}@registry.example/sglang:v1'"),
                       "sglab:candidate.confounds.image"),
}


@pytest.mark.parametrize("case", sorted(URL_CREDENTIALS))
def test_credentials_in_a_url_are_refused_and_never_printed(case, stacks, capsys):
    text, key = URL_CREDENTIALS[case]
    refused(stacks, "url-creds", text, capsys, key=key, words=["credentials", "sglab:hf-token"], hidden=PASSWORD)
    assert main(["render", "--stack", "url-creds"]) == 2
    out, err = capsys.readouterr()
    assert PASSWORD not in out + err


HF_TOKEN_VALUE = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz012345"
TOKEN_VALUES = {
    "hf-token-as-model-path": (edit("    path: /shared/kimi-k2.5-int4", f"    path: /shared/{HF_TOKEN_VALUE}"),
                               "sglab:model.path", HF_TOKEN_VALUE),
    "github-token-in-env": (with_env("GIT_REMOTE", "ghp_" + "a1B2" * 9), "sglab:env.GIT_REMOTE", "a1B2a1B2"),
    "aws-key-in-extra-args": (with_extra_args("[--chat-template, AKIAABCDEFGHIJKLMNOP]"), "sglab:server.extra-args",
                              "AKIAABCDEFGHIJKLMNOP"),
}


@pytest.mark.parametrize("case", sorted(TOKEN_VALUES))
def test_a_value_shaped_like_a_well_known_credential_is_refused_and_never_printed(case, stacks, capsys):
    text, key, hidden = TOKEN_VALUES[case]
    refused(stacks, "token-value", text, capsys, key=key, words=["looks like", "sglab:hf-token"], hidden=hidden)


@pytest.mark.parametrize("value", [".inf", ".nan", "-.inf"])
def test_non_finite_numbers_are_refused(value, stacks, capsys):
    refused(stacks, "inf", edit("  sglab:load:\n", f"  sglab:load:\n    round-duration-s: {value}\n"), capsys,
            key="sglab:load.round-duration-s", words=["finite"])


def test_a_url_without_credentials_and_an_at_sign_elsewhere_pass(stacks, capsys):
    accepted(stacks, "url-ok", with_env("HF_ENDPOINT", "https://mirror.example/path@v1"), capsys)


# --- strict types ----------------------------------------------------------------------------------

STRICT = {
    "bool-yes": (edit("    trust-remote-code: true", "    trust-remote-code: 'yes'"), "sglab:server.trust-remote-code",
                 ["true or false"]),
    "bool-yes-bare": (edit("    trust-remote-code: true", "    trust-remote-code: yes"),
                      "sglab:server.trust-remote-code", ["true or false"]),
    "bool-one": (edit("    trust-remote-code: true", "    trust-remote-code: 1"), "sglab:server.trust-remote-code",
                 ["true or false"]),
    "bool-in-list": (edit("  sglab:load:\n", "  sglab:load:\n    natural-stop: 0\n"), "sglab:load.natural-stop",
                     ["true or false"]),
    "int-string": (edit("    tp-size: 8", "    tp-size: '8'"), "sglab:server.tp-size", ["integer", "8"]),
    "int-float": (edit("    tp-size: 8", "    tp-size: 8.0"), "sglab:server.tp-size", ["integer", "8"]),
    "int-in-list": (edit("  sglab:load:\n", "  sglab:load:\n    concurrency: [1, 4.0]\n"), "sglab:load.concurrency",
                    ["integer"]),
    "int-string-in-list": (edit("  sglab:load:\n", "  sglab:load:\n    concurrency: [1, '4']\n"),
                           "sglab:load.concurrency", ["integer"]),
    "float-string": (edit("    mem-fraction-static: 0.88", "    mem-fraction-static: '0.88'"),
                     "sglab:server.mem-fraction-static", ["number"]),
    "nested-int": (edit("      num-steps: 2", "      num-steps: '2'"), "sglab:candidate.speculative.num-steps",
                   ["integer"]),
    "placement-int": (edit("    gpus-per-node: 8", "    gpus-per-node: 8.0"), "sglab:placement.gpus-per-node",
                      ["integer"]),
}


@pytest.mark.parametrize("case", sorted(STRICT))
def test_a_value_of_the_wrong_type_is_refused_not_coerced(case, stacks, capsys):
    text, key, words = STRICT[case]
    refused(stacks, case, text, capsys, key=key, words=words)


@pytest.mark.parametrize("line, words", [
    ("    NCCL_IB_DISABLE: true", ["boolean", "1 or 0"]),
    ("    NCCL_BUFFSIZE: 4194304.0", ["decimal", "write 4194304"]),
    ("    NCCL_SOCKET_NTHREADS: 2.0", ["decimal", "write 2"]),
])
def test_nccl_values_are_not_coerced_from_booleans_or_decimals(line, words, stacks, capsys):
    text = edit("    NCCL_P2P_LEVEL: SYS", "    NCCL_P2P_LEVEL: SYS\n" + line)
    refused(stacks, "nccl-lax", text, capsys, key=f"sglab:nccl.{line.split(':')[0].strip()}", words=words)


def test_yaml_numbers_for_float_keys_stay_fine(stacks):
    text = edit("    mem-fraction-static: 0.88", "    mem-fraction-static: 0.9")
    (stacks / "Pulumi.floats.yaml").write_text(text.replace("  sglab:load:\n",
                                                            "  sglab:load:\n    round-duration-s: 3\n"))
    config = load_stack("floats").config
    assert config.server.mem_fraction_static == 0.9 and config.load.round_duration_s == 3.0


@pytest.mark.parametrize("name", list_stacks())
def test_every_shipped_stack_still_loads(name):
    load_stack(name)


# --- control characters, system paths, hostPath prefixes ------------------------------------------

CONTROL = {
    "model-path-nul": (edit("    path: /shared/kimi-k2.5-int4", '    path: "/shared/kimi\\0k2"'), "sglab:model.path"),
    "model-path-escape": (edit("    path: /shared/kimi-k2.5-int4", '    path: "/shared/kimi\\e[2Jk2"'),
                          "sglab:model.path"),
    "model-path-newline": (edit("    path: /shared/kimi-k2.5-int4", '    path: "/shared/kimi\\nk2"'),
                           "sglab:model.path"),
    "served-name-bidi": (edit("    path: /shared/kimi-k2.5-int4",
                              '    path: /shared/kimi-k2.5-int4\n    served-model-name: "kimi\\u202Egnp"'),
                         "sglab:model.served-model-name"),
    "env-value-escape": (with_env("SGLANG_LOG_LEVEL", '"info\\e]0;owned\\a"'), "sglab:env.SGLANG_LOG_LEVEL"),
    "extra-args-nul": (with_extra_args('["--chat-template", "/shared/t\\0"]'), "sglab:server.extra-args"),
    "draft-path-tab": (edit("      draft-model-path: /shared/kimi-k2.5-eagle3",
                            '      draft-model-path: "/shared/kimi\\teagle3"'),
                       "sglab:candidate.speculative.draft-model-path"),
}


@pytest.mark.parametrize("case", sorted(CONTROL))
def test_control_characters_in_names_and_paths_are_refused(case, stacks, capsys):
    text, key = CONTROL[case]
    err = refused(stacks, case, text, capsys, key=key, words=["control character"])
    assert "\x1b" not in err and "\x00" not in err and "\u202e" not in err


VOLUME = "    volume:\n      kind: hostPath\n      host-path: /shared\n      mount-path: /shared\n"


def with_volume(host: str | None = "/shared", mount: str = "/shared", extra: str = "") -> str:
    block = "    volume:\n      kind: hostPath\n" + (f"      host-path: {host}\n" if host else "") + \
        f"      mount-path: {mount}\n" + extra
    return edit(VOLUME, block).replace("/shared/kimi", f"{mount.rstrip('/')}/kimi")


PATHS = {
    "mount-root": (with_volume(mount="/"), "sglab:model.volume.mount-path", ["system directory"]),
    "mount-etc": (with_volume(mount="/etc"), "sglab:model.volume.mount-path", ["system directory"]),
    "mount-proc-sub": (with_volume(mount="/proc/weights"), "sglab:model.volume.mount-path", ["system directory"]),
    "mount-dotdot": (with_volume(mount="/shared/../etc"), "sglab:model.volume.mount-path", [".."]),
    "mount-is-writable": (with_volume(mount="/tmp"), "sglab:model.volume.mount-path", ["writable-paths"]),
    "writable-in-weights": (edit("  sglab:load:\n", "  sglab:pod-security:\n    writable-paths: [/tmp, /shared/cache]\n"
                                 "  sglab:load:\n"), "sglab:model.volume.mount-path", ["read-only", "/shared/cache"]),
    "claim-name-invalid": (edit(VOLUME, "    volume:\n      kind: pvc\n      claim-name: 'Weights_Of/Kimi'\n"
                                "      mount-path: /shared\n"), "sglab:model.volume.claim-name", ["claim-name"]),
    "writable-etc": (edit("  sglab:load:\n",
                          "  sglab:pod-security:\n    writable-paths: [/tmp, /etc]\n  sglab:load:\n"),
                     "sglab:pod-security.writable-paths", ["system directory", "/etc"]),
    "writable-proc": (edit("  sglab:load:\n", "  sglab:pod-security:\n    writable-paths: [/proc]\n  sglab:load:\n"),
                      "sglab:pod-security.writable-paths", ["system directory", "/proc"]),
    "writable-usr-sub": (edit("  sglab:load:\n", "  sglab:pod-security:\n    writable-paths: [/usr/lib/x]\n"
                              "  sglab:load:\n"), "sglab:pod-security.writable-paths", ["system directory"]),
    "host-root": (with_volume(host="/"), "sglab:model.volume.host-path", ["system directory"]),
    "host-var-run": (with_volume(host="/var/run"), "sglab:model.volume.host-path", ["system directory"]),
    "host-kubelet": (with_volume(host="/var/lib/kubelet/pods"), "sglab:model.volume.host-path", ["system directory"]),
    "host-etc": (with_volume(host="/etc"), "sglab:model.volume.host-path", ["system directory"]),
    "host-proc": (with_volume(host="/proc"), "sglab:model.volume.host-path", ["system directory"]),
    "host-sys": (with_volume(host="/sys"), "sglab:model.volume.host-path", ["system directory"]),
    "host-dev": (with_volume(host="/dev"), "sglab:model.volume.host-path", ["system directory"]),
    "host-root-home": (with_volume(host="/root"), "sglab:model.volume.host-path", ["system directory"]),
    "host-run": (with_volume(host="/run/containerd"), "sglab:model.volume.host-path", ["system directory"]),
    "host-dotdot": (with_volume(host="/shared/../etc"), "sglab:model.volume.host-path", [".."]),
    "host-relative": (with_volume(host="shared"), "sglab:model.volume.host-path", ["absolute"]),
    "host-outside-prefix": (with_volume(host="/opt/weights"), "sglab:model.volume.host-path",
                            ["host-path-prefixes", "/shared"]),
    "host-prefix-lookalike": (with_volume(host="/shared-evil"), "sglab:model.volume.host-path",
                              ["host-path-prefixes"]),
    "prefix-is-system": (with_volume(host="/etc/models", extra="      host-path-prefixes: [/etc]\n"),
                         "sglab:model.volume.host-path-prefixes", ["system directory"]),
    "prefix-is-root": (with_volume(host="/models", extra="      host-path-prefixes: [/]\n"),
                       "sglab:model.volume.host-path-prefixes", ["system directory"]),
}


@pytest.mark.parametrize("case", sorted(PATHS))
def test_mount_writable_and_host_paths_stay_out_of_the_system_directories(case, stacks, capsys):
    text, key, words = PATHS[case]
    refused(stacks, case, text, capsys, key=key, words=words)


def test_the_host_path_prefixes_are_configurable(stacks, capsys):
    accepted(stacks, "prefix", with_volume(host="/opt/weights", extra="      host-path-prefixes: [/opt/weights]\n"),
             capsys)
    accepted(stacks, "default-prefix", with_volume(host="/mnt/models/kimi"), capsys)


# --- candidate-only --speculative-* flags -----------------------------------------------------------

@pytest.mark.parametrize("flag",
                         ["--speculative-foo", "--speculative-adaptive", "--speculative-draft-model-quantization",
                                  "--speculative-moe-runner-backend"])
def test_a_speculative_flag_under_the_confounds_is_refused_with_where_it_belongs(flag, stacks, capsys):
    value = "" if flag == "--speculative-adaptive" else ", x"
    refused(stacks, "spec-confound", with_confounds(f"      server:\n        extra-args: [{flag}{value}]"), capsys,
            key="sglab:candidate.confounds.server.extra-args", words=[flag, "candidate.speculative.extra-args"])
    refused(stacks, "spec-shared", with_extra_args(f"[{flag}{value}]"), capsys, key="sglab:server.extra-args",
            words=[flag, "candidate.speculative.extra-args"])


def test_an_abbreviated_speculative_flag_is_refused_too(stacks, capsys):
    refused(stacks, "spec-abbrev",
            with_confounds("      server:\n        extra-args: [--speculative-adaptive-c, x.json]"),
            capsys, key="sglab:candidate.confounds.server.extra-args",
            words=["--speculative-adaptive-config", "candidate.speculative"])


def test_candidate_speculative_extra_args_reach_only_the_candidate(stacks):
    text = edit("      num-steps: 2", "      num-steps: 3").replace(  # an adaptive tier: 3 steps
        "      num-draft-tokens: 3", "      num-draft-tokens: 4\n      extra-args: [--speculative-adaptive]")
    (stacks / "Pulumi.spec-extra.yaml").write_text(text)
    config = load_stack("spec-extra").config
    assert "--speculative-adaptive" in candidate_arm(config).args
    assert confounds(config) == []  # part of the speculative block, not a confound


@pytest.mark.parametrize("args, words", [
    ("[--chunked-prefill-size, '4096']", ["--chunked-prefill-size", "candidate.confounds.server"]),
    ("[--speculative-num-steps, '3']", ["candidate.speculative.num-steps"]),
])
def test_candidate_speculative_extra_args_take_only_unmanaged_speculative_flags(args, words, stacks, capsys):
    text = edit("      num-draft-tokens: 3", f"      num-draft-tokens: 3\n      extra-args: {args}")
    refused(stacks, "spec-extra-bad", text, capsys, key="sglab:candidate.speculative.extra-args", words=words)


# --- Kubernetes quantities -------------------------------------------------------------------------

PRODUCTION = stack_path("production", project_root()).read_text()  # it serves: every section is read
CPU_KEYS = ["resources.cpu", "resources.cpu-limit", "benchmark-job.cpu", "locust.cpu", "preflight.cpu",
            "serving.judge-cpu", "serving.gateway.endpoint-picker.cpu"]
BYTE_KEYS = ["resources.memory", "resources.shm-size", "pod-security.writable-size-limit", "hf-cache.size",
             "benchmark-job.memory", "locust.memory", "preflight.memory", "serving.judge-memory",
             "serving.gateway.endpoint-picker.memory"]


def with_value(key: str, value: object) -> str:
    """The production stack with `sglab:<key>` set to `value`."""
    config = yaml.safe_load(PRODUCTION)
    section, *path = key.split(".")
    node = config["config"].setdefault(f"sglab:{section}", {})
    for part in path[:-1]:
        node = node.setdefault(part, {})
    node[path[-1]] = value
    return yaml.safe_dump(config)


@pytest.mark.parametrize("key", CPU_KEYS)
def test_a_cpu_key_refuses_what_is_not_a_cpu_quantity(key, stacks, capsys):
    refused(stacks, "bad-cpu", with_value(key, "2Gi"), capsys, key=f"sglab:{key}",
            words=["'2Gi' is not a CPU quantity\n  fix: write cores or millicores, like 2, 1.5 or 500m"])


@pytest.mark.parametrize("key", BYTE_KEYS)
def test_a_memory_or_size_key_refuses_what_is_not_a_kubernetes_quantity(key, stacks, capsys):
    refused(stacks, "bad-memory", with_value(key, "8 GB"), capsys, key=f"sglab:{key}",
            words=["'8 GB' is not a Kubernetes quantity\n  fix: write a number and a unit, like 64Gi, 512Mi or 2Ti"])


@pytest.mark.parametrize("key", CPU_KEYS + BYTE_KEYS)
def test_a_yaml_number_is_a_quantity_at_every_key(key, stacks):
    (stacks / "Pulumi.number.yaml").write_text(with_value(key, 4))
    section, *path = key.replace("-", "_").split(".")
    node = getattr(load_stack("number").config, section)
    for part in path:
        node = getattr(node, part)
    assert node == "4"
