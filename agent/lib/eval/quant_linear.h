// SPDX-License-Identifier: MIT
// The Linear storages of quantized and bfloat16 weights (docs/models.md, "Quantized weights"):
// - the agent's own kernels (the native path): int8/int4 codes in QuantizedMatrix through
//   quant::qgemm, and bfloat16 panels through quant::bf16Gemm, both on float32 rows;
// - LibTorch's path (--gemm blas, GPUs): the codes as small integer tensors on the device, each
//   product dequantized into one buffer the model's quantized layers share, then at::linear in the
//   evaluation dtype (weight-only quantization: the activations are not quantized).
// The weights come from the float checkpoint, quantized at load (--quantize), or from a GPTQ/AWQ
// checkpoint's own layers (quant/gptq_awq.h).
#pragma once

#include "linear.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>

namespace cppl::agent {

/**
 * The LibTorch path's dequantized weights: one buffer in the evaluation dtype and device, as large
 * as the largest quantized product, which every quantized Linear of the model dequantizes into
 * before its at::linear. Forward passes are sequential (and on a GPU ordered on one stream), so one
 * buffer serves all of them, and the resident weights stay the quantized size plus one layer.
 */
class DequantBuffer
{
public:
    DequantBuffer(c10::ScalarType dtype, c10::Device device) : m_dtype(dtype), m_device(device) {}
    /// [n, k] of the buffer (grown when needed), in the dtype on the device.
    [[nodiscard]] at::Tensor weights(std::int64_t n, std::int64_t k);
    /// `bytes` uint8 scratch for unpacking 4-bit codes (grown when needed).
    [[nodiscard]] at::Tensor scratch(std::int64_t bytes);
    /// Allocates room for `elements` weights (the largest product, known once the model is loaded)
    /// and the scratch for half as many bytes, before evaluation starts.
    void reserve(std::int64_t elements);
    [[nodiscard]] std::int64_t bytes() const;

private:
    c10::ScalarType m_dtype;
    c10::Device m_device;
    at::Tensor m_weights, m_scratch;
};

/// `spec` quantized at load with plan.scheme in groups of plan.group (the native kernels: one
/// packed product for stacked parts; LibTorch: one dequantizing storage per part). ConfigError
/// names the tensor and row a quantizer refused (a non-finite weight, one too large for a float16
/// scale).
[[nodiscard]] std::shared_ptr<const LinearStorage> loadQuantizedLinear(WeightSource &w, const LinearSpec &spec, const LinearPlan &plan);
/// `spec`'s parts as a GPTQ/AWQ checkpoint stores them (plan.checkpoint), each its own product;
/// layers whose layout does not fit the kernels' groups are dequantized to float32 (the tally keeps why).
[[nodiscard]] std::shared_ptr<const LinearStorage> loadCheckpointLinear(WeightSource &w, const LinearSpec &spec, const LinearPlan &plan);
/// `spec` as bfloat16 panels for the agent's bf16 kernels (a BF16 checkpoint's bits as they are).
[[nodiscard]] std::shared_ptr<const LinearStorage> loadBf16Linear(WeightSource &w, const LinearSpec &spec, const LinearPlan &plan);
/// A float weight [out, in] (and bias) as bfloat16 panels (linear.cpp's denseStorage for PackedBf16).
[[nodiscard]] std::shared_ptr<const LinearStorage> bf16Storage(const at::Tensor &weight, const at::Tensor &bias);
/// A head tied to the embedding `name` ([vocab, hidden]) as bfloat16 panels, 4096 rows at a time,
/// each block's mapped pages released once packed (the lookup then reads the packed rows).
[[nodiscard]] std::shared_ptr<const LinearStorage> tiedBf16Linear(WeightSource &w, const std::string &name, std::int64_t vocab, std::int64_t hidden,
                                                                  const LinearPlan &plan);
/// A head tied to the embedding `name`, quantized (--quantize-head); the mapping is kept, since the
/// embedding itself stays as it is. Tensor parallelism: rows [row0, row0 + vocab) of a stored table
/// of `storedVocab` rows (0: vocab, the whole table).
[[nodiscard]] std::shared_ptr<const LinearStorage> tiedQuantizedLinear(WeightSource &w, const std::string &name, std::int64_t vocab, std::int64_t hidden,
                                                                       const LinearPlan &plan, std::int64_t row0 = 0, std::int64_t storedVocab = 0);

} // namespace cppl::agent
