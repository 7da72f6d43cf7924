// SPDX-License-Identifier: MIT
#include "language_model.h"

#include "cppl/errors.h"

#include <ATen/core/Tensor.h>

namespace cppl::agent {

at::Tensor LanguageModel::logitsAt(const at::Tensor &ids, const at::Tensor &flat)
{
    const at::Tensor l = logits(ids);
    return l.reshape({-1, l.size(-1)}).index_select(0, flat.to(l.device()));
}

c10::ScalarType parseDtype(const std::string &name)
{
    if (name == "float32")
        return at::kFloat;
    if (name == "bfloat16")
        return at::kBFloat16;
    if (name == "float16")
        return at::kHalf;
    throw ConfigError("--dtype \"" + name + "\" is not supported (float32, bfloat16, float16)");
}

std::string dtypeName(c10::ScalarType t)
{
    return t == at::kFloat ? "float32" : t == at::kBFloat16 ? "bfloat16" : t == at::kHalf ? "float16" : "other";
}

} // namespace cppl::agent
