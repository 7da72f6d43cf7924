// SPDX-License-Identifier: MIT
#include "charts/xy_chart.h"

#include <algorithm>
#include <cmath>
#include <iterator>

namespace cppl::charts {

XYChart::XYChart(QObject *parent)
    : Chart(parent)
{
}

void XYChart::setXAxis(const AxisSpec &axis)
{
    m_xAxis = axis;
    touch();
}

void XYChart::setYAxis(const AxisSpec &axis)
{
    m_yAxis = axis;
    touch();
}

void XYChart::setReferenceLines(std::vector<ReferenceLine> lines)
{
    m_references = std::move(lines);
    touch();
}

XYChart::Plot XYChart::paintAxes(QPainter &painter, const QRectF &rect, detail::FrameSpec &spec, double x0, double x1,
                                 double dataY0, double dataY1) const
{
    double y0 = dataY0, y1 = dataY1;
    for (const ReferenceLine &r : m_references) {
        y0 = std::min(y0, r.y);
        y1 = std::max(y1, r.y);
    }
    if (!std::isfinite(y0)) {
        y0 = 0;
        y1 = 1;
    }
    if (m_yAxis.includeZero) {
        y0 = std::min(y0, 0.0);
        y1 = std::max(y1, 0.0);
    }
    const bool yFixed = m_yAxis.min.has_value() && m_yAxis.max.has_value();
    y0 = m_yAxis.min.value_or(y0);
    y1 = m_yAxis.max.value_or(y1);

    spec.xTitle = m_xAxis.title;
    spec.yTitle = m_yAxis.title;
    spec.xTicks = detail::numericTicks(x0, x1, m_xAxis.format, false, false, &m_xTicks);
    spec.yTicks = detail::numericTicks(y0, y1, m_yAxis.format, !yFixed, true, &m_yTicks);
    m_frame = paintFrame(painter, rect, spec);

    Plot p;
    p.rect = m_frame.plot;
    p.x0 = x0;
    p.x1 = x1;
    p.y0 = m_yTicks.min;
    p.y1 = m_yTicks.max > m_yTicks.min ? m_yTicks.max : m_yTicks.min + 1;
    p.sx = p.rect.width() / (x1 - x0);
    p.sy = p.rect.height() / (p.y1 - p.y0);
    return p;
}

namespace {

// Whether the segment a-b passes through r (an end inside, or crossing one of its edges).
bool segmentHitsRect(QPointF a, QPointF b, const QRectF &r)
{
    if (r.contains(a) || r.contains(b))
        return true;
    if (std::max(a.x(), b.x()) < r.left() || std::min(a.x(), b.x()) > r.right() || std::max(a.y(), b.y()) < r.top()
        || std::min(a.y(), b.y()) > r.bottom())
        return false;
    // The rectangle's corners on both sides of the segment's line: it crosses the rectangle.
    const auto side = [&](QPointF p) { return (b.x() - a.x()) * (p.y() - a.y()) - (b.y() - a.y()) * (p.x() - a.x()); };
    const double s1 = side(r.topLeft()), s2 = side(r.topRight()), s3 = side(r.bottomLeft()), s4 = side(r.bottomRight());
    return std::min({s1, s2, s3, s4}) <= 0 && std::max({s1, s2, s3, s4}) >= 0;
}

} // namespace

void XYChart::paintReferences(QPainter &painter, const Plot &plot, const std::vector<SeriesData> &series) const
{
    // A marker's half size around the box: a label over a marker hides it as it hides a line.
    const qreal pad = theme().markerSize / 2;
    const auto covers = [&](const QRectF &box) {
        const QRectF r = box.adjusted(-pad, -pad, pad, pad);
        const double xa = plot.x0 + (r.left() - plot.rect.left()) / plot.sx, xb = plot.x0 + (r.right() - plot.rect.left()) / plot.sx;
        for (const SeriesData &s : series) {
            // Samples are in x order: the segments from the one before the box to the one after it.
            auto k = std::size_t(std::lower_bound(s.x.begin(), s.x.end(), xa) - s.x.begin());
            k = k > 0 ? k - 1 : 0;
            for (; k < s.x.size(); ++k) {
                if (std::isnan(s.y[k]))
                    continue;
                const QPointF a(plot.mapX(s.x[k]), plot.mapY(s.y[k]));
                const bool next = k + 1 < s.x.size() && !std::isnan(s.y[k + 1]);
                if (next ? segmentHitsRect(a, QPointF(plot.mapX(s.x[k + 1]), plot.mapY(s.y[k + 1])), r) : r.contains(a))
                    return true;
                if (s.x[k] > xb)
                    break;
            }
        }
        return false;
    };
    m_referenceLabels = detail::paintReferenceLines(painter, m_frame, theme(), m_references, plot.y0, plot.y1, m_yAxis.format,
                                                    series.empty() ? detail::CoversData{} : detail::CoversData(covers));
}

std::optional<double> XYChart::xAt(const QPointF &point) const
{
    const QRectF plot = m_frame.plot;
    if (!plot.contains(point) || !(m_xTicks.max > m_xTicks.min) || !(m_yTicks.max > m_yTicks.min))
        return std::nullopt;
    return m_xTicks.min + (point.x() - plot.left()) / plot.width() * (m_xTicks.max - m_xTicks.min);
}

Hit XYChart::nearestSample(const std::vector<SeriesData> &series, const QPointF &point) const
{
    Hit hit;
    const std::optional<double> xv = xAt(point);
    if (!xv)
        return hit;
    const QRectF plot = m_frame.plot;
    const double ya = m_yTicks.min;
    const double pxPerX = plot.width() / (m_xTicks.max - m_xTicks.min), pxPerY = plot.height() / (m_yTicks.max - ya);
    double best = 10; // px: closer than this counts as on the line
    for (size_t i = 0; i < series.size(); ++i) {
        const SeriesData &s = series[i];
        const auto it = std::lower_bound(s.x.begin(), s.x.end(), *xv);
        // The nearer of the two samples around the cursor.
        for (auto cand : {it, it == s.x.begin() ? it : std::prev(it)}) {
            if (cand == s.x.end())
                continue;
            const size_t k = static_cast<size_t>(cand - s.x.begin());
            if (std::isnan(s.y[k]))
                continue;
            const double dx = (s.x[k] - *xv) * pxPerX;
            const double dy = plot.bottom() - (s.y[k] - ya) * pxPerY - point.y();
            const double d = std::hypot(dx, dy);
            if (d < best) {
                best = d;
                hit.kind = Hit::Kind::Series;
                hit.series = static_cast<int>(i);
                hit.x = s.x[k];
                hit.y = s.y[k];
            }
        }
    }
    return hit;
}

QString XYChart::xText(double x) const
{
    return (m_xAxis.title.isEmpty() ? QStringLiteral("x") : m_xAxis.title) + QStringLiteral(": ") +
           formatValue(x, m_xAxis.format);
}

} // namespace cppl::charts
