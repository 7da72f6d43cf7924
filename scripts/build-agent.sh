#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds clusterppl-agent for a cluster's nodes against the LibTorch of a Python's torch package
# (pip's CUDA torch on a GPU cluster, Debian's python3-torch here), installs it into a prefix, and
# checks the installed agent the way an SSH launch starts it: a clean environment, no
# LD_LIBRARY_PATH. Needs no root and no package registry: it installs nothing but the agent, and
# says what is missing. docs/packaging.md, "The agent on GPU nodes".
#
#   scripts/build-agent.sh [--prefix DIR] [--python PY] [--build-dir DIR] [--jobs N]
#                          [--gloo-include DIR] [--no-check] [-- CMAKE_ARGS...]
#
#   --prefix DIR     where to install (default ~/.local): DIR/bin/clusterppl-agent is what a
#                    profile's "agent" names; DIR/lib/clusterppl holds its LibTorch half
#   --python PY      the interpreter whose torch package to build against (default $PYTHON, else
#                    python3): `PY -c 'import torch'` must work
#   --build-dir DIR  the build tree (default build/agent-<torch version>); a tree that is already
#                    configured is built as it is (its Torch_DIR is shown): use a new one for
#                    another torch
#   --jobs N         parallel compile jobs (default: the CPUs; each LibTorch file takes ~1.3 GB)
#   --gloo-include DIR  Gloo's installed headers (DIR/gloo/algorithm.h and gloo/config.h), for a
#                    torch without its own: pip's wheels carry none, and without them CPU ranks
#                    cannot be combined (--backend gloo). libgloo-dev's /usr/include, or PREFIX/include
#                    of a Gloo source's `cmake --install`; sets the tree's GLOO_INCLUDE_DIR
#   --no-check       install, but do not run the installed agent
#   CMAKE_ARGS       passed to the first configure, e.g. -DCLUSTERPPL_WITH_NCCL=OFF
#
# Prints one table, like scripts/gpu-check.sh, and exits 1 when a row failed (2: bad arguments).
# CPPL_BUILD_AGENT_ROWS=FILE also appends each row to FILE, tab-separated (gpu-check.sh reads it).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
PREFIX="$HOME/.local"
BUILD=""
JOBS="$(nproc 2>/dev/null || echo 2)"
CHECK=1
GLOO_INC=""
EXTRA=()
usage() { sed -n '9,28p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
bad() { echo "build-agent.sh: $1 (--help lists the arguments)" >&2; exit 2; }
need() { [[ $# -ge 2 && -n "$2" ]] || bad "$1 needs a value"; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --prefix) need "$@"; PREFIX="$2"; shift 2 ;;
    --python) need "$@"; PY="$2"; shift 2 ;;
    --build-dir) need "$@"; BUILD="$2"; shift 2 ;;
    --jobs) need "$@"; [[ "$2" =~ ^[1-9][0-9]*$ ]] || bad "--jobs takes a positive number, not '$2'"
            JOBS="$2"; shift 2 ;;
    --gloo-include) need "$@"; [[ -f "$2/gloo/algorithm.h" && -f "$2/gloo/config.h" ]] \
                      || bad "--gloo-include $2: no gloo/algorithm.h and gloo/config.h there (an installed Gloo's include directory)"
                    GLOO_INC="$(cd "$2" && pwd)"; shift 2 ;;
    --no-check) CHECK=0; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; EXTRA=("$@"); break ;;
    *) bad "unknown argument '$1'" ;;
  esac
