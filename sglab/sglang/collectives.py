"""What SGLang does around NCCL on the tensor-parallel path: its custom all-reduce and the NCCL variables it owns.

From SGLang's source (python/sglang/srt/...), read for the v0.5 line the shipped stacks run:
- distributed/device_communicators/custom_all_reduce.py: `CustomAllreduce._MAX_CAR_SIZE = 8192 * 1024`;
  `should_custom_ar` takes an all-reduce below that size when the TP group is on one node, 2 GPUs or fully
  NVLinked, of world size 2, 4, 6 or 8. It is on unless `--disable-custom-all-reduce`; decode all-reduces
  (~14 KB to ~1 MB) then never reach NCCL.
- entrypoints/engine.py `_set_envs_and_config`: `NCCL_CUMEM_ENABLE = int(--enable-symm-mem)` and
  `NCCL_NVLS_ENABLE = int(--enable-nccl-nvls or --enable-symm-mem)`. The v0.5 line assigns both
  unconditionally (a pod's value is overwritten); newer releases keep a value from the env unless one of
  those flags is given, which then wins.

sglab's lints (config/lints.py) and the NCCL probe's variants (probe/plan.py) read these facts from here.
"""

from __future__ import annotations

from typing import Mapping

CUSTOM_ALL_REDUCE_MAX_BYTES = 8192 * 1024
CUSTOM_ALL_REDUCE_WORLD_SIZES = (2, 4, 6, 8)
DISABLE_CUSTOM_ALL_REDUCE_FLAG = "--disable-custom-all-reduce"

NVLS_ENV = "NCCL_NVLS_ENABLE"
CUMEM_ENV = "NCCL_CUMEM_ENABLE"
NVLS_FLAG = "--enable-nccl-nvls"
SYMM_MEM_FLAG = "--enable-symm-mem"
# NCCL variable -> the launch flag SGLang sets it from (the one to use instead of the variable).
SGLANG_OWNED_NCCL_ENV = {NVLS_ENV: NVLS_FLAG, CUMEM_ENV: SYMM_MEM_FLAG}
# Flags that turn on more than their own variable.
ALSO_ENABLES = {SYMM_MEM_FLAG: (NVLS_ENV,)}


def sglang_nccl_env(flags: Mapping[str, str] | set[str] | frozenset[str]) -> dict[str, str]:
    """The values SGLang's `_set_envs_and_config` gives the owned NCCL variables, for canonical launch flags."""
    on = {flag for flag in SGLANG_OWNED_NCCL_ENV.values() if flag in flags}
    env = {key: "1" if flag in on else "0" for key, flag in SGLANG_OWNED_NCCL_ENV.items()}
    for flag in on:
        for key in ALSO_ENABLES.get(flag, ()):
            env[key] = "1"
    return dict(sorted(env.items()))
