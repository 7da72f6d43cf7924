#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The checks that need a GPU. For a host with one NVIDIA GPU, CUDA (+ NCCL) and PyTorch installed
# with pip, and no package registry: builds only the agent against the torch package's own LibTorch
# (headers and CMake config under the torch package directory), with every other dependency
# optional or carried in third_party/. Then evaluates the embedded model on the CPU, on cuda, and on
# cuda with the nccl backend (world size 1, a real one-member NCCL communicator), and prints one
# summary table. Exit status 0 only when every check passed. Budget: well under 8 minutes.
#
#   scripts/gpu-check.sh                    PYTHON=/path/to/python to pick the interpreter
#   CPPL_GPU_CHECK_CPU_ONLY=1 scripts/gpu-check.sh
#       self-test on a machine without a GPU: the same LibTorch-only build (pkg-config and the
#       system nlohmann_json hidden), CPU checks only, GPU rows reported as skipped.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
CPU_ONLY="${CPPL_GPU_CHECK_CPU_ONLY:-0}"
BUILD="${CPPL_GPU_BUILD_DIR:-$ROOT/build/gpu}"
OUT="$BUILD/gpu-check"
START=$(date +%s)
declare -a ROWS=()
FAILED=0
row() { ROWS+=("$(printf '%-34s %-6s %s' "$1" "$2" "$3")"); [[ "$2" == FAIL ]] && FAILED=1; return 0; }
finish() {
  echo
  echo "== gpu-check summary ($(( $(date +%s) - START )) s) =="
  printf '%-34s %-6s %s\n' "check" "result" "detail"
  printf '%s\n' "${ROWS[@]}"
  exit "$FAILED"
}

# 1. The torch package: LibTorch's CMake config, CUDA, the GPU.
if ! TORCH_INFO=$("$PY" - <<'PY' 2>&1
import torch, os
print(torch.utils.cmake_prefix_path)
print(torch.__version__)
print(int(torch.cuda.is_available()))
print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else "-")
PY
); then
  row "python torch" FAIL "$PY cannot import torch: ${TORCH_INFO##*$'\n'}"
  finish
fi
TORCH_PREFIX=$(sed -n 1p <<<"$TORCH_INFO")
TORCH_VERSION=$(sed -n 2p <<<"$TORCH_INFO")
HAS_CUDA=$(sed -n 3p <<<"$TORCH_INFO")
GPU_NAME=$(sed -n 4p <<<"$TORCH_INFO")
row "torch package" ok "$TORCH_VERSION at $TORCH_PREFIX"
if [[ "$CPU_ONLY" != 1 && "$HAS_CUDA" != 1 ]]; then
  row "CUDA device" FAIL "torch.cuda.is_available() is False (no GPU, or a CPU-only torch); CPPL_GPU_CHECK_CPU_ONLY=1 for a self-test"
  finish
fi
[[ "$HAS_CUDA" == 1 ]] && row "CUDA device" ok "$GPU_NAME"

# 2. nccl.h: the CUDA toolkit's, else the one pip's nvidia-nccl package ships.
NCCL_ARGS=(-DCLUSTERPPL_WITH_NCCL=OFF)
if [[ "$CPU_ONLY" != 1 ]]; then
  NCCL_INC=""
  for d in /usr/local/cuda/include /usr/include \
           "$("$PY" -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "include"))' 2>/dev/null)"; do
    [[ -n "$d" && -f "$d/nccl.h" ]] && { NCCL_INC="$d"; break; }
  done
  if [[ -z "$NCCL_INC" ]]; then
    row "nccl.h" FAIL "not in /usr/local/cuda/include, /usr/include or the nvidia-nccl package"
  else
    row "nccl.h" ok "$NCCL_INC"
    NCCL_ARGS=(-DCLUSTERPPL_WITH_NCCL=ON -DNCCL_INCLUDE_DIR="$NCCL_INC")
  fi
fi

# 3. Build the agent only: no Qt, no tests, no package-registry dependencies.
GEN=(); command -v ninja >/dev/null && GEN=(-G Ninja)
mkdir -p "$BUILD"
if ! cmake -S "$ROOT" -B "$BUILD" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" \
      -DCLUSTERPPL_BUILD_GUI=OFF -DBUILD_TESTING=OFF -DCLUSTERPPL_BUILD_BENCH=OFF -DCLUSTERPPL_WITH_SENTENCEPIECE=OFF \
      -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON -DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=ON \
      "${NCCL_ARGS[@]}" >"$BUILD/configure.log" 2>&1; then
  row "configure" FAIL "see $BUILD/configure.log: $(grep -m1 -A2 'CMake Error' "$BUILD/configure.log" | tr '\n' ' ')"
  finish
