// SPDX-License-Identifier: MIT
// Native Llama (+ Mistral, Qwen2) and GPT-2 forward passes over memory-mapped safetensors weights,
// following transformers' eager implementations operation by operation.
#include "cpu_gemm.h"
#include "language_model.h"

#include "model/model_config.h"
#include "model/safetensors.h"

#include "cppl/errors.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cmath>
#include <numbers>
#include <sstream>

namespace cppl::agent {

namespace {

std::string shapeText(at::IntArrayRef s)
{
    std::ostringstream o;
    o << '[';
    for (std::size_t i = 0; i < s.size(); ++i)
        o << (i ? ", " : "") << s[i];
    o << ']';
    return o.str();
}

// Owns the mapping and hands out tensors in the evaluation dtype/device. A tensor whose stored
// dtype and device already match is used in place (from_blob over the read-only mapping).
class WeightSource
{
public:
    WeightSource(SafetensorsCheckpoint ckpt, const LoadOptions &o) : m_ckpt(std::move(ckpt)), m_opts(o) {}

    at::Tensor get(const std::string &name, std::vector<std::int64_t> expected)
    {
        const TensorView &v = m_ckpt.at(name);
        if (v.shape != expected)
            throw IoError(m_ckpt.directory() + ": tensor \"" + name + "\" has shape " + shapeText(v.shape) + ", expected "
                          + shapeText(expected) + " from config.json");
        const at::ScalarType stored = v.dtype == StoredDtype::F32 ? at::kFloat : v.dtype == StoredDtype::F16 ? at::kHalf : at::kBFloat16;
        // The mapping is read-only and the tensor is never written; from_blob needs a non-const pointer.
        // The deleter holds the mapping, so it lives exactly as long as any tensor over it.
        at::Tensor t = at::from_blob(
            const_cast<unsigned char *>(v.data), v.shape, [file = v.file](void *) {}, at::TensorOptions().dtype(stored));
        if (stored != m_opts.dtype || !m_opts.device.is_cpu())
            t = t.to(m_opts.device, m_opts.dtype);
        m_params += v.numel();
        m_bytes += v.numel() * static_cast<std::int64_t>(c10::elementSize(m_opts.dtype));
        return t;
    }
    [[nodiscard]] bool has(const std::string &name) const { return m_ckpt.contains(name); }
    /// After a tensor was repacked, its mapped pages are dropped at once, so the load never holds
    /// both copies of more than one tensor (peak RSS ~ weights, not 2x).
    void release(const std::string &name) const
    {
        const TensorView &v = m_ckpt.at(name);
        v.file->releaseRange(v.data, v.bytes);
    }
    [[nodiscard]] std::int64_t params() const { return m_params; }
    [[nodiscard]] std::int64_t bytes() const { return m_bytes; }
    [[nodiscard]] const SafetensorsCheckpoint &checkpoint() const { return m_ckpt; }


private:
    SafetensorsCheckpoint m_ckpt;
    LoadOptions m_opts;
    std::int64_t m_params = 0;
    std::int64_t m_bytes = 0;
};

at::Tensor optionalBias(WeightSource &w, bool present, const std::string &name, std::int64_t n)
{
    return present ? w.get(name, {n}) : at::Tensor();
}

/// Who runs the dense layers (and, with Native, attention and the element-wise steps too).
enum class Path { Blas, OneDnn, Native };

Path choosePath(const LoadOptions &o)
{
    const bool cpuFloat = o.dtype == at::kFloat && o.device.is_cpu();
    switch (o.gemm) {
    case GemmBackend::Native:
        if (!cpuFloat)
            throw ConfigError("--gemm native needs float32 on the CPU; other dtypes and GPUs use LibTorch's kernels (--gemm auto)");
        return Path::Native;
    case GemmBackend::OneDnn:
        if (!at::hasMKLDNN() || !cpuFloat)
            throw ConfigError("--gemm onednn needs float32 on the CPU and a LibTorch built with oneDNN (mkldnn)");
        return Path::OneDnn;
    case GemmBackend::Blas:
        return Path::Blas;
    case GemmBackend::Auto:
        break;
    }
    return cpuFloat ? Path::Native : Path::Blas;
}

std::string pathName(Path p)
{
    return p == Path::Native ? std::string("native-") + cpu::isaName(cpu::detectIsa()) : p == Path::OneDnn ? "onednn" : "blas";
}

// LibTorch's intra-op pool (its thread count is --threads) runs the native kernels' tasks.
const cpu::ParallelFor &intraOp()
{
    static const cpu::ParallelFor pf = [](std::int64_t n, const std::function<void(std::int64_t, std::int64_t)> &f) { at::parallel_for(0, n, 1, f); };
    return pf;
}

float *fptr(const at::Tensor &t) { return t.data_ptr<float>(); }

// A dense layer y = x W^T + b. With oneDNN or Native the weight is packed once at load (a copy; the
// mapped original is then released). oneDNN converts the activations in and out on each call.
struct Linear
{
    at::Tensor weight; ///< [out, in] (a transposed view for GPT-2's Conv1D)
    at::Tensor bias;
    at::Tensor packed;
    at::Tensor packedBias;
    std::shared_ptr<cpu::PackedMatrix> native;

