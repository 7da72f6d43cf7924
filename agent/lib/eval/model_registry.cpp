// SPDX-License-Identifier: MIT
#include "model_registry.h"

#include "cppl/errors.h"

#include <array>
#include <utility>

namespace cppl::agent {

namespace {

/// One line per class; the families each class builds are in model_config.cpp's table.
constexpr std::array<std::pair<ModelConfig::Arch, ModelFactory>, 2> kFactories{{
    {ModelConfig::Arch::Llama, makeLlamaModel},
    {ModelConfig::Arch::Gpt2, makeGpt2Model},
}};

} // namespace

ModelFactory modelFactory(ModelConfig::Arch arch)
{
    for (const auto &[a, make] : kFactories)
        if (a == arch)
            return make;
    CPPL_ENFORCE(false, "every ModelConfig::Arch has a factory in kFactories");
    return nullptr;
}

std::unique_ptr<LanguageModel> loadNativeModel(const std::string &dir, const LoadOptions &options)
{
    ModelConfig c = loadModelConfig(dir);
    SafetensorsCheckpoint ckpt = SafetensorsCheckpoint::openDirectory(dir);
    return modelFactory(c.arch)(dir, std::move(c), std::move(ckpt), options);
}

} // namespace cppl::agent
