// SPDX-License-Identifier: MIT
#include "cppl/rank_env.h"

#include "cppl/errors.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <map>

namespace cppl {

EnvLookup processEnvironment()
{
    return [](const std::string &name) -> std::optional<std::string> {
        if (const char *v = std::getenv(name.c_str()))
            return std::string(v);
        return std::nullopt;
    };
}

namespace {

std::optional<int> toInt(std::string_view text)
{
    int v = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || ptr != text.data() + text.size())
        return std::nullopt;
    return v;
}

std::optional<int> intVar(const EnvLookup &env, const std::string &name)
{
    const auto v = env(name);
    if (!v)
        return std::nullopt;
    const auto i = toInt(*v);
    if (!i)
        throw ConfigError("environment variable " + name + "=\"" + *v + "\" is not an integer");
    return i;
}

} // namespace

std::string firstSlurmHost(std::string_view list)
{
    // The first entry ends at a comma outside brackets.
    std::size_t end = 0;
    int depth = 0;
    for (; end < list.size(); ++end) {
        if (list[end] == '[')
            ++depth;
        else if (list[end] == ']')
            --depth;
        else if (list[end] == ',' && depth == 0)
            break;
    }
    const std::string_view entry = list.substr(0, end);
    const auto open = entry.find('[');
    if (entry.empty() || depth != 0)
        throw ConfigError("SLURM_NODELIST \"" + std::string(list) + "\" is malformed");
    if (open == std::string_view::npos)
        return std::string(entry);
    const auto close = entry.find(']', open);
    if (close == std::string_view::npos)
        throw ConfigError("SLURM_NODELIST \"" + std::string(list) + "\" is malformed");
    std::string_view first = entry.substr(open + 1, close - open - 1);
    first = first.substr(0, first.find(','));
    first = first.substr(0, first.find('-')); // "03-05" -> "03": zero padding kept as written
    if (first.empty())
        throw ConfigError("SLURM_NODELIST \"" + std::string(list) + "\" has an empty range");
    return std::string(entry.substr(0, open)) + std::string(first) + std::string(entry.substr(close + 1));
}

