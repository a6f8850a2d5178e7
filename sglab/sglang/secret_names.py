"""Which names carry a secret, by their shape, and which URLs carry credentials.

A list of known secret names is always one name short (`DB_PASS`, `WANDB_KEY`, `GITHUB_PAT`), so a name
is a secret when one of its words is a secret word: the name is split at `_`, `-`, `.` and camelCase
(`githubToken` -> github, token), and `DB_PASS` has the word `pass` while `PASSTHROUGH_MODE` and
`SGLANG_DIAG_BYPASS_HEALTH_GENERATE` do not. Words glued to a secret word (`PGPASSWORD`, `OPENAI_APIKEY`)
count too. A connection string carries its password in it: a name is a secret when it says it is one
(`DSN`, `SESSION_COOKIE`, `SLACK_WEBHOOK`) or when it locates a data store (`DATABASE_URL`, `REDIS_URL`,
`CELERY_BROKER_URL`: a store word and `url`/`uri`), while `PROMETHEUS_URL` or `REDIS_PORT` do not. A URL
carries a secret in its user:password@ part or in a query parameter named like one (`?token=`,
`?access_token=`, `?sig=`, `X-Amz-Signature`: presigned and tokenised links). Names that match but are
known not to be secrets are listed once below: the short allow-list
(SGLang's own variables and flags that count tokens of text, read from its `srt/environ.py` and
`srt/server_args.py`, 0.5.x).
"""

from __future__ import annotations

import re

# Words that make a name a secret wherever they stand in it.
SECRET_WORDS = frozenset({
    "token", "secret", "secrets", "password", "passwords", "passwd", "pass", "pwd", "passphrase", "key", "apikey",
    "pat", "bearer", "credential", "credentials", "creds", "auth", "authorization", "cookie", "cookies", "webhook",
    "webhooks", "dsn",
})
# A name holding a locator word and a store word is a connection string (DATABASE_URL, REDIS_URL, MONGODB_URI).
LOCATOR_WORDS = frozenset({"url", "uri", "conn", "connstr"})
STORE_WORDS = frozenset({
    "database", "databases", "db", "sql", "sqlalchemy", "postgres", "postgresql", "pg", "mysql", "mariadb", "mongo",
    "mongodb", "redis", "valkey", "memcached", "amqp", "rabbitmq", "broker", "kafka", "nats", "elasticsearch",
    "opensearch", "clickhouse", "cassandra", "neo4j", "celery",
})
# Query parameter words that carry a secret in a URL, besides the secret words (presigned S3/GCS/Azure links).
QUERY_SECRET_WORDS = frozenset({"sig", "signature"})
# Secret words that still count glued to another word (PGPASSWORD, OPENAI_APIKEY, MYAPPSECRET, HFTOKEN).
GLUED_CONTAINED = ("password", "passwd", "passphrase", "apikey", "credential", "secretkey", "accesskey",
                   "privatekey")
GLUED_SUFFIXES = ("token", "secret", "dsn", "cookie", "webhook")

# Prefixes whose variables are never secrets: NCCL's tuning variables (typed under sglab:nccl).
SAFE_PREFIXES = ("NCCL_",)
# SGLang's variables and flags whose names have a secret word but hold no secret ("token" of text).
SAFE_ENV_NAMES = frozenset({
    "SGLANG_INIT_NEW_TOKEN_RATIO", "SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR", "SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS",
    "SGLANG_PER_TOKEN_GROUP_QUANT_8BIT_V2", "SGLANG_PREFILL_DELAYER_TOKEN_USAGE_LOW_WATERMARK",
    "SGLANG_SYNC_TOKEN_IDS_ACROSS_TP", "SGLANG_USE_AITER_FP8_PER_TOKEN", "SGLANG_FLASHINFER_NVFP4_PER_TOKEN_ACTIVATION",
    "SGLANG_MINIMAX_VIT_TOKEN_BLOCK", "SGLANG_SIMULATE_ACC_TOKEN_MODE", "SGLANG_LOG_DECODE_GRAPH_KEY",
    "SGLANG_DEBUG_SLOW_SCHEDULER_PASS_MS",
})
SAFE_FLAGS = frozenset({
    "--bucket-inter-token-latency", "--bucket-time-to-first-token", "--ds-heavy-token-num",
    "--kt-max-deferred-experts-per-token", "--prefill-delayer-token-usage-low-watermark", "--speculative-token-map",
    "--tbo-token-distribution-threshold",
})

