// SPDX-License-Identifier: MIT
// The fakes' scripts are environment variables of each rank (tests/fakes/README.md). A malformed
// value ends the process at once with the variable, its value and the form it must have: a test
// must never pass against a fake that ignored what it was asked.
#pragma once

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace cppl::fakes {

/// The exit status of a process whose fake was given a malformed script.
inline constexpr int kScriptErrorExit = 70;

[[noreturn]] inline void scriptError(const char *variable, const std::string &value, const char *form)
{
    std::fprintf(stderr, "cppl fake GPU libraries: %s=\"%s\" is malformed; expected %s (tests/fakes/README.md)\n", variable, value.c_str(), form);
    std::fflush(stderr);
    std::_Exit(kScriptErrorExit);
}

/// A whole decimal (or 0x hexadecimal) number in [lo, hi], or nothing when @p variable is unset.
inline std::optional<long long> envInteger(const char *variable, long long lo, long long hi, const char *form)
{
    const char *v = std::getenv(variable);
    if (!v)
        return std::nullopt;
    char *end = nullptr;
    errno = 0;
    const long long n = std::strtoll(v, &end, 0);
    if (!*v || *end || errno != 0 || n < lo || n > hi)
        scriptError(variable, v, form);
    return n;
}

/// Comma-separated whole numbers, each in [lo, hi]; empty when @p variable is unset.
inline std::vector<long long> envIntegerList(const char *variable, long long lo, long long hi, const char *form)
{
    std::vector<long long> out;
    const char *v = std::getenv(variable);
    if (!v)
        return out;
    const std::string text = v;
    std::size_t start = 0;
    for (;;) {
        const std::size_t comma = text.find(',', start);
        const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        char *end = nullptr;
        errno = 0;
        const long long n = std::strtoll(item.c_str(), &end, 0);
        if (item.empty() || *end || errno != 0 || n < lo || n > hi)
            scriptError(variable, text, form);
        out.push_back(n);
        if (comma == std::string::npos)
            return out;
        start = comma + 1;
    }
}

/// One "R:WHEN" item of a script: process rank R, and a number (a collective's index, a delay in
/// ms) or the word "never".
struct RankPoint
{
    int rank = 0;
    long long value = 0;
    bool never = false;
};

/// "R:N[,R:N...]" (N a number >= 0, or "never" where @p neverAllowed); empty when unset.
inline std::vector<RankPoint> envRankPoints(const char *variable, bool neverAllowed, const char *form)
{
    std::vector<RankPoint> out;
    const char *v = std::getenv(variable);
    if (!v)
        return out;
    const std::string text = v;
    std::size_t start = 0;
    for (;;) {
        const std::size_t comma = text.find(',', start);
        const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        const std::size_t colon = item.find(':');
        if (colon == std::string::npos || colon == 0)
            scriptError(variable, text, form);
        char *end = nullptr;
        const long long rank = std::strtoll(item.c_str(), &end, 10);
        if (end != item.c_str() + colon || rank < 0 || rank > 1 << 20)
            scriptError(variable, text, form);
        RankPoint p;
        p.rank = static_cast<int>(rank);
        const std::string when = item.substr(colon + 1);
        if (when == "never" && neverAllowed) {
            p.never = true;
        } else {
            errno = 0;
            p.value = std::strtoll(when.c_str(), &end, 10);
            if (when.empty() || *end || errno != 0 || p.value < 0)
                scriptError(variable, text, form);
        }
        out.push_back(p);
        if (comma == std::string::npos)
            return out;
        start = comma + 1;
    }
}

/// The physical devices of this "host", as both fakes see them: NVML counts them in this order
/// (PCI bus order); the CUDA runtime may count them in another (CPPL_FAKE_CUDA_ORDER).
struct FakeDevices
{
    int count = 1;
    std::vector<long long> memory; ///< total bytes per physical device
    int pciBusBase = 0x18;         ///< device n is at PCI 0000:(base + n):00.0
};

inline FakeDevices readFakeDevices()
{
    constexpr long long kDefaultMemory = 80LL << 30;
    FakeDevices d;
    d.count = static_cast<int>(envInteger("CPPL_FAKE_CUDA_DEVICES", 0, 64, "a device count 0..64").value_or(1));
    const std::vector<long long> memory = envIntegerList("CPPL_FAKE_CUDA_MEMORY", 1 << 20, 1LL << 44, "bytes per device, e.g. 85899345920,1073741824");
    for (int n = 0; n < d.count; ++n)
        d.memory.push_back(memory.empty() ? kDefaultMemory : memory[static_cast<std::size_t>(n) % memory.size()]);
    d.pciBusBase = static_cast<int>(envInteger("CPPL_FAKE_CUDA_PCI_BUS", 0, 0xc0, "the first device's PCI bus number, e.g. 0x18").value_or(0x18));
    return d;
}

} // namespace cppl::fakes
