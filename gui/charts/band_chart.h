// SPDX-License-Identifier: MIT
#pragma once

#include "charts/chart.h"
#include "charts/chart_frame.h"

#include <cstdint>

namespace cppl::charts {

/// The band at one time: low and high quantile and the median across series.
struct BandSample
{
    double x = 0;
    double low = 0;
    double median = 0;
    double high = 0;
    int count = 0; // series with a value in this bin
};

/**
 * Quantiles across series over time: [x0, x1] is cut into `bins`; each series contributes the mean
 * of its points in a bin; per bin the lowQ/median/highQ quantiles (linear between order
 * statistics) of those means are taken. Bins where no series has a value are left out.
 */
std::vector<BandSample> computeBand(const std::vector<SeriesData> &series, double x0, double x1, int bins,
                                    double lowQ = 0.05, double highQ = 0.95);

/**
 * Many series summarised as a low..high quantile band (p5..p95 by default) with its median line,
 * plus a few named series drawn over it with their names at the right end (e.g. the slowest
 * ranks). The band is computed here from setSeries() (cached until the data or size change) or
 * supplied whole with setBand().
 */
class BandChart : public Chart
{
    Q_OBJECT

public:
    explicit BandChart(QObject *parent = nullptr);

    void setXAxis(const AxisSpec &axis);
    void setYAxis(const AxisSpec &axis);
    /// The band comes from these series (the last of setSeries/setBand wins).
    void setSeries(std::vector<SeriesData> series);
    /// A band computed elsewhere (e.g. by the collector as data arrives).
    void setBand(std::vector<BandSample> band);
    void setQuantiles(double low, double high);
    /// Series drawn over the band with markers and their names as labels.
    void setHighlights(std::vector<SeriesData> highlights);
    void setReferenceLines(std::vector<ReferenceLine> lines);

    const std::vector<SeriesData> &highlights() const { return m_highlights; }
    /// The band as last painted (computed or supplied).
    const std::vector<BandSample> &band() const { return m_band; }
    std::pair<double, double> lastYRange() const { return {m_yTicks.min, m_yTicks.max}; }
    std::pair<double, double> lastXRange() const { return {m_xTicks.min, m_xTicks.max}; }
    QRectF lastPlotRect() const { return m_frame.plot; }

    Hit hitTest(const QPointF &point) const override;

protected:
    void paintChart(QPainter &painter, const QRectF &rect) const override;

private:
    void touch();
    QString quantileName(double q) const;

    std::vector<SeriesData> m_series;
    std::vector<SeriesData> m_highlights;
    std::vector<ReferenceLine> m_references;
    AxisSpec m_xAxis{QStringLiteral("time"), ValueFormat::Seconds, {}, {}, false};
    AxisSpec m_yAxis;
    double m_lowQ = 0.05, m_highQ = 0.95;
    bool m_supplied = false;
    std::uint64_t m_revision = 0;

    mutable std::vector<BandSample> m_band;
    mutable std::uint64_t m_bandRevision = ~std::uint64_t{0};
    mutable int m_bandBins = 0;
    mutable detail::Frame m_frame;
    mutable Ticks m_xTicks, m_yTicks;
};

} // namespace cppl::charts
