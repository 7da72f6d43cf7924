// SPDX-License-Identifier: MIT
// The dashboard under load (docs/dashboard.md, "Responsiveness"): N synthetic ranks stream
// telemetry at R Hz through real ZeroMQ sockets into the real collector (CollectorObject, <= 25
// snapshots/s) and the real Run page (offscreen, shown, 1600x1000), painted by Qt's own repaint
// manager as in the application. It measures everything the GUI thread does: per update interval
// (from one snapshot to the next: the snapshot itself, timeline, alerts, the page's update and
// every paint that follows) the thread's CPU time, which other load on the machine does not
// inflate; the longest single event; paint passes and their spacing; paint time per widget class.
// Memory (RSS) is sampled every 10 s to show it stays flat.
// Usage: bench_dashboard [--ranks 1024] [--rate 10] [--seconds 60] [--senders 2] [--scale 1]
//                        [--rss-every 10] [--select RANK] [--history S]
// --history S: the timeline starts with S seconds of a synthetic run of the same ranks, so that a
// short run already sees a full (compacting) timeline, as after S seconds of a real run.
#include "alert_model.h"
#include "bench_telemetry.h"
#include "run_page.h"
#include "synthetic_run.h"

#include "run/alerts.h"
#include "run/run_timeline.h"
#include "telemetry/collector_object.h"

#include "cppl/statistics.h"
#include "cppl/telemetry.h"

#include <QApplication>
#include <QElapsedTimer>
#include <QFile>
#include <QTimer>
#include <QWidget>


#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <time.h>
#include <vector>

using namespace cppl::core;
using cppl::bench::Clock;

namespace {

double rssMiB()
{
    QFile f(QStringLiteral("/proc/self/statm"));
    if (!f.open(QIODevice::ReadOnly))
        return 0;
    const QList<QByteArray> parts = f.readAll().split(' ');
    return parts.size() > 1 ? parts[1].toDouble() * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1 << 20) : 0;
}

