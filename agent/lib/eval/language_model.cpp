// SPDX-License-Identifier: MIT
#include "language_model.h"

#include <ATen/core/Tensor.h>

namespace cppl::agent {

at::Tensor LanguageModel::logitsAt(const at::Tensor &ids, const at::Tensor &flat)
{
    const at::Tensor l = logits(ids);
    return l.reshape({-1, l.size(-1)}).index_select(0, flat.to(l.device()));
}

} // namespace cppl::agent
