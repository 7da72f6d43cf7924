// SPDX-License-Identifier: MIT
// Llama (+ Mistral, Qwen2, Qwen3): pre-norm decoder layers of RMSNorm, rotary grouped-query attention
// and a SiLU-gated MLP, following transformers' eager LlamaForCausalLM operation by operation (Qwen3:
// an RMSNorm over each query and key head before the rotary embedding, as its Qwen3Attention; Mistral:
// its sliding window, the attention step's mask and the keys the native kernel visits; Gemma 2: (1 + w)
// norms, the embedding's scale, GeGLU, norms after attention and the MLP, soft-capping, sliding layers,
// each a variation of one of the steps below, as Gemma2DecoderLayer; Gemma 3: Gemma 2's steps with (1 + w)
// q/k norms and a second rotary base for its sliding layers; Phi-3: fused q/k/v and gate/up weights split
// at load, partial and longrope rotary; Mixtral and Qwen2-MoE: a sparse MLP, moe.h, in place of the MLP
// step where the config makes the layer sparse). Each layer is the same named steps on both paths: norm,
// attention, residual, norm, MLP, residual.
#include "attention.h"
#include "decoder_model.h"
#include "intra_op.h"
#include "model_registry.h"
#include "moe.h"
#include "rotary.h"
#include "weight_source.h"

#include <ATen/ATen.h>

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cmath>
#include <tuple>

namespace cppl::agent {

namespace {

struct LlamaLayer
{
    Norm inputNorm, mlpNorm; ///< before attention and before the MLP (Llama's post_attention_layernorm)
    Norm attnOutNorm, mlpOutNorm; ///< gemma: after attention and after the MLP, before the residual adds
    Norm qNorm, kNorm; ///< qwen3: over each head of q and of k (ModelConfig::qkNorm), else unused
    std::int64_t window = 0; ///< its sliding window (0: none)
    bool localRotary = false; ///< gemma3's sliding layers: rotated with rope_local_base_freq
    Linear qkv;    ///< q_proj, k_proj, v_proj stacked (column-parallel under tensor parallelism)
    Linear o;      ///< row-parallel
    Linear gateUp; ///< gate_proj, up_proj stacked (column-parallel)
    Linear down;   ///< row-parallel
    std::shared_ptr<const MoeMlp> moe; ///< mixtral, qwen2_moe: the sparse MLP in place of gate/up and down
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
    float *out = nullptr;  ///< gemma: o_proj's and down_proj's output, normed before the residual add
    const float *cos = nullptr, *sin = nullptr;
    const float *cosLocal = nullptr, *sinLocal = nullptr; ///< gemma3's sliding layers' tables
    cpu::AttentionShape shape;
};

// One LibTorch forward pass's per-batch tables.
struct TorchBatch
{
    std::int64_t B = 0, T = 0;
    at::Tensor cos, sin, mask, windowMask; ///< the causal mask, and with the sliding window
    at::Tensor cosLocal, sinLocal;         ///< gemma3's sliding layers' tables
};

class LlamaModel final : public DecoderModel
{
public:
    LlamaModel(const std::string &dir, ModelConfig c, SafetensorsCheckpoint ckpt, const LoadOptions &o) : DecoderModel(dir, std::move(c), o)
    {
        MoeMlp::checkTensorParallel(m_c, tpSize()); // before any weight loads
        checkTensorParallel(m_c.heads, m_c.kvHeads, m_c.intermediate);
        m_heads = m_c.heads / tpSize();
        m_kvHeads = kvHeadSlice(m_c.heads, m_c.kvHeads).second;
        m_intermediate = m_c.intermediate / tpSize();
        WeightSource w(std::move(ckpt), sourceOptions());
        setVocabulary(w, "model.embed_tokens.weight", "lm_head");
        if (m_c.gemma) {
            m_embedScale = gemmaEmbeddingScale(w.view("model.embed_tokens.weight", {m_c.vocab, m_c.hidden}).dtype);
            m_head.setSoftcap(m_c.finalSoftcap);
        }
        for (std::int64_t i = 0; i < m_c.layers; ++i) {
            m_layers.push_back(loadLayer(w, "model.layers." + std::to_string(i) + ".", m_c.moe.sparse(i)));
            m_layers.back().window = m_c.windowOf(i);
            m_layers.back().localRotary = m_c.localRotary(i);
        }
        m_finalNorm = norm(w.get("model.norm.weight", {m_c.hidden}));
        m_rotary = Rotary(m_c, o.device);
        if (m_c.ropeLocalTheta > 0)
            m_localRotary = Rotary(m_c, o.device, true);
        setInfo(dir, w);
    }

private:
    // This rank's widths: all of them on one rank; under tensor parallelism its heads' and its
    // intermediate columns' share.
    std::int64_t qWidth() const { return m_heads * m_c.headDim; }
    std::int64_t kvWidth() const { return m_kvHeads * m_c.headDim; }
    // Gemma's RMSNorm multiplies by (1 + w).
    Norm norm(const at::Tensor &weight) const { return m_c.gemma ? Norm::rmsOnePlus(weight, m_c.normEps) : Norm::rms(weight, m_c.normEps); }
    double attentionScale() const { return 1.0 / std::sqrt(m_c.gemma ? m_c.queryPreAttnScalar : static_cast<double>(m_c.headDim)); }

