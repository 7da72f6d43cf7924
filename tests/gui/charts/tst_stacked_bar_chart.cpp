// SPDX-License-Identifier: MIT
// StackedBarChart rendered for real (1x, 2x, light, dark) and read back pixel by pixel.
#include "chart_test_helpers.h"
#include "charts/stacked_bar_chart.h"

#include <QSignalSpy>
#include <QTest>

using namespace cppl::charts;
using namespace cppl::charts::test;

class TestStackedBarChart : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void heightsProportional_data();
    void heightsProportional();
    void hatchTellsSegmentsApartInGreyscale();
    void fewBarsCarryValueLabels();
    void manyBarsAggregateWithRange();
    void viewRangeScrolls();
    void pickReturnsCategories();
};

void TestStackedBarChart::heightsProportional_data()
{
    addScaleAndThemeRows();
}

void TestStackedBarChart::heightsProportional()
{
    QFETCH(qreal, dpr);
    QFETCH(bool, dark);
    // 40 bars, totals 1..40 (segments 0.25 / 0.75 of it): too narrow for value labels.
    StackedBarChart chart;
    chart.setTheme(dark ? Theme::dark() : Theme::light());
    chart.setSegmentNames({QStringLiteral("waiting"), QStringLiteral("transfer")});
    std::vector<double> v;
    for (int i = 1; i <= 40; ++i) {
        v.push_back(0.25 * i);
        v.push_back(0.75 * i);
    }
    chart.setValues(v);
    QCOMPARE(chart.categoryCount(), 40);
    QCOMPARE(chart.value(3, 1), 3.0);
    const QImage image = renderToImage(chart, {800, 400}, dpr);
    QVERIFY(colorVariety(image) > 10);
    const QRectF plot = chart.lastPlotRect();
    const auto [y0, y1] = chart.lastYRange();
    QCOMPARE(y0, 0.0);
    QCOMPARE(chart.lastBars().size(), size_t{40});
    const QRgb bare = chart.theme().plotBackground.rgb();
    const QRgb grid = chart.theme().grid.rgb();
    for (size_t i : {size_t{0}, size_t{9}, size_t{19}, size_t{39}}) {
        const auto &bar = chart.lastBars()[i];
        // Scan the bar's centre column from the plot's top for the first pixel that is neither
        // the plot background nor a grid line: the top of the stack.
        const qreal x = bar.rect.center().x();
        qreal top = -1;
        for (qreal y = plot.top() + 1; y < plot.bottom(); y += 0.5 / dpr) {
            const QRgb p = pixelAt(image, x, y);
            if (colorDistance(p, bare) > 30 && colorDistance(p, grid) > 30) {
                top = y;
                break;
            }
        }
        const double total = static_cast<double>(i + 1);
        const qreal expected = plot.bottom() - total / y1 * plot.height();
        QVERIFY2(std::abs(top - expected) <= 1.5, qPrintable(QStringLiteral("bar %1 top %2, expected %3").arg(i).arg(top).arg(expected)));
    }
}

void TestStackedBarChart::hatchTellsSegmentsApartInGreyscale()
{
    StackedBarChart chart;
    chart.setSegmentNames({QStringLiteral("waiting"), QStringLiteral("transfer")});
    chart.setValues({5, 5, 5, 5});
    const QImage image = renderToImage(chart, {400, 400}, 1).convertToFormat(QImage::Format_Grayscale8);
    // Strips near each segment's outer edge, clear of the value labels at the segments' centres.
    const auto &bar = chart.lastBars()[0];
    const QRectF seg1(bar.rect.left() + 4, bar.rect.top() + 4, bar.rect.width() - 8, bar.rect.height() * 0.12);
    const QRectF seg0(bar.rect.left() + 4, bar.rect.bottom() - 4 - bar.rect.height() * 0.12, bar.rect.width() - 8,
                      bar.rect.height() * 0.12);
    auto levels = [&](const QRectF &r) {
        QSet<int> s;
        for (int y = static_cast<int>(r.top()); y < r.bottom(); ++y)
            for (int x = static_cast<int>(r.left()); x < r.right(); ++x)
                s.insert(qGray(image.pixel(x, y)));
        return s.size();
    };
    QCOMPARE(levels(seg0), 1);        // plain fill
    QVERIFY(levels(seg1) >= 2);       // hatched
    QVERIFY(segmentPattern(0) == Qt::NoBrush && segmentPattern(1) != Qt::NoBrush);
}

