// SPDX-License-Identifier: MIT
// The dashboard under load (docs/dashboard.md, "Responsiveness"): N synthetic ranks stream
// telemetry at R Hz through real ZeroMQ sockets into the real collector (CollectorObject, <= 25
// snapshots/s) and the real Run page (offscreen, shown, 1600x1000). Per update it measures the GUI
// thread's whole work: timeline + alerts + RunPage::showSnapshot + a synchronous repaint of the
// page (models, table, charts, heat map). Memory (RSS) is sampled every 10 s to show it stays flat.
// Usage: bench_dashboard [--ranks 1024] [--rate 10] [--seconds 60] [--senders 2] [--scale 1]
#include "run_page.h"

#include "run/alerts.h"
#include "run/run_timeline.h"
#include "telemetry/collector_object.h"

#include "cppl/statistics.h"
#include "cppl/telemetry.h"

#include <QApplication>
#include <QElapsedTimer>
#include <QFile>
#include <QTimer>

#include <zmq.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <time.h>
#include <vector>

using namespace cppl::core;
using Clock = std::chrono::steady_clock;

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
    void *ctx = zmq_ctx_new();
    void *sock = zmq_socket(ctx, ZMQ_PUSH);
    int hwm = 100000, linger = 0;
    zmq_setsockopt(sock, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof linger);
    zmq_connect(sock, endpoint.c_str());
    std::mt19937_64 rng(static_cast<unsigned>(first) * 7919U + 1);
    std::lognormal_distribution<double> nll(1.0, 0.8);
    std::vector<cppl::NllStats> stats(static_cast<std::size_t>(ranks));
    for (std::int64_t k = 0; !stop.load(); ++k) {
        std::this_thread::sleep_until(t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(static_cast<double>(k) / rate)));
        const double t = std::chrono::duration<double>(Clock::now() - t0).count();
        if (t >= duration)
            break;
        for (int r = first; r < ranks; r += step) {
            cppl::telemetry::Message m;
            auto &h = m.header;
            h.run = "bench-dashboard";
            h.rank = r;
            h.host = "node" + std::to_string(r / 8);
            h.group = r / 64;
            h.localRank = r % 8;
            h.worldSize = ranks;
            h.seq = k;
            h.t = 1.8e9 + t;
            const bool slow = r % 97 == 13;
            const double speed = (slow ? 1400.0 : 2500.0) * (1 + 0.05 * std::sin(t / 7 + r));
            if (k % 10 == 9) {
                h.kind = cppl::telemetry::Kind::Heartbeat;
                m.phase = cppl::telemetry::Phase::Evaluating;
            } else {
                h.kind = cppl::telemetry::Kind::Progress;
                auto &s = stats[static_cast<std::size_t>(r)];
                for (int i = 0; i < 8; ++i)
                    s.addToken(nll(rng));
                auto &p = m.progress;
                p.nll = s.nll;
                p.nllSquared = s.nllSquared;
                p.tokensScoredTotal = s.tokens;
                p.windowsDone = k;
                p.windowsTotal = static_cast<std::int64_t>(duration * rate) + 1;
                p.tokensPerSecond = speed;
                p.computeSecondsTotal = t * 0.99;
                p.commWaitSecondsTotal = t * (slow ? 0.001 : 0.008);
                p.commTransferSecondsTotal = t * 0.001;
                p.rssBytes = (std::int64_t(1) << 30) + r;
            }
            const std::string bytes = cppl::telemetry::encode(m);
            if (zmq_send(sock, bytes.data(), bytes.size(), ZMQ_DONTWAIT) < 0)
                dropped.fetch_add(1);
            else
                sent.fetch_add(1);
        }
    }
    zmq_close(sock);
    zmq_ctx_term(ctx);
}

} // namespace