_WORDS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


def name_words(name: str) -> list[str]:
    """The words of a name, lower-case: `GITHUB_PAT` -> github, pat; `myAPIKey` -> my, api, key."""
    return [w.lower() for part in re.split(r"[^A-Za-z0-9]+", name) for w in _WORDS.findall(part)]


def secret_word(name: str) -> str | None:
    """The secret word that makes `name` a secret (None: not shaped like a secret, or known to be safe)."""
    if name.startswith(SAFE_PREFIXES) or name in SAFE_ENV_NAMES or name in SAFE_FLAGS:
        return None
    words = name_words(name)
    locator = next((w for w in words if w in LOCATOR_WORDS), None)
    store = next((w for w in words if w in STORE_WORDS), None)
    if locator is not None and store is not None:
        return f"{store} {locator}"
    for word in words:
        if word in SECRET_WORDS:
            return word
        glued = next((g for g in GLUED_CONTAINED if g in word), None) or \
            next((g for g in GLUED_SUFFIXES if word.endswith(g)), None)
        if glued is not None:
            return glued
    return None


def is_secret_name(name: str) -> bool:
    """True when an env variable or flag of this name must be treated as carrying a secret."""
    return secret_word(name) is not None


# scheme://user[:password]@host and, without a scheme, user:password@host (a registry reference, a DSN).
_URL_USERINFO = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/\s?#@]+@")
_BARE_USERINFO = re.compile(r"(?:^|[\s=,;])[^/\s:@=,;]+:[^/\s@]+@[^/\s@]+")


# One query or fragment parameter of a URL: `?name=value`, `&name=value`, `#name=value` (value not empty).
_QUERY_PARAM = re.compile(r"(?P<lead>[?&;#](?P<name>[^=&;#?\s]+)=)(?P<value>[^&;#\s]+)")


def _query_secret(name: str) -> bool:
    return is_secret_name(name) or any(w in QUERY_SECRET_WORDS for w in name_words(name))


def _secret_params(text: str) -> list[re.Match[str]]:
    """The query parameters named like a secret, of each whitespace-separated word holding a `?` or `#`."""
    found = []
    for word in re.finditer(r"\S*[?#]\S*", text):
        start = min(i for i in (word.group(0).find("?"), word.group(0).find("#")) if i >= 0) + word.start()
        found += [m for m in _QUERY_PARAM.finditer(text, start, word.end()) if _query_secret(m.group("name"))]
    return found


def has_url_credentials(text: str) -> bool:
    """True when `text` holds a URL with credentials in it (`https://user:pass@host`, `user:pass@registry/x`,
    `https://host/x?token=...`, `?sig=...`)."""
    return bool(_URL_USERINFO.search(text) or _BARE_USERINFO.search(text) or _secret_params(text))


def redact_url_credentials(text: str) -> str:
    """`text` with the credentials of every URL in it replaced by `***` (for a message that must name the URL)."""
    for match in reversed(_secret_params(text)):
        text = text[:match.start("value")] + "***" + text[match.end("value"):]
    text = _URL_USERINFO.sub(lambda m: m.group(0).split("://", 1)[0] + "://***@", text)
    return _BARE_USERINFO.sub(lambda m: (m.group(0)[0] if m.group(0)[0] in " \t=,;" else "") + "***@"
                              + m.group(0).rsplit("@", 1)[1], text)


# Values shaped like a well-known credential, wherever they are written (a token pasted as a path or a flag value).
_CREDENTIAL_SHAPES = (
    ("a Hugging Face token", re.compile(r"\bhf_[A-Za-z0-9]{30,}")),
    ("a GitHub token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{20,})")),
    ("a GitLab token", re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}")),
    ("an API secret key", re.compile(r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}")),
    ("an AWS access key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("a Slack token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    ("a JSON web token", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.")),
    ("a private key", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")),
)


def credential_kind(text: str) -> str | None:
    """What well-known credential `text` holds ('a Hugging Face token'), or None."""
    return next((kind for kind, shape in _CREDENTIAL_SHAPES if shape.search(text)), None)
