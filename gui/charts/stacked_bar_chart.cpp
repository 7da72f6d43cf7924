// SPDX-License-Identifier: MIT
#include "charts/stacked_bar_chart.h"

#include <QPainter>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace cppl::charts {

Qt::BrushStyle segmentPattern(int segment)
{
    static constexpr std::array<Qt::BrushStyle, 5> kPatterns{Qt::NoBrush, Qt::BDiagPattern, Qt::CrossPattern,
                                                             Qt::FDiagPattern, Qt::Dense6Pattern};
    return kPatterns[static_cast<size_t>(std::max(segment, 0)) % kPatterns.size()];
}

StackedBarChart::StackedBarChart(QObject *parent)
    : Chart(parent)
{
    AxisSpec y;
    y.includeZero = true;
    m_yAxis = y;
}

void StackedBarChart::setSegmentNames(QStringList names)
{
    m_segments = names.isEmpty() ? QStringList{QStringLiteral("value")} : std::move(names);
    touch();
}

void StackedBarChart::setValues(std::vector<double> values)
{
    m_values = std::move(values);
    touch();
}

void StackedBarChart::setCategoryLabels(QStringList labels)
{
    m_labels = std::move(labels);
    touch();
}

void StackedBarChart::setXAxis(const AxisSpec &axis)
{
    m_xAxis = axis;
    touch();
}

void StackedBarChart::setYAxis(const AxisSpec &axis)
{
    m_yAxis = axis;
    m_yAxis.includeZero = true; // a stacked bar not starting at 0 misstates its share
    touch();
}

void StackedBarChart::setViewRange(int first, int count)
{
    m_viewFirst = std::max(first, 0);
    m_viewCount = count;
    touch();
}

bool StackedBarChart::scrollBy(int steps)
{
    if (m_viewCount <= 0 || m_viewCount >= categoryCount())
        return false;
    const int first = std::clamp(m_viewFirst + steps * std::max(1, m_viewCount / 10), 0, categoryCount() - m_viewCount);
    if (first == m_viewFirst)
        return false;
    m_viewFirst = first;
    touch();
    return true;
}

void StackedBarChart::setMinBarPitch(qreal px)
{
    m_minPitch = std::max<qreal>(px, 1);
    touch();
}

int StackedBarChart::categoryCount() const
{
    return static_cast<int>(m_values.size() / static_cast<size_t>(segmentCount()));
}

double StackedBarChart::value(int category, int segment) const
{
    if (category < 0 || category >= categoryCount() || segment < 0 || segment >= segmentCount())
        return std::numeric_limits<double>::quiet_NaN();
    return m_values[static_cast<size_t>(category) * static_cast<size_t>(segmentCount()) + static_cast<size_t>(segment)];
}

QString StackedBarChart::categoryLabel(int category) const
{
    return category < m_labels.size() ? m_labels[category] : QString::number(category);
}

