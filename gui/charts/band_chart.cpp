// SPDX-License-Identifier: MIT
#include "charts/band_chart.h"

#include <QPaintDevice>
#include <QPainter>

#include <algorithm>
#include <cmath>
#include <limits>

namespace cppl::charts {
namespace {

double quantileSorted(const std::vector<double> &v, double q)
{
    const double pos = q * static_cast<double>(v.size() - 1);
    const auto i = static_cast<size_t>(std::floor(pos));
    const double f = pos - static_cast<double>(i);
    return i + 1 < v.size() ? v[i] + (v[i + 1] - v[i]) * f : v[i];
}

} // namespace

std::vector<BandSample> computeBand(const std::vector<SeriesData> &series, double x0, double x1, int bins,
                                    double lowQ, double highQ)
{
    std::vector<BandSample> out;
    if (bins <= 0 || !(x1 > x0) || series.empty())
        return out;
    const size_t nb = static_cast<size_t>(bins), ns = series.size();
    // means[bin * ns + series]: one pass over every point, then one sort per bin.
    std::vector<double> means(nb * ns, std::numeric_limits<double>::quiet_NaN());
    std::vector<double> sum(nb);
    std::vector<int> count(nb);
    const double scale = bins / (x1 - x0);
    for (size_t s = 0; s < ns; ++s) {
        std::fill(sum.begin(), sum.end(), 0.0);
        std::fill(count.begin(), count.end(), 0);
        const SeriesData &d = series[s];
        const size_t n = std::min(d.x.size(), d.y.size());
        for (size_t i = static_cast<size_t>(std::lower_bound(d.x.begin(), d.x.begin() + static_cast<std::ptrdiff_t>(n), x0) - d.x.begin());
             i < n; ++i) {
            if (d.x[i] > x1)
                break;
            if (std::isnan(d.y[i]))
                continue;
            const auto b = std::min(nb - 1, static_cast<size_t>((d.x[i] - x0) * scale));
            sum[b] += d.y[i];
            ++count[b];
        }
        for (size_t b = 0; b < nb; ++b)
            if (count[b] > 0)
                means[b * ns + s] = sum[b] / count[b];
    }
    std::vector<double> values;
    values.reserve(ns);
    for (size_t b = 0; b < nb; ++b) {
        values.clear();
        for (size_t s = 0; s < ns; ++s)
            if (!std::isnan(means[b * ns + s]))
                values.push_back(means[b * ns + s]);
        if (values.empty())
            continue;
        std::sort(values.begin(), values.end());
        out.push_back({x0 + (static_cast<double>(b) + 0.5) / scale, quantileSorted(values, lowQ),
                       quantileSorted(values, 0.5), quantileSorted(values, highQ), static_cast<int>(values.size())});
    }
    return out;
}

BandChart::BandChart(QObject *parent)
    : XYChart(parent)
{
}

void BandChart::setSeries(std::vector<SeriesData> series)
{
    m_series = std::move(series);
    m_supplied = false;
    touch();
}

void BandChart::setBand(std::vector<BandSample> band)
{
    m_band = std::move(band);
    m_series.clear();
    m_supplied = true;
    touch();
}

void BandChart::setQuantiles(double low, double high)
{
    m_lowQ = std::clamp(std::min(low, high), 0.0, 1.0);
    m_highQ = std::clamp(std::max(low, high), 0.0, 1.0);
    touch();
}

void BandChart::setHighlights(std::vector<SeriesData> highlights)
{
    m_highlights = std::move(highlights);
    touch();
}

QString BandChart::quantileName(double q) const
{
    return QLatin1Char('p') + QString::number(q * 100, 'g', 3);
}

std::pair<double, double> BandChart::xRange() const
{
    double x0 = std::numeric_limits<double>::infinity(), x1 = -x0;
    auto extendX = [&](const std::vector<SeriesData> &list) {
        for (const SeriesData &s : list)
            if (!s.x.empty()) {
                x0 = std::min(x0, s.x.front());
                x1 = std::max(x1, s.x.back());
            }
    };
    extendX(m_series);
    extendX(m_highlights);
    if (m_supplied && !m_band.empty()) {
        x0 = std::min(x0, m_band.front().x);
        x1 = std::max(x1, m_band.back().x);
    }
    if (!std::isfinite(x0)) {
        x0 = 0;
        x1 = 1;
    }
    x0 = xAxis().min.value_or(x0);
    x1 = xAxis().max.value_or(x1);
    return {x0, x1 > x0 ? x1 : x0 + 1};
}

std::pair<double, double> BandChart::yRange() const
{
    double y0 = std::numeric_limits<double>::infinity(), y1 = -y0;
    for (const BandSample &b : m_band) {
        y0 = std::min(y0, b.low);
        y1 = std::max(y1, b.high);
    }
    for (const SeriesData &s : m_highlights)
        for (double v : s.y)
            if (!std::isnan(v)) {
                y0 = std::min(y0, v);
                y1 = std::max(y1, v);
            }
    return {y0, y1};
}

std::vector<detail::LegendEntry> BandChart::legendEntries() const
{
    const Theme &th = theme();
    const int seriesShown = m_supplied ? 0 : static_cast<int>(m_series.size());
    QString bandLabel = quantileName(m_lowQ) + QStringLiteral("–") + quantileName(m_highQ);
    if (seriesShown > 0)
        bandLabel += QStringLiteral(" of %1").arg(seriesShown);
    std::vector<detail::LegendEntry> legend;
    legend.push_back({bandLabel, detail::LegendEntry::Swatch::Band, th.band, Qt::SolidLine, std::nullopt, Qt::NoBrush});
    legend.push_back({QStringLiteral("median"), detail::LegendEntry::Swatch::Line, th.median, Qt::SolidLine, std::nullopt, Qt::NoBrush});
    for (size_t i = 0; i < m_highlights.size(); ++i) {
        const SeriesStyle st = th.seriesStyle(static_cast<int>(i) + 1);
        legend.push_back({m_highlights[i].name, detail::LegendEntry::Swatch::Line, st.color, st.dash, st.marker, Qt::NoBrush});
    }
    return legend;
}

void BandChart::paintChart(QPainter &painter, const QRectF &rect) const
{
    const auto [x0, x1] = xRange();
    // One band bin per 2 device-independent px: finer is noise, coarser looks stepped.
    const int bins = std::max(2, static_cast<int>(rect.width() / 2));
    if (!m_supplied && (m_bandRevision != revision() || m_bandBins != bins)) {
        m_band = computeBand(m_series, x0, x1, bins, m_lowQ, m_highQ);
        m_bandRevision = revision();
        m_bandBins = bins;
    }
    const auto [y0, y1] = yRange();
    // Highlight names sit right of the plot, so the plot gives them room.
    const QFont labelFont = detail::tickFont(painter.font());
    qreal labelW = 0;
    for (const SeriesData &s : m_highlights)
        labelW = std::max(labelW, QFontMetricsF(labelFont).horizontalAdvance(s.name));
    detail::FrameSpec spec;
    spec.legend = legendEntries();
    spec.reserveRight = labelW > 0 ? labelW + 6 : 0;
    const Plot axes = paintAxes(painter, rect, spec, x0, x1, y0, y1);

    painter.save();
    painter.setClipRect(axes.rect.adjusted(-1, -1, 1, 1), Qt::IntersectClip);
    painter.setRenderHint(QPainter::Antialiasing, true);
    paintBand(painter, axes);
    std::vector<Label> labels;
    for (size_t i = 0; i < m_highlights.size(); ++i)
        paintHighlight(painter, axes, i, labels);
    painter.restore();
    paintReferences(painter, axes);
    painter.save();
    painter.setFont(labelFont);
    paintLabels(painter, axes.rect, rect, labels, labelW);
    painter.restore();
}

void BandChart::paintBand(QPainter &painter, const Plot &axes) const
{
    if (m_band.empty())
        return;
    const Theme &th = theme();
    QPolygonF area;
    area.reserve(static_cast<qsizetype>(m_band.size() * 2));
    for (const BandSample &b : m_band)
        area.append(QPointF(axes.mapX(b.x), axes.mapY(b.high)));
    for (auto it = m_band.rbegin(); it != m_band.rend(); ++it)
        area.append(QPointF(axes.mapX(it->x), axes.mapY(it->low)));
    painter.setPen(Qt::NoPen);
    painter.setBrush(th.band);
    painter.drawPolygon(area);
    QPolygonF median;
    for (const BandSample &b : m_band)
        median.append(QPointF(axes.mapX(b.x), axes.mapY(b.median)));
    painter.setPen(detail::seriesPen(th.median, th.lineWidth * 2, Qt::SolidLine));
    painter.setBrush(Qt::NoBrush);
    painter.drawPolyline(median);
}

void BandChart::paintHighlight(QPainter &painter, const Plot &axes, size_t index, std::vector<Label> &labels) const
{
    const Theme &th = theme();
    const QRectF &plot = axes.rect;
    const SeriesData &s = m_highlights[index];
    const SeriesStyle st = th.seriesStyle(static_cast<int>(index) + 1);
    const qreal dpr = painter.device() ? painter.device()->devicePixelRatioF() : 1.0;
    const int columns = std::max(1, static_cast<int>(std::ceil(plot.width() * dpr)));
    std::vector<DecimatedPoint> decimated;
    decimateMinMax(s.x.data(), s.y.data(), std::min(s.x.size(), s.y.size()), axes.x0, axes.x1, columns, decimated);
    const bool calm = polylineLength(decimated, axes.sx, axes.sy) < plot.width() * 6; // see TimeSeriesChart
    // Noisy: a 1 device px hairline takes the raster engine's line path; a wider pen is
    // stroked into polygons first (~10x the cost for thousands of zigzags).
    painter.setPen(calm ? detail::seriesPen(st.color, th.lineWidth * 1.5, st.dash) : QPen(st.color, 0));
    painter.setRenderHint(QPainter::Antialiasing, calm); // see TimeSeriesChart: noise needs no AA
    detail::paintDecimated(painter, decimated, plot, axes.x0, axes.sx, axes.y0, axes.sy);
    painter.setRenderHint(QPainter::Antialiasing, true);
    // Markers every ~110 px, staggered per series, and one on the last point.
    size_t lastValid = s.y.size();
    for (size_t k = s.y.size(); k-- > 0;)
        if (!std::isnan(s.y[k]) && s.x[k] <= axes.x1) {
            lastValid = k;
            break;
        }
    for (qreal px = plot.left() + 30 + static_cast<qreal>(index) * 29; px < plot.right() - 30; px += 110) {
        const auto it = std::lower_bound(s.x.begin(), s.x.end(), axes.x0 + (px - plot.left()) / axes.sx);
        if (it == s.x.end())
            break;
        const size_t k = static_cast<size_t>(it - s.x.begin());
        if (!std::isnan(s.y[k]))
            drawMarker(painter, QPointF(axes.mapX(s.x[k]), axes.mapY(s.y[k])), st.marker, th.markerSize, st.color, th.plotBackground);
    }
    if (lastValid < s.y.size()) {
        drawMarker(painter, QPointF(axes.mapX(s.x[lastValid]), axes.mapY(s.y[lastValid])), st.marker, th.markerSize, st.color,
                   th.plotBackground);
        labels.push_back({axes.mapY(s.y[lastValid]), index});
    }
}

void BandChart::paintLabels(QPainter &painter, const QRectF &plot, const QRectF &rect, std::vector<Label> &labels, qreal labelW) const
{
    // Names right of the plot at their line's last value, pushed apart so that none overlap.
    std::sort(labels.begin(), labels.end(), [](const Label &a, const Label &b) { return a.y < b.y; });
    const qreal h = QFontMetricsF(painter.font()).height();
    for (size_t k = 1; k < labels.size(); ++k)
        labels[k].y = std::max(labels[k].y, labels[k - 1].y + h);
    const qreal overflow = labels.empty() ? 0 : labels.back().y + h / 2 - rect.bottom();
    for (Label &l : labels)
        l.y -= std::max<qreal>(overflow, 0);
    for (const Label &l : labels) {
        painter.setPen(theme().seriesStyle(static_cast<int>(l.index) + 1).color);
        painter.drawText(QRectF(plot.right() + 6, l.y - h / 2, labelW + 2, h), Qt::AlignLeft | Qt::AlignVCenter,
                         m_highlights[l.index].name);
    }
}

Hit BandChart::hitTest(const QPointF &point) const
{
    Hit hit = nearestSample(m_highlights, point);
    const ValueFormat yFormat = yAxis().format;
    if (hit.isValid()) {
        hit.text = m_highlights[static_cast<size_t>(hit.series)].name + QLatin1Char('\n') + xText(hit.x) +
                   QLatin1Char('\n') + formatValue(hit.y, yFormat);
        return hit;
    }
    const std::optional<double> xv = xAt(point);
    if (!xv || m_band.empty())
        return hit;
    const auto it = std::min_element(m_band.begin(), m_band.end(), [&](const BandSample &a, const BandSample &b) {
        return std::abs(a.x - *xv) < std::abs(b.x - *xv);
    });
    hit.kind = Hit::Kind::Band;
    hit.x = it->x;
    hit.y = it->median;
    hit.text = xText(it->x) + QLatin1Char('\n') +
               quantileName(m_highQ) + QStringLiteral(": ") + formatValue(it->high, yFormat) + QLatin1Char('\n') +
               QStringLiteral("median: ") + formatValue(it->median, yFormat) + QLatin1Char('\n') +
               quantileName(m_lowQ) + QStringLiteral(": ") + formatValue(it->low, yFormat);
    if (it->count > 0)
        hit.text += QStringLiteral("\n%1 series").arg(it->count);
    return hit;
}

} // namespace cppl::charts
