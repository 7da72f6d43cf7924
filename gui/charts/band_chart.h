// SPDX-License-Identifier: MIT
#pragma once

#include "charts/xy_chart.h"

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
 * supplied whole with setBand(). Axes and reference lines are XYChart's.
 */
class BandChart : public XYChart
{
    Q_OBJECT

public:
    explicit BandChart(QObject *parent = nullptr);

    /// The band comes from these series (the last of setSeries/setBand wins).
    void setSeries(std::vector<SeriesData> series);
    /// A band computed elsewhere (e.g. by the collector as data arrives).
    void setBand(std::vector<BandSample> band);
    void setQuantiles(double low, double high);
    /// Series drawn over the band with markers and their names as labels.
    void setHighlights(std::vector<SeriesData> highlights);

    const std::vector<SeriesData> &highlights() const { return m_highlights; }
    /// The band as last painted (computed or supplied).
    const std::vector<BandSample> &band() const { return m_band; }

    Hit hitTest(const QPointF &point) const override;

protected:
    void paintChart(QPainter &painter, const QRectF &rect) const override;

private:
    /// A highlighted series' name at its line's end: where it goes and whose it is.
    struct Label
    {
        qreal y;
        size_t index;
    };
    QString quantileName(double q) const;
    std::pair<double, double> xRange() const;
    /// Over the band and the highlights (+inf, -inf: nothing to show).
    std::pair<double, double> yRange() const;
    std::vector<detail::LegendEntry> legendEntries() const;
    void paintBand(QPainter &painter, const Plot &axes) const;
    void paintHighlight(QPainter &painter, const Plot &axes, size_t index, std::vector<Label> &labels) const;
    void paintLabels(QPainter &painter, const QRectF &plot, const QRectF &rect, std::vector<Label> &labels, qreal labelW) const;

    std::vector<SeriesData> m_series;
    std::vector<SeriesData> m_highlights;
    double m_lowQ = 0.05, m_highQ = 0.95;
    bool m_supplied = false;

    mutable std::vector<BandSample> m_band;
    mutable std::uint64_t m_bandRevision = ~std::uint64_t{0};
    mutable int m_bandBins = 0;
};

} // namespace cppl::charts
