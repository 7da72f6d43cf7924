// SPDX-License-Identifier: MIT
#include "charts/chart.h"

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

void Chart::notifyChanged()
{
    Q_EMIT changed();
}

void Chart::paint(QPainter &painter, const QRectF &rect) const
{
    painter.save();
    if (m_theme.font)
        painter.setFont(*m_theme.font);
    painter.setClipRect(rect, Qt::IntersectClip);
    paintChart(painter, rect);
    painter.restore();
}

} // namespace cppl::charts