    static Linear make(at::Tensor w, at::Tensor b, Path path)
    {
        Linear l{std::move(w), std::move(b), {}, {}, {}};
        if (path == Path::OneDnn) {
            l.packed = l.weight.contiguous().to_mkldnn();
            if (l.bias.defined())
                l.packedBias = l.bias.contiguous().to_mkldnn();
        } else if (path == Path::Native) {
            const at::Tensor c = l.weight.contiguous();
            l.native = std::make_shared<cpu::PackedMatrix>(c.size(0), c.size(1));
            l.native->packRows(0, fptr(c), c.size(1), c.size(0));
            if (l.bias.defined())
                l.bias = l.bias.contiguous();
        }
        return l;
    }

    // Loads WEIGHT (+ BIAS) and, when packed, releases the mapped original straight away.
    static Linear load(WeightSource &w, const std::string &weight, std::vector<std::int64_t> shape, const at::Tensor &bias, Path path,
                       bool transposed = false)
    {
        at::Tensor t = w.get(weight, std::move(shape));
        Linear l = make(transposed ? t.t() : t, bias, path);
        if (path != Path::Blas)
            w.release(weight);
        return l;
    }

    [[nodiscard]] const float *biasData() const { return bias.defined() ? fptr(bias) : nullptr; }

    /// x [rows, in] (contiguous rows, any row stride ldx) -> out [rows, out] (stride ldo), += when accumulate.
    void into(const float *x, std::int64_t ldx, std::int64_t rows, float *out, std::int64_t ldo, bool accumulate) const
    {
        cpu::gemm(x, ldx, rows, native->view(), out, ldo, biasData(), accumulate, intraOp());
    }

