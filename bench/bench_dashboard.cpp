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
    std::map<std::string, PaintCost> paintByName;   // ChartWidgets' paint events by chart (object name)
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
                if (receiver->inherits("cppl::charts::ChartWidget")) {
                    auto &n = paintByName[receiver->objectName().toStdString()];
                    n.cpuMs += cpu;
                    ++n.count;
                }
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

/// What the command line asks for.
struct Options
{
    int ranks = 1024, senders = 2, select = -1;
    double rate = 10, duration = 60, scale = 1, rssEvery = 10, history = 0;
};

/// What one run measured on the GUI thread, per update interval and over time.
struct Measurements
{
    std::vector<double> intervalCpuMs, handlerCpuMs, handlerWallMs;
    std::vector<std::pair<double, double>> rss; // (s, MiB)
    double lastCpu = -1;
};

constexpr double kWarmUp = 2.0; // s: fonts, first layout, the collector meeting every rank

/// The Run page as the dashboard shows a run of o.ranks in groups of 64, offscreen at 1600x1000.
void showPage(cppl::app::RunPage &page, const Options &o, const cppl::Thresholds &thresholds)
{
    page.resize(1600, 1000);
    std::vector<QString> groups;
    for (int g = 0; g < (o.ranks + 63) / 64; ++g)
        groups.push_back(QStringLiteral("rack%1").arg(g));
    page.reset(QStringLiteral("bench-dashboard"), o.ranks, groups, thresholds);
    page.setPhase(run::RunPhase::Running);
    page.show();
}

/// --history S: S seconds of a synthetic run of the same ranks, so that a short run already sees
/// a full (compacting) timeline, as after S seconds of a real run.
void preloadHistory(run::RunTimeline &timeline, int ranks, double history)
{
    timeline.reset();
    if (history <= 0)
        return;
    cppl::app::SyntheticRun past(ranks);
    for (double t = 0.2; t <= history; t += 0.2) {
        past.advanceTo(t);
        timeline.append(t, past.snapshot());
    }
}

/// Each snapshot as the application handles it (timeline, alerts, the page), timed on the GUI
/// thread: the interval since the last one starts with the collector's own snapshot.
void measureUpdates(BenchApp &app, telemetry::CollectorObject &collector, cppl::app::RunPage &page, run::RunTimeline &timeline,
                    run::AlertMonitor &alerts, const Options &o, Measurements &m)
{
    QObject::connect(&collector, &telemetry::CollectorObject::snapshotReady, &page, [&](const telemetry::SnapshotPtr &snap) {
        QElapsedTimer work;
        work.start();
        const double cpu0 = threadCpuMs();
        const double t = o.history + static_cast<double>(app.clock.nsecsElapsed()) * 1e-9;
        if (app.measuring && m.lastCpu >= 0)
            m.intervalCpuMs.push_back(cpu0 - m.lastCpu);
        m.lastCpu = cpu0;
        timeline.append(t, *snap);
        for (const auto &a : alerts.update(t, *snap))
            page.addAlert(a);
        page.showSnapshot(*snap, timeline, t);
        if (app.measuring) {
            m.handlerCpuMs.push_back(threadCpuMs() - cpu0);
            m.handlerWallMs.push_back(static_cast<double>(work.nsecsElapsed()) * 1e-6);
        }
        if (!app.measuring && t - o.history > kWarmUp) {
            app.measuring = true;
            if (o.select >= 0)
                page.selectRank(o.select); // the selected rank's series join the charts
        }
    });
}

/// Streams telemetry through o.senders threads for o.duration seconds while the event loop runs.
void streamTelemetry(BenchApp &app, const telemetry::CollectorObject &collector, const Options &o, std::atomic<std::int64_t> &sent,
                     std::atomic<std::int64_t> &dropped)
{
    std::atomic<bool> stop{false};
    const auto t0 = Clock::now();
    std::vector<std::thread> threads;
    for (int s = 0; s < o.senders; ++s)
        threads.emplace_back(sendLoop, collector.endpoint().toStdString(), s, o.senders, o.ranks, o.rate, o.duration, t0,
                             std::ref(sent), std::ref(dropped), std::cref(stop));
    QTimer::singleShot(static_cast<int>(o.duration * 1000) + 500, &app, [&] {
        app.measuring = false;
        QApplication::quit();
    });
    app.exec();
    stop = true;
    for (auto &t : threads)
        t.join();
}

