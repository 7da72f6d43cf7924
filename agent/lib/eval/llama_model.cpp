// SPDX-License-Identifier: MIT
// Llama (+ Mistral, Qwen2, Qwen3): pre-norm decoder layers of RMSNorm, rotary grouped-query attention
// and a SiLU-gated MLP, following transformers' eager LlamaForCausalLM operation by operation (Qwen3:
// an RMSNorm over each query and key head before the rotary embedding, as its Qwen3Attention; Mistral:
// its sliding window, the attention step's mask and the keys the native kernel visits). Each
// layer is the same named steps on both paths: norm, attention, residual, norm, MLP, residual.
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
    Norm qNorm, kNorm; ///< qwen3: over each head of q and of k (ModelConfig::qkNorm), else unused
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
    LlamaModel(const std::string &dir, ModelConfig c, SafetensorsCheckpoint ckpt, const LoadOptions &o) : DecoderModel(dir, std::move(c), o)
    {
        checkTensorParallel(m_c.heads, m_c.kvHeads, m_c.intermediate); // before any weight loads
        m_heads = m_c.heads / tpSize();
        m_kvHeads = kvHeadSlice(m_c.heads, m_c.kvHeads).second;
        m_intermediate = m_c.intermediate / tpSize();
        WeightSource w(std::move(ckpt), sourceOptions());
        setVocabulary(w, "model.embed_tokens.weight", "lm_head");
        for (std::int64_t i = 0; i < m_c.layers; ++i)
            m_layers.push_back(loadLayer(w, "model.layers." + std::to_string(i) + "."));
        m_finalNorm = Norm::rms(w.get("model.norm.weight", {m_c.hidden}), m_c.normEps);
        m_rotary = Rotary(m_c, o.device);
        setInfo(dir, w);
    }

