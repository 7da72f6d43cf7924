// SPDX-License-Identifier: MIT
#include "rotary.h"

#include <ATen/ATen.h>

#include <cmath>
#include <numbers>

namespace cppl::agent {

namespace {

// transformers' _compute_llama3_parameters: low frequencies divided by the factor, high ones kept,
// the band between smoothly interpolated.
at::Tensor llama3Scaled(const at::Tensor &invFreq, const ModelConfig &c)
{
    const double factor = c.ropeFactor, low = c.ropeLowFreqFactor, high = c.ropeHighFreqFactor;
    const double old = c.ropeOriginalMaxPositions;
    const double lowWavelen = old / low, highWavelen = old / high;
    const at::Tensor wavelen = 2 * std::numbers::pi / invFreq;
    const at::Tensor scaled = at::where(wavelen > lowWavelen, invFreq / factor, invFreq);
    const at::Tensor smooth = (old / wavelen - low) / (high - low);
    const at::Tensor smoothed = (1 - smooth) * scaled / factor + smooth * scaled;
    const at::Tensor medium = at::logical_not(wavelen < highWavelen).logical_and(at::logical_not(wavelen > lowWavelen));
    return at::where(medium, smoothed, scaled);
}

at::Tensor rotateHalf(const at::Tensor &x)
{
    const std::int64_t half = x.size(-1) / 2;
    return at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
}

} // namespace

Rotary::Rotary(const ModelConfig &c, c10::Device device, bool local) : m_rot(c.rotaryWidth())
{
    const auto f32 = at::TensorOptions().dtype(at::kFloat);
    const double theta = local ? c.ropeLocalTheta : c.ropeTheta;
    const at::Tensor powers = at::pow(theta, at::arange(0, m_rot, 2, at::TensorOptions().dtype(at::kLong)).to(at::kFloat) / static_cast<double>(m_rot));
    at::Tensor invFreq = 1.0 / powers;
    if (!local && c.ropeLlama3)
        invFreq = llama3Scaled(invFreq, c);
    if (!local && c.ropeLinearFactor != 1.0) // transformers' linear: positions / factor, as inv_freq / factor
        invFreq = invFreq / c.ropeLinearFactor;
    if (!local && !c.ropeShortFactor.empty()) { // longrope: 1 / (factor * theta^(2i/rot)) in float32
        invFreq = 1.0 / (at::tensor(c.ropeShortFactor, f32) * powers);
        m_longInvFreq = (1.0 / (at::tensor(c.ropeLongFactor, f32) * powers)).to(device);
        m_original = c.ropeOriginalMaxPositions;
        m_attention = c.ropeAttentionFactor;
    }
    m_invFreq = invFreq.to(f32).to(device);
}

void Rotary::tables(std::int64_t T, float *cos, float *sin) const
{
    const float *inv = invFreq(T).data_ptr<float>();
    for (std::int64_t t = 0; t < T; ++t)
        for (std::int64_t i = 0; i < m_rot; ++i) {
            const float angle = static_cast<float>(t) * inv[i % (m_rot / 2)];
            cos[t * m_rot + i] = static_cast<float>(std::cos(static_cast<double>(angle)) * m_attention);
            sin[t * m_rot + i] = static_cast<float>(std::sin(static_cast<double>(angle)) * m_attention);
        }
}

std::pair<at::Tensor, at::Tensor> Rotary::tables(std::int64_t T, const at::TensorOptions &opts) const
{
    const at::Tensor &inv = invFreq(T);
    const at::Tensor freqs = at::outer(at::arange(T, inv.options()), inv);
    const at::Tensor emb = at::cat({freqs, freqs}, -1);
    if (m_attention != 1.0)
        return {emb.cos().mul(m_attention).to(opts), emb.sin().mul(m_attention).to(opts)};
    return {emb.cos().to(opts), emb.sin().to(opts)};
}

at::Tensor Rotary::apply(const at::Tensor &x, const at::Tensor &cos, const at::Tensor &sin)
{
    const std::int64_t rot = cos.size(-1);
    if (rot == x.size(-1))
        return x * cos + rotateHalf(x) * sin;
    const at::Tensor r = x.narrow(-1, 0, rot);
    return at::cat({r * cos + rotateHalf(r) * sin, x.narrow(-1, rot, x.size(-1) - rot)}, -1);
}

} // namespace cppl::agent
