// SPDX-License-Identifier: MIT
// BandChart and HeatMap rendered for real (1x, 2x, light, dark) and read back pixel by pixel.
#include "chart_test_helpers.h"
#include "charts/band_chart.h"
#include "charts/heat_map.h"

#include <QTest>

#include <limits>

using namespace cppl::charts;
using namespace cppl::charts::test;

namespace {

// 101 series with constant values 0..100 over 0..10 s: p5 = 5, median 50, p95 = 95.
std::vector<SeriesData> ladder()
{
    std::vector<SeriesData> out;
    for (int i = 0; i <= 100; ++i) {
        SeriesData s{QStringLiteral("rank %1").arg(i), {}, {}};
        for (int k = 0; k <= 100; ++k) {
            s.x.push_back(k * 0.1);
            s.y.push_back(i);
        }
        out.push_back(std::move(s));
    }
    return out;
}

} // namespace

class TestBandHeatMap : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void variants_data();
    void bandMedianAndExtent();
    void bandMedianAndExtent_data() { variants_data(); }
    void bandHighlightsLabelledAndPickable();
    void suppliedBand();
    void heatMapCellsUseColorMap();
    void heatMapCellsUseColorMap_data() { variants_data(); }
    void heatMapAggregationKeepsExtremeRow();
    void heatMapPickAndNoData();
};

void TestBandHeatMap::variants_data()
{
    addScaleAndThemeRows();
}

void TestBandHeatMap::bandMedianAndExtent()
{
    QFETCH(qreal, dpr);
    QFETCH(bool, dark);
    BandChart chart;
    Theme theme = dark ? Theme::dark() : Theme::light();
    chart.setTheme(theme);
    chart.setTitle(QStringLiteral("spread"));
    chart.setYAxis({QStringLiteral("tok/s"), ValueFormat::Si, 0.0, 100.0, false});
    chart.setSeries(ladder());
    const QImage image = renderToImage(chart, {700, 420}, dpr);
    dump(image, QStringLiteral("band-%1x-%2").arg(dpr).arg(dark));
    QVERIFY(colorVariety(image) > 20);
    const QRectF plot = chart.lastPlotRect();
    QVERIFY(!chart.band().empty());
    for (const BandSample &b : chart.band()) {
        QVERIFY(std::abs(b.median - 50) < 1e-9);
        QVERIFY(std::abs(b.low - 5) < 1e-9 && std::abs(b.high - 95) < 1e-9);
    }
    const qreal x = plot.left() + plot.width() * 0.43; // off the grid lines
    const auto [row, dist] = closestRow(image, x, plot.top(), plot.bottom(), theme.median.rgb());
    QVERIFY2(dist < 40, qPrintable(QStringLiteral("median colour not found: %1").arg(dist)));
    QVERIFY2(std::abs(row - (plot.bottom() - 0.5 * plot.height())) <= 1.5, qPrintable(QString::number(row)));
    // Inside the band (y = 20) the fill shows; above p95 (y = 98) the plot is bare.
    const QRgb bare = theme.plotBackground.rgb();
    QVERIFY(colorDistance(pixelAt(image, x, plot.bottom() - 0.2 * plot.height()), bare) > 15);
    QVERIFY(colorDistance(pixelAt(image, x, plot.bottom() - 0.98 * plot.height()), bare) < 6);
}

void TestBandHeatMap::bandHighlightsLabelledAndPickable()
{
    BandChart chart;
    chart.setYAxis({QStringLiteral("tok/s"), ValueFormat::Si, 0.0, 100.0, false});
    chart.setSeries(ladder());
    SeriesData slow{QStringLiteral("rank 7 (slowest)"), {0, 5, 10}, {2, 2, 2}};
    chart.setHighlights({slow});
    const QImage image = renderToImage(chart, {700, 420}, 2);
    const QRectF plot = chart.lastPlotRect();
    // The name is written right of the plot, in the highlight's colour.
    const QRgb c = chart.theme().seriesStyle(1).color.rgb();
    bool labelled = false;
    for (qreal x = plot.right() + 4; x < 700 && !labelled; x += 0.5)
        for (qreal y = plot.bottom() - 0.02 * plot.height() - 8; y < plot.bottom() - 0.02 * plot.height() + 8 && !labelled; y += 0.5)
            labelled = colorDistance(pixelAt(image, x, y), c) < 80;
    QVERIFY2(labelled, "no label right of the plot at the highlighted series' last value");
    const Hit hit = chart.hitTest(QPointF(plot.left() + plot.width() * 0.5, plot.bottom() - 0.02 * plot.height()));
    QCOMPARE(hit.kind, Hit::Kind::Series);
    QCOMPARE(hit.series, 0);
    QVERIFY(hit.text.contains(QStringLiteral("slowest")));
    const Hit band = chart.hitTest(QPointF(plot.left() + plot.width() * 0.5, plot.bottom() - 0.5 * plot.height()));
    QCOMPARE(band.kind, Hit::Kind::Band);
    QVERIFY(band.text.contains(QStringLiteral("median: 50")));
    QVERIFY(band.text.contains(QStringLiteral("p95: 95")));
}

