// SPDX-License-Identifier: MIT
// A dense layer y = x W^T + b: how its weight is stored and multiplied, behind one interface.
#pragma once

#include "language_model.h"

#include "quant/gptq_awq.h"
#include "quant/quantize.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace cppl::agent {

class WeightSource;
class DequantBuffer;

/// How a model's Linears store and multiply their weights (the evaluation's GEMM path). A new
/// storage (int8/int4 round-to-nearest, GPTQ/AWQ, bfloat16 on AVX512_BF16) is one more kind and one
/// more LinearStorage (docs/models.md, "How a Linear storage is added").
enum class LinearKind {
    Torch,         ///< the weight as a tensor, multiplied by at::linear (the BLAS, cuBLAS; any dtype, any device)
    OneDnn,        ///< oneDNN's packed layout, packed once at load; activations converted in and out per call
    PackedFloat32, ///< float32 column panels for the agent's own kernels (cpu_gemm.h), packed once at load
    PackedBf16,    ///< bfloat16 panels for the agent's vdpbf16ps kernels (quant/bf16_gemm.h), float32 activations
};

/// The kind --gemm and the dtype/device ask for (auto: PackedFloat32 for float32 on the CPU,
/// PackedBf16 for bfloat16 on a CPU with AVX512_BF16, else Torch); throws ConfigError for a
/// combination that cannot run.
[[nodiscard]] LinearKind linearKindFor(const LoadOptions &options);
/// What ModelInfo::gemm says: "native-avx512|avx2|generic", "native-bf16-avx512-bf16|generic",
/// "onednn" or "blas" (with why, for bfloat16 on a CPU without AVX512_BF16).
[[nodiscard]] std::string linearKindName(LinearKind kind, const LoadOptions &options);
/// Whether a model of this kind runs the agent's own forward pass (float32 activations in its workspace).
[[nodiscard]] inline bool isNativeKind(LinearKind kind) { return kind == LinearKind::PackedFloat32 || kind == LinearKind::PackedBf16; }

/// What the storages of a model's Linears hold, counted as they load (ModelInfo, the result's
/// "quantization").
struct LinearTally
{
    std::int64_t quantizedLayers = 0; ///< products on quantized weights (a stacked q/k/v counts once)
    std::int64_t quantizedParams = 0;
    std::int64_t quantizedBytes = 0;  ///< their codes, scales, zero points (and input orders), as stored
    std::int64_t packedBytes = 0;     ///< the other weights repacked from float32 reads (bfloat16 panels)
    std::int64_t denseLayers = 0;     ///< checkpoint layers dequantized to float32 (their layout does not fit the kernels)
    std::string denseReason;          ///< ... the first one's reason
    std::int64_t bufferElements = 0;  ///< LibTorch's path: the largest quantized product, dequantized (DequantBuffer)
};

/// How a model's Linears are stored: the kind of its float ones, and which are quantized and how
/// (--quantize at load, or a GPTQ/AWQ checkpoint's own layers). One per model; every Linear the
/// model loads goes through it.
struct LinearPlan
{
    LinearKind kind = LinearKind::Torch;
    std::optional<quant::QuantScheme> scheme;                   ///< --quantize: round to nearest at load
    std::int64_t group = 32;                                    ///< --quant-group
    bool head = false;                                          ///< --quantize-head: the vocabulary head too
    std::optional<quant::CheckpointQuantConfig> checkpoint;     ///< GPTQ/AWQ: its layers as stored
    c10::ScalarType dtype = c10::ScalarType::Float;             ///< the LibTorch path's
    c10::Device device = c10::Device(c10::DeviceType::CPU);
    std::shared_ptr<DequantBuffer> buffer;                      ///< the LibTorch path's dequantized layer, shared
    std::shared_ptr<LinearTally> tally = std::make_shared<LinearTally>();

    [[nodiscard]] bool native() const { return isNativeKind(kind); }
    [[nodiscard]] bool quantizes() const { return scheme.has_value() || checkpoint.has_value(); }
    /// "int8", "int4-sym", "int4-asym", "gptq-int4", "gptq-int8", "awq-int4"; "none".
    [[nodiscard]] std::string quantName() const;
    /// What ModelInfo::gemm says for the model's products (the quantized ones where there are).
    [[nodiscard]] std::string gemmName(const LoadOptions &options) const;
};

/// The plan a model's options and checkpoint ask for; ConfigError for what cannot run.
[[nodiscard]] LinearPlan linearPlanFor(const LoadOptions &options, std::optional<quant::CheckpointQuantConfig> checkpoint);

