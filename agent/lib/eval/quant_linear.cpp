// SPDX-License-Identifier: MIT
#include "quant_linear.h"

#include "intra_op.h"
#include "weight_source.h"

#include "quant/bf16_gemm.h"
#include "quant/half.h"
#include "quant/qgemm.h"

#include "cppl/errors.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/bitwise_and.h>
#include <ATen/ops/bitwise_right_shift.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <numeric>
#include <vector>

namespace cppl::agent {

namespace {

constexpr std::int64_t kTiedRows = 4096; // a tied head packed this many rows at a time

const float *fptr(const at::Tensor &t) { return t.data_ptr<float>(); }

std::int64_t totalOut(const LinearSpec &spec)
{
    return std::accumulate(spec.parts.begin(), spec.parts.end(), std::int64_t{0}, [](std::int64_t n, const LinearSpec::Part &p) { return n + p.out; });
}

/// Whether a part is some rows of a fused stored weight (phi3's qkv_proj, gate_up_proj).
bool fusedPart(const LinearSpec::Part &part) { return part.storedOut > 0 && part.storedOut != part.out; }

/// A part's float32 weight [out, in] on the CPU, contiguous (a Conv1D's [in, out] transposed).
/// Under tensor parallelism the rank's slice: output rows [row0, row0 + out) (column-parallel) or
/// input columns [col0, col0 + in) (row-parallel) of the stored weight.
at::Tensor partWeight(WeightSource &w, const LinearSpec &spec, const LinearSpec::Part &part)
{
    const std::string name = part.prefix + ".weight";
    const std::int64_t storedOut = part.storedOut > 0 ? part.storedOut : part.out, storedIn = spec.storedIn > 0 ? spec.storedIn : spec.in;
    if (storedOut == part.out && storedIn == spec.in)
        return spec.transposed ? w.getFloat(name, {spec.in, part.out}).t().contiguous() : w.getFloat(name, {part.out, spec.in}).contiguous();
    if (spec.transposed) // [in, out]
        return w.getFloatSlice(name, {storedIn, storedOut}, spec.col0, spec.in, part.row0, part.out).t().contiguous();
    return w.getFloatSlice(name, {storedOut, storedIn}, part.row0, part.out, spec.col0, spec.in);
}

/// Tensor parallelism, a row-parallel slice of input columns: each quantization group of the
/// whole row must lie inside one rank's slice, so the rank's codes and scales are exactly the ones
/// one rank makes. Refused otherwise with the numbers.
void checkQuantGroups(const LinearSpec &spec, const LinearPlan &plan)
{
    const std::int64_t storedIn = spec.storedIn > 0 ? spec.storedIn : spec.in;
    if (storedIn == spec.in)
        return;
    const std::int64_t g = plan.group;
    if (spec.col0 % g == 0 && (spec.in % g == 0 || spec.col0 + spec.in == storedIn))
        return;
    throw ConfigError("--tensor-parallel with --quantize: \"" + spec.parts.front().prefix + "\" is split along its " + std::to_string(storedIn)
                      + " inputs into slices of " + std::to_string(spec.in) + ", which do not fall on --quant-group " + std::to_string(g)
                      + " boundaries; use a --quant-group dividing " + std::to_string(spec.in) + " (a multiple of 32), or a smaller --tensor-parallel");
}

/// The parts' biases side by side as float32 on the CPU; undefined without biases.
at::Tensor stackedBias(WeightSource &w, const LinearSpec &spec)
{
    if (!spec.bias)
        return {};
    std::vector<at::Tensor> biases;
    for (const LinearSpec::Part &part : spec.parts) {
        const std::int64_t storedOut = part.storedOut > 0 ? part.storedOut : part.out;
        biases.push_back(storedOut == part.out ? w.getFloat(part.prefix + ".bias", {part.out})
                                               : w.getFloatSlice(part.prefix + ".bias", {storedOut}, part.row0, part.out));
    }
    return at::cat(biases).contiguous();
}

const float *biasPtr(const at::Tensor &b) { return b.defined() ? b.data_ptr<float>() : nullptr; }

// ---- the agent's kernels: float32 rows in, float32 rows out ----

class QuantizedPackedLinear final : public LinearStorage
{
public:
    QuantizedPackedLinear(quant::QuantizedMatrix m, at::Tensor bias) : m_m(std::move(m)), m_bias(std::move(bias)) {}
    std::int64_t outFeatures() const override { return m_m.n(); }
    std::int64_t inFeatures() const override { return m_m.k(); }
    at::Tensor forward(const at::Tensor &x) const override { return forwardThroughInto(*this, x); }
    void into(const float *x, std::int64_t ldx, std::int64_t rows, float *out, std::int64_t ldo, bool accumulate) const override
    {
        quant::qgemm(x, ldx, rows, m_m, out, ldo, biasPtr(m_bias), accumulate, intraOp());
    }

private:
    quant::QuantizedMatrix m_m;
    at::Tensor m_bias;
};

class Bf16PackedLinear final : public LinearStorage
{
public:
    Bf16PackedLinear(std::int64_t n, std::int64_t k) : m_m(n, k) {}
    quant::Bf16Matrix &matrix() { return m_m; }
    void setBias(at::Tensor bias) { m_bias = std::move(bias); }
    std::int64_t outFeatures() const override { return m_m.n(); }
    std::int64_t inFeatures() const override { return m_m.k(); }
    at::Tensor forward(const at::Tensor &x) const override { return forwardThroughInto(*this, x); }
    void into(const float *x, std::int64_t ldx, std::int64_t rows, float *out, std::int64_t ldo, bool accumulate) const override
    {
        quant::bf16Gemm(x, ldx, rows, m_m, out, ldo, biasPtr(m_bias), accumulate, intraOp());
    }
    bool unpackRow(std::int64_t row, float *out) const override
    {
        for (std::int64_t p = 0; p < m_m.k(); ++p)
            out[p] = quant::bf16ToFloat(m_m.at(row, p));
        return true;
    }

private:
    quant::Bf16Matrix m_m;
    at::Tensor m_bias;
};

// ---- LibTorch: dequantized per product into the shared buffer ----

/// One product's codes as small tensors on the device: w[r][p] = scale[r][g] * (code[r][p] - zero[r][g])
/// for code position p of group g; p runs over the input features in `order` when there is one.
struct DeviceCodes
{
    std::int64_t n = 0, k = 0, group = 0, groups = 0;
    int bits = 8;
    at::Tensor codes;  ///< uint8 [n, groups * group] (8 bits) or [n, groups * group / 2] (4 bits: even positions low)
    at::Tensor scales; ///< float16 [n, groups]
    at::Tensor zeros;  ///< uint8 (int16 where GPTQ v1's 8-bit zero points reach 256) [n, groups], the whole zero
                       ///< point; undefined: zeroOffset for every group
    int zeroOffset = 0;
    at::Tensor order; ///< int64 [k]: code position p reads input feature order[p]; undefined: the identity
    at::Tensor bias;  ///< in the evaluation dtype, or undefined
    [[nodiscard]] std::int64_t width() const { return groups * group; }
    [[nodiscard]] std::int64_t bytes() const
    {
        auto size = [](const at::Tensor &t) { return t.defined() ? t.numel() * static_cast<std::int64_t>(t.element_size()) : 0; };
        return size(codes) + size(scales) + size(zeros) + size(order);
    }
};

class DequantLinear final : public LinearStorage
{
public:
    DequantLinear(DeviceCodes c, std::shared_ptr<DequantBuffer> buffer) : m_c(std::move(c)), m_buffer(std::move(buffer)) {}
    std::int64_t outFeatures() const override { return m_c.n; }
    std::int64_t inFeatures() const override { return m_c.k; }
    at::Tensor forward(const at::Tensor &x) const override
    {
        const at::Tensor in = m_c.order.defined() ? x.index_select(-1, m_c.order) : x;
        return at::linear(in, dequantized(), m_c.bias);
    }

private:
    // The weights [n, k] in the buffer: the codes converted (exact), less the zero points (exact
    // integers), times the float16 scales (one product in float32, rounded once to the dtype).
    at::Tensor dequantized() const
    {
        const std::int64_t n = m_c.n, kp = m_c.width();
        at::Tensor w = m_buffer->weights(n, kp);
        if (m_c.bits == 8) {
            w.copy_(m_c.codes);
        } else {
            const at::Tensor pairs = w.view({n, kp / 2, 2});
            at::Tensor nibble = m_buffer->scratch(n * kp / 2).view({n, kp / 2});
            pairs.select(2, 0).copy_(at::bitwise_and_out(nibble, m_c.codes, 15));
            pairs.select(2, 1).copy_(at::bitwise_right_shift_out(nibble, m_c.codes, 4));
        }
        const at::Tensor g = w.view({n, m_c.groups, m_c.group});
        if (m_c.zeros.defined())
            g.sub_(m_c.zeros.unsqueeze(2));
        else
            g.sub_(m_c.zeroOffset);
        g.mul_(m_c.scales.unsqueeze(2));
        return kp == m_c.k ? w : w.narrow(1, 0, m_c.k);
    }

