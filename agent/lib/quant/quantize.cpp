// SPDX-License-Identifier: MIT
// Compiled with -ffp-contract=off (agent/CMakeLists.txt): the scales and codes are defined as
// separately rounded float32 operations (quantize.h), which a fused multiply-add would change.
#include "quantize.h"

#include "half.h"

#include "cppl/errors.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace cppl::agent::quant {

namespace {

[[noreturn]] void refuseValue(std::int64_t index, float value, const char *why)
{
    throw ConfigError("weight " + std::to_string(index) + " of the row is " + std::to_string(value) + ": " + why);
}

// The float16 of a float32 scale, refusing one beyond float16's range.
std::uint16_t halfScale(float scale, float largest, std::int64_t at)
{
    const std::uint16_t h = floatToHalf(scale);
    if ((h & 0x7C00U) == 0x7C00U)
        throw ConfigError("the group of weights " + std::to_string(at) + " on reaches " + std::to_string(largest)
                          + ": too large for a float16 quantization scale (keep this layer unquantized)");
    return h;
}

void checkFinite(const float *w, std::int64_t n, std::int64_t first)
{
    for (std::int64_t i = 0; i < n; ++i)
        if (!std::isfinite(w[i]))
            refuseValue(first + i, w[i], "not a finite number");
}

int roundClamp(float x, int lo, int hi) { return static_cast<int>(std::clamp(roundHalfEven(x), static_cast<float>(lo), static_cast<float>(hi))); }

void int8Group(const float *w, std::int64_t n, std::int64_t first, std::uint8_t *codes, std::uint16_t &scale)
{
    float amax = 0;
    for (std::int64_t i = 0; i < n; ++i)
        amax = std::max(amax, std::fabs(w[i]));
    scale = halfScale(amax / 127.0F, amax, first);
    const float s = halfToFloat(scale);
    for (std::int64_t i = 0; i < n; ++i)
        codes[i] = static_cast<std::uint8_t>((s == 0.0F ? 0 : roundClamp(w[i] / s, -127, 127)) + 128);
    if (s == 0.0F)
        scale = 0;
}

void int4SymGroup(const float *w, std::int64_t n, std::int64_t first, std::uint8_t *codes, std::uint16_t &scale)
{
    float extreme = 0; // the weight of largest magnitude, the first one on a tie
    for (std::int64_t i = 0; i < n; ++i)
        if (std::fabs(w[i]) > std::fabs(extreme))
            extreme = w[i];
    scale = halfScale(extreme / -8.0F, extreme, first);
    const float s = halfToFloat(scale);
    for (std::int64_t i = 0; i < n; ++i)
        codes[i] = static_cast<std::uint8_t>((s == 0.0F ? 0 : roundClamp(w[i] / s, -8, 7)) + 8);
    if (s == 0.0F)
        scale = 0;
}

void int4AsymGroup(const float *w, std::int64_t n, std::int64_t first, std::uint8_t *codes, std::uint16_t &scale, std::uint8_t &zero)
{
    float lo = 0, hi = 0; // the range always holds 0, so w = 0 is a code
    for (std::int64_t i = 0; i < n; ++i) {
        lo = std::min(lo, w[i]);
        hi = std::max(hi, w[i]);
    }
    scale = halfScale((hi - lo) / 15.0F, std::max(hi, -lo), first);
    const float s = halfToFloat(scale);
    if (s == 0.0F) {
        scale = 0;
        zero = 0;
        std::fill(codes, codes + n, std::uint8_t{0});
        return;
    }
    const int z = roundClamp(-lo / s, 0, 15);
    zero = static_cast<std::uint8_t>(z);
    for (std::int64_t i = 0; i < n; ++i)
        codes[i] = static_cast<std::uint8_t>(std::clamp(static_cast<int>(roundHalfEven(w[i] / s)) + z, 0, 15));
}

} // namespace

