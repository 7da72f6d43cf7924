// SPDX-License-Identifier: MIT
#include "model_config.h"

#include "cppl/errors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace cppl::agent {

using nlohmann::json;

namespace {

constexpr std::int64_t kMaxSize = std::int64_t{1} << 31;

std::int64_t positive(const json &j, const std::string &key, const std::string &source, std::int64_t fallback = -1)
{
    if (!j.contains(key) || j[key].is_null()) {
        if (fallback >= 0)
            return fallback;
        throw ConfigError(source + ": \"" + key + "\" is missing");
    }
    // Sizes multiply into tensor shapes: 2^31 keeps every product of two of them inside int64.
    if (!j[key].is_number_integer() || j[key].get<std::int64_t>() < 1 || j[key].get<std::int64_t>() > kMaxSize)
        throw ConfigError(source + ": \"" + key + "\" must be a positive integer, got " + j[key].dump().substr(0, 80)
                          + (j[key].is_number_integer() && j[key].get<std::int64_t>() > kMaxSize ? " (at most 2^31 is supported)" : ""));
    return j[key].get<std::int64_t>();
}

double number(const json &j, const std::string &key, const std::string &source, double fallback)
{
    if (!j.contains(key) || j[key].is_null())
        return fallback;
    if (!j[key].is_number())
        throw ConfigError(source + ": \"" + key + "\" must be a number, got " + j[key].dump().substr(0, 80));
    return j[key].get<double>();
}

std::string text(const json &j, const std::string &key, const std::string &source, const std::string &fallback)
{
    if (!j.contains(key) || j[key].is_null())
        return fallback;
    if (!j[key].is_string())
        throw ConfigError(source + ": \"" + key + "\" must be a string, got " + j[key].dump().substr(0, 80));
    return j[key].get<std::string>();
}

bool flag(const json &j, const std::string &key, bool fallback)
{
    return j.contains(key) && j[key].is_boolean() ? j[key].get<bool>() : fallback;
}

// GPT-2: learned positions, LayerNorm, gelu_new, the head tied to wte.
void parseGpt2(const json &j, const std::string &source, ModelConfig &c)
{
    c.vocab = positive(j, "vocab_size", source);
    c.hidden = positive(j, "n_embd", source);
    c.layers = positive(j, "n_layer", source);
    c.heads = positive(j, "n_head", source);
    c.kvHeads = c.heads;
    c.intermediate = positive(j, "n_inner", source, 4 * c.hidden);
    c.maxPositions = positive(j, "n_positions", source);
    c.normEps = number(j, "layer_norm_epsilon", source, 1e-5);
    c.tied = true;
    const std::string act = text(j, "activation_function", source, "gelu_new");
    if (act != "gelu_new")
        throw ConfigError(source + ": activation_function \"" + act + "\" is not supported for gpt2 (only gelu_new)");
    if (flag(j, "scale_attn_by_inverse_layer_idx", false) || flag(j, "reorder_and_upcast_attn", false))
        throw ConfigError(source + ": scale_attn_by_inverse_layer_idx / reorder_and_upcast_attn are not supported");
}

// The sizes of a Llama-like decoder, the RMSNorm epsilon and the rotary base.
void parseDecoderSizes(const json &j, const std::string &source, ModelConfig &c)
{
    c.vocab = positive(j, "vocab_size", source);
    c.hidden = positive(j, "hidden_size", source);
    c.layers = positive(j, "num_hidden_layers", source);
    c.heads = positive(j, "num_attention_heads", source);
    c.kvHeads = positive(j, "num_key_value_heads", source, c.heads);
    c.headDim = positive(j, "head_dim", source, c.hidden / c.heads);
    if (c.headDim < 1)
        throw ConfigError(source + ": num_attention_heads " + std::to_string(c.heads) + " exceeds hidden_size " + std::to_string(c.hidden)
                          + " and there is no head_dim");
    c.intermediate = positive(j, "intermediate_size", source);
    c.maxPositions = positive(j, "max_position_embeddings", source, 0);
    c.normEps = number(j, "rms_norm_eps", source, 1e-6);
    c.ropeTheta = number(j, "rope_theta", source, 10000.0);
    c.tied = flag(j, "tie_word_embeddings", false);
    if (c.heads % c.kvHeads != 0)
        throw ConfigError(source + ": num_attention_heads " + std::to_string(c.heads) + " is not a multiple of num_key_value_heads "
                          + std::to_string(c.kvHeads));
}

void requireActivation(const json &j, const std::string &source, const std::string &field, const std::string &want)
{
    const std::string act = text(j, field, source, want);
    if (act != want)
        throw ConfigError(source + ": " + field + " \"" + act + "\" is not supported (only " + want + ")");
}

/// config.json's rope_scaling: null when absent or null, else the object (anything else refused).
const json *ropeScalingOf(const json &j, const std::string &source)
{
    if (!j.contains("rope_scaling") || j["rope_scaling"].is_null())
        return nullptr;
    const json &s = j["rope_scaling"];
    if (!s.is_object())
        throw ConfigError(source + ": rope_scaling must be an object or null, got " + s.dump().substr(0, 80));
    return &s;
}

void parseRopeScaling(const json &j, const std::string &source, ModelConfig &c)
{
    const json *scaling = ropeScalingOf(j, source);
    if (!scaling)
        return;
    const json &s = *scaling;
    const std::string where = source + ": rope_scaling";
    const std::string kind = text(s, "rope_type", where, text(s, "type", where, "default"));
    if (kind == "llama3") {
        c.ropeLlama3 = true;
        c.ropeFactor = number(s, "factor", where, 8.0);
        c.ropeLowFreqFactor = number(s, "low_freq_factor", where, 1.0);
        c.ropeHighFreqFactor = number(s, "high_freq_factor", where, 4.0);
        c.ropeOriginalMaxPositions = number(s, "original_max_position_embeddings", where, 8192.0);
    } else if (kind != "default") {
        throw ConfigError(source + ": rope_scaling type \"" + kind + "\" is not supported (supported: none, llama3)");
    }
}

// Llama and Qwen2 differ in their biases; neither has a sliding window built (Qwen2's, from
// max_window_layers on when use_sliding_window, is refused).
void parseLlamaLike(const json &j, const std::string &source, ModelConfig &c)
{
    parseDecoderSizes(j, source, c);
    requireActivation(j, source, "hidden_act", "silu");
    c.qkvBias = c.oBias = flag(j, "attention_bias", false);
    c.mlpBias = flag(j, "mlp_bias", false);
    parseRopeScaling(j, source, c);
    if (j.contains("sliding_window") && j["sliding_window"].is_number_integer() && flag(j, "use_sliding_window", false))
        throw ConfigError(source + ": sliding-window attention (use_sliding_window true, sliding_window " + j["sliding_window"].dump()
                          + ") is not supported for " + c.modelType + "; only full causal attention is (mistral's window is)");
}

void parseLlama(const json &j, const std::string &source, ModelConfig &c) { parseLlamaLike(j, source, c); }

// Mistral: Llama with sliding_window (an integer, or null for none) on every layer, as transformers'
// MistralModel applies it whatever use_sliding_window says.
void parseMistral(const json &j, const std::string &source, ModelConfig &c)
{
    parseDecoderSizes(j, source, c);
    requireActivation(j, source, "hidden_act", "silu");
    c.qkvBias = c.oBias = flag(j, "attention_bias", false);
    c.mlpBias = flag(j, "mlp_bias", false);
    parseRopeScaling(j, source, c);
    c.slidingWindow = positive(j, "sliding_window", source, 0);
}

// Qwen2: biases on q, k and v always, none on o.
void parseQwen2(const json &j, const std::string &source, ModelConfig &c)
{
    parseLlamaLike(j, source, c);
    c.qkvBias = true;
    c.oBias = false;
}

// Qwen3: Llama's layer plus an RMSNorm over each query and key head (q_norm, k_norm, head_dim wide)
// before the rotary embedding; attention_bias on q, k, v and o alike. Its sliding window (layers from
// max_window_layers on, when use_sliding_window) and rotary scalings are not built.
void parseQwen3(const json &j, const std::string &source, ModelConfig &c)
{
    if (flag(j, "use_sliding_window", false))
        throw ConfigError(source + ": use_sliding_window true is not supported for qwen3 (only full causal attention; set it false)");
    if (j.contains("rope_scaling") && !j["rope_scaling"].is_null())
        throw ConfigError(source + ": rope_scaling " + j["rope_scaling"].dump().substr(0, 80) + " is not supported for qwen3 (supported: null)");
    parseLlamaLike(j, source, c);
    c.qkNorm = true;
}

// Gemma's layer types: layer_types when given, else every `pattern`th layer (pattern - 1, 2 pattern - 1, ...)
// is global and the others slide (Gemma 2: 2, even layers slide; Gemma 3: sliding_window_pattern).
std::vector<bool> gemmaSlidingLayers(const json &j, const std::string &source, std::int64_t layers, std::int64_t pattern)
{
    std::vector<bool> sliding;
    if (!j.contains("layer_types") || j["layer_types"].is_null()) {
        for (std::int64_t i = 0; i < layers; ++i)
            sliding.push_back((i + 1) % pattern != 0);
        return sliding;
    }
    const json &t = j["layer_types"];
    if (!t.is_array() || static_cast<std::int64_t>(t.size()) != layers)
        throw ConfigError(source + ": \"layer_types\" must list " + std::to_string(layers) + " layers, got " + t.dump().substr(0, 80));
    for (const json &e : t) {
        if (!e.is_string() || (e != "sliding_attention" && e != "full_attention"))
            throw ConfigError(source + ": layer_types entry " + e.dump().substr(0, 40) + " is not supported (sliding_attention, full_attention)");
        sliding.push_back(e == "sliding_attention");
    }
    return sliding;
}

// A field whose feature is not built for `family`, refused by name unless null, absent or false.
void refuseField(const json &j, const std::string &source, const std::string &field, const std::string &family)
{
    if (j.contains(field) && !j[field].is_null() && !(j[field].is_boolean() && !j[field].get<bool>()))
        throw ConfigError(source + ": " + field + " " + j[field].dump().substr(0, 80) + " is not supported for " + family);
}

// What Gemma 2 and 3 share: RMSNorm as x^ (1 + w), embeddings x sqrt(hidden), GeGLU with the tanh GELU,
// norms before and after attention and the MLP, query_pre_attn_scalar, soft-capped attention scores
// and logits where set, a sliding window; the head tied unless tie_word_embeddings says otherwise.
void parseGemmaCommon(const json &j, const std::string &source, ModelConfig &c)
{
    parseDecoderSizes(j, source, c);
    c.headDim = positive(j, "head_dim", source, 256);
    requireActivation(j, source, j.contains("hidden_activation") && !j["hidden_activation"].is_null() ? "hidden_activation" : "hidden_act",
                      "gelu_pytorch_tanh");
    refuseField(j, source, "use_bidirectional_attention", c.modelType + " (supported: false or absent)");
    c.gemma = true;
    c.tied = flag(j, "tie_word_embeddings", true);
    c.qkvBias = c.oBias = flag(j, "attention_bias", false);
    c.queryPreAttnScalar = number(j, "query_pre_attn_scalar", source, 256.0);
    if (c.queryPreAttnScalar <= 0)
        throw ConfigError(source + ": \"query_pre_attn_scalar\" must be positive");
    c.attnSoftcap = number(j, "attn_logit_softcapping", source, 0.0);
    c.finalSoftcap = number(j, "final_logit_softcapping", source, 0.0);
    if (c.attnSoftcap < 0 || c.finalSoftcap < 0)
        throw ConfigError(source + ": attn_logit_softcapping / final_logit_softcapping must be positive or null");
    c.slidingWindow = positive(j, "sliding_window", source, 0);
}

// Gemma 2: sliding layers alternating with global ones (even layers slide); no rotary scaling.
void parseGemma2(const json &j, const std::string &source, ModelConfig &c)
{
    refuseField(j, source, "rope_scaling", "gemma2 (supported: null)");
    parseGemmaCommon(j, source, c);
    c.slidingLayers = gemmaSlidingLayers(j, source, c.layers, 2);
}

// Gemma 3's rope_scaling, on its global layers: null or linear (inv_freq / factor; the 4B+ checkpoints' factor 8).
void parseGemma3RopeScaling(const json &j, const std::string &source, ModelConfig &c)
{
    const json *scaling = ropeScalingOf(j, source);
    if (!scaling)
        return;
    const json &s = *scaling;
    const std::string where = source + ": rope_scaling";
    const std::string kind = text(s, "rope_type", where, text(s, "type", where, "default"));
    if (kind == "linear") {
        c.ropeLinearFactor = number(s, "factor", where, 0.0);
        if (c.ropeLinearFactor <= 0)
            throw ConfigError(where + ".factor must be a positive number, got " + (s.contains("factor") ? s["factor"].dump().substr(0, 40) : "none"));
    } else if (kind != "default") {
        throw ConfigError(where + " type \"" + kind + "\" is not supported for gemma3_text (supported: null, linear)");
    }
}

// Gemma 3 (text): Gemma 2's layer with a (1 + w) RMSNorm over each query and key head before the
// rotary embedding, soft-capping only where the config sets it (the published ones set null), every
// sliding_window_pattern-th layer global (or layer_types), the sliding layers rotating with
// rope_local_base_freq unscaled and the global ones with rope_theta and rope_scaling.
void parseGemma3(const json &j, const std::string &source, ModelConfig &c)
{
    parseGemmaCommon(j, source, c);
    parseGemma3RopeScaling(j, source, c);
    c.qkNorm = true;
    c.ropeLocalTheta = number(j, "rope_local_base_freq", source, 10000.0);
    if (c.ropeLocalTheta <= 0)
        throw ConfigError(source + ": \"rope_local_base_freq\" must be positive");
    c.slidingLayers = gemmaSlidingLayers(j, source, c.layers, positive(j, "sliding_window_pattern", source, 6));
}

// Phi-3's rope_scaling: null, or longrope (su, its old name): short and long factors per rotary pair,
// scaled from original_max_position_embeddings, cos and sin x the attention factor (given, or
// sqrt(1 + ln s / ln original) with s = max_position_embeddings / original, 1 when s <= 1).
void parsePhi3RopeScaling(const json &j, const std::string &source, ModelConfig &c)
{
    const json *scaling = ropeScalingOf(j, source);
    if (!scaling)
        return;
    const json &s = *scaling;
    const std::string where = source + ": rope_scaling";
    const std::string kind = text(s, "rope_type", where, text(s, "type", where, "default"));
    if (kind == "default")
        return;
    if (kind != "longrope" && kind != "su")
        throw ConfigError(where + " type \"" + kind + "\" is not supported for phi3 (supported: null, longrope, su)");
    const auto pairs = static_cast<std::size_t>(c.rotaryWidth() / 2);
    for (const char *key : {"short_factor", "long_factor"}) {
        const bool ok = s.contains(key) && s[key].is_array() && s[key].size() == pairs
                        && std::all_of(s[key].begin(), s[key].end(), [](const json &e) { return e.is_number() && e.get<double>() > 0; });
        if (!ok)
            throw ConfigError(where + "." + key + " must list " + std::to_string(pairs) + " positive numbers (one per rotary pair)");
        (std::string(key) == "short_factor" ? c.ropeShortFactor : c.ropeLongFactor) = s[key].get<std::vector<double>>();
    }
    const double original = number(j, "original_max_position_embeddings", source, number(s, "original_max_position_embeddings", where, 0.0));
    if (original < 2 || c.maxPositions < 1)
        throw ConfigError(source + ": longrope needs original_max_position_embeddings (at least 2) and max_position_embeddings (the lengths it scales between)");
    c.ropeOriginalMaxPositions = original;
    const double scale = static_cast<double>(c.maxPositions) / original;
    c.ropeAttentionFactor = number(s, "attention_factor", where, scale <= 1.0 ? 1.0 : std::sqrt(1.0 + std::log(scale) / std::log(original)));
}

// Phi-3: Llama's layer with q/k/v fused in qkv_proj and gate/up in gate_up_proj (split at load), the
// first partial_rotary_factor of each head rotated (Phi-4-mini), longrope scaling, sliding_window on
// every layer (Phi-3-mini-4k: 2047); no biases.
void parsePhi3(const json &j, const std::string &source, ModelConfig &c)
{
    parseDecoderSizes(j, source, c);
    requireActivation(j, source, "hidden_act", "silu");
    refuseField(j, source, "attention_bias", "phi3 (supported: false or absent)");
    c.fusedProjections = true;
    const double partial = number(j, "partial_rotary_factor", source, 1.0);
    const auto rot = partial > 0 && partial <= 1 ? static_cast<std::int64_t>(static_cast<double>(c.headDim) * partial) : 0;
    if (rot < 2 || rot % 2 != 0)
        throw ConfigError(source + ": partial_rotary_factor " + json(partial).dump() + " is not supported for phi3 (a factor in (0, 1] giving an even rotary width of head_dim "
                          + std::to_string(c.headDim) + ")");
    c.rotaryDim = rot == c.headDim ? 0 : rot;
    parsePhi3RopeScaling(j, source, c);
    c.slidingWindow = positive(j, "sliding_window", source, 0);
}

// The sparse layers' experts: num_experts_per_tok of `experts` (1 .. experts), each of width `width`.
void parseExperts(const json &j, const std::string &source, const std::string &expertsField, const std::string &widthField, ModelConfig &c)
{
    MoeConfig &m = c.moe;
    m.experts = positive(j, expertsField, source);
    m.topK = positive(j, "num_experts_per_tok", source);
    if (m.topK > m.experts)
        throw ConfigError(source + ": num_experts_per_tok " + std::to_string(m.topK) + " is not supported for " + c.modelType + " (supported: 1 .. "
                          + std::to_string(m.experts) + ", the " + expertsField + ")");
    m.intermediate = positive(j, widthField, source);
}

// Mixtral: Mistral's attention (sliding_window on every layer, or null) and in every layer a sparse
// MLP (block_sparse_moe): the top num_experts_per_tok of num_local_experts, their weights renormalised.
void parseMixtral(const json &j, const std::string &source, ModelConfig &c)
{
    parseMistral(j, source, c);
    c.moe.kind = MoeConfig::Kind::Mixtral;
    parseExperts(j, source, "num_local_experts", "intermediate_size", c);
    c.moe.normTopK = true;
    c.moe.sparseLayers.assign(static_cast<std::size_t>(c.layers), true);
}

// Qwen2-MoE's dense layers: those in mlp_only_layers, and those where (i + 1) % decoder_sparse_step != 0.
std::vector<bool> qwen2MoeSparseLayers(const json &j, const std::string &source, std::int64_t layers)
{
    const std::int64_t step = positive(j, "decoder_sparse_step", source, 1);
    std::vector<bool> sparse;
    for (std::int64_t i = 0; i < layers; ++i)
        sparse.push_back((i + 1) % step == 0);
    if (!j.contains("mlp_only_layers") || j["mlp_only_layers"].is_null())
        return sparse;
    const json &only = j["mlp_only_layers"];
    if (!only.is_array())
        throw ConfigError(source + ": \"mlp_only_layers\" must be a list of layer indices, got " + only.dump().substr(0, 80));
    for (const json &e : only) {
        if (!e.is_number_integer() || e.get<std::int64_t>() < 0 || e.get<std::int64_t>() >= layers)
            throw ConfigError(source + ": mlp_only_layers entry " + e.dump().substr(0, 40) + " is not a layer index (0 .. " + std::to_string(layers - 1) + ")");
        sparse[static_cast<std::size_t>(e.get<std::int64_t>())] = false;
    }
    return sparse;
}

// Qwen2-MoE: Qwen2's attention (q/k/v biases) and sparse MLPs of moe_intermediate_size with a shared
// expert (shared_expert_intermediate_size) behind a sigmoid gate; the k weights renormalised only with
// norm_topk_prob; dense MLPs of intermediate_size where mlp_only_layers and decoder_sparse_step say.
void parseQwen2Moe(const json &j, const std::string &source, ModelConfig &c)
{
    if (flag(j, "use_sliding_window", false))
        throw ConfigError(source + ": use_sliding_window true is not supported for qwen2_moe (only full causal attention; set it false)");
    parseQwen2(j, source, c);
    c.moe.kind = MoeConfig::Kind::Qwen2Moe;
    parseExperts(j, source, "num_experts", "moe_intermediate_size", c);
    c.moe.sharedIntermediate = positive(j, "shared_expert_intermediate_size", source);
    c.moe.normTopK = flag(j, "norm_topk_prob", false);
    c.moe.sparseLayers = qwen2MoeSparseLayers(j, source, c.layers);
}

/// The model registry's config side: model_type -> the class that builds it and the parser of its
/// config. A family is one line here and a parser (and, with a class of its own, a factory in
/// eval/model_registry.cpp): docs/models.md, "How to add a family".
struct Family
{
    std::string_view modelType;
    ModelConfig::Arch arch;
    void (*parse)(const json &, const std::string &, ModelConfig &);
};

constexpr Family kFamilies[] = {
    {"llama", ModelConfig::Arch::Llama, parseLlama},
    {"mistral", ModelConfig::Arch::Llama, parseMistral},
    {"qwen2", ModelConfig::Arch::Llama, parseQwen2},
    {"qwen3", ModelConfig::Arch::Llama, parseQwen3},
    {"gemma2", ModelConfig::Arch::Llama, parseGemma2},
    {"gemma3_text", ModelConfig::Arch::Llama, parseGemma3},
    {"phi3", ModelConfig::Arch::Llama, parsePhi3},
    {"gpt2", ModelConfig::Arch::Gpt2, parseGpt2},
    {"mixtral", ModelConfig::Arch::Llama, parseMixtral},
    {"qwen2_moe", ModelConfig::Arch::Llama, parseQwen2Moe},
};

std::string supportedTypes()
{
    std::string s;
    for (const Family &f : kFamilies)
        s += (s.empty() ? "" : ", ") + std::string(f.modelType);
    return s;
}

const Family *findFamily(const std::string &modelType)
{
    for (const Family &f : kFamilies)
        if (f.modelType == modelType)
            return &f;
    return nullptr;
}

json parseObject(std::string_view jsonText, const std::string &source)
{
    json j;
    try {
        j = json::parse(jsonText.begin(), jsonText.end());
    } catch (const json::exception &e) {
        throw IoError(source + ": not valid JSON (" + e.what() + ")");
    }
    if (!j.is_object())
        throw IoError(source + ": expected a JSON object");
    return j;
}

std::int64_t bosTokenId(const json &j, const std::string &source)
{
    if (!j.contains("bos_token_id") || !j["bos_token_id"].is_number_integer())
        return -1;
    const auto bos = j["bos_token_id"].get<std::int64_t>();
    if (j["bos_token_id"].is_number_unsigned() && j["bos_token_id"].get<std::uint64_t>() > 0xffffffffULL)
        throw ConfigError(source + ": \"bos_token_id\" must be between 0 and 2^32-1, got " + j["bos_token_id"].dump());
    return bos < 0 ? -1 : bos; // negative: none, as before
}

} // namespace