int main(int argc, char **argv)
{
    int ranks = 1024, senders = 2;
    double rate = 10, duration = 60, scale = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i];
        if (a == "--ranks")
            ranks = std::atoi(argv[i + 1]);
        else if (a == "--rate")
            rate = std::atof(argv[i + 1]);
        else if (a == "--seconds")
            duration = std::atof(argv[i + 1]);
        else if (a == "--senders")
            senders = std::atoi(argv[i + 1]);
        else if (a == "--scale")
            scale = std::atof(argv[i + 1]);
    }
    if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM"))
        qputenv("QT_QPA_PLATFORM", "offscreen");
    if (scale != 1)
        qputenv("QT_SCALE_FACTOR", QByteArray::number(scale));
    QApplication app(argc, argv);

    cppl::app::RunPage page;
    page.resize(1600, 1000);
    std::vector<QString> groups;
    for (int g = 0; g < (ranks + 63) / 64; ++g)
        groups.push_back(QStringLiteral("rack%1").arg(g));
    cppl::Thresholds thresholds;
    page.reset(QStringLiteral("bench-dashboard"), ranks, groups, thresholds);
    page.setPhase(run::RunPhase::Running);
    page.show();

    run::RunTimeline timeline;
    timeline.reset();
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

    QElapsedTimer clock;
    clock.start();
    std::vector<double> workMs, cpuMs, updateCpuMs, paintCpuMs;
    std::vector<std::pair<double, double>> rss;
    double maxWorkMs = 0;
    QObject::connect(&collector, &telemetry::CollectorObject::snapshotReady, &page, [&](const telemetry::SnapshotPtr &snap) {
        QElapsedTimer work;
        work.start();
        const double cpu0 = threadCpuMs();
        const double t = static_cast<double>(clock.nsecsElapsed()) * 1e-9;
        timeline.append(t, *snap);
        for (const auto &a : alerts.update(t, *snap))
            page.addAlert(a);
        page.showSnapshot(*snap, timeline, t);
        const double cpu1 = threadCpuMs();
        page.repaint(); // the paint this update causes, synchronously, so it is measured here
        const double cpu2 = threadCpuMs();
        const double ms = static_cast<double>(work.nsecsElapsed()) * 1e-6;
        if (t > 2.0) { // after warm-up: fonts, first layout, the collector meeting every rank
            workMs.push_back(ms);
            cpuMs.push_back(cpu2 - cpu0);
            updateCpuMs.push_back(cpu1 - cpu0);
            paintCpuMs.push_back(cpu2 - cpu1);
        }
        maxWorkMs = std::max(maxWorkMs, ms);
    });
    QTimer memory;
    QObject::connect(&memory, &QTimer::timeout, [&] { rss.emplace_back(static_cast<double>(clock.elapsed()) / 1000.0, rssMiB()); });
    memory.start(10000);
    rss.emplace_back(0.0, rssMiB());

    std::atomic<std::int64_t> sent{0}, dropped{0};
    std::atomic<bool> stop{false};
    const auto t0 = Clock::now();
    std::vector<std::thread> threads;
    for (int s = 0; s < senders; ++s)
        threads.emplace_back(sendLoop, collector.endpoint().toStdString(), s, senders, ranks, rate, duration, t0, std::ref(sent),
                             std::ref(dropped), std::cref(stop));
    QTimer::singleShot(static_cast<int>(duration * 1000) + 500, &app, &QApplication::quit);
    app.exec();
    stop = true;
    for (auto &t : threads)
        t.join();
    rss.emplace_back(static_cast<double>(clock.elapsed()) / 1000.0, rssMiB());
    const auto last = collector.snapshotNow();

    std::printf("bench_dashboard: %d ranks at %.0f Hz for %.0f s, %d sender threads, %u hardware threads, QT_QPA_PLATFORM=%s, scale %.0f\n",
                ranks, rate, duration, senders, std::thread::hardware_concurrency(), qgetenv("QT_QPA_PLATFORM").constData(), scale);
    std::printf("messages: %lld sent, %lld dropped by senders, %lld received, %lld lost\n", static_cast<long long>(sent.load()),
                static_cast<long long>(dropped.load()), static_cast<long long>(collector.messagesReceived()),
                static_cast<long long>(last->lostTotal));
    std::printf("GUI-thread work per update (timeline + alerts + page update + repaint), %zu updates after 2 s warm-up:\n"
                "  median %.2f ms, p95 %.2f ms, p99 %.2f ms, max %.2f ms  (goal: p99 < 16 ms)\n",
                workMs.size(), percentile(workMs, 0.5), percentile(workMs, 0.95), percentile(workMs, 0.99), maxWorkMs);
    std::printf("the same as GUI-thread CPU time (independent of other load): median %.2f ms, p95 %.2f ms, p99 %.2f ms\n"
                "  of which model/chart updates: median %.2f ms, p99 %.2f ms; repaint: median %.2f ms, p99 %.2f ms\n",
                percentile(cpuMs, 0.5), percentile(cpuMs, 0.95), percentile(cpuMs, 0.99), percentile(updateCpuMs, 0.5),
                percentile(updateCpuMs, 0.99), percentile(paintCpuMs, 0.5), percentile(paintCpuMs, 0.99));
    std::printf("updates per second: %.1f (collector coalesces to <= 25)\n", static_cast<double>(workMs.size()) / std::max(1.0, duration - 2));
    std::printf("timeline: %zu samples x %d ranks, %.1f MiB\n", timeline.size(), timeline.worldSize(),
                static_cast<double>(timeline.bytes()) / (1 << 20));
    std::printf("RSS over time (s: MiB):");
    for (const auto &[t, m] : rss)
        std::printf("  %.0f: %.0f", t, m);
    std::printf("\n");
    return 0;
}
