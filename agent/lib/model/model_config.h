// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cppl::agent {

/// @brief A mixture-of-experts MLP (mixtral, qwen2_moe): a router over `experts` SwiGLU experts of
/// width `intermediate`, the top `topK` of each token's, and (qwen2_moe) a shared expert behind a
/// sigmoid gate. Which layers are sparse: `sparseLayers` (the others are dense MLPs of
/// ModelConfig::intermediate).
struct MoeConfig
{
    enum class Kind { None, Mixtral, Qwen2Moe };
    Kind kind = Kind::None;
    std::int64_t experts = 0;
    std::int64_t topK = 0;
    std::int64_t intermediate = 0;       ///< each expert's (mixtral: intermediate_size; qwen2_moe: moe_intermediate_size)
    std::int64_t sharedIntermediate = 0; ///< qwen2_moe's shared expert (0: none)
    bool normTopK = false;               ///< the k weights renormalised to sum 1 (mixtral always; qwen2_moe: norm_topk_prob)
    std::vector<bool> sparseLayers;
    [[nodiscard]] bool sparse(std::int64_t layer) const { return kind != Kind::None && sparseLayers[static_cast<std::size_t>(layer)]; }
};

/// @brief What the native implementations need from a Hugging Face config.json. Each model_type
/// is a family with a parser of its own (model_config.cpp's kFamilies: docs/models.md, "How to add
/// a family").
struct ModelConfig
{
    /// The class that builds the model (eval/model_registry.cpp): llama, mistral, qwen2, qwen3, gemma2,
    /// gemma3_text, phi3, mixtral and qwen2_moe are Llama.
    enum class Arch { Llama, Gpt2 };
    Arch arch = Arch::Llama;
    std::string modelType; ///< as written in config.json (llama, mistral, qwen2, qwen3, gemma2, gemma3_text, phi3, gpt2, mixtral, qwen2_moe)
    std::int64_t vocab = 0;
    std::int64_t hidden = 0;
    std::int64_t layers = 0;
    std::int64_t heads = 0;
    std::int64_t kvHeads = 0;
    std::int64_t headDim = 0;
    std::int64_t intermediate = 0;
    std::int64_t maxPositions = 0; ///< 0 = not stated
    double normEps = 1e-6;         ///< rms_norm_eps (llama) or layer_norm_epsilon (gpt2)
    double ropeTheta = 10000.0;
    bool ropeLlama3 = false; ///< rope_scaling {rope_type: llama3}
    double ropeFactor = 1.0;
    double ropeLowFreqFactor = 1.0;
    double ropeHighFreqFactor = 4.0;
    double ropeOriginalMaxPositions = 8192.0; ///< llama3's; phi3 longrope's pre-training length
    double ropeLinearFactor = 1.0; ///< rope_scaling {rope_type: linear}: inv_freq / factor (gemma3: global layers only)
    /// gemma3 rope_local_base_freq: the sliding layers' rotary base, unscaled (0: every layer rotates alike).
    double ropeLocalTheta = 0;
    /// phi3 rope_scaling longrope (or su): per rotary pair, the short factors, and the long ones used
    /// when the forward pass is longer than ropeOriginalMaxPositions; cos and sin x ropeAttentionFactor.
    std::vector<double> ropeShortFactor, ropeLongFactor;
    double ropeAttentionFactor = 1.0;
    std::int64_t rotaryDim = 0; ///< phi3 partial_rotary_factor: the rotated features of each head (0: head_dim)
    bool fusedProjections = false; ///< phi3: qkv_proj and gate_up_proj stored fused (split at load)
    bool tied = false;
    bool qkvBias = false;
    bool oBias = false;
    bool mlpBias = false;
    bool qkNorm = false; ///< qwen3: an RMSNorm over each query and key head before the rotary embedding
    /// mistral's sliding_window: each query sees the keys t - W + 1 .. t (W of them, itself included); 0 = none.
    std::int64_t slidingWindow = 0;
    /// gemma2/3: which layers slide (slidingWindow, and gemma3's local rotary); empty = every layer (mistral).
    std::vector<bool> slidingLayers;
    /// gemma2: embeddings x sqrt(hidden), RMSNorm as x^ (1 + w), GeGLU (tanh GELU), norms after attention
    /// and after the MLP as well as before, the head tied unless tie_word_embeddings is false.
    bool gemma = false;
    double queryPreAttnScalar = 0; ///< gemma: scores x query_pre_attn_scalar^-0.5 (0: head_dim's)
    double attnSoftcap = 0;        ///< gemma2 attn_logit_softcapping: scores cap tanh(s / cap); 0 = none
    double finalSoftcap = 0;       ///< gemma2 final_logit_softcapping: the logits likewise; 0 = none
    /// The window of layer i (0 = full causal attention).
    [[nodiscard]] std::int64_t windowOf(std::int64_t layer) const
    {
        return slidingLayers.empty() || slidingLayers[static_cast<std::size_t>(layer)] ? slidingWindow : 0;
    }
    /// Whether layer i rotates with rope_local_base_freq (gemma3's sliding layers).
    [[nodiscard]] bool localRotary(std::int64_t layer) const
    {
        return ropeLocalTheta > 0 && !slidingLayers.empty() && slidingLayers[static_cast<std::size_t>(layer)];
    }
    [[nodiscard]] std::int64_t rotaryWidth() const { return rotaryDim > 0 ? rotaryDim : headDim; }
    std::int64_t bosTokenId = -1;
    MoeConfig moe; ///< mixtral, qwen2_moe
};

/// @brief Parses DIR/config.json. Throws IoError (unreadable, not JSON) or ConfigError naming the
/// field: no model_type, an unsupported model_type (listing the supported ones), a missing or
/// invalid size, an unsupported activation or rope_scaling, a sliding window where the family has none built.
[[nodiscard]] ModelConfig loadModelConfig(const std::string &dir);
/// Never throws anything but IoError/ConfigError naming `source` and the field (a fuzz target, tests/fuzz).
[[nodiscard]] ModelConfig parseModelConfig(std::string_view jsonText, const std::string &source);

} // namespace cppl::agent
