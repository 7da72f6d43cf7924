// SPDX-License-Identifier: MIT
#include "charts/chart.h"

#include "charts/chart_frame.h"

#include <QPainter>

#include <algorithm>
#include <cmath>
#include <limits>

namespace cppl::charts {

void decimateMinMax(const double *x, const double *y, size_t n, double x0, double x1, int columns,
                    std::vector<DecimatedPoint> &out)
{
    out.clear();
    if (n == 0 || columns <= 0 || !(x1 > x0))
        return;
    // One point beyond each edge keeps the line running to the border.
    size_t begin = static_cast<size_t>(std::lower_bound(x, x + n, x0) - x);
    size_t end = static_cast<size_t>(std::upper_bound(x, x + n, x1) - x);
    if (begin > 0)
        --begin;
    if (end < n)
        ++end;
    const double scale = columns / (x1 - x0);
    constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

    long long column = std::numeric_limits<long long>::min();
    size_t first = 0, last = 0, lo = 0, hi = 0;
    bool open = false;
    auto flush = [&] {
        if (!open)
            return;
        // In time order, without repeats: first, then min/max in the order they happened, last.
        size_t idx[4] = {first, std::min(lo, hi), std::max(lo, hi), last};
        size_t prev = std::numeric_limits<size_t>::max();
        for (size_t k : idx) {
            if (k != prev)
                out.push_back({static_cast<float>(x[k]), static_cast<float>(y[k])});
            prev = k;
        }
        open = false;
    };
    for (size_t i = begin; i < end; ++i) {
        const double v = y[i];
        if (std::isnan(v)) {
            flush();
            if (!out.empty() && !std::isnan(out.back().y))
                out.push_back({static_cast<float>(x[i]), kNaN});
            column = std::numeric_limits<long long>::min();
            continue;
        }
        const auto c = static_cast<long long>(std::floor((x[i] - x0) * scale));
        if (c != column || !open) {
            flush();
            column = c;
            first = last = lo = hi = i;
            open = true;
            continue;
        }
        last = i;
        if (v < y[lo])
            lo = i;
        if (v > y[hi])
            hi = i;
    }
    flush();
}


void accumulateDensity(const std::vector<DecimatedPoint> &points, double x0, double sx, double yTop, double sy,
                       int columns, int rows, std::vector<std::int32_t> &diff)
{
    // diff holds, per column, +1 at a span's first row and -1 after its last (columns x (rows + 1));
    // a prefix sum down each column then gives the counts. Spans of one series in one column are
    // merged first so that a series adds at most 1 to a pixel.
    int curCol = -1;
    double curLo = 0, curHi = 0;
    auto emit = [&] {
        if (curCol < 0 || curCol >= columns)
            return;
        const int lo = std::clamp(static_cast<int>(std::floor(curLo)), 0, rows - 1);
        const int hi = std::clamp(static_cast<int>(std::floor(curHi)), 0, rows - 1);
        if (curHi < 0 || curLo >= rows)
            return;
        diff[static_cast<size_t>(curCol) * static_cast<size_t>(rows + 1) + static_cast<size_t>(lo)] += 1;
        diff[static_cast<size_t>(curCol) * static_cast<size_t>(rows + 1) + static_cast<size_t>(hi) + 1] -= 1;
    };
    auto add = [&](int col, double a, double b) {
        if (a > b)
            std::swap(a, b);
        if (col == curCol) {
            curLo = std::min(curLo, a);
            curHi = std::max(curHi, b);
            return;
        }
        emit();
        curCol = col;
        curLo = a;
        curHi = b;
    };
    bool havePrev = false;
    double px = 0, py = 0;
    for (const DecimatedPoint &p : points) {
        if (std::isnan(p.y)) {
            havePrev = false;
            continue;
        }
        const double x = (p.x - x0) * sx, y = (yTop - p.y) * sy;
        if (!havePrev) {
            add(static_cast<int>(std::floor(x)), y, y);
            havePrev = true;
            px = x;
            py = y;
            continue;
        }
        const int c1 = static_cast<int>(std::floor(px)), c2 = static_cast<int>(std::floor(x));
        if (c1 == c2 || x <= px) {
            add(c2, py, y);
        } else {
            // The segment's row range within each column it crosses.
            const double slope = (y - py) / (x - px);
            for (int c = std::max(c1, -1); c <= std::min(c2, columns); ++c) {
                const double xa = std::max<double>(px, c), xb = std::min<double>(x, c + 1);
                add(c, py + (xa - px) * slope, py + (xb - px) * slope);
            }
        }
        px = x;
        py = y;
    }
    emit();
}

void simplifyPolyline(const QPointF *points, qsizetype count, qreal tolerance, QPolygonF &out)
{
    out.clear();
    if (count <= 2 || !(tolerance > 0)) {
        out.reserve(count);
        for (qsizetype i = 0; i < count; ++i)
            out.append(points[i]);
        return;
    }
    constexpr double kPi = 3.14159265358979323846;
    out.append(points[0]);
    QPointF anchor = points[0];
    qsizetype last = 0;       // the farthest point the current segment may end at
    bool cone = false;        // a direction has been set (a point beyond tolerance seen)
    double reference = 0;     // the angle the cone is measured from
    double lo = 0, hi = 0;    // the directions from anchor that pass near every point since
    double reach = 0;         // the largest distance from anchor so far
    for (qsizetype i = 1; i < count; ++i) {
        const QPointF d = points[i] - anchor;
        const double dist = std::hypot(d.x(), d.y());
        bool fits = dist <= tolerance && !cone; // near the anchor, before any direction is set
        if (!fits && dist > tolerance && dist >= reach - tolerance) {
            const double a = std::atan2(d.y(), d.x());
            const double spread = std::asin(std::min(1.0, tolerance / dist));
            if (!cone) {
                cone = true;
                reference = a;
                lo = -spread;
                hi = spread;
                fits = true;
            } else {
                const double rel = std::remainder(a - reference, 2 * kPi);
                if (rel >= lo && rel <= hi) {
                    lo = std::max(lo, rel - spread);
                    hi = std::min(hi, rel + spread);
                    fits = true;
                }
            }
        }
        if (fits) {
            last = i;
            reach = std::max(reach, dist);
            continue;
        }
        // The segment ends at the last point that fitted (always one after the anchor: the first
        // point after it fits); the next starts there and looks at this point again.
        out.append(points[last]);
        anchor = points[last];
        cone = false;
        reach = 0;
        i = last; // the loop's ++i comes back to the point after it
    }
    if (out.back() != points[count - 1])
        out.append(points[count - 1]);
}

double polylineLength(const std::vector<DecimatedPoint> &points, double sx, double sy)
{
    double len = 0;
    for (size_t i = 1; i < points.size(); ++i)
        if (!std::isnan(points[i].y) && !std::isnan(points[i - 1].y))
            len += std::hypot((points[i].x - points[i - 1].x) * sx, (points[i].y - points[i - 1].y) * sy);
    return len;
}

Chart::Chart(QObject *parent)
    : QObject(parent)
{
}

Chart::~Chart() = default;

void Chart::setTitle(const QString &title)
{
    m_title = title;
    Q_EMIT changed();
}

void Chart::setTheme(const Theme &theme)
{
    m_theme = theme;
    Q_EMIT changed();
}

bool Chart::scrollBy(int)
{
    return false;
}

void Chart::notifyChanged()
{
    Q_EMIT changed();
}

void Chart::touch()
{
    ++m_revision;
    Q_EMIT changed();
}

void Chart::setEmptyText(const QString &text)
{
    if (text == m_emptyText)
        return;
    m_emptyText = text;
    Q_EMIT changed();
}

void Chart::paint(QPainter &painter, const QRectF &rect) const
{
    painter.save();
    if (m_theme.font)
        painter.setFont(*m_theme.font);
    painter.setClipRect(rect, Qt::IntersectClip);
    m_lastEmptyText = QRectF();
    paintChart(painter, rect);
    if (!hasData() && !m_emptyText.isEmpty())
        paintEmptyText(painter);
    painter.restore();
}

detail::Frame Chart::paintFrame(QPainter &painter, const QRectF &rect, detail::FrameSpec &spec) const
{
    spec.title = m_title;
    detail::Frame frame = detail::paintFrame(painter, rect, m_theme, spec);
    m_lastPlot = frame.plot;
    m_lastLegend.clear();
    for (const detail::LegendEntry &e : spec.legend)
        m_lastLegend << e.label;
    m_lastXTicks.clear();
    for (const detail::Tick &t : frame.xTicks)
        m_lastXTicks << t.label;
    return frame;
}

void Chart::paintEmptyText(QPainter &painter) const
{
    // Empty axes alone read as "a run with nothing in it": the plot says that nothing has arrived
    // yet, or why. Wrapped inside the plot: on one line a narrow plot cut it at both ends.
    painter.setPen(m_theme.mutedText);
    painter.drawText(m_lastPlot.adjusted(8, 0, -8, 0), Qt::AlignCenter | Qt::TextWordWrap, m_emptyText, &m_lastEmptyText);
}

} // namespace cppl::charts
