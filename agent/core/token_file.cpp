// SPDX-License-Identifier: MIT
#include "token_file.h"

#include "cppl/errors.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <regex>

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
    const std::string header(reinterpret_cast<const char *>(&data[start]), headerLen);
    std::smatch m;
    if (!std::regex_search(header, m, std::regex(R"('descr'\s*:\s*'([<>|=]?)([iu])(\d))")))
        throw IoError(path + ": .npy header has no integer 'descr' (got: " + header.substr(0, 80) + ")");
    const std::string order = m[1];
    const char kind = m[2].str()[0];
    const int size = std::stoi(m[3]);
    if (order == ">")
        throw IoError(path + ": big-endian .npy arrays are not supported; save with dtype '<" + std::string(1, kind) + std::to_string(size) + "'");
    if (std::regex_search(header, std::regex(R"('fortran_order'\s*:\s*True)")))
        throw IoError(path + ": Fortran-ordered .npy arrays are not supported; save a C-ordered (np.ascontiguousarray) array");
    if (!std::regex_search(header, m, std::regex(R"('shape'\s*:\s*\(([^)]*)\))")))
        throw IoError(path + ": .npy header has no 'shape'");
    std::size_t count = 1;
    const std::string dims = m[1];
    const std::regex number(R"(\d+)");
    for (std::sregex_iterator it(dims.begin(), dims.end(), number), end; it != end; ++it)
        count *= static_cast<std::size_t>(std::stoull(it->str()));
    const std::size_t payload = data.size() - start - headerLen;
    const std::string dtype = std::string(1, kind) + std::to_string(size);
    if (count * static_cast<std::size_t>(size) > payload)
        throw IoError(path + ": truncated .npy: the header promises " + std::to_string(count) + " x " + dtype + " but "
                      + std::to_string(payload) + " bytes follow");
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
