// SPDX-License-Identifier: MIT
// Uses TensorView's fields only (no function of safetensors.cpp), so this torch-free library does
// not depend on the library that holds the safetensors reader.
#include "gptq_awq.h"

#include "half.h"

#include "cppl/errors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>

namespace cppl::agent::quant {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian; this reader reads it in place");

namespace {

using nlohmann::json;

// ---- quantization_config ----

[[noreturn]] void refuseField(const std::string &source, const std::string &field, const std::string &why)
{
    throw ConfigError(source + ": quantization_config." + field + " " + why);
}

int intField(const json &q, const char *name, int fallback, const std::string &source)
{
    if (!q.contains(name) || q[name].is_null())
        return fallback;
    if (!q[name].is_number_integer())
        refuseField(source, name, "must be an integer, got " + q[name].dump().substr(0, 40));
    return q[name].get<int>();
}

bool boolField(const json &q, const char *name, bool fallback, const std::string &source)
{
    if (!q.contains(name) || q[name].is_null())
        return fallback;
    if (!q[name].is_boolean())
        refuseField(source, name, "must be true or false, got " + q[name].dump().substr(0, 40));
    return q[name].get<bool>();
}

std::string lowerString(const json &q, const char *name, const std::string &fallback, const std::string &source)
{
    if (!q.contains(name) || q[name].is_null())
        return fallback;
    if (!q[name].is_string())
        refuseField(source, name, "must be a string, got " + q[name].dump().substr(0, 40));
    std::string s = q[name].get<std::string>();
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return s;
}

void parseGptq(const json &q, CheckpointQuantConfig &c)
{
    c.bits = intField(q, "bits", 4, c.source);
    if (c.bits != 4 && c.bits != 8)
        refuseField(c.source, "bits", "is " + std::to_string(c.bits) + ": GPTQ checkpoints of 4 or 8 bits are supported (not 2 or 3)");
    c.descAct = boolField(q, "desc_act", false, c.source);
    c.sym = boolField(q, "sym", true, c.source);
    // GPTQModel writes "checkpoint_format" (older) or "format"; AutoGPTQ and optimum write neither (v1).
    const std::string format = lowerString(q, q.contains("checkpoint_format") ? "checkpoint_format" : "format", "gptq", c.source);
    if (format == "gptq_v2")
        c.gptqV2 = true;
    else if (format != "gptq")
        refuseField(c.source, q.contains("checkpoint_format") ? "checkpoint_format" : "format",
                    "\"" + format + "\" is not supported (\"gptq\" or \"gptq_v2\"; marlin, bitblas and other kernel-specific layouts are not)");
}

void parseAwq(const json &q, CheckpointQuantConfig &c)
{
    c.bits = intField(q, "bits", intField(q, "w_bit", 4, c.source), c.source);
    if (c.bits != 4)
        refuseField(c.source, "bits", "is " + std::to_string(c.bits) + ": AWQ checkpoints of 4 bits are supported");
    const std::string version = lowerString(q, "version", "gemm", c.source);
    if (version != "gemm")
        refuseField(c.source, "version", "\"" + version + "\" is not supported (AWQ's \"gemm\" packing; gemv, gemv_fast, exllama, ipex and marlin are not)");
    if (!boolField(q, "zero_point", true, c.source))
        refuseField(c.source, "zero_point", "is false: only AWQ with zero points (the GEMM layout's qzeros) is supported");
}

} // namespace

std::optional<CheckpointQuantConfig> parseQuantizationConfig(std::string_view configJson, const std::string &source)
{
    json root;
    try {
        root = json::parse(configJson.begin(), configJson.end());
    } catch (const json::exception &e) {
        throw IoError(source + ": not valid JSON (" + e.what() + ")");
    }
    const bool separate = source.ends_with("quantize_config.json"); // AutoGPTQ's own file: the object is the config
    if (!separate && (!root.is_object() || !root.contains("quantization_config") || root["quantization_config"].is_null()))
        return std::nullopt;
    const json &q = separate ? root : root["quantization_config"];
    if (!q.is_object())
        throw ConfigError(source + ": quantization_config must be an object");
    CheckpointQuantConfig c;
    c.source = source;
    const std::string method = lowerString(q, "quant_method", separate ? "gptq" : "", source);
    if (method == "gptq") {
        parseGptq(q, c);
    } else if (method == "awq") {
        c.method = CheckpointQuantConfig::Method::Awq;
        parseAwq(q, c);
    } else {
        refuseField(source, "quant_method", "\"" + method + "\" is not supported (gptq, awq)");
    }
    const json &group = q.contains("group_size") ? q["group_size"] : q.contains("q_group_size") ? q["q_group_size"] : json(128);
    if (!group.is_number_integer() || (group.get<std::int64_t>() <= 0 && group.get<std::int64_t>() != -1))
        refuseField(source, "group_size", "must be a positive integer or -1, got " + group.dump().substr(0, 40));
    c.groupSize = group.get<std::int64_t>();
    for (const char *key : {"modules_to_not_convert", "modules_in_block_to_quantize_not"})
        if (q.contains(key) && q[key].is_array())
            for (const json &m : q[key])
                if (m.is_string())
                    c.modulesNotConverted.push_back(m.get<std::string>());
    return c;
}

std::optional<CheckpointQuantConfig> loadQuantizationConfig(const std::string &dir)
{
    namespace fs = std::filesystem;
    auto read = [](const fs::path &p) {
        std::ifstream in(p, std::ios::binary);
        if (!in)
            throw IoError(p.string() + ": cannot be read");
        std::ostringstream s;
        s << in.rdbuf();
        return s.str();
    };
    const fs::path config = fs::path(dir) / "config.json";
    if (fs::exists(config))
        if (auto c = parseQuantizationConfig(read(config), config.string()))
            return c;
    const fs::path separate = fs::path(dir) / "quantize_config.json";
    if (fs::exists(separate))
        return parseQuantizationConfig(read(separate), separate.string());
    return std::nullopt;
}

namespace {

// ---- the tensors of one layer ----

const char *dtypeName(StoredDtype d)
{
    switch (d) {
    case StoredDtype::F32:
        return "F32";
    case StoredDtype::F16:
        return "F16";
    case StoredDtype::BF16:
        return "BF16";
    case StoredDtype::I8:
        return "I8";
    case StoredDtype::U8:
        return "U8";
    case StoredDtype::I32:
        return "I32";
    case StoredDtype::I64:
        return "I64";
    }
    return "?";
}

std::string shapeText(const std::vector<std::int64_t> &s)
{
    std::string t = "[";
    for (std::size_t i = 0; i < s.size(); ++i)
        t += (i ? ", " : "") + std::to_string(s[i]);
    return t + "]";
}

// Looks tensors up and names the file and the tensor in every refusal.
class LayerTensors
{
public:
    LayerTensors(const std::map<std::string, TensorView> &tensors, std::string prefix, std::string what)
        : m_tensors(tensors), m_prefix(std::move(prefix)), m_what(std::move(what))
    {
        // Where a refusal points: the file holding the layer's qweight, else the checkpoint's directory.
        const auto q = tensors.find(m_prefix + ".qweight");
        if (q != tensors.end() && q->second.file)
            m_file = q->second.file->path();
        else if (!tensors.empty() && tensors.begin()->second.file)
            m_file = std::filesystem::path(tensors.begin()->second.file->path()).parent_path().string();
        else
            m_file = "the checkpoint";
    }
    [[nodiscard]] const TensorView *find(const std::string &suffix) const
    {
        const auto it = m_tensors.find(m_prefix + "." + suffix);
        return it == m_tensors.end() ? nullptr : &it->second;
    }
    // The tensor, checked for dtype and shape.
    const TensorView &need(const std::string &suffix, std::initializer_list<StoredDtype> dtypes, const std::vector<std::int64_t> &shape) const
    {
        const TensorView *t = find(suffix);
        if (!t)
            missing(suffix, "(" + m_what + " layer \"" + m_prefix + "\" needs qweight, qzeros and scales)");
        check(*t, dtypes, shape);
        return *t;
    }
    void check(const TensorView &t, std::initializer_list<StoredDtype> dtypes, const std::vector<std::int64_t> &shape) const
    {
        const std::string where = (t.file ? t.file->path() : m_file) + ": tensor \"" + t.name + "\"";
        if (std::find(dtypes.begin(), dtypes.end(), t.dtype) == dtypes.end()) {
            std::string allowed;
            for (StoredDtype d : dtypes)
                allowed += (allowed.empty() ? "" : " or ") + std::string(dtypeName(d));
            throw IoError(where + " is " + dtypeName(t.dtype) + "; " + m_what + " stores it as " + allowed);
        }
        if (t.shape != shape)
            throw IoError(where + " has shape " + shapeText(t.shape) + ", expected " + shapeText(shape) + " for " + m_what + " with "
                          + m_detail);
    }
    [[noreturn]] void missing(const std::string &suffix, const std::string &why) const
    {
        throw IoError(m_file + ": tensor \"" + m_prefix + "." + suffix + "\" is missing " + why);
    }
    void setDetail(std::string detail) { m_detail = std::move(detail); }
    [[noreturn]] void refuse(const TensorView &t, const std::string &why) const
    {
        throw IoError((t.file ? t.file->path() : m_file) + ": tensor \"" + t.name + "\" " + why);
    }

private:
    const std::map<std::string, TensorView> &m_tensors;
    std::string m_prefix, m_what, m_file, m_detail;
};

std::uint32_t word(const TensorView &t, std::int64_t index)
{
    std::uint32_t w;
    std::memcpy(&w, t.data + index * 4, 4);
    return w;
}

std::uint16_t half(const TensorView &t, std::int64_t index)
{
    std::uint16_t h;
    std::memcpy(&h, t.data + index * 2, 2);
    return h;
}

// One layer's codes, zero points and scales as the format stores them, in output column j and
// input feature i (GPTQ and AWQ differ only in where those sit).
struct Layer
{
    int bits = 4;
    std::int64_t out = 0, in = 0, group = 0, groups = 0;
    int zeroOffset = 0; // added to the stored zero point
    const TensorView *qweight = nullptr, *qzeros = nullptr, *scales = nullptr;
    bool awq = false;
    std::vector<std::int32_t> gIdx; // group of each input feature