fi
row "configure" ok "$(grep -E 'NCCL|Gloo' "$BUILD/configure.log" | sed 's/^ *//' | tr '\n' ' ' | cut -c1-90)"
if ! cmake --build "$BUILD" --target clusterppl-agent -j "$(nproc)" >"$BUILD/build.log" 2>&1; then
  row "build agent" FAIL "see $BUILD/build.log: $(grep -m1 -E 'error' "$BUILD/build.log" | cut -c1-150)"
  finish
fi
row "build agent" ok "$(( $(date +%s) - START )) s so far"
AGENT="$BUILD/agent/clusterppl-agent"

# 4. Evaluate the embedded model three ways.
mkdir -p "$OUT"
EVAL=(--model "$ROOT/resources/models/shakespeare-byte-llama" --text "$ROOT/resources/data/tinyshakespeare-heldout.txt"
      --tokenizer bytes --protocol llama.cpp --context 256 --batch 8 --quiet)
field() { sed -n "s/^  \"$2\": \"\\{0,1\\}\\([^\",]*\\)\"\\{0,1\\},\\{0,1\\}$/\\1/p" "$1" | head -1; }
if "$AGENT" eval "${EVAL[@]}" --device cpu --threads 2 --json "$OUT/cpu.json" >"$OUT/cpu.log" 2>&1; then
  row "eval cpu" ok "ppl $(field "$OUT/cpu.json" ppl), $(field "$OUT/cpu.json" tokens_per_second) tok/s"
else
  row "eval cpu" FAIL "$(tail -1 "$OUT/cpu.log")"
fi
if [[ "$CPU_ONLY" == 1 ]]; then
  row "eval cuda" skip "CPPL_GPU_CHECK_CPU_ONLY=1"
  row "eval cuda + nccl (world size 1)" skip "CPPL_GPU_CHECK_CPU_ONLY=1"
  # The self-test still exercises the launcher and a one-member communicator (gloo).
  if "$AGENT" run --standalone --nproc-per-node 1 -- "${EVAL[@]}" --device cpu --threads 2 --backend gloo --sync-every-tokens 8192 \
       --timeout 60 --json "$OUT/gloo.json" >"$OUT/gloo.log" 2>&1 && [[ "$(field "$OUT/gloo.json" nll_sum_exact)" == "$(field "$OUT/cpu.json" nll_sum_exact)" ]]; then
    row "run --standalone, gloo, 1 rank" ok "nll_sum_exact identical to eval cpu"
  else
    row "run --standalone, gloo, 1 rank" FAIL "$(tail -1 "$OUT/gloo.log")"
  fi
  finish
fi
if "$AGENT" eval "${EVAL[@]}" --device cuda --json "$OUT/cuda.json" >"$OUT/cuda.log" 2>&1; then
  rel=$("$PY" -c "import json;a=json.load(open('$OUT/cpu.json'))['ppl'];b=json.load(open('$OUT/cuda.json'))['ppl'];print(f'{abs(a-b)/a:.2e}')")
  ok=$("$PY" -c "print(int($rel < 1e-4))")
  row "eval cuda" "$([[ $ok == 1 ]] && echo ok || echo FAIL)" "ppl $(field "$OUT/cuda.json" ppl), rel. diff to cpu $rel (limit 1e-4), $(field "$OUT/cuda.json" tokens_per_second) tok/s"
else
  row "eval cuda" FAIL "$(tail -1 "$OUT/cuda.log")"
fi
if "$AGENT" run --standalone --nproc-per-node 1 -- "${EVAL[@]}" --device cuda --backend nccl --sync-every-tokens 8192 --timeout 60 \
     --json "$OUT/nccl.json" >"$OUT/nccl.log" 2>&1; then
  same=$([[ "$(field "$OUT/nccl.json" nll_sum_exact)" == "$(field "$OUT/cuda.json" nll_sum_exact)" ]] && echo 1 || echo 0)
  row "eval cuda + nccl (world size 1)" "$([[ $same == 1 ]] && echo ok || echo FAIL)" \
      "backend $(field "$OUT/nccl.json" backend), $(field "$OUT/nccl.json" rounds) rounds, nll_sum_exact $([[ $same == 1 ]] && echo identical || echo DIFFERS) to eval cuda"
else
  row "eval cuda + nccl (world size 1)" FAIL "$(grep -m1 'clusterppl-agent' "$OUT/nccl.log" || tail -1 "$OUT/nccl.log")"
fi
finish