void TestStackedBarChart::fewBarsCarryValueLabels()
{
    StackedBarChart chart;
    chart.setSegmentNames({QStringLiteral("waiting"), QStringLiteral("transfer")});
    chart.setYAxis({QStringLiteral("share"), ValueFormat::Percent, {}, {}, true});
    chart.setValues({0.2, 0.1, 0.05, 0.05});
    const QImage image = renderToImage(chart, {600, 400}, 1);
    const auto &bar = chart.lastBars()[0];
    // The total's label sits just above the bar: text pixels there, bare plot above a bar without.
    int ink = 0;
    for (qreal y = bar.rect.top() - 14; y < bar.rect.top() - 1; y += 1)
        for (qreal x = bar.rect.left(); x < bar.rect.right(); x += 1)
            ink += colorDistance(pixelAt(image, x, y), chart.theme().text.rgb()) < 200 ? 1 : 0;
    QVERIFY2(ink > 10, "no value label above the bar");
}

void TestStackedBarChart::manyBarsAggregateWithRange()
{
    // 1024 ranks in ~560 px with 4 px pitch: bins of 8; rank 700 alone is at 10, the rest at 1.
    StackedBarChart chart;
    chart.setSegmentNames({QStringLiteral("waiting"), QStringLiteral("transfer")});
    std::vector<double> v;
    for (int r = 0; r < 1024; ++r) {
        v.push_back(r == 700 ? 9.5 : 0.5);
        v.push_back(0.5);
    }
    chart.setValues(v);
    const QImage image = renderToImage(chart, {600, 400}, 2);
    const auto &bars = chart.lastBars();
    QVERIFY(bars.size() < 1024 && bars.size() >= 100);
    int covered = 0;
    const StackedBarChart::Bar *withRank700 = nullptr;
    for (const auto &b : bars) {
        covered += b.end - b.first;
        if (700 >= b.first && 700 < b.end)
            withRank700 = &b;
    }
    QCOMPARE(covered, 1024);
    QVERIFY(withRank700);
    QCOMPARE(withRank700->maxTotal, 10.0);
    QCOMPARE(withRank700->minTotal, 1.0);
    // The range line reaches the max total: ink at y = 10 above that bin, none above the others.
    const QRectF plot = chart.lastPlotRect();
    const qreal y10 = plot.bottom() - 10.0 / chart.lastYRange().second * plot.height();
    QVERIFY(colorDistance(pixelAt(image, withRank700->rect.center().x(), y10 + 1), chart.theme().plotBackground.rgb()) > 60);
    QVERIFY(colorDistance(pixelAt(image, bars.front().rect.center().x(), y10 + 1), chart.theme().plotBackground.rgb()) < 30);
}

void TestStackedBarChart::viewRangeScrolls()
{
    StackedBarChart chart;
    std::vector<double> v(1024);
    for (size_t i = 0; i < v.size(); ++i)
        v[i] = static_cast<double>(i);
    chart.setValues(v);
    chart.setViewRange(100, 20);
    renderToImage(chart, {600, 400}, 1);
    QCOMPARE(chart.lastBars().size(), size_t{20});
    QCOMPARE(chart.lastBars().front().first, 100);
    QCOMPARE(chart.lastBars().back().first, 119);
    QCOMPARE(chart.lastYRange().second, 120.0); // the view's own max (119), widened to a nice step
    QSignalSpy changed(&chart, &Chart::changed);
    QVERIFY(chart.scrollBy(3)); // 3 steps of a tenth of 20 categories
    QCOMPARE(chart.viewRange().first, 106);
    QCOMPARE(changed.size(), 1);
    QVERIFY(chart.scrollBy(-1000)); // clamped to the start
    QCOMPARE(chart.viewRange().first, 0);
    QVERIFY(!chart.scrollBy(-1));
    QVERIFY(chart.scrollBy(1000));
    QCOMPARE(chart.viewRange().first, 1024 - 20);
    renderToImage(chart, {600, 400}, 1);
    QCOMPARE(chart.lastBars().back().first, 1023);
    chart.setViewRange(0, 0);
    QVERIFY(!chart.scrollBy(1)); // everything shown: nothing to scroll
}

void TestStackedBarChart::pickReturnsCategories()
{
    StackedBarChart chart;
    chart.setSegmentNames({QStringLiteral("waiting"), QStringLiteral("transfer")});
    chart.setCategoryLabels({QStringLiteral("r0"), QStringLiteral("r1"), QStringLiteral("r2")});
    chart.setValues({1, 2, 3, 4, 5, 6});
    renderToImage(chart, {600, 400}, 1);
    const auto &bar = chart.lastBars()[1];
    const Hit hit = chart.hitTest(bar.rect.center());
    QCOMPARE(hit.kind, Hit::Kind::Bar);
    QCOMPARE(hit.column, 1);
    QCOMPARE(hit.columnEnd, 2);
    QCOMPARE(hit.y, 7.0);
    QVERIFY(hit.text.contains(QStringLiteral("r1")));
    QVERIFY(hit.text.contains(QStringLiteral("transfer: 4")));
}

QTEST_MAIN(TestStackedBarChart)
#include "tst_stacked_bar_chart.moc"
