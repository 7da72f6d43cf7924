// SPDX-License-Identifier: MIT
// The Run page's incremental chart data (docs/dashboard.md, "Responsiveness"): quantile bands and
// the heat map updated sample by sample across timeline compactions equal what a fresh full
// computation gives; in steady state only the newest samples are recomputed; the page shows the
// table and the charts of a 1024-rank run in turns and catches up once the stream pauses; the
// per-rank charts' shared selection, clicks and title (each a chart-module chart in a ChartWidget);
// heat-map cells before a rank's first progress read as no data (not as the slowest rank), and the
// comm bars' legend lists only what is drawn.

#include "comm_share_bars.h"
#include "rank_heat_map.h"
#include "rank_plot.h"
#include "rank_quantiles.h"
#include "rank_table_model.h"
#include "run_charts.h"
#include "run_page.h"
#include "synthetic_run.h"
#include "test_exact.h"

#include "charts/chart_export.h"
#include "charts/chart_widget.h"
#include "charts/color_map.h"
#include "charts/time_series_chart.h"

#include <QSignalSpy>
#include <QTest>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

using namespace Qt::StringLiterals;
using cppl::app::CommShareBars;
using cppl::app::RankHeatMap;
using cppl::app::RankQuantiles;
using cppl::charts::ChartWidget;
using cppl::app::SyntheticRun;
using cppl::core::run::RankMetric;
using cppl::core::run::RunTimeline;

namespace {

/// The quantile by sorting the whole column (the ranks that had sent progress by then): what the
/// incremental values must equal.
double bruteQuantile(const RunTimeline &tl, RankMetric metric, size_t sample, double q)
{
    std::vector<float> column;
    for (int r = 0; r < tl.worldSize(); ++r)
        if (tl.times()[sample] >= tl.firstProgressSeconds(r))
            column.push_back(tl.rank(metric, r)[sample]);
    if (column.empty())
        return std::numeric_limits<double>::quiet_NaN();
    std::sort(column.begin(), column.end());
    const size_t k = std::min(column.size() - 1, size_t(q * double(column.size() - 1) + 0.5));
    return double(column[k]);
}

/// The largest finite value (0 if none): the heat map's colour scale from a p99 band with gaps.
double finiteMax(const std::vector<double> &v)
{
    double top = 0;
    for (const double x : v)
        if (std::isfinite(x))
            top = std::max(top, x);
    return top;
}

/// How far @p c is from the nearest colour of the heat map's scale (sum of channel differences).
int distanceFromScale(QRgb c)
{
    int best = 1 << 30;
    for (const QRgb v : cppl::charts::ColorMap::viridis().table())
        best = std::min(best, std::abs(qRed(c) - qRed(v)) + std::abs(qGreen(c) - qGreen(v)) + std::abs(qBlue(c) - qBlue(v)));
    return best;
}

} // namespace

