// SPDX-License-Identifier: MIT
// A dense layer y = x W^T + b: how its weight is stored and multiplied, behind one interface.
#pragma once

#include "language_model.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace cppl::agent {

class WeightSource;

/// How a model's Linears store and multiply their weights (the evaluation's GEMM path). A new
/// storage (int8/int4 round-to-nearest, GPTQ/AWQ, bfloat16 on AVX512_BF16) is one more kind and one
/// more LinearStorage (docs/models.md, "How a Linear storage is added").
enum class LinearKind {
    Torch,         ///< the weight as a tensor, multiplied by at::linear (the BLAS, cuBLAS; any dtype, any device)
    OneDnn,        ///< oneDNN's packed layout, packed once at load; activations converted in and out per call
    PackedFloat32, ///< float32 column panels for the agent's own kernels (cpu_gemm.h), packed once at load
};

/// The kind --gemm and the dtype/device ask for (auto: PackedFloat32 for float32 on the CPU, else
/// Torch); throws ConfigError for a combination that cannot run.
[[nodiscard]] LinearKind linearKindFor(const LoadOptions &options);
/// What ModelInfo::gemm says: "native-avx512|avx2|generic", "onednn" or "blas".
[[nodiscard]] std::string linearKindName(LinearKind kind);

/// Where a Linear's weights are in the checkpoint. Parts are stacked along the output: one product
/// whose output holds the parts side by side (fused q/k/v, gate/up).
struct LinearSpec
{
    struct Part
    {
        std::string prefix;   ///< PREFIX.weight [out, in] (and PREFIX.bias [out])
        std::int64_t out = 0; ///< output features of this part
    };
    std::vector<Part> parts;
    std::int64_t in = 0;
    bool bias = false;       ///< every part has PREFIX.bias
    bool transposed = false; ///< stored [in, out] (GPT-2's Conv1D)
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

/// A dense layer: a shared storage and the sizes of its parts. Copies share the storage.
class Linear
{
public:
    Linear() = default;
    /// Loads `spec` from the checkpoint into `kind`'s storage. Packed kinds release each mapped
    /// original as soon as it is packed; PackedFloat32 packs stacked parts as one product.
    [[nodiscard]] static Linear load(WeightSource &w, const LinearSpec &spec, LinearKind kind);
    /// A head tied to an embedding already loaded: `weight` [vocab, hidden] is the checkpoint's
    /// tensor `name`. PackedFloat32 packs it 4096 rows at a time, each block's mapped pages released
    /// once packed, so the mapping and the packed copy are never both resident whole (1.1 GB at a
    /// 128k vocabulary); the lookup then reads the packed rows (unpackRow).
    [[nodiscard]] static Linear tied(WeightSource &w, const std::string &name, const at::Tensor &weight, LinearKind kind);

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