RankIdentity resolveRankIdentity(const EnvLookup &env, const RankOverrides &flags)
{
    RankIdentity id;
    struct Source
    {
        const char *name, *rank, *world, *localRank, *localWorld;
    };
    static constexpr Source kSources[] = {
        {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
        {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
        {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
    };
    for (const Source &s : kSources) {
        const auto rank = intVar(env, s.rank);
        const auto world = intVar(env, s.world);
        if (!rank && !world)
            continue;
        if (!rank || !world)
            throw ConfigError(std::string(s.name) + " environment is incomplete: " + (rank ? s.world : s.rank) + " is not set (" + s.rank
                              + " and " + s.world + " go together)");
        id.source = s.name;
        id.rank = *rank;
        id.worldSize = *world;
        id.localRank = intVar(env, s.localRank).value_or(0);
        // SLURM_NTASKS_PER_NODE may read "4(x2)": only the leading count matters here.
        if (const auto lw = env(s.localWorld))
            id.localWorldSize = toInt(lw->substr(0, lw->find('('))).value_or(1);
        else // unknown (a hand-made environment): at least as many local ranks as this one implies
            id.localWorldSize = std::max(1, id.localRank + 1);
        break;
    }
    if (const auto addr = env("MASTER_ADDR"); addr && !addr->empty())
        id.masterAddr = *addr;
    else if (id.source == "slurm")
        if (const auto list = env("SLURM_NODELIST").value_or(env("SLURM_JOB_NODELIST").value_or("")); !list.empty())
            id.masterAddr = firstSlurmHost(list);
    if (const auto port = intVar(env, "MASTER_PORT"))
        id.masterPort = *port;

    if (flags.rank)
        id.rank = *flags.rank;
    if (flags.worldSize)
        id.worldSize = *flags.worldSize;
    if (flags.localRank)
        id.localRank = *flags.localRank;
    if (flags.localWorldSize)
        id.localWorldSize = *flags.localWorldSize;
    if (flags.masterAddr)
        id.masterAddr = *flags.masterAddr;
    if (flags.masterPort)
        id.masterPort = *flags.masterPort;
    if (flags.rank || flags.worldSize)
        id.source = "flags";

    const std::string from = " (from " + id.source + ")";
    if (id.worldSize < 1)
        throw ConfigError("world size " + std::to_string(id.worldSize) + " must be at least 1" + from);
    if (id.rank < 0 || id.rank >= id.worldSize)
        throw ConfigError("rank " + std::to_string(id.rank) + " is outside 0.." + std::to_string(id.worldSize - 1) + from);
    if (id.localRank < 0 || id.localWorldSize < 1 || id.localRank >= id.localWorldSize)
        throw ConfigError("local rank " + std::to_string(id.localRank) + " is outside 0.." + std::to_string(id.localWorldSize - 1) + from);
    if (id.masterPort < 1 || id.masterPort > 65535)
        throw ConfigError("master port " + std::to_string(id.masterPort) + " is not a TCP port (1..65535)" + from);
    return id;
}

RankGroups parseRankGroups(std::string_view spec, int world, const std::vector<std::string> &hostOfRank)
{
    if (world < 1)
        throw ConfigError("world size must be at least 1");
    RankGroups g;
    g.groupOf.assign(static_cast<std::size_t>(world), -1);
    auto place = [&](int rank, int group, const std::string &what) {
        if (rank < 0 || rank >= world)
            throw ConfigError("--groups " + std::string(spec) + ": rank " + std::to_string(rank) + " in " + what + " is outside 0.."
                              + std::to_string(world - 1));
        if (g.groupOf[static_cast<std::size_t>(rank)] >= 0)
            throw ConfigError("--groups " + std::string(spec) + ": rank " + std::to_string(rank) + " is in two groups");
        g.groupOf[static_cast<std::size_t>(rank)] = group;
        g.groups[static_cast<std::size_t>(group)].push_back(rank);
    };
    if (spec == "by-host") {
        if (static_cast<int>(hostOfRank.size()) != world)
            throw ConfigError("--groups by-host needs every rank's hostname");
        std::map<std::string, int> byHost;
        for (int r = 0; r < world; ++r) {
            auto [it, fresh] = byHost.emplace(hostOfRank[static_cast<std::size_t>(r)], static_cast<int>(g.groups.size()));
            if (fresh)
                g.groups.emplace_back();
            place(r, it->second, "host " + it->first);
        }
    } else if (spec.starts_with("size:")) {
        const auto k = toInt(spec.substr(5));
        if (!k || *k < 1)
            throw ConfigError("--groups " + std::string(spec) + ": size:K needs K >= 1, e.g. size:8");
        for (int r = 0; r < world; ++r) {
            if (r % *k == 0)
                g.groups.emplace_back();
            place(r, static_cast<int>(g.groups.size()) - 1, "size:" + std::to_string(*k));
        }
    } else {
        // "0-3;4-7" or "0,2;1,3": groups separated by ';', members by ',', ranges with '-'.
        std::size_t at = 0;
        while (at <= spec.size()) {
            const std::size_t end = std::min(spec.find(';', at), spec.size());
            const std::string_view group = spec.substr(at, end - at);
            if (group.empty())
                throw ConfigError("--groups \"" + std::string(spec) + "\": empty group; expected by-host, size:K or a list like 0-3;4-7");
            g.groups.emplace_back();
            const int index = static_cast<int>(g.groups.size()) - 1;
            std::size_t p = 0;
            while (p <= group.size()) {
                const std::size_t e = std::min(group.find(',', p), group.size());
                const std::string_view item = group.substr(p, e - p);
                const auto dash = item.find('-');
                const auto lo = toInt(item.substr(0, dash));
                const auto hi = dash == std::string_view::npos ? lo : toInt(item.substr(dash + 1));
                if (!lo || !hi || *hi < *lo)
                    throw ConfigError("--groups \"" + std::string(spec) + "\": \"" + std::string(item) + "\" is not a rank or an ascending range like 4-7");
                for (int r = *lo; r <= *hi; ++r)
                    place(r, index, "\"" + std::string(item) + "\"");
                p = e + 1;
            }
            std::sort(g.groups.back().begin(), g.groups.back().end());
            at = end + 1;
        }
    }
    for (int r = 0; r < world; ++r)
        if (g.groupOf[static_cast<std::size_t>(r)] < 0)
            throw ConfigError("--groups " + std::string(spec) + ": rank " + std::to_string(r) + " is in no group");
    return g;
}

} // namespace cppl
