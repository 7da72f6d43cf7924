// SPDX-License-Identifier: MIT
#include "args.h"

#include "cppl/sharding.h"

#include "cppl/errors.h"

#include <algorithm>
#include <charconv>

namespace cppl::agent {

Args::Args(const std::vector<std::string> &argv, std::set<std::string> valued, std::set<std::string> switches)
{
    auto known = [&] {
        std::string list;
        for (const auto &s : valued) {
            list += list.empty() ? "" : " ";
            list += s;
        }
        for (const auto &s : switches) {
            list += list.empty() ? "" : " ";
            list += s;
        }
        return list;
    };
    for (std::size_t i = 0; i < argv.size(); ++i) {
        std::string arg = argv[i];
        std::optional<std::string> inlineValue;
        if (auto eq = arg.find('='); arg.starts_with("--") && eq != std::string::npos) {
            inlineValue = arg.substr(eq + 1);
            arg = arg.substr(0, eq);
        }
        if (valued.count(arg)) {
            if (inlineValue) {
                m_values[arg] = *inlineValue;
            } else {
                if (i + 1 >= argv.size())
                    throw ConfigError(arg + " needs a value");
                m_values[arg] = argv[++i];
            }
        } else if (switches.count(arg)) {
            if (inlineValue)
                throw ConfigError(arg + " takes no value (got \"" + *inlineValue + "\")");
            m_switches.insert(arg);
        } else {
            throw ConfigError("unknown argument \"" + arg + "\" (known: " + known() + ")");
        }
    }
}

std::optional<std::string> Args::get(const std::string &flag) const
{
    auto it = m_values.find(flag);
    if (it == m_values.end())
        return std::nullopt;
    return it->second;
}

std::string Args::require(const std::string &flag, const std::string &what) const
{
    auto v = get(flag);
    if (!v || v->empty())
        throw ConfigError(flag + " is required: " + what);
    return *v;
}

std::int64_t Args::integer(const std::string &flag, std::int64_t fallback, std::int64_t min, std::int64_t max) const
{
    const auto v = get(flag);
    if (!v)
        return fallback;
    std::int64_t x = 0;
    auto [ptr, ec] = std::from_chars(v->data(), v->data() + v->size(), x);
    if (ec != std::errc() || ptr != v->data() + v->size())
        throw ConfigError(flag + " expects an integer, got \"" + *v + "\"");
    if (x < min || x > max)
        throw ConfigError(flag + " must be between " + std::to_string(min) + " and " + std::to_string(max) + ", got "
                          + std::to_string(x));
    return x;
}

std::int64_t Args::syncEveryTokens() const
{
    const auto v = get("--sync-every-tokens");
    if (v && (*v == "end" || *v == "inf"))
        return kSyncAtEnd;
    return integer("--sync-every-tokens", kDefaultSyncEveryTokens, 0, kSyncAtEnd);
}

void validateRunId(const std::string &id, const std::string &origin)
{
    const auto bad = std::find_if(id.begin(), id.end(), [](char c) {
        return !((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-');
    });
    std::string why;
    if (id.empty() || id.size() > 128)
        why = "must be 1 to 128 characters long (it has " + std::to_string(id.size()) + ")";
    else if (bad != id.end())
        why = "has the character '" + std::string(1, *bad) + "' at " + std::to_string(bad - id.begin()) + "; only A-Z a-z 0-9 . _ - are allowed";
    else if (id.front() == '.')
        why = "must not start with a dot";
    if (!why.empty())
        throw ConfigError(origin + " \"" + id.substr(0, 160) + "\" " + why + " (the run id names directories)");
}

RankOverrides Args::rankOverrides() const
{
    auto optInt = [&](const char *flag, std::int64_t min, std::int64_t max) -> std::optional<int> {
        return has(flag) ? std::optional<int>(static_cast<int>(integer(flag, 0, min, max))) : std::nullopt;
    };
    RankOverrides flags;
    flags.rank = optInt("--rank", 0, (1 << 30) - 1);
    flags.worldSize = optInt("--world-size", 1, 1 << 30);
    flags.localRank = optInt("--local-rank", 0, (1 << 30) - 1);
    flags.localWorldSize = optInt("--local-world-size", 1, 1 << 30);
    flags.masterPort = optInt("--master-port", 1, 65535);
    flags.masterAddr = get("--master-addr");
    return flags;
}

} // namespace cppl::agent
