// SPDX-License-Identifier: MIT
#include "charts/time_series_chart.h"

#include <QPaintDevice>
#include <QPainter>

#include <algorithm>
#include <cmath>
#include <limits>

namespace cppl::charts {

TimeSeriesChart::TimeSeriesChart(QObject *parent)
    : XYChart(parent)
{
}

void TimeSeriesChart::setSeries(std::vector<SeriesData> series)
{
    m_series = std::move(series);
    touch();
}

int TimeSeriesChart::addSeries(const QString &name)
{
    m_series.push_back({name, {}, {}});
    touch();
    return seriesCount() - 1;
}

void TimeSeriesChart::appendPoint(int index, double x, double y)
{
    SeriesData &s = m_series.at(static_cast<size_t>(index));
    s.x.push_back(x);
    s.y.push_back(y);
    bumpRevision();
}

void TimeSeriesChart::clearSeries()
{
    m_series.clear();
    m_highlighted = -1;
    touch();
}

void TimeSeriesChart::setHighlightedSeries(int index)
{
    if (index == m_highlighted)
        return;
    m_highlighted = index;
    Q_EMIT changed();
}

void TimeSeriesChart::setStyledSeriesLimit(int limit)
{
    m_styledLimit = limit;
    Q_EMIT changed();
}

std::pair<double, double> TimeSeriesChart::dataXRange() const
{
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    for (const SeriesData &s : m_series) {
        if (s.x.empty())
            continue;
        lo = std::min(lo, s.x.front());
        hi = std::max(hi, s.x.back());
    }
    if (!std::isfinite(lo))
        return {0, 1};
    return {xAxis().min.value_or(lo), xAxis().max.value_or(hi)};
}

bool TimeSeriesChart::hasData() const
{
    for (const SeriesData &s : m_series)
        if (std::any_of(s.y.begin(), s.y.end(), [](double v) { return std::isfinite(v); }))
            return true;
    return false;
}

void TimeSeriesChart::decimate(double x0, double x1, int columns) const
{
    if (m_cacheRevision == revision() && m_cacheX0 == x0 && m_cacheX1 == x1 && m_cacheColumns == columns)
        return;
    m_decimated.resize(m_series.size());
    for (size_t i = 0; i < m_series.size(); ++i) {
        const SeriesData &s = m_series[i];
        decimateMinMax(s.x.data(), s.y.data(), std::min(s.x.size(), s.y.size()), x0, x1, columns, m_decimated[i]);
    }
    // The data's y range over the window, once per decimation (not per paint: 3 M points).
    // Decimated x is a float, which can round above the double it came from: the window's
    // ends are compared as floats too, or the newest sample of a live chart (at x1) was left
    // out and a line leaving the range there was clipped instead of widening it.
    m_cacheY0 = std::numeric_limits<double>::infinity();
    m_cacheY1 = -m_cacheY0;
    const auto fx0 = static_cast<float>(x0), fx1 = static_cast<float>(x1);
    for (const auto &d : m_decimated)
        for (const DecimatedPoint &p : d)
            if (p.x >= fx0 && p.x <= fx1 && !std::isnan(p.y)) {
                m_cacheY0 = std::min<double>(m_cacheY0, p.y);
                m_cacheY1 = std::max<double>(m_cacheY1, p.y);
            }
    m_cacheRevision = revision();
    m_cacheX0 = x0;
    m_cacheX1 = x1;
    m_cacheColumns = columns;
}

std::vector<detail::LegendEntry> TimeSeriesChart::legendEntries() const
{
    const Theme &th = theme();
    std::vector<detail::LegendEntry> legend;
    if (seriesCount() <= m_styledLimit) {
        for (int i = 0; i < seriesCount(); ++i) {
            const SeriesStyle st = th.seriesStyle(i);
            legend.push_back({m_series[static_cast<size_t>(i)].name, detail::LegendEntry::Swatch::Line, st.color, st.dash,
                              st.marker, Qt::NoBrush});
        }
        return legend;
    }
    legend.push_back({QStringLiteral("%1 series (stronger shade = more of them)").arg(seriesCount()),
                      detail::LegendEntry::Swatch::Band, th.seriesStyle(0).color, Qt::SolidLine, std::nullopt, Qt::NoBrush});
    if (m_highlighted >= 0 && m_highlighted < seriesCount()) {
        const SeriesStyle st = th.seriesStyle(1);
        legend.push_back({m_series[static_cast<size_t>(m_highlighted)].name, detail::LegendEntry::Swatch::Line, st.color,
                          Qt::SolidLine, st.marker, Qt::NoBrush});
    }
    return legend;
}

void TimeSeriesChart::paintChart(QPainter &painter, const QRectF &rect) const
{
    const auto [x0, x1raw] = dataXRange();
    const double x1 = x1raw > x0 ? x1raw : x0 + 1;
    // Decimate at the device's pixel columns (2 per logical px at DPR 2); the width is not known
    // before the layout, so decimate for the widest plot this rect can hold and reuse the cache.
    const qreal dpr = painter.device() ? painter.device()->devicePixelRatioF() : 1.0;
    decimate(x0, x1, std::max(1, static_cast<int>(std::ceil(rect.width() * dpr))));
    detail::FrameSpec spec;
    spec.legend = legendEntries();
    const Plot axes = paintAxes(painter, rect, spec, x0, x1, m_cacheY0, m_cacheY1);

    painter.save();
    painter.setClipRect(axes.rect.adjusted(-1, -1, 1, 1), Qt::IntersectClip);
    painter.setRenderHint(QPainter::Antialiasing, true);
    const bool styled = seriesCount() <= m_styledLimit;
    if (!styled)
        paintDensity(painter, axes.rect, x0, x1, axes.y0, axes.y1);
    const Theme &th = theme();
    if (styled)
        for (size_t i = 0; i < m_decimated.size(); ++i)
            if (static_cast<int>(i) != m_highlighted)
                paintSeries(painter, axes, i, th.seriesStyle(static_cast<int>(i)), th.lineWidth * 1.5);
    if (m_highlighted >= 0 && m_highlighted < seriesCount()) {
        // In the density view the selected series takes the second colour, which stands out from the shade.
        const SeriesStyle st = th.seriesStyle(styled ? m_highlighted : 1);
        paintSeries(painter, axes, static_cast<size_t>(m_highlighted), st, th.lineWidth * 2.5);
    }
    painter.restore();
    paintReferences(painter, axes, m_series);
}

void TimeSeriesChart::paintSeries(QPainter &painter, const Plot &axes, size_t index, const SeriesStyle &style, qreal width) const
{
    const auto &d = m_decimated[index];
    // Dashes only on lines calm enough to show them: on a line that zigzags through every pixel
    // column they read as noise (and cost a polygon per dash); markers still tell it apart.
    const bool calm = polylineLength(d, axes.sx, axes.sy) < axes.rect.width() * 6;
    // Noisy: a 1 device px hairline takes the raster engine's line path; a wider pen is stroked
    // into polygons first (~10x the cost for thousands of zigzags). The highlighted series keeps
    // its width: it is one line, and it must stand out.
    painter.setPen(calm ? detail::seriesPen(style.color, width, style.dash)
                        : width >= 2 ? detail::seriesPen(style.color, width, Qt::SolidLine) : QPen(style.color, 0));
    // A noisy line is a texture: antialiasing it costs several times more and shows nothing more.
    painter.setRenderHint(QPainter::Antialiasing, calm);
    const qreal dpr = painter.device() ? painter.device()->devicePixelRatioF() : 1.0;
    QPolygonF poly, simplified;
    poly.reserve(static_cast<qsizetype>(d.size()));
    auto drawRun = [&] {
        if (poly.size() == 1)
            poly.append(poly.front() + QPointF(0.5, 0)); // a lone sample still shows
        if (calm && poly.size() > 2) {
            // A wide, dashed, antialiased pen is stroked per vertex (joins, dashes): a calm line of
            // a thousand samples needs a few dozen vertices to look the same. A quarter of a
            // device pixel: what simplifying may move it by is not visible.
            simplifyPolyline(poly.constData(), poly.size(), 0.25 / dpr, simplified);
            detail::drawPolylineChunked(painter, simplified);
        } else if (!poly.isEmpty()) {
            detail::drawPolylineChunked(painter, poly);
        }
        poly.clear();
    };
    for (const DecimatedPoint &p : d) {
        if (std::isnan(p.y)) {
            drawRun();
            continue;
        }
        poly.append(QPointF(axes.mapX(p.x), axes.mapY(p.y)));
    }
    drawRun();
    paintMarkers(painter, axes, index, style);
}

void TimeSeriesChart::paintMarkers(QPainter &painter, const Plot &axes, size_t index, const SeriesStyle &style) const
{
    // Markers every ~100 px, staggered per series so that overlapping lines keep theirs.
    const SeriesData &s = m_series[index];
    const QRectF &plot = axes.rect;
    const qreal stepPx = 100;
    for (qreal px = plot.left() + 20 + std::fmod(static_cast<qreal>(index) * 23.0, stepPx); px <= plot.right(); px += stepPx) {
        const double xv = axes.x0 + (px - plot.left()) / axes.sx;
        const auto it = std::lower_bound(s.x.begin(), s.x.end(), xv);
        if (it == s.x.end())
            break;
        const size_t k = static_cast<size_t>(it - s.x.begin());
        if (std::isnan(s.y[k]) || s.x[k] > axes.x1)
            continue;
        drawMarker(painter, QPointF(axes.mapX(s.x[k]), axes.mapY(s.y[k])), style.marker, theme().markerSize, style.color,
                   theme().plotBackground);
    }
}

void TimeSeriesChart::paintDensity(QPainter &painter, const QRectF &plot, double x0, double x1, double ya, double yb) const
{
    // Hundreds of series overplotted as lines are a solid smear (and 1024 x 3000 stroked segments
    // cost seconds): count instead how many series cross each device pixel and shade by the count.
    const qreal dpr = painter.device() ? painter.device()->devicePixelRatioF() : 1.0;
    const int w = std::max(1, static_cast<int>(std::ceil(plot.width() * dpr)));
    const int h = std::max(1, static_cast<int>(std::ceil(plot.height() * dpr)));
    const QColor color = theme().seriesStyle(0).color;
    if (m_densityRevision != m_cacheRevision || m_density.width() != w || m_density.height() != h ||
        m_densityRange != std::make_pair(ya, yb) || m_densityColor != color.rgba() || m_densityX != std::make_pair(x0, x1)) {
        std::vector<std::int32_t> diff(static_cast<size_t>(w) * static_cast<size_t>(h + 1), 0);
        const double sx = w / (x1 - x0), sy = h / (yb - ya);
        for (const auto &d : m_decimated)
            accumulateDensity(d, x0, sx, yb, sy, w, h, diff);
        std::int32_t maxCount = 1;
        for (int c = 0; c < w; ++c) {
            std::int32_t run = 0;
            std::int32_t *col = diff.data() + static_cast<size_t>(c) * static_cast<size_t>(h + 1);
            for (int r = 0; r < h; ++r) {
                run += col[r];
                col[r] = run;
                maxCount = std::max(maxCount, run);
            }
        }
        // Log shade with a floor, so that one series alone (a spike, an outlier) stays visible.
        std::vector<QRgb> shade(static_cast<size_t>(maxCount) + 1, 0);
        for (std::int32_t n = 1; n <= maxCount; ++n) {
            const double a = 0.3 + 0.7 * std::log1p(n) / std::log1p(maxCount);
            shade[static_cast<size_t>(n)] = qPremultiply(qRgba(color.red(), color.green(), color.blue(), static_cast<int>(a * 255)));
        }
        m_density = QImage(w, h, QImage::Format_ARGB32_Premultiplied);
        for (int r = 0; r < h; ++r) {
            auto *line = reinterpret_cast<QRgb *>(m_density.scanLine(r));
            for (int c = 0; c < w; ++c)
                line[c] = shade[static_cast<size_t>(diff[static_cast<size_t>(c) * static_cast<size_t>(h + 1) + static_cast<size_t>(r)])];
        }
        m_density.setDevicePixelRatio(dpr);
        m_densityRevision = m_cacheRevision;
        m_densityRange = {ya, yb};
        m_densityX = {x0, x1};
        m_densityColor = color.rgba();
    }
    // Unscaled (the image has the device pixel ratio and the plot size): the raster engine blits it.
    painter.drawImage(plot.topLeft(), m_density);
}

Hit TimeSeriesChart::hitTest(const QPointF &point) const
{
    Hit hit = nearestSample(m_series, point);
    if (hit.isValid()) {
        const SeriesData &s = m_series[static_cast<size_t>(hit.series)];
        hit.text = s.name + QLatin1Char('\n') + xText(hit.x) + QLatin1Char('\n') +
                   (yAxis().title.isEmpty() ? QStringLiteral("y") : yAxis().title) + QStringLiteral(": ") +
                   formatValue(hit.y, yAxis().format);
    }
    return hit;
}

} // namespace cppl::charts
