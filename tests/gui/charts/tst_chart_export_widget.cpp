// SPDX-License-Identifier: MIT
// Export (PNG via QImage, SVG, PDF, files and their errors) and ChartWidget (coalesced repaints,
// the first change joining the pending paint pass, hover, pick, tooltips, palette) through real
// events on the offscreen platform; a chart's empty text inside its plot.
#include "chart_test_helpers.h"
#include "charts/chart_widget.h"
#include "charts/heat_map.h"
#include "charts/stacked_bar_chart.h"
#include "charts/time_series_chart.h"
#include "test_verify.h"

#include <cppl/errors.h>

#include <QApplication>
#include <QFile>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QToolTip>
#include <QTest>
#include <QWheelEvent>
#include <QXmlStreamReader>

using namespace cppl::charts;
using namespace cppl::charts::test;

namespace {

std::unique_ptr<TimeSeriesChart> sampleChart()
{
    auto chart = std::make_unique<TimeSeriesChart>();
    chart->setTitle(QStringLiteral("Export sample"));
    chart->setYAxis({QStringLiteral("PPL"), ValueFormat::Plain, 0.0, 10.0, false});
    std::vector<SeriesData> series;
    for (int s = 0; s < 3; ++s) {
        SeriesData d{QStringLiteral("rank %1").arg(s), {}, {}};
        for (int i = 0; i < 100; ++i) {
            d.x.push_back(i);
            d.y.push_back(2 + 3 * s);
        }
        series.push_back(d);
    }
    chart->setSeries(series);
    return chart;
}

} // namespace

class TestChartExportWidget : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void svgIsXmlWithPaths();
    void pdfHasPages();
    void filesWrittenAndErrorsNamed();
    void repaintsCoalesced();
    void hoverAndPick();
    void followsPalette();
    void wheelScrollsBars();
    void firstChangeJoinsThePendingPass();
    void tooltipAwayFromTheData();
    void emptyTextInsideThePlot();
};

void TestChartExportWidget::svgIsXmlWithPaths()
{
    const auto chart = sampleChart();
    const QByteArray svg = renderToSvg(*chart, {640, 360});
    QXmlStreamReader xml(svg);
    int paths = 0, texts = 0;
    bool root = false;
    while (!xml.atEnd()) {
        if (xml.readNext() == QXmlStreamReader::StartElement) {
            if (xml.name() == QLatin1String("svg"))
                root = true;
            paths += xml.name() == QLatin1String("path") || xml.name() == QLatin1String("polyline") ? 1 : 0;
            texts += xml.name() == QLatin1String("text") ? 1 : 0;
        }
    }
    CPPL_VERIFY2(!xml.hasError(), qPrintable(xml.errorString()));
    QVERIFY(root);
    CPPL_VERIFY2(paths > 5, qPrintable(QString::number(paths)));
    QVERIFY(texts > 5); // labels stay text
    QVERIFY(svg.contains("Export sample"));
}

void TestChartExportWidget::pdfHasPages()
{
    HeatMap map;
    map.setData(2, 2, {1, 2, 3, 4});
    for (const QByteArray &pdf : {renderToPdf(*sampleChart(), {640, 360}), renderToPdf(map, {640, 360})}) {
        QVERIFY(pdf.startsWith("%PDF-"));
        QVERIFY(pdf.contains("/Type /Page") || pdf.contains("/Type/Page"));
        QVERIFY(pdf.contains("/Count 1"));
        QVERIFY(pdf.trimmed().endsWith("%%EOF"));
        QVERIFY(pdf.size() > 1000);
    }
}

void TestChartExportWidget::filesWrittenAndErrorsNamed()
{
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const auto chart = sampleChart();
    renderToSvgFile(*chart, dir.filePath(QStringLiteral("c.svg")), {400, 300});
    renderToPdfFile(*chart, dir.filePath(QStringLiteral("c.pdf")), {400, 300});
    QFile svg(dir.filePath(QStringLiteral("c.svg")));
    QVERIFY(svg.open(QIODevice::ReadOnly));
    QVERIFY(svg.readAll().contains("<svg"));
    QFile pdf(dir.filePath(QStringLiteral("c.pdf")));
    QVERIFY(pdf.open(QIODevice::ReadOnly));
    QVERIFY(pdf.read(5) == "%PDF-");
    const QString bad = dir.filePath(QStringLiteral("missing/folder/c.svg"));
    try {
        renderToSvgFile(*chart, bad, {400, 300});
        QFAIL("writing into a missing folder did not throw");
    } catch (const cppl::IoError &e) {
        CPPL_VERIFY2(QString::fromStdString(e.what()).contains(bad), e.what());
    }
}