void StackedBarChart::paintChart(QPainter &painter, const QRectF &rect) const
{
    const Theme &th = theme();
    const int total = categoryCount();
    const int first = std::min(m_viewFirst, total);
    const int end = m_viewCount > 0 ? std::min(total, first + m_viewCount) : total;
    const int shown = end - first;
    const int nseg = segmentCount();

    // The plot is about rect.width() wide; the bin size is settled after layout, but the y range
    // depends on it (means of bins), so estimate with the rect and recompute bins after layout.
    auto makeBars = [&](qreal width) {
        std::vector<Bar> bars;
        if (shown <= 0)
            return bars;
        const int maxBars = std::max(1, static_cast<int>(width / m_minPitch));
        const int perBin = (shown + maxBars - 1) / maxBars;
        for (int c = first; c < end; c += perBin) {
            Bar b;
            b.first = c;
            b.end = std::min(end, c + perBin);
            b.segments.assign(static_cast<size_t>(nseg), 0.0);
            b.minTotal = std::numeric_limits<double>::infinity();
            b.maxTotal = -b.minTotal;
            for (int k = b.first; k < b.end; ++k) {
                double t = 0;
                for (int s = 0; s < nseg; ++s) {
                    const double v = value(k, s);
                    if (!std::isnan(v)) {
                        b.segments[static_cast<size_t>(s)] += v;
                        t += v;
                    }
                }
                b.minTotal = std::min(b.minTotal, t);
                b.maxTotal = std::max(b.maxTotal, t);
            }
            for (double &v : b.segments)
                v /= (b.end - b.first);
            bars.push_back(std::move(b));
        }
        return bars;
    };
    m_bars = makeBars(rect.width());
    double y1 = 0;
    for (const Bar &b : m_bars)
        y1 = std::max(y1, b.maxTotal);
    y1 = m_yAxis.max.value_or(y1 > 0 ? y1 : 1);
    const bool aggregated = std::any_of(m_bars.begin(), m_bars.end(), [](const Bar &b) { return b.end - b.first > 1; });

    detail::FrameSpec spec;
    spec.title = title();
    spec.xTitle = m_xAxis.title;
    spec.yTitle = m_yAxis.title;
    spec.xGrid = false;
    for (int s = 0; s < nseg; ++s)
        spec.legend.push_back({m_segments[s], detail::LegendEntry::Swatch::Fill, th.seriesStyle(s == 0 ? 1 : s == 1 ? 0 : s).color,
                               Qt::SolidLine, std::nullopt, segmentPattern(s)});
    if (aggregated)
        spec.legend.push_back({QStringLiteral("bar = mean of bin, line = min–max total"), detail::LegendEntry::Swatch::Line,
                               th.text, Qt::SolidLine, std::nullopt, Qt::NoBrush});
    spec.yTicks = detail::numericTicks(0, y1, m_yAxis.format, !m_yAxis.max.has_value(), true, &m_yTicks);
    const int firstShown = first, endShown = end;
    spec.xTicks = [&](double length, const QFontMetricsF &f) {
        m_bars = makeBars(length);
        std::vector<detail::Tick> ticks;
        if (m_bars.empty())
            return ticks;
        // Label every k-th bar so that labels keep a gap; strides are 1, 2, 5, 10...
        qreal widest = 0;
        for (int c : {firstShown, endShown - 1})
            widest = std::max(widest, f.horizontalAdvance(categoryLabel(c)));
        const double pitch = length / static_cast<double>(m_bars.size());
        const int stride = labelStride(pitch, widest + 10);
        for (size_t i = 0; i < m_bars.size(); i += static_cast<size_t>(stride)) {
            const Bar &b = m_bars[i];
            // A bin is labelled by its first category (ranges would not fit every bin alike).
            const QString label = categoryLabel(b.first);
            ticks.push_back({(static_cast<double>(i) + 0.5) / static_cast<double>(m_bars.size()), label});
        }
        return ticks;
    };
    m_frame = detail::paintFrame(painter, rect, th, spec);
    const QRectF plot = m_frame.plot;
    if (m_bars.empty())
        return;
    const double ya = m_yTicks.min, yb = m_yTicks.max > m_yTicks.min ? m_yTicks.max : 1;
    const double sy = plot.height() / (yb - ya);
    const double pitch = plot.width() / static_cast<double>(m_bars.size());
    const double gap = pitch >= 6 ? std::max(1.0, pitch * 0.2) : 0; // touching bars when thin: gaps would alias
    const QFontMetricsF vfm(m_frame.tickFont);
    const bool labelValues = pitch >= vfm.horizontalAdvance(QStringLiteral("00.0k")) + 4;

    painter.save();
    painter.setClipRect(plot.adjusted(-1, -vfm.height() - 2, 1, 1), Qt::IntersectClip);
    painter.setFont(m_frame.tickFont);
    for (size_t i = 0; i < m_bars.size(); ++i) {
        Bar &b = m_bars[i];
        const double left = plot.left() + static_cast<double>(i) * pitch + gap / 2;
        const double w = pitch - gap;
        double base = 0;
        for (int s = 0; s < nseg; ++s) {
            const double v = b.segments[static_cast<size_t>(s)];
            const double top = base + v;
            const QRectF seg(QPointF(left, plot.bottom() - (top - ya) * sy), QPointF(left + w, plot.bottom() - (base - ya) * sy));
            const QColor fill = th.seriesStyle(s == 0 ? 1 : s == 1 ? 0 : s).color;
            painter.setRenderHint(QPainter::Antialiasing, false);
            painter.fillRect(seg, fill);
            if (segmentPattern(s) != Qt::NoBrush && seg.width() >= 3)
                painter.fillRect(seg, QBrush(detail::textOn(fill), segmentPattern(s)));
            if (labelValues && seg.height() >= vfm.height() + 2) {
                painter.setPen(detail::textOn(fill));
                const QString text = formatValue(v, m_yAxis.format);
                const QRectF box(seg.center().x() - vfm.horizontalAdvance(text) / 2 - 2, seg.center().y() - vfm.height() / 2,
                                 vfm.horizontalAdvance(text) + 4, vfm.height());
                painter.fillRect(box, fill); // readable over the hatch
                painter.drawText(box, Qt::AlignCenter, text);
            }
            base = top;
        }
        b.rect = QRectF(QPointF(left, plot.bottom() - (base - ya) * sy), QPointF(left + w, plot.bottom()));
        if (b.end - b.first > 1 && b.maxTotal > b.minTotal) {
            painter.setPen(QPen(th.text, 1));
            const double cx = left + w / 2;
            const double yMin = plot.bottom() - (b.minTotal - ya) * sy, yMax = plot.bottom() - (b.maxTotal - ya) * sy;
            painter.drawLine(QPointF(cx, yMin), QPointF(cx, yMax));
            painter.drawLine(QPointF(cx - std::max(1.0, w / 3), yMax), QPointF(cx + std::max(1.0, w / 3), yMax));
        }
        if (labelValues && nseg > 1) {
            painter.setPen(th.text);
            painter.drawText(QRectF(left - gap / 2, b.rect.top() - vfm.height() - 1, pitch, vfm.height()), Qt::AlignCenter,
                             formatValue(base, m_yAxis.format));
        }
    }
    painter.restore();
}

