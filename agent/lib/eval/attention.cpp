// SPDX-License-Identifier: MIT
#include "attention.h"

#include "language_model.h"

#include <ATen/ATen.h>
#include <torch/csrc/api/include/torch/version.h>

#include <cmath>
#include <limits>

namespace cppl::agent {

at::Tensor causalMask(std::int64_t T, const at::TensorOptions &opts, std::int64_t window)
{
    const double inf = std::numeric_limits<double>::infinity();
    at::Tensor mask = at::full({T, T}, -inf, opts).triu(1);
    if (window > 0 && window < T)
        mask.add_(at::full({T, T}, -inf, opts).tril(-window)); // s <= t - W
    return mask;
}

namespace {

// LibTorch >= 2.0 has fused causal attention (flash / memory-efficient kernels on the GPU); 1.13,
// Debian's, does not. Checked at compile time so one source builds against both;
// CPPL_SDPA_SYNTAX_CHECK compiles this branch against declarations only (tests/agent/sdpa_syntax.h),
// so that a build against 1.13 still checks it.
#if TORCH_VERSION_MAJOR >= 2 || defined(CPPL_SDPA_SYNTAX_CHECK)
#define CPPL_HAVE_SDPA 1
// q [B, H, T, hd], k and v [B, KV, T, hd] -> [B, T, H * hd]. Without a window the kernel's own
// causal mask (is_causal: no [T, T] tensor, and flash attention skips the masked blocks); with one
// the window's additive mask. From 2.5 on the kernel reads each K/V head for its group of query
// heads (enable_gqa); before, they are repeated as transformers' repeat_kv does (query head h
// reads KV head h / rep).
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 5) || defined(CPPL_SDPA_SYNTAX_CHECK_GQA)
#define CPPL_SDPA_GQA 1
#else
#define CPPL_SDPA_GQA 0
#endif
at::Tensor fusedCausalAttention(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v, const at::Tensor &mask, bool windowed)
{
    const std::int64_t B = q.size(0), H = q.size(1), T = q.size(2), hd = q.size(3), rep = H / k.size(1);
#if CPPL_SDPA_GQA
    const at::Tensor o = windowed ? at::scaled_dot_product_attention(q, k, v, mask.to(q.scalar_type()), 0.0, false, {}, rep > 1)
                                  : at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true, {}, rep > 1);
#else
    const at::Tensor kk = rep > 1 ? k.repeat_interleave(rep, 1) : k;
    const at::Tensor vv = rep > 1 ? v.repeat_interleave(rep, 1) : v;
    const at::Tensor o = windowed ? at::scaled_dot_product_attention(q, kk, vv, mask.to(q.scalar_type()), 0.0, false)
                                  : at::scaled_dot_product_attention(q, kk, vv, {}, 0.0, /*is_causal=*/true);
#endif
    return o.transpose(1, 2).reshape({B, T, H * hd});
}
#else
#define CPPL_HAVE_SDPA 0
#endif

} // namespace

bool usesFusedAttention(const c10::Device &device, const AttentionOptions &o)
{
    return CPPL_HAVE_SDPA != 0 && device.is_cuda() && o.scale == 0 && o.softcap == 0;
}

at::Tensor causalAttention(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v, const at::Tensor &mask, const AttentionOptions &o,
                           std::int64_t block)
{
#if CPPL_HAVE_SDPA
    if (usesFusedAttention(q.device(), o))
        return fusedCausalAttention(q, k, v, mask, o.windowed);
#endif
    const std::int64_t B = q.size(0), H = q.size(1), T = q.size(2), hd = q.size(3), kv = k.size(1), rep = H / kv;
    const double scale = o.scale > 0 ? o.scale : 1.0 / std::sqrt(static_cast<double>(hd));
    const at::Tensor qs = (q * scale).reshape({B * kv, rep, T, hd});
    const at::Tensor ks = k.reshape({B * kv, T, hd});
    const at::Tensor vs = v.reshape({B * kv, T, hd});
    at::Tensor out = at::empty({B * kv, rep, T, hd}, q.options());
    for (std::int64_t q0 = 0; q0 < T; q0 += block) {
        const std::int64_t bq = std::min(block, T - q0), ke = q0 + bq;
        const at::Tensor qb = qs.narrow(2, q0, bq).reshape({B * kv, rep * bq, hd});
        at::Tensor w = at::bmm(qb, ks.narrow(1, 0, ke).transpose(1, 2)).view({B * kv, rep, bq, ke});
        if (o.softcap > 0)
            w = w.div(o.softcap).tanh_().mul_(o.softcap);
        w.add_(mask.narrow(0, q0, bq).narrow(1, 0, ke));
        w = at::softmax(w, -1, at::kFloat).to(q.scalar_type());
        out.narrow(2, q0, bq).copy_(at::bmm(w.view({B * kv, rep * bq, ke}), vs.narrow(1, 0, ke)).view({B * kv, rep, bq, hd}));
    }
    return out.view({B, H, T, hd}).transpose(1, 2).reshape({B, T, H * hd});
}

bool hasFusedAttention()
{
    return CPPL_HAVE_SDPA != 0;
}

} // namespace cppl::agent
