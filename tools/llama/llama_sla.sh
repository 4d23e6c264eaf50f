#!/usr/bin/env bash
# SVC-SLA against a real OpenAI-compatible server: llama-cpp-python's server, built for the CPU, serving a tiny
# random-weight GGUF model written locally with the `gguf` package (nothing is downloaded but the two packages).
#
# Usage: tools/llama/llama_sla.sh {build|model [--force]|start|stop|status|sla|all}
#   build   a virtual environment with llama-cpp-python[server] compiled for the CPU (about 20 minutes on 2 cores)
#   model   write the tiny model (tools/llama/make_tiny_gguf.py)
#   start   serve it on 127.0.0.1:$SITS_LLAMA_PORT (waits until GET /v1/models answers)
#   stop    stop the server this script started
#   sla     run SVC-SLA (pytest --sits-level=full -k tenant_sla) against the running server
#   all     build, model, start, sla, stop
# Every step is idempotent: a venv that already holds the right versions is not rebuilt, a model is not rewritten.
#
# Environment (defaults in brackets):
#   SITS_LLAMA_DIR      state folder: venv, model, pid and log files [${XDG_CACHE_HOME:-~/.cache}/pytest-sits/llama]
#   SITS_LLAMA_VENV     the server's virtual environment [$SITS_LLAMA_DIR/venv]
#   SITS_LLAMA_PYTHON   the interpreter that creates it [python3]
#   SITS_LLAMA_MODEL    the GGUF file [$SITS_LLAMA_DIR/tiny-llama.gguf]
#   SITS_LLAMA_PORT     [8088]          SITS_LLAMA_THREADS  [1]
#   SITS_PYTHON         the interpreter with pytest-sits installed, for `sla` [python3]
#   SITS_SLA_QPS [15]  SITS_SLA_DURATION_S [60]  SITS_SLA_P99_MS [250]  SITS_SLA_MIN_RPS [10]
#   SITS_SLA_TTFT_P99_MS [null]  SITS_SLA_TPOT_P99_MS [null]  SITS_SLA_TIMEOUT_S [10]  SITS_SLA_API [completions]
#   SITS_SLA_OUTPUT_TOKENS ["1, 4"]  SITS_SLA_REPORT_DIR [./sits-report-llama]
# The server runs with --interrupt_requests False: llama-cpp-python's default ends a stream in flight as soon as
# another request arrives, which would make every concurrent stream a short one.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
STATE="${SITS_LLAMA_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pytest-sits/llama}"
VENV="${SITS_LLAMA_VENV:-$STATE/venv}"
PY_BASE="${SITS_LLAMA_PYTHON:-python3}"
MODEL="${SITS_LLAMA_MODEL:-$STATE/tiny-llama.gguf}"
PORT="${SITS_LLAMA_PORT:-8088}"
THREADS="${SITS_LLAMA_THREADS:-1}"
PIDFILE="$STATE/server-$PORT.pid"
LOGFILE="$STATE/server-$PORT.log"
LCPP_VERSION=0.3.36
GGUF_VERSION=0.19.0

log() { echo "[llama_sla] $*" >&2; }
mkdir -p "$STATE"

venv_ok() {
  [ -x "$VENV/bin/python" ] && "$VENV/bin/python" - <<PY >/dev/null 2>&1
import importlib.metadata as m, llama_cpp, gguf, numpy, uvicorn, fastapi, sse_starlette
assert m.version("llama-cpp-python") == "$LCPP_VERSION"
assert m.version("gguf") == "$GGUF_VERSION"
PY
}

cmd_build() {
  if venv_ok; then log "$VENV already holds llama-cpp-python $LCPP_VERSION and gguf $GGUF_VERSION"; return 0; fi
  [ -x "$VENV/bin/python" ] || { log "creating $VENV"; "$PY_BASE" -m venv "$VENV"; }
  "$VENV/bin/python" -m pip install -q --upgrade pip setuptools wheel
  "$VENV/bin/python" -m pip install -q numpy "gguf==$GGUF_VERSION"
  log "building llama-cpp-python[server]==$LCPP_VERSION for the CPU (compiles llama.cpp: ~20 min on 2 cores)"
  local t0=$SECONDS
  CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF -DGGML_BLAS=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF}" \
  FORCE_CMAKE=1 CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
    "$VENV/bin/python" -m pip install --no-cache-dir --no-binary llama-cpp-python \
      "llama-cpp-python[server]==$LCPP_VERSION"
  log "built in $((SECONDS - t0)) s"
  venv_ok || { log "the venv does not import llama_cpp after the build; see the pip output above"; exit 1; }
}

cmd_model() {
  [ -x "$VENV/bin/python" ] || { log "no venv at $VENV; run '$0 build' first"; exit 1; }
  if [ -s "$MODEL" ] && [ "${1:-}" != "--force" ]; then log "model exists: $MODEL ('model --force' rewrites it)"; return 0; fi
  "$VENV/bin/python" "$HERE/make_tiny_gguf.py" "$MODEL"
}

