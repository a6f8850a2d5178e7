"""Environment variables that configure a server process, and how to keep a parent's from leaking in.

NCCL_* and SGLAB_SIM_* change what a server measures. A child server sglab starts (a local simulator,
a test server, a Locust run) must get them only from the arm it runs, never inherited from the shell.
"""

from __future__ import annotations

from collections.abc import Mapping

from sglab.sglang.secret_names import is_secret_name
from sglab.sglang.sim_knobs import SIM_ENV_PREFIX

NCCL_ENV_PREFIX = "NCCL_"
SERVER_ENV_PREFIXES = (NCCL_ENV_PREFIX, SIM_ENV_PREFIX)


def without_server_env(environ: Mapping[str, str], *also: str) -> dict[str, str]:
    """A copy of environ without NCCL_*/SGLAB_SIM_* (and any further prefixes given)."""
    prefixes = SERVER_ENV_PREFIXES + tuple(also)
    return {k: v for k, v in environ.items() if not k.startswith(prefixes)}


def nccl_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The NCCL_* part of an environment, sorted by name."""
    return {k: v for k, v in sorted(environ.items()) if k.startswith(NCCL_ENV_PREFIX)}


# Variables that carry a secret by their name. The Hugging Face token has its own Pulumi secret
# (sglab:hf-token); huggingface_hub reads HF_TOKEN and the older HUGGING_FACE_HUB_TOKEN, and tools
# around it use the other spellings.
HF_TOKEN_ENV = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_TOKEN", "HUGGINGFACE_TOKEN", "HUGGINGFACEHUB_API_TOKEN",
                "HF_API_TOKEN", "HF_HUB_ACCESS_TOKEN")
# Any other variable is a secret by its shape (sglab/sglang/secret_names.py: DB_PASS, WANDB_KEY, GITHUB_PAT, ...).


def is_hf_token_env(name: str) -> bool:
    return name.upper() in HF_TOKEN_ENV


def is_secret_env(name: str) -> bool:
    """True when a variable of this name carries a secret and must never be plain text or printed."""
    return name.upper() in HF_TOKEN_ENV or is_secret_name(name)
