// SPDX-License-Identifier: MIT
// The chart module's pure parts: nice ticks and labels, the colour map, themes, min/max
// decimation, pixel density and band quantiles.
#include "charts/band_chart.h"
#include "charts/chart_axis.h"
#include "charts/chart_frame.h"
#include "charts/chart_theme.h"
#include "charts/color_map.h"

#include <QImage>
#include <QPainter>
#include <QTest>

#include <algorithm>
#include <cmath>
#include <limits>

using namespace cppl::charts;

class TestChartBasics : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void niceTicks_data();
    void niceTicks();
    void degenerateRangeGetsAnAxis();
    void percentTicksStepByOneTwoOrFive();
    void secondsTicksUseClockSteps();
    void narrowTimeAxisGetsTwoTicks();
    void tickLabels_data();
    void tickLabels();
    void valueLabels();
    void labelStrides();
    void viridisLightnessRisesMonotonically();
    void viridisEndsAtItsControlColours();
    void themeFollowsPalette();
    void consecutiveSeriesDifferBeyondColour();
    void decimationKeepsSingleSpike();
    void decimationKeepsEdgesAndBreaks();
    void simplifiedPolylineStaysClose_data();
    void simplifiedPolylineStaysClose();
    void densityCountsEachSeriesOncePerPixel();
    void bandQuantiles();
    void legendOverflowFollowsTheLastEntry();
    void legendListsALoneEntryInsteadOfOneMore();
    void titleWrapsOntoTwoLines();
    void yTitleUsesTheRoomBelowAShortPlot();
};

void TestChartBasics::niceTicks_data()
{
    QTest::addColumn<double>("lo");
    QTest::addColumn<double>("hi");
    QTest::addColumn<int>("maxCount");
    QTest::addColumn<double>("step");
    QTest::addColumn<double>("min");
    QTest::addColumn<double>("max");
    QTest::addRow("0..100, 6 ticks") << 0.0 << 100.0 << 6 << 20.0 << 0.0 << 100.0;
    QTest::addRow("3..97 widened to 0..100") << 3.0 << 97.0 << 6 << 20.0 << 0.0 << 100.0;
    QTest::addRow("tok/s 11.2k..13.9k") << 11200.0 << 13900.0 << 6 << 1000.0 << 11000.0 << 14000.0;
    QTest::addRow("tok/s, more room") << 11200.0 << 13900.0 << 10 << 500.0 << 11000.0 << 14000.0;
    QTest::addRow("PPL 7.31..7.36") << 7.31 << 7.36 << 6 << 0.01 << 7.31 << 7.36;
    QTest::addRow("negative -3..7") << -3.0 << 7.0 << 6 << 2.0 << -4.0 << 8.0;
    QTest::addRow("2.5 steps") << 0.0 << 10.0 << 5 << 2.5 << 0.0 << 10.0;
}

void TestChartBasics::niceTicks()
{
    QFETCH(double, lo);
    QFETCH(double, hi);
    QFETCH(int, maxCount);
    QFETCH(double, step);
    QFETCH(double, min);
    QFETCH(double, max);
    const Ticks t = cppl::charts::niceTicks(lo, hi, maxCount);
    QCOMPARE(t.step, step);
    QVERIFY2(std::abs(t.min - min) < 1e-9 && std::abs(t.max - max) < 1e-9,
             qPrintable(QStringLiteral("range %1..%2").arg(t.min).arg(t.max)));
    QVERIFY(static_cast<int>(t.values.size()) <= maxCount + 1);
    QVERIFY(t.values.front() >= t.min - 1e-9 && t.values.back() <= t.max + 1e-9);
    for (size_t i = 1; i < t.values.size(); ++i)
        QVERIFY(std::abs(t.values[i] - t.values[i - 1] - step) < 1e-9 * std::max(1.0, step));
}

