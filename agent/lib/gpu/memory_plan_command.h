// SPDX-License-Identifier: MIT
#pragma once

// `clusterppl-agent plan --model DIR`: the memory plan of tensor parallelism (batch_sizing.h's
// planMemory) from config.json alone, as text and as the "memory" object of plan's --json
// (docs/planning.md). Torch-free.

#include "gpu/batch_sizing.h"

#include <nlohmann/json.hpp>

#include <ostream>
#include <string>

namespace cppl::agent {

class Args;

struct MemoryPlanRequest
{
    MemoryPlanInput input;
    std::string modelDir;
    std::string modelType; ///< config.json's model_type
    std::string dtype;     ///< float32, bfloat16 or float16
};

/// @brief `--model`, `--tensor-parallel`, `--gpu-memory GiB`, `--dtype`, `--quantize`,
/// `--gpus-per-node` (and plan's `--batch`, `--context`, `--ranks`); reads DIR/config.json.
/// Throws ConfigError naming the flag, IoError for an unreadable config.json.
[[nodiscard]] MemoryPlanRequest parseMemoryPlanRequest(const Args &a);

/// @brief The table of candidates, the asked N and the recommendation.
void printMemoryPlan(std::ostream &out, const MemoryPlanRequest &r, const MemoryPlan &p);

/// @brief plan --json's "memory" object (docs/planning.md).
[[nodiscard]] nlohmann::json memoryPlanJson(const MemoryPlanRequest &r, const MemoryPlan &p);

} // namespace cppl::agent
