// SPDX-License-Identifier: MIT
// Checkpoints that are already quantized, as people download them: GPTQ (AutoGPTQ, GPTQModel,
// transformers/optimum) and AWQ (AutoAWQ's GEMM packing), read from their own published layouts
// and converted to QuantizedMatrix exactly (every weight dequantizes to the float32 value the
// format defines), or, where the layout cannot map onto the kernels' groups, dequantized to
// float32 (QuantizedLinear::dense, with the reason).
//
// GPTQ, per linear layer PREFIX (bits 4 or 8, pack = 32 / bits values per int32, low bits first):
//   PREFIX.qweight I32 [in / pack, out]: input feature i of output j in word [i / pack][j], at bits
//                  (i % pack) * bits;
//   PREFIX.qzeros  I32 [groups, out / pack]: zero point of (group g, output j) in word [g][j / pack];
//   PREFIX.scales  F16 [groups, out];   PREFIX.g_idx I32 [in]: the group of each input feature
//                  (optional when desc_act is false; then i / group_size);
//   w = scale * (q - zero), where zero = stored + 1 in checkpoint format "gptq" (v1: AutoGPTQ
//   stored zero - 1) and zero = stored in "gptq_v2" (GPTQModel).
//   Act-order (desc_act) checkpoints whose g_idx groups hold group_size features each are kept
//   quantized, their input features reordered by group (the kernels gather the activations in that
//   order); other g_idx layouts, and group sizes that are not a multiple of 32, are dequantized.
// AWQ "gemm" (bits 4, zero_point true):
//   PREFIX.qweight I32 [in, out / 8]: output j of input i in word [i][j / 8], nibble
//                  kAwqNibble[j % 8] = {0, 4, 1, 5, 2, 6, 3, 7} (AutoAWQ packs columns 0 2 4 6 1 3 5 7);
//   PREFIX.qzeros  I32 [in / group, out / 8], the same nibble order;  PREFIX.scales F16 [in / group, out];
//   w = scale * (q - zero).
// Everything else is refused by name (method, version, checkpoint format, bits), and malformed
// tensors (missing, wrong dtype, wrong shape, values out of range) with the file and the tensor.
#pragma once

#include "quantized_matrix.h"

#include "model/safetensors.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cppl::agent::quant {

/// config.json's `quantization_config` (or an AutoGPTQ quantize_config.json), checked.
struct CheckpointQuantConfig
{
    enum class Method { Gptq, Awq };
    Method method = Method::Gptq;
    int bits = 4;
    std::int64_t groupSize = 128; ///< -1: one group per row
    bool descAct = false;         ///< GPTQ act-order
    bool sym = true;              ///< GPTQ
    bool gptqV2 = false;          ///< GPTQ checkpoint format "gptq_v2" (zero points stored as they are)
    std::vector<std::string> modulesNotConverted; ///< AWQ modules_to_not_convert / GPTQ unquantized modules
    std::string source;           ///< the file it came from, for messages
};

/// Parses a config.json text: nullopt when it has no quantization_config. ConfigError naming
/// `source` and the field for an unknown method, version, checkpoint format or bit width.
[[nodiscard]] std::optional<CheckpointQuantConfig> parseQuantizationConfig(std::string_view configJson, const std::string &source);
/// DIR/config.json's quantization_config, else DIR/quantize_config.json (AutoGPTQ), else nullopt.
[[nodiscard]] std::optional<CheckpointQuantConfig> loadQuantizationConfig(const std::string &dir);

/// One linear layer read from a quantized checkpoint.
struct QuantizedLinear
{
    QuantizedMatrix weight;    ///< the packed weight, when the layout maps onto the kernels
    std::vector<float> dense;  ///< else W[out][in] dequantized to float32 (exact)
    std::string denseReason;   ///< why it is dense (empty when quantized)
    std::vector<float> bias;   ///< PREFIX.bias as float32, when the checkpoint has one
    [[nodiscard]] bool quantized() const { return !weight.empty(); }
};

/// Reads linear layer PREFIX (e.g. "model.layers.0.self_attn.q_proj") of `out` x `in` features
/// (from the model's config.json) out of `tensors` (SafetensorsCheckpoint::tensors()).
/// IoError naming the file and the tensor for anything malformed.
[[nodiscard]] QuantizedLinear readQuantizedLinear(const CheckpointQuantConfig &config, const std::map<std::string, TensorView> &tensors,
                                                  const std::string &prefix, std::int64_t out, std::int64_t in);

/// AWQ's nibble position of output column j % 8 inside its int32.
inline constexpr int kAwqNibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};

} // namespace cppl::agent::quant
