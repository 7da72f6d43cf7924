// SPDX-License-Identifier: MIT
#pragma once

// Torch-free: the default batch on a GPU, from the device's free memory, the model's size and what
// one window of the forward pass needs. A pure function of numbers, so it is tested with made-up
// GPUs and shapes on hosts without one (tests/agent/tst_gpu_support.cpp).

#include <cstdint>
#include <string>
#include <vector>

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
    /// NCCL communicators this rank moves the sums through (flat: the world; hierarchical: the node
    /// group and, on leaders, the leaders'), one channel each. NCCL allocates their buffers at their
    /// first collective, after free memory was read, so each is reserved here (kNcclSumCommunicatorBytes).
    int ncclCommunicators = 0;
    /// NCCL communicators of NCCL's own channel count (tensor parallelism's group), each reserved
    /// kNcclCommunicatorBytes.
    int ncclWideCommunicators = 0;
};

/// Bounds of the default batch, and why each exists.
inline constexpr std::int64_t kMaxTokensPerPass = std::int64_t{1} << 17; ///< past this a pass is long enough to keep any GPU busy
inline constexpr std::int64_t kBatchReserveBytes = std::int64_t{1} << 30; ///< cuBLAS workspaces, the allocator's rounding
/// One NCCL communicator's buffers at NCCL's own channel count (not measured here: no two GPUs).
/// From NCCL's defaults, per channel and peer connection the Simple (NCCL_BUFFSIZE, 4 MiB), LL128
/// (~4.5 MiB) and LL (0.5 MiB) buffers, ring and tree, up to 32 channels over NVLink: 300-600 MiB;
/// reported on real nodes, 544-688 MB on 4 A100s over NVLink and 1.06 GB on 8 H100s (NCCL's issues
/// 964 and 1685). The upper end, so that a batch sized before the first collective still fits
/// after it (docs/communication.md, "Memory").
inline constexpr std::int64_t kNcclCommunicatorBytes = std::int64_t{1} << 30;
/// The same for a communicator limited to one channel (nccl_lib::Channels::One: the sums'): one
/// channel's buffers for ring and tree peers (up to 5 connections of ~9 MiB) and, on NVSwitch
/// systems, one NVLS channel; an estimate with room, until gpu-check's comm-memory row measures it.
inline constexpr std::int64_t kNcclSumCommunicatorBytes = std::int64_t{128} << 20;
/// What @p sums one-channel communicators and @p wide ones of NCCL's own channel count reserve.
[[nodiscard]] constexpr std::int64_t ncclBuffersBytes(int sums, int wide)
{
    return sums * kNcclSumCommunicatorBytes + wide * kNcclCommunicatorBytes;
}
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

/// Most bytes the evaluator's chunked vocabulary head holds at once on a GPU (a chunk's logits in
/// the dtype, their float32 copy and log-softmax). windowFootprintBytes still counts every scored
/// row's logits in the dtype, which the chunked head no longer makes: that covers the chunk.
inline constexpr std::int64_t kHeadChunkMaxBytes = std::int64_t{1} << 30;

/// @brief Rows of the scored positions that go through the vocabulary head at once on LibTorch's
/// path (evaluator.cpp), so that the batch's [N, V] logits never exist. On a GPU as many as a
/// sixteenth of @p freeBytes holds, at most kHeadChunkMaxBytes, as a power of two (on a large GPU
/// the cap decides, so the same model gives the same chunks run after run); @p freeBytes <= 0
/// (unknown) counts as the cap. At least 1.
[[nodiscard]] std::int64_t headChunkRows(std::int64_t vocab, int elementBytes, std::int64_t freeBytes);

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

/// @p bytes in GiB with two decimals, "79.20", for the batch sizing line and the memory plan's table.
[[nodiscard]] std::string gibNumber(std::int64_t bytes);

// The memory plan of `clusterppl-agent plan --model DIR` and the Evaluation page's preview: what
// one rank of a tensor-parallel group holds (weights, K/V, activations) for a batch and context,
// from config.json alone, against a GPU's free memory (docs/planning.md).