void TestChartBasics::degenerateRangeGetsAnAxis()
{
    const Ticks constant = cppl::charts::niceTicks(42, 42, 5);
    QVERIFY(constant.min < 42 && constant.max > 42);
    QVERIFY(constant.values.size() >= 2);
    const Ticks nan = cppl::charts::niceTicks(std::numeric_limits<double>::quiet_NaN(), 1, 5);
    QVERIFY(nan.max > nan.min);
}

void TestChartBasics::percentTicksStepByOneTwoOrFive()
{
    // Shares: 1, 2 or 5 points, never 2.5 (labels "0%, 5%, 10%", not "2.5%, 7.5%").
    for (const double hi : {0.1, 0.08, 0.25, 0.012, 0.9}) {
        const Ticks p = cppl::charts::niceTicks(0, hi, 5, ValueFormat::Percent);
        const double points = p.step * 100 / std::pow(10.0, std::floor(std::log10(p.step * 100) + 1e-9));
        QVERIFY2(std::abs(points - 1) < 1e-6 || std::abs(points - 2) < 1e-6 || std::abs(points - 5) < 1e-6,
                 qPrintable(QStringLiteral("0..%1: step %2").arg(hi).arg(p.step)));
        for (double v : p.values)
            QVERIFY(!formatTick(v, p.step, ValueFormat::Percent).contains(QLatin1Char('.')) || p.step < 0.01);
    }

}

void TestChartBasics::secondsTicksUseClockSteps()
{
    const Ticks t = cppl::charts::niceTicks(0, 600, 8, ValueFormat::Seconds, false);
    QCOMPARE(t.step, 120.0); // 600/7 = 86 s -> 2 min, not 100 s
    QCOMPARE(t.min, 0.0);
    QCOMPARE(t.max, 600.0);
    QCOMPARE(formatTick(120, t.step, ValueFormat::Seconds), QStringLiteral("2:00"));
    QCOMPARE(formatTick(30, 10, ValueFormat::Seconds), QStringLiteral("30 s"));
    QCOMPARE(formatTick(3720, 600, ValueFormat::Seconds), QStringLiteral("1:02:00"));
    QCOMPARE(formatTick(30, 15, ValueFormat::Seconds, 120), QStringLiteral("0:30")); // one style per axis
}

void TestChartBasics::tickLabels_data()
{
    QTest::addColumn<double>("value");
    QTest::addColumn<double>("step");
    QTest::addColumn<int>("format");
    QTest::addColumn<QString>("label");
    QTest::addRow("si k with decimals") << 12500.0 << 500.0 << int(ValueFormat::Si) << QStringLiteral("12.5k");
    QTest::addRow("si same suffix on the axis") << 500.0 << 500.0 << int(ValueFormat::Si) << QStringLiteral("0.5k");
    QTest::addRow("si zero") << 0.0 << 500.0 << int(ValueFormat::Si) << QStringLiteral("0");
    QTest::addRow("si M") << 3000000.0 << 1000000.0 << int(ValueFormat::Si) << QStringLiteral("3M");
    QTest::addRow("si small") << 40.0 << 20.0 << int(ValueFormat::Si) << QStringLiteral("40");
    QTest::addRow("percent") << 0.25 << 0.05 << int(ValueFormat::Percent) << QStringLiteral("25%");
    QTest::addRow("percent decimals") << 0.025 << 0.005 << int(ValueFormat::Percent) << QStringLiteral("2.5%");
    QTest::addRow("plain PPL") << 7.33 << 0.01 << int(ValueFormat::Plain) << QStringLiteral("7.33");
    QTest::addRow("plain no minus zero") << -1e-15 << 0.5 << int(ValueFormat::Plain) << QStringLiteral("0.0");
}

void TestChartBasics::tickLabels()
{
    QFETCH(double, value);
    QFETCH(double, step);
    QFETCH(int, format);
    QFETCH(QString, label);
    QCOMPARE(formatTick(value, step, static_cast<ValueFormat>(format)), label);
}

