// SPDX-License-Identifier: MIT
// Llama (+ Mistral, Qwen2): pre-norm decoder layers of RMSNorm, rotary grouped-query attention and a
// SiLU-gated MLP, following transformers' eager LlamaForCausalLM operation by operation. Each layer
// is the same named steps on both paths: norm, attention, residual, norm, MLP, residual.
#include "attention.h"
#include "decoder_model.h"
#include "intra_op.h"
#include "model_registry.h"
#include "rotary.h"
#include "weight_source.h"

#include <ATen/ATen.h>

#include <cmath>
#include <tuple>

namespace cppl::agent {

namespace {

struct LlamaLayer
{
    Norm inputNorm, postAttentionNorm;
    Linear qkv;    ///< q_proj, k_proj, v_proj stacked (column-parallel under tensor parallelism)
    Linear o;      ///< row-parallel
    Linear gateUp; ///< gate_proj, up_proj stacked (column-parallel)
    Linear down;   ///< row-parallel
};

// One native forward pass's view of the workspace: activations row-major [B * T, width].
struct NativeBatch
{
    std::int64_t T = 0, rows = 0;
    float *x = nullptr;    ///< residual stream [rows, hidden]
    float *h = nullptr;    ///< normed input of attention and of the MLP [rows, hidden]
    float *qkv = nullptr;  ///< [rows, q | k | v]
    float *attn = nullptr; ///< attention's output [rows, heads * hd]
    float *gu = nullptr;   ///< [rows, gate | up]; the gate half becomes silu(gate) * up
    const float *cos = nullptr, *sin = nullptr;
    cpu::AttentionShape shape;
};

// One LibTorch forward pass's per-batch tables.
struct TorchBatch
{
    std::int64_t B = 0, T = 0;
    at::Tensor cos, sin, mask;
};

class LlamaModel final : public DecoderModel
{
public:
    LlamaModel(const std::string &dir, ModelConfig c, SafetensorsCheckpoint ckpt, const LoadOptions &o) : DecoderModel(std::move(c), o)
    {
        WeightSource w(std::move(ckpt), o);
        setVocabulary(w, "model.embed_tokens.weight", "lm_head");
        for (std::int64_t i = 0; i < m_c.layers; ++i)
            m_layers.push_back(loadLayer(w, "model.layers." + std::to_string(i) + "."));
        m_finalNorm = Norm::rms(w.get("model.norm.weight", {m_c.hidden}), m_c.normEps);
        m_rotary = Rotary(m_c, o.device);
        setInfo(dir, w);
    }

private:
    std::int64_t qWidth() const { return m_c.heads * m_c.headDim; }
    std::int64_t kvWidth() const { return m_c.kvHeads * m_c.headDim; }

    LlamaLayer loadLayer(WeightSource &w, const std::string &p) const
    {
        const std::int64_t H = m_c.hidden, I = m_c.intermediate;
        LlamaLayer l;
        l.inputNorm = Norm::rms(w.get(p + "input_layernorm.weight", {H}), m_c.normEps);
        l.postAttentionNorm = Norm::rms(w.get(p + "post_attention_layernorm.weight", {H}), m_c.normEps);
        const std::string a = p + "self_attn.", m = p + "mlp.";
        l.qkv = Linear::load(w, {{{a + "q_proj", qWidth()}, {a + "k_proj", kvWidth()}, {a + "v_proj", kvWidth()}}, H, m_c.qkvBias}, m_kind);
        l.o = Linear::load(w, {{{a + "o_proj", H}}, qWidth(), m_c.oBias}, m_kind);
        l.gateUp = Linear::load(w, {{{m + "gate_proj", I}, {m + "up_proj", I}}, H, m_c.mlpBias}, m_kind);
        l.down = Linear::load(w, {{{m + "down_proj", H}}, I, m_c.mlpBias}, m_kind);
        return l;
    }

    // The workspace's buffers: activations [B * T, width] and the rotary tables [T, head_dim].
    enum Buffer : std::size_t { kX = kResidual, kH, kQkv, kAttn, kGu, kCos, kSin };

    void ensureWorkspace(std::int64_t B, std::int64_t T) override
    {
        const std::int64_t rows = B * T, H = m_c.hidden, hd = m_c.headDim;
        if (m_ws.reserve(rows, T, {rows * H, rows * H, rows * (qWidth() + 2 * kvWidth()), rows * qWidth(), rows * 2 * m_c.intermediate, T * hd, T * hd}))
            m_rotary.tables(T, m_ws[kCos], m_ws[kSin]);
    }

