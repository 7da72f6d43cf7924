// SPDX-License-Identifier: MIT
#include "batch_runs.h"

#include <charconv>

namespace cppl::agent::dist {

std::string formatBatchRuns(std::span<const BatchRun> runs)
{
    std::string s;
    for (const BatchRun &r : runs) {
        if (r.end <= r.first)
            continue;
        if (!s.empty())
            s += ',';
        s += std::to_string(r.first);
        if (r.end - r.first > 1)
            s += '-' + std::to_string(r.end - 1);
    }
    return s;
}

std::optional<std::vector<BatchRun>> parseBatchRuns(const std::string &text)
{
    std::vector<BatchRun> out;
    std::size_t pos = 0;
    auto number = [&](std::int64_t &v) {
        const char *b = text.data() + pos;
        const auto [p, ec] = std::from_chars(b, text.data() + text.size(), v);
        if (ec != std::errc() || p == b || v < 0)
            return false;
        pos = static_cast<std::size_t>(p - text.data());
        return true;
    };
    while (pos < text.size()) {
        std::int64_t a = 0, b = 0;
        if (!number(a))
            return std::nullopt;
        b = a;
        if (pos < text.size() && text[pos] == '-') {
            ++pos;
            if (!number(b) || b < a)
                return std::nullopt;
        }
        out.push_back({a, b + 1});
        if (pos < text.size() && text[pos++] != ',')
            return std::nullopt;
    }
    return out;
}

} // namespace cppl::agent::dist