/// CPU time of the calling thread: what the GUI thread itself spent, whatever else the machine runs.
double threadCpuMs()
{
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

double percentile(std::vector<double> v, double p)
{
    if (v.empty())
        return 0;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

/// One sender thread plays every senders-th rank: per tick one message per rank, 9 of 10 progress
/// (growing exact sums, a rate that drifts, a few slow ranks, comm share), 1 heartbeat.
void sendLoop(const std::string &endpoint, int first, int step, int ranks, double rate, double duration, Clock::time_point t0,
              std::atomic<std::int64_t> &sent, std::atomic<std::int64_t> &dropped, const std::atomic<bool> &stop)
{
    // An agent queues at most 1000 messages (docs/telemetry.md); these threads play hundreds of
    // ranks each, inside the measured process: a deep queue here would be counted as the
    // dashboard's memory when the collector lags. Beyond it they drop and count, as agents do.
    cppl::bench::PushSocket sock(endpoint, 1000);
    std::mt19937_64 rng(static_cast<unsigned>(first) * 7919U + 1);
    std::lognormal_distribution<double> nll(1.0, 0.8);
    std::vector<cppl::NllStats> stats(static_cast<std::size_t>(ranks));
    cppl::bench::pacedTicks(t0, rate, duration, stop, [&](std::int64_t k, double t) {
        for (int r = first; r < ranks; r += step) {
            cppl::telemetry::Message m =
                cppl::bench::syntheticMessage("bench-dashboard", r, ranks, 64, k, 1.8e9 + t, stats[static_cast<std::size_t>(r)], rng, nll);
            if (m.header.kind == cppl::telemetry::Kind::Progress) {
                const bool slow = r % 97 == 13;
                auto &p = m.progress;
                p.windowsDone = k;
                p.windowsTotal = static_cast<std::int64_t>(duration * rate) + 1;
                p.tokensPerSecond = (slow ? 1400.0 : 2500.0) * (1 + 0.05 * std::sin(t / 7 + r));
                p.computeSecondsTotal = t * 0.99;
                p.commWaitSecondsTotal = t * (slow ? 0.001 : 0.008);
                p.commTransferSecondsTotal = t * 0.001;
                p.rssBytes = (std::int64_t(1) << 30) + r;
            }
            (sock.send(cppl::telemetry::encode(m)) ? sent : dropped).fetch_add(1);
        }
    });
}

/// Times every event the GUI thread handles: the outermost ones (whatever the event loop does)
/// and every paint event by the class of the widget painted. Paint events of children are sent
/// one after another by the repaint manager, not nested in their parent's, so they add up.
class BenchApp : public QApplication
{
public:
    using QApplication::QApplication;

    struct PaintCost
    {
        double cpuMs = 0;
        std::int64_t count = 0;
    };
    bool measuring = false;
    std::vector<double> eventCpuMs;                 // outermost events, each
    std::vector<double> passTimes;                  // s: paint passes of the page (UpdateRequest)
    std::map<std::string, PaintCost> paintByClass;  // paint events by widget class
    QWidget *window = nullptr;
    QElapsedTimer clock;
    std::vector<std::string> closePasses; // what the passes < 40 ms after the one before painted

    bool notify(QObject *receiver, QEvent *event) override
    {
        const int depth = m_depth++;
        const QEvent::Type type = event->type();
        const double cpu0 = threadCpuMs();
        const bool pass = measuring && depth == 0 && type == QEvent::UpdateRequest && receiver == window;
        if (pass) {
            passTimes.push_back(static_cast<double>(clock.nsecsElapsed()) * 1e-9);
            m_painted.clear();
        }
        const bool result = QApplication::notify(receiver, event);
        const double cpu = threadCpuMs() - cpu0;
        --m_depth;
        if (measuring) {
            if (depth == 0)
                eventCpuMs.push_back(cpu);
            if (type == QEvent::Paint) {
                auto &c = paintByClass[receiver->metaObject()->className()];
                c.cpuMs += cpu;
                ++c.count;
                m_painted += ' ' + receiver->objectName().toStdString() + ':' + receiver->metaObject()->className();
            }
        }
        if (pass && passTimes.size() > 1 && passTimes.back() - passTimes[passTimes.size() - 2] < 0.0395 && closePasses.size() < 5)
            closePasses.push_back(m_painted);
        return result;
    }

private:
    int m_depth = 0;
    std::string m_painted;
};

} // namespace

int main(int argc, char **argv)
{
    int ranks = 1024, senders = 2, select = -1;
    double rate = 10, duration = 60, scale = 1, rssEvery = 10, history = 0;
    if (!cppl::bench::parseOptions(argc, argv, "bench_dashboard",
                                   {{"--ranks", &ranks}, {"--rate", &rate}, {"--seconds", &duration}, {"--senders", &senders},
                                    {"--scale", &scale}, {"--rss-every", &rssEvery}, {"--select", &select}, {"--history", &history}}))
        return 2;
    if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM"))
        qputenv("QT_QPA_PLATFORM", "offscreen");
    if (scale != 1)
        qputenv("QT_SCALE_FACTOR", QByteArray::number(scale));
    BenchApp app(argc, argv);

    cppl::app::RunPage page;
    page.resize(1600, 1000);
    std::vector<QString> groups;
    for (int g = 0; g < (ranks + 63) / 64; ++g)
        groups.push_back(QStringLiteral("rack%1").arg(g));
    cppl::Thresholds thresholds;
    page.reset(QStringLiteral("bench-dashboard"), ranks, groups, thresholds);
    page.setPhase(run::RunPhase::Running);
    page.show();
    app.window = &page;

    run::RunTimeline timeline;
    timeline.reset();
    if (history > 0) {
        cppl::app::SyntheticRun past(ranks);
        for (double t = 0.2; t <= history; t += 0.2) {
            past.advanceTo(t);
            timeline.append(t, past.snapshot());
        }
    }
    run::AlertMonitor alerts;
    alerts.reset(thresholds);
    telemetry::CollectorObject collector;
    telemetry::CollectorOptions co;
    co.state.run = "bench-dashboard";
    co.state.worldSize = ranks;
    if (!collector.start(co)) {
        std::fprintf(stderr, "bench_dashboard: the collector did not start\n");
        return 1;
    }

    QElapsedTimer &clock = app.clock;
    clock.start();
    // Per update interval: from the start of one snapshot's handling to the start of the next.
    std::vector<double> intervalCpuMs, handlerCpuMs, handlerWallMs;
    std::vector<std::pair<double, double>> rss;
    double lastCpu = -1;
    constexpr double kWarmUp = 2.0; // s: fonts, first layout, the collector meeting every rank
    QObject::connect(&collector, &telemetry::CollectorObject::snapshotReady, &page, [&](const telemetry::SnapshotPtr &snap) {
        // The collector's own snapshot (taken on this thread just before) is in the interval too.
        QElapsedTimer work;
        work.start();
        const double cpu0 = threadCpuMs();
        const double t = history + static_cast<double>(clock.nsecsElapsed()) * 1e-9;
        if (app.measuring && lastCpu >= 0)
            intervalCpuMs.push_back(cpu0 - lastCpu);
        lastCpu = cpu0;
        timeline.append(t, *snap);
        for (const auto &a : alerts.update(t, *snap))
            page.addAlert(a);
        page.showSnapshot(*snap, timeline, t);
        if (app.measuring) {
            handlerCpuMs.push_back(threadCpuMs() - cpu0);
            handlerWallMs.push_back(static_cast<double>(work.nsecsElapsed()) * 1e-6);
        }
        if (!app.measuring && t - history > kWarmUp) {
            app.measuring = true;
            if (select >= 0)
                page.selectRank(select); // the selected rank's series join the charts
        }
    });
    QTimer memory;
    QObject::connect(&memory, &QTimer::timeout, [&] {
        rss.emplace_back(static_cast<double>(clock.elapsed()) / 1000.0, rssMiB());
        std::fprintf(stderr, "t=%.0f s RSS %.1f MiB, timeline %.2f MiB\n", rss.back().first, rss.back().second,
                     static_cast<double>(timeline.bytes()) / (1 << 20));
    });
    memory.start(static_cast<int>(rssEvery * 1000));
    rss.emplace_back(0.0, rssMiB());

    std::atomic<std::int64_t> sent{0}, dropped{0};
    std::atomic<bool> stop{false};
    const auto t0 = Clock::now();
    std::vector<std::thread> threads;
    for (int s = 0; s < senders; ++s)
        threads.emplace_back(sendLoop, collector.endpoint().toStdString(), s, senders, ranks, rate, duration, t0, std::ref(sent),
                             std::ref(dropped), std::cref(stop));
    QTimer::singleShot(static_cast<int>(duration * 1000) + 500, &app, [&] {
        app.measuring = false;
        QApplication::quit();
    });
    app.exec();
    stop = true;
    for (auto &t : threads)
        t.join();
    rss.emplace_back(static_cast<double>(clock.elapsed()) / 1000.0, rssMiB());
    const auto last = collector.snapshotNow();

    double load[3] = {0, 0, 0};
    if (getloadavg(load, 3) < 0)
        load[0] = load[1] = load[2] = -1;
    std::printf("bench_dashboard: %d ranks at %.0f Hz for %.0f s, %d sender threads, %u hardware threads, QT_QPA_PLATFORM=%s, "
                "scale %.0f, selected rank %d, history %.0f s, load average at the end %.2f %.2f %.2f\n",
                ranks, rate, duration, senders, std::thread::hardware_concurrency(), qgetenv("QT_QPA_PLATFORM").constData(), scale,
                select, history, load[0], load[1], load[2]);
    std::printf("messages: %lld sent, %lld dropped by senders, %lld received (%lld decoded, %lld superseded in the queue and "
                "skipped), %lld lost\n",
                static_cast<long long>(sent.load()), static_cast<long long>(dropped.load()),
                static_cast<long long>(collector.messagesReceived()), static_cast<long long>(last->decode.accepted),
                static_cast<long long>(last->coalescedTotal), static_cast<long long>(last->lostTotal));
    std::printf("GUI-thread CPU per update interval (snapshot, timeline, alerts, page update, the paints that follow), "
                "%zu intervals after %.0f s warm-up:\n"
                "  median %.2f ms, p95 %.2f ms, p99 %.2f ms, max %.2f ms  (goal: p99 < 16 ms)\n",
                intervalCpuMs.size(), kWarmUp, percentile(intervalCpuMs, 0.5), percentile(intervalCpuMs, 0.95),
                percentile(intervalCpuMs, 0.99), percentile(intervalCpuMs, 1.0));
    std::printf("  of which the update handler (timeline + alerts + RunPage::showSnapshot): median %.2f ms, p99 %.2f ms CPU; "
                "wall median %.2f ms, p99 %.2f ms\n",
                percentile(handlerCpuMs, 0.5), percentile(handlerCpuMs, 0.99), percentile(handlerWallMs, 0.5),
                percentile(handlerWallMs, 0.99));
    std::printf("longest single event on the GUI thread: p99 %.2f ms, max %.2f ms CPU (%zu events)\n",
                percentile(app.eventCpuMs, 0.99), percentile(app.eventCpuMs, 1.0), app.eventCpuMs.size());
    std::vector<double> gaps;
    for (size_t i = 1; i < app.passTimes.size(); ++i)
        gaps.push_back((app.passTimes[i] - app.passTimes[i - 1]) * 1e3);
    const auto closer = std::count_if(gaps.begin(), gaps.end(), [](double g) { return g < 39.5; });
    std::printf("paint passes: %zu (%.1f/s), gap between passes: min %.1f ms, median %.1f ms; %lld of %zu gaps < 40 ms\n",
                app.passTimes.size(), static_cast<double>(app.passTimes.size()) / std::max(1.0, duration - kWarmUp),
                percentile(gaps, 0.0), percentile(gaps, 0.5), static_cast<long long>(closer), gaps.size());
    for (const auto &c : app.closePasses)
        std::printf("  a pass < 40 ms after the one before painted:%s\n", c.c_str());
    std::printf("alerts raised: %zu, in %d rows\n", page.alertModel()->allAlerts().size(), page.alertModel()->rowCount());
    std::printf("paint CPU by widget class (total ms, paints, ms per paint):\n");
    std::vector<std::pair<std::string, BenchApp::PaintCost>> byCost(app.paintByClass.begin(), app.paintByClass.end());
    std::sort(byCost.begin(), byCost.end(), [](const auto &a, const auto &b) { return a.second.cpuMs > b.second.cpuMs; });
    for (const auto &[name, c] : byCost)
        if (c.cpuMs >= 1.0)
            std::printf("  %-28s %9.1f %7lld %8.2f\n", name.c_str(), c.cpuMs, static_cast<long long>(c.count),
                        c.cpuMs / static_cast<double>(std::max<std::int64_t>(1, c.count)));
    std::printf("updates per second: %.1f (collector coalesces to <= 25)\n",
                static_cast<double>(handlerCpuMs.size()) / std::max(1.0, duration - kWarmUp));
    std::printf("timeline: %zu samples x %d ranks, %.2f MiB\n", timeline.size(), timeline.worldSize(),
                static_cast<double>(timeline.bytes()) / (1 << 20));
    std::printf("RSS over time (s: MiB):");
    for (const auto &[t, m] : rss)
        std::printf("  %.0f: %.1f", t, m);
    std::printf("\n");
    return 0;
}