    // Gemma multiplies the embeddings by sqrt(hidden) in the weights' dtype (transformers' normalizer):
    // the scale rounded to the stored embedding's dtype (5.65625 for hidden 32 in bfloat16).
    float gemmaEmbeddingScale(StoredDtype stored) const
    {
        const auto s = static_cast<float>(std::sqrt(static_cast<double>(m_c.hidden)));
        if (stored == StoredDtype::BF16)
            return static_cast<float>(c10::BFloat16(s));
        if (stored == StoredDtype::F16)
            return static_cast<float>(c10::Half(s));
        return s;
    }

    // Column-parallel q/k/v and gate/up (this rank's rows), row-parallel o and down (its columns;
    // their biases on member 0 only, added once to the group's sum). One rank: every slice is whole.
    LlamaLayer loadLayer(WeightSource &w, const std::string &p, bool sparse) const
    {
        const std::int64_t H = m_c.hidden, I = m_intermediate, hd = m_c.headDim, r = tpRank();
        const std::int64_t kv0 = kvHeadSlice(m_c.heads, m_c.kvHeads).first;
        const std::int64_t qAll = m_c.heads * hd;
        LlamaLayer l;
        l.inputNorm = norm(w.get(p + "input_layernorm.weight", {H}));
        if (m_c.gemma) {
            l.attnOutNorm = norm(w.get(p + "post_attention_layernorm.weight", {H}));
            l.mlpNorm = norm(w.get(p + "pre_feedforward_layernorm.weight", {H}));
            l.mlpOutNorm = norm(w.get(p + "post_feedforward_layernorm.weight", {H}));
        } else {
            l.mlpNorm = norm(w.get(p + "post_attention_layernorm.weight", {H}));
        }
        const std::string a = p + "self_attn.", m = p + "mlp.";
        l.qkv = Linear::load(w, {qkvParts(a, kv0), H, m_c.qkvBias}, m_linears);
        l.o = Linear::load(w, {{{a + "o_proj", H}}, qWidth(), m_c.oBias && r == 0, false, r * qWidth(), qAll}, m_linears);
        if (sparse) {
            l.moe = std::make_shared<const MoeMlp>(w, m_c, p, m_linears, m_tp);
        } else {
            l.gateUp = Linear::load(w, {gateUpParts(m), H, m_c.mlpBias}, m_linears);
            l.down = Linear::load(w, {{{m + "down_proj", H}}, I, m_c.mlpBias && r == 0, false, r * I, m_c.intermediate}, m_linears);
        }
        if (m_c.qkNorm) {
            l.qNorm = norm(w.get(a + "q_norm.weight", {m_c.headDim}));
            l.kNorm = norm(w.get(a + "k_norm.weight", {m_c.headDim}));
        }
        return l;
    }

    // This rank's q, k and v rows: of q_proj, k_proj and v_proj, or (phi3) of the fused qkv_proj, whose
    // rows are all of q's, then k's, then v's.
    std::vector<LinearSpec::Part> qkvParts(const std::string &a, std::int64_t kv0) const
    {
        const std::int64_t hd = m_c.headDim, r = tpRank(), qAll = m_c.heads * hd, kvAll = m_c.kvHeads * hd;
        if (m_c.fusedProjections) {
            const std::string f = a + "qkv_proj";
            return {{f, qWidth(), r * qWidth(), qAll + 2 * kvAll}, {f, kvWidth(), qAll + kv0 * hd, qAll + 2 * kvAll},
                    {f, kvWidth(), qAll + kvAll + kv0 * hd, qAll + 2 * kvAll}};
        }
        return {{a + "q_proj", qWidth(), r * qWidth(), qAll}, {a + "k_proj", kvWidth(), kv0 * hd, kvAll}, {a + "v_proj", kvWidth(), kv0 * hd, kvAll}};
    }