void TestBandHeatMap::suppliedBand()
{
    BandChart chart;
    chart.setYAxis({QString(), ValueFormat::Plain, 0.0, 10.0, false});
    chart.setBand({{0, 2, 4, 6, 0}, {10, 2, 4, 6, 0}});
    const QImage image = renderToImage(chart, {500, 300}, 1);
    const QRectF plot = chart.lastPlotRect();
    const auto [row, dist] = closestRow(image, plot.center().x(), plot.top(), plot.bottom(), chart.theme().median.rgb());
    QVERIFY(dist < 40);
    QVERIFY(std::abs(row - (plot.bottom() - 0.4 * plot.height())) <= 1.5);
}

void TestBandHeatMap::heatMapCellsUseColorMap()
{
    QFETCH(qreal, dpr);
    QFETCH(bool, dark);
    HeatMap map;
    map.setTheme(dark ? Theme::dark() : Theme::light());
    map.setTitle(QStringLiteral("tok/s by rank"));
    std::vector<float> values;
    for (int i = 0; i < 20; ++i)
        values.push_back(static_cast<float>(i));
    map.setData(4, 5, values);
    map.setColumnRange(0, 50);
    map.setValueAxis({QStringLiteral("tok/s"), ValueFormat::Plain, 0.0, 19.0, false});
    const QImage image = renderToImage(map, {640, 400}, dpr);
    const QRectF plot = map.lastPlotRect();
    for (int r = 0; r < 4; ++r) {
        for (int c = 0; c < 5; ++c) {
            const QPointF centre(plot.left() + (c + 0.5) * plot.width() / 5, plot.top() + (r + 0.5) * plot.height() / 4);
            const QRgb expected = map.colorFor(r * 5 + c);
            QCOMPARE(expected, ColorMap::viridis().map((r * 5 + c) / 19.0));
            QVERIFY2(colorDistance(pixelAt(image, centre.x(), centre.y()), expected) <= 3,
                     qPrintable(QStringLiteral("cell %1,%2").arg(r).arg(c)));
        }
    }
    // The colour bar: its top is the map's top colour, its bottom the map's bottom colour.
    bool top = false, bottom = false;
    for (qreal x = plot.right() + 2; x < 640; x += 0.5) {
        top = top || colorDistance(pixelAt(image, x, plot.top() + 2), ColorMap::viridis().map(1)) < 12;
        bottom = bottom || colorDistance(pixelAt(image, x, plot.bottom() - 2), ColorMap::viridis().map(0)) < 12;
    }
    QVERIFY(top && bottom);
}

void TestBandHeatMap::heatMapAggregationKeepsExtremeRow()
{
    // 3000 rows in a ~300 px plot: one stalled row (0) among rows at 10 stays visible with Min.
    std::vector<float> values(3000 * 4, 10.0f);
    for (int c = 0; c < 4; ++c)
        values[1234 * 4 + static_cast<size_t>(c)] = 0.0f;
    values[0] = 20.0f; // the range is 0..20
    for (Aggregation a : {Aggregation::Min, Aggregation::Mean}) {
        HeatMap map;
        map.setData(3000, 4, values);
        map.setAggregation(a);
        const QImage image = renderToImage(map, {500, 380}, 1);
        const QRectF plot = map.lastPlotRect();
        QVERIFY(plot.height() < 3000);
        const QRgb stalled = map.colorFor(0);
        bool seen = false;
        for (qreal y = plot.top(); y < plot.bottom() && !seen; y += 1)
            seen = colorDistance(pixelAt(image, plot.left() + plot.width() * 0.6, y), stalled) <= 3;
        QCOMPARE(seen, a == Aggregation::Min);
    }
}

void TestBandHeatMap::heatMapPickAndNoData()
{
    HeatMap map;
    std::vector<float> values(1024 * 60);
    for (size_t i = 0; i < values.size(); ++i)
        values[i] = static_cast<float>(i % 97);
    values[517 * 60 + 30] = std::numeric_limits<float>::quiet_NaN();
    map.setData(1024, 60, values);
    map.setColumnRange(0, 600);
    map.setValueAxis({QStringLiteral("tok/s"), ValueFormat::Si, {}, {}, false});
    renderToImage(map, {900, 700}, 2);
    const QRectF plot = map.lastPlotRect();
    const QPointF p(plot.left() + (30 + 0.5) * plot.width() / 60, plot.top() + (517 + 0.5) * plot.height() / 1024);
    const Hit hit = map.hitTest(p);
    QCOMPARE(hit.kind, Hit::Kind::Cell);
    QCOMPARE(hit.row, 517);
    QCOMPARE(hit.column, 30);
    QVERIFY(std::isnan(hit.y));
    QVERIFY(hit.text.contains(QStringLiteral("517")));
    QVERIFY(hit.text.contains(QStringLiteral("no data")));
    QCOMPARE(map.colorFor(std::numeric_limits<double>::quiet_NaN()), map.theme().noData.rgb());
    const Hit other = map.hitTest(QPointF(plot.left() + 0.3, plot.top() + 0.3)); // a row is 0.6 px high
    QCOMPARE(other.row, 0);
    QCOMPARE(other.column, 0);
    QCOMPARE(other.y, 0.0);
    QVERIFY(!map.hitTest(QPointF(plot.right() + 5, plot.center().y())).isValid());
    QCOMPARE(map.valueRange(), std::make_pair(0.0, 96.0));
}

QTEST_MAIN(TestBandHeatMap)
#include "tst_band_heat_map.moc"
