// SPDX-License-Identifier: MIT
#include "checkpoint.h"

#include "cppl/errors.h"
#include "cppl/sharding.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>

namespace cppl::agent::dist {

std::string fingerprintMismatch(const RunFingerprint &saved, const RunFingerprint &now)
{
    if (saved.model != now.model)
        return "the model's weights changed since the interrupted run (sha256 " + saved.model.substr(0, 16) + "... then, "
               + now.model.substr(0, 16) + "... now): its partial sums cannot be combined with this model's; start a new run";
    if (saved.data != now.data)
        return "the data as the model sees it changed since the interrupted run (token stream sha256 " + saved.data.substr(0, 16)
               + "... then, " + now.data.substr(0, 16) + "... now: another file, tokenizer, dataset reader or BOS); start a new run";
    if (saved.plan != now.plan)
        return "the evaluation settings differ from the interrupted run's (then: " + saved.plan + "; now: " + now.plan
               + "); resume with the run's own profile";
    return {};
}

std::int64_t ResumeState::batchesDone() const
{
    std::int64_t n = 0;
    for (const BatchRun &r : ledger)
        n += r.end - r.first;
    return n;
}

ResumeState parseResumeState(const std::string &text)
{
    const auto bad = [](const std::string &why) {
        return ConfigError("--resume-state: " + why + " (it is what clusterppl-cli run --resume passes from the run directory's checkpoint.json)");
    };
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object())
        throw bad("not a JSON object");
    if (j.value("format", std::string()) != "clusterppl-checkpoint" || !j.contains("version") || !j["version"].is_number_integer()
        || j["version"].get<int>() != 1)
        throw bad("not a clusterppl-checkpoint of version 1");
    ResumeState s;
    const auto integer = [&](const char *key, std::int64_t min) {
        if (!j.contains(key) || !j[key].is_number_integer() || j[key].get<std::int64_t>() < min)
            throw bad(std::string("\"") + key + "\" must be an integer >= " + std::to_string(min));
        return j[key].get<std::int64_t>();
    };
    s.round = static_cast<int>(std::min<std::int64_t>(integer("round", 0), 1 << 30));
    s.worldSize = static_cast<int>(std::min<std::int64_t>(integer("world_size", 1), 1 << 30));
    s.batchCount = integer("batch_count", 0);
    if (j.contains("batch")) // absent in checkpoints written before it was recorded
        s.batch = integer("batch", 1);
    if (j.contains("sync_every_tokens") && j["sync_every_tokens"] == "end")
        s.syncEvery = kSyncAtEnd;
    else
        s.syncEvery = integer("sync_every_tokens", 0);
    s.schedule = j.value("schedule", std::string());
    if (s.schedule != "static" && s.schedule != "dynamic")
        throw bad("\"schedule\" must be static or dynamic");
    if (!j.contains("words") || !j["words"].is_array() || j["words"].size() != s.words.size())
        throw bad("\"words\" must be " + std::to_string(s.words.size()) + " decimal int64 strings");
    for (std::size_t i = 0; i < s.words.size(); ++i) {
        const auto &w = j["words"][i];
        const std::string t = w.is_string() ? w.get<std::string>() : std::string();
        const auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), s.words[i]);
        if (t.empty() || ec != std::errc() || p != t.data() + t.size())
            throw bad("\"words\"[" + std::to_string(i) + "] is not a decimal int64 string");
    }
    const auto ledger = parseBatchRuns(j.value("ledger", std::string("?")));
    if (!ledger)
        throw bad("\"ledger\" is not a list of batch ranges such as \"0-3,8\"");
    s.ledger = *ledger;
    for (const BatchRun &r : s.ledger)
        if (r.end > s.batchCount)
            throw bad("the ledger names batch " + std::to_string(r.end - 1) + " of " + std::to_string(s.batchCount));
    if (!j.contains("fingerprint") || !j["fingerprint"].is_object())
        throw bad("\"fingerprint\" is missing");
    const auto &f = j["fingerprint"];
    s.fingerprint = {f.value("model", std::string()), f.value("data", std::string()), f.value("plan", std::string())};
    if (s.fingerprint.model.empty() || s.fingerprint.data.empty() || s.fingerprint.plan.empty())
        throw bad("\"fingerprint\" needs model, data and plan");
    return s;
}

