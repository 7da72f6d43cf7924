// SPDX-License-Identifier: MIT
// Per scored token, a reference's distribution against the model's over the whole vocabulary:
// log p_ref(target), KL(P_ref || P_model) and whether their most likely tokens agree. One chunk of
// rows at a time (the two models' logits side by side, never all of either at once where they come
// in chunks).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace cppl::agent {

/// Columns of compareChunk()'s output rows.
enum ComparedColumn : std::int64_t { kRefLogProb = 0, kKld = 1, kSameTop = 2, kComparedColumns = 3 };

/**
 * For rows r of the reference's logits `ref` and the model's `model` ([m, V] each) and their
 * targets ([m] int64): out[r] = {ln p_ref(target), KL(P_ref || P_model), 1 if argmax ref = argmax
 * model else 0}, double [m, 3].
 *
 * Float32 rows on the CPU (the agent's kernels) run a fused row kernel: row maxima (and the first
 * index of each), then in one pass the sums S_ref = Σ exp(a - max a), S_model likewise and
 * S = Σ exp(a - max a) ((a - max a) - (b - max b)), exponentials in float32 and sums in double, so
 * KL = S / S_ref - ln S_ref + ln S_model, and ln p_ref(target) = (a_t - max a) - ln S_ref, as the
 * fused head's log-softmax computes it (the reference's NLL then has the bits of its own run).
 * Anything else (other dtypes, GPUs) goes through LibTorch's log_softmax in float32 with the sum in
 * double. The row kernel's bits do not depend on the thread count.
 */
void compareChunk(const at::Tensor &ref, const at::Tensor &model, const at::Tensor &targets, at::Tensor out);

} // namespace cppl::agent
