// SPDX-License-Identifier: MIT
// GPT-2: learned positions, pre-norm blocks of LayerNorm, multi-head attention over one fused c_attn
// product and a gelu_new MLP, the head tied to wte; following transformers' eager GPT2LMHeadModel.
// Each block is the same named steps on both paths: norm, attention, residual, norm, MLP, residual.
#include "attention.h"
#include "decoder_model.h"
#include "intra_op.h"
#include "model_registry.h"
#include "weight_source.h"

#include "cppl/errors.h"

#include <ATen/ATen.h>

#include <cmath>

namespace cppl::agent {

namespace {

struct Gpt2Block
{
    Norm ln1, ln2;
    Linear attn;   ///< c_attn: q | k | v in one stored weight
    Linear proj;   ///< attention's c_proj (row-parallel under tensor parallelism)
    Linear fc;     ///< the MLP's c_fc (column-parallel)
    Linear fcProj; ///< the MLP's c_proj (row-parallel)
};

class Gpt2Model final : public DecoderModel
{
public:
    Gpt2Model(const std::string &dir, ModelConfig c, SafetensorsCheckpoint ckpt, const LoadOptions &o) : DecoderModel(dir, std::move(c), o)
    {
        checkTensorParallel(m_c.heads, m_c.heads, m_c.intermediate); // before any weight loads
        m_heads = m_c.heads / tpSize();
        m_width = m_c.hidden / tpSize();
        m_intermediate = m_c.intermediate / tpSize();
        WeightSource w(std::move(ckpt), sourceOptions());
        const std::string pre = w.has("transformer.wte.weight") ? "transformer." : "";
        setVocabulary(w, pre + "wte.weight", {}); // tied to wte
        m_wpe = w.get(pre + "wpe.weight", {m_c.maxPositions, m_c.hidden});
        for (std::int64_t i = 0; i < m_c.layers; ++i)
            m_blocks.push_back(loadBlock(w, pre + "h." + std::to_string(i) + "."));
        m_finalNorm = layerNorm(w, pre + "ln_f");
        setInfo(dir, w);
    }

private:
    Norm layerNorm(WeightSource &w, const std::string &p) const
    {
        return Norm::layer(w.get(p + ".weight", {m_c.hidden}), w.get(p + ".bias", {m_c.hidden}), m_c.normEps);
    }

    // Conv1D stores [in, out]; the Linears read it transposed. One rank: one part, the whole
    // c_attn. Tensor parallelism: c_attn split by its q/k/v blocks (this rank's heads of each, three
    // parts of one product) and c_fc by columns; both c_proj by rows, their biases on member 0 only.
    Gpt2Block loadBlock(WeightSource &w, const std::string &p) const
    {
        const std::int64_t E = m_c.hidden, I = m_intermediate, El = m_width, r = tpRank();
        Gpt2Block b;
        b.ln1 = layerNorm(w, p + "ln_1");
        const std::string attn = p + "attn.c_attn";
        b.attn = tpSize() == 1 ? Linear::load(w, {{{attn, 3 * E}}, E, true, true}, m_linears)
                               : Linear::load(w, {{{attn, El, r * El, 3 * E}, {attn, El, E + r * El, 3 * E}, {attn, El, 2 * E + r * El, 3 * E}}, E, true, true},
                                              m_linears);
        b.proj = Linear::load(w, {{{p + "attn.c_proj", E}}, El, r == 0, true, r * El, E}, m_linears);
        b.ln2 = layerNorm(w, p + "ln_2");
        b.fc = Linear::load(w, {{{p + "mlp.c_fc", I, r * I, m_c.intermediate}}, E, true, true}, m_linears);
        b.fcProj = Linear::load(w, {{{p + "mlp.c_proj", E}}, I, r == 0, true, r * I, m_c.intermediate}, m_linears);
        return b;
    }

    std::int64_t headDim() const { return m_c.hidden / m_c.heads; }

    void checkWindow(std::int64_t T) const
    {
        if (T > m_c.maxPositions)
            throw ConfigError("a window of " + std::to_string(T) + " tokens is longer than the model's n_positions " + std::to_string(m_c.maxPositions)
                              + " (config.json); use a --context of at most " + std::to_string(m_c.maxPositions));
    }

    // The workspace's buffers, all [B * T, width]: the residual stream; the LayerNorm output, which
    // attention's output reuses (the norm is dead once q/k/v are computed); q/k/v, whose buffer the MLP's
    // hidden layer reuses (q/k/v are dead once attention is done).
    enum Buffer : std::size_t { kX = kResidual, kH, kWide };

    void ensureWorkspace(std::int64_t B, std::int64_t T) override
    {
        const std::int64_t rows = B * T, E = m_c.hidden;
        m_ws.reserve(rows, T, {rows * E, rows * E, rows * std::max(3 * m_width, m_intermediate)});
    }

