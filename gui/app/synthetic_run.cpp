// SPDX-License-Identifier: MIT
#include "synthetic_run.h"

#include "run_page.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <algorithm>
#include <cmath>
#include <deque>
#include <mutex>

using namespace Qt::StringLiterals;
using cppl::core::telemetry::RankState;
using cppl::core::telemetry::RankView;
using cppl::core::telemetry::Snapshot;

namespace cppl::app {

namespace {
constexpr double kContext = 256;
constexpr double kTotalSeconds = 600; // the simulated run's planned length
constexpr int kRanksPerHost = 8;
constexpr double kStep = 0.5;

std::string hostOf(int rank, int n)
{
    if (n <= 8)
        return "localhost";
    char buf[32];
    std::snprintf(buf, sizeof buf, "node-%03d", rank / kRanksPerHost);
    return buf;
}
} // namespace

SyntheticRun::SyntheticRun(int ranks, unsigned seed)
    : m_n(std::max(ranks, 1))
    , m_rng(seed)
    , m_snapshot(std::make_shared<Snapshot>())
{
    m_thresholds.commShareAlert = 0.15;
    m_thresholds.stallSeconds = 30;
    std::normal_distribution<double> bias(0.0, 0.015);
    std::normal_distribution<double> jitter(1.0, 0.03);
    m_ranks.resize(size_t(m_n));
    for (int r = 0; r < m_n; ++r)
        m_ranks[size_t(r)].host = hostOf(r, m_n);
    const double base = m_n <= 8 ? 1900.0 : 9200.0; // CPU byte model vs a GPU cluster
    for (int r = 0; r < m_n; ++r) {
        Rank &k = m_ranks[size_t(r)];
        k.rate = base * jitter(m_rng);
        k.mu = 1.46 + bias(m_rng);
        k.transfer = 0.006 + 0.004 * std::abs(bias(m_rng)) / 0.015;
    }
    // A few slow ranks (a throttled GPU, a busy node), one node on a congested link, one stall.
    m_slow = m_n >= 64 ? std::vector<int>{37, m_n / 2 + 26, m_n * 7 / 8 + 5} : std::vector<int>{m_n - 1};
    for (int r : m_slow)
        if (r < m_n) {
            m_ranks[size_t(r)].slow = true;
            m_ranks[size_t(r)].rate *= 0.62;
        }
    if (m_n >= 64)
        for (int r = 8 * 40; r < 8 * 41 && r < m_n; ++r)
            m_ranks[size_t(r)].transfer = 0.12 + 0.01 * (r % 3);
    m_stalled = m_n >= 64 ? m_n * 3 / 4 + 9 : (m_n > 1 ? 1 : -1);
    if (m_stalled >= 0)
        m_ranks[size_t(m_stalled)].stalls = true;
    m_stallAt = 0.55 * kTotalSeconds;
    // Ranks report their first progress once the model is loaded and a batch evaluated: not all
    // at once (drawn last, so the rates above stay those of earlier versions).
    std::uniform_real_distribution<double> start(0.5, 4.0);
    for (Rank &k : m_ranks)
        k.startAt = start(m_rng);
    m_alerts.reset(m_thresholds);
    m_timeline.reset();
}

std::vector<QString> SyntheticRun::groupNames() const
{
    std::vector<QString> names;
    const int groups = m_n <= 8 ? (m_n + 1) / 2 : (m_n + kRanksPerHost - 1) / kRanksPerHost;
    for (int g = 0; g < groups; ++g) {
        const int first = 2 * g, last = std::min(2 * g + 1, m_n - 1); // as groups "size:2" are named
        names.push_back(m_n <= 8 ? (first == last ? u"rank "_s : u"ranks "_s) + QString::fromStdString(rankRangeText(first, last))
                                 : QString::fromStdString(hostOf(g * kRanksPerHost, m_n)));
    }
    return names;
}

void SyntheticRun::step(double dt)
{
    std::normal_distribution<double> noise(1.0, 0.05);
    for (Rank &k : m_ranks) {
        if (k.stalls && m_now >= m_stallAt)
            continue;
        k.lastHeard = m_now + dt; // heartbeats, also while loading
        if (m_now + dt < k.startAt)
            continue;
        const double tokens = std::max(0.0, k.rate * noise(m_rng) * dt);
        const auto count = std::int64_t(tokens);
        // Aggregated per step: the exact sums get the step's total and its sum of squares.
        const double sd = 0.9;
        k.stats.nll.add(double(count) * k.mu);
        k.stats.nllSquared.add(double(count) * (k.mu * k.mu + sd * sd));
        k.stats.tokens += count;
        k.stats.windows = std::int64_t(double(k.stats.tokens) / kContext);
        k.stats.bytes = k.stats.tokens;
    }
    m_now += dt;
}

void SyntheticRun::snapshotNow(bool finished)
{
    auto s = std::make_shared<Snapshot>();
    s->sequence = ++m_sequence;
    s->run = "synthetic";
    s->worldSize = m_n;
    double slowest = 1e300;
    for (const Rank &k : m_ranks)
        if (!(k.stalls && m_now >= m_stallAt))
            slowest = std::min(slowest, k.rate);
    for (const Rank &k : m_ranks)
        s->global.merge(k.stats);
    s->globalPpl = cppl::computePerplexity(s->global);
    const double plannedPerRank = 9200.0 * kTotalSeconds / kContext;
    s->windowsTotal = std::int64_t(plannedPerRank * m_n * (m_n <= 8 ? 1900.0 / 9200.0 : 1.0));
    s->windowsGlobal = true; // the dynamic schedule, the default: every rank reports the run's windows
    for (int r = 0; r < m_n; ++r) {
        const Rank &k = m_ranks[size_t(r)];
        RankView v;
        v.rank = r;
        v.host = k.host;
        v.group = m_n <= 8 ? r / 2 : r / kRanksPerHost;
        v.localRank = m_n <= 8 ? r : r % kRanksPerHost;
        v.heard = true;
        v.received = std::int64_t(m_now * 10);
        v.lastSeq = v.received;
        // Sequence gaps once a few messages were dropped on the way (a congested link, 4:10 in);
        // lost from the start, they were counted before anything was sent.
        v.lost = r % 97 == 5 && m_now >= kTelemetryLossSeconds ? 3 : 0;
        v.hasProgress = m_now >= k.startAt;
        v.stats = k.stats;
        const bool stalledNow = k.stalls && m_now >= m_stallAt;
        v.silentSeconds = stalledNow ? m_now - m_stallAt : 0.1;
        v.tokensPerSecond = stalledNow || !v.hasProgress ? 0.0 : k.rate;
        v.windowsDone = k.stats.windows;
        v.windowsTotal = s->windowsTotal;
        // Fast ranks wait at each sync for the slowest; slow ranks hardly wait.
        const double wait = std::clamp(0.01 + 0.6 * (1.0 - slowest / k.rate) * 0.2, 0.0, 0.5);
        // Its own time evaluating; communication time is known from the first sync round on.
        const double own = std::max(0.0, std::min(m_now, stalledNow ? m_stallAt : m_now) - k.startAt);
        const bool synced = m_now >= kFirstSyncSeconds;
        v.computeSeconds = own * (synced ? 1 - wait - k.transfer : 1.0);
        v.waitSeconds = synced ? own * wait : 0.0;
        v.transferSeconds = synced ? own * k.transfer : 0.0;
        v.waitShare = synced ? wait : 0.0;
        v.transferShare = synced ? k.transfer : 0.0;
        v.commShare = v.waitShare + v.transferShare;
        v.rssBytes = std::int64_t(1.9e9 + 1e6 * (r % 13));
        if (m_n > 8) { // a GPU cluster: what NVML reports (80 GiB devices, busy unless stalled)
            v.deviceMemoryBytes = std::int64_t(38.5e9 + 2e8 * (r % 7));
            v.deviceMemoryTotalBytes = std::int64_t(80) << 30;
            v.gpuUtilizationPercent = stalledNow || finished ? 0 : 90 + r % 9;
        }
        v.local = cppl::computePerplexity(k.stats);
        v.deviation = v.local.ppl - s->globalPpl.ppl;
        v.deviationRelative = v.local.ppl / s->globalPpl.ppl - 1;
        if (finished) {
            v.state = stalledNow ? RankState::Failed : RankState::Done;
            // A lost rank was killed by its launcher once the others had regrouped without it.
            v.exitCode = stalledNow ? (m_stalledLost ? 128 + 9 : 6) : 0;
            if (stalledNow)
                v.error = m_stalledLost ? std::string("lost: stopped responding, killed once the others had regrouped")
                                        : "collective timed out after " + std::to_string(int(m_thresholds.collectiveTimeoutSeconds)) + " s";
            // A finished rank keeps the rate of its last progress message, as the collector keeps a
            // real agent's; only the run's total counts evaluating ranks (collector_state.cpp).
        } else {
            v.state = stalledNow && v.silentSeconds > m_thresholds.stallSeconds ? RankState::Stalled
                      : v.hasProgress                                         ? RankState::Evaluating
                                                                              : RankState::Loading; // heard, model loading
        }
        s->tokensPerSecond += finished ? 0.0 : v.tokensPerSecond;
        s->windowsDone += v.windowsDone;
        s->stateCounts[size_t(v.state)]++;
        s->lostTotal += v.lost;
        s->ranks.push_back(std::move(v));
    }
    if (finished) { // every batch evaluated: the run's windows are the ones done
        s->windowsTotal = s->windowsDone;
        for (RankView &v : s->ranks)
            v.windowsTotal = s->windowsTotal;
    }
    m_snapshot = s;
}

void SyntheticRun::advanceTo(double seconds)
{
    while (m_now + kStep <= seconds) {
        step(kStep);
        snapshotNow(false);
        m_timeline.append(m_now, *m_snapshot);
        m_alerts.update(m_now, *m_snapshot);
        if (int(m_now * 2) % 40 == 0)
            m_logs.emplace_back(0, u"[%1/%2 windows] ppl %3"_s.arg(m_snapshot->windowsDone).arg(m_snapshot->windowsTotal)
                                       .arg(m_snapshot->globalPpl.ppl, 0, 'f', 4));
    }
}

SyntheticRun SyntheticRun::advanced(int ranks, double seconds)
{
    // The states asked for, oldest first; a few moments of a few sizes (a 1024-rank run with its
    // timeline is ~20 MB), so the oldest goes beyond kKept.
    constexpr std::size_t kKept = 6;
    static std::mutex mutex;
    static std::deque<SyntheticRun> kept;
    std::lock_guard lock(mutex);
    const SyntheticRun *from = nullptr;
    for (const SyntheticRun &k : kept)
        if (k.m_n == std::max(ranks, 1) && k.m_now <= seconds && (!from || k.m_now > from->m_now))
            from = &k;
    SyntheticRun run = from ? *from : SyntheticRun(ranks);
    run.advanceTo(seconds);
    if (!from || from->m_now != run.m_now) {
        kept.push_back(run);
        if (kept.size() > kKept)
            kept.pop_front();
    }
    return run;
}

void SyntheticRun::finish(bool stalledRankLost)
{
    // The stalled rank caught up (a slow filesystem, not a dead node), so the run ends cleanly;
    // or it was lost and the others finished without it.
    m_stalledLost = stalledRankLost;
    if (stalledRankLost) { // before its "failed" end, as the engine raises it: it stays a warning
        const auto a = stalledRankLostAlert();
        m_alerts.raise(a.seconds, a.rank, a.kind, a.message);
    }
    if (!stalledRankLost)
        for (Rank &k : m_ranks)
            k.stalls = false;
    m_finished = true;
    snapshotNow(true);
    m_timeline.append(m_now + 0.5, *m_snapshot);
    m_alerts.update(m_now + 0.5, *m_snapshot);
    if (stalledRankLost) // RunEngine::finishWith: the lost rank's alert says how the run ended
        m_alerts.raise(m_now + 0.5, m_stalled, cppl::core::run::AlertKind::RankLost,
                       cppl::core::run::rankLostAlertText(m_stalled, QString::fromStdString(hostOf(m_stalled, m_n)),
                                                          u"killed by signal 9"_s, 41, cppl::core::run::RunPhase::Finished));
}

cppl::core::run::RunAlert SyntheticRun::stalledRankLostAlert() const
{
    // As RunEngine::raiseRankLost() words it, some seconds after the stall began (the collective
    // timeout, then the regrouping).
    return {std::min(m_now, m_stallAt + 42.0), QDateTime::currentDateTimeUtc(), m_stalled, cppl::core::run::AlertKind::RankLost,
            cppl::core::run::rankLostAlertText(m_stalled, QString::fromStdString(hostOf(m_stalled, m_n)),
                                               u"stopped responding: no heartbeat for 6.0 s (collective timeout 5 s)"_s, 41,
                                               cppl::core::run::RunPhase::Running)};
}

cppl::core::run::RunOutcome SyntheticRun::recoveredOutcome() const
{
    cppl::core::run::RunOutcome o;
    o.phase = cppl::core::run::RunPhase::Finished;
    const QString host = QString::fromStdString(hostOf(m_stalled, m_n));
    const QString cause = u"stopped responding: no heartbeat for 6.0 s (collective timeout 5 s)"_s;
    QJsonObject lost{{u"rank"_s, m_stalled}, {u"host"_s, host}, {u"round"_s, 41}, {u"cause"_s, cause}};
    QJsonObject result;
    result.insert(u"ppl"_s, m_snapshot->globalPpl.ppl);
    result.insert(u"tokens_per_second"_s, m_now > 0 ? double(m_snapshot->global.tokens) / m_now : 0.0);
    result.insert(u"on_rank_loss"_s, u"continue"_s);
    result.insert(u"lost_ranks"_s, QJsonArray{lost});
    o.resultJson = QJsonDocument(result).toJson(QJsonDocument::Compact);
    o.recovered << u"rank %1 (%2): %3; lost after round 41"_s.arg(m_stalled).arg(host, cause);
    return o;
}

cppl::core::run::RunOutcome SyntheticRun::outcome() const
{
    cppl::core::run::RunOutcome o;
    const bool failed = std::any_of(m_snapshot->ranks.begin(), m_snapshot->ranks.end(),
                                    [](const RankView &v) { return v.state == RankState::Failed; });
    o.phase = !m_finished ? cppl::core::run::RunPhase::Running
              : failed    ? cppl::core::run::RunPhase::Failed
                          : cppl::core::run::RunPhase::Finished;
    QJsonObject result;
    result.insert(u"ppl"_s, m_snapshot->globalPpl.ppl);
    result.insert(u"tokens_per_second"_s, m_now > 0 ? double(m_snapshot->global.tokens) / m_now : 0.0);
    o.resultJson = QJsonDocument(result).toJson(QJsonDocument::Compact);
    if (failed)
        o.firstCause = u"rank %1 on %2: collective timed out (agent exit 6)"_s
                           .arg(m_stalled)
                           .arg(QString::fromStdString(hostOf(m_stalled, m_n)));
    o.liveMergeMatches = !failed;
    return o;
}

QString SyntheticRun::startNotice() const
{
    // As a real run of the default profile (4 local ranks, groups of 2) or of a cluster of 8-GPU
    // nodes over SSH (a group per node) would name itself.
    QStringList groups;
    const int size = m_n <= 8 ? 2 : kRanksPerHost;
    for (int first = 0; first < m_n; first += size) {
        QStringList ranks;
        for (int r = first; r < std::min(first + size, m_n); ++r)
            ranks << QString::number(r);
        groups << ranks.join(u',');
    }
    const int hosts = m_n <= 8 ? 1 : (m_n + kRanksPerHost - 1) / kRanksPerHost;
    return cppl::core::run::runStartNotice(u"synthetic-%1-ranks"_s.arg(m_n), m_n, hosts, m_n <= 8 ? u"local"_s : u"ssh"_s,
                                           groups.join(u';').toStdString(), m_n <= 8 ? u"127.0.0.1"_s : QString::fromStdString(hostOf(0, m_n)),
                                           m_n <= 8 ? 40213 : 29500);
}

void SyntheticRun::showStalledRankLostOn(RunPage &page) const
{
    if (m_stalled < 0)
        return;
    // RunEngine::noteRegrouping: the survivor's stderr line, then the engine's notice and alert (as
    // tst_app_run lostRankShowsRecovered sees them; the checkpoints' notice that may follow goes
    // below it, tst_app_models noticeLineWhileRecovering).
    page.rankLost(m_stalled, u"rank %1 (%2) stopped responding: no heartbeat for 6.0 s (collective timeout 5 s); lost after round 41"_s
                                 .arg(m_stalled)
                                 .arg(QString::fromStdString(hostOf(m_stalled, m_n))));
    page.setNotice(cppl::core::run::rankLostNotice({m_stalled}));
    // Then the checkpoints' word on resuming (the regroup line: lost after round 41, so the first
    // complete round after it is 43; round 41 was saved before the loss).
    page.setNotice(cppl::core::run::checkpointRegroupNotice(43, 41));
    page.addAlerts({stalledRankLostAlert()});
}

void SyntheticRun::showRecoveredOn(RunPage &page) const
{
    // RunEngine::checkResult: the cross-check skipped, then one "recovered (…)" per lost rank, last.
    const auto o = recoveredOutcome();
    page.setNotice(u"the live cross-check is skipped: a lost rank's last live sums include batches the others evaluated again"_s);
    for (const QString &r : o.recovered)
        page.setNotice(cppl::core::run::recoveredNotice(r));
    page.showOutcome(o);
}

void SyntheticRun::showOn(RunPage &page) const
{
    page.reset(u"synthetic-%1-ranks"_s.arg(m_n), m_n, groupNames(), m_thresholds);
    page.setSchedule(u"dynamic"_s); // windowsGlobal: the default schedule
    page.setPhase(m_finished ? outcome().phase : cppl::core::run::RunPhase::Running);
    page.setNotice(startNotice());
    for (const auto &[rank, line] : m_logs)
        page.appendLog(rank, false, line);
    for (int r = 0; r < std::min(m_n, 8); ++r)
        page.appendLog(r, true, u"loaded shakespeare-byte-llama (float32, cpu) in 0.4 s"_s);
    page.showSnapshot(*m_snapshot, m_timeline, m_now);
    page.addAlerts(m_alerts.alerts());
    if (m_finished)
        page.showOutcome(outcome());
    page.setRunEnabled(m_finished, !m_finished);
}

} // namespace cppl::app
