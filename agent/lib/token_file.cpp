// SPDX-License-Identifier: MIT
#include "token_file.h"

#include "cppl/errors.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <charconv>

namespace cppl::agent {

namespace {

std::vector<unsigned char> slurp(const std::string &path)
{
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in)
        throw IoError(path + ": cannot open (does it exist and is it readable?)");
    const auto size = static_cast<std::streamoff>(in.tellg());
    if (size < 0)
        throw IoError(path + ": cannot determine the file size (is it a regular file?)");
    std::vector<unsigned char> data(static_cast<std::size_t>(size));
    in.seekg(0);
    if (size > 0 && !in.read(reinterpret_cast<char *>(data.data()), size))
        throw IoError(path + ": read failed after " + std::to_string(in.gcount()) + " bytes");
    return data;
}

bool endsWith(const std::string &s, std::string_view suffix)
{
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

template<typename T>
T loadLE(const unsigned char *p)
{
    std::make_unsigned_t<T> u = 0;
    for (std::size_t b = 0; b < sizeof(T); ++b)
        u |= static_cast<std::make_unsigned_t<T>>(static_cast<std::make_unsigned_t<T>>(p[b]) << (8 * b));
    return static_cast<T>(u);
}

template<typename T>
void decode(const std::string &path, const unsigned char *p, std::size_t count, std::vector<std::uint32_t> &out)
{
    out.resize(count);
    for (std::size_t i = 0; i < count; ++i) {
        const T v = loadLE<T>(p + i * sizeof(T));
        if constexpr (std::is_signed_v<T>) {
            if (v < 0)
                throw IoError(path + ": token " + std::to_string(i) + " is negative (" + std::to_string(v) + "); ids must be >= 0");
        }
        if constexpr (sizeof(T) > 4) {
            if (static_cast<std::uint64_t>(v) > 0xffffffffULL)
                throw IoError(path + ": token " + std::to_string(i) + " = " + std::to_string(v) + " does not fit 32 bits");
        }
        out[i] = static_cast<std::uint32_t>(v);
    }
}

// A Python dict literal as numpy writes it: {'descr': '<i4', 'fortran_order': False, 'shape': (3, 4), }.
// Parsed by hand: std::regex recurses per character and overflows the stack on long headers.
class NpyDictReader
{
public:
    NpyDictReader(std::string_view text, const std::string &source) : m_text(text), m_source(source) {}

    /// The text after `'key':`, or npos when the key is absent.
    std::size_t valueOf(std::string_view key) const
    {
        const std::string quoted = "'" + std::string(key) + "'";
        const auto at = m_text.find(quoted);
        if (at == std::string_view::npos)
            return std::string_view::npos;
        std::size_t i = skipSpaces(at + quoted.size());
        if (i >= m_text.size() || m_text[i] != ':')
            fail("'" + std::string(key) + "' is not followed by ':'");
        return skipSpaces(i + 1);
    }
    std::string quotedString(std::size_t i, std::string_view key) const
    {
        if (i >= m_text.size() || m_text[i] != '\'')
            fail("'" + std::string(key) + "' must be a quoted string");
        const auto close = m_text.find('\'', i + 1);
        if (close == std::string_view::npos)
            fail("'" + std::string(key) + "' has no closing quote");
        return std::string(m_text.substr(i + 1, close - i - 1));
    }
    std::size_t skipSpaces(std::size_t i) const
    {
        while (i < m_text.size() && (m_text[i] == ' ' || m_text[i] == '\t' || m_text[i] == '\n'))
            ++i;
        return i;
    }
    [[noreturn]] void fail(const std::string &what) const
    {
        throw IoError(m_source + ": bad .npy header: " + what + " (header: " + std::string(m_text.substr(0, 80)) + ")");
    }
    std::string_view text() const { return m_text; }

private:
    std::string_view m_text;
    const std::string &m_source;
};

TokenStream readNpy(const std::string &path, const std::vector<unsigned char> &data)
{
    // Format: "\x93NUMPY", major, minor, header length (2 bytes v1, 4 bytes v2/v3), a Python dict literal.
    static const unsigned char kMagic[] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
    if (data.size() < 10 || std::memcmp(data.data(), kMagic, 6) != 0)
        throw IoError(path + ": not a .npy file (missing the \\x93NUMPY magic)");
    const int major = data[6];
    std::size_t headerLen = 0;
    std::size_t start = 0;
    if (major == 1) {
        headerLen = loadLE<std::uint16_t>(&data[8]);
        start = 10;
    } else if (major == 2 || major == 3) {
        if (data.size() < 12)
            throw IoError(path + ": truncated .npy header");
        headerLen = loadLE<std::uint32_t>(&data[8]);
        start = 12;
    } else {
        throw IoError(path + ": unsupported .npy version " + std::to_string(major));
    }
    if (start + headerLen > data.size())
        throw IoError(path + ": .npy header length " + std::to_string(headerLen) + " runs past the end of the file");
    const NpyHeader h = parseNpyHeader(std::string_view(reinterpret_cast<const char *>(&data[start]), headerLen), path);
    const std::uint64_t payload = data.size() - start - headerLen;
    const std::string dtype = h.dtype;
    if (h.count > payload / static_cast<std::uint64_t>(h.itemSize))
        throw IoError(path + ": truncated .npy: the header promises " + std::to_string(h.count) + " x " + dtype + " but "
                      + std::to_string(payload) + " bytes follow");
    const auto count = static_cast<std::size_t>(h.count);
    TokenStream t;
    t.path = path;
    t.format = "npy:" + dtype;
    const unsigned char *p = data.data() + start + headerLen;
    if (dtype == "i4")
        decode<std::int32_t>(path, p, count, t.ids);
    else if (dtype == "i8")
        decode<std::int64_t>(path, p, count, t.ids);
    else if (dtype == "u2")
        decode<std::uint16_t>(path, p, count, t.ids);
    else if (dtype == "u4")
        decode<std::uint32_t>(path, p, count, t.ids);
    else
        throw IoError(path + ": unsupported .npy dtype " + dtype + " (supported: int32, int64, uint16, uint32)");
    return t;
}

} // namespace

NpyHeader parseNpyHeader(std::string_view header, const std::string &source)
{
    if (header.size() > kMaxNpyHeader)
        throw IoError(source + ": .npy header of " + std::to_string(header.size()) + " bytes is longer than " + std::to_string(kMaxNpyHeader)
                      + "; not a token array numpy wrote");
    const NpyDictReader r(header, source);
    NpyHeader h;
    const auto descrAt = r.valueOf("descr");
    if (descrAt == std::string_view::npos)
        r.fail("no 'descr'");
    const std::string descr = r.quotedString(descrAt, "descr");
    // [<>|=]? kind size, e.g. '<i4', '|u1'
    std::size_t k = 0;
    char order = '=';
    if (k < descr.size() && (descr[k] == '<' || descr[k] == '>' || descr[k] == '|' || descr[k] == '='))
        order = descr[k++];
    if (descr.size() != k + 2 || (descr[k] != 'i' && descr[k] != 'u') || descr[k + 1] < '1' || descr[k + 1] > '8')
        throw IoError(source + ": .npy header has no integer 'descr' (got '" + descr.substr(0, 40)
                      + "'; supported: int32, int64, uint16, uint32)");
    h.dtype = descr.substr(k, 2);
    h.itemSize = descr[k + 1] - '0';
    if (order == '>' && h.itemSize > 1)
        throw IoError(source + ": big-endian .npy arrays are not supported; save with dtype '<" + h.dtype + "'");
    if (const auto f = r.valueOf("fortran_order"); f != std::string_view::npos && r.text().substr(f).starts_with("True"))
        throw IoError(source + ": Fortran-ordered .npy arrays are not supported; save a C-ordered (np.ascontiguousarray) array");
    auto i = r.valueOf("shape");
    if (i == std::string_view::npos)
        r.fail("no 'shape'");
    if (i >= header.size() || header[i] != '(')
        r.fail("'shape' must be a tuple");
    h.count = 1;
    for (i = r.skipSpaces(i + 1); i < header.size() && header[i] != ')';) {
        std::uint64_t dim = 0;
        const auto [ptr, ec] = std::from_chars(header.data() + i, header.data() + header.size(), dim);
        if (ec == std::errc::result_out_of_range)
            throw IoError(source + ": .npy 'shape' has a dimension beyond 2^64 (" + std::string(header.substr(i, 24)) + "...)");
        if (ec != std::errc() || ptr == header.data() + i)
            r.fail("'shape' must be a tuple of non-negative integers");
        if (dim != 0 && h.count > UINT64_MAX / dim)
            throw IoError(source + ": .npy 'shape' promises more than 2^64 elements");
        h.count *= dim;
        i = r.skipSpaces(static_cast<std::size_t>(ptr - header.data()));
        if (i < header.size() && header[i] == ',')
            i = r.skipSpaces(i + 1);
        else if (i < header.size() && header[i] != ')')
            r.fail("'shape' must be a tuple of non-negative integers");
    }
    if (i >= header.size())
        r.fail("'shape' has no closing ')'");
    return h;
}

TokenStream readTokenFile(const std::string &path)
{
    const auto data = slurp(path);
    if (data.empty())
        throw IoError(path + ": the token file is empty");
    TokenStream t;
    if (endsWith(path, ".npy")) {
        t = readNpy(path, data);
    } else if (endsWith(path, ".u16") || endsWith(path, ".bin16")) {
        if (data.size() % 2 != 0)
            throw IoError(path + ": " + std::to_string(data.size()) + " bytes is an odd length for 16-bit tokens (truncated file?)");
        t.format = "u16";
        decode<std::uint16_t>(path, data.data(), data.size() / 2, t.ids);
    } else if (endsWith(path, ".u32") || endsWith(path, ".bin")) {
        if (data.size() % 4 != 0)
            throw IoError(path + ": " + std::to_string(data.size()) + " bytes is not a multiple of 4 for 32-bit tokens (truncated file?)");
        t.format = "u32";
        decode<std::uint32_t>(path, data.data(), data.size() / 4, t.ids);
    } else {
        throw IoError(path + ": unknown token file type; use .u16, .u32 (raw little-endian) or .npy, "
                             "or pass text with --text FILE --tokenizer bytes");
    }
    if (t.ids.empty())
        throw IoError(path + ": the token file holds no tokens");
    t.path = path;
    t.fileBytes = static_cast<std::int64_t>(data.size());
    return t;
}

TokenStream readTextAsBytes(const std::string &path)
{
    const auto data = slurp(path);
    if (data.empty())
        throw IoError(path + ": the text file is empty");
    TokenStream t;
    t.path = path;
    t.format = "bytes";
    t.fileBytes = static_cast<std::int64_t>(data.size());
    t.ids.assign(data.begin(), data.end());
    return t;
}

void checkVocabulary(const TokenStream &tokens, std::int64_t vocab)
{
    const auto it = std::find_if(tokens.ids.begin(), tokens.ids.end(), [&](std::uint32_t id) { return id >= vocab; });
    if (it != tokens.ids.end())
        throw IoError(tokens.path + ": token " + std::to_string(it - tokens.ids.begin()) + " has id " + std::to_string(*it)
                      + ", outside the model's vocabulary of " + std::to_string(vocab)
                      + " (was the data tokenised for another model?)");
}

} // namespace cppl::agent
