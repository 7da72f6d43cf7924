// SPDX-License-Identifier: MIT
// Native Llama (+ Mistral, Qwen2) and GPT-2 forward passes over memory-mapped safetensors weights,
// following transformers' eager implementations operation by operation.
#include "cpu_gemm.h"
#include "cpu_log_softmax.h"
#include "intra_op.h"
#include "language_model.h"

#include "model/model_config.h"
#include "model/safetensors.h"

#include "cppl/errors.h"

#include <ATen/ATen.h>

#include <cmath>
#include <cstring>
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
    /// The same for rows [row0, row0 + rows) of a 2-D tensor.
    void releaseRows(const std::string &name, std::int64_t row0, std::int64_t rows) const
    {
        const TensorView &v = m_ckpt.at(name);
        const auto rowBytes = static_cast<std::size_t>(v.bytes / static_cast<std::size_t>(v.shape[0]));
        v.file->releaseRange(v.data + static_cast<std::size_t>(row0) * rowBytes, static_cast<std::size_t>(rows) * rowBytes);
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

    // Native: packs W = `t`, the tensor `name` [n, k] (over the mapping or a converted copy), 4096 rows at a
    // time, each block's mapped pages released once packed, so the mapping and the packed copy are never
    // both resident whole (a tied embedding: 1.1 GB at a 128k vocabulary).
    static Linear packReleasing(WeightSource &w, const std::string &name, const at::Tensor &t)
    {
        Linear l{t, {}, {}, {}, std::make_shared<cpu::PackedMatrix>(t.size(0), t.size(1))};
        const at::Tensor c = t.contiguous();
        constexpr std::int64_t kRows = 4096;
        for (std::int64_t r0 = 0; r0 < c.size(0); r0 += kRows) {
            const std::int64_t rows = std::min(kRows, c.size(0) - r0);
            l.native->packRows(r0, fptr(c) + r0 * c.size(1), c.size(1), rows);
            w.releaseRows(name, r0, rows);
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
        // An undefined bias is "no bias" to ATen (borrow_from_optional_tensor): no c10::optional
        // spelled here, which LibTorch 2.x keeps only as a deprecated alias of std::optional.
        const at::Tensor y = at::mkldnn_linear(x.reshape({-1, sizes.back()}).contiguous().to_mkldnn(), packed, packedBias).to_dense();
        sizes.back() = weight.size(0);
        return y.view(sizes);
    }
};

// Vocabulary rows per chunk of the fused head: 2^20 logits (4 MiB of float32), at least one 64-row block.
constexpr std::int64_t kHeadChunkElements = std::int64_t{1} << 20;

/// Buffers of the fused head, reused by every batch.
struct HeadScratch
{
    std::int64_t rows = 0, width = 0, vocab = 0;
    cpu::FloatBuffer in, logits;

    /// Rows per chunk for n scored positions: 2^20 logits, at least one 64-row block, at most n.
    static std::int64_t chunkRows(std::int64_t n, std::int64_t vocab)
    {
        return std::min(std::max<std::int64_t>(n, 1), std::max<std::int64_t>(64, kHeadChunkElements / vocab / 64 * 64));
    }
    void reserve(std::int64_t n, std::int64_t w, std::int64_t v)
    {
        const std::int64_t r = chunkRows(n, v);
        if (r <= rows && w == width && v == vocab)
            return;
        in = cpu::allocateFloats(r * w);
        logits = cpu::allocateFloats(r * v);
        rows = r, width = w, vocab = v;
    }
};

// Activations of a native forward pass, reused while the batch shape stays the same: fresh buffers
// (~85 MB per batch at the 18M bench shape) cost a page fault per 4 KiB on every batch. Allocated (and
// touched) by the model's prepare() before evaluation starts, else by the first forward pass. Each
// model names its buffers by index and gives their sizes in floats for a shape.
class Workspace
{
public:
    /// Reallocates every buffer when [rows = batch x T, T] changed; true when it did (the caller then
    /// fills its per-shape tables).
    bool reserve(std::int64_t rows, std::int64_t T, const std::vector<std::int64_t> &floats)
    {
        if (rows == m_rows && T == m_T)
            return false;
        m_buffers.clear(); // the old buffers go first
        m_rows = m_T = 0;
        for (const std::int64_t n : floats)
            m_buffers.push_back(cpu::allocateFloats(n));
        m_rows = rows;
        m_T = T;
        return true;
    }
    [[nodiscard]] float *operator[](std::size_t i) const { return m_buffers[i].get(); }
    [[nodiscard]] std::int64_t rows() const { return m_rows; }

private:
    std::int64_t m_rows = 0, m_T = 0;
    std::vector<cpu::FloatBuffer> m_buffers;
};

// x[r] = row ids[r] of the embedding (rows of `width` floats) for the batch's ids, each checked against
// the vocabulary. A tied embedding is read from the packed head (`packed`), whose copy exists anyway:
// its mapped pages are then released after packing (1.1 GB at a 128k vocabulary and hidden 2048).
void lookupRows(const at::Tensor &ids, const float *table, const cpu::PackedMatrix *packed, std::int64_t vocab, std::int64_t width, float *x)
{
    const at::Tensor idx = ids.to(at::kLong).contiguous();
    const std::int64_t *id = idx.data_ptr<std::int64_t>();
    for (std::int64_t r = 0; r < idx.numel(); ++r) {
        if (id[r] < 0 || id[r] >= vocab)
            throw ConfigError("token id " + std::to_string(id[r]) + " is outside the model's vocabulary of " + std::to_string(vocab));
        if (packed)
            packed->unpackRow(id[r], x + r * width);
        else
            std::memcpy(x + r * width, table + id[r] * width, static_cast<std::size_t>(width) * sizeof(float));
    }
}

// log p(target) at the listed rows of the last hidden states, without the [N, V] logits: rows go in
// chunks through one reused buffer: gathered, finished by `finish` (the final norm, a per-row
// function, so norm(x)[flat] = norm(x[flat])), projected onto the vocabulary, reduced by
// logSoftmaxAt. Every step is per row or split over rows and panels: no bit depends on the threads.
at::Tensor fusedTargetLogProbs(const float *hidden, std::int64_t rows, std::int64_t width, const at::Tensor &flat, const at::Tensor &targets,
                               const Linear &head, std::int64_t vocab, const std::function<void(float *, std::int64_t)> &finish, HeadScratch &s)
{
    const at::Tensor f = flat.to(at::kLong).contiguous(), t = targets.to(at::kLong).contiguous();
    const std::int64_t n = f.numel();
    CPPL_ENFORCE(t.numel() == n, "one target per scored position");
    const std::int64_t *fi = f.data_ptr<std::int64_t>(), *ti = t.data_ptr<std::int64_t>();
    for (std::int64_t i = 0; i < n; ++i) {
        if (fi[i] < 0 || fi[i] >= rows)
            throw ConfigError("scored position " + std::to_string(fi[i]) + " is outside the batch of " + std::to_string(rows) + " positions");
        if (ti[i] < 0 || ti[i] >= vocab)
            throw ConfigError("target token " + std::to_string(ti[i]) + " is outside the model's vocabulary of " + std::to_string(vocab));
    }
    at::Tensor out = at::empty({n, 1}, at::TensorOptions().dtype(at::kDouble));
    const std::int64_t chunk = HeadScratch::chunkRows(n, vocab);
    s.reserve(n, width, vocab);
    float *in = s.in.get(), *logits = s.logits.get();
    double *lp = out.data_ptr<double>();
    for (std::int64_t r0 = 0; r0 < n; r0 += chunk) {
        const std::int64_t m = std::min(chunk, n - r0);
        for (std::int64_t i = 0; i < m; ++i)
            std::memcpy(in + i * width, hidden + fi[r0 + i] * width, static_cast<std::size_t>(width) * sizeof(float));
        if (finish)
            finish(in, m);
        head.into(in, width, m, logits, vocab, false);
        cpu::logSoftmaxAt(logits, m, {0, vocab}, vocab, ti + r0, lp + r0, intraOp());
    }
    return out;
}

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

// What the Llama and GPT-2 models share: the head, the native path's workspace and fused head, and the
// LanguageModel entry points built on them. Each model supplies its forward passes and its final norm.
class DecoderModel : public LanguageModel
{
public:
    const ModelInfo &info() const override { return m_info; }

    at::Tensor logits(const at::Tensor &ids) override { return m_head(hidden(ids)); }

    at::Tensor logitsAt(const at::Tensor &ids, const at::Tensor &flat) override
    {
        const at::Tensor h = hidden(ids);
        return m_head(h.reshape({-1, m_c.hidden}).index_select(0, flat.to(h.device()))); // the caller's index may be on the CPU
    }

    void prepare(std::int64_t batch, std::int64_t width) override
    {
        if (m_path != Path::Native)
            return;
        ensureWorkspace(batch, width);
        m_headScratch.reserve(batch * width, m_c.hidden, m_c.vocab);
    }

    at::Tensor targetLogProbs(const at::Tensor &ids, const at::Tensor &flat, const at::Tensor &targets) override
    {
        if (m_path != Path::Native)
            return {};
        forwardNative(ids);
        const auto finish = [this](float *rows, std::int64_t n) { finalNorm(rows, n, rows); };
        return fusedTargetLogProbs(m_ws[kResidual], m_ws.rows(), m_c.hidden, flat, targets, m_head, m_c.vocab, finish, m_headScratch);
    }

protected:
    DecoderModel(ModelConfig c, const LoadOptions &o) : m_c(std::move(c)), m_opts(o), m_path(choosePath(o)) {}

    /// The workspace's buffer 0 is the residual stream [B * T, hidden], where forwardNative leaves the
    /// last layer's output (before the final norm).
    static constexpr std::size_t kResidual = 0;
    /// Sizes the workspace for a batch shape (Workspace::reserve) and fills any per-shape tables.
    virtual void ensureWorkspace(std::int64_t batch, std::int64_t T) = 0;
    /// The float32 CPU forward pass on the agent's own kernels, into the workspace.
    virtual void forwardNative(const at::Tensor &ids) = 0;
    /// The final norm on rows of the residual stream (per row: commutes with gathering rows). x may equal out.
    virtual void finalNorm(const float *x, std::int64_t rows, float *out) const = 0;
    /// The forward pass on LibTorch's kernels (BLAS, oneDNN, other dtypes, GPUs), final norm included.
    virtual at::Tensor hiddenLibTorch(const at::Tensor &ids) = 0;

    void setInfo(const std::string &dir, const WeightSource &w)
    {
        m_info = baseInfo(dir, m_c, w);
        m_info.gemm = pathName(m_path);
        m_info.device = m_opts.device;
    }

    /// Hidden states after the final norm, [B, T, hidden].
    at::Tensor hidden(const at::Tensor &ids)
    {
        if (m_path != Path::Native)
            return hiddenLibTorch(ids);
        forwardNative(ids);
        const at::Tensor out = at::empty({m_ws.rows(), m_c.hidden}, at::TensorOptions().dtype(at::kFloat));
        finalNorm(m_ws[kResidual], m_ws.rows(), fptr(out));
        return out.view({ids.size(0), ids.size(1), m_c.hidden});
    }

    ModelConfig m_c;
    LoadOptions m_opts;
    Path m_path = Path::Blas;
    ModelInfo m_info;
    Linear m_head;
    Workspace m_ws;
    HeadScratch m_headScratch;
};

class LlamaModel final : public DecoderModel
{
public:
    LlamaModel(const std::string &dir, ModelConfig c, SafetensorsCheckpoint ckpt, const LoadOptions &o)
        : DecoderModel(std::move(c), o)
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
        // A tied head is packed from the embedding; on the native path the lookup then reads that packed copy.
        if (m_c.tied && native)
            m_head = Linear::packReleasing(w, "model.embed_tokens.weight", m_embed); // the lookup reads the packed head from now on
        else
            m_head = m_c.tied ? Linear::make(m_embed, {}, m_path) : Linear::load(w, "lm_head.weight", {m_c.vocab, H}, {}, m_path);
        setInfo(dir, w);

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

    // The workspace's buffers: activations [B * T, width] and the rotary tables [T, head_dim].
    enum Buffer : std::size_t { kX = kResidual, kH, kQkv, kAttn, kGu, kCos, kSin };

    void ensureWorkspace(std::int64_t B, std::int64_t T) override
    {
        const std::int64_t rows = B * T, H = m_c.hidden, hd = m_c.headDim, nq = m_c.heads * hd, nk = m_c.kvHeads * hd;
        if (!m_ws.reserve(rows, T, {rows * H, rows * H, rows * (nq + 2 * nk), rows * nq, rows * 2 * m_c.intermediate, T * hd, T * hd}))
            return;
        // cos/sin of float32 angles t * inv_freq as transformers forms them, evaluated in double here:
        // LibTorch's vectorised cos gave other last bits at some positions depending on the threads.
        const float *inv = fptr(m_invFreq);
        float *c = m_ws[kCos], *sn = m_ws[kSin];
        for (std::int64_t t = 0; t < T; ++t)
            for (std::int64_t i = 0; i < hd; ++i) {
                const float angle = static_cast<float>(t) * inv[i % (hd / 2)];
                c[t * hd + i] = static_cast<float>(std::cos(static_cast<double>(angle)));
                sn[t * hd + i] = static_cast<float>(std::sin(static_cast<double>(angle)));
            }
    }

    // The float32 CPU forward pass on the agent's own kernels: activations stay row-major [B * T, width]
    // in the workspace, reused by every layer and batch; the residual stream takes o_proj and
    // down_proj in place. Leaves the last layer's output (before the final norm) in m_ws.x.
    void forwardNative(const at::Tensor &ids) override
    {
        const std::int64_t B = ids.size(0), T = ids.size(1), rows = B * T, H = m_c.hidden, hd = m_c.headDim, I = m_c.intermediate;
        const std::int64_t nq = m_c.heads * hd, nk = m_c.kvHeads * hd, wqkv = nq + 2 * nk;
        const cpu::ParallelFor &par = intraOp();
        ensureWorkspace(B, T);
        float *x = m_ws[kX], *h = m_ws[kH], *qkv = m_ws[kQkv], *attn = m_ws[kAttn], *gu = m_ws[kGu];
        lookupRows(ids, fptr(m_embed), m_c.tied ? m_head.native.get() : nullptr, m_c.vocab, H, x);
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
            cpu::rmsNorm(x, rows, H, fptr(l.inNorm), m_c.normEps, h, par);
            cpu::gemm(h, H, rows, l.qkv->view(), qkv, wqkv, optionalData(l.qkvBias), false, par);
            cpu::rotary(qkv, rows, wqkv, m_c.heads + m_c.kvHeads, hd, T, m_ws[kCos], m_ws[kSin], par); // q and k heads are adjacent
            cpu::causalAttention(qkv, qkv + nq, qkv + nq + nk, attn, shape, par);
            l.o.into(attn, nq, rows, x, H, true);
            cpu::rmsNorm(x, rows, H, fptr(l.postNorm), m_c.normEps, h, par);
            cpu::gemm(h, H, rows, l.gateUp->view(), gu, 2 * I, optionalData(l.gateUpBias), false, par);
            cpu::siluMul(gu, rows, I, par);
            l.down.into(gu, 2 * I, rows, x, H, true);
        }
    }

    void finalNorm(const float *x, std::int64_t rows, float *out) const override
    {
        cpu::rmsNorm(x, rows, m_c.hidden, fptr(m_norm), m_c.normEps, out, intraOp());
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

    at::Tensor hiddenLibTorch(const at::Tensor &ids) override
    {
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

    at::Tensor m_embed, m_norm, m_invFreq;
    std::vector<Layer> m_layers;
};

class Gpt2Model final : public DecoderModel
{
public:
    Gpt2Model(const std::string &dir, ModelConfig c, SafetensorsCheckpoint ckpt, const LoadOptions &o)
        : DecoderModel(std::move(c), o)
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
        // Tied to wte; the native lookup reads the packed head from now on.
        m_head = m_path == Path::Native ? Linear::packReleasing(w, pre + "wte.weight", m_wte) : Linear::make(m_wte, {}, m_path);
        setInfo(dir, w);
    }

private:
    struct Block
    {
        at::Tensor ln1w, ln1b, ln2w, ln2b;
        Linear attn, proj, fc, fcProj;
    };

    // The workspace's buffers, all [B * T, width]: the residual stream; the LayerNorm output, which
    // attention's output reuses (the norm is dead once q/k/v are computed); q/k/v, whose buffer the MLP's
    // hidden layer reuses (q/k/v are dead once attention is done).
    enum Buffer : std::size_t { kX = kResidual, kH, kWide };

    void ensureWorkspace(std::int64_t B, std::int64_t T) override
    {
        const std::int64_t rows = B * T, E = m_c.hidden;
        m_ws.reserve(rows, T, {rows * E, rows * E, rows * std::max(3 * E, m_c.intermediate)});
    }

    // The float32 CPU forward pass on the agent's own kernels, as the Llama one: activations row-major
    // in the workspace; c_proj and the MLP's c_proj accumulate (with their biases) into the residual
    // stream. Leaves the last block's output (before ln_f) in the workspace's kX.
    void forwardNative(const at::Tensor &ids) override
    {
        const std::int64_t B = ids.size(0), T = ids.size(1), rows = B * T, E = m_c.hidden, I = m_c.intermediate, nh = m_c.heads, hd = E / nh;
        if (T > m_c.maxPositions)
            throw ConfigError("a window of " + std::to_string(T) + " tokens is longer than the model's n_positions " + std::to_string(m_c.maxPositions)
                              + " (config.json); use a --context of at most " + std::to_string(m_c.maxPositions));
        const cpu::ParallelFor &par = intraOp();
        ensureWorkspace(B, T);
        float *x = m_ws[kX], *h = m_ws[kH], *wide = m_ws[kWide];
        lookupRows(ids, fptr(m_wte), m_head.native.get(), m_c.vocab, E, x);
        const float *wpe = fptr(m_wpe);
        for (std::int64_t r = 0; r < rows; ++r)
            for (std::int64_t j = 0; j < E; ++j)
                x[r * E + j] += wpe[(r % T) * E + j];
        const cpu::AttentionShape s{B, T, nh, nh, hd, 3 * E, 3 * E, 3 * E, E, static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)))};
        for (const Block &b : m_blocks) {
            cpu::layerNorm(x, rows, E, fptr(b.ln1w), fptr(b.ln1b), m_c.normEps, h, par);
            b.attn.into(h, E, rows, wide, 3 * E, false);
            cpu::causalAttention(wide, wide + E, wide + 2 * E, h, s, par);
            b.proj.into(h, E, rows, x, E, true);
            cpu::layerNorm(x, rows, E, fptr(b.ln2w), fptr(b.ln2b), m_c.normEps, h, par);
            b.fc.into(h, E, rows, wide, I, false);
            cpu::geluTanh(wide, rows, I, par);
            b.fcProj.into(wide, I, rows, x, E, true);
        }
    }

    void finalNorm(const float *x, std::int64_t rows, float *out) const override
    {
        cpu::layerNorm(x, rows, m_c.hidden, fptr(m_lnfW), fptr(m_lnfB), m_c.normEps, out, intraOp());
    }

    at::Tensor hiddenLibTorch(const at::Tensor &ids) override
    {
        const std::int64_t B = ids.size(0), T = ids.size(1), E = m_c.hidden, nh = m_c.heads, hd = E / nh;
        const at::Tensor dev = ids.to(m_opts.device);
        at::Tensor x = at::embedding(m_wte, dev) + at::embedding(m_wpe, at::arange(T, dev.options()));
        const at::Tensor mask = causalMask(T, x.options());
        for (const Block &b : m_blocks) {
            at::Tensor h = at::layer_norm(x, {E}, b.ln1w, b.ln1b, m_c.normEps);
            const at::Tensor qkv = b.attn(h.reshape({-1, E})).view({B, T, 3 * E});
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

    at::Tensor m_wte, m_wpe, m_lnfW, m_lnfB;
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
