"""The one SGLang release sglab targets, what an image reference says about its version, and the launch_server
flags sglab knows, as that release (SGLang 0.5.23) declares them, with how its parser reads argv.

Pinned to SGLang 0.5.23 (PyPI, 2026-10-30), the newest release: it serves Kimi-K2.5 (`models/kimi_k25.py`,
since 0.5.9) with its EAGLE-3 draft (`models/kimi_k25_eagle3.py`, since 0.5.12), and its parser accepts
every launch command the shipped stacks render (tests/sglang_contract/ checks that with the real one).
Release images are the multi-arch manifest `lmsysorg/sglang:v<version>` (CUDA 13 by default; `-cu129`
for CUDA 12), built by SGLang's `release-docker.yml`. A tag can move: in production pin the digest
(`lmsysorg/sglang:v0.5.23@sha256:...`), which every image key accepts. The chart's appVersion, the simulator's
reported version, the flag table and the docs all read or name this version; tests/sglang_contract/test_version.py
checks they agree.

tests/sglang_contract/ checks every flag entry (name, aliases, switch or value, list-valued, choices, default)
against that release's real parser. A flag newer than sglab's oldest known release (OLDEST_KNOWN) carries
`since`, the first release that has it, read from the PyPI wheels; `sglab validate` refuses it on an image of an
older release.

`python -m sglang.launch_server` builds a plain `argparse.ArgumentParser()` (allow_abbrev on), so
on a real server:
- an alias is the same flag (`--tensor-parallel-size` == `--tp-size`);
- a unique prefix is the same flag (`--tp 8` and `--max-running-req 64` are `--tp-size 8` and
  `--max-running-requests 64`); a prefix matching two flags is an error ("ambiguous option": 0.5.23 has
  `--cuda-graph-bs-decode` and `--cuda-graph-bs-prefill`, so `--cuda-graph-bs` is refused);
- a list-valued flag takes every value up to the next `--flag` (`--cuda-graph-bs-decode 1 2 4 8`);
- a repeated flag keeps its last value.
`decode` reads argv that way, so confounds, the managed-flag check and the live check compare what
the server will really run. Flags not in the table are kept as written with all their values.
Adding a flag is one `Flag(...)` line in FLAGS.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sglab.sglang.rules import ALGORITHM_ALIASES, NGRAM_MATCH_TYPES, SPECULATIVE_ALGORITHMS


SGLANG_VERSION = "0.5.23"
IMAGE_REPOSITORY = "lmsysorg/sglang"
DEFAULT_IMAGE = f"{IMAGE_REPOSITORY}:v{SGLANG_VERSION}"
# The oldest release whose flags sglab checked (every flag and algorithm without `since` is in it); the
# release of each newer flag was read from the PyPI wheels of 0.5.8 to 0.5.23.
OLDEST_KNOWN = "0.5.3"

# The CUDA major of the pinned release's plain tag (the multi-arch manifest above), and the same release built for
# CUDA 12 (NVIDIA driver R525 or newer, where CUDA 13 needs R580: sglab/deploy/capacity.py)
DEFAULT_IMAGE_CUDA_MAJOR = 13
CUDA12_IMAGE = f"{DEFAULT_IMAGE}-cu129"

_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
# A CUDA build in a tag: -cu130 (13.0), -cu129 (12.9), -cu13 ...: v0.5.8-cu130-amd64-runtime, v0.5.3.post1-cu126
_CUDA_BUILD = re.compile(r"(?:^|[-_.])cu(\d{2,3})(?=$|[-_.])")
# lmsysorg/sglang tags: v0.5.23, v0.5.3-cu129, v0.5.3.post1-cu129-amd64, v0.5.23-cu130 ...
_RELEASE_TAG = re.compile(r"^v(\d+)\.(\d+)\.(\d+)(?:\.post(\d+))?(?:-[A-Za-z0-9][A-Za-z0-9_.-]*)?$")
_REFERENCE = re.compile(r"^[a-z0-9]+(?:[._-][a-z0-9]+|:[0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*$")


@dataclass(frozen=True)
class ImageRef:
    """An image reference split the way a container runtime reads it."""

    repository: str
    tag: str | None
    digest: str | None

    @property
    def version(self) -> str | None:
        """The SGLang release a `lmsysorg/sglang` tag names ('0.5.3', '0.5.3.post1'), else None."""
        if self.tag is None or self.repository.split("/")[-2:] != IMAGE_REPOSITORY.split("/"):
            return None
        match = _RELEASE_TAG.match(self.tag)
        if match is None:
            return None
        major, minor, patch, post = match.groups()
        return f"{major}.{minor}.{patch}" + (f".post{post}" if post else "")

    @property
    def cuda_major(self) -> int | None:
        """The CUDA major the image is built for, where the reference says: a `-cuNNN` build in the tag (any
        repository), or the pinned release's plain tag; None otherwise (another tag, a digest alone)."""
        if self.tag is None:
            return None
        build = _CUDA_BUILD.search(self.tag)
        if build is not None:
            digits = build.group(1)
            return int(digits[:2] if len(digits) == 3 else digits)
        pinned = self.version == SGLANG_VERSION and self.tag == f"v{SGLANG_VERSION}"
        return DEFAULT_IMAGE_CUDA_MAJOR if pinned else None


