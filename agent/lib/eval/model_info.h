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
    DeviceSpec device;            ///< where the weights live and logits come out
    ModelShape shape; ///< from config.json (native models); zeros for TorchScript (the default GPU batch needs it)
};

} // namespace cppl::agent