void TestChartBasics::valueLabels()
{
    QCOMPARE(formatValue(12345, ValueFormat::Si), QStringLiteral("12.3k"));
    QCOMPARE(formatValue(2.5e6, ValueFormat::Si), QStringLiteral("2.50M"));
    QCOMPARE(formatValue(7.254, ValueFormat::Plain), QStringLiteral("7.25"));
    QCOMPARE(formatValue(0.125, ValueFormat::Percent), QStringLiteral("12.5%"));
    QCOMPARE(formatValue(75, ValueFormat::Seconds), QStringLiteral("1:15.0"));
    QCOMPARE(formatValue(std::numeric_limits<double>::quiet_NaN(), ValueFormat::Plain), QStringLiteral("–"));
}

void TestChartBasics::labelStrides()
{
    QCOMPARE(labelStride(20, 16), 1);     // every row has room
    QCOMPARE(labelStride(10, 16), 2);
    QCOMPARE(labelStride(5, 16), 5);      // 4 would do, but strides are 1, 2, 5 x 10^n
    QCOMPARE(labelStride(600.0 / 1024, 20.8), 50); // 1024 ranks in 600 px, 16 px labels + gap
    QCOMPARE(labelStride(0.1, 20), 200);
    QCOMPARE(labelStride(0, 20), 1);      // degenerate: no thinning, no endless loop
}

void TestChartBasics::viridisLightnessRisesMonotonically()
{
    const ColorMap &map = ColorMap::viridis();
    double previous = -1;
    for (int i = 0; i < ColorMap::kSize; ++i) {
        const double l = oklabLightness(QColor::fromRgb(map.table()[static_cast<size_t>(i)]));
        // 8-bit rounding can make neighbours equal; never darker by more than rounding.
        QVERIFY2(l >= previous - 0.004, qPrintable(QStringLiteral("entry %1: L %2 after %3").arg(i).arg(l).arg(previous)));
        previous = std::max(previous, l);
    }
    // Perceptually even: no step in lightness much larger than the average one.
    const double total = oklabLightness(map.color(1)) - oklabLightness(map.color(0));
    QVERIFY(total > 0.5);
    for (int i = 1; i < ColorMap::kSize; ++i) {
        const double step = oklabLightness(QColor::fromRgb(map.table()[static_cast<size_t>(i)])) -
                            oklabLightness(QColor::fromRgb(map.table()[static_cast<size_t>(i - 1)]));
        QVERIFY(step < 4.0 * total / (ColorMap::kSize - 1) + 0.004);
    }
}

void TestChartBasics::viridisEndsAtItsControlColours()
{
    const ColorMap &map = ColorMap::viridis();
    QCOMPARE(QColor::fromRgb(map.map(0)), QColor(0x44, 0x01, 0x54));
    QCOMPARE(QColor::fromRgb(map.map(1)), QColor(0xfd, 0xe7, 0x25));
    QCOMPARE(map.map(-3), map.map(0)); // clamped
    QCOMPARE(map.map(7), map.map(1));
    const ColorMap grey({Qt::black, Qt::white});
    QCOMPARE(qRed(grey.map(0)), 0);
    QCOMPARE(qRed(grey.map(1)), 255);
    QVERIFY(qRed(grey.map(0.5)) > 90 && qRed(grey.map(0.5)) < 140); // OKLab midpoint, not sRGB 128 by luck
}

void TestChartBasics::themeFollowsPalette()
{
    QPalette darkPalette;
    darkPalette.setColor(QPalette::Window, QColor(30, 30, 34));
    darkPalette.setColor(QPalette::WindowText, QColor(230, 230, 230));
    darkPalette.setColor(QPalette::Base, QColor(20, 20, 24));
    const Theme dark = Theme::fromPalette(darkPalette);
    QVERIFY(dark.isDark);
    QCOMPARE(dark.background, QColor(30, 30, 34));
    QCOMPARE(dark.text, QColor(230, 230, 230));
    QPalette lightPalette;
    lightPalette.setColor(QPalette::Window, QColor(240, 240, 240));
    lightPalette.setColor(QPalette::WindowText, Qt::black);
    QVERIFY(!Theme::fromPalette(lightPalette).isDark);
    // Every series colour stands out from its background in both themes.
    for (const Theme &t : {Theme::light(), Theme::dark()})
        for (const QColor &c : t.seriesColors)
            QVERIFY2(std::abs(oklabLightness(c) - oklabLightness(t.plotBackground)) > 0.2,
                     qPrintable(c.name() + QStringLiteral(" on ") + t.plotBackground.name()));
}