    // The float32 CPU forward pass on the agent's own kernels, as the Llama one: activations row-major
    // in the workspace; c_proj and the MLP's c_proj accumulate (with their biases) into the residual
    // stream. Leaves the last block's output (before ln_f) in the residual stream.
    void forwardNative(const at::Tensor &ids) override
    {
        const std::int64_t B = ids.size(0), T = ids.size(1), E = m_width, hd = headDim();
        checkWindow(T);
        ensureWorkspace(B, T);
        float *x = m_ws[kX];
        m_embedding.lookup(ids, x, m_tp);
        addPositions(x, B * T, T);
        const cpu::AttentionShape s{B, T, m_heads, m_heads, hd, 3 * E, 3 * E, 3 * E, E, static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)))};
        for (const Gpt2Block &b : m_blocks)
            blockNative(b, s);
    }

    void addPositions(float *x, std::int64_t rows, std::int64_t T) const
    {
        const std::int64_t E = m_c.hidden;
        const float *wpe = m_wpe.data_ptr<float>();
        for (std::int64_t r = 0; r < rows; ++r)
            for (std::int64_t j = 0; j < E; ++j)
                x[r * E + j] += wpe[(r % T) * E + j];
    }

    // E: the residual stream's width; El: this rank's heads' (E on one rank).
    void blockNative(const Gpt2Block &b, const cpu::AttentionShape &s) const
    {
        const std::int64_t rows = s.batch * s.T, E = m_c.hidden, El = m_width, I = m_intermediate;
        float *x = m_ws[kX], *h = m_ws[kH], *wide = m_ws[kWide];
        b.ln1(x, rows, h);
        b.attn.into(h, E, rows, wide, 3 * El, false);
        cpu::causalAttention(wide, wide + El, wide + 2 * El, h, s, intraOp());
        addRowParallel(b.proj, h, El, rows, x);
        b.ln2(x, rows, h);
        b.fc.into(h, E, rows, wide, I, false);
        cpu::geluTanh(wide, rows, I, intraOp());
        addRowParallel(b.fcProj, wide, I, rows, x);
    }

    at::Tensor forwardLibTorch(const at::Tensor &ids) override
    {
        const at::Tensor dev = ids.to(m_opts.device);
        at::Tensor x = m_embedding(dev, m_tp) + at::embedding(m_wpe, at::arange(ids.size(1), dev.options()));
        // Fused attention has its own causal mask: no [T, T] tensor then.
        const at::Tensor mask = usesFusedAttention(x.device(), {}) ? at::Tensor() : causalMask(ids.size(1), x.options());
        for (const Gpt2Block &b : m_blocks)
            x = blockLibTorch(b, x, mask);
        return x;
    }

    at::Tensor blockLibTorch(const Gpt2Block &b, at::Tensor x, const at::Tensor &mask) const
    {
        const std::int64_t B = x.size(0), T = x.size(1), E = m_c.hidden;
        x = x + rowParallel(b.proj, attentionLibTorch(b, b.ln1(x), mask)).view({B, T, E});
        const at::Tensor h = at::gelu(b.fc(b.ln2(x).reshape({-1, E})), "tanh");
        return x + rowParallel(b.fcProj, h).view({B, T, E});
    }

    // q/k/v from one product, split into heads (this rank's); the output as rows [B * T, El] for c_proj.
    at::Tensor attentionLibTorch(const Gpt2Block &b, const at::Tensor &h, const at::Tensor &mask) const
    {
        const std::int64_t B = h.size(0), T = h.size(1), E = m_c.hidden, El = m_width, nh = m_heads, hd = headDim();
        const auto parts = b.attn(h.reshape({-1, E})).view({B, T, 3 * El}).split(El, 2);
        const at::Tensor q = parts[0].view({B, T, nh, hd}).transpose(1, 2);
        const at::Tensor k = parts[1].view({B, T, nh, hd}).transpose(1, 2);
        const at::Tensor v = parts[2].view({B, T, nh, hd}).transpose(1, 2);
        return causalAttention(q, k, v, mask).reshape({-1, El});
    }

    at::Tensor m_wpe;
    std::vector<Gpt2Block> m_blocks;
    std::int64_t m_heads = 0, m_width = 0, m_intermediate = 0; ///< this rank's heads, their width, its MLP columns
};

} // namespace

std::unique_ptr<LanguageModel> makeGpt2Model(const std::string &dir, ModelConfig c, SafetensorsCheckpoint ckpt, const LoadOptions &o)
{
    return std::make_unique<Gpt2Model>(dir, std::move(c), std::move(ckpt), o);
}

} // namespace cppl::agent
