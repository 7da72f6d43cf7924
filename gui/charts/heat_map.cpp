// SPDX-License-Identifier: MIT
#include "charts/heat_map.h"

#include <QPaintDevice>
#include <QPainter>

#include <algorithm>
#include <cmath>
#include <limits>

namespace cppl::charts {

HeatMap::HeatMap(QObject *parent)
    : Chart(parent)
{
}

void HeatMap::setData(int rows, int columns, std::vector<float> values)
{
    m_rows = std::max(rows, 0);
    m_columns = std::max(columns, 0);
    m_values = std::move(values);
    m_values.resize(static_cast<size_t>(m_rows) * static_cast<size_t>(m_columns), std::numeric_limits<float>::quiet_NaN());
    touch();
}

void HeatMap::setValue(int row, int column, float v)
{
    if (row < 0 || row >= m_rows || column < 0 || column >= m_columns)
        return;
    m_values[static_cast<size_t>(row) * static_cast<size_t>(m_columns) + static_cast<size_t>(column)] = v;
    bumpRevision();
}

float HeatMap::value(int row, int column) const
{
    if (row < 0 || row >= m_rows || column < 0 || column >= m_columns)
        return std::numeric_limits<float>::quiet_NaN();
    return m_values[static_cast<size_t>(row) * static_cast<size_t>(m_columns) + static_cast<size_t>(column)];
}

void HeatMap::setColumnRange(double x0, double x1)
{
    m_x0 = x0;
    m_x1 = x1 > x0 ? x1 : x0 + 1;
    touch();
}

void HeatMap::setXAxis(const AxisSpec &axis)
{
    m_xAxis = axis;
    touch();
}

void HeatMap::setValueAxis(const AxisSpec &axis)
{
    m_valueAxis = axis;
    touch();
}

void HeatMap::setRowAxisTitle(const QString &title)
{
    m_rowTitle = title;
    touch();
}

void HeatMap::setRowLabels(QStringList labels)
{
    m_rowLabels = std::move(labels);
    touch();
}

void HeatMap::setAggregation(Aggregation aggregation)
{
    m_aggregation = aggregation;
    touch();
}

void HeatMap::setColorMap(const ColorMap &map)
{
    m_ownMap = map;
    m_map = &m_ownMap;
    touch();
}

std::pair<double, double> HeatMap::valueRange() const
{
    if (m_rangeRevision != revision()) {
        double lo = std::numeric_limits<double>::infinity(), hi = -lo;
        for (float v : m_values)
            if (!std::isnan(v)) {
                lo = std::min<double>(lo, v);
                hi = std::max<double>(hi, v);
            }
        if (!std::isfinite(lo)) {
            lo = 0;
            hi = 1;
        }
        m_range = {m_valueAxis.min.value_or(lo), m_valueAxis.max.value_or(hi)};
        if (!(m_range.second > m_range.first))
            m_range.second = m_range.first + (m_range.first == 0 ? 1 : std::abs(m_range.first) * 0.1);
        m_rangeRevision = revision();
    }
    return m_range;
}

QRgb HeatMap::colorFor(double v) const
{
    if (std::isnan(v))
        return theme().noData.rgb();
    const auto [lo, hi] = valueRange();
    return m_map->map((v - lo) / (hi - lo));
}

QString HeatMap::rowLabel(int row) const
{
    return row < m_rowLabels.size() ? m_rowLabels[row] : QString::number(row);
}

QImage HeatMap::buildImage(int imageRows, int imageColumns) const
{
    QImage image(imageColumns, imageRows, QImage::Format_RGB32);
    const auto [lo, hi] = valueRange();
    const double scale = 1.0 / (hi - lo);
    const QRgb noData = theme().noData.rgb();
    const auto &table = m_map->table();
    // Source rows/columns [r0, r1) x [c0, c1) fall into each image pixel; 1x1 when not shrinking.
    for (int r = 0; r < imageRows; ++r) {
        const int r0 = static_cast<int>(static_cast<long long>(r) * m_rows / imageRows);
        const int r1 = std::max(r0 + 1, static_cast<int>(static_cast<long long>(r + 1) * m_rows / imageRows));
        auto *line = reinterpret_cast<QRgb *>(image.scanLine(r));
        for (int c = 0; c < imageColumns; ++c) {
            const int c0 = static_cast<int>(static_cast<long long>(c) * m_columns / imageColumns);
            const int c1 = std::max(c0 + 1, static_cast<int>(static_cast<long long>(c + 1) * m_columns / imageColumns));
            double acc = m_aggregation == Aggregation::Min ? std::numeric_limits<double>::infinity()
                       : m_aggregation == Aggregation::Max ? -std::numeric_limits<double>::infinity()
                                                           : 0.0;
            int n = 0;
            for (int rr = r0; rr < r1; ++rr) {
                const float *src = m_values.data() + static_cast<size_t>(rr) * static_cast<size_t>(m_columns);
                for (int cc = c0; cc < c1; ++cc) {
                    const float v = src[cc];
                    if (std::isnan(v))
                        continue;
                    ++n;
                    switch (m_aggregation) {
                    case Aggregation::Min:
                        acc = std::min<double>(acc, v);
                        break;
                    case Aggregation::Max:
                        acc = std::max<double>(acc, v);
                        break;
                    case Aggregation::Mean:
                        acc += v;
                        break;
                    }
                }
            }
            if (n == 0) {
                line[c] = noData;
                continue;
            }
            if (m_aggregation == Aggregation::Mean)
                acc /= n;
            const double t = std::clamp((acc - lo) * scale, 0.0, 1.0);
            line[c] = table[static_cast<size_t>(t * (ColorMap::kSize - 1) + 0.5)];
        }
    }
    return image;
}

void HeatMap::paintChart(QPainter &painter, const QRectF &rect) const
{
    const Theme &th = theme();
    const auto [vlo, vhi] = valueRange();
    const QFont tickFont = detail::tickFont(painter.font());
    const QFontMetricsF tfm(tickFont);
    const QFont baseFont = painter.font();
    const QFontMetricsF fm(baseFont);

    // Colour bar ticks decide how much room the bar needs right of the plot.
    const Ticks barTicks = niceTicks(vlo, vhi, 6, m_valueAxis.format, false);
    qreal barLabelW = 0;
    for (double v : barTicks.values)
        barLabelW = std::max(barLabelW, tfm.horizontalAdvance(formatTick(v, barTicks.step, m_valueAxis.format, std::max(std::abs(vlo), std::abs(vhi)))));
    constexpr qreal kBarW = 14;
    const qreal reserve = kBarW + 4 + barLabelW + 6 + (m_valueAxis.title.isEmpty() ? 0 : fm.height() + 4);

    detail::FrameSpec spec;
    spec.title = title();
    spec.xTitle = m_xAxis.title;
    spec.yTitle = m_rowTitle;
    spec.reserveRight = reserve;
    spec.yGrid = false;
    spec.xGrid = false;
    Ticks xTicks;
    spec.xTicks = detail::numericTicks(m_x0, m_x1, m_xAxis.format, false, false, &xTicks);
    const int rows = m_rows;
    // Row labels at a "nice" stride (1, 2, 5, 10, 20, 50...) that leaves a label's height between them.
    spec.yTicks = [this, rows](double length, const QFontMetricsF &f) {
        std::vector<detail::Tick> ticks;
        if (rows <= 0)
            return ticks;
        const double perRow = length / rows;
        const int stride = labelStride(perRow, f.height() * 1.3);
        for (int r = 0; r < rows; r += stride)
            ticks.push_back({1.0 - (r + 0.5) / rows, rowLabel(r)});
        return ticks;
    };
    m_frame = detail::paintFrame(painter, rect, th, spec);
    const QRectF plot = m_frame.plot;

    if (m_rows > 0 && m_columns > 0) {
        const qreal dpr = painter.device() ? painter.device()->devicePixelRatioF() : 1.0;
        const int pxRows = std::max(1, static_cast<int>(std::ceil(plot.height() * dpr)));
        const int pxCols = std::max(1, static_cast<int>(std::ceil(plot.width() * dpr)));
        const int imageRows = std::min(m_rows, pxRows), imageColumns = std::min(m_columns, pxCols);
        if (m_imageRevision != revision() || m_image.height() != imageRows || m_image.width() != imageColumns) {
            m_image = buildImage(imageRows, imageColumns);
            m_imageRevision = revision();
        }
        painter.save();
        painter.setRenderHint(QPainter::SmoothPixmapTransform, false); // cells stay crisp, colours exact
        painter.drawImage(plot, m_image);
        painter.restore();
    }

    // Colour bar: the colour map from max (top) to min, with value ticks and the value title.
    const QRectF bar(m_frame.rightArea.left(), plot.top(), kBarW, plot.height());
    QImage gradient(1, ColorMap::kSize, QImage::Format_RGB32);
    for (int i = 0; i < ColorMap::kSize; ++i)
        gradient.setPixel(0, i, m_map->table()[static_cast<size_t>(ColorMap::kSize - 1 - i)]);
    painter.save();
    painter.setRenderHint(QPainter::SmoothPixmapTransform, true);
    painter.drawImage(bar, gradient);
    painter.setRenderHint(QPainter::Antialiasing, false);
    painter.setPen(QPen(th.axis, 1));
    painter.setBrush(Qt::NoBrush);
    painter.drawRect(bar);
    painter.setFont(tickFont);
    for (double v : barTicks.values) {
        const qreal y = bar.bottom() - (v - vlo) / (vhi - vlo) * bar.height();
        painter.setPen(QPen(th.axis, 1));
        painter.drawLine(QPointF(bar.right(), y), QPointF(bar.right() + 3, y));
        painter.setPen(th.mutedText);
        painter.drawText(QRectF(bar.right() + 5, y - tfm.height() / 2, barLabelW + 2, tfm.height()),
                         Qt::AlignLeft | Qt::AlignVCenter, formatTick(v, barTicks.step, m_valueAxis.format, std::max(std::abs(vlo), std::abs(vhi))));
    }
    if (!m_valueAxis.title.isEmpty()) {
        painter.setFont(baseFont);
        painter.setPen(th.text);
        painter.translate(bar.right() + 5 + barLabelW + 6, bar.center().y());
        painter.rotate(90);
        painter.drawText(QRectF(-bar.height() / 2, -fm.height(), bar.height(), fm.height()), Qt::AlignCenter,
                         fm.elidedText(m_valueAxis.title, Qt::ElideRight, bar.height()));
    }
    painter.restore();
}

Hit HeatMap::hitTest(const QPointF &point) const
{
    Hit hit;
    const QRectF plot = m_frame.plot;
    if (!plot.contains(point) || m_rows <= 0 || m_columns <= 0)
        return hit;
    hit.kind = Hit::Kind::Cell;
    hit.row = std::clamp(static_cast<int>((point.y() - plot.top()) / plot.height() * m_rows), 0, m_rows - 1);
    hit.column = std::clamp(static_cast<int>((point.x() - plot.left()) / plot.width() * m_columns), 0, m_columns - 1);
    hit.x = m_x0 + (hit.column + 0.5) * (m_x1 - m_x0) / m_columns;
    hit.y = value(hit.row, hit.column);
    const QString valueName = m_valueAxis.title.isEmpty() ? QStringLiteral("value") : m_valueAxis.title;
    hit.text = m_rowTitle + QLatin1Char(' ') + rowLabel(hit.row) + QLatin1Char('\n') +
               (m_xAxis.title.isEmpty() ? QStringLiteral("x") : m_xAxis.title) + QStringLiteral(": ") +
               formatValue(hit.x, m_xAxis.format) + QLatin1Char('\n') + valueName + QStringLiteral(": ") +
               (std::isnan(hit.y) ? QStringLiteral("no data") : formatValue(hit.y, m_valueAxis.format));
    return hit;
}

} // namespace cppl::charts
