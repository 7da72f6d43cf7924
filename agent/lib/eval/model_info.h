// SPDX-License-Identifier: MIT
// What describes a model without running it: ModelInfo, the GEMM choice and the dtype names. Only
// c10's value types (Device, ScalarType; no ATen), so that the eval command's options, loop and
// result need not compile ATen (language_model.h has the model itself).
#pragma once

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include "gpu/batch_sizing.h"

#include <cstdint>
#include <string>
#include <vector>

namespace cppl::agent {

struct ModelInfo
{
    std::string path;
    std::string format; ///< "hf" or "torchscript"
    std::string arch;   ///< llama, mistral, qwen2, gpt2, torchscript
    std::int64_t params = 0;
    std::int64_t vocab = 0;
    std::int64_t maxPositions = 0; ///< 0 = unknown
    std::int64_t bosTokenId = -1;
    std::vector<std::string> weightFiles;
    std::int64_t weightBytes = 0; ///< in the evaluation dtype
    std::string gemm;             ///< "native-avx512|avx2|generic", "onednn" or "blas" (native models); "torchscript"
    c10::Device device = c10::Device(c10::DeviceType::CPU); ///< where the weights live and logits come out
    ModelShape shape; ///< from config.json (native models); zeros for TorchScript (the default GPU batch needs it)
};

/// @brief Which library runs the dense layers' matrix products on the CPU.
enum class GemmBackend {
    Auto,   ///< Native for float32 on the CPU, else LibTorch's own (at::linear)
    Native, ///< the agent's own kernels (cpu_gemm.h): packed weights, cpuid-selected, thread-count-independent bits
    Blas,   ///< the BLAS LibTorch links (OpenBLAS here), through at::linear
    OneDnn, ///< oneDNN (mkldnn) with weights packed once at load
};

/// @brief "float32" -> Float etc.; throws ConfigError for anything else.
[[nodiscard]] c10::ScalarType parseDtype(const std::string &name);
[[nodiscard]] std::string dtypeName(c10::ScalarType t);

} // namespace cppl::agent