    [[nodiscard]] int code(std::int64_t i, std::int64_t j) const
    {
        if (awq)
            return static_cast<int>((word(*qweight, i * (out / 8) + j / 8) >> (4 * kAwqNibble[j % 8])) & 0xFU);
        const int pack = 32 / bits;
        return static_cast<int>((word(*qweight, (i / pack) * out + j) >> (bits * (i % pack))) & ((1U << bits) - 1U));
    }
    [[nodiscard]] int storedZero(std::int64_t g, std::int64_t j) const
    {
        if (awq)
            return static_cast<int>((word(*qzeros, g * (out / 8) + j / 8) >> (4 * kAwqNibble[j % 8])) & 0xFU);
        const int pack = 32 / bits;
        return static_cast<int>((word(*qzeros, g * (out / pack) + j / pack) >> (bits * (j % pack))) & ((1U << bits) - 1U));
    }
    [[nodiscard]] std::uint16_t scale(std::int64_t g, std::int64_t j) const { return half(*scales, g * out + j); }
};

void readGroupIndex(const LayerTensors &lt, const CheckpointQuantConfig &c, Layer &layer)
{
    layer.gIdx.resize(static_cast<std::size_t>(layer.in));
    const TensorView *g = lt.find("g_idx");
    if (!g || layer.awq) {
        if (c.descAct && !layer.awq)
            lt.missing("g_idx", "and desc_act is true: the input features' groups are unknown");
        for (std::int64_t i = 0; i < layer.in; ++i)
            layer.gIdx[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i / layer.group);
        return;
    }
    lt.check(*g, {StoredDtype::I32, StoredDtype::I64}, {layer.in});
    for (std::int64_t i = 0; i < layer.in; ++i) {
        std::int64_t v = 0;
        if (g->dtype == StoredDtype::I32)
            v = static_cast<std::int32_t>(word(*g, i));
        else
            std::memcpy(&v, g->data + i * 8, 8);
        if (v < 0 || v >= layer.groups)
            lt.refuse(*g, "holds group " + std::to_string(v) + " for input feature " + std::to_string(i) + ", outside 0.." + std::to_string(layer.groups - 1));
        layer.gIdx[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(v);
    }
}

Layer gptqLayer(const CheckpointQuantConfig &c, LayerTensors &lt, std::int64_t out, std::int64_t in)
{
    Layer l;
    l.bits = c.bits;
    l.out = out;
    l.in = in;
    l.group = c.groupSize == -1 ? in : c.groupSize;
    l.groups = (in + l.group - 1) / l.group;
    l.zeroOffset = c.gptqV2 ? 0 : 1;
    const int pack = 32 / c.bits;
    lt.setDetail(std::to_string(in) + " inputs, " + std::to_string(out) + " outputs, " + std::to_string(c.bits) + " bits, group size "
                 + std::to_string(c.groupSize));
    const TensorView *q = lt.find("qweight");
    if (q && (in % pack != 0 || out % pack != 0))
        lt.refuse(*q, "cannot hold a " + std::to_string(out) + " x " + std::to_string(in) + " GPTQ layer: both sizes must be multiples of "
                          + std::to_string(pack) + " at " + std::to_string(c.bits) + " bits");
    l.qweight = &lt.need("qweight", {StoredDtype::I32}, {in / pack, out});
    l.qzeros = &lt.need("qzeros", {StoredDtype::I32}, {l.groups, out / pack});
    l.scales = &lt.need("scales", {StoredDtype::F16}, {l.groups, out});
    readGroupIndex(lt, c, l);
    return l;
}

Layer awqLayer(const CheckpointQuantConfig &c, LayerTensors &lt, std::int64_t out, std::int64_t in)
{
    Layer l;
    l.awq = true;
    l.bits = 4;
    l.out = out;
    l.in = in;
    l.group = c.groupSize == -1 ? in : c.groupSize;
    l.groups = in / l.group;
    lt.setDetail(std::to_string(in) + " inputs, " + std::to_string(out) + " outputs, group size " + std::to_string(c.groupSize));
    const TensorView *q = lt.find("qweight");
    if (q && (in % l.group != 0 || out % 8 != 0))
        lt.refuse(*q, "cannot hold a " + std::to_string(out) + " x " + std::to_string(in) + " AWQ layer: inputs must be a multiple of the group size "
                          + std::to_string(l.group) + " and outputs of 8");
    l.qweight = &lt.need("qweight", {StoredDtype::I32}, {in, out / 8});
    l.qzeros = &lt.need("qzeros", {StoredDtype::I32}, {l.groups, out / 8});
    l.scales = &lt.need("scales", {StoredDtype::F16}, {l.groups, out});
    readGroupIndex(lt, c, l);
    return l;
}

// The input features sorted by group (stable), when every group then holds `group` consecutive
// positions (the last one the rest): the layout the kernels' contiguous groups can hold. Empty
// when the order is the identity; nullopt when the groups are uneven.
std::optional<std::vector<std::int32_t>> contiguousOrder(const Layer &l)
{
    bool identity = true;
    for (std::int64_t i = 0; i < l.in && identity; ++i)
        identity = l.gIdx[static_cast<std::size_t>(i)] == i / l.group;
    if (identity)
        return std::vector<std::int32_t>{};
    std::vector<std::int32_t> order(static_cast<std::size_t>(l.in));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) { return l.gIdx[static_cast<std::size_t>(a)] < l.gIdx[static_cast<std::size_t>(b)]; });
    for (std::int64_t p = 0; p < l.in; ++p)
        if (l.gIdx[static_cast<std::size_t>(order[static_cast<std::size_t>(p)])] != p / l.group)
            return std::nullopt;
    return order;
}

// Whether every zero point is 2^(bits - 1): then the symmetric format (no zero points stored) holds it.
bool symmetricZeros(const Layer &l)
{
    const int mid = 1 << (l.bits - 1);
    for (std::int64_t g = 0; g < l.groups; ++g)
        for (std::int64_t j = 0; j < l.out; ++j)
            if (l.storedZero(g, j) + l.zeroOffset != mid)
                return false;
    return true;
}

QuantizedMatrix packLayer(const Layer &l, std::vector<std::int32_t> order, bool symmetric)
{
    const QuantFormat format{l.bits, l.group, !symmetric, symmetric ? 1 << (l.bits - 1) : l.zeroOffset};
    QuantizedMatrix m(l.out, l.in, format);
    std::vector<std::uint8_t> codes(static_cast<std::size_t>(kQPanel * l.in)), zeros(static_cast<std::size_t>(l.groups));
    std::vector<std::uint16_t> scales(static_cast<std::size_t>(l.groups));
    for (std::int64_t j0 = 0; j0 < l.out; j0 += kQPanel) { // a panel at a time: the packed words are read row by row
        const std::int64_t cols = std::min(kQPanel, l.out - j0);
        for (std::int64_t p = 0; p < l.in; ++p) {
            const std::int64_t i = order.empty() ? p : order[static_cast<std::size_t>(p)];
            for (std::int64_t j = 0; j < cols; ++j)
                codes[static_cast<std::size_t>(j * l.in + p)] = static_cast<std::uint8_t>(l.code(i, j0 + j));
        }
        for (std::int64_t j = 0; j < cols; ++j) {
            for (std::int64_t g = 0; g < l.groups; ++g) {
                scales[static_cast<std::size_t>(g)] = l.scale(g, j0 + j);
                zeros[static_cast<std::size_t>(g)] = static_cast<std::uint8_t>(l.storedZero(g, j0 + j));
            }
            m.setRow(j0 + j, codes.data() + j * l.in, scales.data(), symmetric ? nullptr : zeros.data());
        }
    }
    m.setInputOrder(std::move(order));
    return m;
}

std::vector<float> dequantizeLayer(const Layer &l)
{
    std::vector<float> w(static_cast<std::size_t>(l.out * l.in));
    for (std::int64_t i = 0; i < l.in; ++i) {
        const std::int32_t g = l.gIdx[static_cast<std::size_t>(i)];
        for (std::int64_t j = 0; j < l.out; ++j) // exact: an 11-bit significand times an integer of at most 9 bits
            w[static_cast<std::size_t>(j * l.in + i)] = halfToFloat(l.scale(g, j)) * static_cast<float>(l.code(i, j) - l.storedZero(g, j) - l.zeroOffset);
    }
    return w;
}

std::vector<float> readBias(const LayerTensors &lt, std::int64_t out)
{
    const TensorView *b = lt.find("bias");
    if (!b)
        return {};
    lt.check(*b, {StoredDtype::F16, StoredDtype::F32, StoredDtype::BF16}, {out});
    std::vector<float> v(static_cast<std::size_t>(out));
    for (std::int64_t j = 0; j < out; ++j) {
        if (b->dtype == StoredDtype::F32)
            std::memcpy(&v[static_cast<std::size_t>(j)], b->data + j * 4, 4);
        else
            v[static_cast<std::size_t>(j)] = b->dtype == StoredDtype::F16 ? halfToFloat(half(*b, j)) : bf16ToFloat(half(*b, j));
    }
    return v;
}

} // namespace

