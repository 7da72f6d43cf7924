// SPDX-License-Identifier: MIT
// Which class builds a native model: the torch side of the model registry. config.json's model_type
// picks a family in model/model_config.cpp (its parser and its ModelConfig::Arch); the Arch picks a
// factory here. docs/models.md, "How to add a family".
#pragma once

#include "language_model.h"

#include "model/model_config.h"
#include "model/safetensors.h"

#include <memory>
#include <string>

namespace cppl::agent {

/// Builds a model of one class from its parsed config and the opened checkpoint.
using ModelFactory = std::unique_ptr<LanguageModel> (*)(const std::string &dir, ModelConfig config, SafetensorsCheckpoint checkpoint,
                                                        const LoadOptions &options);

/// Each class's factory, defined beside it.
[[nodiscard]] std::unique_ptr<LanguageModel> makeLlamaModel(const std::string &dir, ModelConfig config, SafetensorsCheckpoint checkpoint,
                                                             const LoadOptions &options); // llama_model.cpp
[[nodiscard]] std::unique_ptr<LanguageModel> makeGpt2Model(const std::string &dir, ModelConfig config, SafetensorsCheckpoint checkpoint,
                                                            const LoadOptions &options); // gpt2_model.cpp

/// The factory of the class that builds `arch`.
[[nodiscard]] ModelFactory modelFactory(ModelConfig::Arch arch);

} // namespace cppl::agent
