// SPDX-License-Identifier: MIT
// BandChart and HeatMap rendered for real (1x, 2x, light, dark) and read back pixel by pixel; the
// heat map fed live (a column at a time) equal to one fed whole, columns at irregular positions,
// cells without data hatched and listed, row marks and the highlighted row.
#include "chart_test_helpers.h"
#include "charts/band_chart.h"
#include "charts/heat_map.h"

#include <QSet>
#include <QSignalSpy>
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
    void heatMapLiveColumnsEqualAWholeMap();
    void heatMapColumnsAtTheirPositions();
    void heatMapCellsWithoutDataHatched();
    void heatMapMarksAndHighlightedRow();
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

void TestBandHeatMap::heatMapLiveColumnsEqualAWholeMap()
{
    // A live map gains a column at a time (resizeData + setValue); the newest column is also
    // rewritten in place. Only what was written is coloured again, and the image equals a map
    // given the same values at once. Column positions move columns without colouring anything.
    constexpr int rows = 300, columns = 280;
    auto cell = [](int r, int c) { return (r * 7 + c * 13) % 50 == 0 ? std::numeric_limits<float>::quiet_NaN() : float((r * 31 + c) % 97); };
    HeatMap live;
    live.setValueAxis({QStringLiteral("tok/s"), ValueFormat::Si, 0.0, 100.0, false});
    live.setAggregation(Aggregation::Min);
    std::vector<double> positions;
    int builds = 0;
    for (int c = 0; c < columns; ++c) {
        live.resizeData(rows, c + 1);
        for (int r = 0; r < rows; ++r)
            live.setValue(r, c, r % 5 == 0 ? 1.0f : cell(r, c)); // a first guess, written again below
        (void)live.cellImage(120);
        for (int r = 0; r < rows; ++r)
            live.setValue(r, c, cell(r, c));
        positions.push_back(c * 0.2 + (c % 3) * 0.05);
        live.setColumnPositions(positions);
        (void)live.cellImage(120);
        builds = live.fullBuilds();
    }
    // Every cell was coloured with the first column (written, then written again) and once more
    // when the room for columns grew past 256; otherwise only the new and rewritten columns.
    QVERIFY2(builds <= 3, qPrintable(QString::number(builds)));
    std::vector<float> values;
    for (int r = 0; r < rows; ++r)
        for (int c = 0; c < columns; ++c)
            values.push_back(cell(r, c));
    HeatMap whole;
    whole.setValueAxis({QStringLiteral("tok/s"), ValueFormat::Si, 0.0, 100.0, false});
    whole.setAggregation(Aggregation::Min);
    whole.setData(rows, columns, values);
    whole.setColumnPositions(positions);
    QCOMPARE(live.hasCellsWithoutData(), whole.hasCellsWithoutData());
    QVERIFY(live.cellImage(120) == whole.cellImage(120));
    QVERIFY(live.cellImage(37) == whole.cellImage(37)); // other pixel rows: coloured anew, still equal
    QCOMPARE(live.cellImage(37).width(), columns);
    // Shrunk and grown again, the cells that came back are empty, as in a map given them empty.
    live.resizeData(rows, columns - 10);
    live.resizeData(rows, columns);
    for (int r = 0; r < rows; ++r)
        for (int c = columns - 10; c < columns; ++c)
            values[size_t(r) * columns + size_t(c)] = std::numeric_limits<float>::quiet_NaN();
    whole.setData(rows, columns, values);
    QVERIFY(live.cellImage(120) == whole.cellImage(120));
}

void TestBandHeatMap::heatMapColumnsAtTheirPositions()
{
    // Irregular samples (the first seconds of a run): each column is as wide as its samples'
    // spacing, on a linear x axis, so round times get evenly spaced ticks.
    HeatMap map;
    map.setData(1, 4, {10, 20, 30, 40});
    map.setValueAxis({QString(), ValueFormat::Plain, 0.0, 40.0, false});
    map.setColumnPositions({0, 1, 5, 10});
    const QImage image = renderToImage(map, {600, 300}, 1);
    const QRectF plot = map.lastPlotRect();
    auto at = [&](double t) { return pixelAt(image, plot.left() + t / 10 * plot.width(), plot.center().y()); };
    // Column 1 reaches from 0.5 to 3 (halfway to its neighbours), column 2 from 3 to 7.5.
    QVERIFY(colorDistance(at(0.2), map.colorFor(10)) <= 3);
    QVERIFY(colorDistance(at(2.8), map.colorFor(20)) <= 3);
    QVERIFY(colorDistance(at(3.3), map.colorFor(30)) <= 3);
    QVERIFY(colorDistance(at(7.2), map.colorFor(30)) <= 3);
    QVERIFY(colorDistance(at(7.8), map.colorFor(40)) <= 3);
    // The pick finds the column whose x is nearest, and reports it.
    const Hit hit = map.hitTest(QPointF(plot.left() + 0.45 * plot.width(), plot.center().y()));
    QCOMPARE(hit.column, 2);
    QCOMPARE(hit.x, 5.0);
}

