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

void StackedBarChart::setBinning(BarBinning binning)
{
    m_binning = binning;
    touch();
}

void StackedBarChart::setBinnedAxisTitle(const QString &title)
{
    m_binnedTitle = title;
    touch();
}

void StackedBarChart::setReferenceLines(std::vector<ReferenceLine> lines)
{
    m_references = std::move(lines);
    touch();
}

void StackedBarChart::setHighlightedCategory(int category)
{
    if (category == m_highlighted)
        return; // set again on every update: a repaint only when it changes
    m_highlighted = category;
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

std::pair<int, int> StackedBarChart::visibleRange() const
{
    const int total = categoryCount();
    const int first = std::min(m_viewFirst, total);
    return {first, m_viewCount > 0 ? std::min(total, first + m_viewCount) : total};
}

bool StackedBarChart::hasData() const
{
    const auto [first, end] = visibleRange();
    for (int c = first; c < end; ++c)
        for (int s = 0; s < segmentCount(); ++s)
            if (!std::isnan(value(c, s)))
                return true;
    return false;
}

StackedBarChart::Bar StackedBarChart::makeBar(int first, int end) const
{
    const int nseg = segmentCount();
    Bar b;
    b.first = first;
    b.end = end;
    b.segments.assign(static_cast<size_t>(nseg), 0.0);
    b.minTotal = std::numeric_limits<double>::infinity();
    b.maxTotal = -b.minTotal;
    for (int k = first; k < end; ++k) {
        double t = 0;
        bool known = false;
        for (int s = 0; s < nseg; ++s)
            if (const double v = value(k, s); !std::isnan(v)) {
                t += v;
                known = true;
            }
        if (m_binning == BarBinning::Largest && !known)
            continue; // no value yet: neither a bar nor 0
        if (m_binning == BarBinning::Largest && (b.shown < 0 || t > b.maxTotal))
            b.shown = k;
        b.minTotal = std::min(b.minTotal, t);
        b.maxTotal = std::max(b.maxTotal, t);
        if (m_binning == BarBinning::Mean)
            for (int s = 0; s < nseg; ++s)
                if (const double v = value(k, s); !std::isnan(v))
                    b.segments[static_cast<size_t>(s)] += v;
    }
    if (m_binning == BarBinning::Mean) {
        for (double &v : b.segments)
            v /= (end - first);
    } else {
        b.hasValue = b.shown >= 0;
        for (int s = 0; b.hasValue && s < nseg; ++s)
            b.segments[static_cast<size_t>(s)] = std::isnan(value(b.shown, s)) ? 0.0 : value(b.shown, s);
        if (b.hasValue)
            b.minTotal = b.maxTotal; // the bar is one category's: no range to draw
    }
    return b;
}

std::vector<StackedBarChart::Bar> StackedBarChart::makeBars(int first, int end, qreal width) const
{
    std::vector<Bar> bars;
    if (end <= first)
        return bars;
    const int maxBars = std::max(1, static_cast<int>(width / m_minPitch));
    const int perBin = (end - first + maxBars - 1) / maxBars;
    for (int c = first; c < end; c += perBin)
        bars.push_back(makeBar(c, std::min(end, c + perBin)));
    return bars;
}

double StackedBarChart::yMax(const std::vector<Bar> &bars) const
{
    double y1 = 0;
    for (const Bar &b : bars)
        if (b.hasValue)
            y1 = std::max(y1, b.maxTotal);
    for (const ReferenceLine &r : m_references)
        y1 = std::max(y1, r.y * 1.5); // the line below the top, with room above it
    return m_yAxis.max.value_or(y1 > 0 ? y1 : 1);
}

QColor StackedBarChart::segmentColor(int segment) const
{
    return theme().seriesStyle(segment == 0 ? 1 : segment == 1 ? 0 : segment).color;
}

std::vector<detail::LegendEntry> StackedBarChart::legendEntries(bool aggregated) const
{
    std::vector<detail::LegendEntry> legend;
    if (!hasData())
        return legend; // the legend lists what is drawn
    for (int s = 0; s < segmentCount(); ++s)
        legend.push_back({m_segments[s], detail::LegendEntry::Swatch::Fill, segmentColor(s), Qt::SolidLine, std::nullopt,
                          segmentPattern(s)});
    if (aggregated && m_binning == BarBinning::Mean)
        legend.push_back({QStringLiteral("bar = mean of bin, line = min–max total"), detail::LegendEntry::Swatch::Line,
                          theme().text, Qt::SolidLine, std::nullopt, Qt::NoBrush});
    for (const ReferenceLine &r : m_references)
        if (!m_yAxis.max || r.y <= *m_yAxis.max) // on the scale: drawn
            legend.push_back({(r.label.isEmpty() ? QString() : r.label + QLatin1Char(' ')) + formatValue(r.y, m_yAxis.format),
                              detail::LegendEntry::Swatch::Line, r.color.isValid() ? r.color : theme().reference, r.style,
                              std::nullopt, Qt::NoBrush});
    return legend;
}

detail::TickFunction StackedBarChart::categoryTicks(int first, int end) const
{
    return [this, first, end](double length, const QFontMetricsF &f) {
        m_bars = makeBars(first, end, length); // the plot's width decides the bins
        std::vector<detail::Tick> ticks;
        if (m_bars.empty())
            return ticks;
        // Every stride-th category (1, 2, 5, 10, 20…) under its place, labels a gap apart; a bin is
        // as wide as its categories, so the labels stay at round categories however they are binned.
        const qreal widest = std::max(f.horizontalAdvance(categoryLabel(first)), f.horizontalAdvance(categoryLabel(end - 1)));
        const int shown = end - first;
        const int stride = labelStride(length / shown, widest + 10);
        for (int c = first; c < end; c += stride)
            ticks.push_back({(c - first + 0.5) / shown, categoryLabel(c)});
        return ticks;
    };
}

void StackedBarChart::paintChart(QPainter &painter, const QRectF &rect) const
{
    const auto [first, end] = visibleRange();
    // The plot is about rect.width() wide; the bin size is settled after layout, but the y range
    // depends on it (means of bins), so estimate with the rect and recompute bins after layout.
    m_bars = makeBars(first, end, rect.width());
    const double y1 = yMax(m_bars);
    const bool aggregated = std::any_of(m_bars.begin(), m_bars.end(), [](const Bar &b) { return b.end - b.first > 1; });
    detail::FrameSpec spec;
    spec.title = title();
    spec.xTitle = m_xAxis.title;
    spec.yTitle = m_yAxis.title;
    spec.xGrid = false;
    spec.yTicks = detail::numericTicks(0, y1, m_yAxis.format, !m_yAxis.max.has_value(), true, &m_yTicks);
    spec.legend = legendEntries(aggregated);
    spec.xTicks = categoryTicks(first, end);
    if (aggregated && !m_binnedTitle.isEmpty()) {
        // The bins follow the plot's width, which the axis' title does not change: laid out once
        // (the ticks make the bars), the title says how many categories a bar holds.
        (void)detail::layoutFrame(painter.font(), rect, theme(), spec);
        if (!m_bars.empty() && m_bars.front().end - m_bars.front().first > 1)
            spec.xTitle = m_binnedTitle.arg(m_bars.front().end - m_bars.front().first);
    }
    m_frame = paintFrame(painter, rect, spec);
    const QRectF plot = m_frame.plot;
    if (m_bars.empty() || !hasData())
        return;
    Layout l;
    l.y0 = m_yTicks.min;
    l.sy = plot.height() / ((m_yTicks.max > m_yTicks.min ? m_yTicks.max : 1) - l.y0);
    l.pitch = plot.width() / static_cast<double>(m_bars.size());
    l.gap = l.pitch >= 6 ? std::max(1.0, l.pitch * 0.2) : 0; // touching bars when thin: gaps would alias
    const QFontMetricsF vfm(m_frame.tickFont);
    l.labelValues = l.pitch >= vfm.horizontalAdvance(QStringLiteral("00.0k")) + 4;
    painter.save();
    painter.setClipRect(plot.adjusted(-1, -vfm.height() - 2, 1, 1), Qt::IntersectClip);
    painter.setFont(m_frame.tickFont);
    for (size_t i = 0; i < m_bars.size(); ++i)
        paintBar(painter, plot, l, i);
    painter.restore();
    paintReferenceLines(painter, plot, l);
    paintHighlight(painter, plot, l);
}

void StackedBarChart::paintBar(QPainter &painter, const QRectF &plot, const Layout &l, size_t index) const
{
    const Theme &th = theme();
    Bar &b = m_bars[index];
    const double left = plot.left() + static_cast<double>(index) * l.pitch + l.gap / 2;
    const double w = l.pitch - l.gap;
    b.rect = QRectF(left, plot.bottom(), w, 0);
    if (!b.hasValue)
        return;
    const QFontMetricsF vfm(painter.font());
    double base = 0;
    for (int s = 0; s < segmentCount(); ++s) {
        const double v = b.segments[static_cast<size_t>(s)];
        const double top = base + v;
        const QRectF seg(QPointF(left, plot.bottom() - (top - l.y0) * l.sy), QPointF(left + w, plot.bottom() - (base - l.y0) * l.sy));
        const QColor fill = segmentColor(s);
        painter.setRenderHint(QPainter::Antialiasing, false);
        painter.fillRect(seg, fill);
        if (segmentPattern(s) != Qt::NoBrush && seg.width() >= 3)
            painter.fillRect(seg, QBrush(detail::textOn(fill), segmentPattern(s)));
        if (l.labelValues && seg.height() >= vfm.height() + 2) {
            painter.setPen(detail::textOn(fill));
            const QString text = formatValue(v, m_yAxis.format);
            const QRectF box(seg.center().x() - vfm.horizontalAdvance(text) / 2 - 2, seg.center().y() - vfm.height() / 2,
                             vfm.horizontalAdvance(text) + 4, vfm.height());
            painter.fillRect(box, fill); // readable over the hatch
            painter.drawText(box, Qt::AlignCenter, text);
        }
        base = top;
    }
    b.rect = QRectF(QPointF(left, plot.bottom() - (base - l.y0) * l.sy), QPointF(left + w, plot.bottom()));
    if (b.end - b.first > 1 && b.maxTotal > b.minTotal) {
        painter.setPen(QPen(th.text, 1));
        const double cx = left + w / 2;
        const double yMin = plot.bottom() - (b.minTotal - l.y0) * l.sy, yMax = plot.bottom() - (b.maxTotal - l.y0) * l.sy;
        painter.drawLine(QPointF(cx, yMin), QPointF(cx, yMax));
        painter.drawLine(QPointF(cx - std::max(1.0, w / 3), yMax), QPointF(cx + std::max(1.0, w / 3), yMax));
    }
    if (l.labelValues && segmentCount() > 1) {
        painter.setPen(th.text);
        painter.drawText(QRectF(left - l.gap / 2, b.rect.top() - vfm.height() - 1, l.pitch, vfm.height()), Qt::AlignCenter,
                         formatValue(base, m_yAxis.format));
    }
}

void StackedBarChart::paintReferenceLines(QPainter &painter, const QRectF &plot, const Layout &l) const
{
    painter.save();
    painter.setRenderHint(QPainter::Antialiasing, false);
    for (const ReferenceLine &r : m_references) {
        const double y = plot.bottom() - (r.y - l.y0) * l.sy;
        if (y < plot.top() - 0.5 || y > plot.bottom())
            continue;
        painter.setPen(detail::seriesPen(r.color.isValid() ? r.color : theme().reference, 1, r.style));
        painter.drawLine(QPointF(plot.left(), y), QPointF(plot.right(), y));
    }
    painter.restore();
}

void StackedBarChart::paintHighlight(QPainter &painter, const QRectF &plot, const Layout &l) const
{
    const auto it = std::find_if(m_bars.begin(), m_bars.end(), [&](const Bar &b) { return m_highlighted >= b.first && m_highlighted < b.end; });
    if (it == m_bars.end() || !it->hasValue)
        return;
    // The bar itself outlined, and pointed at from above (below the axis are the category labels,
    // above the bar its total): a full-height frame would read as a value.
    const QColor ink = theme().text;
    const double x = plot.left() + static_cast<double>(it - m_bars.begin()) * l.pitch;
    const double top = it->rect.top();
    painter.save();
    painter.setPen(QPen(ink, 1.5));
    painter.setBrush(Qt::NoBrush);
    painter.drawRect(QRectF(x, top - 1, std::max(l.pitch, 2.0), plot.bottom() - top + 1));
    const double cx = x + l.pitch / 2;
    const double tip = top - 3 - (l.labelValues && segmentCount() > 1 ? QFontMetricsF(m_frame.tickFont).height() + 1 : 0);
    painter.setBrush(ink);
    painter.drawPolygon(QPolygonF{QPointF(cx, tip), QPointF(cx - 5, tip - 7), QPointF(cx + 5, tip - 7)});
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
    if (!b.hasValue)
        return hit;
    hit.kind = Hit::Kind::Bar;
    hit.column = b.first;
    hit.columnEnd = b.end;
    hit.shown = b.shown;
    double totalV = 0;
    for (double v : b.segments)
        totalV += v;
    hit.y = totalV;
    const QString name = m_xAxis.title.isEmpty() ? QString() : m_xAxis.title + QLatin1Char(' ');
    if (b.end - b.first > 1)
        hit.text = name + categoryLabel(b.first) + QStringLiteral("–") + categoryLabel(b.end - 1) +
                   (b.shown >= 0 ? QStringLiteral(" (the largest: %1)").arg(categoryLabel(b.shown))
                                 : QStringLiteral(" (mean of %1)").arg(b.end - b.first));
    else
        hit.text = name + categoryLabel(b.first);
    for (int s = 0; s < segmentCount(); ++s)
        hit.text += QLatin1Char('\n') + m_segments[s] + QStringLiteral(": ") + formatValue(b.segments[static_cast<size_t>(s)], m_yAxis.format);
    hit.text += QStringLiteral("\ntotal: ") + formatValue(totalV, m_yAxis.format);
    if (b.end - b.first > 1 && b.shown < 0)
        hit.text += QStringLiteral(" (min ") + formatValue(b.minTotal, m_yAxis.format) + QStringLiteral(", max ") +
                    formatValue(b.maxTotal, m_yAxis.format) + QLatin1Char(')');
    return hit;
}

} // namespace cppl::charts
