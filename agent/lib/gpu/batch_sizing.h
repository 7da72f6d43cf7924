// SPDX-License-Identifier: MIT
#pragma once

// Torch-free: the default batch on a GPU, from the device's free memory, the model's size and what
// one window of the forward pass needs. A pure function of numbers, so it is tested with made-up
// GPUs and shapes on hosts without one (tests/agent/tst_gpu_support.cpp).

#include <cstdint>
#include <string>

namespace cppl::agent {

/// The transformer's sizes from config.json; zeros when unknown (a TorchScript module).
struct ModelShape
{
    std::int64_t hidden = 0;
    std::int64_t intermediate = 0;
    std::int64_t layers = 0;
    std::int64_t heads = 0;
    std::int64_t kvHeads = 0;
    std::int64_t headDim = 0; ///< 0: hidden / heads
    std::int64_t vocab = 0;
};

struct BatchSizingInput
{
    /// cudaMemGetInfo before this rank loaded its weights: what the CUDA context and anything else
    /// on the GPU (other processes, other ranks sharing it) leave.
    std::int64_t freeBytes = 0;
    std::int64_t totalBytes = 0;
    std::int64_t weightBytes = 0; ///< the weights in the evaluation dtype, as loaded onto the GPU
    int elementBytes = 2;         ///< 2 for bfloat16/float16, 4 for float32
    ModelShape shape;
    std::int64_t width = 0;           ///< every forward pass is [batch, width] (the plan's widest input)
    std::int64_t scoredPerWindow = 0; ///< the most scored tokens of one window: rows of the logits
    std::int64_t windows = 0;         ///< windows in the plan
    int ranks = 1;                    ///< ranks sharing the windows: each should get a batch
    int ranksPerDevice = 1;           ///< ranks of this host on the same GPU (gloo only): they share its memory
    bool fusedAttention = false;      ///< at::scaled_dot_product_attention (LibTorch >= 2.0): no score matrix
    /// NCCL communicators this rank moves data through (flat: the world; hierarchical: the node
    /// group and, on leaders, the leaders'). NCCL allocates their buffers at their first collective,
    /// after free memory was read, so each is reserved here (kNcclCommunicatorBytes).
    int ncclCommunicators = 0;
};

/// Bounds of the default batch, and why each exists.
inline constexpr std::int64_t kMaxTokensPerPass = std::int64_t{1} << 17; ///< past this a pass is long enough to keep any GPU busy
inline constexpr std::int64_t kBatchReserveBytes = std::int64_t{1} << 30; ///< cuBLAS workspaces, the allocator's rounding
/// One NCCL communicator's buffers, an estimate from NCCL's defaults (not measured here: no two
/// GPUs): per channel and peer connection the Simple (NCCL_BUFFSIZE, 4 MiB), LL128 (~4.5 MiB) and
/// LL (0.5 MiB) buffers, ring and tree, up to 32 channels over NVLink: about 300-600 MiB. The upper
/// end, so that a batch sized before the first collective still fits after it (docs/communication.md).
inline constexpr std::int64_t kNcclCommunicatorBytes = std::int64_t{512} << 20;
inline constexpr double kBatchMemoryShare = 0.85;                        ///< of what is left after the reserve: fragmentation

struct BatchChoice
{
    std::int64_t batch = 1;
    std::int64_t perWindowBytes = 0; ///< the estimate of one window's peak (activations or logits, the larger)
    std::int64_t budgetBytes = 0;    ///< what the windows may use: (free / ranks per device - weights - reserve) * share
    std::int64_t memoryBatch = 0;    ///< the power of two the memory allows (before the other bounds); 0: not even one window
    /// What set the batch: "memory", "tokens per pass", "windows per rank" or "one window".
    std::string limitedBy;
    std::string reason; ///< one line for the log and the result JSON
};

/// @brief The peak bytes one window adds to a forward pass (the larger of a decoder layer's
/// activations and the scored positions' logits, as the native model computes them); 0 when the
/// shape is unknown.
[[nodiscard]] std::int64_t windowFootprintBytes(const BatchSizingInput &in);

/**
 * @brief The default batch on a GPU: the largest power of two of windows whose footprint fits the
 * budget, then at most kMaxTokensPerPass tokens per pass and at most ceil(windows / ranks) (a
 * larger batch leaves ranks without work). A power of two because free memory varies a little from
 * run to run and the batch is part of what makes a GPU run's bits: the same GPU and model give the
 * same batch. Never below 1; the reason says when even one window exceeds the estimate.
 */
[[nodiscard]] BatchChoice chooseBatch(const BatchSizingInput &in);

/// @brief The bounds after the memory part, for a memory batch already agreed by every rank (the
/// smallest of theirs): tokens per pass, windows per rank, at least 1. Fills batch, limitedBy, reason.
void applyBatchBounds(const BatchSizingInput &in, BatchChoice &choice);

/// @brief The largest power of two <= n (n >= 1), else 0.
[[nodiscard]] std::int64_t floorPowerOfTwo(std::int64_t n);

} // namespace cppl::agent