ModelConfig parseModelConfig(std::string_view jsonText, const std::string &source)
{
    const json j = parseObject(jsonText, source);
    if (!j.contains("model_type") || !j["model_type"].is_string())
        throw ConfigError(source + ": no \"model_type\"; ClusterPPL reads Hugging Face configs with model_type one of: " + supportedTypes());
    ModelConfig c;
    c.modelType = j["model_type"].get<std::string>();
    c.bosTokenId = bosTokenId(j, source);
    if (j.contains("vision_config") && !j["vision_config"].is_null())
        throw ConfigError(source + ": vision_config is present: a vision tower (model_type \"" + c.modelType
                          + "\", e.g. Gemma3ForConditionalGeneration) is not supported; evaluate a text-only checkpoint (model_type gemma3_text)");
    const Family *family = findFamily(c.modelType);
    if (!family)
        throw ConfigError(source + ": model_type \"" + c.modelType + "\" is not supported (supported: " + supportedTypes()
                          + "; export other architectures as TorchScript .pt)");
    c.arch = family->arch;
    family->parse(j, source, c);
    return c;
}

ModelConfig loadModelConfig(const std::string &dir)
{
    namespace fs = std::filesystem;
    if (!fs::exists(dir))
        throw IoError(dir + ": the model directory does not exist");
    if (!fs::is_directory(dir))
        throw IoError(dir + ": not a directory (give a Hugging Face model directory or a TorchScript .pt file)");
    const fs::path path = fs::path(dir) / "config.json";
    std::ifstream in(path);
    if (!in)
        throw IoError(path.string() + ": missing; a Hugging Face model directory needs config.json");
    std::ostringstream s;
    s << in.rdbuf();
    return parseModelConfig(s.str(), path.string());
}

} // namespace cppl::agent