    at::Tensor operator()(const at::Tensor &x) const
    {
        if (native) {
            std::vector<std::int64_t> sizes = x.sizes().vec();
            const at::Tensor x2 = x.reshape({-1, sizes.back()}).contiguous();
            at::Tensor y = at::empty({x2.size(0), native->n()}, x.options());
            into(fptr(x2), x2.size(1), x2.size(0), fptr(y), native->n(), false);
            sizes.back() = native->n();
            return y.view(sizes);
        }
        if (!packed.defined())
            return at::linear(x, weight, bias);
        std::vector<std::int64_t> sizes = x.sizes().vec();
        const at::Tensor y = at::mkldnn_linear(x.reshape({-1, sizes.back()}).contiguous().to_mkldnn(), packed,
                                               packedBias.defined() ? c10::optional<at::Tensor>(packedBias) : c10::nullopt)
                                 .to_dense();
        sizes.back() = weight.size(0);
        return y.view(sizes);
    }
};

ModelInfo baseInfo(const std::string &dir, const ModelConfig &c, const WeightSource &w)
{
    ModelInfo info;
    info.path = dir;
    info.format = "hf";
    info.arch = c.modelType;
    info.params = w.params();
    info.vocab = c.vocab;
    info.maxPositions = c.maxPositions;
    info.bosTokenId = c.bosTokenId;
    info.weightFiles = w.checkpoint().files();
    info.weightBytes = w.bytes();
    info.shape = {c.hidden, c.intermediate, c.layers, c.heads, c.kvHeads, c.headDim, c.vocab};
    return info;
}

// Causal mask: -inf above the diagonal. transformers uses the dtype's lowest finite value; after
// softmax both give exactly 0, and -inf exists in every dtype (bfloat16/float16 included).
at::Tensor causalMask(std::int64_t T, const at::TensorOptions &opts)
{
    return at::full({T, T}, -std::numeric_limits<double>::infinity(), opts).triu(1);
}

// LibTorch >= 2.0 has fused causal attention (flash / memory-efficient kernels on the GPU); 1.13,
// Debian's, does not. Checked at compile time so one source builds against both.
#if __has_include(<ATen/ops/scaled_dot_product_attention.h>)
#define CPPL_HAVE_SDPA 1
// Grouped-query K/V heads are repeated as transformers' repeat_kv does (query head h reads KV head
// h / rep); enable_gqa exists only from 2.5 on. q [B, H, T, hd], k and v [B, KV, T, hd] -> [B, T, H * hd].
at::Tensor fusedCausalAttention(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v)
{
    const std::int64_t B = q.size(0), H = q.size(1), T = q.size(2), hd = q.size(3), rep = H / k.size(1);
    const at::Tensor kk = rep > 1 ? k.repeat_interleave(rep, 1) : k;
    const at::Tensor vv = rep > 1 ? v.repeat_interleave(rep, 1) : v;
    return at::scaled_dot_product_attention(q, kk, vv, {}, 0.0, /*is_causal=*/true).transpose(1, 2).reshape({B, T, H * hd});
}
#else
#define CPPL_HAVE_SDPA 0
#endif

/**
 * Causal attention over query blocks: block i attends only to keys 0..end of block i, so the
 * masked upper triangle is mostly never computed (37% less work at T = 512 with 128-row blocks) and
 * the score matrix never exists in full (a quarter of the memory). Grouped-query heads are folded
 * into the rows of one GEMM per KV head instead of copying K/V per query head.
 * q [B, H, T, hd], k and v [B, KV, T, hd] -> [B, T, H * hd].
 */
at::Tensor causalAttention(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v, const at::Tensor &mask, std::int64_t block)
{
#if CPPL_HAVE_SDPA
    if (q.is_cuda())
        return fusedCausalAttention(q, k, v);
#endif
    const std::int64_t B = q.size(0), H = q.size(1), T = q.size(2), hd = q.size(3), kv = k.size(1), rep = H / kv;
    const at::Tensor qs = (q * (1.0 / std::sqrt(static_cast<double>(hd)))).reshape({B * kv, rep, T, hd});
    const at::Tensor ks = k.reshape({B * kv, T, hd});
    const at::Tensor vs = v.reshape({B * kv, T, hd});
    at::Tensor out = at::empty({B * kv, rep, T, hd}, q.options());
    for (std::int64_t q0 = 0; q0 < T; q0 += block) {
        const std::int64_t bq = std::min(block, T - q0), ke = q0 + bq;
        const at::Tensor qb = qs.narrow(2, q0, bq).reshape({B * kv, rep * bq, hd});
        at::Tensor w = at::bmm(qb, ks.narrow(1, 0, ke).transpose(1, 2)).view({B * kv, rep, bq, ke});
        w.add_(mask.narrow(0, q0, bq).narrow(1, 0, ke));
        w = at::softmax(w, -1, at::kFloat).to(q.scalar_type());
        out.narrow(2, q0, bq).copy_(at::bmm(w.view({B * kv, rep * bq, ke}), vs.narrow(1, 0, ke)).view({B * kv, rep, bq, hd}));
    }
    return out.view({B, H, T, hd}).transpose(1, 2).reshape({B, T, H * hd});
}

constexpr std::int64_t kAttentionBlock = 128;

class LlamaModel final : public LanguageModel
{
public:
    LlamaModel(const std::string &dir, ModelConfig c, SafetensorsCheckpoint ckpt, const LoadOptions &o)
        : m_c(std::move(c)), m_opts(o), m_path(choosePath(o))
    {
        WeightSource w(std::move(ckpt), o);
        const std::int64_t H = m_c.hidden, hd = m_c.headDim, I = m_c.intermediate;
        const bool native = m_path == Path::Native;
        m_embed = w.get("model.embed_tokens.weight", {m_c.vocab, H});
        for (std::int64_t i = 0; i < m_c.layers; ++i) {
            const std::string p = "model.layers." + std::to_string(i) + ".";
            Layer l;
            l.inNorm = w.get(p + "input_layernorm.weight", {H});
            l.postNorm = w.get(p + "post_attention_layernorm.weight", {H});
            const Path dnn = m_path;
            if (native) {
                // q/k/v and gate/up each become one packed product (packed straight from the mapping, no temporary).
                const std::int64_t nq = m_c.heads * hd, nk = m_c.kvHeads * hd;
                l.qkv = std::make_shared<cpu::PackedMatrix>(nq + 2 * nk, H);
                packRows(w, *l.qkv, 0, p + "self_attn.q_proj.weight", {nq, H});
                packRows(w, *l.qkv, nq, p + "self_attn.k_proj.weight", {nk, H});
                packRows(w, *l.qkv, nq + nk, p + "self_attn.v_proj.weight", {nk, H});
                if (m_c.qkvBias)
                    l.qkvBias = at::cat({w.get(p + "self_attn.q_proj.bias", {nq}), w.get(p + "self_attn.k_proj.bias", {nk}),
                                         w.get(p + "self_attn.v_proj.bias", {nk})});
                l.o = Linear::load(w, p + "self_attn.o_proj.weight", {H, nq}, optionalBias(w, m_c.oBias, p + "self_attn.o_proj.bias", H), dnn);
                l.gateUp = std::make_shared<cpu::PackedMatrix>(2 * I, H);
                packRows(w, *l.gateUp, 0, p + "mlp.gate_proj.weight", {I, H});
                packRows(w, *l.gateUp, I, p + "mlp.up_proj.weight", {I, H});
                if (m_c.mlpBias)
                    l.gateUpBias = at::cat({w.get(p + "mlp.gate_proj.bias", {I}), w.get(p + "mlp.up_proj.bias", {I})});
                l.down = Linear::load(w, p + "mlp.down_proj.weight", {H, I}, optionalBias(w, m_c.mlpBias, p + "mlp.down_proj.bias", H), dnn);
                m_layers.push_back(std::move(l));
                continue;
            }
            l.q = Linear::load(w, p + "self_attn.q_proj.weight", {m_c.heads * hd, H},
                               optionalBias(w, m_c.qkvBias, p + "self_attn.q_proj.bias", m_c.heads * hd), dnn);
            l.k = Linear::load(w, p + "self_attn.k_proj.weight", {m_c.kvHeads * hd, H},
                               optionalBias(w, m_c.qkvBias, p + "self_attn.k_proj.bias", m_c.kvHeads * hd), dnn);
            l.v = Linear::load(w, p + "self_attn.v_proj.weight", {m_c.kvHeads * hd, H},
                               optionalBias(w, m_c.qkvBias, p + "self_attn.v_proj.bias", m_c.kvHeads * hd), dnn);
            l.o = Linear::load(w, p + "self_attn.o_proj.weight", {H, m_c.heads * hd}, optionalBias(w, m_c.oBias, p + "self_attn.o_proj.bias", H), dnn);
            l.gate = Linear::load(w, p + "mlp.gate_proj.weight", {I, H}, optionalBias(w, m_c.mlpBias, p + "mlp.gate_proj.bias", I), dnn);
            l.up = Linear::load(w, p + "mlp.up_proj.weight", {I, H}, optionalBias(w, m_c.mlpBias, p + "mlp.up_proj.bias", I), dnn);
            l.down = Linear::load(w, p + "mlp.down_proj.weight", {H, I}, optionalBias(w, m_c.mlpBias, p + "mlp.down_proj.bias", H), dnn);
            m_layers.push_back(std::move(l));
        }
        m_norm = w.get("model.norm.weight", {H});
        // A tied head shares the embedding, which the embedding lookup keeps using: never released.
        m_head = m_c.tied ? Linear::make(m_embed, {}, m_path) : Linear::load(w, "lm_head.weight", {m_c.vocab, H}, {}, m_path);
        m_info = baseInfo(dir, m_c, w);
        m_info.gemm = pathName(m_path);
        m_info.device = o.device;

        // inv_freq exactly as transformers computes it (float32), with llama3 scaling when configured.
        const auto f32 = at::TensorOptions().dtype(at::kFloat);
        at::Tensor invFreq = 1.0 / at::pow(m_c.ropeTheta, at::arange(0, hd, 2, at::TensorOptions().dtype(at::kLong)).to(at::kFloat) / static_cast<double>(hd));
        if (m_c.ropeLlama3) {
            const double factor = m_c.ropeFactor, low = m_c.ropeLowFreqFactor, high = m_c.ropeHighFreqFactor;
            const double old = m_c.ropeOriginalMaxPositions;
            const double lowWavelen = old / low, highWavelen = old / high;
            const at::Tensor wavelen = 2 * std::numbers::pi / invFreq;
            at::Tensor scaled = at::where(wavelen > lowWavelen, invFreq / factor, invFreq);
            const at::Tensor smooth = (old / wavelen - low) / (high - low);
            const at::Tensor smoothed = (1 - smooth) * scaled / factor + smooth * scaled;
            const at::Tensor medium = at::logical_not(wavelen < highWavelen).logical_and(at::logical_not(wavelen > lowWavelen));
            invFreq = at::where(medium, smoothed, scaled);
        }
        m_invFreq = invFreq.to(f32).to(o.device); // on the model's device, like every table hidden() builds from it
    }