    NativeBatch nativeBatch(std::int64_t B, std::int64_t T)
    {
        ensureWorkspace(B, T);
        NativeBatch b{T, B * T, m_ws[kX], m_ws[kH], m_ws[kQkv], m_ws[kAttn], m_ws[kGu], m_ws[kCos], m_ws[kSin], {}};
        const std::int64_t wqkv = qWidth() + 2 * kvWidth();
        b.shape = {B, T, m_c.heads, m_c.kvHeads, m_c.headDim, wqkv, wqkv, wqkv, qWidth(),
                   static_cast<float>(1.0 / std::sqrt(static_cast<double>(m_c.headDim)))};
        return b;
    }

    // The float32 CPU forward pass on the agent's own kernels: activations stay row-major in the
    // workspace, reused by every layer and batch; the residual stream takes o_proj and down_proj in
    // place. Leaves the last layer's output (before the final norm) in the residual stream.
    void forwardNative(const at::Tensor &ids) override
    {
        const NativeBatch b = nativeBatch(ids.size(0), ids.size(1));
        m_embedding.lookup(ids, b.x, m_tp);
        for (const LlamaLayer &l : m_layers)
            layerNative(l, b);
    }

    void layerNative(const LlamaLayer &l, const NativeBatch &b) const
    {
        l.inputNorm(b.x, b.rows, b.h);
        attentionNative(l, b);
        addRowParallel(l.o, b.attn, qWidth(), b.rows, b.x);
        l.postAttentionNorm(b.x, b.rows, b.h);
        mlpNative(l, b);
        addRowParallel(l.down, b.gu, 2 * m_c.intermediate, b.rows, b.x);
    }

    // q/k/v in one product, rotary on the q and k heads (adjacent in each row), causal attention.
    void attentionNative(const LlamaLayer &l, const NativeBatch &b) const
    {
        const std::int64_t wqkv = qWidth() + 2 * kvWidth();
        l.qkv.into(b.h, m_c.hidden, b.rows, b.qkv, wqkv, false);
        cpu::rotary(b.qkv, b.rows, wqkv, m_c.heads + m_c.kvHeads, m_c.headDim, b.T, b.cos, b.sin, intraOp());
        cpu::causalAttention(b.qkv, b.qkv + qWidth(), b.qkv + qWidth() + kvWidth(), b.attn, b.shape, intraOp());
    }

    // gate/up in one product, then silu(gate) * up in the gate half.
    void mlpNative(const LlamaLayer &l, const NativeBatch &b) const
    {
        l.gateUp.into(b.h, m_c.hidden, b.rows, b.gu, 2 * m_c.intermediate, false);
        cpu::siluMul(b.gu, b.rows, m_c.intermediate, intraOp());
    }

    at::Tensor forwardLibTorch(const at::Tensor &ids) override
    {
        at::Tensor x = m_embedding(ids.to(m_opts.device));
        TorchBatch b{ids.size(0), ids.size(1), {}, {}, causalMask(ids.size(1), x.options())};
        std::tie(b.cos, b.sin) = m_rotary.tables(b.T, x.options());
        for (const LlamaLayer &l : m_layers)
            x = layerLibTorch(l, x, b);
        return x;
    }

    at::Tensor layerLibTorch(const LlamaLayer &l, at::Tensor x, const TorchBatch &b) const
    {
        const at::Tensor h = l.inputNorm(x);
        x = x + rowParallel(l.o, attentionLibTorch(l, h, b));
        const at::Tensor h2 = l.postAttentionNorm(x);
        return x + rowParallel(l.down, mlpLibTorch(l, h2));
    }

    at::Tensor attentionLibTorch(const LlamaLayer &l, const at::Tensor &h, const TorchBatch &b) const
    {
        const std::vector<at::Tensor> qkv = l.qkv.parts(h);
        const at::Tensor q = qkv[0].view({b.B, b.T, m_c.heads, m_c.headDim}).transpose(1, 2);
        const at::Tensor k = qkv[1].view({b.B, b.T, m_c.kvHeads, m_c.headDim}).transpose(1, 2);
        const at::Tensor v = qkv[2].view({b.B, b.T, m_c.kvHeads, m_c.headDim}).transpose(1, 2);
        return causalAttention(Rotary::apply(q, b.cos, b.sin), Rotary::apply(k, b.cos, b.sin), v, b.mask);
    }

    static at::Tensor mlpLibTorch(const LlamaLayer &l, const at::Tensor &h)
    {
        const std::vector<at::Tensor> gateUp = l.gateUp.parts(h);
        return at::silu(gateUp[0]) * gateUp[1];
    }

    Rotary m_rotary;
    std::vector<LlamaLayer> m_layers;
};

} // namespace

std::unique_ptr<LanguageModel> makeLlamaModel(const std::string &dir, ModelConfig c, SafetensorsCheckpoint ckpt, const LoadOptions &o)
{
    return std::make_unique<LlamaModel>(dir, std::move(c), std::move(ckpt), o);
}

} // namespace cppl::agent