Hit StackedBarChart::hitTest(const QPointF &point) const
{
    Hit hit;
    const QRectF plot = m_frame.plot;
    if (!plot.contains(point) || m_bars.empty())
        return hit;
    const auto i = std::min(m_bars.size() - 1, static_cast<size_t>((point.x() - plot.left()) / plot.width() * static_cast<double>(m_bars.size())));
    const Bar &b = m_bars[i];
    hit.kind = Hit::Kind::Bar;
    hit.column = b.first;
    hit.columnEnd = b.end;
    double totalV = 0;
    for (double v : b.segments)
        totalV += v;
    hit.y = totalV;
    const QString name = m_xAxis.title.isEmpty() ? QString() : m_xAxis.title + QLatin1Char(' ');
    if (b.end - b.first > 1)
        hit.text = name + categoryLabel(b.first) + QStringLiteral("–") + categoryLabel(b.end - 1) +
                   QStringLiteral(" (mean of %1)").arg(b.end - b.first);
    else
        hit.text = name + categoryLabel(b.first);
    for (int s = 0; s < segmentCount(); ++s)
        hit.text += QLatin1Char('\n') + m_segments[s] + QStringLiteral(": ") + formatValue(b.segments[static_cast<size_t>(s)], m_yAxis.format);
    hit.text += QStringLiteral("\ntotal: ") + formatValue(totalV, m_yAxis.format);
    if (b.end - b.first > 1)
        hit.text += QStringLiteral(" (min ") + formatValue(b.minTotal, m_yAxis.format) + QStringLiteral(", max ") +
                    formatValue(b.maxTotal, m_yAxis.format) + QLatin1Char(')');
    return hit;
}

} // namespace cppl::charts