    const ModelInfo &info() const override { return m_info; }

    at::Tensor logits(const at::Tensor &ids) override { return m_head(hidden(ids)); }

    at::Tensor logitsAt(const at::Tensor &ids, const at::Tensor &flat) override
    {
        const at::Tensor h = hidden(ids);
        return m_head(h.reshape({-1, m_c.hidden}).index_select(0, flat.to(h.device()))); // the caller's index may be on the CPU
    }

private:
    struct Layer
    {
        at::Tensor inNorm, postNorm;
        Linear q, k, v, o, gate, up, down;
        std::shared_ptr<cpu::PackedMatrix> qkv, gateUp; // Native: fused products
        at::Tensor qkvBias, gateUpBias;
    };

    static void packRows(WeightSource &w, cpu::PackedMatrix &into, std::int64_t row0, const std::string &name, std::vector<std::int64_t> shape)
    {
        const at::Tensor t = w.get(name, shape).contiguous();
        into.packRows(row0, fptr(t), shape[1], shape[0]);
        w.release(name);
    }

    static const float *optionalData(const at::Tensor &t) { return t.defined() ? fptr(t) : nullptr; }

    // The float32 CPU forward pass on the agent's own kernels: activations stay row-major [B * T, width]
    // in a few buffers reused by every layer; the residual stream takes o_proj and down_proj in place.
    at::Tensor hiddenNative(const at::Tensor &ids)
    {
        const std::int64_t B = ids.size(0), T = ids.size(1), rows = B * T, H = m_c.hidden, hd = m_c.headDim, I = m_c.intermediate;
        const std::int64_t nq = m_c.heads * hd, nk = m_c.kvHeads * hd, wqkv = nq + 2 * nk;
        const cpu::ParallelFor &par = intraOp();
        at::Tensor x = at::embedding(m_embed, ids.to(m_opts.device)).reshape({rows, H}).contiguous();
        const auto opts = x.options();
        // cos/sin of float32 angles t * inv_freq as transformers forms them, evaluated in double here:
        // LibTorch's vectorised cos gave other last bits at some positions depending on the threads.
        const at::Tensor cos = at::empty({T, hd}, opts), sin = at::empty({T, hd}, opts);
        {
            const float *inv = fptr(m_invFreq);
            float *c = fptr(cos), *sn = fptr(sin);
            for (std::int64_t t = 0; t < T; ++t)
                for (std::int64_t i = 0; i < hd; ++i) {
                    const float angle = static_cast<float>(t) * inv[i % (hd / 2)];
                    c[t * hd + i] = static_cast<float>(std::cos(static_cast<double>(angle)));
                    sn[t * hd + i] = static_cast<float>(std::sin(static_cast<double>(angle)));
                }
        }
        const at::Tensor h = at::empty({rows, H}, opts);
        const at::Tensor qkv = at::empty({rows, wqkv}, opts);
        const at::Tensor attn = at::empty({rows, nq}, opts);
        const at::Tensor gu = at::empty({rows, 2 * I}, opts);
        cpu::AttentionShape shape;
        shape.batch = B;
        shape.T = T;
        shape.heads = m_c.heads;
        shape.kvHeads = m_c.kvHeads;
        shape.hd = hd;
        shape.ldq = shape.ldk = shape.ldv = wqkv;
        shape.ldo = nq;
        shape.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
        for (const Layer &l : m_layers) {
            cpu::rmsNorm(fptr(x), rows, H, fptr(l.inNorm), m_c.normEps, fptr(h), par);
            cpu::gemm(fptr(h), H, rows, l.qkv->view(), fptr(qkv), wqkv, optionalData(l.qkvBias), false, par);
            cpu::rotary(fptr(qkv), rows, wqkv, m_c.heads + m_c.kvHeads, hd, T, fptr(cos), fptr(sin), par); // q and k heads are adjacent
            cpu::causalAttention(fptr(qkv), fptr(qkv) + nq, fptr(qkv) + nq + nk, fptr(attn), shape, par);
            l.o.into(fptr(attn), nq, rows, fptr(x), H, true);
            cpu::rmsNorm(fptr(x), rows, H, fptr(l.postNorm), m_c.normEps, fptr(h), par);
            cpu::gemm(fptr(h), H, rows, l.gateUp->view(), fptr(gu), 2 * I, optionalData(l.gateUpBias), false, par);
            cpu::siluMul(fptr(gu), rows, I, par);
            l.down.into(fptr(gu), 2 * I, rows, fptr(x), H, true);
        }
        cpu::rmsNorm(fptr(x), rows, H, fptr(m_norm), m_c.normEps, fptr(h), par);
        return h.view({B, T, H});
    }