namespace {

cppl::lines::BatchRanges rangesOf(std::span<const BatchRun> runs)
{
    cppl::lines::BatchRanges out;
    out.reserve(runs.size());
    for (const BatchRun &r : runs)
        out.push_back({r.first, r.end});
    return out;
}

} // namespace

std::string ledgerLine(int rank, int round, std::span<const BatchRun> batches, int epoch)
{
    return cppl::lines::encode(cppl::lines::Ledger{rank, round, rangesOf(batches), epoch});
}

cppl::lines::Checkpoint checkpointOf(int round, const NllStats::Words &words, const RunFingerprint &fingerprint, const std::string &schedule,
                                     int worldSize, std::int64_t syncEvery, std::int64_t batchCount, std::int64_t batch, int epoch)
{
    cppl::lines::Checkpoint c;
    c.round = round;
    c.words = words;
    c.schedule = schedule;
    c.worldSize = worldSize;
    c.syncEvery = syncEvery;
    c.batchCount = batchCount;
    c.batch = batch;
    c.fingerprint = {fingerprint.model, fingerprint.data, fingerprint.plan};
    c.epoch = epoch;
    return c;
}

std::string regroupLine(int epoch, int firstRound, std::span<const RegroupLost> lost)
{
    cppl::lines::Regroup r{epoch, firstRound, {}};
    for (const RegroupLost &l : lost)
        r.lost.push_back({l.rank, l.round, rangesOf(l.batches)});
    return cppl::lines::encode(r);
}

cppl::lines::RankLost rankLost(int rank, const std::string &host, const std::string &cause, int round, std::int64_t windowsKept,
                               std::int64_t batchesRequeued, int ranksLeft)
{
    return {rank, host, cause, round, windowsKept, batchesRequeued, ranksLeft, false};
}

cppl::lines::RankLost rankLostAfterLastRound(int rank, const std::string &host, const std::string &cause, int round, std::int64_t windowsKept)
{
    return {rank, host, cause, round, windowsKept, 0, 0, true};
}

std::string rankLostLine(const cppl::lines::RankLost &lost)
{
    return cppl::lines::encode(lost);
}

std::string recoveredText(const cppl::lines::RankLost &lost)
{
    const std::string text = "recovered: " + cppl::lines::describe(lost);
    return lost.afterLastRound ? text : text + "; going on with " + std::to_string(lost.ranksLeft) + " ranks";
}

std::vector<std::int64_t> remainingBatches(std::int64_t count, std::span<const BatchRun> done)
{
    std::vector<char> isDone(static_cast<std::size_t>(std::max<std::int64_t>(0, count)), 0);
    for (const BatchRun &r : done)
        for (std::int64_t b = std::max<std::int64_t>(0, r.first); b < std::min(r.end, count); ++b)
            isDone[static_cast<std::size_t>(b)] = 1;
    std::vector<std::int64_t> out;
    for (std::int64_t b = 0; b < count; ++b)
        if (!isDone[static_cast<std::size_t>(b)])
            out.push_back(b);
    return out;
}

void addWindowsAsBatches(std::vector<BatchRun> &runs, std::int64_t firstWindow, std::int64_t endWindow, std::int64_t batch)
{
    if (endWindow <= firstWindow || batch < 1)
        return;
    const BatchRun r{firstWindow / batch, (endWindow + batch - 1) / batch};
    if (!runs.empty() && runs.back().end == r.first)
        runs.back().end = r.end;
    else
        runs.push_back(r);
}

} // namespace cppl::agent::dist
