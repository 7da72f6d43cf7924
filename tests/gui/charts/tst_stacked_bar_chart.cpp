// SPDX-License-Identifier: MIT
// StackedBarChart rendered for real (1x, 2x, light, dark) and read back pixel by pixel; bins that
// show their largest category, categories without values, a threshold line and the highlighted bar.
#include "chart_test_helpers.h"
#include "charts/stacked_bar_chart.h"

#include <QSignalSpy>
#include <QTest>

#include <algorithm>
#include <limits>

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
    void largestBinningKeepsTheWorstCategory();
    void categoriesWithoutValuesGetNoBar();
    void referenceLineNamedInTheLegend();
    void highlightedCategoryOutlined();
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

void TestStackedBarChart::largestBinningKeepsTheWorstCategory()
{
    // 1024 ranks at 2 px a bar: each bar shows its rank with the largest total, whole, so one bad
    // rank among ~five is its bar's height; a pick names that rank. Labels stay at round ranks.
    StackedBarChart chart;
    chart.setSegmentNames({QStringLiteral("waiting"), QStringLiteral("transfer")});
    chart.setBinning(BarBinning::Largest);
    chart.setMinBarPitch(2);
    chart.setBinnedAxisTitle(QStringLiteral("rank (each bar: the most of %1 ranks)"));
    std::vector<double> v;
    for (int r = 0; r < 1024; ++r) {
        v.push_back(r == 700 ? 0.15 : 0.01 + 0.001 * (r % 7));
        v.push_back(0.005);
    }
    chart.setValues(v);
    const QImage image = renderToImage(chart, {600, 400}, 1);
    const auto &bars = chart.lastBars();
    QVERIFY(bars.size() < 1024 && bars.size() >= 200);
    const auto it = std::find_if(bars.begin(), bars.end(), [](const auto &b) { return 700 >= b.first && 700 < b.end; });
    QVERIFY(it != bars.end());
    QCOMPARE(it->shown, 700);
    QCOMPARE(it->segments[0], 0.15);
    for (const auto &b : bars) // every bar is one of its ranks, the largest
        for (int r = b.first; r < b.end; ++r)
            QVERIFY(v[size_t(r) * 2] + v[size_t(r) * 2 + 1] <= v[size_t(b.shown) * 2] + v[size_t(b.shown) * 2 + 1]);
    const QRectF plot = chart.lastPlotRect();
    const qreal expected = plot.bottom() - 0.155 / chart.lastYRange().second * plot.height();
    QVERIFY2(std::abs(it->rect.top() - expected) <= 1, qPrintable(QStringLiteral("%1 vs %2").arg(it->rect.top()).arg(expected)));
    const Hit hit = chart.hitTest(QPointF(it->rect.center().x(), plot.bottom() - 2));
    QCOMPARE(hit.shown, 700);
    QVERIFY(hit.text.contains(QStringLiteral("the largest: 700")));
    for (const QString &label : chart.lastXTickLabels())
        QVERIFY2(label.toInt() % 50 == 0, qPrintable(chart.lastXTickLabels().join(QLatin1Char(' '))));
    QVERIFY(chart.lastXTickLabels().size() >= 3);
    QVERIFY(colorVariety(image) > 4);
}

void TestStackedBarChart::categoriesWithoutValuesGetNoBar()
{
    // A category whose values are NaN is not known yet: no bar (not a bar of 0). With none known
    // the chart has nothing to draw: the plot says why and the legend lists nothing.
    StackedBarChart chart;
    chart.setSegmentNames({QStringLiteral("waiting"), QStringLiteral("transfer")});
    chart.setBinning(BarBinning::Largest);
    chart.setEmptyText(QStringLiteral("none known yet"));
    constexpr double nan = std::numeric_limits<double>::quiet_NaN();
    chart.setValues({nan, nan, nan, nan, nan, nan});
    QVERIFY(!chart.hasData());
    (void)renderToImage(chart, {500, 300}, 1);
    QVERIFY(chart.lastLegendLabels().isEmpty());
    QVERIFY(!chart.lastEmptyTextRect().isEmpty());
    QVERIFY(chart.lastPlotRect().adjusted(-1, -1, 1, 1).contains(chart.lastEmptyTextRect()));
    chart.setValues({0.2, 0.1, nan, nan, 0.3, 0.1});
    QVERIFY(chart.hasData());
    (void)renderToImage(chart, {500, 300}, 1);
    QVERIFY(chart.lastEmptyTextRect().isEmpty());
    QCOMPARE(chart.lastLegendLabels(), (QStringList{QStringLiteral("waiting"), QStringLiteral("transfer")}));
    QVERIFY(chart.lastBars()[0].hasValue && !chart.lastBars()[1].hasValue && chart.lastBars()[2].hasValue);
    QVERIFY(!chart.hitTest(chart.lastBars()[1].rect.center() - QPointF(0, 5)).isValid());
}

void TestStackedBarChart::referenceLineNamedInTheLegend()
{
    // A threshold runs dashed across the bars and is named in the legend ("alert threshold 15.0%"),
    // where its label covers no bar; the axis reaches half as far again above it.
    StackedBarChart chart;
    chart.setSegmentNames({QStringLiteral("waiting"), QStringLiteral("transfer")});
    chart.setYAxis({QString(), ValueFormat::Percent, {}, {}, true});
    chart.setValues({0.02, 0.01, 0.03, 0.01, 0.025, 0.005});
    chart.setReferenceLines({{0.15, QStringLiteral("alert threshold"), {}, Qt::DashLine}});
    const QImage image = renderToImage(chart, {500, 300}, 1);
    QCOMPARE(chart.lastLegendLabels(),
             (QStringList{QStringLiteral("waiting"), QStringLiteral("transfer"), QStringLiteral("alert threshold 15.0%")}));
    QVERIFY(chart.lastYRange().second >= 0.225);
    const QRectF plot = chart.lastPlotRect();
    const qreal y = plot.bottom() - 0.15 / chart.lastYRange().second * plot.height();
    int dashes = 0;
    for (qreal x = plot.left() + 1; x < plot.right(); x += 1)
        dashes += colorDistance(pixelAt(image, x, y), chart.theme().reference.rgb()) < 60;
    QVERIFY2(dashes > plot.width() / 4 && dashes < plot.width(), qPrintable(QString::number(dashes)));
}

void TestStackedBarChart::highlightedCategoryOutlined()
{
    // The selected category's bar is outlined and pointed at from above (above its total's label).
    StackedBarChart chart;
    chart.setSegmentNames({QStringLiteral("waiting"), QStringLiteral("transfer")});
    chart.setValues({1, 1, 2, 1, 1, 2});
    const QImage plain = renderToImage(chart, {500, 300}, 1);
    QSignalSpy changed(&chart, &Chart::changed);
    chart.setHighlightedCategory(1);
    chart.setHighlightedCategory(1);
    QCOMPARE(changed.size(), 1);
    const QImage marked = renderToImage(chart, {500, 300}, 1);
    QVERIFY(plain != marked);
    const auto &bar = chart.lastBars()[1];
    int pointer = 0;
    for (qreal y = bar.rect.top() - 40; y < bar.rect.top() - 14; y += 1)
        pointer += colorDistance(pixelAt(marked, bar.rect.center().x(), y), chart.theme().text.rgb()) < 60;
    QVERIFY2(pointer >= 3, qPrintable(QString::number(pointer)));
}

QTEST_MAIN(TestStackedBarChart)
#include "tst_stacked_bar_chart.moc"