    at::Tensor rmsNorm(const at::Tensor &x, const at::Tensor &weight) const
    {
        const at::Tensor h = x.to(at::kFloat);
        const at::Tensor n = h * at::rsqrt(h.pow(2).mean(-1, true) + m_c.normEps);
        return weight * n.to(x.scalar_type());
    }

    static at::Tensor rotateHalf(const at::Tensor &x)
    {
        const std::int64_t half = x.size(-1) / 2;
        return at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
    }

    at::Tensor hidden(const at::Tensor &ids)
    {
        if (m_path == Path::Native)
            return hiddenNative(ids);
        const std::int64_t B = ids.size(0), T = ids.size(1), hd = m_c.headDim, kv = m_c.kvHeads;
        at::Tensor x = at::embedding(m_embed, ids.to(m_opts.device));
        const auto opts = x.options();
        const at::Tensor freqs = at::outer(at::arange(T, m_invFreq.options()), m_invFreq);
        const at::Tensor emb = at::cat({freqs, freqs}, -1);
        const at::Tensor cos = emb.cos().to(opts), sin = emb.sin().to(opts);
        const at::Tensor mask = causalMask(T, opts);
        for (const Layer &l : m_layers) {
            const at::Tensor h = rmsNorm(x, l.inNorm);
            at::Tensor q = l.q(h).view({B, T, m_c.heads, hd}).transpose(1, 2);
            at::Tensor k = l.k(h).view({B, T, kv, hd}).transpose(1, 2);
            const at::Tensor v = l.v(h).view({B, T, kv, hd}).transpose(1, 2);
            q = q * cos + rotateHalf(q) * sin;
            k = k * cos + rotateHalf(k) * sin;
            x = x + l.o(causalAttention(q, k, v, mask, kAttentionBlock));
            const at::Tensor h2 = rmsNorm(x, l.postNorm);
            x = x + l.down(at::silu(l.gate(h2)) * l.up(h2));
        }
        return rmsNorm(x, m_norm);
    }