void printIntervals(const BenchApp &app, const Measurements &m, const Options &o)
{
    std::printf("GUI-thread CPU per update interval (snapshot, timeline, alerts, page update, the paints that follow), "
                "%zu intervals after %.0f s warm-up:\n"
                "  median %.2f ms, p95 %.2f ms, p99 %.2f ms, max %.2f ms  (goal: p99 < 16 ms)\n",
                m.intervalCpuMs.size(), kWarmUp, percentile(m.intervalCpuMs, 0.5), percentile(m.intervalCpuMs, 0.95),
                percentile(m.intervalCpuMs, 0.99), percentile(m.intervalCpuMs, 1.0));
    std::printf("  of which the update handler (timeline + alerts + RunPage::showSnapshot): median %.2f ms, p99 %.2f ms CPU; "
                "wall median %.2f ms, p99 %.2f ms\n",
                percentile(m.handlerCpuMs, 0.5), percentile(m.handlerCpuMs, 0.99), percentile(m.handlerWallMs, 0.5),
                percentile(m.handlerWallMs, 0.99));
    std::printf("longest single event on the GUI thread: p99 %.2f ms, max %.2f ms CPU (%zu events)\n",
                percentile(app.eventCpuMs, 0.99), percentile(app.eventCpuMs, 1.0), app.eventCpuMs.size());
    std::vector<double> gaps;
    for (size_t i = 1; i < app.passTimes.size(); ++i)
        gaps.push_back((app.passTimes[i] - app.passTimes[i - 1]) * 1e3);
    const auto closer = std::count_if(gaps.begin(), gaps.end(), [](double g) { return g < 39.5; });
    std::printf("paint passes: %zu (%.1f/s), gap between passes: min %.1f ms, median %.1f ms; %lld of %zu gaps < 40 ms\n",
                app.passTimes.size(), static_cast<double>(app.passTimes.size()) / std::max(1.0, o.duration - kWarmUp),
                percentile(gaps, 0.0), percentile(gaps, 0.5), static_cast<long long>(closer), gaps.size());
    for (const auto &c : app.closePasses)
        std::printf("  a pass < 40 ms after the one before painted:%s\n", c.c_str());
}

void printPaintCosts(const BenchApp &app)
{
    std::printf("paint CPU by widget class (total ms, paints, ms per paint):\n");
    std::vector<std::pair<std::string, BenchApp::PaintCost>> byCost(app.paintByClass.begin(), app.paintByClass.end());
    std::sort(byCost.begin(), byCost.end(), [](const auto &a, const auto &b) { return a.second.cpuMs > b.second.cpuMs; });
    for (const auto &[name, c] : byCost)
        if (c.cpuMs >= 1.0)
            std::printf("  %-28s %9.1f %7lld %8.2f\n", name.c_str(), c.cpuMs, static_cast<long long>(c.count),
                        c.cpuMs / static_cast<double>(std::max<std::int64_t>(1, c.count)));
    // The Run page's charts are ChartWidgets alike: the object name says which chart painted.
    std::vector<std::pair<std::string, BenchApp::PaintCost>> byName(app.paintByName.begin(), app.paintByName.end());
    std::sort(byName.begin(), byName.end(), [](const auto &a, const auto &b) { return a.second.cpuMs > b.second.cpuMs; });
    for (const auto &[name, c] : byName)
        if (c.cpuMs >= 1.0)
            std::printf("  chart %-22s %9.1f %7lld %8.2f\n", name.c_str(), c.cpuMs, static_cast<long long>(c.count),
                        c.cpuMs / static_cast<double>(std::max<std::int64_t>(1, c.count)));
}