/// What the plan needs of a model besides its sizes (config.json's family and flags).
struct PlanModel
{
    ModelShape shape;
    bool gpt2 = false;          ///< LayerNorms with biases, a two-matrix MLP, a learned position table
    std::int64_t positions = 0; ///< GPT-2's position table rows (n_positions)
    bool tied = false;          ///< the head is the embedding (one slice held)
    bool qkvBias = false;
    bool oBias = false;
    bool mlpBias = false;
    /// A mixture of experts (mixtral, qwen2_moe): `sparseLayers` of the layers hold, in place of the
    /// MLP of shape.intermediate, a router over `experts` SwiGLU experts of `expertIntermediate`
    /// (a token uses `topK` of them) and (qwen2_moe) a shared expert of `sharedIntermediate` behind
    /// a gate. 0 experts: a dense decoder.
    std::int64_t experts = 0, topK = 0, expertIntermediate = 0, sharedIntermediate = 0, sparseLayers = 0;
};

/// The model's parameters: every weight (every expert), and those one token multiplies by (its top-k
/// experts, the routers and the shared expert; about 2 FLOPs each a token, besides attention's
/// scores). The same for a dense decoder.
struct PlanParams
{
    std::int64_t total = 0;
    std::int64_t activePerToken = 0;
};
[[nodiscard]] PlanParams planParams(const PlanModel &m);

/// Bytes per weight of the decoder's linear layers: float32 4, bfloat16/float16 2, int8 and int4
/// with a float16 scale per group of 32 (1 + 2/32 and 0.5 + 2/32).
[[nodiscard]] double linearBytesPerWeight(int elementBytes, const std::string &quantize);

struct MemoryPlanInput
{
    PlanModel model;
    int elementBytes = 2;           ///< the evaluation dtype's: 2 for bfloat16/float16, 4 for float32
    std::string quantize = "none";  ///< none, int8 or int4: the decoder's linear layers
    std::int64_t batch = 8;         ///< windows per forward pass
    std::int64_t context = 512;     ///< tokens per window
    std::int64_t freeBytes = 0;     ///< free memory of one GPU; 0: unknown (figures, no verdict)
    int tensorParallel = 1;         ///< the N asked about
    int gpusPerNode = 8;            ///< a group is ranks of one node: N divides this
    int ranks = 0;                  ///< the world size; 0: one node (gpusPerNode)
};

/// One rank of a group of N: what it holds, and whether it fits.
struct RankMemory
{
    int n = 1;
    std::string refusal;                 ///< why the model cannot be split N ways ("" when it can)
    std::int64_t shardedWeightBytes = 0; ///< this rank's slices (the largest rank's: the vocabulary's first ranges)
    std::int64_t replicatedWeightBytes = 0; ///< what every rank holds whole: norms, K/V heads replicated, positions, biases
    std::int64_t weightBytes = 0;
    std::int64_t kvBytes = 0;         ///< K and V of the batch in one layer (a pass holds one layer's at a time)
    std::int64_t activationBytes = 0; ///< the pass's peak beyond the weights for the batch (K/V included)
    std::int64_t reserveBytes = kBatchReserveBytes; ///< and NCCL's buffers, as a run over NCCL reserves them (ncclReserveBytes)
    std::int64_t totalBytes = 0;      ///< weights + activations + reserve
    bool fits = false;                ///< as the agent's batch sizing judges it (kBatchMemoryShare); false without freeBytes
    /// The batch "auto" would choose from this memory: a power of two, at most kMaxTokensPerPass
    /// tokens a pass (not bounded by windows per rank, which the plan does not know); 0: none fits.
    std::int64_t maxBatch = 0;
    [[nodiscard]] bool splittable() const { return refusal.empty(); }
};

struct MemoryPlan
{
    RankMemory asked;                 ///< the N asked about
    std::vector<RankMemory> candidates; ///< every divisor of gpusPerNode (and of ranks), smallest first
    int recommended = 0;              ///< the smallest splittable N that fits; 0: none (or memory unknown)
    int dataParallelWidth = 0;        ///< ranks / recommended
    std::string why;                  ///< one sentence: the recommendation, or why nothing fits
};

/// @brief Why the model cannot be split @p n ways (heads, K/V heads, intermediate size, the experts'
/// and the shared expert's), in the words of the agent's own refusal; "" when it can.
[[nodiscard]] std::string tensorParallelRefusal(const PlanModel &m, int n);
/// @brief What a run over NCCL of @p in's ranks in groups of @p n reserves for NCCL's buffers.
[[nodiscard]] std::int64_t ncclReserveBytes(const MemoryPlanInput &in, int n);
/// @brief One rank's memory in a group of @p n.
[[nodiscard]] RankMemory rankMemory(const MemoryPlanInput &in, int n);
/// @brief The asked N, every candidate, and the recommendation.
[[nodiscard]] MemoryPlan planMemory(const MemoryPlanInput &in);

} // namespace cppl::agent