    ModelConfig m_c;
    LoadOptions m_opts;
    Path m_path = Path::Blas;
    ModelInfo m_info;
    at::Tensor m_embed, m_norm, m_invFreq;
    Linear m_head;
    std::vector<Layer> m_layers;
};

class Gpt2Model final : public LanguageModel
{
public:
    Gpt2Model(const std::string &dir, ModelConfig c, SafetensorsCheckpoint ckpt, const LoadOptions &o)
        : m_c(std::move(c)), m_opts(o), m_path(choosePath(o))
    {
        WeightSource w(std::move(ckpt), o);
        const std::string pre = w.has("transformer.wte.weight") ? "transformer." : "";
        const std::int64_t E = m_c.hidden, I = m_c.intermediate;
        m_wte = w.get(pre + "wte.weight", {m_c.vocab, E});
        m_wpe = w.get(pre + "wpe.weight", {m_c.maxPositions, E});
        for (std::int64_t i = 0; i < m_c.layers; ++i) {
            const std::string p = pre + "h." + std::to_string(i) + ".";
            Block b;
            b.ln1w = w.get(p + "ln_1.weight", {E});
            b.ln1b = w.get(p + "ln_1.bias", {E});
            // Conv1D stores [in, out]; Linear wants [out, in]: a transposed view (packed copy with oneDNN).
            b.attn = Linear::load(w, p + "attn.c_attn.weight", {E, 3 * E}, w.get(p + "attn.c_attn.bias", {3 * E}), m_path, true);
            b.proj = Linear::load(w, p + "attn.c_proj.weight", {E, E}, w.get(p + "attn.c_proj.bias", {E}), m_path, true);
            b.ln2w = w.get(p + "ln_2.weight", {E});
            b.ln2b = w.get(p + "ln_2.bias", {E});
            b.fc = Linear::load(w, p + "mlp.c_fc.weight", {E, I}, w.get(p + "mlp.c_fc.bias", {I}), m_path, true);
            b.fcProj = Linear::load(w, p + "mlp.c_proj.weight", {I, E}, w.get(p + "mlp.c_proj.bias", {E}), m_path, true);
            m_blocks.push_back(std::move(b));
        }
        m_lnfW = w.get(pre + "ln_f.weight", {E});
        m_lnfB = w.get(pre + "ln_f.bias", {E});
        m_head = Linear::make(m_wte, {}, m_path); // tied to wte, which the lookup keeps using
        m_info = baseInfo(dir, m_c, w);
        m_info.gemm = pathName(m_path);
        m_info.device = o.device;
    }