# A process that runs, is not a zombie (kill -0 succeeds on one that died but was not reaped) and is the server
# (a pid reused by another program after a reboot is not).
alive() {
  local pid="$1" stat
  kill -0 "$pid" 2>/dev/null || return 1
  stat="$(ps -o stat= -p "$pid" 2>/dev/null)" || return 1
  case "$stat" in Z*|"") return 1 ;; esac
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "llama_cpp.server" || return 1
}

server_pid() {
  [ -s "$PIDFILE" ] || return 1
  local pid; pid="$(cat "$PIDFILE")"
  alive "$pid" || return 1
  echo "$pid"
}

answers() { "$PY_BASE" - "$1" <<'PY' >/dev/null 2>&1
import sys, urllib.request
urllib.request.urlopen(sys.argv[1] + "/v1/models", timeout=2).read()
PY
}

cmd_start() {
  local url="http://127.0.0.1:$PORT"
  if pid="$(server_pid)"; then log "already running (pid $pid) at $url"; echo "$url"; return 0; fi
  venv_ok || { log "the venv is not ready; run '$0 build'"; exit 1; }
  [ -s "$MODEL" ] || cmd_model
  log "starting the server at $url (log: $LOGFILE)"
  nohup "$VENV/bin/python" -m llama_cpp.server --model "$MODEL" --model_alias tiny-llama \
      --host 127.0.0.1 --port "$PORT" --n_ctx 2048 --n_threads "$THREADS" --n_threads_batch "$THREADS" \
      --n_batch 512 --n_gpu_layers 0 --interrupt_requests False >"$LOGFILE" 2>&1 </dev/null &
  echo $! >"$PIDFILE"
  for _ in $(seq 1 120); do
    if answers "$url"; then echo "$url"; return 0; fi
    if ! alive "$(cat "$PIDFILE")"; then
      log "the server died; the end of its log:"; tail -20 "$LOGFILE" >&2; rm -f "$PIDFILE"; exit 1
    fi
    sleep 0.5
  done
  log "no answer at $url/v1/models within 60 s; the end of the log:"; tail -20 "$LOGFILE" >&2
  cmd_stop; exit 1
}

cmd_stop() {
  local pid
  if ! pid="$(server_pid)"; then log "not running"; rm -f "$PIDFILE"; return 0; fi
  kill "$pid"
  for _ in $(seq 1 40); do alive "$pid" || break; sleep 0.25; done
  alive "$pid" && { log "SIGTERM ignored; SIGKILL"; kill -9 "$pid" || true; }
  rm -f "$PIDFILE"; log "stopped (pid $pid)"
}

cmd_status() { if pid="$(server_pid)"; then echo "running (pid $pid) at http://127.0.0.1:$PORT"; else echo "stopped"; fi; }

cmd_sla() {
  local url="http://127.0.0.1:$PORT" py="${SITS_PYTHON:-python3}"
  answers "$url" || { log "nothing answers at $url; run '$0 start' first"; exit 1; }
  local out="${SITS_SLA_REPORT_DIR:-$PWD/sits-report-llama}" profile
  mkdir -p "$out"
  profile="$out/llama-sla.yaml"
  cat >"$profile" <<YAML
# Written by tools/llama/llama_sla.sh: SVC-SLA against llama-cpp-python's server on this host.
name: llama-sla
extends: host
thresholds:
  SVC-SLA:
    target_qps: ${SITS_SLA_QPS:-15}
    duration_s: ${SITS_SLA_DURATION_S:-60}
    timeout_s: ${SITS_SLA_TIMEOUT_S:-10}
    api: ${SITS_SLA_API:-completions}
    tenants:
      - {name: chat, share: 1.0, p99_ms: ${SITS_SLA_P99_MS:-250}, min_rps: ${SITS_SLA_MIN_RPS:-10},
         ttft_p99_ms: ${SITS_SLA_TTFT_P99_MS:-null}, tpot_p99_ms: ${SITS_SLA_TPOT_P99_MS:-null}}
    workload: {samples: 1000, prompt_tokens: [16, 128], output_tokens: [${SITS_SLA_OUTPUT_TOKENS:-1, 4}]}
YAML
  log "SVC-SLA against $url: ${SITS_SLA_QPS:-15} req/s for ${SITS_SLA_DURATION_S:-60} s; report in $out"
  "$py" -m pytest --pyargs pytest_sits.conformance -p no:cacheprovider "--sits-profile=$profile" \
      --sits-level=full -k tenant_sla "--sits-endpoint=$url" "--sits-report-dir=$out" -rA
}

case "${1:-}" in
  build) cmd_build ;;
  model) shift; cmd_model "$@" ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  sla) cmd_sla ;;
  all) cmd_build; cmd_model; cmd_start; rc=0; cmd_sla || rc=$?; cmd_stop; exit "$rc" ;;
  *) sed -n '2,25p' "$0" >&2; exit 2 ;;
esac