void TestChartExportWidget::repaintsCoalesced()
{
    ChartWidget widget(sampleChart().release());
    widget.resize(500, 300);
    widget.show();
    QVERIFY(QTest::qWaitForWindowExposed(&widget));
    QTRY_VERIFY(widget.paintCount() >= 1);
    auto *chart = static_cast<TimeSeriesChart *>(widget.chart());
    QVERIFY(chart->parent() == &widget); // the widget owns a parentless chart
    const int before = widget.paintCount();
    // 200 changes over ~400 ms: one repaint per 40 ms at most (allowing timer slack), at least one.
    QElapsedTimer t;
    t.start();
    for (int i = 0; i < 200; ++i) {
        chart->appendPoint(0, 100 + i, 5);
        chart->notifyChanged();
        if (i % 10 == 9)
            QTest::qWait(20);
    }
    QTest::qWait(100);
    const int paints = widget.paintCount() - before;
    const int bound = static_cast<int>(t.elapsed() / ChartWidget::kMinRepaintIntervalMs) + 2;
    CPPL_VERIFY2(paints >= 1 && paints <= bound, qPrintable(QStringLiteral("%1 paints for %2 ms").arg(paints).arg(t.elapsed())));
    QVERIFY(paints < 100);
}

void TestChartExportWidget::hoverAndPick()
{
    ChartWidget widget;
    auto *chart = sampleChart().release();
    widget.setChart(chart);
    widget.resize(600, 400);
    widget.show();
    QVERIFY(QTest::qWaitForWindowExposed(&widget));
    QTRY_VERIFY(widget.paintCount() >= 1);
    QSignalSpy hovered(&widget, &ChartWidget::hovered);
    QSignalSpy picked(&widget, &ChartWidget::picked);
    const QRectF plot = chart->lastPlotRect();
    // Series 2 is the line at y = 8 (axis 0..10).
    const QPoint onSeries2(static_cast<int>(plot.center().x()), static_cast<int>(plot.bottom() - 0.8 * plot.height()));
    QTest::mouseMove(&widget, onSeries2);
    QTRY_VERIFY(!hovered.isEmpty());
    const Hit hover = hovered.last().at(0).value<Hit>();
    QCOMPARE(hover.series, 2);
    QTest::mouseClick(&widget, Qt::LeftButton, {}, onSeries2);
    QCOMPARE(picked.size(), 1);
    QCOMPARE(picked.first().at(0).value<Hit>().series, 2);
    QVERIFY(picked.first().at(0).value<Hit>().text.contains(QStringLiteral("rank 2")));
    // Empty plot area: hovered with nothing, no pick.
    const QPoint empty(static_cast<int>(plot.center().x()), static_cast<int>(plot.bottom() - 0.65 * plot.height()));
    QTest::mouseClick(&widget, Qt::LeftButton, {}, empty);
    QCOMPARE(picked.size(), 1);
}

void TestChartExportWidget::followsPalette()
{
    ChartWidget widget(sampleChart().release());
    QPalette dark = widget.palette();
    dark.setColor(QPalette::Window, QColor(25, 25, 28));
    dark.setColor(QPalette::WindowText, QColor(235, 235, 235));
    dark.setColor(QPalette::Base, QColor(18, 18, 20));
    widget.setPalette(dark);
    QVERIFY(widget.chart()->theme().isDark);
    QCOMPARE(widget.chart()->theme().background, QColor(25, 25, 28));
    widget.resize(400, 300);
    const QImage shot = widget.grab().toImage();
    QCOMPARE(QColor(shot.pixel(2, 2)), QColor(25, 25, 28));
    widget.setAutoTheme(false);
    widget.chart()->setTheme(Theme::light());
    widget.setPalette(dark);
    QVERIFY(!widget.chart()->theme().isDark);
}

void TestChartExportWidget::wheelScrollsBars()
{
    auto *bars = new StackedBarChart;
    bars->setValues(std::vector<double>(1024, 1.0));
    ChartWidget widget(bars);
    widget.resize(500, 300);
    QWheelEvent unscrollable(QPointF(100, 100), QPointF(100, 100), {}, QPoint(0, -120), Qt::NoButton, Qt::NoModifier,
                             Qt::NoScrollPhase, false);
    QApplication::sendEvent(&widget, &unscrollable);
    QVERIFY(!unscrollable.isAccepted()); // all bars shown: the event goes on to a scroll area around
    bars->setViewRange(0, 100);
    QWheelEvent down(QPointF(100, 100), QPointF(100, 100), {}, QPoint(0, -240), Qt::NoButton, Qt::NoModifier,
                     Qt::NoScrollPhase, false);
    QApplication::sendEvent(&widget, &down);
    QVERIFY(down.isAccepted());
    QCOMPARE(bars->viewRange().first, 20); // two notches, a tenth of 100 each
}