/// Where a Linear's weights are in the checkpoint. Parts are stacked along the output: one product
/// whose output holds the parts side by side (fused q/k/v, gate/up).
struct LinearSpec
{
    struct Part
    {
        std::string prefix;   ///< PREFIX.weight [out, in] (and PREFIX.bias [out])
        std::int64_t out = 0; ///< output features of this part
        /// Tensor parallelism, column-parallel: this part is outputs [row0, row0 + out) of a stored
        /// weight of storedOut outputs (0: out, the whole weight).
        std::int64_t row0 = 0;
        std::int64_t storedOut = 0;
    };
    std::vector<Part> parts;
    std::int64_t in = 0;
    bool bias = false;       ///< every part has PREFIX.bias
    bool transposed = false; ///< stored [in, out] (GPT-2's Conv1D)
    /// Tensor parallelism, row-parallel: inputs [col0, col0 + in) of a stored weight of storedIn
    /// inputs (0: in, the whole weight).
    std::int64_t col0 = 0;
    std::int64_t storedIn = 0;
    bool head = false;       ///< the vocabulary head (quantized only with --quantize-head)
};

/// One way of storing a weight and multiplying by it. Implementations: linear.cpp.
class LinearStorage
{
public:
    virtual ~LinearStorage() = default;
    [[nodiscard]] virtual std::int64_t outFeatures() const = 0;
    [[nodiscard]] virtual std::int64_t inFeatures() const = 0;
    /// x [..., in] -> [..., out] on the storage's device and dtype.
    [[nodiscard]] virtual at::Tensor forward(const at::Tensor &x) const = 0;
    /// The output split into its parts' columns (sizes: the parts' out), each as its own product
    /// where the storage keeps the parts apart.
    [[nodiscard]] virtual std::vector<at::Tensor> forwardParts(const at::Tensor &x, const std::vector<std::int64_t> &sizes) const;
    /// Row-major float32 on the CPU: out[r] = (accumulate ? out[r] : 0) + x[r] W^T + b for rows x[r]
    /// (stride ldx) and out[r] (stride ldo). This default goes through forward().
    virtual void into(const float *x, std::int64_t ldx, std::int64_t rows, float *out, std::int64_t ldo, bool accumulate) const;
    /// Row `row` of W in float32 into out, where the storage can give it back (a tied embedding read
    /// from the packed head); false otherwise.
    [[nodiscard]] virtual bool unpackRow(std::int64_t /*row*/, float * /*out*/) const { return false; }
};

/// What the storages of quant_linear.cpp build on (linear.cpp): stacked parts kept apart, each its
/// own product; x [..., in] through a storage's into() (float32 on the CPU); a float32 weight
/// [out, in] (and bias) in the plan's float kind (a checkpoint layer dequantized to float32).
[[nodiscard]] std::shared_ptr<const LinearStorage> partwiseStorage(std::vector<std::shared_ptr<const LinearStorage>> parts);
[[nodiscard]] at::Tensor forwardThroughInto(const LinearStorage &storage, const at::Tensor &x);
[[nodiscard]] std::shared_ptr<const LinearStorage> denseStorage(const at::Tensor &weight, const at::Tensor &bias, const LinearPlan &plan);

/// A dense layer: a shared storage and the sizes of its parts. Copies share the storage.
class Linear
{
public:
    Linear() = default;
    /// Loads `spec` from the checkpoint into the storage `plan` gives it: quantized where the plan
    /// quantizes it (quant_linear.h), else the plan's kind. Packed kinds release each mapped
    /// original as soon as it is packed; the native kinds pack stacked parts as one product.
    [[nodiscard]] static Linear load(WeightSource &w, const LinearSpec &spec, const LinearPlan &plan);
    /// A head tied to an embedding already loaded: `weight` [vocab, hidden] is the checkpoint's
    /// tensor `name`. The native kinds pack it 4096 rows at a time, each block's mapped pages
    /// released once packed, so the mapping and the packed copy are never both resident whole (1.1
    /// GB at a 128k vocabulary); the lookup then reads the packed rows (unpackRow). A quantized head
    /// (--quantize-head) keeps the mapping: the embedding stays as it is. Under tensor parallelism
    /// `weight` is rows [row0, row0 + rows) of `name` (the rank's vocabulary; float32 only).
    [[nodiscard]] static Linear tied(WeightSource &w, const std::string &name, const at::Tensor &weight, const LinearPlan &plan, std::int64_t row0 = 0);

    [[nodiscard]] at::Tensor operator()(const at::Tensor &x) const { return m_storage->forward(x); }
    /// The outputs of the parts the layer was loaded from, in order (q, k, v).
    [[nodiscard]] std::vector<at::Tensor> parts(const at::Tensor &x) const { return m_storage->forwardParts(x, m_parts); }
    void into(const float *x, std::int64_t ldx, std::int64_t rows, float *out, std::int64_t ldo, bool accumulate) const
    {
        m_storage->into(x, ldx, rows, out, ldo, accumulate);
    }
    [[nodiscard]] bool unpackRow(std::int64_t row, float *out) const { return m_storage->unpackRow(row, out); }
    [[nodiscard]] std::int64_t outFeatures() const { return m_storage->outFeatures(); }
    [[nodiscard]] std::int64_t inFeatures() const { return m_storage->inFeatures(); }
    [[nodiscard]] bool loaded() const { return m_storage != nullptr; }

private:
    Linear(std::shared_ptr<const LinearStorage> storage, std::vector<std::int64_t> parts);
    std::shared_ptr<const LinearStorage> m_storage;
    std::vector<std::int64_t> m_parts;
};

} // namespace cppl::agent
