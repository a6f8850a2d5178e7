"""Secrets by shape, invisible characters and unknown speculative flags are refused where the stack enters:
one message naming the file, the key and the fix, exit 2, the secret itself never printed."""

from __future__ import annotations

import pytest

from sglab.core.untrusted import printable
from sglab.sglang.secret_names import has_url_credentials, is_secret_name, redact_url_credentials
from tests.config.test_hardening import edit, refused


@pytest.fixture
def stacks(tmp_path, monkeypatch):
    monkeypatch.setenv("SGLAB_STACKS_DIR", str(tmp_path))
    return tmp_path


VALUE = "s3cr3tV4lue9876"


@pytest.mark.parametrize("name", ["SESSION_COOKIE", "SLACK_WEBHOOK", "DSN", "SENTRY_DSN", "DATABASE_URL",
                                  "REDIS_URL", "MONGODB_URI", "CELERY_BROKER_URL", "sessionCookie",
                                  "slackWebhookUrl", "PGDSN"])
def test_names_shaped_like_a_connection_secret_are_secrets(name):
    assert is_secret_name(name)


@pytest.mark.parametrize("name", ["SGLANG_HOST_URL", "PROMETHEUS_URL", "MODEL_URL", "DATABASE_NAME", "REDIS_PORT",
                                  "NCCL_SOCKET_IFNAME", "SGLANG_DIAG_BYPASS_HEALTH_GENERATE"])
def test_names_that_only_locate_or_name_something_are_not_secrets(name):
    assert not is_secret_name(name)


@pytest.mark.parametrize("name", ["SESSION_COOKIE", "SLACK_WEBHOOK", "DSN", "DATABASE_URL", "REDIS_URL"])
def test_an_env_variable_shaped_like_a_secret_is_refused_and_never_printed(name, stacks, capsys):
    text = edit("  sglab:env:\n", f"  sglab:env:\n    {name}: {VALUE}\n")
    refused(stacks, "env-" + name.lower().replace("_", "-"), text, capsys, key=f"sglab:env.{name}",
            words=["named like a secret", "pulumi config set --secret sglab:hf-token"], hidden=VALUE)


QUERY_SECRETS = ["?token=", "?access_token=", "?sig=", "?X-Amz-Signature=", "?a=1&api_key=", "#access_token=",
                 "?signature=", "?X-Goog-Credential="]


@pytest.mark.parametrize("query", QUERY_SECRETS)
def test_a_url_with_a_secret_in_its_query_has_credentials(query):
    url = f"https://weights.example.com/kimi.tar{query}{VALUE}"
    assert has_url_credentials(url)
    redacted = redact_url_credentials(url)
    assert VALUE not in redacted and "***" in redacted and "weights.example.com" in redacted


@pytest.mark.parametrize("text", ["https://huggingface.co/moonshotai/Kimi-K2.5?revision=main",
                                  "/shared/kimi-k2.5-int4", "s3://bucket/model?versionId=3",
                                  "--max-new-tokens=12"])
def test_a_url_without_a_secret_in_its_query_has_none(text):
    assert not has_url_credentials(text)


@pytest.mark.parametrize("query", ["?token=", "?access_token=", "?sig="])
def test_a_model_path_with_a_secret_query_is_refused_and_never_printed(query, stacks, capsys):
    path = f"https://weights.example.com/kimi-k2.5{query}{VALUE}"
    text = edit("    path: /shared/kimi-k2.5-int4", f"    path: '{path}'")
    err = refused(stacks, "query-secret", text, capsys, key="sglab:model.path",
                  words=["credentials", "pulumi config set --secret sglab:hf-token"], hidden=VALUE)
    assert "weights.example.com" in err


INVISIBLE = {"zero-width-space": "\u200b", "zero-width-non-joiner": "\u200c", "zero-width-joiner": "\u200d",
             "word-joiner": "\u2060", "byte-order-mark": "\ufeff", "no-break-space": "\u00a0",
             "narrow-no-break-space": "\u202f", "ideographic-space": "\u3000", "soft-hyphen": "\u00ad"}


@pytest.mark.parametrize("case", sorted(INVISIBLE))
def test_an_invisible_character_in_a_path_is_refused_with_the_key_and_the_fix(case, stacks, capsys):
    char = INVISIBLE[case]
    text = edit("    path: /shared/kimi-k2.5-int4", f"    path: \"/shared/kimi{char}-k2.5-int4\"")
    err = refused(stacks, case, text, capsys, key="sglab:model.path",
                  words=["invisible", f"U+{ord(char):04X}", "retype"])
    assert char not in err


@pytest.mark.parametrize("char", sorted(INVISIBLE.values()))
def test_printable_shows_invisible_characters_escaped(char):
    shown = printable(f"a{char}b")
    assert char not in shown and shown.startswith("a\\") and shown.endswith("b")


def test_printable_keeps_visible_text_and_plain_spaces():
    assert printable("Kimi K2.5 — 速い ünïcode") == "Kimi K2.5 — 速い ünïcode"


@pytest.mark.parametrize("where,line", [
    ("candidate", "      extra-args: [--speculative-foo, '1']"),
    ("candidate-equals", "      extra-args: ['--speculative-foo=1']"),
])
def test_an_unknown_speculative_flag_is_refused_with_a_fix(where, line, stacks, capsys):
    text = edit("      num-draft-tokens: 3", f"      num-draft-tokens: 3\n{line}")
    refused(stacks, "spec-" + where, text, capsys, key="sglab:candidate.speculative.extra-args",
            words=["--speculative-foo", "not a --speculative-* flag of SGLang", "--speculative-adaptive"])


def test_an_unknown_speculative_flag_in_server_extra_args_is_refused(stacks, capsys):
    text = edit("    tp-size: 8", "    tp-size: 8\n    extra-args: [--speculative-foo, '1']")
    refused(stacks, "spec-server", text, capsys, key="sglab:server.extra-args",
            words=["--speculative-foo", "not a --speculative-* flag of SGLang"])


def test_a_known_speculative_flag_passes_the_extra_args_check():
    from sglab.config.server import check_extra_args
    args = ["--speculative-adaptive", "--speculative-adaptive-config", "/shared/tiers.json",
            "--speculative-draft-model-quantization", "unquant", "--speculative-moe-runner-backend", "auto"]
    assert check_extra_args(args, speculative=True) == args
