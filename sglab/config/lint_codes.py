"""The lint codes a stack may accept (`sglab:accept-lints`), declared apart from the lints themselves
(sglab/config/lints.py) because the stack model names them and the lints read the stack's arms."""

from __future__ import annotations

from typing import Literal

LintCode = Literal["custom-all-reduce-shadows-nccl", "sglang-overwrites-nccl-env", "nccl-proto-ll128",
                   "multi-node-without-rdma"]
