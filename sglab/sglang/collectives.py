"""What SGLang does around NCCL on the tensor-parallel path: its custom all-reduce and the NCCL variables it owns.

From SGLang's source (python/sglang/srt/...), read in the pinned release, 0.5.23 (sglab/sglang/flags.py):
- distributed/device_communicators/custom_all_reduce.py: `CustomAllreduce._MAX_CAR_SIZE = 8192 * 1024`;
  `should_custom_ar` takes an all-reduce below that size when the TP group is on one node, 2 GPUs or fully
  NVLinked, of world size 2, 4, 6 or 8. It is on unless `--disable-custom-all-reduce`; decode all-reduces
  (~14 KB to ~1 MB) then never reach NCCL.
- entrypoints/engine.py `_set_envs_and_config`: `NCCL_CUMEM_ENABLE = int(--enable-symm-mem)` and
  `NCCL_NVLS_ENABLE = int(--enable-nccl-nvls or --enable-symm-mem)`, assigned when the variable is not in
  the env or one of those flags is given (the flag then wins over a pod value); a pod value is kept
  otherwise. So unset, both are 0 (NVLS off) unless a flag turns them on. (Older releases, 0.5.3 among
  them, assigned both unconditionally; in 0.5.23 KV-cache sharding and deepep_v2 can also turn CUMEM on.)

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


def sglang_nccl_env(flags: Mapping[str, str] | set[str] | frozenset[str],
                    pod_env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The values the owned NCCL variables have after SGLang's `_set_envs_and_config`, for canonical launch
    flags and the pod's env (a pod value survives unless a flag that sets the variable is given)."""
    pod_env = pod_env or {}
    on = {flag for flag in SGLANG_OWNED_NCCL_ENV.values() if flag in flags}
    env = {key: "1" if flag in on else "0" for key, flag in SGLANG_OWNED_NCCL_ENV.items()}
    for flag in on:
        for key in ALSO_ENABLES.get(flag, ()):
            env[key] = "1"
    setters = {key: {flag} | {f for f, keys in ALSO_ENABLES.items() if key in keys}
               for key, flag in SGLANG_OWNED_NCCL_ENV.items()}
    for key, value in pod_env.items():
        if key in env and not setters[key] & on:
            env[key] = value
    return dict(sorted(env.items()))