void printReport(const BenchApp &app, const Measurements &m, const Options &o, telemetry::CollectorObject &collector,
                 const cppl::app::RunPage &page, const run::RunTimeline &timeline, std::int64_t sent, std::int64_t dropped)
{
    const auto last = collector.snapshotNow();
    double load[3] = {0, 0, 0};
    if (getloadavg(load, 3) < 0)
        load[0] = load[1] = load[2] = -1;
    std::printf("bench_dashboard: %d ranks at %.0f Hz for %.0f s, %d sender threads, %u hardware threads, QT_QPA_PLATFORM=%s, "
                "scale %.0f, selected rank %d, history %.0f s, load average at the end %.2f %.2f %.2f\n",
                o.ranks, o.rate, o.duration, o.senders, std::thread::hardware_concurrency(), qgetenv("QT_QPA_PLATFORM").constData(),
                o.scale, o.select, o.history, load[0], load[1], load[2]);
    std::printf("messages: %lld sent, %lld dropped by senders, %lld received (%lld decoded, %lld superseded in the queue and "
                "skipped), %lld lost\n",
                static_cast<long long>(sent), static_cast<long long>(dropped), static_cast<long long>(collector.messagesReceived()),
                static_cast<long long>(last->decode.accepted), static_cast<long long>(last->coalescedTotal),
                static_cast<long long>(last->lostTotal));
    printIntervals(app, m, o);
    std::printf("alerts raised: %zu, in %d rows\n", page.alertModel()->allAlerts().size(), page.alertModel()->rowCount());
    printPaintCosts(app);
    std::printf("updates per second: %.1f (collector coalesces to <= 25)\n",
                static_cast<double>(m.handlerCpuMs.size()) / std::max(1.0, o.duration - kWarmUp));
    std::printf("timeline: %zu samples x %d ranks, %.2f MiB\n", timeline.size(), timeline.worldSize(),
                static_cast<double>(timeline.bytes()) / (1 << 20));
    std::printf("RSS over time (s: MiB):");
    for (const auto &[t, mib] : m.rss)
        std::printf("  %.0f: %.1f", t, mib);
    std::printf("\n");
}

} // namespace

int main(int argc, char **argv)
{
    Options o;
    if (!cppl::bench::parseOptions(argc, argv, "bench_dashboard",
                                   {{"--ranks", &o.ranks}, {"--rate", &o.rate}, {"--seconds", &o.duration}, {"--senders", &o.senders},
                                    {"--scale", &o.scale}, {"--rss-every", &o.rssEvery}, {"--select", &o.select}, {"--history", &o.history}}))
        return 2;
    if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM"))
        qputenv("QT_QPA_PLATFORM", "offscreen");
    if (o.scale != 1)
        qputenv("QT_SCALE_FACTOR", QByteArray::number(o.scale));
    BenchApp app(argc, argv);
    cppl::app::RunPage page;
    cppl::Thresholds thresholds;
    showPage(page, o, thresholds);
    app.window = &page;
    run::RunTimeline timeline;
    preloadHistory(timeline, o.ranks, o.history);
    run::AlertMonitor alerts;
    alerts.reset(thresholds);
    telemetry::CollectorObject collector;
    telemetry::CollectorOptions co;
    co.state.run = "bench-dashboard";
    co.state.worldSize = o.ranks;
    if (!collector.start(co)) {
        std::fprintf(stderr, "bench_dashboard: the collector did not start\n");
        return 1;
    }
    app.clock.start();
    Measurements m;
    measureUpdates(app, collector, page, timeline, alerts, o, m);
    QTimer memory;
    QObject::connect(&memory, &QTimer::timeout, [&] {
        m.rss.emplace_back(static_cast<double>(app.clock.elapsed()) / 1000.0, rssMiB());
        std::fprintf(stderr, "t=%.0f s RSS %.1f MiB, timeline %.2f MiB\n", m.rss.back().first, m.rss.back().second,
                     static_cast<double>(timeline.bytes()) / (1 << 20));
    });
    memory.start(static_cast<int>(o.rssEvery * 1000));
    m.rss.emplace_back(0.0, rssMiB());
    std::atomic<std::int64_t> sent{0}, dropped{0};
    streamTelemetry(app, collector, o, sent, dropped);
    m.rss.emplace_back(static_cast<double>(app.clock.elapsed()) / 1000.0, rssMiB());
    printReport(app, m, o, collector, page, timeline, sent.load(), dropped.load());
    return 0;
}
