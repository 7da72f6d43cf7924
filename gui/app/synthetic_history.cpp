// SPDX-License-Identifier: MIT
#include "synthetic_history.h"

#include "run/alerts.h"
#include "run/run_engine.h"
#include "store/run_store.h"
#include "store/sweep.h"

#include "cppl/cluster_profile.h"
#include "cppl/errors.h"

#include <QCryptographicHash>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <algorithm>
#include <cmath>
#include <functional>
#include <queue>
#include <random>

using namespace Qt::StringLiterals;
using cppl::core::store::LogLine;
using cppl::core::store::RankSample;
using cppl::core::store::RankSummary;
using cppl::core::store::RunRecord;
using cppl::core::store::RunStatus;
using cppl::core::store::StoredAlert;

namespace cppl::app {

namespace {

constexpr int kRanksPerNode = 4;           // GPUs a node: 8 ranks span two nodes
constexpr double kRankRate = 9200;         // tok/s of one GPU evaluating alone (as the synthetic Run page's)
constexpr double kRateLoss = 0.012;        // a rank's rate x R^-kRateLoss: clocks, shared filesystem, PCIe
constexpr std::int64_t kWindowTokens = 1024; // hf-sliding, context 2048, stride 1024: tokens scored per window
constexpr std::int64_t kBatch = 16;        // windows per forward pass, and per global batch
constexpr std::int64_t kBatches = 2880;    // global batches of the data
constexpr std::int64_t kTokens = kBatches * kBatch * kWindowTokens; // 47,185,920 scored
constexpr std::int64_t kSyncEveryTokens = 65536;
constexpr double kPpl = 9.4827131846;
constexpr double kPplStderr = 0.0041268;
constexpr double kRegroupSeconds = 6.5;    // a lost rank: heartbeat timeout, then the regrouping
constexpr auto kModel = "/shared/models/Llama-3.2-1B";
constexpr auto kData = "/shared/data/pile-val-47M.u32";

QString hostName(int node)
{
    return u"node-%1"_s.arg(node, 3, 10, QLatin1Char('0'));
}

ClusterProfile clusterProfile(int ranks)
{
    ClusterProfile p;
    p.name = "gpu-cluster";
    p.launcher = "ssh";
    const int nodes = (ranks + kRanksPerNode - 1) / kRanksPerNode;
    for (int n = 0; n < nodes; ++n) {
        HostSpec h;
        h.name = hostName(n).toStdString();
        h.address = u"10.8.%1.%2"_s.arg(n / 200).arg(10 + n % 200).toStdString();
        h.slots = kRanksPerNode;
        h.agent = "/opt/clusterppl/bin/clusterppl-agent";
        h.workdir = "/scratch/eval";
        h.ssh.user = "eval";
        p.hosts.push_back(h);
    }
    p.grouping.mode = GroupingSpec::Mode::ByHost;
    EvaluationSpec &e = p.evaluation;
    e.model = kModel;
    e.tokens = kData;
    e.tokenizer = "hf";
    e.protocol = "hf-sliding";
    e.context = 2048;
    e.stride = 1024;
    e.batch = kBatch;
    e.dtype = "bfloat16";
    e.device = "cuda";
    e.backend = "nccl";
    e.topology = "hierarchical";
    p.thresholds.syncEveryTokens = kSyncEveryTokens;
    p.thresholds.commShareAlert = 0.15;
    return p;
}

// The exact accumulator's text (docs/exact-sum.md: "xs1:" + 112 hex digits); equal text, equal bits.
QString exactSum(const QByteArray &seed)
{
    const QByteArray a = QCryptographicHash::hash(seed, QCryptographicHash::Sha256).toHex();
    const QByteArray b = QCryptographicHash::hash(a, QCryptographicHash::Sha256).toHex();
    return u"xs1:"_s + QString::fromLatin1(QByteArray(a + b).left(112));
}

struct SimRank
{
    int rank = 0;
    int node = 0;
    double rate = 0;            // tok/s while computing
    std::int64_t batches = 0;
    double compute = 0, wait = 0, transfer = 0, clock = 0;
    bool lost = false;
    std::int64_t committedBatches = 0; // a lost rank's batches that count
    std::int64_t roundsWith = 0;       // a lost rank: rounds committed with it
};

struct Simulation
{
    std::vector<SimRank> ranks;
    double seconds = 0;          // evaluation, the slowest rank's wall time
    std::int64_t rounds = 0;
    std::int64_t batchesRedone = 0;
    double lostAt = 0;
};

// The dynamic schedule: each global batch goes to the rank that is free first. Sync rounds every
// kSyncEveryTokens tokens per rank cost transfer (more with more ranks and more nodes) and waiting
// for the round's stragglers; at the end every rank waits for the last batch.
Simulation simulate(int world, std::mt19937 &rng, int lostRank = -1, double lostFraction = 0.5)
{
    Simulation s;
    std::normal_distribution<double> jitter(1.0, 0.02), batchNoise(1.0, 0.015);
    std::uniform_real_distribution<double> spread(0.6, 1.4);
    const double perRank = kRankRate * std::pow(double(world), -kRateLoss);
    const int nodes = (world + kRanksPerNode - 1) / kRanksPerNode;
    s.ranks.resize(std::size_t(world));
    for (int r = 0; r < world; ++r) {
        s.ranks[std::size_t(r)].rank = r;
        s.ranks[std::size_t(r)].node = r / kRanksPerNode;
        s.ranks[std::size_t(r)].rate = perRank * jitter(rng);
    }
    if (world >= 16) // a GPU held at a lower clock (thermal): the dynamic schedule gives it fewer batches
        s.ranks[std::size_t(world * 5 / 8 + 3)].rate *= 0.86;
    const double batchTokens = double(kBatch * kWindowTokens);
    // Per round: transfer of the exact sums (latency bound: up the group, among leaders, back) and
    // the wait for the round's last rank.
    const double log2r = std::log2(double(world)), log2n = std::log2(double(nodes));
    const double transferPerRound = world == 1 ? 0.0 : 0.0012 + 0.0006 * log2r + (nodes > 1 ? 0.004 + 0.0035 * log2n : 0.0);
    const double waitFraction = world == 1 ? 0.0 : 0.004 * log2r + (nodes > 1 ? 0.006 : 0.0);
    const double roundSeconds = double(kSyncEveryTokens) / perRank;
    const double lostAt = lostRank >= 0 ? lostFraction * double(kTokens) / (perRank * world) : 1e300;
    s.lostAt = lostAt;

    using Slot = std::pair<double, int>; // (free at, rank)
    std::priority_queue<Slot, std::vector<Slot>, std::greater<>> free;
    for (int r = 0; r < world; ++r)
        free.emplace(0.0, r);
    std::int64_t left = kBatches;
    bool regrouped = false;
    while (left > 0 && !free.empty()) {
        auto [at, r] = free.top();
        free.pop();
        SimRank &k = s.ranks[std::size_t(r)];
        if (r == lostRank && at >= lostAt) {
            // Lost: what it evaluated since its last committed round is evaluated again by the others.
            const std::int64_t perRound = std::max<std::int64_t>(1, kSyncEveryTokens / std::int64_t(batchTokens));
            k.lost = true;
            k.roundsWith = k.batches / perRound;
            k.committedBatches = k.roundsWith * perRound;
            s.batchesRedone = k.batches - k.committedBatches;
            left += s.batchesRedone;
            k.clock = at;
            continue;
        }
        if (lostRank >= 0 && !regrouped && at >= lostAt) {
            // Every survivor is blocked in the round's collective until the loss is detected.
            regrouped = true;
            std::vector<Slot> rest;
            rest.emplace_back(at, r);
            while (!free.empty()) {
                rest.push_back(free.top());
                free.pop();
            }
            for (auto &[t, q] : rest) {
                if (q == lostRank) {
                    free.emplace(t, q);
                    continue;
                }
                const double until = std::max(t, lostAt + kRegroupSeconds);
                s.ranks[std::size_t(q)].wait += until - t;
                free.emplace(until, q);
            }
            continue;
        }
        const double dt = batchTokens / k.rate * batchNoise(rng);
        k.compute += dt;
        ++k.batches;
        --left;
        free.emplace(at + dt, r);
        k.clock = at + dt;
    }
    std::int64_t maxBatches = 0;
    for (const SimRank &k : s.ranks)
        maxBatches = std::max(maxBatches, k.batches);
    s.rounds = world == 1 ? 0 : std::max<std::int64_t>(1, std::int64_t(std::ceil(double(maxBatches) * batchTokens / double(kSyncEveryTokens))));
    for (SimRank &k : s.ranks) {
        if (k.lost)
            continue;
        k.transfer = double(s.rounds) * transferPerRound * spread(rng);
        k.wait += double(s.rounds) * roundSeconds * waitFraction * spread(rng);
        k.clock += k.transfer + k.wait;
        s.seconds = std::max(s.seconds, k.clock);
    }
    for (SimRank &k : s.ranks)
        if (!k.lost)
            k.wait += s.seconds - k.clock; // the final round waits for the last batch
    return s;
}

struct RunPlan
{
    QString runId;
    int world = 1;
    QDateTime started;
    bool newerDriver = false;  // not bit-identical: other cuBLAS kernels
    enum class Kind { Sweep, Failed, LostRank } kind = Kind::Sweep;
    int lostRank = -1;
};

QJsonArray preflightOf(int nodes, bool newerDriver)
{
    QJsonArray out;
    for (int n = 0; n < nodes; ++n) {
        const QJsonObject report{{u"agent_version"_s, u"0.9.0"_s},
                                 {u"libtorch_version"_s, u"2.5.1"_s},
                                 {u"cuda"_s, newerDriver ? u"12.6"_s : u"12.4"_s},
                                 {u"nccl"_s, u"2.21.5"_s},
                                 {u"driver_version"_s, newerDriver ? u"560.35.03"_s : u"550.54.15"_s},
                                 {u"gpus"_s, kRanksPerNode}};
        out.append(QJsonObject{{u"host"_s, hostName(n)}, {u"ran"_s, true}, {u"problems"_s, QJsonArray{}}, {u"report"_s, report}});
    }
    return out;
}

// One run, recorded as RunRecorder records one: the header at its start, pre-flight, samples and
// logs while it runs, alerts as raised, then the end with the result applied.
QDateTime recordRun(cppl::core::store::StoreWriter &w, const RunPlan &plan, std::mt19937 &rng)
{
    using cppl::core::store::applyResult;
    const ClusterProfile base = clusterProfile(plan.world);
    ClusterProfile profile = cppl::core::store::profileForRanks(base, plan.world);
    if (plan.kind == RunPlan::Kind::Failed) {
        profile.evaluation.schedule = "static";
        profile.evaluation.onRankLoss = "fail";
    }
    const RankLayout layout = rankLayout(profile);
    const int nodes = int(profile.hosts.size());

    RunRecord h;
    h.runId = plan.runId;
    h.status = RunStatus::Running;
    h.started = plan.started;
    h.source = plan.kind == RunPlan::Kind::Sweep ? u"sweep"_s : u"dashboard"_s;
    h.profileName = QString::fromStdString(profile.name);
    h.profile = QJsonDocument::fromJson(QByteArray::fromStdString(profileToJson(profile))).object();
    const auto in = cppl::core::store::settingsInputsFromProfile(profile, {});
    h.settings = cppl::core::store::settingsJson(in);
    h.settings.insert(u"tokenizer"_s, QString::fromStdString(profile.evaluation.tokenizer));
    h.settings.insert(u"sync_every_tokens"_s, static_cast<qint64>(profile.thresholds.syncEveryTokens));
    h.settings.insert(u"backend"_s, QString::fromStdString(profile.evaluation.backend));
    h.settings.insert(u"topology"_s, QString::fromStdString(profile.evaluation.topology));
    h.settings.insert(u"device"_s, QString::fromStdString(profile.evaluation.device));
    h.settings.insert(u"run_directory"_s, QString(u"/scratch/eval/.clusterppl/runs/"_s + plan.runId));
    h.model = in.model;
    h.data = in.data;
    h.protocol = in.protocol;
    h.settingsKey = cppl::core::store::settingsKey(in);
    h.launcher = QString::fromStdString(profile.launcher);
    h.worldSize = plan.world;
    h.nodeCount = nodes;
    for (const HostSpec &host : profile.hosts)
        h.hosts.append(QJsonObject{{u"name"_s, QString::fromStdString(host.name)},
                                   {u"address"_s, QString::fromStdString(host.address)},
                                   {u"slots"_s, host.slots}});
    QJsonArray groups;
    for (const auto &g : layout.groups) {
        QJsonArray ranks;
        for (int r : g.ranks)
            ranks.append(r);
        groups.append(ranks);
    }
    if (plan.world > 1)
        h.groups = groups;
    h.groupsCount = int(layout.groups.size());
    h.owner = cppl::core::store::currentOwner();
    w.beginRun(h);
    h.preflight = preflightOf(nodes, plan.newerDriver);
    h.versions = cppl::core::store::versionsFrom(h.preflight, {});
    w.setPreflight(h.runId, h.preflight, h.versions);

    const Simulation sim = simulate(plan.world, rng, plan.lostRank, 0.55);
    const double load = 18.0 + 1.5 * std::log2(double(nodes)) + std::uniform_real_distribution<double>(0, 4)(rng);
    // A failed run (static shards, a rank killed by the OOM killer) ends a third of the way in.
    const double endsAt = plan.kind == RunPlan::Kind::Failed ? 0.34 * sim.seconds : sim.seconds;
    const int failedRank = plan.world * 3 / 4 - 2;

    // Samples as the recorder takes them: every rank heard, at most 40 sample times.
    const int times = plan.world > 1024 ? 12 : 40;
    std::normal_distribution<double> noise(1.0, 0.04), bias(0.0, 0.004);
    std::vector<double> rankBias(std::size_t(plan.world));
    for (double &b : rankBias)
        b = bias(rng);
    for (int i = 1; i <= times; ++i) {
        const double t = endsAt * i / times;
        std::vector<RankSample> out;
        out.reserve(std::size_t(plan.world));
        for (const SimRank &k : sim.ranks) {
            const double own = k.compute + k.wait + k.transfer;
            const bool lostNow = k.lost && t >= sim.lostAt;
            const bool failedNow = plan.kind == RunPlan::Kind::Failed && k.rank == failedRank && i == times;
            const double done = std::min(1.0, t / std::max(1e-9, k.lost ? sim.lostAt : sim.seconds));
            RankSample smp;
            smp.t = load + t;
            smp.rank = k.rank;
            smp.tokensPerSecond = lostNow || failedNow ? 0.0 : k.rate * noise(rng) * (own > 0 ? k.compute / own : 1.0);
            smp.waitShare = own > 0 ? k.wait / own * (i == times ? 1.0 : 0.8) : 0.0;
            smp.transferShare = own > 0 ? k.transfer / own : 0.0;
            smp.deviation = rankBias[std::size_t(k.rank)] / std::sqrt(done + 0.02);
            smp.tokens = std::int64_t(double(k.batches * kBatch * kWindowTokens) * done);
            out.push_back(smp);
        }
        w.addSamples(h.runId, std::move(out));
    }

    // Rank 0's round lines and the launcher's.
    std::vector<LogLine> logs;
    logs.push_back({-1, 0, 0.0, false, u"run %1: %2 ranks on %3 hosts (ssh), %4 groups"_s.arg(h.runId).arg(plan.world).arg(nodes).arg(h.groupsCount)});
    logs.push_back({0, 0, load, true, u"model: %1 (hf, llama, 1.24e9 params, bfloat16 on cuda:0)"_s.arg(QString::fromLatin1(kModel))});
    const std::int64_t lines = std::min<std::int64_t>(std::max<std::int64_t>(sim.rounds, 1), 6);
    for (std::int64_t i = 1; i <= lines; ++i) {
        const double f = double(i) / double(lines) * (endsAt / sim.seconds);
        logs.push_back({0, i + 1, load + f * sim.seconds, true,
                        u"[round %1/%2] ppl %3  %4/%5 tokens  %6 tok/s (all ranks)"_s.arg(std::int64_t(f * double(std::max<std::int64_t>(sim.rounds, 1))))
                            .arg(std::max<std::int64_t>(sim.rounds, 1))
                            .arg(kPpl * (1 + 0.002 * (1 - f)), 0, 'f', 4)
                            .arg(std::int64_t(f * double(kTokens)))
                            .arg(kTokens)
                            .arg(std::int64_t(double(kTokens) / sim.seconds))});
    }
    if (plan.kind != RunPlan::Kind::Failed)
        logs.push_back({0, lines + 2, load + sim.seconds, false, u"Final estimate: PPL = %1 +/- %2"_s.arg(kPpl, 0, 'f', 4).arg(kPplStderr, 0, 'f', 5)});
    w.addLogs(h.runId, std::move(logs));

    RunRecord f = h;
    f.ended = plan.started.addMSecs(qint64(1000 * (load + endsAt + 2)));
    if (plan.kind == RunPlan::Kind::Failed) {
        const QString host = hostName(failedRank / kRanksPerNode);
        w.addAlert(h.runId, StoredAlert{load + endsAt, plan.started.addMSecs(qint64(1000 * (load + endsAt))), failedRank,
                                        cppl::core::run::alertKindName(cppl::core::run::AlertKind::Failed),
                                        u"rank %1 on %2 failed (exit 137)"_s.arg(failedRank).arg(host)});
        f.status = RunStatus::Failed;
        f.exitCode = 12;
        f.firstCause = u"run failed: rank %1 on %2: killed by signal 9 first"_s.arg(failedRank).arg(host);
        // No result: the ranks' figures are the last snapshot's.
        for (const SimRank &k : sim.ranks) {
            RankSummary s;
            s.rank = k.rank;
            s.host = hostName(k.node);
            s.group = k.node;
            s.tokens = std::int64_t(double(k.batches * kBatch * kWindowTokens) * endsAt / sim.seconds);
            s.windows = s.tokens / kWindowTokens;
            s.computeSeconds = k.compute * endsAt / sim.seconds;
            s.waitSeconds = k.wait * endsAt / sim.seconds;
            s.transferSeconds = k.transfer * endsAt / sim.seconds;
            s.wallSeconds = s.computeSeconds + s.waitSeconds + s.transferSeconds;
            s.tokensPerSecond = k.rate;
            s.exitCode = k.rank == failedRank ? 137 : 5;
            f.ranks.push_back(s);
        }
        f.versions = cppl::core::store::versionsFrom(h.preflight, {});
        const QDateTime ended = f.ended;
        w.finishRun(std::move(f));
        return ended;
    }

    // The result JSON rank 0 writes (docs/result-json.md), the fields the store reads included.
    const bool identical = !plan.newerDriver;
    const double ppl = identical ? kPpl : kPpl * (1 + 3.1e-7);
    QJsonObject r;
    r.insert(u"ppl"_s, ppl);
    r.insert(u"ppl_stderr"_s, kPplStderr);
    r.insert(u"nll_sum"_s, std::log(ppl) * double(kTokens));
    r.insert(u"nll_sum_exact"_s, exactSum(identical ? QByteArray("sweep-nll") : QByteArray("sweep-nll-560")));
    r.insert(u"nll_sq_sum_exact"_s, exactSum(identical ? QByteArray("sweep-nll2") : QByteArray("sweep-nll2-560")));
    r.insert(u"tokens_scored"_s, static_cast<qint64>(kTokens));
    r.insert(u"tokens_total"_s, static_cast<qint64>(kTokens + 1024));
    r.insert(u"windows"_s, static_cast<qint64>(kBatches * kBatch));
    r.insert(u"protocol"_s, in.protocol);
    r.insert(u"context"_s, static_cast<qint64>(in.context));
    r.insert(u"stride"_s, static_cast<qint64>(in.stride));
    r.insert(u"batch"_s, static_cast<qint64>(kBatch));
    r.insert(u"max_windows"_s, 0);
    r.insert(u"dtype"_s, in.dtype);
    r.insert(u"device"_s, u"cuda"_s);
    r.insert(u"seconds"_s, sim.seconds);
    r.insert(u"load_seconds"_s, load);
    r.insert(u"tokens_per_second"_s, double(kTokens) / sim.seconds);
    r.insert(u"model"_s, QJsonObject{{u"path"_s, in.model}, {u"format"_s, u"hf"_s}, {u"arch"_s, u"llama"_s}, {u"params"_s, 1235814400}});
    r.insert(u"data"_s, QJsonObject{{u"path"_s, in.data}, {u"format"_s, u"u32"_s}});
    r.insert(u"world_size"_s, plan.world);
    r.insert(u"version"_s, u"0.9.0"_s);
    if (plan.world > 1) {
        r.insert(u"backend"_s, u"nccl"_s);
        r.insert(u"topology"_s, u"hierarchical"_s);
        r.insert(u"sync_every_tokens"_s, static_cast<qint64>(kSyncEveryTokens));
        r.insert(u"rounds"_s, static_cast<qint64>(sim.rounds));
        r.insert(u"schedule"_s, u"dynamic"_s);
        r.insert(u"batch_count"_s, static_cast<qint64>(kBatches));
        r.insert(u"groups"_s, groups);
        r.insert(u"overlap_sync"_s, true);
        r.insert(u"on_rank_loss"_s, u"continue"_s);
        QJsonArray ranks, lost;
        for (const SimRank &k : sim.ranks) {
            const std::int64_t batches = k.lost ? k.committedBatches : k.batches;
            QJsonObject o{{u"rank"_s, k.rank},
                          {u"host"_s, hostName(k.node)},
                          {u"group"_s, k.node},
                          {u"tokens"_s, static_cast<qint64>(batches * kBatch * kWindowTokens)},
                          {u"windows"_s, static_cast<qint64>(batches * kBatch)},
                          {u"rounds"_s, static_cast<qint64>(k.lost ? k.roundsWith : sim.rounds)},
                          {u"compute_seconds"_s, k.lost ? 0.0 : k.compute},
                          {u"wait_seconds"_s, k.lost ? 0.0 : k.wait},
                          {u"transfer_seconds"_s, k.lost ? 0.0 : k.transfer},
                          {u"wall_seconds"_s, k.lost ? 0.0 : sim.seconds},
                          {u"comm_share"_s, k.lost ? 0.0 : (k.wait + k.transfer) / sim.seconds}};
            if (k.lost) {
                o.insert(u"lost"_s, true);
                lost.append(QJsonObject{{u"rank"_s, k.rank},
                                        {u"host"_s, hostName(k.node)},
                                        {u"round"_s, static_cast<qint64>(k.roundsWith)},
                                        {u"cause"_s, u"died: its connection closed before it finished (killed by signal 9)"_s}});
            }
            ranks.append(o);
        }
        r.insert(u"ranks"_s, ranks);
        r.insert(u"lost_ranks"_s, lost);
        r.insert(u"batches_redone"_s, sim.batchesRedone > 0 ? u"%1 batches"_s.arg(sim.batchesRedone) : QString());
        for (const SimRank &k : sim.ranks)
            if (k.lost) {
                const QString host = hostName(k.node);
                const QString cause = u"killed by signal 9"_s;
                const double at = load + sim.lostAt + kRegroupSeconds;
                w.addAlert(h.runId, StoredAlert{at, plan.started.addMSecs(qint64(1000 * at)), k.rank,
                                                cppl::core::run::alertKindName(cppl::core::run::AlertKind::RankLost),
                                                cppl::core::run::rankLostAlertText(k.rank, host, cause, int(k.roundsWith),
                                                                                   cppl::core::run::RunPhase::Running)});
                w.addAlert(h.runId, StoredAlert{load + sim.seconds, f.ended, k.rank,
                                                cppl::core::run::alertKindName(cppl::core::run::AlertKind::RankLost),
                                                cppl::core::run::rankLostAlertText(k.rank, host, cause, int(k.roundsWith),
                                                                                   cppl::core::run::RunPhase::Finished)});
            }
    } else {
        r.insert(u"host"_s, hostName(0));
    }
    f.status = RunStatus::Finished;
    f.exitCode = 0;
    f.resultJson = QJsonDocument(r).toJson(QJsonDocument::Compact);
    applyResult(f);
    for (RankSummary &s : f.ranks)
        s.exitCode = sim.ranks[std::size_t(s.rank)].lost ? 137 : 0;
    f.versions = cppl::core::store::versionsFrom(h.preflight, r);
    const QDateTime ended = f.ended;
    w.finishRun(std::move(f));
    return ended;
}

} // namespace

std::vector<int> syntheticSweepSizes(int maxRanks)
{
    const int top = std::clamp(maxRanks, 8, 4096);
    std::vector<int> sizes;
    for (int r = 1; r <= top; r *= 2)
        sizes.push_back(r);
    if (sizes.back() != top)
        sizes.push_back(top);
    return sizes;
}

SyntheticSweep writeSyntheticSweep(cppl::core::store::RunStore &store, int maxRanks, const QDateTime &start)
{
    SyntheticSweep out;
    out.ranksPerNode = kRanksPerNode;
    std::mt19937 rng(20261130);
    auto &w = store.writer();
    const QString prefix = u"sweep-"_s + start.toUTC().toString(u"yyyyMMdd-HHmmss"_s) + u"-5c1e"_s;
    QDateTime at = start.toUTC();
    const std::vector<int> sizes = syntheticSweepSizes(maxRanks);
    for (int world : sizes) {
        RunPlan p;
        p.runId = u"%1-r%2"_s.arg(prefix).arg(world);
        p.world = world;
        p.started = at;
        // The largest ran on nodes upgraded to another CUDA driver: other kernels, other bits.
        p.newerDriver = world == sizes.back();
        at = recordRun(w, p, rng).addSecs(25);
        out.sweepRunIds << p.runId;
        out.worldSizes.push_back(world);
        if (p.newerDriver)
            out.otherDriverRunId = p.runId;
    }
    // Later that day, from the dashboard: the two-node size with static shards, a rank killed by
    // the OOM killer (static shards cannot move: the run fails), and the largest size again, with a
    // rank lost and the others finishing without it.
    const int failedWorld = std::min(sizes.back(), 8);
    RunPlan failed;
    failed.runId = at.addSecs(3600).toString(u"yyyyMMdd-HHmmss"_s) + u"-a71c"_s;
    failed.world = failedWorld;
    failed.started = at.addSecs(3600);
    failed.kind = RunPlan::Kind::Failed;
    at = recordRun(w, failed, rng);
    out.failedRunId = failed.runId;
    RunPlan lost;
    lost.runId = at.addSecs(1800).toString(u"yyyyMMdd-HHmmss"_s) + u"-0b3d"_s;
    lost.world = sizes.back();
    lost.started = at.addSecs(1800);
    lost.kind = RunPlan::Kind::LostRank;
    lost.lostRank = sizes.back() >= 64 ? sizes.back() * 3 / 4 + 9 : sizes.back() - 3;
    recordRun(w, lost, rng);
    out.lostRankRunId = lost.runId;
    store.flush();
    if (const QString e = w.lastError(); !e.isEmpty())
        throw IoError(QString(store.path() + u": the synthetic sweep was not stored: "_s + e).toStdString());
    return out;
}

} // namespace cppl::app
