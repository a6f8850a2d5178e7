"""The one SGLang release sglab targets, and what an image reference says about its version.

Pinned to SGLang 0.5.23 (PyPI, 2026-10-30), the newest release: it serves Kimi-K2.5 (`models/kimi_k25.py`,
since 0.5.9) with its EAGLE-3 draft (`models/kimi_k25_eagle3.py`, since 0.5.12), and its parser accepts
every launch command the shipped stacks render (tests/sglang_contract/ checks that with the real one).
Release images are the multi-arch manifest `lmsysorg/sglang:v<version>` (CUDA 13 by default; `-cu129`
for CUDA 12), built by SGLang's `release-docker.yml`. A tag can move: in production pin the digest
(`lmsysorg/sglang:v0.5.23@sha256:...`), which every image key accepts.

The chart's appVersion, the simulator's reported version, the flag table and the docs all read or name
this version; tests/sglang_contract/test_version.py checks they agree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SGLANG_VERSION = "0.5.23"
IMAGE_REPOSITORY = "lmsysorg/sglang"
DEFAULT_IMAGE = f"{IMAGE_REPOSITORY}:v{SGLANG_VERSION}"
# The oldest release whose flags sglab checked (every flag and algorithm without `since` is in it); the
# release of each newer flag was read from the PyPI wheels of 0.5.8 to 0.5.23.
OLDEST_KNOWN = "0.5.3"

_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
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