private:
    // This rank's widths: all of them on one rank; under tensor parallelism its heads' and its
    // intermediate columns' share.
    std::int64_t qWidth() const { return m_heads * m_c.headDim; }
    std::int64_t kvWidth() const { return m_kvHeads * m_c.headDim; }

    // Column-parallel q/k/v and gate/up (this rank's rows), row-parallel o and down (its columns;
    // their biases on member 0 only, added once to the group's sum). One rank: every slice is whole.
    LlamaLayer loadLayer(WeightSource &w, const std::string &p) const
    {
        const std::int64_t H = m_c.hidden, I = m_intermediate, hd = m_c.headDim, r = tpRank();
        const std::int64_t kv0 = kvHeadSlice(m_c.heads, m_c.kvHeads).first;
        const std::int64_t qAll = m_c.heads * hd, kvAll = m_c.kvHeads * hd;
        LlamaLayer l;
        l.inputNorm = Norm::rms(w.get(p + "input_layernorm.weight", {H}), m_c.normEps);
        l.postAttentionNorm = Norm::rms(w.get(p + "post_attention_layernorm.weight", {H}), m_c.normEps);
        const std::string a = p + "self_attn.", m = p + "mlp.";
        l.qkv = Linear::load(w,
                             {{{a + "q_proj", qWidth(), r * qWidth(), qAll}, {a + "k_proj", kvWidth(), kv0 * hd, kvAll}, {a + "v_proj", kvWidth(), kv0 * hd, kvAll}},
                              H,
                              m_c.qkvBias},
                             m_linears);
        l.o = Linear::load(w, {{{a + "o_proj", H}}, qWidth(), m_c.oBias && r == 0, false, r * qWidth(), qAll}, m_linears);
        l.gateUp = Linear::load(w, {{{m + "gate_proj", I, r * I, m_c.intermediate}, {m + "up_proj", I, r * I, m_c.intermediate}}, H, m_c.mlpBias}, m_linears);
        l.down = Linear::load(w, {{{m + "down_proj", H}}, I, m_c.mlpBias && r == 0, false, r * I, m_c.intermediate}, m_linears);
        if (m_c.qkNorm) {
            l.qNorm = Norm::rms(w.get(a + "q_norm.weight", {m_c.headDim}), m_c.normEps);
            l.kNorm = Norm::rms(w.get(a + "k_norm.weight", {m_c.headDim}), m_c.normEps);
        }
        return l;
    }

    // The workspace's buffers: activations [B * T, width] and the rotary tables [T, head_dim].
    enum Buffer : std::size_t { kX = kResidual, kH, kQkv, kAttn, kGu, kCos, kSin };

    void ensureWorkspace(std::int64_t B, std::int64_t T) override
    {
        const std::int64_t rows = B * T, H = m_c.hidden, hd = m_c.headDim;
        if (m_ws.reserve(rows, T, {rows * H, rows * H, rows * (qWidth() + 2 * kvWidth()), rows * qWidth(), rows * 2 * m_intermediate, T * hd, T * hd}))
            m_rotary.tables(T, m_ws[kCos], m_ws[kSin]);
    }

    NativeBatch nativeBatch(std::int64_t B, std::int64_t T)
    {
        ensureWorkspace(B, T);
        NativeBatch b{T, B * T, m_ws[kX], m_ws[kH], m_ws[kQkv], m_ws[kAttn], m_ws[kGu], m_ws[kCos], m_ws[kSin], {}};
        const std::int64_t wqkv = qWidth() + 2 * kvWidth();
        b.shape = {B, T, m_heads, m_kvHeads, m_c.headDim, wqkv, wqkv, wqkv, qWidth(),
                   static_cast<float>(1.0 / std::sqrt(static_cast<double>(m_c.headDim))), m_c.slidingWindow};
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
        addRowParallel(l.down, b.gu, 2 * m_intermediate, b.rows, b.x);
    }

    // q/k/v in one product, (qwen3) the q and k heads normed, rotary on the q and k heads (adjacent
    // in each row), causal attention.
    void attentionNative(const LlamaLayer &l, const NativeBatch &b) const
    {
        const std::int64_t wqkv = qWidth() + 2 * kvWidth();
        l.qkv.into(b.h, m_c.hidden, b.rows, b.qkv, wqkv, false);
        if (m_c.qkNorm) {
            l.qNorm.heads(b.qkv, b.rows, wqkv, m_heads);
            l.kNorm.heads(b.qkv + qWidth(), b.rows, wqkv, m_kvHeads);
        }
        cpu::rotary(b.qkv, b.rows, wqkv, m_heads + m_kvHeads, m_c.headDim, b.T, b.cos, b.sin, intraOp());
        cpu::causalAttention(b.qkv, b.qkv + qWidth(), b.qkv + qWidth() + kvWidth(), b.attn, b.shape, intraOp());
    }

    // gate/up in one product, then silu(gate) * up in the gate half.
    void mlpNative(const LlamaLayer &l, const NativeBatch &b) const
    {
        l.gateUp.into(b.h, m_c.hidden, b.rows, b.gu, 2 * m_intermediate, false);
        cpu::siluMul(b.gu, b.rows, m_intermediate, intraOp());
    }

    at::Tensor forwardLibTorch(const at::Tensor &ids) override
    {
        at::Tensor x = m_embedding(ids.to(m_opts.device));
        TorchBatch b{ids.size(0), ids.size(1), {}, {}, causalMask(ids.size(1), x.options(), m_c.slidingWindow)};
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
        at::Tensor q = qkv[0].view({b.B, b.T, m_heads, m_c.headDim});
        at::Tensor k = qkv[1].view({b.B, b.T, m_kvHeads, m_c.headDim});
        if (m_c.qkNorm) {
            q = l.qNorm(q);
            k = l.kNorm(k);
        }
        q = q.transpose(1, 2);
        k = k.transpose(1, 2);
        const at::Tensor v = qkv[2].view({b.B, b.T, m_kvHeads, m_c.headDim}).transpose(1, 2);
        return causalAttention(Rotary::apply(q, b.cos, b.sin), Rotary::apply(k, b.cos, b.sin), v, b.mask, kAttentionBlock,
                               m_c.slidingWindow > 0 && m_c.slidingWindow < b.T);
    }

    static at::Tensor mlpLibTorch(const LlamaLayer &l, const at::Tensor &h)
    {
        const std::vector<at::Tensor> gateUp = l.gateUp.parts(h);
        return at::silu(gateUp[0]) * gateUp[1];
    }

    Rotary m_rotary;
    std::vector<LlamaLayer> m_layers;
    std::int64_t m_heads = 0, m_kvHeads = 0, m_intermediate = 0; ///< this rank's (all of them on one rank)
};

} // namespace

std::unique_ptr<LanguageModel> makeLlamaModel(const std::string &dir, ModelConfig c, SafetensorsCheckpoint ckpt, const LoadOptions &o)
{
    return std::make_unique<LlamaModel>(dir, std::move(c), std::move(ckpt), o);
}

} // namespace cppl::agent
