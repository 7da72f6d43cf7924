// SPDX-License-Identifier: MIT
// The storages of a Linear: a tensor for at::linear, oneDNN's packed layout, the agent's float32
// panels, and stacked parts kept apart. Each keeps the arithmetic it always had: a stacked product
// is one packed product only where that gives every output element the same FMA chain (the agent's
// kernels); the BLAS and oneDNN multiply each part on its own, as before.
#include "linear.h"

#include "cpu_gemm.h"
#include "intra_op.h"
#include "quant_linear.h"
#include "weight_source.h"

#include "quant/quant_isa.h"

#include "cppl/errors.h"

#include <ATen/Context.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/mkldnn_linear.h>

#include <numeric>

namespace cppl::agent {

namespace {

float *fptr(const at::Tensor &t) { return t.data_ptr<float>(); }

/// x [..., in] as rows [N, in] (contiguous), f(rows) -> y [N, out], back to [..., out].
template <typename F> at::Tensor overRows(const at::Tensor &x, std::int64_t out, const F &f)
{
    std::vector<std::int64_t> sizes = x.sizes().vec();
    const at::Tensor y = f(x.reshape({-1, sizes.back()}).contiguous());
    sizes.back() = out;
    return y.view(sizes);
}

// The weight as a tensor (over the mapping where the dtype and device match), at::linear.
class TorchLinear final : public LinearStorage
{
public:
    TorchLinear(at::Tensor weight, at::Tensor bias) : m_weight(std::move(weight)), m_bias(std::move(bias)) {}
    std::int64_t outFeatures() const override { return m_weight.size(0); }
    std::int64_t inFeatures() const override { return m_weight.size(1); }
    at::Tensor forward(const at::Tensor &x) const override { return at::linear(x, m_weight, m_bias); }

private:
    at::Tensor m_weight; ///< [out, in] (a transposed view for GPT-2's Conv1D)
    at::Tensor m_bias;
};

// oneDNN's packed copy; the activations are converted in and out on each call.
class OneDnnLinear final : public LinearStorage
{
public:
    OneDnnLinear(const at::Tensor &weight, const at::Tensor &bias)
        : m_packed(weight.contiguous().to_mkldnn()), m_bias(bias.defined() ? bias.contiguous().to_mkldnn() : at::Tensor()), m_out(weight.size(0)),
          m_in(weight.size(1))
    {
    }
    std::int64_t outFeatures() const override { return m_out; }
    std::int64_t inFeatures() const override { return m_in; }
    at::Tensor forward(const at::Tensor &x) const override
    {
        // An undefined bias is "no bias" to ATen (borrow_from_optional_tensor): no c10::optional
        // spelled here, which LibTorch 2.x keeps only as a deprecated alias of std::optional.
        return overRows(x, m_out, [&](const at::Tensor &rows) { return at::mkldnn_linear(rows.to_mkldnn(), m_packed, m_bias).to_dense(); });
    }

private:
    at::Tensor m_packed, m_bias;
    std::int64_t m_out, m_in;
};

// Float32 column panels for the agent's kernels: every output element one FMA chain over k, whatever
// the threads. Stacked parts are rows of one packed matrix, so q/k/v (gate/up) are one product.
class PackedFloat32Linear final : public LinearStorage
{
public:
    PackedFloat32Linear(std::int64_t out, std::int64_t in) : m_packed(out, in) {}
    cpu::PackedMatrix &packed() { return m_packed; }
    void setBias(at::Tensor bias) { m_bias = std::move(bias); }

