// SPDX-License-Identifier: MIT
// LibTorch 2.x's at::scaled_dot_product_attention, declared for a LibTorch without it (Debian's
// 1.13), so that attention.cpp's 2.x branch compiles in every build (CPPL_SDPA_SYNTAX_CHECK,
// tests/agent/CMakeLists.txt): the 2.5 signature, whose first six parameters are 2.0's. Compiled
// only, never linked.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

namespace at {
Tensor scaled_dot_product_attention(const Tensor &query, const Tensor &key, const Tensor &value, const c10::optional<Tensor> &attn_mask = {},
                                    double dropout_p = 0.0, bool is_causal = false, c10::optional<double> scale = c10::nullopt,
                                    bool enable_gqa = false);
} // namespace at
