// SPDX-License-Identifier: MIT
// Helpers the libFuzzer targets share (docs/fuzzing.md).
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace cppl::fuzz {

/// A broken property: say which, then abort so libFuzzer saves the input as a crash.
[[noreturn]] inline void fail(std::string_view what, std::string_view detail = {})
{
    std::fprintf(stderr, "fuzz property violated: %.*s\n%.*s\n", static_cast<int>(what.size()), what.data(),
                 static_cast<int>(detail.size()), detail.data());
    std::abort();
}

inline std::string_view asText(const std::uint8_t *data, std::size_t size)
{
    return {reinterpret_cast<const char *>(data), size};
}

/**
 * @brief Writes the input to one per-process file ending in @p suffix and returns its path, for
 * parsers that take a path (they dispatch on the extension or memory-map the file). /dev/shm keeps
 * the write in memory where it exists.
 */
inline const std::string &writeInputFile(const std::uint8_t *data, std::size_t size, const char *suffix)
{
    static const std::string path = [&] {
        const char *dir = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        std::string p = std::string(dir) + "/clusterppl-fuzz-" + std::to_string(::getpid()) + suffix;
        static std::string forCleanup;
        forCleanup = p;
        std::atexit([] { ::unlink(forCleanup.c_str()); });
        return p;
    }();
    std::FILE *f = std::fopen(path.c_str(), "wb");
    if (f == nullptr || (size > 0 && std::fwrite(data, 1, size, f) != size) || std::fclose(f) != 0)
        fail("cannot write the input file", path);
    return path;
}

} // namespace cppl::fuzz
