#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The agent's torch-free library checked by the compiler (docs/ARCHITECTURE.md, "The agent's two
# halves"): builds clusterppl_agent_torchfree and the tests that link it alone, in a tree of their
# own, with LibTorch's headers hidden. Debian's are in /usr/include (ATen, c10, caffe2, torch), so
# those directories are masked by an empty one in a mount namespace of this command's own (root):
# a LibTorch header reached from a torch-free source, directly or through its headers, is then a
# compile error naming the file; such a source belongs in clusterppl_agent_libtorch.
#   scripts/check-torch-free.sh [BUILD_DIR]    (default build/torchfree-check)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/torchfree-check}
command -v unshare >/dev/null || { echo "check-torch-free: unshare (util-linux) is missing" >&2; exit 1; }
((EUID == 0)) || { echo "check-torch-free: needs root, to mask LibTorch's headers in a mount namespace" >&2; exit 1; }
# Tests that link clusterppl_agent_torchfree alone and start no agent (those that start one wait for
# the torch half too); the compile of every torch-free source is in the library itself.
targets=(clusterppl_agent_torchfree tst_token_file tst_fault_hooks tst_model_files tst_tokenizer tst_text_dataset
         tst_nccl_recovery tst_watchdog_mesh tst_quant_formats tst_quant_kernels tst_quant_checkpoints)
# Configured (again, when a CMakeLists.txt changed) with the headers in place: find_package(Torch)
# checks its include directories, so the build below must not have to re-run CMake.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCLUSTERPPL_WERROR=ON -DCLUSTERPPL_BUILD_GUI=OFF \
  -DCLUSTERPPL_BUILD_BENCH=OFF $(command -v ccache >/dev/null && echo -DCMAKE_CXX_COMPILER_LAUNCHER=ccache) >/dev/null
empty=$(mktemp -d)
trap 'rmdir "$empty"' EXIT
masked=()
for d in ATen c10 caffe2 torch; do
  [[ -d /usr/include/$d ]] && masked+=("/usr/include/$d")
done
# Always rebuilt: an object compiled earlier with the headers in place would pass unchecked.
ninja -C "$build" -t clean clusterppl_agent_torchfree >/dev/null
unshare -m bash -c '
  set -euo pipefail
  empty=$1; build=$2; shift 2
  while [[ $1 != -- ]]; do mount --bind "$empty" "$1"; shift; done
  shift
  ninja -C "$build" "$@"' check-torch-free "$empty" "$build" "${masked[@]}" -- "${targets[@]}"
echo "check-torch-free: clusterppl_agent_torchfree and its tests build without LibTorch's headers (masked: ${masked[*]:-none})"
