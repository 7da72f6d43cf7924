// SPDX-License-Identifier: MIT
// TimeSeriesChart rendered for real at DPR 1 and 2, light and dark, and read back pixel by pixel.
#include "chart_test_helpers.h"
#include "charts/time_series_chart.h"

#include <QTest>

using namespace cppl::charts;
using namespace cppl::charts::test;

namespace {

SeriesData constant(const QString &name, double value, int n = 200)
{
    SeriesData s{name, {}, {}};
    for (int i = 0; i < n; ++i) {
        s.x.push_back(i * 0.1);
        s.y.push_back(value);
    }
    return s;
}

AxisSpec fixedY(double lo, double hi)
{
    AxisSpec a{QStringLiteral("tok/s"), ValueFormat::Si, lo, hi, false};
    return a;
}

} // namespace

class TestTimeSeriesChart : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void renders_data();
    void renders();
    void constantSeriesAtExpectedRow_data() { renders_data(); }
    void constantSeriesAtExpectedRow();
    void singleSpikeSurvivesDecimation_data();
    void singleSpikeSurvivesDecimation();
    void seriesDifferInGreyscale();
    void referenceLineDrawnAtItsValue();
    void referenceLabelLeavesTheDataVisible();
    void pickReturnsNearestSeries();
    void denseModeShowsHighlightedSeries();
    void appendAndRangeFollowData();
    void rangeTakesInTheEdgeSamples();
};

void TestTimeSeriesChart::renders_data()
{
    addScaleAndThemeRows();
}

void TestTimeSeriesChart::renders()
{
    QFETCH(qreal, dpr);
    QFETCH(bool, dark);
    TimeSeriesChart chart;
    chart.setTheme(dark ? Theme::dark() : Theme::light());
    chart.setTitle(QStringLiteral("Tokens per second"));
    chart.setSeries({constant(QStringLiteral("rank 0"), 100), constant(QStringLiteral("rank 1"), 300)});
    const QImage image = renderToImage(chart, {640, 360}, dpr);
    QCOMPARE(image.size(), QSize(640, 360) * dpr);
    QCOMPARE(image.devicePixelRatio(), dpr);
    QVERIFY2(colorVariety(image) > 20, "a blank or near-blank chart");
    // Background is the theme's.
    QCOMPARE(QColor(image.pixel(1, 1)), chart.theme().background);
    // The legend (above the plot) holds both series' colours.
    const QRectF plot = chart.lastPlotRect();
    for (int s = 0; s < 2; ++s) {
        const QRgb c = chart.theme().seriesStyle(s).color.rgb();
        bool found = false;
        for (qreal y = 0; y < plot.top() && !found; y += 0.5)
            for (qreal x = 0; x < 640 && !found; x += 0.5)
                found = colorDistance(pixelAt(image, x, y), c) < 40;
        QVERIFY2(found, qPrintable(QStringLiteral("legend entry of series %1 not found above the plot").arg(s)));
    }
}

void TestTimeSeriesChart::constantSeriesAtExpectedRow()
{
    QFETCH(qreal, dpr);
    QFETCH(bool, dark);
    TimeSeriesChart chart;
    chart.setTheme(dark ? Theme::dark() : Theme::light());
    chart.setYAxis(fixedY(0, 100));
    chart.setSeries({constant(QStringLiteral("a"), 25), constant(QStringLiteral("b"), 75)});
    const QImage image = renderToImage(chart, {600, 400}, dpr);
    const QRectF plot = chart.lastPlotRect();
    QVERIFY(plot.width() > 300 && plot.height() > 200);
    // Between markers (they sit at left + 20 + k*100 + 23*i).
    const qreal x = plot.left() + 70;
    for (int s = 0; s < 2; ++s) {
        const double v = s == 0 ? 25 : 75;
        const qreal expected = plot.bottom() - v / 100 * plot.height();
        const auto [row, dist] = closestRow(image, x, plot.top(), plot.bottom(), chart.theme().seriesStyle(s).color.rgb());
        QVERIFY2(dist < 150, qPrintable(QStringLiteral("series %1: colour not found (distance %2)").arg(s).arg(dist)));
        QVERIFY2(std::abs(row - expected) <= 1.5, qPrintable(QStringLiteral("series %1 at y %2, expected %3").arg(s).arg(row).arg(expected)));
    }
}

