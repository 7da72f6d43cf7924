// SPDX-License-Identifier: MIT
#include "norm.h"

#include "cpu_gemm.h"
#include "intra_op.h"

#include "cppl/errors.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/layer_norm.h>

namespace cppl::agent {

Norm::Norm(Kind kind, at::Tensor weight, at::Tensor bias, double eps) : m_kind(kind), m_weight(std::move(weight)), m_bias(std::move(bias)), m_eps(eps) {}

Norm Norm::rms(at::Tensor weight, double eps)
{
    return {Kind::Rms, std::move(weight), {}, eps};
}

Norm Norm::rmsOnePlus(const at::Tensor &weight, double eps)
{
    return {Kind::RmsOnePlus, weight.to(at::kFloat).add(1.0), {}, eps};
}

Norm Norm::layer(at::Tensor weight, at::Tensor bias, double eps)
{
    return {Kind::Layer, std::move(weight), std::move(bias), eps};
}

void Norm::operator()(const float *x, std::int64_t rows, float *out) const
{
    const std::int64_t n = m_weight.numel();
    if (m_kind != Kind::Layer)
        cpu::rmsNorm(x, rows, n, m_weight.data_ptr<float>(), m_eps, out, intraOp());
    else
        cpu::layerNorm(x, rows, n, m_weight.data_ptr<float>(), m_bias.data_ptr<float>(), m_eps, out, intraOp());
}

void Norm::heads(float *x, std::int64_t rows, std::int64_t ld, std::int64_t heads) const
{
    CPPL_ENFORCE(m_kind != Kind::Layer, "per-head norms are RMSNorms");
    cpu::rmsNormHeads(x, rows, ld, heads, m_weight.numel(), m_weight.data_ptr<float>(), m_eps, intraOp());
}

at::Tensor Norm::operator()(const at::Tensor &x) const
{
    if (m_kind == Kind::Layer)
        return at::layer_norm(x, {m_weight.numel()}, m_weight, m_bias, m_eps);
    // weight * (h * rsqrt(mean(h^2) + eps)) in float32, spelled with the methods ATen's operators
    // call, so this file needs no more than the Tensor's own header.
    const at::Tensor h = x.to(at::kFloat);
    const at::Tensor n = h.mul(h.pow(2).mean(-1, true).add(m_eps).rsqrt());
    if (m_kind == Kind::RmsOnePlus) // Gemma multiplies in float32, then casts
        return n.mul(m_weight).to(x.scalar_type());
    return m_weight.mul(n.to(x.scalar_type()));
}

} // namespace cppl::agent