QuantizedLinear readQuantizedLinear(const CheckpointQuantConfig &config, const std::map<std::string, TensorView> &tensors, const std::string &prefix,
                                    std::int64_t out, std::int64_t in)
{
    const bool awq = config.method == CheckpointQuantConfig::Method::Awq;
    LayerTensors lt(tensors, prefix, awq ? "an AWQ" : "a GPTQ");
    if (out <= 0 || in <= 0)
        throw ConfigError("layer \"" + prefix + "\": " + std::to_string(out) + " x " + std::to_string(in) + " features is not a layer");
    const Layer layer = awq ? awqLayer(config, lt, out, in) : gptqLayer(config, lt, out, in);
    QuantizedLinear result;
    result.bias = readBias(lt, out);
    auto order = contiguousOrder(layer);
    if (layer.group % kBlock != 0 && layer.group < in)
        result.denseReason = "group size " + std::to_string(layer.group) + " is not a multiple of " + std::to_string(kBlock);
    else if (!order)
        result.denseReason = "its g_idx groups are not " + std::to_string(layer.group) + " input features each";
    if (!result.denseReason.empty()) {
        result.dense = dequantizeLayer(layer);
        return result;
    }
    result.weight = packLayer(layer, std::move(*order), symmetricZeros(layer));
    return result;
}

} // namespace cppl::agent::quant
