// SPDX-License-Identifier: MIT
// What the fake NCCL needs from the fake CUDA runtime beyond CUDA's own API: putting a "kernel"
// (a function run on the stream's thread, in stream order) on a stream. The fake NCCL links the
// fake runtime by its soname, so the loader gives it the same copy the agent loaded.
#pragma once

#include <cuda_runtime_api.h>

extern "C" {

/// Runs @p kernel(@p arg) on @p stream's thread after the work enqueued before it; the stream is
/// busy (cudaStreamQuery: cudaErrorNotReady) until it returns. A null stream runs it here and now.
__attribute__((visibility("default"))) cudaError_t cpplFakeCudaLaunch(cudaStream_t stream, void (*kernel)(void *), void *arg);

} // extern "C"