void TestChartBasics::consecutiveSeriesDifferBeyondColour()
{
    const Theme t = Theme::light();
    for (int i = 0; i < 40; ++i) {
        const SeriesStyle a = t.seriesStyle(i), b = t.seriesStyle(i + 1);
        QVERIFY(a.marker != b.marker);
        QVERIFY(a.dash != b.dash);
        QVERIFY(a.color != b.color);
    }
}

void TestChartBasics::decimationKeepsSingleSpike()
{
    std::vector<double> x(6000), y(6000, 10.0);
    for (size_t i = 0; i < x.size(); ++i)
        x[i] = static_cast<double>(i) * 0.1;
    y[3217] = 90;
    y[4000] = -50;
    std::vector<DecimatedPoint> out;
    decimateMinMax(x.data(), y.data(), x.size(), 0, 599.9, 100, out);
    QVERIFY(out.size() <= 4 * 101 + 2);
    QVERIFY(out.size() >= 100);
    const auto hasY = [&](float v) { return std::any_of(out.begin(), out.end(), [&](const DecimatedPoint &p) { return p.y == v; }); };
    QVERIFY(hasY(90));
    QVERIFY(hasY(-50));
    for (size_t i = 1; i < out.size(); ++i)
        QVERIFY(out[i].x >= out[i - 1].x); // time order kept
}