class TestRunCharts : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void advancedIsTheSameRunAsAFreshOne()
    {
        // SyntheticRun::advanced continues a kept state: it must equal a run stepped from 0, bit
        // for bit, whatever was asked before (an earlier moment kept, a later one, another size).
        const auto same = [](const SyntheticRun &a, const SyntheticRun &b) {
            QCOMPARE(a.seconds(), b.seconds());
            QCOMPARE(a.snapshot().sequence, b.snapshot().sequence);
            QVERIFY(a.snapshot().global.nll == b.snapshot().global.nll);
            QCOMPARE(a.snapshot().global.tokens, b.snapshot().global.tokens);
            QCOMPARE(a.snapshot().ranks.size(), b.snapshot().ranks.size());
            for (size_t r = 0; r < a.snapshot().ranks.size(); ++r) {
                QVERIFY(a.snapshot().ranks[r].stats.nll == b.snapshot().ranks[r].stats.nll);
                QCOMPARE(a.snapshot().ranks[r].state, b.snapshot().ranks[r].state);
                CPPL_COMPARE_BITS(a.snapshot().ranks[r].commShare, b.snapshot().ranks[r].commShare);
            }
            QCOMPARE(a.timeline().times().size(), b.timeline().times().size());
            for (int r : {0, int(a.snapshot().ranks.size()) - 1})
                for (RankMetric m : {RankMetric::TokensPerSecond, RankMetric::DeviationRelative}) {
                    const auto x = a.timeline().rank(m, r), y = b.timeline().rank(m, r);
                    QVERIFY(std::equal(x.begin(), x.end(), y.begin(), y.end()));
                }
            QCOMPARE(a.alerts().size(), b.alerts().size());
            for (size_t i = 0; i < a.alerts().size(); ++i)
                QCOMPARE(a.alerts()[i].message, b.alerts()[i].message);
        };
        for (double t : {30.0, 10.0, 45.5, 45.5, 80.0}) {
            (void)SyntheticRun::advanced(24, t / 2); // another size in between
            SyntheticRun fresh(72);
            fresh.advanceTo(t);
            SyntheticRun kept = SyntheticRun::advanced(72, t);
            same(kept, fresh);
            if (QTest::currentTestFailed())
                return;
            kept.finish(true); // a copy: the kept state stays unfinished
            fresh.advanceTo(t + 5);
            same(SyntheticRun::advanced(72, t + 5), fresh);
            if (QTest::currentTestFailed())
                return;
        }
    }

    void quantilesFollowCompactions_data()
    {
        QTest::addColumn<int>("ranks");
        QTest::addColumn<int>("maxPoints");
        QTest::addRow("40 ranks, 16 points") << 40 << 16;
        QTest::addRow("300 ranks, 64 points") << 300 << 64;
    }
    void quantilesFollowCompactions()
    {
        QFETCH(int, ranks);
        QFETCH(int, maxPoints);
        SyntheticRun run(ranks);
        RunTimeline tl;
        tl.reset({size_t(maxPoints), 0.2});
        const std::vector<double> qs{0.05, 0.5, 0.95, 0.99};
        RankQuantiles live(RankMetric::TokensPerSecond, qs);
        std::uint64_t compactions = tl.compactions();
        int seenCompactions = 0, steadyUpdates = 0;
        for (double t = 0.5; t < 100; t += 0.5) { // the synthetic run's step
            run.advanceTo(t);
            QVERIFY(tl.append(t, run.snapshot()));
            QCOMPARE(tl.worldSize(), ranks);
            const bool compacted = tl.compactions() != compactions;
            compactions = tl.compactions();
            const bool wasExact = live.exact() && live.size() > 0;
            live.update(tl, 4);
            QCOMPARE(live.size(), tl.size());
            if (compacted) {
                ++seenCompactions;
            } else if (wasExact) {
                // Steady state: the newest sample (updated in place or appended) and nothing else.
                QVERIFY2(live.lastComputed() <= 2, qPrintable(QString::number(live.lastComputed())));
                ++steadyUpdates;
            }
            // The newest sample is always exact (it is what the eye follows).
            QCOMPARE(live.values(1).back(), bruteQuantile(tl, RankMetric::TokensPerSecond, tl.size() - 1, 0.5));
        }
        QVERIFY2(seenCompactions >= 2, qPrintable(QString::number(seenCompactions)));
        QVERIFY(steadyUpdates > 100);
        // The stand-ins are replaced by exact values within a few updates of a small budget...
        for (int i = 0; i < 100 && !live.exact(); ++i)
            live.update(tl, 4);
        QVERIFY(live.exact());
        // ... and then equal a fresh computation and the brute force, sample by sample.
        RankQuantiles fresh(RankMetric::TokensPerSecond, qs);
        fresh.update(tl);
        for (size_t q = 0; q < qs.size(); ++q) {
            QCOMPARE(live.values(int(q)).size(), fresh.values(int(q)).size());
            for (size_t i = 0; i < fresh.values(int(q)).size(); ++i) // QCOMPARE takes NaN (no rank had progress) as equal
                QCOMPARE(live.values(int(q))[i], fresh.values(int(q))[i]);
            for (size_t s = 0; s < tl.size(); s += 3)
                QCOMPARE(fresh.values(int(q))[s], bruteQuantile(tl, RankMetric::TokensPerSecond, s, qs[q]));
        }
        // Ordered at every sample.
        for (size_t s = 0; s < tl.size(); ++s) {
            if (std::isnan(fresh.values(1)[s]))
                continue; // no rank had progress by then: no value at all
            QVERIFY(fresh.values(0)[s] <= fresh.values(1)[s]);
            QVERIFY(fresh.values(1)[s] <= fresh.values(2)[s]);
            QVERIFY(fresh.values(2)[s] <= fresh.values(3)[s]);
        }
    }

    void heatMapIncrementalEqualsFull()
    {
        // 600 ranks into 150 pixel rows (4 ranks a row, the slowest shown), a timeline that
        // compacts twice, the heat map fed after every sample and drawn each time.
        SyntheticRun run(600);
        RunTimeline tl;
        tl.reset({64, 0.2});
        RankQuantiles band(RankMetric::TokensPerSecond, {0.99});
        RankHeatMap live;
        int updates = 0;
        for (double t = 0.5; t < 100; t += 0.5) {
            run.advanceTo(t);
            QVERIFY(tl.append(t, run.snapshot()));
            band.update(tl);
            const auto &p99 = band.values(0);
            live.setData(tl, run.snapshot(), finiteMax(p99));
            const QImage image = live.cellImage(150);
            QCOMPARE(image.width(), int(tl.size()));
            QCOMPARE(image.height(), 150);
            ++updates;
        }
        // Most updates coloured only their newest columns: full builds come with the first data,
        // the compactions and the colour scale's steps.
        QVERIFY2(live.fullBuilds() < updates / 10, qPrintable(u"%1 of %2"_s.arg(live.fullBuilds()).arg(updates)));
        RankHeatMap fresh;
        const auto &p99 = band.values(0);
        fresh.setData(tl, run.snapshot(), finiteMax(p99));
        QCOMPARE(fresh.colourMax(), live.colourMax());
        const QImage a = live.cellImage(150), b = fresh.cellImage(150);
        QCOMPARE(a.size(), b.size());
        QVERIFY(a == b);
        // A slow rank's row is darker (its bin shows its slowest rank) than a row of normal ranks.
        const int slowRow = run.slowRanks().front() * 150 / 600;
        const int lastColumn = a.width() - 1;
        QVERIFY(qGray(a.pixel(lastColumn, slowRow)) + 20 < qGray(a.pixel(lastColumn, (slowRow + 40) % 150)));
        // A new number of pixel rows rebuilds everything, still equal to a fresh map.
        QVERIFY(live.cellImage(97) == fresh.cellImage(97));
    }

    void rankPlotsSelectAndReportClicks_data()
    {
        QTest::addColumn<QString>("plot");
        QTest::addRow("heat map") << u"heat"_s;
        QTest::addRow("comm-share bars") << u"comm"_s;
    }
    void rankPlotsSelectAndReportClicks()
    {
        // What the per-rank charts share (RankPlot, in the chart module's ChartWidget): a title
        // painted on the background, the selected rank outlined (repainted only when it changes)
        // and a click in the plot reported as a rank.
        QFETCH(QString, plot);
        SyntheticRun run = SyntheticRun::advanced(40, 20);
        cppl::app::RankPlot *rankPlot = nullptr;
        cppl::charts::Chart *chart = nullptr;
        if (plot == u"heat"_s) {
            auto *heat = new RankHeatMap;
            heat->setData(run.timeline(), run.snapshot(), 3000);
            rankPlot = heat;
            chart = heat;
        } else {
            auto *bars = new CommShareBars;
            bars->setData(run.snapshot(), 0.2);
            rankPlot = bars;
            chart = bars;
        }
        ChartWidget w(chart); // owns the chart
        w.resize(420, 260);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        const QImage plain = w.grab().toImage();
        // The title: text pixels in the top strip, none at its far left (the frame's margin).
        const QColor background = plain.pixelColor(1, 1);
        const int strip = QFontMetrics(w.font()).height() + 4;
        int titlePixels = 0;
        for (int y = 2; y < strip; ++y)
            for (int x = 0; x < plain.width(); ++x)
                titlePixels += plain.pixelColor(x, y) != background;
        QVERIFY2(titlePixels > 50, qPrintable(QString::number(titlePixels)));
        for (int y = 2; y < strip; ++y)
            QCOMPARE(plain.pixelColor(2, y), background);
        QSignalSpy changed(chart, &cppl::charts::Chart::changed);
        rankPlot->setSelectedRank(7);
        QCOMPARE(changed.size(), 1);
        rankPlot->setSelectedRank(7); // every update sets it again: no repaint for that
        QCOMPARE(changed.size(), 1);
        QVERIFY(w.grab().toImage() != plain);
        rankPlot->setSelectedRank(-1);
        QVERIFY(w.grab().toImage() == plain);
        QSignalSpy picked(&w, &ChartWidget::picked);
        QTest::mouseClick(&w, Qt::LeftButton, {}, QPoint(w.width() / 2, w.height() / 2));
        QCOMPARE(picked.size(), 1);
        const int rank = rankPlot->rankOf(picked.front().front().value<cppl::charts::Hit>());
        QVERIFY2(rank >= 0 && rank < 40, qPrintable(QString::number(rank)));
        QTest::mouseClick(&w, Qt::LeftButton, {}, QPoint(2, w.height() - 2)); // outside the plot
        QCOMPARE(picked.size(), 1);
    }

    void heatMapCellsWithoutDataReadAsNoData()
    {
        // Before its first progress message a rank's rate is 0 in the timeline, and its cells were
        // painted the darkest colour of the scale: the slowest rank's. They read as no data
        // instead: hatched grey, no colour of the scale, a tooltip and a legend entry saying so.
        SyntheticRun run = SyntheticRun::advanced(40, 2.0);
        const RunTimeline &tl = run.timeline();
        int late = -1, early = -1;
        for (int r = 0; r < 40; ++r) {
            if (late < 0 && run.startOf(r) > 2.5)
                late = r;
            if (early < 0 && run.startOf(r) < 1.0)
                early = r;
        }
        QVERIFY2(late >= 0 && early >= 0, "the synthetic ranks start between 0.5 and 4 s");
        // The timeline keeps when each rank's progress began: the first sample holding it.
        QVERIFY(std::isinf(tl.firstProgressSeconds(late)));
        const double first = tl.firstProgressSeconds(early);
        QVERIFY2(first >= run.startOf(early) && first <= run.startOf(early) + 0.5, qPrintable(QString::number(first)));
        QCOMPARE(tl.rank(RankMetric::TokensPerSecond, late).back(), 0.0F);
        // The p5 band is over the ranks that had reported (it read 0 tok/s while some were loading),
        // and has no value while none had.
        RankQuantiles band(RankMetric::TokensPerSecond, {0.05});
        band.update(tl);
        QVERIFY(std::isnan(band.values(0).front())); // 0.5 s: every rank still loading
        QVERIFY2(band.values(0).back() > 1000, qPrintable(QString::number(band.values(0).back())));

        ChartWidget view(new RankHeatMap);
        view.setToolTip(RankHeatMap::description()); // as the Run page's
        auto &heat = *static_cast<RankHeatMap *>(view.chart());
        heat.setData(tl, run.snapshot(), 2500);
        QVERIFY(heat.hasCellsWithoutData());
        const QImage image = heat.cellImage(40);
        for (int c = 0; c < image.width(); ++c)
            QCOMPARE(qAlpha(image.pixel(c, late)), 0); // transparent: the hatching shows
        QCOMPARE(qAlpha(image.pixel(image.width() - 1, early)), 255);

        view.resize(420, 320);
        view.show();
        QVERIFY(QTest::qWaitForWindowExposed(&view));
        const QImage shot = view.grab().toImage().convertToFormat(QImage::Format_RGB32);
        const QRectF plot = heat.lastPlotRect();
        QVERIFY(plot.isValid());
        auto rowY = [&](int r) { return int(plot.top() + (r + 0.5) * plot.height() / 40); };
        // Across the late rank's row nothing is a colour of the scale (the darkest was what it showed).
        int minDistance = 1 << 30;
        for (int x = int(plot.left()) + 2; x < int(plot.right()) - 1; ++x)
            minDistance = std::min(minDistance, distanceFromScale(shot.pixel(x, rowY(late))));
        QVERIFY2(minDistance > 40, qPrintable(QString::number(minDistance)));
        // A rank with data, at the right end, is a colour of the scale.
        QVERIFY(distanceFromScale(shot.pixel(int(plot.right()) - 3, rowY(early))) < 12);
        // Its tooltip says so, and which rank; a cell with data gives the rate.
        const QString noData = heat.hitTest(QPointF(plot.right() - 3, rowY(late))).text;
        QVERIFY2(noData.startsWith(u"rank %1 at 0:02: no data yet"_s.arg(late)), qPrintable(noData));
        const QString rate = heat.hitTest(QPointF(plot.right() - 3, rowY(early))).text;
        QVERIFY2(rate.startsWith(u"rank %1 at 0:02: "_s.arg(early)) && rate.endsWith(u" tok/s"_s), qPrintable(rate));
        // Away from the cells nothing is hit, and the widget's tooltip says what the map shows.
        QVERIFY(!heat.hitTest(QPointF(1, 1)).isValid());
        QVERIFY(view.toolTip().contains(u"no data yet"_s));
        QVERIFY(heat.lastLegendLabels().contains(u"no data (before the rank's first progress message)"_s));

        // Once every rank reported, the late rank's new columns have colours; its first ones stay
        // hatched (and the legend says what they are).
        run.advanceTo(6.0);
        heat.setData(run.timeline(), run.snapshot(), 2500);
        const QImage later = heat.cellImage(40);
        QCOMPARE(qAlpha(later.pixel(later.width() - 1, late)), 255);
        QCOMPARE(qAlpha(later.pixel(0, late)), 0);
        QVERIFY(heat.hasCellsWithoutData());
        // A run whose every rank had progress in the first sample has no such cell, no legend entry.
        cppl::core::telemetry::Snapshot s;
        s.worldSize = 3;
        for (int r = 0; r < 3; ++r) {
            cppl::core::telemetry::RankView v;
            v.rank = r;
            v.heard = v.hasProgress = true;
            v.tokensPerSecond = 100.0 * (r + 1);
            s.ranks.push_back(v);
        }
        RunTimeline all;
        all.reset();
        QVERIFY(all.append(0.5, s));
        QVERIFY(all.append(1.0, s));
        QCOMPARE(all.firstProgressSeconds(0), 0.5);
        RankHeatMap full;
        full.setData(all, s, 300);
        QVERIFY(!full.hasCellsWithoutData());
        (void)cppl::charts::renderToImage(full, {420, 320}, 1);
        QVERIFY(full.lastLegendLabels().isEmpty());
    }

    void commBarsLegendListsOnlyWhatIsDrawn()
    {
        // The legend named the dashed threshold line (and the bars) when none was drawn: before any
        // rank's comm share is known the plot says so and draws nothing.
        ChartWidget view(new CommShareBars);
        auto &bars = *static_cast<CommShareBars *>(view.chart());
        view.resize(420, 260);
        view.show();
        QVERIFY(QTest::qWaitForWindowExposed(&view));
        bars.setData(cppl::core::telemetry::Snapshot{}, 0.15);
        (void)view.grab();
        QCOMPARE(bars.lastLegendLabels(), QStringList());
        SyntheticRun run = SyntheticRun::advanced(40, SyntheticRun::kFirstSyncSeconds - 2); // every rank has progress, none has synced
        bars.setData(run.snapshot(), 0.15);
        (void)view.grab();
        QCOMPARE(bars.lastLegendLabels(), QStringList());
        QVERIFY(!bars.lastEmptyTextRect().isEmpty()); // "none known before the first sync round"
        const QRectF unknownPlot = bars.lastPlotRect();
        run.advanceTo(SyntheticRun::kFirstSyncSeconds + 2);
        bars.setData(run.snapshot(), 0.15);
        (void)view.grab();
        QCOMPARE(bars.lastLegendLabels(), (QStringList{u"waiting for stragglers"_s, u"transfer"_s, u"alert threshold 15.0%"_s}));
        QVERIFY(bars.lastEmptyTextRect().isEmpty());
        // The legend takes its room only when it lists something.
        QVERIFY2(unknownPlot.top() < bars.lastPlotRect().top(),
                 qPrintable(u"%1 vs %2"_s.arg(unknownPlot.top()).arg(bars.lastPlotRect().top())));
        bars.setData(run.snapshot(), 0); // no threshold: no line, not in the legend
        (void)view.grab();
        QCOMPARE(bars.lastLegendLabels(), (QStringList{u"waiting for stragglers"_s, u"transfer"_s}));
    }

    void commBarsShowTensorParallelReductions()
    {
        // --tensor-parallel 2 on 4 ranks: the group's reductions inside the forward passes are a
        // third part of each bar, apart from the sync rounds' wait and transfer; a follower (which
        // takes no part in the sync rounds) has a bar of its reductions alone. Without tensor
        // parallelism the bars keep their two parts.
        ChartWidget view(new CommShareBars);
        auto &bars = *static_cast<CommShareBars *>(view.chart());
        view.resize(420, 260);
        view.show();
        QVERIFY(QTest::qWaitForWindowExposed(&view));
        cppl::core::telemetry::Snapshot snap;
        snap.worldSize = 4;
        for (int r = 0; r < 4; ++r) {
            cppl::core::telemetry::RankView v;
            v.rank = r;
            v.hasProgress = true;
            v.state = cppl::core::telemetry::RankState::Evaluating;
            v.tpSize = 2;
            v.tpRank = r % 2;
            v.computeSeconds = 10;
            v.tpCollectiveSeconds = 1.0 + r; // part of the compute
            v.waitSeconds = r % 2 ? 0 : 0.5;
            v.transferSeconds = r % 2 ? 0 : 0.25;
            const double wall = v.computeSeconds + v.waitSeconds + v.transferSeconds;
            v.waitShare = v.waitSeconds / wall;
            v.transferShare = v.transferSeconds / wall;
            snap.ranks.push_back(v);
        }
        bars.setData(snap, 0.15);
        const QImage shot = view.grab().toImage();
        if (const QString dir = qEnvironmentVariable("CPPL_QUALITY_SHOTS"); !dir.isEmpty())
            QVERIFY(shot.save(dir + u"/comm-bars-tensor-parallel.png"_s));
        QCOMPARE(bars.segmentCount(), 3);
        QCOMPARE(bars.lastLegendLabels(), (QStringList{u"waiting for stragglers"_s, u"transfer"_s, u"tensor-parallel reductions"_s,
                                                       u"alert threshold 15.0%"_s}));
        CPPL_COMPARE_BITS(CommShareBars::tensorParallelShare(snap.ranks[0]), 1.0 / 10.75);
        CPPL_COMPARE_BITS(CommShareBars::tensorParallelShare(snap.ranks[3]), 4.0 / 10.0);
        // Picking rank 3's bar (a follower) selects it: it has a bar.
        const QRectF plot = bars.lastPlotRect();
        const auto hit = bars.hitTest({plot.left() + plot.width() * 7 / 8, plot.bottom() - 2});
        QCOMPARE(bars.rankOf(hit), 3);
        for (auto &v : snap.ranks)
            v.tpSize = 1, v.tpRank = 0, v.tpCollectiveSeconds = 0;
        bars.setData(snap, 0.15);
        (void)view.grab();
        QCOMPARE(bars.segmentCount(), 2);
        QCOMPARE(bars.lastLegendLabels(), (QStringList{u"waiting for stragglers"_s, u"transfer"_s, u"alert threshold 15.0%"_s}));
    }

    void pageTakesTurnsAndCatchesUp()
    {
        // 1024 ranks: the table and the charts are updated in turns, at most every 200 ms each;
        // when snapshots stop, the last one reaches the table and the charts.
        SyntheticRun run(1024);
        cppl::app::RunPage page;
        page.resize(1400, 900);
        page.reset(u"turns"_s, 1024, run.groupNames(), run.thresholds());
        page.show();
        QVERIFY(QTest::qWaitForWindowExposed(&page));
        // The first snapshot after reset() shows everything at once (screenshots rely on it).
        run.advanceTo(1);
        page.showSnapshot(run.snapshot(), run.timeline(), 1);
        QCOMPARE(page.rankModel()->rowCount(), 1024);
        QCOMPARE(page.charts()->slowestRanks().size(), 3);
        int tableBehind = 0;
        for (double t = 2; t <= 30; t += 1) {
            run.advanceTo(t);
            page.showSnapshot(run.snapshot(), run.timeline(), t);
            const auto *row = page.rankModel()->rankAt(0);
            QVERIFY(row);
            tableBehind += row->stats.tokens != run.snapshot().ranks[0].stats.tokens;
        }
        QVERIFY2(tableBehind > 0, "beyond 256 ranks the table should skip snapshots right after its update");
        QTRY_COMPARE_WITH_TIMEOUT(page.rankModel()->rankAt(0)->stats.tokens, run.snapshot().ranks[0].stats.tokens, 3000);
        // The charts caught up too: the slowest ranks named are those of the last snapshot.
        QCOMPARE(page.charts()->slowestRanks().size(), 3);
        const QStringList slowest = page.charts()->slowestRanks();
        for (int r : run.slowRanks())
            QVERIFY2(std::any_of(slowest.begin(), slowest.end(), [&](const QString &s) { return s.startsWith(u"rank %1 "_s.arg(r)); }),
                     qPrintable(slowest.join(u", "_s)));
        // Past the stall (as in the screenshots, 6:12): the stalled rank is named "stalled", as the
        // table and the heat map say, not "slow".
        run.advanceTo(372);
        page.showSnapshot(run.snapshot(), run.timeline(), 372, true);
        const QStringList later = page.charts()->slowestRanks();
        const QString stalled = u"rank %1 "_s.arg(run.stalledRank());
        QVERIFY2(std::any_of(later.begin(), later.end(), [&](const QString &s) { return s.startsWith(stalled) && s.endsWith(u" stalled"_s); }),
                 qPrintable(later.join(u", "_s)));
        // Finished (every rank done; the stalled rank caught up at the end): the slowest over the
        // whole run are named, first the one that stood still for 4.5 minutes, then slow ranks.
        run.advanceTo(600);
        run.finish();
        page.showSnapshot(run.snapshot(), run.timeline(), 600, true);
        const QStringList finished = page.charts()->slowestRanks();
        QCOMPARE(finished.size(), 3);
        QVERIFY2(finished.front().startsWith(stalled), qPrintable(finished.join(u", "_s)));
        for (const QString &name : finished.mid(1))
            QVERIFY2(std::any_of(run.slowRanks().begin(), run.slowRanks().end(), [&](int r) { return name.startsWith(u"rank %1 "_s.arg(r)); }),
                     qPrintable(finished.join(u", "_s)));
    }

    void referenceChartsOnlyWithAReferenceModel_data()
    {
        QTest::addColumn<int>("ranks");
        QTest::addRow("4 ranks: a line per rank") << 4;
        QTest::addRow("40 ranks: p5/median/p95") << 40;
    }
    void referenceChartsOnlyWithAReferenceModel()
    {
        // --reference-model: the running KLD and top-token agreement per rank beside the PPL, titled
        // with the global figures of the exact merge; without one the charts are hidden and the heat
        // map keeps to two rows.
        QFETCH(int, ranks);
        cppl::app::RunPage page;
        page.resize(1400, 900);
        page.show();
        QVERIFY(QTest::qWaitForWindowExposed(&page));
        auto *kldView = page.findChild<ChartWidget *>(u"kldChart"_s);
        auto *sameView = page.findChild<ChartWidget *>(u"sameTopChart"_s);
        QVERIFY(kldView && sameView);
        const SyntheticRun plain = SyntheticRun::advanced(ranks, 60);
        plain.showOn(page);
        page.showSnapshot(plain.snapshot(), plain.timeline(), plain.seconds(), true);
        QVERIFY(!kldView->isVisible() && !sameView->isVisible());
        QVERIFY(!page.charts()->referenceShown());
        QVERIFY(!plain.snapshot().reference);

        const SyntheticRun compared = SyntheticRun::advanced(ranks, 60, true);
        compared.showOn(page);
        page.showSnapshot(compared.snapshot(), compared.timeline(), compared.seconds(), true);
        QVERIFY(kldView->isVisible() && sameView->isVisible());
        const auto &global = *compared.snapshot().reference;
        const auto *kld = page.charts()->kldChart();
        const auto *same = page.charts()->sameTopChart();
        QVERIFY2(kld->title().endsWith(u"global %1"_s.arg(global.kldMean(), 0, 'g', 4)), qPrintable(kld->title()));
        QVERIFY2(same->title().endsWith(u"global %1%"_s.arg(100 * global.sameTopShare(), 0, 'f', 2)), qPrintable(same->title()));
        QCOMPARE(kld->seriesCount(), ranks <= 32 ? ranks : 3);
        QCOMPARE(same->seriesCount(), ranks <= 32 ? ranks : 3);
        if (ranks <= 32) {
            // A rank's line is its own running mean: the last sample its exact sums' mean.
            const auto &r1 = *compared.snapshot().ranks[1].reference;
            const auto &ys = kld->series(1).y;
            QCOMPARE(float(ys.back()), float(r1.kldMean()));
            QCOMPARE(float(same->series(1).y.back()), float(r1.sameTopShare()));
        }
        (void)kldView->grab(); // painted: a line drawn, nothing clipped into the empty text
        QVERIFY(kld->hasData() && kld->lastEmptyTextRect().isEmpty());
        QVERIFY(kldView->height() >= 120);
        // The next run without a reference model hides them again.
        plain.showOn(page);
        QVERIFY(!kldView->isVisible());
    }

    void deviationComparesFromTheSecondRank_data()
    {
        QTest::addColumn<int>("ranks");
        QTest::addRow("4 ranks: a line per rank") << 4;
        QTest::addRow("40 ranks: p5/median/p95") << 40;
    }
    void deviationComparesFromTheSecondRank()
    {
        // While one rank has reported, the global PPL is its own: its deviation is 0 by definition,
        // and the chart drew a flat line on an axis widened to ±100 % around it. It now says that
        // there is nothing to compare yet, and each line starts at the second rank's first progress.
        QFETCH(int, ranks);
        SyntheticRun run(ranks);
        cppl::app::RunPage page;
        page.resize(1500, 900);
        page.show();
        QVERIFY(QTest::qWaitForWindowExposed(&page));
        // The run's first seconds as if only rank 2 had reported (the others still loading).
        const int only = 2;
        RunTimeline early;
        cppl::core::telemetry::Snapshot s;
        for (double t = 0.5; t <= 3.0; t += 0.5) {
            run.advanceTo(t);
            s = run.snapshot();
            for (auto &v : s.ranks)
                if (v.rank == only) {
                    v.hasProgress = true;
                } else {
                    v.hasProgress = false;
                    v.stats = {};
                    v.tokensPerSecond = 0;
                }
            QVERIFY(early.append(t, s));
        }
        page.reset(u"early"_s, ranks, run.groupNames(), run.thresholds());
        page.showSnapshot(s, early, 3.0, true);
        const auto *dev = page.charts()->deviationChart();
        QCOMPARE(dev->seriesCount(), 0);
        QCOMPARE(page.charts()->deviationEmptyText(), u"nothing to compare yet: only rank %1 has reported"_s.arg(only));
        page.grab();
        QCOMPARE(dev->lastYRange(), (std::pair<double, double>(-0.01, 0.01))); // not 0 to 100 %
        // Once more have reported: a series per rank (or p95, median, p5), with a gap up to the
        // second rank's first progress, and an axis that fits the deviations (a few percent).
        run.advanceTo(12);
        run.showOn(page);
        QVERIFY(dev->seriesCount() >= 3);
        const RunTimeline &tl = run.timeline();
        std::vector<double> firsts;
        for (int r = 0; r < ranks; ++r)
            firsts.push_back(tl.firstProgressSeconds(r));
        std::sort(firsts.begin(), firsts.end());
        const double second = firsts[1];
        QVERIFY(std::isfinite(second));
        int before = 0, after = 0;
        for (int i = 0; i < dev->seriesCount(); ++i) {
            const auto &series = dev->series(i);
            for (size_t k = 0; k < series.x.size(); ++k) {
                if (series.x[k] < second) {
                    QVERIFY2(std::isnan(series.y[k]), qPrintable(u"%1 at %2 s: %3"_s.arg(series.name).arg(series.x[k]).arg(series.y[k])));
                    ++before;
                } else {
                    after += std::isfinite(series.y[k]);
                }
            }
        }
        QVERIFY(after > 0);
        QVERIFY(before > 0 || second <= tl.times().front());
        page.grab(); // paints: the chart's y range is the one drawn
        const auto [lo, hi] = dev->lastYRange();
        QVERIFY2(lo > -0.2 && hi < 0.2 && hi > lo, qPrintable(u"%1 .. %2"_s.arg(lo).arg(hi)));
        // A one-rank run has nobody to compare with, ever.
        SyntheticRun one = SyntheticRun::advanced(1, 30);
        one.showOn(page);
        QCOMPARE(dev->seriesCount(), 0);
        QVERIFY2(page.charts()->deviationEmptyText().startsWith(u"one rank"_s), qPrintable(page.charts()->deviationEmptyText()));
        page.reset(u"next"_s, 4, {}, run.thresholds());
        QCOMPARE(page.charts()->deviationEmptyText(), u"no data yet"_s);
    }

    void deviationRangeFollowsTheNewestSample()
    {
        // The live deviation chart clipped a line that left its range at the newest sample instead
        // of widening the range (the sample's time, kept as a float for painting, could round
        // above the axis' end and was not measured). A rank whose PPL runs away from the global
        // one at the live edge must stay on the plot.
        SyntheticRun run(4);
        RunTimeline tl;
        tl.reset();
        cppl::core::telemetry::Snapshot s;
        for (double t = 0.5; t <= 12.0; t += 0.5) {
            run.advanceTo(t);
            s = run.snapshot();
            QVERIFY(tl.append(t, s));
        }
        double now = 12.3; // a time whose float rounds up
        while (double(float(now)) <= now)
            now += 0.1;
        run.advanceTo(now);
        s = run.snapshot();
        for (auto &v : s.ranks)
            if (v.rank == 1)
                v.deviationRelative = 0.25; // far outside the others' few percent
        QVERIFY(tl.append(now, s));
        QCOMPARE(tl.times().back(), now);
        cppl::app::RunPage page;
        page.resize(1500, 900);
        page.reset(u"runaway"_s, 4, run.groupNames(), run.thresholds());
        page.show();
        QVERIFY(QTest::qWaitForWindowExposed(&page));
        page.showSnapshot(s, tl, now, true);
        page.grab(); // paints: the range is the one drawn
        const auto *dev = page.charts()->deviationChart();
        QCOMPARE(dev->seriesCount(), 4);
        QCOMPARE(dev->series(1).y.back(), double(0.25f));
        QVERIFY2(dev->lastYRange().second >= double(0.25f),
                 qPrintable(u"the axis ends at %1"_s.arg(dev->lastYRange().second)));
    }

    void rankNamesCarryTheHostOnlyWhenSeveral()
    {
        // Up to 32 ranks each has a line and a legend entry. On one host "rank 0 (localhost)" said
        // nothing the run's notice had not said, and four of them took a legend row each in a
        // 1024 px window (the fourth read "+1 more").
        cppl::app::RunPage page;
        page.resize(1500, 900);
        auto names = [&] {
            QStringList n;
            const auto *dev = page.charts()->deviationChart();
            for (int i = 0; i < dev->seriesCount(); ++i)
                n << dev->series(i).name;
            return n;
        };
        SyntheticRun local = SyntheticRun::advanced(4, 30);
        local.showOn(page);
        QCOMPARE(names(), (QStringList{u"rank 0"_s, u"rank 1"_s, u"rank 2"_s, u"rank 3"_s}));
        SyntheticRun nodes(16); // 8 ranks a node
        nodes.advanceTo(30);
        nodes.showOn(page);
        const QStringList n = names();
        QCOMPARE(n.size(), 16);
        QCOMPARE(n.front(), u"rank 0 (node-000)"_s);
        QCOMPARE(n.back(), u"rank 15 (node-001)"_s);
    }

    void heatMapTimeAxisHasAScaleWhenNarrow()
    {
        // In a 1024 px window the heat map's plot is ~150 px wide: its time axis over 6:12 had one
        // tick, "5:00", from which no scale can be read. Two or more now, their labels apart.
        SyntheticRun run = SyntheticRun::advanced(1024, 372);
        ChartWidget view(new RankHeatMap);
        auto &heat = *static_cast<RankHeatMap *>(view.chart());
        heat.setData(run.timeline(), run.snapshot(), 10000);
        for (const int width : {300, 420, 700}) {
            view.resize(width, 400);
            view.grab(); // paints: the ticks are those drawn
            QStringList labels = heat.lastXTickLabels();
            QVERIFY2(labels.size() >= 2, qPrintable(u"%1 px: %2"_s.arg(width).arg(labels.join(u", "_s))));
            QVERIFY2(labels.size() <= 8, qPrintable(u"%1 px: %2"_s.arg(width).arg(labels.join(u", "_s))));
            QCOMPARE(labels.removeDuplicates(), 0);
        }
        view.resize(300, 400);
        view.grab();
        QCOMPARE(heat.lastXTickLabels(), (QStringList{u"2:00"_s, u"4:00"_s, u"6:00"_s}));
    }
};

QTEST_MAIN(TestRunCharts)
#include "tst_run_charts.moc"
