// SPDX-License-Identifier: MIT
// libFuzzer target for a Hugging Face config.json (agent/lib/model/model_config.*,
// docs/fuzzing.md): any bytes are refused with IoError/ConfigError or give a configuration whose
// sizes the native models can build on (every size positive, heads a multiple of the KV heads).
#include "fuzz_support.h"

#include "cppl/errors.h"
#include "model/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size)
{
    using namespace cppl;
    agent::ModelConfig c;
    try {
        c = agent::parseModelConfig(std::string(fuzz::asText(data, size)), "config.json");
    } catch (const Error &e) {
        if (std::string_view(e.what()).empty())
            fuzz::fail("an empty error message");
        return 0;
    }
    const std::string input(fuzz::asText(data, size));
    if (c.vocab < 1 || c.hidden < 1 || c.layers < 1 || c.heads < 1 || c.kvHeads < 1 || c.intermediate < 1 || c.maxPositions < 0)
        fuzz::fail("an accepted config has a size < 1", input);
    if (c.heads % c.kvHeads != 0)
        fuzz::fail("num_attention_heads is not a multiple of num_key_value_heads", input);
    if (c.arch == agent::ModelConfig::Arch::Llama && c.headDim < 1)
        fuzz::fail("an accepted llama config has head_dim < 1", input);
    if (c.modelType.empty())
        fuzz::fail("an accepted config has no model_type", input);
    return 0;
}