void TestTimeSeriesChart::singleSpikeSurvivesDecimation_data()
{
    QTest::addColumn<int>("seriesCount");
    QTest::addRow("one series, styled lines") << 1;
    QTest::addRow("200 series, density mode") << 200;
}

void TestTimeSeriesChart::singleSpikeSurvivesDecimation()
{
    QFETCH(int, seriesCount);
    std::vector<SeriesData> series;
    for (int i = 0; i < seriesCount; ++i)
        series.push_back(constant(QStringLiteral("s%1").arg(i), 10 + (i % 5), 6000)); // 10 min at 10 Hz
    series[0].y[3333] = 90; // one sample in 6000, ~15 samples per pixel column
    TimeSeriesChart chart;
    chart.setYAxis(fixedY(0, 100));
    chart.setSeries(series);
    const QImage image = renderToImage(chart, {500, 300}, 1);
    dump(image, QStringLiteral("spike-%1").arg(seriesCount));
    const QRectF plot = chart.lastPlotRect();
    const qreal xSpike = plot.left() + 333.3 / 599.9 * plot.width();
    const qreal ySpike = plot.bottom() - 0.9 * plot.height();
    const QRgb bg = chart.theme().plotBackground.rgb();
    bool inked = false;
    for (qreal dx = -1.5; dx <= 1.5 && !inked; dx += 0.5)
        for (qreal dy = -2; dy <= 2 && !inked; dy += 0.5)
            inked = colorDistance(pixelAt(image, xSpike + dx, ySpike + dy), bg) > 60;
    QVERIFY2(inked, "the one-sample spike vanished");
    // And nothing else reaches that height elsewhere.
    const qreal xElse = plot.left() + 0.23 * plot.width(); // off the grid lines
    QVERIFY(colorDistance(pixelAt(image, xElse, ySpike), bg) < 20);
}

void TestTimeSeriesChart::seriesDifferInGreyscale()
{
    // Series 0 and 1 with the same data: in greyscale they must still differ (dash pattern), not only by hue.
    TimeSeriesChart chart;
    chart.setYAxis(fixedY(0, 100));
    chart.setSeries({constant(QStringLiteral("a"), 30), constant(QStringLiteral("b"), 70)});
    const QImage image = renderToImage(chart, {600, 400}, 1).convertToFormat(QImage::Format_Grayscale8);
    const QRectF plot = chart.lastPlotRect();
    const int bg = grey(chart.theme().plotBackground.rgb());
    auto inkFraction = [&](double v) {
        const qreal y = plot.bottom() - v / 100 * plot.height();
        int ink = 0, total = 0;
        for (qreal x = plot.left() + 2; x < plot.right() - 2; x += 1) {
            ++total;
            bool any = false;
            for (qreal dy = -1; dy <= 1; dy += 0.5)
                any = any || std::abs(qGray(image.pixel(static_cast<int>(x), static_cast<int>(y + dy))) - bg) > 40;
            ink += any ? 1 : 0;
        }
        return double(ink) / total;
    };
    const double solid = inkFraction(30), dashed = inkFraction(70);
    QVERIFY2(solid > 0.95, qPrintable(QStringLiteral("series 0 should be solid: %1").arg(solid)));
    QVERIFY2(dashed < 0.85, qPrintable(QStringLiteral("series 1 should be dashed: %1").arg(dashed)));
}

void TestTimeSeriesChart::referenceLineDrawnAtItsValue()
{
    TimeSeriesChart chart;
    chart.setYAxis(fixedY(0, 100));
    chart.setSeries({constant(QStringLiteral("a"), 20)});
    Theme theme = Theme::light();
    theme.reference = QColor(255, 0, 0);
    chart.setTheme(theme);
    chart.setReferenceLines({{60, QStringLiteral("threshold"), {}, Qt::SolidLine}});
    const QImage image = renderToImage(chart, {600, 400}, 2);
    const QRectF plot = chart.lastPlotRect();
    const auto [row, dist] = closestRow(image, plot.left() + 50, plot.top(), plot.bottom(), qRgb(255, 0, 0));
    QVERIFY(dist < 30);
    QVERIFY(std::abs(row - (plot.bottom() - 0.6 * plot.height())) <= 1.0);
}

