// SPDX-License-Identifier: MIT
// Chart painting cost (docs/charts.md): a 1024-series time chart (10 min at 10 Hz), the band chart
// over the same data, a 1024 x 600 heat map and 1024 stacked bars, each painted into a 1600 x 900
// QImage; median and p99 ms per paint. --preview DIR also writes every chart at 1x/2x, light/dark.
#include "charts/band_chart.h"
#include "charts/chart_export.h"
#include "charts/heat_map.h"
#include "charts/stacked_bar_chart.h"
#include "charts/time_series_chart.h"

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QGuiApplication>
#include <QPainter>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <functional>
#include <random>
#include <thread>

using namespace cppl::charts;

namespace {

// Synthetic ranks: ~12k tok/s with noise, a few slow ranks, one rank stalling for 20 s.
std::vector<SeriesData> makeRanks(int ranks, int samples, double hz)
{
    std::mt19937 rng(42);
    std::normal_distribution<double> noise(0, 350);
    std::vector<SeriesData> out(static_cast<size_t>(ranks));
    for (int r = 0; r < ranks; ++r) {
        SeriesData &s = out[static_cast<size_t>(r)];
        s.name = QStringLiteral("rank %1").arg(r);
        s.x.resize(static_cast<size_t>(samples));
        s.y.resize(static_cast<size_t>(samples));
        const double base = (r % 97 == 13) ? 9000 : 12000 + 400 * std::sin(r * 0.7);
        for (int i = 0; i < samples; ++i) {
            const double t = i / hz;
            double v = base + noise(rng) + 600 * std::sin(t / 40 + r * 0.1);
            if (r == 700 && t > 300 && t < 320)
                v = 0; // a stall
            s.x[static_cast<size_t>(i)] = t;
            s.y[static_cast<size_t>(i)] = std::max(0.0, v);
        }
    }
    return out;
}

struct Figures
{
    double median;
    double p99;
    double cpuMedian; // process CPU ms: on a loaded host wall time also counts waiting for a core
};

double cpuMs()
{
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

Figures timePaints(const Chart &chart, int iterations, bool invalidate, const std::function<void()> &touch)
{
    QImage image(1600, 900, QImage::Format_ARGB32_Premultiplied);
    std::vector<double> ms, cpu;
    for (int i = 0; i < iterations; ++i) {
        if (invalidate)
            touch();
        QElapsedTimer t;
        const double c0 = cpuMs();
        t.start();
        QPainter p(&image);
        chart.paint(p, QRectF(0, 0, 1600, 900));
        p.end();
        ms.push_back(static_cast<double>(t.nsecsElapsed()) / 1e6);
        cpu.push_back(cpuMs() - c0);
    }
    std::sort(ms.begin(), ms.end());
    std::sort(cpu.begin(), cpu.end());
    return {ms[ms.size() / 2], ms[std::min(ms.size() - 1, static_cast<size_t>(std::ceil(0.99 * static_cast<double>(ms.size()))) - 1)],
            cpu[cpu.size() / 2]};
}

void preview(const QString &dir, const QString &name, Chart &chart, QSize size)
{
    for (bool dark : {false, true}) {
        chart.setTheme(dark ? Theme::dark() : Theme::light());
        for (qreal dpr : {1.0, 2.0}) {
            const QString path = dir + QLatin1Char('/') + name + (dark ? QStringLiteral("-dark") : QStringLiteral("-light")) +
                                 (dpr > 1 ? QStringLiteral("@2x.png") : QStringLiteral(".png"));
            renderToImage(chart, size, dpr).save(path);
            std::printf("wrote %s\n", qPrintable(path));
        }
    }
    chart.setTheme(Theme::light());
}

QString cpuModel()
{
    QFile f(QStringLiteral("/proc/cpuinfo"));
    if (!f.open(QIODevice::ReadOnly))
        return QStringLiteral("unknown");
    for (const QByteArray &line : f.readAll().split('\n'))
        if (line.startsWith("model name"))
            return QString::fromUtf8(line.mid(line.indexOf(':') + 1).trimmed());
    return QStringLiteral("unknown");
}

} // namespace

int main(int argc, char **argv)
{
    if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM"))
        qputenv("QT_QPA_PLATFORM", "offscreen");
    QGuiApplication app(argc, argv);
    QString previewDir;
    int iterations = 30;
    const QStringList args = app.arguments();
    for (int i = 1; i < args.size(); ++i) {
        if (args[i] == QLatin1String("--preview") && i + 1 < args.size())
            previewDir = args[++i];
        else if (args[i] == QLatin1String("--iterations") && i + 1 < args.size())
            iterations = std::max(1, args[++i].toInt());
        else {
            std::fprintf(stderr, "usage: bench_charts [--iterations N] [--preview DIR]\n");
            return 2;
        }
    }
    std::printf("CPU: %s; painting on 1 thread (the GUI thread); %u hardware threads; Qt %s\n", qPrintable(cpuModel()),
                std::thread::hardware_concurrency(), qVersion());

    constexpr int kRanks = 1024, kSamples = 6000;
    const std::vector<SeriesData> ranks = makeRanks(kRanks, kSamples, 10.0);
    AxisSpec rate{QStringLiteral("tok/s"), ValueFormat::Si, {}, {}, true};

    TimeSeriesChart many;
    many.setTitle(QStringLiteral("Tokens per second, 1024 ranks"));
    many.setYAxis(rate);
    many.setSeries(ranks);
    many.setReferenceLines({{12000, QStringLiteral("ideal"), {}, Qt::DashLine}});

    BandChart band;
    band.setTitle(QStringLiteral("Tokens per second: spread over 1024 ranks"));
    band.setYAxis(rate);
    band.setSeries(ranks);
    band.setHighlights({ranks[700], ranks[13], ranks[110]});

    HeatMap heat;
    heat.setTitle(QStringLiteral("Tokens per second by rank"));
    heat.setValueAxis({QStringLiteral("tok/s"), ValueFormat::Si, {}, {}, false});
    heat.setAggregation(Aggregation::Min);
    {
        std::vector<float> v(static_cast<size_t>(kRanks) * 600);
        for (int r = 0; r < kRanks; ++r)
            for (int c = 0; c < 600; ++c)
                v[static_cast<size_t>(r) * 600 + static_cast<size_t>(c)] =
                    static_cast<float>(ranks[static_cast<size_t>(r)].y[static_cast<size_t>(c) * 10]);
        heat.setData(kRanks, 600, std::move(v));
        heat.setColumnRange(0, 600);
    }

    StackedBarChart bars;
    bars.setTitle(QStringLiteral("Communication share per rank"));
    bars.setSegmentNames({QStringLiteral("waiting for stragglers"), QStringLiteral("transfer")});
    bars.setYAxis({QStringLiteral("share of wall time"), ValueFormat::Percent, {}, {}, true});
    {
        std::mt19937 rng(7);
        std::uniform_real_distribution<double> u(0, 1);
        std::vector<double> v;
        for (int r = 0; r < kRanks; ++r) {
            v.push_back(0.02 + 0.06 * u(rng) + (r == 700 ? 0.25 : 0.0));
            v.push_back(0.03 + 0.02 * u(rng));
        }
        bars.setValues(std::move(v));
    }

    struct Case
    {
        const char *name;
        Chart *chart;
    };
    std::printf("%-44s %10s %10s %12s\n", "paint into 1600x900 QImage", "median ms", "p99 ms", "median CPU ms");
    for (const Case &c : {Case{"time series, 1024 x 6000 pts (cached decim.)", &many},
                          Case{"band chart, 1024 series (cached band)", &band}, Case{"heat map 1024 x 600 (cached image)", &heat},
                          Case{"stacked bars, 1024 categories", &bars}}) {
        const Figures f = timePaints(*c.chart, iterations, false, {});
        std::printf("%-44s %10.2f %10.2f %12.2f\n", c.name, f.median, f.p99, f.cpuMedian);
    }
    // New data before every paint: the cost a live view pays per update.
    const Figures fm = timePaints(many, std::max(5, iterations / 3), true, [&] { many.appendPoint(0, 600.05, 12000); });
    std::printf("%-44s %10.2f %10.2f %12.2f\n", "time series, new data every paint", fm.median, fm.p99, fm.cpuMedian);
    const Figures fb = timePaints(band, std::max(5, iterations / 3), true, [&] { band.setQuantiles(0.05, 0.95); });
    std::printf("%-44s %10.2f %10.2f %12.2f\n", "band chart, band recomputed every paint", fb.median, fb.p99, fb.cpuMedian);
    const Figures fh = timePaints(heat, std::max(5, iterations / 3), true, [&] { heat.setValue(0, 0, 12000); });
    std::printf("%-44s %10.2f %10.2f %12.2f\n", "heat map, image rebuilt every paint", fh.median, fh.p99, fh.cpuMedian);

    if (!previewDir.isEmpty()) {
        QDir().mkpath(previewDir);
        TimeSeriesChart few;
        few.setTitle(QStringLiteral("Tokens per second, 6 ranks"));
        few.setYAxis(rate);
        std::vector<SeriesData> six(ranks.begin(), ranks.begin() + 6);
        for (auto &s : six) {
            s.x.resize(1200);
            s.y.resize(1200);
        }
        six[3].y[600] = 22000; // a spike
        few.setSeries(six);
        few.setReferenceLines({{12000, QStringLiteral("ideal"), {}, Qt::DashLine}, {9500, QStringLiteral("alert"), {}, Qt::DotLine}});
        preview(previewDir, QStringLiteral("time-few"), few, {900, 480});
        preview(previewDir, QStringLiteral("time-1024"), many, {900, 480});
        preview(previewDir, QStringLiteral("band"), band, {900, 480});
        preview(previewDir, QStringLiteral("heatmap"), heat, {900, 480});
        preview(previewDir, QStringLiteral("bars-1024"), bars, {900, 420});
        StackedBarChart fewBars;
        fewBars.setTitle(QStringLiteral("Communication share, 8 ranks"));
        fewBars.setSegmentNames({QStringLiteral("waiting for stragglers"), QStringLiteral("transfer")});
        fewBars.setYAxis({QStringLiteral("share of wall time"), ValueFormat::Percent, {}, {}, true});
        fewBars.setValues({0.05, 0.03, 0.08, 0.04, 0.02, 0.03, 0.21, 0.05, 0.04, 0.03, 0.06, 0.02, 0.03, 0.04, 0.05, 0.03});
        preview(previewDir, QStringLiteral("bars-8"), fewBars, {900, 420});
        renderToSvgFile(few, previewDir + QStringLiteral("/time-few.svg"), {900, 480});
        renderToPdfFile(heat, previewDir + QStringLiteral("/heatmap.pdf"), {900, 480});
    }
    return 0;
}