void TestChartBasics::decimationKeepsEdgesAndBreaks()
{
    const std::vector<double> x{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    const std::vector<double> y{1, 2, 3, std::numeric_limits<double>::quiet_NaN(), 5, 6, 7, 8, 9, 10};
    std::vector<DecimatedPoint> out;
    decimateMinMax(x.data(), y.data(), x.size(), 2.5, 6.5, 1000, out);
    QCOMPARE(out.front().x, 2.0f); // one point before the window
    QCOMPARE(out.back().x, 7.0f);  // one point after
    QVERIFY(std::any_of(out.begin(), out.end(), [](const DecimatedPoint &p) { return std::isnan(p.y); }));
}

void TestChartBasics::densityCountsEachSeriesOncePerPixel()
{
    // Two series crossing the same 10x10 grid: a flat line at row 5 and a zigzag inside column 3.
    const int cols = 10, rows = 10;
    std::vector<std::int32_t> diff(static_cast<size_t>(cols) * (rows + 1), 0);
    const std::vector<DecimatedPoint> flat{{0, 5.5f}, {10, 5.5f}};
    const std::vector<DecimatedPoint> zig{{3.1f, 1.5f}, {3.3f, 8.5f}, {3.5f, 2.5f}, {3.7f, 8.5f}};
    // yTop = 10, sy = 1: row = 10 - y, so y 5.5 is row 4.
    accumulateDensity(flat, 0, 1, 10, 1, cols, rows, diff);
    accumulateDensity(zig, 0, 1, 10, 1, cols, rows, diff);
    auto count = [&](int c, int r) {
        int run = 0;
        for (int k = 0; k <= r; ++k)
            run += diff[static_cast<size_t>(c) * (rows + 1) + static_cast<size_t>(k)];
        return run;
    };
    for (int c = 0; c < cols; ++c)
        QCOMPARE(count(c, 4), c == 3 ? 2 : 1); // the zigzag passes row 4 three times, counted once
    QCOMPARE(count(3, 1), 1);  // y 8.5 -> row 1
    QCOMPARE(count(3, 0), 0);
    QCOMPARE(count(2, 1), 0);
}

void TestChartBasics::bandQuantiles()
{
    // 101 series with constant values 0..100: p5 = 5, median = 50, p95 = 95 in every bin.
    std::vector<SeriesData> series;
    for (int i = 0; i <= 100; ++i)
        series.push_back({QString::number(i), {0, 1, 2, 3, 4, 5}, std::vector<double>(6, static_cast<double>(i))});
    const auto band = computeBand(series, 0, 5, 5);
    QCOMPARE(band.size(), size_t{5});
    for (const BandSample &b : band) {
        QCOMPARE(b.low, 5.0);
        QCOMPARE(b.median, 50.0);
        QCOMPARE(b.high, 95.0);
        QCOMPARE(b.count, 101);
    }
    QCOMPARE(band.front().x, 0.5);
    // Means within a bin, and series missing from a bin are left out of it.
    std::vector<SeriesData> two{{QStringLiteral("a"), {0, 0.2, 0.4}, {1, 2, 3}}, {QStringLiteral("b"), {2.5}, {7}}};
    const auto b2 = computeBand(two, 0, 3, 3, 0, 1);
    QCOMPARE(b2.size(), size_t{2});
    QCOMPARE(b2[0].median, 2.0);
    QCOMPARE(b2[0].count, 1);
    QCOMPARE(b2[1].median, 7.0);
}

void TestChartBasics::simplifiedPolylineStaysClose_data()
{
    QTest::addColumn<int>("shape");
    QTest::addRow("smooth curve") << 0;
    QTest::addRow("curve with a one-sample spike") << 1;
    QTest::addRow("zigzag") << 2;
    QTest::addRow("steps") << 3;
}

void TestChartBasics::simplifiedPolylineStaysClose()
{
    QFETCH(int, shape);
    // 1000 samples across 400 px, as a calm band line of a long run is drawn.
    QPolygonF line;
    for (int i = 0; i < 1000; ++i) {
        const double x = 0.4 * i;
        double y = 100 + 60 * std::sin(i / 150.0);
        if (shape == 1 && i == 617)
            y -= 80; // the spike
        if (shape == 2)
            y = 100 + ((i % 2) ? 5 : -5);
        if (shape == 3)
            y = 100 + 20 * ((i / 100) % 3);
        line.append(QPointF(x, y));
    }
    constexpr double tol = 0.25;
    QPolygonF out;
    cppl::charts::simplifyPolyline(line.constData(), line.size(), tol, out);
    QCOMPARE(out.front(), line.front());
    QCOMPARE(out.back(), line.back());
    // Every input point within 1.5 x tolerance of the simplified line.
    auto distance = [&](const QPointF &p) {
        double best = 1e300;
        for (qsizetype i = 0; i + 1 < out.size(); ++i) {
            const QPointF a = out[i], b = out[i + 1], d = b - a;
            const double len2 = d.x() * d.x() + d.y() * d.y();
            const double t = len2 > 0 ? std::clamp(QPointF::dotProduct(p - a, d) / len2, 0.0, 1.0) : 0.0;
            const QPointF q = a + t * d;
            best = std::min(best, std::hypot(p.x() - q.x(), p.y() - q.y()));
        }
        return best;
    };
    for (const QPointF &p : line)
        QVERIFY2(distance(p) <= 1.5 * tol + 1e-9, qPrintable(QStringLiteral("(%1, %2) is %3 px away").arg(p.x()).arg(p.y()).arg(distance(p))));
    if (shape == 0 || shape == 1)
        QVERIFY2(out.size() < 150, qPrintable(QString::number(out.size()))); // what makes stroking cheap
    if (shape == 1)
        QVERIFY(std::any_of(out.begin(), out.end(), [&](const QPointF &p) { return p == line[617]; }));
    if (shape == 2)
        QCOMPARE(out.size(), line.size()); // nothing to drop in a zigzag wider than the tolerance
}

void TestChartBasics::legendOverflowFollowsTheLastEntry()
{
    // Seven entries where three rows hold five or so: "+N more" was drawn at the start of the
    // third row, over the entries already there (the Run page's tok/s legend at 1024 px).
    using namespace cppl::charts::detail;
    using namespace Qt::StringLiterals;
    const QFont font;
    const QFontMetricsF fm(font);
    const auto theme = cppl::charts::Theme::light();
    FrameSpec spec;
    for (const char *label : {"p95 of ranks", "median", "p5 of ranks", "rank 777 (node-097) stalled", "rank 37 (node-004) slow",
                              "rank 538 (node-067) slow", "rank 12 (selected)"})
        spec.legend.push_back({QString::fromLatin1(label), LegendEntry::Swatch::Line, Qt::black, Qt::SolidLine, {}, Qt::NoBrush});
    const qreal rowH = std::max(fm.height(), theme.markerSize + 2) + 4;
    for (const qreal width : {200.0, 260.0, 300.0, 420.0, 2000.0}) {
        const QRectF area(0, 0, width, 500);
        const LegendLayout l = legendLayout(fm, area, theme, spec);
        const auto shown = l.entries.size();
        // Three rows, or four when the fourth lists the one entry "+1 more" would stand for.
        QVERIFY2(l.height <= (shown == spec.legend.size() ? 4 : 3) * rowH + 0.01, qPrintable(QString::number(width)));
        QVERIFY(l.moreText != u"+1 more"_s);
        std::vector<QRectF> rects = l.entries;
        if (shown < spec.legend.size()) {
            QCOMPARE(l.moreText, u"+%1 more"_s.arg(spec.legend.size() - shown));
            rects.push_back(l.more);
        } else {
            QVERIFY(l.moreText.isEmpty());
        }
        for (size_t i = 0; i < rects.size(); ++i) {
            QVERIFY(rects[i].bottom() <= l.height + 0.01);
            for (size_t j = i + 1; j < rects.size(); ++j)
                QVERIFY2(!rects[i].intersects(rects[j]), qPrintable(u"width %1: %2 and %3 overlap"_s.arg(width).arg(i).arg(j)));
        }
        if (width >= 2000)
            QCOMPARE(shown, spec.legend.size());
    }
}

void TestChartBasics::legendListsALoneEntryInsteadOfOneMore()
{
    // Four ranks' lines in a narrow chart (a 1024 px window), one entry a row: the fourth read
    // "+1 more", which took the room the entry itself needs.
    using namespace cppl::charts::detail;
    using namespace Qt::StringLiterals;
    const QFont font;
    const QFontMetricsF fm(font);
    const auto theme = cppl::charts::Theme::light();
    const qreal rowH = std::max(fm.height(), theme.markerSize + 2) + 4;
    FrameSpec spec;
    for (int r = 0; r < 5; ++r)
        spec.legend.push_back({u"rank %1 (gpu-node-%1)"_s.arg(r), LegendEntry::Swatch::Line, Qt::black, Qt::SolidLine, {}, Qt::NoBrush});
    const qreal entry = 28 + 5 + fm.horizontalAdvance(spec.legend[0].label) + 16;
    const QRectF area(0, 0, entry * 1.5, 500); // one entry a row
    FrameSpec four = spec;
    four.legend.resize(4);
    const LegendLayout l4 = legendLayout(fm, area, theme, four);
    QCOMPARE(l4.entries.size(), size_t(4));
    QVERIFY(l4.moreText.isEmpty());
    QVERIFY(std::abs(l4.height - 4 * rowH) < 0.01);
    // Five: two would be left over; the legend keeps to three rows and says how many.
    const LegendLayout l5 = legendLayout(fm, area, theme, spec);
    QVERIFY(l5.entries.size() < 4);
    QCOMPARE(l5.moreText, u"+%1 more"_s.arg(5 - l5.entries.size()));
    QVERIFY(l5.height <= 3 * rowH + 0.01);
}

void TestChartBasics::titleWrapsOntoTwoLines()
{
    // The Run page's charts at a 1024 px window: "Global running PPL (exact merge) ± 1 standard…".
    using cppl::charts::detail::titleLines;
    using namespace Qt::StringLiterals;
    QFont f;
    f.setBold(true);
    const QFontMetricsF fm(f);
    const QString title = u"Global running PPL (exact merge) ± 1 standard error"_s;
    const qreal full = fm.horizontalAdvance(title);
    QCOMPARE(titleLines(fm, title, full + 1), QStringList{title});
    const QStringList two = titleLines(fm, title, full * 0.7);
    QCOMPARE(two.size(), 2);
    QCOMPARE(two.join(u' '), title); // every word, none elided
    for (const QString &line : two)
        QVERIFY2(fm.horizontalAdvance(line) <= full * 0.7, qPrintable(line));
    // Narrower still: two lines, the second elided.
    const QStringList narrow = titleLines(fm, title, full * 0.3);
    QCOMPARE(narrow.size(), 2);
    QVERIFY2(narrow[1].endsWith(u'…'), qPrintable(narrow[1]));
    for (const QString &line : narrow)
        QVERIFY2(fm.horizontalAdvance(line) <= full * 0.3, qPrintable(line));
}

void TestChartBasics::narrowTimeAxisGetsTwoTicks()
{
    // A 1024 px window's heat map has ~150 px for 6:12 of time: the ticks that fit the widest
    // label were "5:00" alone, from which no scale can be read. More steps while their labels fit.
    QImage image(10, 10, QImage::Format_ARGB32);
    QPainter painter(&image);
    const QFontMetricsF fm(cppl::charts::detail::tickFont(painter.font()));
    Ticks used;
    for (double length : {120.0, 150.0, 220.0}) {
        const auto ticks = cppl::charts::detail::numericTicks(0.5, 372, ValueFormat::Seconds, false, false, &used)(length, fm);
        QStringList labels;
        for (const auto &t : ticks)
            labels << t.label;
        QVERIFY2(labels.size() >= 2, qPrintable(QStringLiteral("%1 px: %2").arg(length).arg(labels.join(QLatin1Char(' ')))));
        QVERIFY(used.step * length / 371.5 >= fm.horizontalAdvance(QStringLiteral("6:00")) + 8); // labels apart
    }
    // A y axis, and an axis wide enough for its first choice, are as they were.
    const auto wide = cppl::charts::detail::numericTicks(0.5, 372, ValueFormat::Seconds, false, false, &used)(600, fm);
    QVERIFY(wide.size() >= 4);
}

void TestChartBasics::yTitleUsesTheRoomBelowAShortPlot()
{
    // The deviation chart of a 1024 px window under three rows of legend: a plot ~55 px tall read
    // "deviati…". The title may run down beside the x axis's labels; elided only past them.
    using namespace Qt::StringLiterals;
    cppl::charts::detail::FrameSpec spec;
    spec.xTitle = u"time"_s;
    spec.yTitle = u"deviation"_s;
    QImage image(260, 200, QImage::Format_ARGB32);
    QPainter painter(&image);
    const QFontMetricsF fm(painter.font());
    const qreal title = fm.horizontalAdvance(spec.yTitle);
    // The frame's height leaving a plot shorter than the title, but not the axis's labels with it.
    for (qreal h = 200; h > 40; h -= 2) {
        const cppl::charts::detail::Frame frame = cppl::charts::detail::paintFrame(painter, QRectF(0, 0, 260, h), cppl::charts::Theme::light(), spec);
        if (frame.plot.height() >= title)
            continue;
        if (frame.plot.height() + 2 * fm.height() < title)
            break;
        QCOMPARE(frame.yTitle, spec.yTitle);
        return;
    }
    QFAIL("no frame height left a plot shorter than the title");
}

QTEST_MAIN(TestChartBasics)
#include "tst_chart_basics.moc"