void TestTimeSeriesChart::referenceLabelLeavesTheDataVisible()
{
    // Compare's efficiency chart: measured and projected efficiency fall from 100% onto the 75%
    // threshold at the largest run, where the threshold's label sat over them (right, above).
    TimeSeriesChart chart;
    chart.setYAxis(fixedY(0, 1));
    SeriesData falling{QStringLiteral("efficiency"), {0, 2, 4, 6, 8, 10}, {1.0, 0.97, 0.93, 0.88, 0.82, 0.77}};
    chart.setSeries({falling});
    chart.setReferenceLines({{0.75, QStringLiteral("threshold"), {}, Qt::DotLine}});
    for (const qreal dpr : {qreal(1), qreal(2)}) {
        renderToImage(chart, {500, 300}, dpr);
        const QRectF plot = chart.lastPlotRect();
        const qreal line = plot.bottom() - 0.75 * plot.height();
        QCOMPARE(chart.lastReferenceLabels().size(), std::size_t(1));
        const QRectF label = chart.lastReferenceLabels().front();
        QVERIFY2(plot.contains(label), qPrintable(QStringLiteral("label %1,%2 %3x%4").arg(label.x()).arg(label.y()).arg(label.width()).arg(label.height())));
        // Not over the line at any x the label spans (the line is sampled every pixel).
        for (qreal x = label.left(); x <= label.right(); x += 1) {
            const double v = (x - plot.left()) / plot.width() * 10;
            const auto k = std::min<std::size_t>(std::size_t(v / 2), 4);
            const double y = falling.y[k] + (falling.y[k + 1] - falling.y[k]) * (v - falling.x[k]) / 2;
            const qreal py = plot.bottom() - y * plot.height();
            QVERIFY2(py < label.top() - 2 || py > label.bottom() + 2,
                     qPrintable(QStringLiteral("the line at x %1 (y %2) under the label %3..%4").arg(x).arg(py).arg(label.top()).arg(label.bottom())));
        }
        // Still beside its own line: just above or below it.
        QVERIFY(std::abs(label.bottom() - line) <= 3 || std::abs(label.top() - line) <= 3);
        // Here, below the line at the right end is free: a reader looks there first.
        QVERIFY2(label.right() > plot.center().x(), qPrintable(QString::number(label.left())));
    }

    // A line far from the threshold leaves the label where it always was: right, above the line.
    chart.setSeries({constant(QStringLiteral("flat"), 0.2)});
    renderToImage(chart, {500, 300}, 1);
    const QRectF plot = chart.lastPlotRect();
    const QRectF label = chart.lastReferenceLabels().front();
    QVERIFY(label.right() > plot.right() - 5);
    QVERIFY(std::abs(label.bottom() - (plot.bottom() - 0.75 * plot.height())) <= 3);

    // Data on every side of the label (lines through all four places): right, above.
    chart.setSeries({constant(QStringLiteral("over"), 0.77), constant(QStringLiteral("under"), 0.73)});
    renderToImage(chart, {500, 300}, 1);
    QVERIFY(chart.lastReferenceLabels().front().right() > chart.lastPlotRect().right() - 5);
    QVERIFY(chart.lastReferenceLabels().front().bottom() <= chart.lastPlotRect().bottom() - 0.75 * chart.lastPlotRect().height() + 3);
}

void TestTimeSeriesChart::pickReturnsNearestSeries()
{
    TimeSeriesChart chart;
    chart.setYAxis(fixedY(0, 100));
    chart.setSeries({constant(QStringLiteral("rank 0"), 20), constant(QStringLiteral("rank 1"), 50),
                     constant(QStringLiteral("rank 2"), 80)});
    renderToImage(chart, {600, 400}, 1);
    const QRectF plot = chart.lastPlotRect();
    const Hit hit = chart.hitTest(QPointF(plot.center().x(), plot.bottom() - 0.5 * plot.height() + 3));
    QCOMPARE(hit.kind, Hit::Kind::Series);
    QCOMPARE(hit.series, 1);
    QCOMPARE(hit.y, 50.0);
    QVERIFY(hit.text.contains(QStringLiteral("rank 1")));
    QVERIFY(hit.text.contains(QStringLiteral("50")));
    // Far from every line, and outside the plot: nothing.
    QVERIFY(!chart.hitTest(QPointF(plot.center().x(), plot.bottom() - 0.35 * plot.height())).isValid());
    QVERIFY(!chart.hitTest(QPointF(2, 2)).isValid());
}

