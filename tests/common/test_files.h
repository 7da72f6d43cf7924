// SPDX-License-Identifier: MIT
// Whole-file helpers the tests share.
#pragma once

#include <QString>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace cppl::test {

/// @brief The file's bytes; empty when it cannot be read.
inline std::string readFile(const QString &path)
{
    std::ifstream in(path.toStdString(), std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

/// @brief A little-endian uint32 token file (`tokenize --out X.u32`).
inline std::vector<std::uint32_t> readU32(const QString &path)
{
    const std::string bytes = readFile(path);
    std::vector<std::uint32_t> ids(bytes.size() / 4);
    for (std::size_t i = 0; i < ids.size(); ++i)
        for (std::size_t b = 0; b < 4; ++b)
            ids[i] |= static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[4 * i + b])) << (8 * b);
    return ids;
}

} // namespace cppl::test