    // This rank's gate and up rows: of gate_proj and up_proj, or (phi3) of the fused gate_up_proj (gate's rows, then up's).
    std::vector<LinearSpec::Part> gateUpParts(const std::string &m) const
    {
        const std::int64_t I = m_intermediate, all = m_c.intermediate, r = tpRank();
        if (m_c.fusedProjections)
            return {{m + "gate_up_proj", I, r * I, 2 * all}, {m + "gate_up_proj", I, all + r * I, 2 * all}};
        return {{m + "gate_proj", I, r * I, all}, {m + "up_proj", I, r * I, all}};
    }

    // The workspace's buffers: activations [B * T, width] and the rotary tables [T, rotary width]
    // (gemma3: the sliding layers' too).
    enum Buffer : std::size_t { kX = kResidual, kH, kQkv, kAttn, kGu, kCos, kSin, kOut, kCosLocal, kSinLocal };

    void ensureWorkspace(std::int64_t B, std::int64_t T) override
    {
        const std::int64_t rows = B * T, H = m_c.hidden, rot = m_rotary.width(), local = m_c.ropeLocalTheta > 0 ? T * rot : 1;
        if (m_ws.reserve(rows, T, {rows * H, rows * H, rows * (qWidth() + 2 * kvWidth()), rows * qWidth(), rows * 2 * m_intermediate, T * rot, T * rot,
                                      m_c.gemma ? rows * H : 1, local, local})) {
            m_rotary.tables(T, m_ws[kCos], m_ws[kSin]);
            if (m_c.ropeLocalTheta > 0)
                m_localRotary.tables(T, m_ws[kCosLocal], m_ws[kSinLocal]);
        }
    }

    NativeBatch nativeBatch(std::int64_t B, std::int64_t T)
    {
        ensureWorkspace(B, T);
        NativeBatch b{T, B * T, m_ws[kX], m_ws[kH], m_ws[kQkv], m_ws[kAttn], m_ws[kGu], m_ws[kOut], m_ws[kCos], m_ws[kSin], m_ws[kCosLocal], m_ws[kSinLocal], {}};
        const std::int64_t wqkv = qWidth() + 2 * kvWidth();
        b.shape = {B, T, m_heads, m_kvHeads, m_c.headDim, wqkv, wqkv, wqkv, qWidth(),
                   static_cast<float>(attentionScale()), 0, static_cast<float>(m_c.attnSoftcap)};
        return b;
    }

    // The float32 CPU forward pass on the agent's own kernels: activations stay row-major in the
    // workspace, reused by every layer and batch; the residual stream takes o_proj and down_proj in
    // place. Leaves the last layer's output (before the final norm) in the residual stream.
    void forwardNative(const at::Tensor &ids) override
    {
        const NativeBatch b = nativeBatch(ids.size(0), ids.size(1));
        m_embedding.lookup(ids, b.x, m_tp);
        if (m_c.gemma)
            scaleRows(b.x, b.rows * m_c.hidden, m_embedScale);
        for (const LlamaLayer &l : m_layers)
            layerNative(l, b);
    }

    void layerNative(const LlamaLayer &l, const NativeBatch &b) const
    {
        l.inputNorm(b.x, b.rows, b.h);
        attentionNative(l, b);
        residualNative(l.o, l.attnOutNorm, b.attn, qWidth(), b);
        l.mlpNorm(b.x, b.rows, b.h);
        if (l.moe) {
            l.moe->addNative(b.h, b.rows, b.x, m_moeScratch);
            return;
        }
        mlpNative(l, b);
        residualNative(l.down, l.mlpOutNorm, b.gu, 2 * m_intermediate, b);
    }

    // A row-parallel product joins the residual stream: in place (Llama), or (Gemma) into b.out,
    // normed, then added (under tensor parallelism the group's sum is complete before the norm).
    void residualNative(const Linear &l, const Norm &outNorm, const float *in, std::int64_t ldin, const NativeBatch &b) const
    {
        if (!m_c.gemma) {
            addRowParallel(l, in, ldin, b.rows, b.x);
            return;
        }
        std::fill(b.out, b.out + b.rows * m_c.hidden, 0.0F);
        addRowParallel(l, in, ldin, b.rows, b.out);
        outNorm(b.out, b.rows, b.out);
        cpu::addRows(b.x, b.out, b.rows, m_c.hidden, intraOp());
    }