void TestTimeSeriesChart::denseModeShowsHighlightedSeries()
{
    std::vector<SeriesData> series;
    for (int i = 0; i < 64; ++i)
        series.push_back(constant(QStringLiteral("rank %1").arg(i), 20 + i * 0.2));
    series[40] = constant(QStringLiteral("rank 40"), 80);
    TimeSeriesChart chart;
    chart.setYAxis(fixedY(0, 100));
    chart.setSeries(series);
    chart.setHighlightedSeries(40);
    for (qreal dpr : {1.0, 2.0}) {
        const QImage image = renderToImage(chart, {600, 400}, dpr);
        dump(image, QStringLiteral("dense-%1x").arg(dpr));
        const QRectF plot = chart.lastPlotRect();
        // The highlighted series is a line in the second series colour at its value.
        const auto [row, dist] = closestRow(image, plot.left() + 70, plot.top(), plot.bottom(),
                                            chart.theme().seriesStyle(1).color.rgb());
        QVERIFY(dist < 150);
        QVERIFY(std::abs(row - (plot.bottom() - 0.8 * plot.height())) <= 2);
        // The other 63 show as a shade of the first colour around 20..32.6.
        // (series are 0.6 px apart: at 2x some device rows fall between two of them)
        int shaded = 0;
        for (qreal dy = -2; dy <= 2; dy += 0.5)
            shaded += colorDistance(pixelAt(image, plot.left() + 70, plot.bottom() - 0.25 * plot.height() + dy),
                                    chart.theme().plotBackground.rgb()) > 40;
        QVERIFY(shaded >= 4);
        QVERIFY(colorDistance(pixelAt(image, plot.left() + 70, plot.bottom() - 0.55 * plot.height()), // off the grid
                              chart.theme().plotBackground.rgb()) < 20);
    }
    QVERIFY(chart.hitTest(QPointF(chart.lastPlotRect().left() + 70,
                                  chart.lastPlotRect().bottom() - 0.8 * chart.lastPlotRect().height())).series == 40);
}

void TestTimeSeriesChart::appendAndRangeFollowData()
{
    TimeSeriesChart chart;
    const int s = chart.addSeries(QStringLiteral("live"));
    int changes = 0;
    connect(&chart, &Chart::changed, this, [&] { ++changes; });
    for (int i = 0; i < 100; ++i)
        chart.appendPoint(s, i, 1000 + i * 10);
    QCOMPARE(changes, 0); // batches notify once
    chart.notifyChanged();
    QCOMPARE(changes, 1);
    renderToImage(chart, {600, 400}, 1);
    const auto [lo, hi] = chart.lastYRange();
    QVERIFY(lo <= 1000 && lo > 500);
    QVERIFY(hi >= 1990 && hi < 2500);
    chart.appendPoint(s, 100, 5000);
    renderToImage(chart, {600, 400}, 1);
    QVERIFY(chart.lastYRange().second >= 5000); // the cache saw the appended point
}

void TestTimeSeriesChart::rangeTakesInTheEdgeSamples()
{
    // The Run page's live charts end at their newest sample. Decimated points keep x as a float, and
    // a float can round above the double it came from (12.3 -> 12.300000190...): the newest sample
    // then fell outside [x0, x1] when the y range was measured, and a line leaving the range there
    // was clipped instead of widening it. Likewise the first sample at x0.
    for (const double last : {12.3, 0.1, 372.2}) {
        QVERIFY2(double(float(last)) > last, "the case needs a float that rounds up");
        TimeSeriesChart chart;
        SeriesData s{QStringLiteral("rank 1"), {}, {}};
        for (double x = 0; x < last - 0.25; x += 0.5) {
            s.x.push_back(x);
            s.y.push_back(0.01);
        }
        s.x.push_back(last);
        s.y.push_back(0.2); // the newest sample leaves the range of the others
        chart.setYAxis({QStringLiteral("deviation"), ValueFormat::Percent, {}, {}, true});
        chart.setSeries({s});
        renderToImage(chart, {600, 400}, 1);
        QVERIFY2(chart.lastYRange().second >= 0.2, qPrintable(QStringLiteral("%1: up to %2").arg(last).arg(chart.lastYRange().second)));
    }
    // Falling out of the range at the newest sample, too.
    TimeSeriesChart chart;
    chart.setSeries({SeriesData{QStringLiteral("a"), {0, 5, 12.3}, {0.01, 0.02, -0.4}}});
    renderToImage(chart, {600, 400}, 1);
    QVERIFY2(chart.lastYRange().first <= -0.4, qPrintable(QString::number(chart.lastYRange().first)));
}

QTEST_MAIN(TestTimeSeriesChart)
#include "tst_time_series_chart.moc"
