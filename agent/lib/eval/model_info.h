// SPDX-License-Identifier: MIT
// What describes a model without running it: ModelInfo. Torch-free (the device is a DeviceSpec,
// compute_spec.h), so that the eval command's options, round loop and result compile without
// LibTorch; language_model.h has the model itself.
#pragma once

#include "compute_spec.h"
#include "gpu/batch_sizing.h"

#include <cstdint>
#include <string>
#include <vector>

namespace cppl::agent {

/// What of a model's weights is stored quantized (--quantize, or a GPTQ/AWQ checkpoint).
struct QuantizationInfo
{
    std::string method = "none";     ///< int8, int4-sym, int4-asym, gptq-int4, gptq-int8, awq-int4; none
    std::int64_t group = 0;          ///< input features per scale (-1: the whole row)
    bool head = false;               ///< the vocabulary head too (--quantize-head)
    std::int64_t layers = 0;         ///< products on quantized weights
    std::int64_t params = 0;         ///< their weights
    std::int64_t bytes = 0;          ///< their codes, scales and zero points as stored
    std::int64_t denseLayers = 0;    ///< checkpoint layers dequantized to float32 (their layout does not fit the kernels)
    std::string denseReason;         ///< ... the first one's reason
    std::int64_t bufferBytes = 0;    ///< LibTorch's path: the one dequantized layer the quantized ones share
};

/// --weight-upload: how weights reach a GPU (staged_upload.h).
enum class WeightUpload
{
    Auto,     ///< pinned on a GPU; on the CPU the weights are used in place over the mapping
    Pinned,   ///< staged through pinned buffers, copies on a stream of their own (StagedUpload)
    Pageable, ///< Tensor::to from the mapping (the driver's own staging, one tensor at a time)
};

/// How the weights reached the model's device, and what it cost (the result's model.weight_upload).
struct WeightUploadInfo
{
    std::string method;           ///< "host" (CPU: in place or converted there), "pageable", "pinned", or the test queue's
    std::int64_t chunkBytes = 0;  ///< pinned: each buffer's size
    int buffers = 0;              ///< pinned: buffers the host fills while the device copies
    std::int64_t chunks = 0;      ///< pinned: copies enqueued
    std::int64_t bytes = 0;       ///< pinned: bytes copied
    double hostSeconds = 0;       ///< pinned: reading the mapping into the buffers
    double waitSeconds = 0;       ///< pinned: the host waiting for a buffer
    std::string note;             ///< why pinned was not used where it was the default (pinned memory refused)
};

struct ModelInfo
{
    std::string path;
    std::string format; ///< "hf" or "torchscript"
    std::string arch;   ///< llama, mistral, qwen2, qwen3, gpt2, torchscript
    std::int64_t params = 0;
    std::int64_t vocab = 0;
    std::int64_t maxPositions = 0; ///< 0 = unknown
    std::int64_t bosTokenId = -1;
    std::vector<std::string> weightFiles;
    std::int64_t weightBytes = 0; ///< as the model holds them (the evaluation dtype; quantized layers as stored)
    std::string gemm;             ///< "native-avx512|avx2|generic", "onednn" or "blas" (native models); "torchscript"
    DeviceSpec device;            ///< where the weights live and logits come out
    ModelShape shape; ///< from config.json (native models); zeros for TorchScript (the default GPU batch needs it)
    QuantizationInfo quantization;
    WeightUploadInfo upload;
};

} // namespace cppl::agent