def parse_image(image: str) -> ImageRef:
    """`repo[:tag][@sha256:<64 hex>]` -> ImageRef; ValueError with the reason for anything else."""
    text = image.strip()
    if not text or text != image or any(c.isspace() for c in text):
        raise ValueError(f"{image!r} is not an image reference (empty or contains whitespace)")
    name, at, digest = text.partition("@")
    if at and not _DIGEST.match(digest):
        raise ValueError(f"{image!r}: the digest must be sha256: followed by 64 lowercase hex digits")
    repository, tag = name, None
    slash = name.rfind("/")
    colon = name.rfind(":")
    if colon > slash:
        repository, tag = name[:colon], name[colon + 1:]
        if not re.match(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$", tag):
            raise ValueError(f"{image!r}: tag {tag!r} is not a valid image tag")
    if not _REFERENCE.match(repository.lower()) or repository != repository.lower():
        raise ValueError(f"{image!r}: {repository!r} is not a valid repository name (lowercase, '/'-separated)")
    return ImageRef(repository, tag, digest or None)


def version_key(version: str) -> tuple[int, int, int, int]:
    """'0.5.3.post1' -> (0, 5, 3, 1), comparable."""
    match = re.match(r"^(\d+)\.(\d+)\.(\d+)(?:\.post(\d+))?$", version)
    if match is None:
        raise ValueError(f"{version!r} is not a SGLang release version")
    major, minor, patch, post = match.groups()
    return int(major), int(minor), int(patch), int(post or 0)


def at_least(version: str, since: str) -> bool:
    return version_key(version) >= version_key(since)


class FlagError(ValueError):
    """An argument list SGLang's parser would refuse."""


@dataclass(frozen=True)
class Flag:
    """One launch_server flag. type None = a switch (store_true); nargs "+" = list-valued."""

    name: str
    type: Any = str
    default: Any = None
    aliases: tuple[str, ...] = ()
    nargs: str | None = None
    choices: tuple[str, ...] | None = None
    # The stack key sglab renders this flag from; such a flag must not come through extra-args.
    managed_by: str | None = None
    secret: bool = False
    since: str | None = None  # first SGLang release with this flag (None: every release sglab knows)

    @property
    def dest(self) -> str:
        """The ServerArgs field (and /get_server_info key) of this flag."""
        return self.name[2:].replace("-", "_")

    @property
    def options(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)

    @property
    def is_switch(self) -> bool:
        return self.type is None

    @property
    def is_list(self) -> bool:
        return self.nargs in ("+", "*")


_SPEC = "candidate.speculative"

FLAGS: tuple[Flag, ...] = (
    Flag("--model-path", aliases=("--model",), managed_by="model.path"),
    Flag("--tokenizer-path"),
    Flag("--tokenizer-mode", default="auto"),
    Flag("--load-format", default="auto"),
    Flag("--trust-remote-code", None, False, managed_by="server.trust-remote-code"),
    Flag("--dtype", default="auto"),
    Flag("--kv-cache-dtype", default="auto"),
    Flag("--quantization"),
    Flag("--served-model-name", managed_by="model.served-model-name"),
    Flag("--chat-template"),
    Flag("--revision"),
    Flag("--context-length", int, managed_by="server.context-length"),
    Flag("--device"),  # auto-detected (cuda on a GPU node)
    Flag("--host", default="127.0.0.1", managed_by="(sglab sets it per target)"),
    Flag("--port", int, 30000, managed_by="server.port"),
    Flag("--mem-fraction-static", float, managed_by="server.mem-fraction-static"),
    Flag("--max-running-requests", int, managed_by="server.max-running-requests"),
    Flag("--max-total-tokens", int),
    Flag("--chunked-prefill-size", int),
    Flag("--max-prefill-tokens", int, 16384),
    Flag("--schedule-policy", default="fcfs"),
    Flag("--schedule-conservativeness", float, 1.0),
    Flag("--cuda-graph-max-bs-decode", int),
    Flag("--cuda-graph-max-bs-prefill", int),
    Flag("--cuda-graph-bs-decode", int, nargs="+"),
    Flag("--cuda-graph-bs-prefill", int, nargs="+"),
    Flag("--disable-cuda-graph", None, False),
    Flag("--disable-radix-cache", None, False),
    Flag("--tp-size", int, 1, aliases=("--tensor-parallel-size",), managed_by="server.tp-size"),
    Flag("--dp-size", int, 1, aliases=("--data-parallel-size",)),
    Flag("--pp-size", int, 1, aliases=("--pipeline-parallel-size",)),
    Flag("--ep-size", int, 1, aliases=("--ep", "--expert-parallel-size")),
    Flag("--stream-interval", int, 1),
    Flag("--random-seed", int),
    Flag("--log-level", default="info"),
    Flag("--api-key", secret=True),
    Flag("--admin-api-key", secret=True),
    Flag("--ssl-keyfile-password", secret=True),
    Flag("--ssl-keyfile"),  # a path, not the key: listed so it is not read as an abbreviation of the password
    Flag("--ssl-certfile"),
    Flag("--enable-metrics", None, False, managed_by="server.enable-metrics"),
    Flag("--decode-log-interval", int, 40),
    Flag("--enable-cache-report", None, False),
    Flag("--num-continuous-decode-steps", int, 1, managed_by="server.num-continuous-decode-steps"),
    Flag("--disable-custom-all-reduce", None, False, managed_by="server.disable-custom-all-reduce"),
    Flag("--disable-overlap-schedule", None, False),
    Flag("--skip-server-warmup", None, False),
    Flag("--attention-backend"),
    Flag("--page-size", int),
    Flag("--nnodes", int, 1, managed_by="placement.nodes"),
    Flag("--node-rank", int, 0, managed_by="placement.nodes"),
    Flag("--dist-init-addr", aliases=("--nccl-init-addr",), managed_by="placement.dist-init-port"),
    Flag("--watchdog-timeout", float, 300.0),
    Flag("--enable-dp-attention", None, False),
    Flag("--speculative-algorithm", choices=SPECULATIVE_ALGORITHMS, managed_by=f"{_SPEC}.algorithm"),
    Flag("--speculative-draft-model-path", aliases=("--speculative-draft-model",),
         managed_by=f"{_SPEC}.draft-model-path"),
    Flag("--speculative-num-steps", int, managed_by=f"{_SPEC}.num-steps"),
    Flag("--speculative-eagle-topk", int, managed_by=f"{_SPEC}.eagle-topk"),
    Flag("--speculative-num-draft-tokens", int, managed_by=f"{_SPEC}.num-draft-tokens"),
    Flag("--speculative-dflash-block-size", int, managed_by=f"{_SPEC}.dflash-block-size", since="0.5.11"),
    Flag("--speculative-dspark-block-size", int, managed_by=f"{_SPEC}.dspark-block-size", since="0.5.16"),
    Flag("--uno-lora-path", managed_by=f"{_SPEC}.uno-lora-path", since="0.5.20"),
    Flag("--speculative-ngram-min-bfs-breadth", int, 1, managed_by=f"{_SPEC}.ngram.min-bfs-breadth"),
    Flag("--speculative-ngram-max-bfs-breadth", int, 10, managed_by=f"{_SPEC}.ngram.max-bfs-breadth"),
    Flag("--speculative-ngram-match-type", default="BFS", choices=NGRAM_MATCH_TYPES,
         managed_by=f"{_SPEC}.ngram.match-type"),
    Flag("--speculative-ngram-max-trie-depth", int, 18, managed_by=f"{_SPEC}.ngram.max-trie-depth", since="0.5.10"),
    Flag("--speculative-ngram-capacity", int, 10_000_000, managed_by=f"{_SPEC}.ngram.capacity"),
    Flag("--speculative-ngram-external-corpus-path", managed_by=f"{_SPEC}.ngram.external-corpus-path",
         since="0.5.11"),
    Flag("--speculative-ngram-external-sam-budget", int, 0, managed_by=f"{_SPEC}.ngram.external-sam-budget",
         since="0.5.11"),
    Flag("--speculative-accept-threshold-single", float, 1.0, managed_by=_SPEC),
    Flag("--speculative-accept-threshold-acc", float, 1.0, managed_by=_SPEC),
    Flag("--speculative-token-map", managed_by=_SPEC),
    Flag("--speculative-attention-mode", default="prefill", choices=("prefill", "decode"), managed_by=_SPEC),
    # SGLang #21599: a tier controller, not a shape; not managed, so a sweep passes it through extra-args.
    Flag("--speculative-adaptive", None, False, since="0.5.11"),
    Flag("--speculative-adaptive-config", since="0.5.11"),  # a path to a JSON object (SGLang reads it at start)
)

FlagValue = bool | str | tuple[str, ...]


def _options() -> dict[str, Flag]:
    """Every option string (names and aliases) -> its flag, read from FLAGS at call time."""
    return {option: flag for flag in FLAGS for option in flag.options}


def flag(name: str) -> Flag:
    """The table entry of a canonical flag name (KeyError if sglab does not know it)."""
    return next(f for f in FLAGS if f.name == name)


def resolve(option: str) -> Flag | None:
    """The flag an option string means to SGLang's parser: exact name or alias, else a unique prefix."""
    table = _options()
    if option in table:
        return table[option]
    if not option.startswith("--") or len(option) <= 2:
        return None
    matches = {opt: f for opt, f in table.items() if opt.startswith(option)}
    if len({f.name for f in matches.values()}) > 1:
        raise FlagError(f"ambiguous option: {option} could match {', '.join(sorted(matches))}")
    return next(iter(matches.values()), None)


def _is_option(token: str) -> bool:
    return token.startswith("--") and token != "--"


POSITIONAL = "(positional)"  # lenient decode: values before the first --flag


def _loose(values: list[str]) -> FlagValue:
    return True if not values else values[0] if len(values) == 1 else tuple(values)


def _shape(found: Flag | None, option: str, values: list[str], strict: bool) -> FlagValue:
    if found is None or not strict:
        if found is not None and found.is_list and values:
            return tuple(values)
        return _loose(values)
    if found.is_switch:
        if values:
            raise FlagError(f"{option} is a switch and takes no value, got {' '.join(values)!r}")
        return True
    if not values:
        raise FlagError(f"{option} expects {'at least one value' if found.is_list else 'a value'}")
    if found.is_list:
        return tuple(values)
    if len(values) > 1:
        raise FlagError(f"{option} takes one value, got {len(values)}: {' '.join(values)}")
    if found.choices and values[0] not in found.choices:
        raise FlagError(f"{option} {values[0]!r} is not one of {', '.join(found.choices)}")
    return values[0]


def decode(argv: Sequence[str], *, strict: bool = False) -> dict[str, FlagValue]:
    """argv -> {canonical flag: value} as SGLang's parser reads it (True for a switch, a tuple for a list).

    strict: also refuse what the parser would refuse (a stray value, a missing or extra value of a known
    flag); lenient decoding keeps such values as written, so comparing two argument lists never fails.
    An ambiguous abbreviation is an error either way: nobody can say which flag it means.
    """
    out: dict[str, FlagValue] = {}
    i = 0
    while i < len(argv) and not _is_option(argv[i]):
        i += 1
    if i:
        if strict:
            raise FlagError(f"unexpected argument {argv[0]!r}: every value must follow its --flag")
        out[POSITIONAL] = _loose(list(argv[:i]))
    while i < len(argv):
        option, eq, inline = argv[i].partition("=")
        found = resolve(option)
        values = [inline] if eq else []
        i += 1
        if not eq:
            while i < len(argv) and not _is_option(argv[i]):
                values.append(argv[i])
                i += 1
        name = found.name if found is not None else option
        out.pop(name, None)  # the last occurrence wins, at its own position
        out[name] = _shape(found, option, values, strict)
    return out


def spelled_as(option: str) -> tuple[Flag, str] | None:
    """(flag, how) when an option string reaches a known flag: how is 'name', 'alias' or 'abbreviation'."""
    found = resolve(option)
    if found is None:
        return None
    how = "name" if option == found.name else "alias" if option in found.aliases else "abbreviation"
    return found, how


def managed_conflict(argv: Sequence[str]) -> str | None:
    """Why argv may not be passed through as extra-args (a managed flag by any spelling), or None.

    The message is 'problem; fix' and names the stack key to use instead.
    """
    for token in argv:
        if not _is_option(token):
            continue
        option = token.partition("=")[0]
        found = spelled_as(option)
        if found is None or found[0].managed_by is None:
            continue
        managed, how = found
        where = (f"set {managed.managed_by} in the stack instead" if managed.managed_by.startswith(("server", "model",
                 "placement", "candidate")) else "remove it; " + managed.managed_by.strip("()"))
        if how == "name":
            return f"{option} is managed by sglab; {where} (extra-args must not set it)"
        return (f"{option} is an {how} of {managed.name} to SGLang's parser, and {managed.name} is managed by sglab; "
                f"{where} (extra-args must not set it by any spelling)")
    return None


def secret_conflict(argv: Sequence[str]) -> str | None:
    """Why argv would put a secret in plain text (a secret-bearing flag by any spelling), or None.

    The message is 'problem; fix' and never contains the value.
    """
    for token in argv:
        if not _is_option(token):
            continue
        option = token.partition("=")[0]
        found = spelled_as(option)
        if found is not None and found[0].secret:
            spelled = "" if found[1] == "name" else f" (SGLang reads it as {found[0].name})"
            return (f"{option}{spelled} carries a secret, which would be printed in the launch command and stored "
                    "in plain text in the Deployment and the stack ConfigMap; remove it from extra-args: secrets "
                    "reach the servers only as Pulumi secrets (the HF token: pulumi config set --secret "
                    "sglab:hf-token <token>)")
    return None


def encode_flag(name: str, value: Any) -> list[str]:
    """One flag as argv: nothing for None/False, the bare name for True, else the name and its value(s)."""
    if value is None or value is False:
        return []
    if value is True:
        return [name]
    if isinstance(value, (list, tuple)):
        return [name, *(_text(v) for v in value)]
    return [name, _text(value)]


def encode(pairs: Iterable[tuple[str, Any]] | Mapping[str, Any]) -> list[str]:
    """(flag, value) pairs -> argv, in the given order."""
    items = pairs.items() if isinstance(pairs, Mapping) else pairs
    return [token for name, value in items for token in encode_flag(name, value)]


def _text(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def flag_text(value: FlagValue) -> str:
    """A decoded value as one string: 'true' for a switch, a list joined by spaces."""
    if value is True:
        return "true"
    if isinstance(value, tuple):
        return " ".join(value)
    return str(value)


def flag_key(option: str) -> str:
    """The /get_server_info key of an option string (its ServerArgs field)."""
    try:
        found = resolve(option)
    except FlagError:
        found = None
    return found.dest if found is not None else option.lstrip("-").replace("-", "_")


def norm_value(value: Any) -> str:
    """A comparable form of a flag value, declared (argv text) or live (server JSON): 8 == '8' == 8.0."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return " ".join(norm_value(v) for v in value)
    text = str(value).strip()
    if text.lower() in ("true", "false", "none", "null"):
        return {"null": "none"}.get(text.lower(), text.lower())
    try:
        number = float(text)
    except ValueError:
        return ALGORITHM_ALIASES.get(text, text)
    if number != number or number in (float("inf"), float("-inf")):
        return text
    return repr(int(number)) if number == int(number) else repr(number)