    const ModelInfo &info() const override { return m_info; }

    at::Tensor logits(const at::Tensor &ids) override { return m_head(hidden(ids)); }

    at::Tensor logitsAt(const at::Tensor &ids, const at::Tensor &flat) override
    {
        const at::Tensor h = hidden(ids);
        return m_head(h.reshape({-1, m_c.hidden}).index_select(0, flat.to(h.device()))); // the caller's index may be on the CPU
    }

private:
    struct Block
    {
        at::Tensor ln1w, ln1b, ln2w, ln2b;
        Linear attn, proj, fc, fcProj;
    };

    at::Tensor hidden(const at::Tensor &ids)
    {
        const std::int64_t B = ids.size(0), T = ids.size(1), E = m_c.hidden, nh = m_c.heads, hd = E / nh;
        const at::Tensor dev = ids.to(m_opts.device);
        at::Tensor x = at::embedding(m_wte, dev) + at::embedding(m_wpe, at::arange(T, dev.options()));
        const at::Tensor mask = causalMask(T, x.options());
        for (const Block &b : m_blocks) {
            at::Tensor h = at::layer_norm(x, {E}, b.ln1w, b.ln1b, m_c.normEps);
            const at::Tensor qkv = b.attn(h.reshape({-1, E})).view({B, T, 3 * E});
            if (m_path == Path::Native) {
                const at::Tensor a = at::empty({B * T, E}, x.options());
                cpu::AttentionShape s{B, T, nh, nh, hd, 3 * E, 3 * E, 3 * E, E, static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)))};
                cpu::causalAttention(fptr(qkv), fptr(qkv) + E, fptr(qkv) + 2 * E, fptr(a), s, intraOp());
                x = x + b.proj(a).view({B, T, E});
                h = at::layer_norm(x, {E}, b.ln2w, b.ln2b, m_c.normEps);
                h = at::gelu(b.fc(h.reshape({-1, E})), "tanh");
                x = x + b.fcProj(h).view({B, T, E});
                continue;
            }
            const auto parts = qkv.split(E, 2);
            const at::Tensor q = parts[0].view({B, T, nh, hd}).transpose(1, 2);
            const at::Tensor k = parts[1].view({B, T, nh, hd}).transpose(1, 2);
            const at::Tensor v = parts[2].view({B, T, nh, hd}).transpose(1, 2);
            const at::Tensor a = causalAttention(q, k, v, mask, kAttentionBlock).reshape({-1, E});
            x = x + b.proj(a).view({B, T, E});
            h = at::layer_norm(x, {E}, b.ln2w, b.ln2b, m_c.normEps);
            h = at::gelu(b.fc(h.reshape({-1, E})), "tanh");
            x = x + b.fcProj(h).view({B, T, E});
        }
        return at::layer_norm(x, {E}, m_lnfW, m_lnfB, m_c.normEps);
    }

    ModelConfig m_c;
    LoadOptions m_opts;
    Path m_path = Path::Blas;
    ModelInfo m_info;
    at::Tensor m_wte, m_wpe, m_lnfW, m_lnfB;
    Linear m_head;
    std::vector<Block> m_blocks;
};

} // namespace