done
[[ "$PREFIX" = /* ]] || PREFIX="$PWD/$PREFIX"
START=$(date +%s)
declare -a ROWS=()
FAILED=0
row() {
  ROWS+=("$(printf '%-30s %-5s %s' "$1" "$2" "$3")")
  [[ -n "${CPPL_BUILD_AGENT_ROWS:-}" ]] && printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$CPPL_BUILD_AGENT_ROWS"
  [[ "$2" == FAIL ]] && FAILED=1
  return 0
}
finish() {
  echo
  echo "== build-agent summary ($(( $(date +%s) - START )) s) =="
  printf '%-30s %-5s %s\n' "step" "result" "detail"
  printf '%s\n' "${ROWS[@]}"
  if [[ $FAILED == 0 && -x "$PREFIX/bin/clusterppl-agent" ]]; then
    echo
    local half="$PREFIX/lib/clusterppl/clusterppl-agent-torch" lib runpath
    lib=$(env -i PATH=/usr/bin:/bin ldd "$half" 2>/dev/null | awk '$1 ~ /^libtorch_cpu\.so/ {print $3}')
    runpath=$(readelf -d "$half" 2>/dev/null | grep -E 'RUNPATH|RPATH')
    echo "The agent: $PREFIX/bin/clusterppl-agent"
    echo "  In a profile, each host's \"agent\": \"$PREFIX/bin/clusterppl-agent\" (docs/profile.md)."
    if [[ -n "$runpath" ]]; then
      echo "  Every node needs this prefix at this path (install it there, or share it), and LibTorch at"
      echo "  ${lib%/*} (the same torch package at the same path: a shared file system, or the same venv"
      echo "  on every node), where the agent finds it without LD_LIBRARY_PATH."
    else
      echo "  Every node needs this prefix at this path, and the same LibTorch in the system's directories"
      echo "  (${lib%/*} here)."
    fi
  fi
  exit "$FAILED"
}
# The first line that says what went wrong: a compiler's, linker's or CMake's own, else the last.
firstError() {
  local l
  l=$(grep -m1 -A2 'CMake Error' "$1" | tr '\n' ' ' | sed 's/  */ /g')
  [[ -z "$l" ]] && l=$(grep -m1 -E 'error:|undefined reference|cannot find -l|Error [0-9]+' "$1")
  [[ -z "$l" ]] && l=$(grep -m1 '^FAILED:' "$1")
  [[ -z "$l" ]] && l=$(grep -v '^[[:space:]]*$' "$1" | tail -1)
  printf '%s' "${l:-no output}" | cut -c1-220
}

# 1. Tools: CMake 3.25 (CMakePresets v6, the project's minimum) and a C++20 compiler.
if ! command -v cmake >/dev/null; then
  row "cmake" FAIL "not on PATH: CMake 3.25 or newer is needed (a module system's 'module load cmake', or cmake.org's binaries)"
  finish
fi
CMAKE_VERSION=$(cmake --version | grep -oE '[0-9]+\.[0-9]+(\.[0-9]+)?' | head -1)
if ! printf '3.25\n%s\n' "$CMAKE_VERSION" | sort -C -V; then
  row "cmake" FAIL "$CMAKE_VERSION is too old: 3.25 or newer is needed (a module system's 'module load cmake', or cmake.org's binaries)"
  finish
fi
CXX_BIN="${CXX:-c++}" # what CMake picks too
if ! command -v "$CXX_BIN" >/dev/null; then
  row "cmake" FAIL "no C++ compiler: $CXX_BIN is not on PATH (a module system's 'module load gcc', or CXX=... names one)"
  finish
fi
row "cmake" ok "$CMAKE_VERSION, compiler $("$CXX_BIN" --version 2>/dev/null | head -1)"
# C++20 as GCC 12 (Debian 12) compiles it, which is what the project is built and tested with.
# GCC says so in its copyright line ("c++ (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0" names no GCC).
if "$CXX_BIN" --version 2>/dev/null | grep -q 'Free Software Foundation'; then
  gccMajor=$("$CXX_BIN" -dumpversion 2>/dev/null | cut -d. -f1)
  [[ "$gccMajor" =~ ^[0-9]+$ ]] && (( gccMajor < 12 )) \
    && row "compiler" warn "GCC $gccMajor: the agent is built and tested with GCC 12; an older one may fail on C++20 (a module system's 'module load gcc/12', or CXX=g++-12)"
fi

# 2. The torch package: its CMake config, version, CUDA (built with it; a GPU need not be here).
if ! TORCH_INFO=$("$PY" - <<'PY' 2>&1
import torch
print(torch.utils.cmake_prefix_path)
print(torch.__version__)
print(torch.version.cuda or "")
available = torch.cuda.is_available() if torch.version.cuda else False
print(torch.cuda.device_count() if available else 0)
print("%d.%d" % torch.cuda.get_device_capability(0) if available else "")
PY
); then
  row "torch package" FAIL "$PY cannot import torch: ${TORCH_INFO##*$'\n'} (--python names another interpreter, e.g. a venv's bin/python)"
  finish
fi
TORCH_PREFIX=$(sed -n 1p <<<"$TORCH_INFO")
TORCH_VERSION=$(sed -n 2p <<<"$TORCH_INFO")
TORCH_CUDA=$(sed -n 3p <<<"$TORCH_INFO")
GPUS=$(sed -n 4p <<<"$TORCH_INFO")
GPU_ARCH=$(sed -n 5p <<<"$TORCH_INFO")
row "torch package" ok "$TORCH_VERSION ($([[ -n "$TORCH_CUDA" ]] && echo "CUDA $TORCH_CUDA, $GPUS GPU(s) here" || echo "CPU only")) at $TORCH_PREFIX"
[[ -n "$BUILD" ]] || BUILD="$ROOT/build/agent-${TORCH_VERSION//[^A-Za-z0-9._-]/_}"
[[ "$BUILD" = /* ]] || BUILD="$PWD/$BUILD"
mkdir -p "$BUILD"

# 3. Configure, once per tree.
WANT_NCCL=0
if [[ -n "$TORCH_CUDA" ]] && ! printf '%s\n' "${EXTRA[@]+"${EXTRA[@]}"}" | grep -q -- '-DCLUSTERPPL_WITH_NCCL=OFF'; then WANT_NCCL=1; fi
if [[ -f "$BUILD/CMakeCache.txt" ]]; then
  if [[ -n "$GLOO_INC" ]] && ! cmake -S "$ROOT" -B "$BUILD" -DGLOO_INCLUDE_DIR="$GLOO_INC" >"$BUILD/configure.log" 2>&1; then
    row "configure" FAIL "$(firstError "$BUILD/configure.log") (all of it: $BUILD/configure.log)"
    finish
  fi
  row "configure" ok "already configured: $BUILD ($(grep -m1 '^Torch_DIR:' "$BUILD/CMakeCache.txt" | cut -d= -f2-))"
else
  CONF=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" -DCMAKE_INSTALL_PREFIX="$PREFIX"
        -DCLUSTERPPL_BUILD_GUI=OFF -DBUILD_TESTING=OFF -DCLUSTERPPL_BUILD_BENCH=OFF)
  [[ -n "$GLOO_INC" ]] && CONF+=(-DGLOO_INCLUDE_DIR="$GLOO_INC")
  if [[ $WANT_NCCL == 1 ]]; then
    # nccl.h of the NCCL that LibTorch loads (the pip package's) first, then a toolkit's.
    NCCL_INC=""
    for d in "$("$PY" -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "include"))' 2>/dev/null)" \
             "$("$PY" -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13", "include"))' 2>/dev/null)" \
             /usr/local/cuda/include /usr/include; do
      [[ -n "$d" && -f "$d/nccl.h" ]] && { NCCL_INC="$d"; break; }
    done
    if [[ -z "$NCCL_INC" ]]; then
      row "nccl.h" FAIL "not in the nvidia-nccl package, /usr/local/cuda/include or /usr/include (-- -DCLUSTERPPL_WITH_NCCL=OFF builds without NCCL: Gloo only)"
      finish
    fi
    row "nccl.h" ok "$NCCL_INC"
    CONF+=(-DCLUSTERPPL_WITH_NCCL=ON -DNCCL_INCLUDE_DIR="$NCCL_INC")
    # LibTorch's CMake config enables CUDA: its compiler where PATH may not say (the toolkit's own
    # directory), and the GPU's architecture when one is here, so that CMake need not probe for it.
    NVCC="${CUDACXX:-$(command -v nvcc || true)}"
    [[ -z "$NVCC" && -x /usr/local/cuda/bin/nvcc ]] && NVCC=/usr/local/cuda/bin/nvcc
    if [[ -n "$NVCC" ]]; then
      CONF+=(-DCMAKE_CUDA_COMPILER="$NVCC")
      row "nvcc" ok "$NVCC: $("$NVCC" --version 2>/dev/null | grep -o 'release [0-9.]*' | head -1), host $(c++ -dumpfullversion 2>/dev/null || echo '?') (g++)"
    else
      row "nvcc" skip "not on PATH nor in /usr/local/cuda/bin (CUDACXX=... names one); LibTorch's CMake config may need it"
    fi
    [[ -z "${TORCH_CUDA_ARCH_LIST:-}" && -n "$GPU_ARCH" ]] && export TORCH_CUDA_ARCH_LIST="$GPU_ARCH"
  elif [[ -z "$TORCH_CUDA" ]]; then
    CONF+=(-DCLUSTERPPL_WITH_NCCL=OFF) # a CPU-only LibTorch runs no CUDA: Gloo only
  fi
  GEN=(); command -v ninja >/dev/null && GEN=(-G Ninja)
  if ! cmake -S "$ROOT" -B "$BUILD" "${GEN[@]}" "${CONF[@]}" "${EXTRA[@]+"${EXTRA[@]}"}" >"$BUILD/configure.log" 2>&1; then
    row "configure" FAIL "$(firstError "$BUILD/configure.log") (all of it: $BUILD/configure.log)"
    rm -f "$BUILD/CMakeCache.txt" # a rerun configures again
    finish
  fi
  row "configure" ok "$BUILD"
fi
# What the build has, and what a missing piece costs (the generated config.h, as the code sees it).
have() { grep -m1 -E "define CLUSTERPPL_HAVE_$1 " "$BUILD/generated/cppl/config.h" 2>/dev/null | awk '{print $3}'; }
if [[ $WANT_NCCL == 1 && "$(have NCCL)" != 1 ]]; then
  row "NCCL" FAIL "not built in although torch has CUDA: see $BUILD/configure.log (CUDA toolkit or nccl.h not found)"
fi
if [[ "$(have GLOO)" == 1 ]]; then
  gloo=$(grep -m1 '^GLOO_INCLUDE_DIR:' "$BUILD/CMakeCache.txt" | cut -d= -f2-)
  row "Gloo" ok "headers in ${gloo:-?}"
else
  row "Gloo" warn "no gloo/algorithm.h beside LibTorch's headers (pip's wheels carry none): CPU ranks cannot be combined; --gloo-include DIR names Gloo's headers"
fi
[[ "$(have ZMQ)" == 1 ]] || row "ZeroMQ" warn "no libzmq (pkg-config libzmq): ranks run but send no telemetry, so the dashboard shows no live data (libzmq3-dev / zeromq-devel)"
[[ "$(have PCRE2)" == 1 ]] || row "PCRE2" warn "no libpcre2-8: Hugging Face tokenizer.json is refused; token files and --tokenizer bytes work (libpcre2-dev / pcre2-devel)"
if [[ "$(have OPENSSL_SHA)" != 1 ]]; then
  if [[ "$(have SODIUM)" == 1 ]]; then
    row "libcrypto" warn "no OpenSSL libcrypto: model and data files hashed with libsodium, 9x slower (about 12 min of one core for 140 GB of weights; libssl-dev / openssl-devel)"
  else
    row "libcrypto" warn "neither OpenSSL libcrypto nor libsodium: results carry no sha256 of the model and data files (libssl-dev / openssl-devel)"
  fi
fi

# 4. Build the agent (both halves) and install its component.
if ! cmake --build "$BUILD" --target clusterppl-agent -j "$JOBS" >"$BUILD/build.log" 2>&1; then
  row "build" FAIL "$(firstError "$BUILD/build.log") (all of it: $BUILD/build.log)"
  finish
fi
row "build" ok "$(( $(date +%s) - START )) s so far"
if ! cmake --install "$BUILD" --component agent --prefix "$PREFIX" >"$BUILD/install.log" 2>&1; then
  row "install" FAIL "$(firstError "$BUILD/install.log") (all of it: $BUILD/install.log)"
  finish
fi
row "install" ok "$PREFIX/bin/clusterppl-agent, $PREFIX/lib/clusterppl/clusterppl-agent-torch"
[[ $CHECK == 1 ]] || finish

# 5. The installed agent as an SSH launch starts it: no LD_LIBRARY_PATH, a bare PATH.
clean() { env -i HOME="$HOME" PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 "$@"; }
TORCH_HALF="$PREFIX/lib/clusterppl/clusterppl-agent-torch"
missing=$(clean ldd "$TORCH_HALF" 2>&1 | grep 'not found' | awk '{print $1}' | tr '\n' ' ')
if [[ -n "$missing" ]]; then
  row "libraries" FAIL "the torch half cannot load ${missing% } without LD_LIBRARY_PATH (ldd $TORCH_HALF)"
  finish
fi
libtorchOf() { clean ldd "$1" 2>/dev/null | awk '$1 ~ /^libtorch_cpu\.so/ {print $3}' | xargs -r realpath; }
torchlib=$(libtorchOf "$TORCH_HALF")
linked=$(libtorchOf "$BUILD/agent/clusterppl-agent-torch") # the build tree's: linked against, found through the build RUNPATH
runpath=$(readelf -d "$TORCH_HALF" 2>/dev/null | grep -oE '(RUNPATH|RPATH).*\[.*\]' | sed -E 's/.*\[(.*)\]/\1/')
if [[ -n "$linked" && "$torchlib" != "$linked" ]]; then
  row "libraries" FAIL "the installed agent loads ${torchlib:-no libtorch_cpu}, not $linked that it was built against (no RUNPATH to it: readelf -d $TORCH_HALF)"
  finish
fi
row "libraries" ok "libtorch_cpu from ${torchlib:-?}$([[ -n "$runpath" ]] && echo " (RUNPATH $runpath)" || echo " (system directories, no RUNPATH)")"
LOG="$BUILD/check"
mkdir -p "$LOG"
if clean "$PREFIX/bin/clusterppl-agent" preflight >"$LOG/preflight.log" 2>&1; then
  row "installed agent: preflight" ok "$(sed -n 1p "$LOG/preflight.log" | cut -c1-200)"
else
  row "installed agent: preflight" FAIL "$(grep -m1 -E '^(problem|clusterppl-agent)' "$LOG/preflight.log" || firstError "$LOG/preflight.log")"
fi
DEVICE=cpu
[[ -n "$TORCH_CUDA" && "$GPUS" -gt 0 ]] && DEVICE=cuda
SHARE="$PREFIX/share/clusterppl"
if clean "$PREFIX/bin/clusterppl-agent" eval --model "$SHARE/models/shakespeare-byte-llama" --text "$SHARE/data/tinyshakespeare-heldout.txt" \
     --tokenizer bytes --protocol llama.cpp --context 256 --batch 4 --max-windows 8 --device "$DEVICE" --quiet \
     --json "$LOG/eval.json" >"$LOG/eval.log" 2>&1; then
  row "installed agent: eval $DEVICE" ok "$(grep -m1 'Final estimate' "$LOG/eval.log" | sed 's/^.*Final estimate: //') on 8 windows of the demo model"
else
  row "installed agent: eval $DEVICE" FAIL "$(grep -m1 '^clusterppl-agent' "$LOG/eval.log" || firstError "$LOG/eval.log")"
fi
finish
