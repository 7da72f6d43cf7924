// SPDX-License-Identifier: MIT
#include "quantized_matrix.h"

#include "half.h"

#include "cppl/errors.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#if __has_include(<sys/mman.h>)
#include <sys/mman.h>
#endif

namespace cppl::agent::quant {

void FreeAligned::operator()(void *p) const { std::free(p); }

void *allocateAligned(std::int64_t bytes)
{
    constexpr std::size_t kHuge = std::size_t{2} << 20;
    const std::size_t size = (static_cast<std::size_t>(std::max<std::int64_t>(1, bytes)) + 63) / 64 * 64;
    const std::size_t align = size >= kHuge ? kHuge : 64;
    const std::size_t rounded = (size + align - 1) / align * align;
    void *p = std::aligned_alloc(align, rounded);
    if (!p)
        throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
    if (align == kHuge)
        (void)madvise(p, rounded, MADV_HUGEPAGE); // advice only: without THP, 4 KiB pages
#endif
    std::memset(p, 0, size);
    return p;
}

namespace {

template <typename T>
std::unique_ptr<T[], FreeAligned> allocate(std::int64_t count)
{
    return std::unique_ptr<T[], FreeAligned>(static_cast<T *>(allocateAligned(count * static_cast<std::int64_t>(sizeof(T)))));
}

void checkFormat(std::int64_t n, std::int64_t k, const QuantFormat &f)
{
    if (f.bits != 4 && f.bits != 8)
        throw ConfigError("quantized weights of " + std::to_string(f.bits) + " bits are not supported (4 or 8)");
    if (n <= 0 || k <= 0)
        throw ConfigError("a quantized matrix needs at least one row and one column, got " + std::to_string(n) + " x " + std::to_string(k));
    if (f.group <= 0 || (f.group % kBlock != 0 && f.group < k))
        throw ConfigError("quantization group size " + std::to_string(f.group) + " does not fit the int8 kernels: it must be a multiple of "
                          + std::to_string(kBlock) + " (activations are quantized in blocks of " + std::to_string(kBlock)
                          + " inside a group) or cover the whole row of " + std::to_string(k));
    const int maxOffset = f.perGroupZeros ? 1 : (1 << f.bits);
    if (f.zeroOffset < 0 || f.zeroOffset > maxOffset)
        throw ConfigError("zero offset " + std::to_string(f.zeroOffset) + " is out of range for " + std::to_string(f.bits) + "-bit codes");
}

} // namespace

QuantizedMatrix::QuantizedMatrix(std::int64_t n, std::int64_t k, const QuantFormat &format) : m_format(format), m_n(n), m_k(k)
{
    checkFormat(n, k, format);
    m_blocks = (k + kBlock - 1) / kBlock;
    m_blocksPerGroup = (format.group + kBlock - 1) / kBlock;
    m_groups = (m_blocks + m_blocksPerGroup - 1) / m_blocksPerGroup;
    m_codes = allocate<std::uint8_t>(panels() * panelCodeBytes());
    m_scales = allocate<std::uint16_t>(panels() * m_groups * kQPanel);
    if (format.perGroupZeros)
        m_zeros = allocate<std::uint8_t>(panels() * m_groups * kQPanel);
}

std::int64_t QuantizedMatrix::codeOffset(std::int64_t row, std::int64_t p) const
{
    const std::int64_t panel = row / kQPanel, col = row % kQPanel;
    const std::int64_t chunk = m_format.bits == 8 ? p / 4 : p / 8; // quad or octet
    return panel * panelCodeBytes() + chunk * 128 + col * 4 + p % 4;
}

void QuantizedMatrix::setRow(std::int64_t row, const std::uint8_t *codes, const std::uint16_t *scales, const std::uint8_t *zeros)
{
    CPPL_ENFORCE(row >= 0 && row < m_n, "QuantizedMatrix::setRow: row out of range");
    CPPL_ENFORCE((zeros != nullptr) == m_format.perGroupZeros, "QuantizedMatrix::setRow: zero points given iff the format has them");
    const int limit = 1 << m_format.bits;
    for (std::int64_t p = 0; p < m_k; ++p) {
        CPPL_ENFORCE(codes[p] < limit, "QuantizedMatrix::setRow: code wider than the format");
        std::uint8_t &byte = m_codes[static_cast<std::size_t>(codeOffset(row, p))];
        if (m_format.bits == 8)
            byte = codes[p];
        else if (p % 8 < 4)
            byte = static_cast<std::uint8_t>((byte & 0xF0U) | codes[p]);
        else
            byte = static_cast<std::uint8_t>((byte & 0x0FU) | (codes[p] << 4));
    }
    const std::int64_t base = (row / kQPanel) * m_groups * kQPanel + row % kQPanel;
    for (std::int64_t g = 0; g < m_groups; ++g) {
        m_scales[static_cast<std::size_t>(base + g * kQPanel)] = scales[g];
        if (zeros) {
            CPPL_ENFORCE(zeros[g] < limit, "QuantizedMatrix::setRow: zero point wider than the format");
            m_zeros[static_cast<std::size_t>(base + g * kQPanel)] = zeros[g];
        }
    }
}

void QuantizedMatrix::setInputOrder(std::vector<std::int32_t> order)
{
    CPPL_ENFORCE(order.empty() || static_cast<std::int64_t>(order.size()) == m_k, "QuantizedMatrix::setInputOrder: one entry per input feature");
    m_order = std::move(order);
}

int QuantizedMatrix::code(std::int64_t row, std::int64_t p) const
{
    const std::uint8_t byte = m_codes[static_cast<std::size_t>(codeOffset(row, p))];
    if (m_format.bits == 8)
        return byte;
    return p % 8 < 4 ? (byte & 0x0F) : (byte >> 4);
}

std::uint16_t QuantizedMatrix::scaleBits(std::int64_t row, std::int64_t group) const
{
    return m_scales[static_cast<std::size_t>((row / kQPanel) * m_groups * kQPanel + group * kQPanel + row % kQPanel)];
}

int QuantizedMatrix::zero(std::int64_t row, std::int64_t group) const
{
    const int z = m_zeros ? m_zeros[static_cast<std::size_t>((row / kQPanel) * m_groups * kQPanel + group * kQPanel + row % kQPanel)] : 0;
    return z + m_format.zeroOffset;
}

float QuantizedMatrix::dequantized(std::int64_t row, std::int64_t p) const
{
    const std::int64_t g = p / kBlock / m_blocksPerGroup;
    return halfToFloat(scaleBits(row, g)) * static_cast<float>(code(row, p) - zero(row, g));
}

void QuantizedMatrix::dequantizeRow(std::int64_t row, float *out) const
{
    for (std::int64_t p = 0; p < m_k; ++p)
        out[m_order.empty() ? p : m_order[static_cast<std::size_t>(p)]] = dequantized(row, p);
}

std::int64_t QuantizedMatrix::bytes() const
{
    if (empty())
        return 0;
    const std::int64_t perGroup = panels() * m_groups * kQPanel;
    return panels() * panelCodeBytes() + perGroup * 2 + (m_zeros ? perGroup : 0)
           + static_cast<std::int64_t>(m_order.size() * sizeof(std::int32_t));
}

double QuantizedMatrix::bitsPerWeight() const
{
    return empty() ? 0.0 : static_cast<double>(bytes()) * 8.0 / (static_cast<double>(m_n) * static_cast<double>(m_k));
}

} // namespace cppl::agent::quant