    std::int64_t outFeatures() const override { return m_packed.n(); }
    std::int64_t inFeatures() const override { return m_packed.k(); }
    at::Tensor forward(const at::Tensor &x) const override { return forwardThroughInto(*this, x); }
    void into(const float *x, std::int64_t ldx, std::int64_t rows, float *out, std::int64_t ldo, bool accumulate) const override
    {
        cpu::gemm(x, ldx, rows, m_packed.view(), out, ldo, m_bias.defined() ? fptr(m_bias) : nullptr, accumulate, intraOp());
    }
    bool unpackRow(std::int64_t row, float *out) const override
    {
        m_packed.unpackRow(row, out);
        return true;
    }

private:
    cpu::PackedMatrix m_packed;
    at::Tensor m_bias; ///< contiguous float32, or undefined
};

// Stacked parts, each its own storage and product: the output columns side by side.
class PartwiseLinear final : public LinearStorage
{
public:
    explicit PartwiseLinear(std::vector<std::shared_ptr<const LinearStorage>> parts) : m_parts(std::move(parts)) {}
    std::int64_t outFeatures() const override
    {
        return std::accumulate(m_parts.begin(), m_parts.end(), std::int64_t{0}, [](std::int64_t n, const auto &p) { return n + p->outFeatures(); });
    }
    std::int64_t inFeatures() const override { return m_parts.front()->inFeatures(); }
    at::Tensor forward(const at::Tensor &x) const override { return at::cat(forwardParts(x, {}), -1); }
    std::vector<at::Tensor> forwardParts(const at::Tensor &x, const std::vector<std::int64_t> & /*sizes*/) const override
    {
        std::vector<at::Tensor> out;
        for (const auto &p : m_parts)
            out.push_back(p->forward(x));
        return out;
    }
    void into(const float *x, std::int64_t ldx, std::int64_t rows, float *out, std::int64_t ldo, bool accumulate) const override
    {
        for (const auto &p : m_parts) {
            p->into(x, ldx, rows, out, ldo, accumulate);
            out += p->outFeatures();
        }
    }

private:
    std::vector<std::shared_ptr<const LinearStorage>> m_parts;
};

/// A part's weight as [out, in] (a transposed view of a Conv1D's [in, out]) and its bias.
struct PartWeights
{
    at::Tensor weight, bias;
};

/// The slice a part reads of its stored weight (the whole of it without tensor parallelism), in
/// the stored layout: rows [r0, r0 + rows) and columns [c0, c0 + cols) of a [storedRows, storedCols] tensor.
struct StoredSlice
{
    std::int64_t storedRows, storedCols, r0, rows, c0, cols;
    [[nodiscard]] bool rowSlice() const { return rows != storedRows; }
    [[nodiscard]] bool columnSlice() const { return cols != storedCols; }
};

StoredSlice storedSlice(const LinearSpec &spec, const LinearSpec::Part &part)
{
    const std::int64_t storedOut = part.storedOut > 0 ? part.storedOut : part.out, storedIn = spec.storedIn > 0 ? spec.storedIn : spec.in;
    if (spec.transposed) // [in, out]
        return {storedIn, storedOut, spec.col0, spec.in, part.row0, part.out};
    return {storedOut, storedIn, part.row0, part.out, spec.col0, spec.in};
}

PartWeights loadPart(WeightSource &w, const LinearSpec &spec, const LinearSpec::Part &part)
{
    const std::string name = part.prefix + ".weight";
    const StoredSlice s = storedSlice(spec, part);
    CPPL_ENFORCE(!(s.rowSlice() && s.columnSlice()), "a Linear's slice cuts one dimension of its stored weight");
    const std::vector<std::int64_t> shape{s.storedRows, s.storedCols};
    const at::Tensor t = s.rowSlice()      ? w.getRows(name, shape, s.r0, s.rows)
                         : s.columnSlice() ? w.getColumns(name, shape, s.c0, s.cols)
                                           : w.get(name, shape);
    const std::int64_t storedOut = part.storedOut > 0 ? part.storedOut : part.out;
    // A column-parallel part's bias is its slice; a row-parallel one's the whole (added by one member).
    const at::Tensor bias = !spec.bias                ? at::Tensor()
                            : storedOut != part.out ? w.getRows(part.prefix + ".bias", {storedOut}, part.row0, part.out)
                                                      : w.get(part.prefix + ".bias", {part.out});
    return {spec.transposed ? t.t() : t, bias};
}

/// Drops the mapped pages of the part's slice once it is packed.
void releasePart(WeightSource &w, const LinearSpec &spec, const LinearSpec::Part &part)
{
    const std::string name = part.prefix + ".weight";
    const StoredSlice s = storedSlice(spec, part);
    if (s.rowSlice())
        w.releaseRows(name, s.r0, s.rows);
    else if (s.columnSlice())
        w.releaseColumns(name, s.c0, s.cols);
    else
        w.release(name);
}

// Every part straight from the mapping into its rows of one packed matrix, each original released
// once packed; the biases side by side.
std::shared_ptr<const LinearStorage> loadPacked(WeightSource &w, const LinearSpec &spec)
{
    const std::int64_t out = std::accumulate(spec.parts.begin(), spec.parts.end(), std::int64_t{0},
                                             [](std::int64_t n, const LinearSpec::Part &p) { return n + p.out; });
    auto l = std::make_shared<PackedFloat32Linear>(out, spec.in);
    std::vector<at::Tensor> biases;
    std::int64_t row0 = 0;
    for (const LinearSpec::Part &part : spec.parts) {
        const PartWeights p = loadPart(w, spec, part);
        const at::Tensor c = p.weight.contiguous();
        l->packed().packRows(row0, fptr(c), c.size(1), c.size(0));
        releasePart(w, spec, part);
        row0 += part.out;
        if (p.bias.defined())
            biases.push_back(p.bias);
    }
    if (!biases.empty())
        l->setBias(biases.size() == 1 ? biases.front().contiguous() : at::cat(biases));
    return l;
}

// One storage per part (kept apart, as each part always was multiplied on its own).
std::shared_ptr<const LinearStorage> loadPartwise(WeightSource &w, const LinearSpec &spec, LinearKind kind)
{
    std::vector<std::shared_ptr<const LinearStorage>> parts;
    for (const LinearSpec::Part &part : spec.parts) {
        const PartWeights p = loadPart(w, spec, part);
        if (kind == LinearKind::OneDnn) {
            parts.push_back(std::make_shared<OneDnnLinear>(p.weight, p.bias));
            releasePart(w, spec, part);
        } else {
            parts.push_back(std::make_shared<TorchLinear>(p.weight, p.bias));
        }
    }
    return parts.size() == 1 ? parts.front() : std::make_shared<PartwiseLinear>(std::move(parts));
}

// Whether the checkpoint holds spec's parts quantized (GPTQ/AWQ: PREFIX.qweight); all or none.
bool storedQuantized(const WeightSource &w, const LinearSpec &spec)
{
    std::size_t quantized = 0;
    for (const LinearSpec::Part &p : spec.parts)
        quantized += w.has(p.prefix + ".qweight") ? 1 : 0;
    if (quantized != 0 && quantized != spec.parts.size())
        throw IoError(w.checkpoint().directory() + ": \"" + spec.parts.front().prefix + "\" and the layers stacked with it (" + std::to_string(spec.parts.size())
                      + ") are stored partly quantized (" + std::to_string(quantized) + " with .qweight): a fused product needs all or none");
    return quantized != 0;
}

std::shared_ptr<const LinearStorage> loadStorage(WeightSource &w, const LinearSpec &spec, const LinearPlan &plan)
{
    if (plan.checkpoint && storedQuantized(w, spec))
        return loadCheckpointLinear(w, spec, plan);
    if (plan.scheme && (!spec.head || plan.head))
        return loadQuantizedLinear(w, spec, plan);
    switch (plan.kind) {
    case LinearKind::PackedFloat32:
        return loadPacked(w, spec);
    case LinearKind::PackedBf16:
        return loadBf16Linear(w, spec, plan);
    default:
        return loadPartwise(w, spec, plan.kind);
    }
}

} // namespace

std::vector<at::Tensor> LinearStorage::forwardParts(const at::Tensor &x, const std::vector<std::int64_t> &sizes) const
{
    return forward(x).split_with_sizes(sizes, -1);
}

void LinearStorage::into(const float *x, std::int64_t ldx, std::int64_t rows, float *out, std::int64_t ldo, bool accumulate) const
{
    const auto f32 = at::TensorOptions().dtype(at::kFloat);
    const at::Tensor y = forward(at::from_blob(const_cast<float *>(x), {rows, inFeatures()}, {ldx, 1}, f32));
    at::Tensor o = at::from_blob(out, {rows, outFeatures()}, {ldo, 1}, f32);
    if (accumulate)
        o.add_(y);
    else
        o.copy_(y);
}

Linear::Linear(std::shared_ptr<const LinearStorage> storage, std::vector<std::int64_t> parts) : m_storage(std::move(storage)), m_parts(std::move(parts)) {}

std::shared_ptr<const LinearStorage> partwiseStorage(std::vector<std::shared_ptr<const LinearStorage>> parts)
{
    return std::make_shared<PartwiseLinear>(std::move(parts));
}

at::Tensor forwardThroughInto(const LinearStorage &s, const at::Tensor &x)
{
    return overRows(x, s.outFeatures(), [&](const at::Tensor &rows) {
        at::Tensor y = at::empty({rows.size(0), s.outFeatures()}, rows.options());
        s.into(fptr(rows), rows.size(1), rows.size(0), fptr(y), s.outFeatures(), false);
        return y;
    });
}

std::shared_ptr<const LinearStorage> denseStorage(const at::Tensor &weight, const at::Tensor &bias, const LinearPlan &plan)
{
    switch (plan.kind) {
    case LinearKind::PackedFloat32: {
        const at::Tensor c = weight.to(at::kFloat).contiguous();
        auto l = std::make_shared<PackedFloat32Linear>(c.size(0), c.size(1));
        l->packed().packRows(0, fptr(c), c.size(1), c.size(0));
        if (bias.defined())
            l->setBias(bias.to(at::kFloat).contiguous());
        return l;
    }
    case LinearKind::PackedBf16:
        return bf16Storage(weight, bias);
    case LinearKind::OneDnn:
        return std::make_shared<OneDnnLinear>(weight.to(plan.dtype), bias.defined() ? bias.to(plan.dtype) : bias);
    case LinearKind::Torch:
        break;
    }
    return std::make_shared<TorchLinear>(weight.to(plan.device, plan.dtype), bias.defined() ? bias.to(plan.device, plan.dtype) : bias);
}

Linear Linear::load(WeightSource &w, const LinearSpec &spec, const LinearPlan &plan)
{
    CPPL_ENFORCE(!spec.parts.empty(), "a Linear has at least one part");
    std::vector<std::int64_t> sizes;
    for (const LinearSpec::Part &p : spec.parts)
        sizes.push_back(p.out);
    return {loadStorage(w, spec, plan), std::move(sizes)};
}

Linear Linear::tied(WeightSource &w, const std::string &name, const at::Tensor &weight, const LinearPlan &plan, std::int64_t row0)
{
    const std::int64_t vocab = weight.size(0), hidden = weight.size(1);
    if (plan.scheme && plan.head)
        return {tiedQuantizedLinear(w, name, vocab, hidden, plan, row0, w.checkpoint().at(name).shape[0]), {vocab}};
    if (plan.kind == LinearKind::PackedBf16)
        return {tiedBf16Linear(w, name, vocab, hidden, plan), {vocab}};
    if (plan.kind == LinearKind::Torch)
        return {std::make_shared<TorchLinear>(weight, at::Tensor()), {weight.size(0)}};
    if (plan.kind == LinearKind::OneDnn)
        return {std::make_shared<OneDnnLinear>(weight, at::Tensor()), {weight.size(0)}};
    auto l = std::make_shared<PackedFloat32Linear>(weight.size(0), weight.size(1));
    const at::Tensor c = weight.contiguous();
    constexpr std::int64_t kRows = 4096;
    for (std::int64_t r0 = 0; r0 < c.size(0); r0 += kRows) {
        const std::int64_t rows = std::min(kRows, c.size(0) - r0);
        l->packed().packRows(r0, fptr(c) + r0 * c.size(1), c.size(1), rows);
        w.releaseRows(name, row0 + r0, rows);
    }
    return {l, {weight.size(0)}};
}

LinearKind linearKindFor(const LoadOptions &o)
{
    const bool cpu = o.device.is_cpu();
    const bool cpuFloat = o.dtype == at::kFloat && cpu;
    const bool cpuBf16 = o.dtype == at::kBFloat16 && cpu;
    switch (o.gemm) {
    case GemmBackend::Native:
        if (cpuBf16) // on any CPU: without AVX512_BF16 the portable kernel, with the same bits
            return LinearKind::PackedBf16;
        if (!cpuFloat)
            throw ConfigError("--gemm native needs float32 or bfloat16 on the CPU; float16 and GPUs use LibTorch's kernels (--gemm auto)");
        return LinearKind::PackedFloat32;
    case GemmBackend::OneDnn:
        if (!at::hasMKLDNN() || !cpuFloat)
            throw ConfigError("--gemm onednn needs float32 on the CPU and a LibTorch built with oneDNN (mkldnn)");
        return LinearKind::OneDnn;
    case GemmBackend::Blas:
        return LinearKind::Torch;
    case GemmBackend::Auto:
        break;
    }
    if (cpuBf16 && quant::supported(quant::Bf16Isa::Avx512Bf16) && !o.tp) // tensor parallelism: LibTorch's path
        return LinearKind::PackedBf16;
    return cpuFloat ? LinearKind::PackedFloat32 : LinearKind::Torch;
}

std::string linearKindName(LinearKind kind, const LoadOptions &o)
{
    switch (kind) {
    case LinearKind::PackedFloat32:
        return std::string("native-") + cpu::isaName(cpu::detectIsa());
    case LinearKind::PackedBf16:
        return std::string("native-bf16-") + quant::isaName(quant::detectBf16Isa());
    case LinearKind::OneDnn:
        return "onednn";
    case LinearKind::Torch:
        break;
    }
    if (o.dtype == at::kBFloat16 && o.device.is_cpu() && o.gemm == GemmBackend::Auto)
        return "blas (bfloat16 through LibTorch: this CPU lacks AVX512_BF16)";
    return "blas";
}

std::string LinearPlan::quantName() const
{
    if (scheme)
        return quant::schemeName(*scheme);
    if (!checkpoint)
        return "none";
    return std::string(checkpoint->method == quant::CheckpointQuantConfig::Method::Awq ? "awq" : "gptq") + "-int" + std::to_string(checkpoint->bits);
}

std::string LinearPlan::gemmName(const LoadOptions &o) const
{
    const std::string base = linearKindName(kind, o);
    if (tally->quantizedLayers == 0)
        return base;
    if (native())
        return "native-" + quantName() + "-" + quant::isaName(quant::detectIntIsa());
    return base + " (" + quantName() + " dequantized per layer)";
}

LinearPlan linearPlanFor(const LoadOptions &o, std::optional<quant::CheckpointQuantConfig> checkpoint)
{
    LinearPlan p;
    p.kind = linearKindFor(o);
    p.dtype = o.dtype;
    p.device = o.device;
    if (o.quant.any()) {
        if (checkpoint)
            throw ConfigError(checkpoint->source + ": the checkpoint is already quantized (" + std::string(checkpoint->method == quant::CheckpointQuantConfig::Method::Awq ? "AWQ" : "GPTQ")
                              + ", " + std::to_string(checkpoint->bits) + " bits); evaluate it without --quantize");
        p.scheme = quant::parseScheme(o.quant.scheme);
        p.group = o.quant.group;
        p.head = o.quant.head;
    }
    p.checkpoint = std::move(checkpoint);
    if (p.quantizes() && !p.native())
        p.buffer = std::make_shared<DequantBuffer>(o.dtype, o.device);
    return p;
}

} // namespace cppl::agent
