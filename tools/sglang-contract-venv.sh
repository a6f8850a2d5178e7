#!/usr/bin/env bash
# Builds .venv-sglang/: the exact SGLang release sglab pins (sglab/sglang/flags.py), from PyPI, for the
# real-parser contract test (tests/sglang_contract/). Reused while its stamp matches the version and this
# script; rebuilt otherwise. Needs no GPU.
#
# Why these packages: `sglang` itself comes without its dependencies (--no-deps: most are GPU kernels,
# none is needed to parse and resolve launch arguments). Resolution (ServerArgs.resolve_once) imports
# sglang.srt.configs, which imports torchvision at module level; PyPI's torchvision only loads beside
# PyPI's torch, so torch is the release SGLang 0.5.23 pins itself (2.14.1, with torchvision 0.29.1). The
# rest is the measured minimal set that imports sglang.srt.server_args and runs its resolution, with the
# versions SGLang's own metadata pins where it pins them.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
DIR=${SGLANG_CONTRACT_VENV:-.venv-sglang}
VERSION=$(.venv/bin/python -c 'from sglab.sglang.flags import SGLANG_VERSION; print(SGLANG_VERSION)')
WANT="sglang==$VERSION $(sha256sum "$0" | cut -c1-16)"
if [ -f "$DIR/.stamp" ] && [ "$(cat "$DIR/.stamp")" = "$WANT" ]; then
  exit 0
fi
echo "building $DIR for sglang==$VERSION (a few minutes, once)" >&2
start=$(date +%s)
rm -rf "$DIR"
"$PYTHON" -m venv "$DIR"
LOG="$DIR/install.log"
pip_install() {  # pip's resolver reports every sglang dependency left out on purpose: keep that in the log
  "$DIR/bin/python" -m pip install -q --disable-pip-version-check "$@" >>"$LOG" 2>&1 || { cat "$LOG" >&2; exit 1; }
}
pip_install torch==2.14.1 torchvision==0.29.1
pip_install --no-deps "sglang==$VERSION"
pip_install "transformers==5.19.0" "tokenizers==0.23.2" "sentencepiece==0.2.1" "compressed-tensors==0.18.0" \
  "apache-tvm-ffi==0.1.11" numpy orjson psutil pybase64 requests packaging pillow starlette msgspec pydantic \
  pyzmq tqdm IPython aiohttp dill gguf
"$DIR/bin/python" -c "import sglang.srt.server_args, sglang.srt.arg_groups.pipeline" 2>/dev/null
echo "$WANT" > "$DIR/.stamp"
echo "built $DIR in $(( $(date +%s) - start )) s" >&2