float roundHalfEven(float x)
{
    if (!(std::fabs(x) < 8388608.0F)) // 2^23 and beyond are integers already (and NaN stays NaN)
        return x;
    const float t = std::trunc(x);
    const float frac = x - t; // exact: |x| < 2^23
    const float step = x < 0 ? -1.0F : 1.0F;
    if (std::fabs(frac) > 0.5F || (std::fabs(frac) == 0.5F && std::fmod(t, 2.0F) != 0.0F))
        return t + step;
    return t;
}

const char *schemeName(QuantScheme s)
{
    switch (s) {
    case QuantScheme::Int8:
        return "int8";
    case QuantScheme::Int4Sym:
        return "int4-sym";
    case QuantScheme::Int4Asym:
        return "int4-asym";
    }
    return "?";
}

QuantScheme parseScheme(const std::string &name)
{
    if (name == "int8")
        return QuantScheme::Int8;
    if (name == "int4" || name == "int4-sym")
        return QuantScheme::Int4Sym;
    if (name == "int4-asym")
        return QuantScheme::Int4Asym;
    throw ConfigError("unknown quantization \"" + name + "\" (int8, int4 = int4-sym, int4-asym)");
}

QuantFormat formatOf(QuantScheme scheme, std::int64_t group)
{
    switch (scheme) {
    case QuantScheme::Int8:
        return {8, group, false, 128};
    case QuantScheme::Int4Sym:
        return {4, group, false, 8};
    case QuantScheme::Int4Asym:
        return {4, group, true, 0};
    }
    return {};
}

void quantizeRow(QuantScheme scheme, std::int64_t group, const float *w, std::int64_t k, std::uint8_t *codes, std::uint16_t *scales,
                 std::uint8_t *zeros)
{
    checkFinite(w, k, 0);
    for (std::int64_t g = 0, first = 0; first < k; ++g, first += group) {
        const std::int64_t n = std::min(group, k - first);
        switch (scheme) {
        case QuantScheme::Int8:
            int8Group(w + first, n, first, codes + first, scales[g]);
            break;
        case QuantScheme::Int4Sym:
            int4SymGroup(w + first, n, first, codes + first, scales[g]);
            break;
        case QuantScheme::Int4Asym:
            int4AsymGroup(w + first, n, first, codes + first, scales[g], zeros[g]);
            break;
        }
    }
}

void quantizeRows(QuantScheme scheme, QuantizedMatrix &out, std::int64_t row0, const float *w, std::int64_t ldw, std::int64_t rows)
{
    const QuantFormat want = formatOf(scheme, out.format().group);
    const QuantFormat &have = out.format();
    CPPL_ENFORCE(want.bits == have.bits && want.perGroupZeros == have.perGroupZeros && want.zeroOffset == have.zeroOffset,
                 "quantizeRows: the matrix's format is not the scheme's");
    const std::int64_t k = out.k(), group = std::min(have.group, k), groups = out.groups();
    std::vector<std::uint8_t> codes(static_cast<std::size_t>(k)), zeros(static_cast<std::size_t>(groups));
    std::vector<std::uint16_t> scales(static_cast<std::size_t>(groups));
    for (std::int64_t r = 0; r < rows; ++r) {
        try {
            quantizeRow(scheme, group, w + r * ldw, k, codes.data(), scales.data(), zeros.data());
        } catch (const ConfigError &e) {
            throw ConfigError("row " + std::to_string(row0 + r) + ": " + e.what());
        }
        out.setRow(row0 + r, codes.data(), scales.data(), have.perGroupZeros ? zeros.data() : nullptr);
    }
}

QuantizedMatrix quantizeMatrix(QuantScheme scheme, std::int64_t group, const float *w, std::int64_t ldw, std::int64_t n, std::int64_t k)
{
    QuantizedMatrix m(n, k, formatOf(scheme, group));
    quantizeRows(scheme, m, 0, w, ldw, n);
    return m;
}

} // namespace cppl::agent::quant