    static void scaleRows(float *x, std::int64_t n, float s)
    {
        for (std::int64_t i = 0; i < n; ++i)
            x[i] *= s;
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
        cpu::rotaryPartial(b.qkv, b.rows, wqkv, m_heads + m_kvHeads, m_c.headDim, m_rotary.width(), b.T, l.localRotary ? b.cosLocal : b.cos,
                           l.localRotary ? b.sinLocal : b.sin, intraOp());
        cpu::AttentionShape shape = b.shape;
        shape.window = l.window;
        cpu::causalAttention(b.qkv, b.qkv + qWidth(), b.qkv + qWidth() + kvWidth(), b.attn, shape, intraOp());
    }

    // gate/up in one product, then silu(gate) * up in the gate half.
    void mlpNative(const LlamaLayer &l, const NativeBatch &b) const
    {
        l.gateUp.into(b.h, m_c.hidden, b.rows, b.gu, 2 * m_intermediate, false);
        if (m_c.gemma)
            cpu::geluTanhMul(b.gu, b.rows, m_intermediate, intraOp());
        else
            cpu::siluMul(b.gu, b.rows, m_intermediate, intraOp());
    }

    at::Tensor forwardLibTorch(const at::Tensor &ids) override
    {
        at::Tensor x = m_embedding(ids.to(m_opts.device), m_tp);
        if (m_c.gemma) // the stored dtype's scale, then in the activations' dtype (transformers' normalizer)
            x = x.mul(at::scalar_tensor(m_embedScale, x.options()));
        TorchBatch b{ids.size(0), ids.size(1), {}, {}, {}, {}, {}, {}};
        // The [T, T] masks only where a layer reads them: fused attention has its own causal mask.
        const bool fused = usesFusedAttention(x.device(), {m_c.gemma ? attentionScale() : 0.0, m_c.attnSoftcap, false});
        const bool windowed = m_c.slidingWindow > 0 && m_c.slidingWindow < b.T;
        if (!fused)
            b.mask = causalMask(b.T, x.options());
        if (windowed)
            b.windowMask = causalMask(b.T, x.options(), m_c.slidingWindow);
        std::tie(b.cos, b.sin) = m_rotary.tables(b.T, x.options());
        if (m_c.ropeLocalTheta > 0)
            std::tie(b.cosLocal, b.sinLocal) = m_localRotary.tables(b.T, x.options());
        for (const LlamaLayer &l : m_layers)
            x = layerLibTorch(l, x, b);
        return x;
    }

    at::Tensor layerLibTorch(const LlamaLayer &l, at::Tensor x, const TorchBatch &b) const
    {
        const at::Tensor h = l.inputNorm(x);
        const at::Tensor a = rowParallel(l.o, attentionLibTorch(l, h, b));
        x = x + (m_c.gemma ? l.attnOutNorm(a) : a);
        const at::Tensor m = l.moe ? l.moe->forward(l.mlpNorm(x)) : rowParallel(l.down, mlpLibTorch(l, l.mlpNorm(x)));
        return x + (m_c.gemma ? l.mlpOutNorm(m) : m);
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
        const bool windowed = l.window > 0 && l.window < b.T;
        const AttentionOptions o{m_c.gemma ? attentionScale() : 0.0, m_c.attnSoftcap, windowed};
        const at::Tensor &cos = l.localRotary ? b.cosLocal : b.cos, &sin = l.localRotary ? b.sinLocal : b.sin;
        return causalAttention(Rotary::apply(q, cos, sin), Rotary::apply(k, cos, sin), v, windowed ? b.windowMask : b.mask, o);
    }

    at::Tensor mlpLibTorch(const LlamaLayer &l, const at::Tensor &h) const
    {
        const std::vector<at::Tensor> gateUp = l.gateUp.parts(h);
        return (m_c.gemma ? at::gelu(gateUp[0], "tanh") : at::silu(gateUp[0])) * gateUp[1];
    }

    Rotary m_rotary;
    Rotary m_localRotary; ///< gemma3's sliding layers (rope_local_base_freq)
    float m_embedScale = 1; ///< gemma: sqrt(hidden) in the stored embedding's dtype
    std::vector<LlamaLayer> m_layers;
    mutable MoeScratch m_moeScratch; ///< the sparse MLPs' buffers on the agent's kernels
    std::int64_t m_heads = 0, m_kvHeads = 0, m_intermediate = 0; ///< this rank's (all of them on one rank)
};

} // namespace

std::unique_ptr<LanguageModel> makeLlamaModel(const std::string &dir, ModelConfig c, SafetensorsCheckpoint ckpt, const LoadOptions &o)
{
    return std::make_unique<LlamaModel>(dir, std::move(c), std::move(ckpt), o);
}

} // namespace cppl::agent
