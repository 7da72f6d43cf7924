#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The checks that need a GPU: run on a host with an NVIDIA GPU, CUDA, NCCL and a CUDA build of
# LibTorch (Debian's libtorch is CPU-only; point CMAKE_PREFIX_PATH at a CUDA LibTorch). Builds the
# tree if needed and runs the CTest label `gpu`, which skips with a reason where no GPU is visible.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cppl_prepare
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null || echo "nvidia-smi: no GPU visible"
cd "$BUILD_DIR"
ctest -L gpu --output-on-failure "$@"