void TestChartExportWidget::firstChangeJoinsThePendingPass()
{
    // A page updates its table and its charts from one snapshot: a chart that changes after a
    // quiet spell must paint in the pass the event loop is about to make for the others (its
    // posted update request), not in a second pass after a timer fires (twice the paint work).
    ChartWidget widget(sampleChart().release());
    widget.resize(500, 300);
    widget.show();
    QVERIFY(QTest::qWaitForWindowExposed(&widget));
    QTRY_VERIFY(widget.paintCount() >= 1);
    QTest::qWait(ChartWidget::kMinRepaintIntervalMs + 20); // quiet
    const int before = widget.paintCount();
    auto *chart = static_cast<TimeSeriesChart *>(widget.chart());
    chart->appendPoint(0, 100, 5);
    chart->notifyChanged();
    QCoreApplication::sendPostedEvents(); // the pending pass: posted events only, no timer runs
    QCOMPARE(widget.paintCount(), before + 1);
    // A second change right after waits for the rest of the 40 ms.
    chart->appendPoint(0, 101, 5);
    chart->notifyChanged();
    QCoreApplication::sendPostedEvents();
    QCOMPARE(widget.paintCount(), before + 1);
    QTRY_COMPARE(widget.paintCount(), before + 2);
}

void TestChartExportWidget::tooltipAwayFromTheData()
{
    // On a line: the hit's text; away from every line: what the chart shows (the widget's own
    // tooltip), not nothing.
    ChartWidget widget(sampleChart().release());
    widget.setToolTip(QStringLiteral("What the chart shows"));
    widget.resize(600, 400);
    widget.show();
    QVERIFY(QTest::qWaitForWindowExposed(&widget));
    QTRY_VERIFY(widget.paintCount() >= 1);
    const QRectF plot = widget.chart()->lastPlotRect();
    auto tipAt = [&](QPointF p) {
        QHelpEvent help(QEvent::ToolTip, p.toPoint(), widget.mapToGlobal(p.toPoint()));
        QApplication::sendEvent(&widget, &help);
        return QToolTip::text();
    };
    const QString onLine = tipAt(QPointF(plot.center().x(), plot.bottom() - 0.8 * plot.height()));
    QVERIFY2(onLine.startsWith(QStringLiteral("rank 2")), qPrintable(onLine));
    QCOMPARE(tipAt(QPointF(plot.center().x(), plot.bottom() - 0.65 * plot.height())), QStringLiteral("What the chart shows"));
    QToolTip::hideText();
}

void TestChartExportWidget::emptyTextInsideThePlot()
{
    // A chart with nothing to draw says why, wrapped inside its plot (a narrow plot cut a one-line
    // note at both ends); once there is data the note is gone.
    TimeSeriesChart chart;
    chart.setEmptyText(QStringLiteral("nothing to compare yet: only rank 2 has reported"));
    QVERIFY(!chart.hasData());
    for (int width : {260, 640}) {
        const QImage image = renderToImage(chart, {width, 240}, 1);
        const QRectF note = chart.lastEmptyTextRect();
        QVERIFY(!note.isEmpty());
        QVERIFY2(chart.lastPlotRect().adjusted(-1, -1, 1, 1).contains(note), qPrintable(QString::number(width)));
        int ink = 0;
        for (qreal x = note.left(); x < note.right(); x += 1)
            ink += colorDistance(pixelAt(image, x, note.center().y()), chart.theme().mutedText.rgb()) < 120;
        QVERIFY(ink > 3);
    }
    chart.setSeries({SeriesData{QStringLiteral("a"), {0, 1}, {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::quiet_NaN()}}});
    QVERIFY(!chart.hasData()); // gaps alone are nothing to draw
    chart.setSeries({SeriesData{QStringLiteral("a"), {0, 1}, {1, 2}}});
    QVERIFY(chart.hasData());
    (void)renderToImage(chart, {640, 240}, 1);
    QVERIFY(chart.lastEmptyTextRect().isEmpty());
}

QTEST_MAIN(TestChartExportWidget)
#include "tst_chart_export_widget.moc"