    DeviceCodes m_c;
    std::shared_ptr<DequantBuffer> m_buffer;
};

/// Rows of codes (k each, 0..2^bits-1), float16 scale bits and whole zero points gathered on the
/// host, then moved to the plan's device.
class CodesBuilder
{
public:
    enum class Zeros { None, Bytes, Shorts };
    CodesBuilder(std::int64_t n, std::int64_t k, std::int64_t group, int bits, Zeros zeros, int zeroOffset)
    {
        m_c.n = n, m_c.k = k, m_c.bits = bits, m_c.zeroOffset = zeroOffset;
        m_c.group = group >= k ? k + (k & 1) : group; // 4-bit pairs need an even width
        m_c.groups = (k + m_c.group - 1) / m_c.group;
        const auto u8 = at::TensorOptions().dtype(at::kByte);
        m_c.codes = at::zeros({n, bits == 8 ? m_c.width() : m_c.width() / 2}, u8);
        m_c.scales = at::empty({n, m_c.groups}, at::TensorOptions().dtype(at::kHalf));
        if (zeros != Zeros::None)
            m_c.zeros = at::zeros({n, m_c.groups}, zeros == Zeros::Bytes ? u8 : at::TensorOptions().dtype(at::kShort));
    }
    [[nodiscard]] std::int64_t groups() const { return m_c.groups; }