void TestBandHeatMap::heatMapCellsWithoutDataHatched()
{
    // NaN cells are not a colour of the scale: hatched no-data grey, and the legend says what they
    // are; a bin of rows with one empty cell is empty too when asked (a row of ranks is "no data"
    // until every one of them has reported).
    std::vector<float> values(4 * 3, 5.0f);
    values[0] = std::numeric_limits<float>::quiet_NaN(); // row 0, column 0
    HeatMap map;
    map.setData(4, 3, values);
    map.setValueAxis({QString(), ValueFormat::Plain, 0.0, 10.0, false});
    map.setAggregation(Aggregation::Min);
    QVERIFY(map.hasCellsWithoutData());
    QCOMPARE(qAlpha(map.cellImage(4).pixel(0, 0)), 0);
    QCOMPARE(qAlpha(map.cellImage(2).pixel(0, 0)), 255); // rows 0-1 in one: row 1's value
    map.setPartialBinsAsNoData(true);
    QCOMPARE(qAlpha(map.cellImage(2).pixel(0, 0)), 0);
    QCOMPARE(qAlpha(map.cellImage(2).pixel(1, 0)), 255);
    map.setNoDataLabel(QStringLiteral("no data yet"));
    const QImage image = renderToImage(map, {500, 400}, 1);
    QCOMPARE(map.lastLegendLabels(), QStringList{QStringLiteral("no data yet")});
    const QRectF plot = map.lastPlotRect();
    // Across the empty cell's middle: both hatch colours, neither is the scale's colour for 5.
    QSet<QRgb> seen;
    for (qreal x = plot.left() + 4; x < plot.left() + plot.width() / 3 - 4; x += 1)
        seen.insert(pixelAt(image, x, plot.top() + plot.height() / 8));
    QVERIFY2(seen.size() >= 2, "no hatching");
    for (const QRgb c : seen)
        QVERIFY(colorDistance(c, map.colorFor(5)) > 30);
    map.setValue(0, 0, 4.0f);
    map.notifyChanged();
    QVERIFY(!map.hasCellsWithoutData());
    (void)renderToImage(map, {500, 400}, 1);
    QVERIFY(map.lastLegendLabels().isEmpty());
}

void TestBandHeatMap::heatMapMarksAndHighlightedRow()
{
    // A mark is a symbol in the strip right of the plot at its row, in the theme's alert colour;
    // the highlighted row is outlined and its label leads the row labels.
    HeatMap map;
    map.setData(8, 10, std::vector<float>(80, 3.0f));
    map.setValueAxis({QString(), ValueFormat::Plain, 0.0, 10.0, false});
    const QImage plain = renderToImage(map, {500, 400}, 2);
    std::vector<QChar> marks(8);
    marks[5] = QChar(0x2717); // ✗
    map.setRowMarks(marks);
    const QImage marked = renderToImage(map, {500, 400}, 2);
    const QRectF plot = map.lastPlotRect();
    const QRgb alert = map.theme().alert.rgb();
    auto inkNear = [&](const QImage &image, qreal y0, qreal y1) {
        int ink = 0;
        for (qreal y = y0; y < y1; y += 0.5)
            for (qreal x = plot.right() + 2; x < plot.right() + 16; x += 0.5)
                ink += colorDistance(pixelAt(image, x, y), alert) < 60;
        return ink;
    };
    const qreal rowH = plot.height() / 8;
    QVERIFY(inkNear(marked, plot.top() + 5 * rowH, plot.top() + 6 * rowH) > 4);
    QCOMPARE(inkNear(marked, plot.top(), plot.top() + 4 * rowH), 0);
    QVERIFY(plain != marked);
    QSignalSpy changed(&map, &Chart::changed);
    map.setHighlightedRow(2);
    map.setHighlightedRow(2); // the same again: no repaint
    QCOMPARE(changed.size(), 1);
    const QImage highlighted = renderToImage(map, {500, 400}, 2);
    // The outline runs just outside the plot's left edge along the row (the plot as laid out now:
    // the label "▶ 2" is wider than the others).
    const QRectF now = map.lastPlotRect();
    const QRgb ink = map.theme().text.rgb();
    int outline = 0;
    for (qreal y = now.top() + 2 * rowH; y < now.top() + 3 * rowH; y += 0.5)
        outline += colorDistance(pixelAt(highlighted, now.left() - 0.5, y), ink) < 60;
    QVERIFY2(outline > 4, qPrintable(QString::number(outline)));
    QCOMPARE(map.hitTest(QPointF(now.center().x(), now.top() + 2.5 * rowH)).row, 2);
}

QTEST_MAIN(TestBandHeatMap)
#include "tst_band_heat_map.moc"