at::Tensor LanguageModel::logitsAt(const at::Tensor &ids, const at::Tensor &flat)
{
    const at::Tensor l = logits(ids);
    return l.reshape({-1, l.size(-1)}).index_select(0, flat.to(l.device()));
}

std::unique_ptr<LanguageModel> loadNativeModel(const std::string &dir, const LoadOptions &options)
{
    ModelConfig c = loadModelConfig(dir);
    SafetensorsCheckpoint ckpt = SafetensorsCheckpoint::openDirectory(dir);
    if (c.arch == ModelConfig::Arch::Gpt2)
        return std::make_unique<Gpt2Model>(dir, std::move(c), std::move(ckpt), options);
    return std::make_unique<LlamaModel>(dir, std::move(c), std::move(ckpt), options);
}

bool hasFusedAttention()
{
    return CPPL_HAVE_SDPA != 0;
}

c10::ScalarType parseDtype(const std::string &name)
{
    if (name == "float32")
        return at::kFloat;
    if (name == "bfloat16")
        return at::kBFloat16;
    if (name == "float16")
        return at::kHalf;
    throw ConfigError("--dtype \"" + name + "\" is not supported (float32, bfloat16, float16)");
}

std::string dtypeName(c10::ScalarType t)
{
    return t == at::kFloat ? "float32" : t == at::kBFloat16 ? "bfloat16" : t == at::kHalf ? "float16" : "other";
}

} // namespace cppl::agent
