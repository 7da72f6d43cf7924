// SPDX-License-Identifier: MIT
#include "result_json.h"

#include "cppl/errors.h"

#include <nlohmann/json.hpp>

#include <cstdint>

namespace cppl::agent {

namespace {

using Json = nlohmann::ordered_json;

constexpr int kMaxShards = 1 << 20;
// Per-shard counts above 2^40 (10^12 tokens) are not real; below it, kMaxShards of them sum
// without overflowing NllStats' int64 counts in merge (tests/fuzz/fuzz_result_json).
constexpr std::int64_t kMaxCount = std::int64_t{1} << 40;

const Json &field(const Json &object, const char *key, const std::string &where)
{
    const auto it = object.find(key);
    if (it == object.end())
        throw IoError(where + ": missing \"" + key + "\"; is it a clusterppl-agent eval --json result?");
    return *it;
}

std::int64_t count(const Json &object, const char *key, const std::string &where, std::int64_t max = INT64_MAX)
{
    const Json &v = field(object, key, where);
    // is_number_integer covers both signed and unsigned; an unsigned above INT64_MAX is refused below.
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(max)))
        throw IoError(where + ": \"" + key + "\" must be an integer between 0 and " + std::to_string(max) + ", got " + v.dump());
    const auto x = v.get<std::int64_t>();
    if (x < 0 || x > max)
        throw IoError(where + ": \"" + key + "\" must be an integer between 0 and " + std::to_string(max) + ", got " + v.dump());
    return x;
}

std::int64_t optionalCount(const Json &object, const char *key, const std::string &where)
{
    return object.contains(key) ? count(object, key, where, kMaxCount) : 0;
}

ExactSum exactSum(const Json &object, const char *key, const std::string &where)
{
    const Json &v = field(object, key, where);
    if (!v.is_string())
        throw IoError(where + ": \"" + key + "\" must be a string (an exact sum), got " + std::string(v.type_name()));
    const auto sum = ExactSum::fromString(v.get<std::string>());
    if (!sum)
        throw IoError(where + ": \"" + key + "\" is not a valid exact sum (\"" + v.get<std::string>().substr(0, 80) + "\")");
    return *sum;
}

std::string identityOf(const Json &j, const char *key, const char *inner = nullptr)
{
    const auto it = j.find(key);
    if (it == j.end())
        return "null";
    if (!inner)
        return it->dump();
    if (!it->is_object())
        return "null";
    const auto in = it->find(inner);
    return in == it->end() ? "null" : in->dump();
}

} // namespace

ShardResult parseResultJson(std::string_view text, const std::string &source)
{
    Json j;
    try {
        j = Json::parse(text.begin(), text.end());
    } catch (const nlohmann::json::exception &e) {
        throw IoError(source + ": not valid JSON (" + e.what() + ")");
    }
    if (!j.is_object())
        throw IoError(source + ": expected a JSON object (a clusterppl-agent eval --json result), found " + std::string(j.type_name()));
    ShardResult r;
    r.stats.nll = exactSum(j, "nll_sum_exact", source);
    r.stats.nllSquared = exactSum(j, "nll_sq_sum_exact", source);
    r.stats.tokens = count(j, "tokens_scored", source, kMaxCount);
    r.stats.windows = count(j, "windows", source, kMaxCount);
    r.stats.bytes = optionalCount(j, "bytes", source);
    r.stats.words = optionalCount(j, "words", source);
    for (const char *key : {"protocol", "context", "model", "data"})
        (void)field(j, key, source);
    const Json &shard = field(j, "shard", source);
    if (!shard.is_object())
        throw IoError(source + ": \"shard\" must be an object {\"rank\": R, \"count\": N}, got " + shard.dump().substr(0, 80));
    r.count = static_cast<int>(count(shard, "count", source + ": shard", kMaxShards));
    if (r.count < 1)
        throw IoError(source + ": shard: \"count\" must be at least 1, got 0");
    r.rank = static_cast<int>(count(shard, "rank", source + ": shard", kMaxShards));
    if (r.rank >= r.count)
        throw IoError(source + ": shard: \"rank\" " + std::to_string(r.rank) + " is not below \"count\" " + std::to_string(r.count));
    for (const char *key : {"protocol", "context", "stride", "batch", "dtype"})
        r.runIdentity[key] = identityOf(j, key);
    r.runIdentity["model.sha256"] = identityOf(j, "model", "sha256");
    r.runIdentity["data.sha256"] = identityOf(j, "data", "sha256");
    return r;
}

nlohmann::ordered_json ranksJson(const std::vector<dist::RankReport> &reports, const std::vector<std::string> &batchRuns, bool tensorParallel)
{
    nlohmann::ordered_json ranks = nlohmann::ordered_json::array();
    for (const auto &rep : reports) {
        nlohmann::ordered_json r = {{"rank", rep.rank},
                                    {"host", rep.host},
                                    {"group", rep.group},
                                    {"tokens", rep.tokens},
                                    {"windows", rep.windows},
                                    {"rounds", rep.rounds},
                                    {"compute_seconds", rep.computeSeconds},
                                    {"wait_seconds", rep.waitSeconds},
                                    {"transfer_seconds", rep.transferSeconds},
                                    {"collective_seconds", rep.collectiveSeconds},
                                    {"wall_seconds", rep.wallSeconds},
                                    {"comm_share", rep.commShare()},
                                    {"clock_offset_seconds", rep.clockOffsetSeconds},
                                    {"clock_uncertainty_seconds", rep.clockUncertaintySeconds},
                                    {"payload_bytes", rep.payloadBytes}};
        if (tensorParallel) {
            r["tp_rank"] = rep.tpRank;
            r["tp_collective_seconds"] = rep.tensorParallelSeconds;
        }
        if (static_cast<std::size_t>(rep.rank) < batchRuns.size())
            r["batches"] = batchRuns[static_cast<std::size_t>(rep.rank)];
        if (rep.lost)
            r["lost"] = true;
        ranks.push_back(std::move(r));
    }
    return ranks;
}

} // namespace cppl::agent