    /// Row r: k codes, groups() float16 scale bits and (with per-group zeros) groups() whole zero points.
    void setRow(std::int64_t r, const std::uint8_t *codes, const std::uint16_t *scales, const int *zeros)
    {
        std::uint8_t *c = m_c.codes.data_ptr<std::uint8_t>() + r * m_c.codes.size(1);
        for (std::int64_t p = 0; p < m_c.k; ++p)
            c[m_c.bits == 8 ? p : p / 2] |= static_cast<std::uint8_t>(m_c.bits == 8 || p % 2 == 0 ? codes[p] : codes[p] << 4U);
        std::copy(scales, scales + m_c.groups, reinterpret_cast<std::uint16_t *>(m_c.scales.data_ptr<at::Half>()) + r * m_c.groups);
        if (!zeros)
            return;
        if (m_c.zeros.scalar_type() == at::kByte)
            std::transform(zeros, zeros + m_c.groups, m_c.zeros.data_ptr<std::uint8_t>() + r * m_c.groups, [](int z) { return static_cast<std::uint8_t>(z); });
        else
            std::transform(zeros, zeros + m_c.groups, m_c.zeros.data_ptr<std::int16_t>() + r * m_c.groups, [](int z) { return static_cast<std::int16_t>(z); });
    }

    std::shared_ptr<const LinearStorage> build(const at::Tensor &bias, const std::vector<std::int32_t> &order, const LinearPlan &plan)
    {
        for (at::Tensor *t : {&m_c.codes, &m_c.scales, &m_c.zeros})
            if (t->defined())
                *t = t->to(plan.device);
        if (!order.empty())
            m_c.order = at::tensor(std::vector<std::int64_t>(order.begin(), order.end()), at::TensorOptions().dtype(at::kLong)).to(plan.device);
        if (bias.defined())
            m_c.bias = bias.to(plan.device, plan.dtype);
        plan.tally->quantizedBytes += m_c.bytes();
        plan.tally->bufferElements = std::max(plan.tally->bufferElements, m_c.n * m_c.width());
        return std::make_shared<DequantLinear>(std::move(m_c), plan.buffer);
    }

private:
    DeviceCodes m_c;
};

void countQuantized(const LinearPlan &plan, std::int64_t n, std::int64_t k)
{
    plan.tally->quantizedLayers += 1;
    plan.tally->quantizedParams += n * k;
}

[[noreturn]] void refuseWeights(const WeightSource &w, const std::string &name, const ConfigError &e)
{
    throw ConfigError(w.checkpoint().directory() + ": tensor \"" + name + "\" cannot be quantized: " + e.what());
}

/// One part quantized row by row for LibTorch's path.
std::shared_ptr<const LinearStorage> quantizedForTorch(const at::Tensor &weight, const at::Tensor &bias, const std::string &name, WeightSource &w,
                                                       const LinearPlan &plan)
{
    const quant::QuantFormat f = quant::formatOf(*plan.scheme, plan.group);
    const std::int64_t n = weight.size(0), k = weight.size(1), group = std::min(plan.group, k);
    CodesBuilder b(n, k, group, f.bits, f.perGroupZeros ? CodesBuilder::Zeros::Bytes : CodesBuilder::Zeros::None, f.zeroOffset);
    const auto groups = static_cast<std::size_t>((k + group - 1) / group);
    std::vector<std::uint8_t> codes(static_cast<std::size_t>(k)), zeros(groups);
    std::vector<std::uint16_t> scales(groups);
    std::vector<int> wholeZeros(groups);
    for (std::int64_t r = 0; r < n; ++r) {
        try {
            quant::quantizeRow(*plan.scheme, group, fptr(weight) + r * k, k, codes.data(), scales.data(), zeros.data());
        } catch (const ConfigError &e) {
            refuseWeights(w, name, ConfigError("row " + std::to_string(r) + ": " + e.what()));
        }
        std::copy(zeros.begin(), zeros.end(), wholeZeros.begin()); // the asymmetric format's zero points have no offset
        b.setRow(r, codes.data(), scales.data(), f.perGroupZeros ? wholeZeros.data() : nullptr);
    }
    countQuantized(plan, n, k);
    return b.build(bias, {}, plan);
}

/// A checkpoint's packed layer on LibTorch's path: its codes read back out of the packed storage.
std::shared_ptr<const LinearStorage> packedForTorch(const quant::QuantizedMatrix &m, const at::Tensor &bias, const LinearPlan &plan)
{
    const std::int64_t n = m.n(), k = m.k();
    CodesBuilder b(n, k, std::min(m.format().group, k), m.bits(), m.bits() == 8 ? CodesBuilder::Zeros::Shorts : CodesBuilder::Zeros::Bytes, 0);
    std::vector<std::uint8_t> codes(static_cast<std::size_t>(k));
    std::vector<int> zeros(static_cast<std::size_t>(m.groups()));
    std::vector<std::uint16_t> scales(static_cast<std::size_t>(m.groups()));
    CPPL_ENFORCE(b.groups() == m.groups(), "the dequantizing storage groups a checkpoint layer as it is stored");
    for (std::int64_t r = 0; r < n; ++r) {
        for (std::int64_t p = 0; p < k; ++p)
            codes[static_cast<std::size_t>(p)] = static_cast<std::uint8_t>(m.code(r, p));
        for (std::int64_t g = 0; g < m.groups(); ++g) {
            scales[static_cast<std::size_t>(g)] = m.scaleBits(r, g);
            zeros[static_cast<std::size_t>(g)] = m.zero(r, g);
        }
        b.setRow(r, codes.data(), scales.data(), zeros.data());
    }
    countQuantized(plan, n, k);
    return b.build(bias, m.inputOrder(), plan);
}

// ---- loading ----

/// Every part quantized into its rows of one packed matrix (the native path), each original released once packed.
std::shared_ptr<const LinearStorage> quantizedPacked(WeightSource &w, const LinearSpec &spec, const LinearPlan &plan)
{
    const std::int64_t n = totalOut(spec);
    quant::QuantizedMatrix m(n, spec.in, quant::formatOf(*plan.scheme, plan.group));
    std::int64_t row0 = 0;
    for (const LinearSpec::Part &part : spec.parts) {
        const at::Tensor weight = partWeight(w, spec, part);
        try {
            quant::quantizeRows(*plan.scheme, m, row0, fptr(weight), spec.in, part.out);
        } catch (const ConfigError &e) {
            refuseWeights(w, part.prefix + ".weight", e);
        }
        w.release(part.prefix + ".weight");
        row0 += part.out;
    }
    countQuantized(plan, n, spec.in);
    plan.tally->quantizedBytes += m.bytes();
    return std::make_shared<QuantizedPackedLinear>(std::move(m), stackedBias(w, spec));
}

at::Tensor floatBias(const std::vector<float> &bias)
{
    if (bias.empty())
        return {};
    return at::from_blob(const_cast<float *>(bias.data()), {static_cast<std::int64_t>(bias.size())}, at::TensorOptions().dtype(at::kFloat)).clone();
}

void releaseQuantizedTensors(WeightSource &w, const std::string &prefix)
{
    const auto &tensors = w.checkpoint().tensors();
    for (const char *suffix : {".qweight", ".qzeros", ".scales", ".g_idx"})
        if (const auto it = tensors.find(prefix + suffix); it != tensors.end())
            it->second.file->releaseRange(it->second.data, it->second.bytes);
}

/// One part as its checkpoint stores it: packed for the kernels, or dequantized to float32.
std::shared_ptr<const LinearStorage> checkpointPart(WeightSource &w, const LinearSpec &spec, const LinearSpec::Part &part, const LinearPlan &plan)
{
    if (fusedPart(part))
        throw ConfigError(w.checkpoint().directory() + ": \"" + part.prefix + "\" is a fused weight stored quantized (" + plan.quantName()
                          + "); quantized fused q/k/v and gate/up (phi3) are not supported: evaluate the float checkpoint (with --quantize if wanted)");
    quant::QuantizedLinear q = quant::readQuantizedLinear(*plan.checkpoint, w.checkpoint().tensors(), part.prefix, part.out, spec.in);
    releaseQuantizedTensors(w, part.prefix);
    const at::Tensor bias = floatBias(q.bias);
    if (!q.quantized()) {
        LinearTally &t = *plan.tally;
        if (t.denseLayers++ == 0)
            t.denseReason = part.prefix + ": " + q.denseReason;
        const at::Tensor dense = at::from_blob(q.dense.data(), {part.out, spec.in}, at::TensorOptions().dtype(at::kFloat)).clone();
        return denseStorage(dense, bias, plan);
    }
    if (!plan.native())
        return packedForTorch(q.weight, bias, plan);
    countQuantized(plan, q.weight.n(), q.weight.k());
    plan.tally->quantizedBytes += q.weight.bytes();
    return std::make_shared<QuantizedPackedLinear>(std::move(q.weight), bias);
}

} // namespace

std::shared_ptr<const LinearStorage> bf16Storage(const at::Tensor &weight, const at::Tensor &bias)
{
    const at::Tensor c = weight.to(at::kFloat).contiguous();
    auto l = std::make_shared<Bf16PackedLinear>(c.size(0), c.size(1));
    l->matrix().packRows(0, fptr(c), c.size(1), c.size(0));
    if (bias.defined())
        l->setBias(bias.to(at::kFloat).contiguous());
    return l;
}

at::Tensor DequantBuffer::weights(std::int64_t n, std::int64_t k)
{
    if (!m_weights.defined() || m_weights.numel() < n * k)
        m_weights = at::empty({n * k}, at::TensorOptions().dtype(m_dtype).device(m_device));
    return m_weights.narrow(0, 0, n * k).view({n, k});
}

at::Tensor DequantBuffer::scratch(std::int64_t bytes)
{
    if (!m_scratch.defined() || m_scratch.numel() < bytes)
        m_scratch = at::empty({bytes}, at::TensorOptions().dtype(at::kByte).device(m_device));
    return m_scratch.narrow(0, 0, bytes);
}

void DequantBuffer::reserve(std::int64_t elements)
{
    (void)weights(elements, 1);
    (void)scratch(elements / 2);
}

std::int64_t DequantBuffer::bytes() const
{
    return (m_weights.defined() ? m_weights.numel() * static_cast<std::int64_t>(m_weights.element_size()) : 0)
           + (m_scratch.defined() ? m_scratch.numel() : 0);
}

std::shared_ptr<const LinearStorage> loadQuantizedLinear(WeightSource &w, const LinearSpec &spec, const LinearPlan &plan)
{
    CPPL_ENFORCE(plan.scheme.has_value(), "a quantized Linear needs the plan's scheme");
    checkQuantGroups(spec, plan);
    if (plan.native())
        return quantizedPacked(w, spec, plan);
    const at::Tensor bias = stackedBias(w, spec);
    std::vector<std::shared_ptr<const LinearStorage>> parts;
    std::int64_t row0 = 0;
    for (const LinearSpec::Part &part : spec.parts) {
        const at::Tensor b = bias.defined() ? bias.narrow(0, row0, part.out) : at::Tensor();
        parts.push_back(quantizedForTorch(partWeight(w, spec, part), b, part.prefix + ".weight", w, plan));
        row0 += part.out;
    }
    return parts.size() == 1 ? parts.front() : partwiseStorage(std::move(parts));
}

std::shared_ptr<const LinearStorage> loadCheckpointLinear(WeightSource &w, const LinearSpec &spec, const LinearPlan &plan)
{
    CPPL_ENFORCE(plan.checkpoint.has_value(), "a checkpoint's quantized Linear needs its quantization_config");
    std::vector<std::shared_ptr<const LinearStorage>> parts;
    for (const LinearSpec::Part &part : spec.parts)
        parts.push_back(checkpointPart(w, spec, part, plan));
    return parts.size() == 1 ? parts.front() : partwiseStorage(std::move(parts));
}

std::shared_ptr<const LinearStorage> loadBf16Linear(WeightSource &w, const LinearSpec &spec, const LinearPlan &plan)
{
    auto l = std::make_shared<Bf16PackedLinear>(totalOut(spec), spec.in);
    std::int64_t row0 = 0;
    for (const LinearSpec::Part &part : spec.parts) {
        const std::string name = part.prefix + ".weight";
        if (!spec.transposed && !fusedPart(part) && w.view(name, {part.out, spec.in}).dtype == StoredDtype::BF16) {
            l->matrix().packRowsBf16(row0, reinterpret_cast<const std::uint16_t *>(w.view(name, {part.out, spec.in}).data), spec.in, part.out);
            w.countParams(part.out * spec.in);
        } else {
            l->matrix().packRows(row0, fptr(partWeight(w, spec, part)), spec.in, part.out);
        }
        w.release(name);
        row0 += part.out;
    }
    l->setBias(stackedBias(w, spec));
    plan.tally->packedBytes += l->matrix().bytes();
    return l;
}

std::shared_ptr<const LinearStorage> tiedBf16Linear(WeightSource &w, const std::string &name, std::int64_t vocab, std::int64_t hidden,
                                                    const LinearPlan &plan)
{
    auto l = std::make_shared<Bf16PackedLinear>(vocab, hidden);
    const at::Tensor table = w.getFloat(name, {vocab, hidden});
    for (std::int64_t r0 = 0; r0 < vocab; r0 += kTiedRows) {
        const std::int64_t rows = std::min(kTiedRows, vocab - r0);
        l->matrix().packRows(r0, fptr(table) + r0 * hidden, hidden, rows);
        w.releaseRows(name, r0, rows);
    }
    plan.tally->packedBytes += l->matrix().bytes();
    return l;
}

std::shared_ptr<const LinearStorage> tiedQuantizedLinear(WeightSource &w, const std::string &name, std::int64_t vocab, std::int64_t hidden,
                                                         const LinearPlan &plan, std::int64_t row0, std::int64_t storedVocab)
{
    const at::Tensor table = storedVocab == 0 || storedVocab == vocab ? w.getFloat(name, {vocab, hidden}).contiguous() : w.getFloatSlice(name, {storedVocab, hidden}, row0, vocab, 0, hidden);
    if (!plan.native())
        return quantizedForTorch(table, {}, name, w, plan);
    try {
        auto m = quant::quantizeMatrix(*plan.scheme, plan.group, fptr(table), hidden, vocab, hidden);
        countQuantized(plan, vocab, hidden);
        plan.tally->quantizedBytes += m.bytes();
        return std::make_shared<QuantizedPackedLinear>(std::move(m), at::Tensor());
    } catch (const ConfigError &e) {
        refuseWeights(w, name, e);
    }
}

} // namespace cppl::agent
