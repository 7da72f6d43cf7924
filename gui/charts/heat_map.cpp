// SPDX-License-Identifier: MIT
#include "charts/heat_map.h"

#include <QPaintDevice>
#include <QPainter>

#include <algorithm>
#include <cmath>
#include <limits>

namespace cppl::charts {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr qreal kBarW = 14;      // the colour bar
constexpr qreal kMarkStrip = 10; // what the row marks add between the plot and the colour bar
constexpr int kColumnRoom = 256; // columns are added room for in steps of this many

} // namespace

HeatMap::HeatMap(QObject *parent)
    : Chart(parent)
{
}

void HeatMap::touchLook()
{
    ++m_look;
    touch();
}

void HeatMap::setData(int rows, int columns, std::vector<float> values)
{
    m_rows = std::max(rows, 0);
    m_columns = std::max(columns, 0);
    m_stride = m_columns;
    m_values = std::move(values);
    m_values.resize(static_cast<size_t>(m_rows) * static_cast<size_t>(m_columns), kNaN);
    countCellsWithoutData();
    m_dirtyFrom = 0;
    touchLook();
}

void HeatMap::countCellsWithoutData()
{
    m_nanPerColumn.assign(static_cast<size_t>(m_columns), 0);
    m_nanCells = 0;
    for (int r = 0; r < m_rows; ++r) {
        const float *row = m_values.data() + static_cast<size_t>(r) * static_cast<size_t>(m_stride);
        for (int c = 0; c < m_columns; ++c)
            if (std::isnan(row[c])) {
                ++m_nanPerColumn[static_cast<size_t>(c)];
                ++m_nanCells;
            }
    }
}

void HeatMap::resizeData(int rows, int columns)
{
    rows = std::max(rows, 0);
    columns = std::max(columns, 0);
    if (rows == m_rows && columns == m_columns)
        return;
    const bool newRows = rows != m_rows;
    if (newRows || columns > m_stride) {
        // Room for a few hundred more columns, so that a live map gaining one at a time copies nothing.
        const int stride = (columns + kColumnRoom - 1) / kColumnRoom * kColumnRoom;
        std::vector<float> grown(static_cast<size_t>(rows) * static_cast<size_t>(stride), kNaN);
        for (int r = 0; r < std::min(rows, m_rows); ++r)
            std::copy_n(m_values.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(r) * static_cast<size_t>(m_stride)),
                        std::min(columns, m_columns),
                        grown.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(r) * static_cast<size_t>(stride)));
        m_values = std::move(grown);
        m_stride = stride;
    } else {
        for (int r = 0; r < rows; ++r) // cells a shrink left behind come back empty
            std::fill_n(m_values.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(r) * static_cast<size_t>(m_stride)
                                                                       + static_cast<size_t>(m_columns)),
                        std::max(0, columns - m_columns), kNaN);
    }
    m_dirtyFrom = std::min({m_dirtyFrom, m_columns, columns});
    if (newRows) { // every bin of rows changes
        m_rows = rows;
        m_columns = columns;
        countCellsWithoutData();
        touchLook();
        return;
    }
    for (int c = columns; c < m_columns; ++c)
        m_nanCells -= m_nanPerColumn[static_cast<size_t>(c)];
    m_nanPerColumn.resize(static_cast<size_t>(columns), rows); // new columns: no data yet
    m_nanCells += static_cast<std::int64_t>(std::max(0, columns - m_columns)) * rows;
    m_columns = columns;
    touch();
}

void HeatMap::setValue(int row, int column, float v)
{
    if (row < 0 || row >= m_rows || column < 0 || column >= m_columns)
        return;
    float &cell = m_values[static_cast<size_t>(row) * static_cast<size_t>(m_stride) + static_cast<size_t>(column)];
    if (std::isnan(cell) != std::isnan(v)) {
        const int d = std::isnan(v) ? 1 : -1;
        m_nanPerColumn[static_cast<size_t>(column)] += d;
        m_nanCells += d;
    }
    cell = v;
    m_dirtyFrom = std::min(m_dirtyFrom, column);
    bumpRevision();
}

float HeatMap::value(int row, int column) const
{
    if (row < 0 || row >= m_rows || column < 0 || column >= m_columns)
        return kNaN;
    return m_values[static_cast<size_t>(row) * static_cast<size_t>(m_stride) + static_cast<size_t>(column)];
}

void HeatMap::setColumnRange(double x0, double x1)
{
    m_x0 = x0;
    m_x1 = x1 > x0 ? x1 : x0 + 1;
    touch();
}

void HeatMap::setColumnPositions(std::vector<double> x)
{
    // Moves columns only: not one texel is coloured again for it.
    m_positions = std::move(x);
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
    touchLook();
}

void HeatMap::setRowAxisTitle(const QString &title)
{
    m_rowTitle = title;
    touch();
}

void HeatMap::setBinnedRowAxisTitle(const QString &title)
{
    m_binnedRowTitle = title;
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
    touchLook();
}

void HeatMap::setPartialBinsAsNoData(bool on)
{
    m_partialBinsAsNoData = on;
    touchLook();
}

void HeatMap::setColorMap(const ColorMap &map)
{
    m_ownMap = map;
    m_map = &m_ownMap;
    touchLook();
}

void HeatMap::setNoDataLabel(const QString &label)
{
    m_noDataLabel = label;
    touch();
}

void HeatMap::setRowMarks(std::vector<QChar> marks)
{
    if (marks == m_marks)
        return; // states are set on every update: a repaint only when one changed
    m_marks = std::move(marks);
    touch();
}

void HeatMap::setHighlightedRow(int row)
{
    if (row == m_highlighted)
        return;
    m_highlighted = row;
    touch();
}

std::pair<double, double> HeatMap::valueRange() const
{
    if (m_valueAxis.min && m_valueAxis.max && *m_valueAxis.max > *m_valueAxis.min)
        return {*m_valueAxis.min, *m_valueAxis.max}; // no pass over the data
    if (m_rangeRevision != revision()) {
        double lo = std::numeric_limits<double>::infinity(), hi = -lo;
        for (int r = 0; r < m_rows; ++r) {
            const float *row = m_values.data() + static_cast<size_t>(r) * static_cast<size_t>(m_stride);
            for (int c = 0; c < m_columns; ++c)
                if (!std::isnan(row[c])) {
                    lo = std::min<double>(lo, row[c]);
                    hi = std::max<double>(hi, row[c]);
                }
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

QImage HeatMap::cellImage(int imageRows, int maxColumns) const
{
    if (!hasData())
        return {};
    ensureImage(std::clamp(imageRows, 1, m_rows), std::max(1, maxColumns));
    return m_image.copy(0, 0, m_imageColumns, m_imageRows);
}

void HeatMap::ensureImage(int imageRows, int maxColumns) const
{
    const bool merged = m_positions.empty() && m_columns > maxColumns;
    const int texels = merged ? maxColumns : m_columns;
    const auto range = valueRange();
    const bool full = m_image.isNull() || imageRows != m_imageRows || m_look != m_imageLook || range != m_imageRange
                      || merged != m_imageMerged
                      || (merged ? texels != m_image.width() || m_imageRevision != revision() : m_columns > m_image.width());
    if (full) {
        // Merged columns are coloured anew on every change; a texel per column keeps room for more.
        const int width = merged ? texels : std::max(1, m_stride);
        m_image = QImage(width, imageRows, QImage::Format_ARGB32_Premultiplied);
        m_noDataTexels.assign(static_cast<size_t>(width), 0);
        m_imageRows = imageRows;
        m_imageLook = m_look;
        m_imageRange = range;
        m_imageMerged = merged;
        m_imageColumns = 0;
    }
    const int from = merged ? (full ? 0 : texels) : std::min({m_imageColumns, m_dirtyFrom, texels});
    if (from < texels) {
        if (from == 0)
            ++m_fullBuilds;
        colourColumns(from, texels, merged);
    }
    m_imageColumns = texels;
    m_dirtyFrom = m_columns;
    m_imageRevision = revision();
}

void HeatMap::colourColumns(int first, int end, bool merged) const
{
    // Texel column t holds data columns [c0[t], c1[t]): one each, or a share of them when merged.
    const int n = end - first;
    std::vector<int> c0(static_cast<size_t>(n)), c1(static_cast<size_t>(n));
    for (int t = 0; t < n; ++t) {
        const int texel = first + t;
        c0[static_cast<size_t>(t)] = merged ? static_cast<int>(static_cast<long long>(texel) * m_columns / end) : texel;
        c1[static_cast<size_t>(t)] = merged ? std::max(c0[static_cast<size_t>(t)] + 1, static_cast<int>(static_cast<long long>(texel + 1) * m_columns / end))
                                            : texel + 1;
    }
    const auto [lo, hi] = m_imageRange;
    const double scale = 1.0 / (hi - lo);
    const auto &table = m_map->table();
    const double start = m_aggregation == Aggregation::Min ? std::numeric_limits<double>::infinity()
                         : m_aggregation == Aggregation::Max ? -std::numeric_limits<double>::infinity()
                                                             : 0.0;
    std::vector<double> acc(static_cast<size_t>(n));
    std::vector<int> count(static_cast<size_t>(n));
    std::vector<char> gap(static_cast<size_t>(n));
    std::fill(m_noDataTexels.begin() + first, m_noDataTexels.begin() + end, 0);
    for (int b = 0; b < m_imageRows; ++b) {
        // The rows [r0, r1) fall into pixel row b: one each unless they outnumber the pixels.
        const int r0 = static_cast<int>(static_cast<long long>(b) * m_rows / m_imageRows);
        const int r1 = std::max(r0 + 1, static_cast<int>(static_cast<long long>(b + 1) * m_rows / m_imageRows));
        std::fill(acc.begin(), acc.end(), start);
        std::fill(count.begin(), count.end(), 0);
        std::fill(gap.begin(), gap.end(), 0);
        for (int r = r0; r < r1; ++r) {
            const float *src = m_values.data() + static_cast<size_t>(r) * static_cast<size_t>(m_stride);
            for (size_t t = 0; t < static_cast<size_t>(n); ++t)
                for (int c = c0[t]; c < c1[t]; ++c) {
                    const float v = src[c];
                    if (std::isnan(v)) {
                        gap[t] = 1;
                        continue;
                    }
                    ++count[t];
                    acc[t] = m_aggregation == Aggregation::Min   ? std::min<double>(acc[t], v)
                             : m_aggregation == Aggregation::Max ? std::max<double>(acc[t], v)
                                                                 : acc[t] + v;
                }
        }
        auto *line = reinterpret_cast<QRgb *>(m_image.scanLine(b)) + first;
        for (size_t t = 0; t < static_cast<size_t>(n); ++t) {
            if (count[t] == 0 || (m_partialBinsAsNoData && gap[t])) {
                line[t] = qRgba(0, 0, 0, 0); // transparent: the hatching under the image shows
                ++m_noDataTexels[static_cast<size_t>(first) + t];
                continue;
            }
            const double v = m_aggregation == Aggregation::Mean ? acc[t] / count[t] : acc[t];
            line[t] = table[static_cast<size_t>(std::clamp((v - lo) * scale, 0.0, 1.0) * (ColorMap::kSize - 1) + 0.5)];
        }
    }
}

qreal HeatMap::colorBarWidth(const QFontMetricsF &fm, const QFontMetricsF &tickFm) const
{
    const auto [vlo, vhi] = valueRange();
    const Ticks barTicks = niceTicks(vlo, vhi, 6, m_valueAxis.format, false);
    qreal labelW = 0;
    for (double v : barTicks.values)
        labelW = std::max(labelW, tickFm.horizontalAdvance(formatTick(v, barTicks.step, m_valueAxis.format, std::max(std::abs(vlo), std::abs(vhi)))));
    return kBarW + 4 + labelW + 6 + (m_valueAxis.title.isEmpty() ? 0 : fm.height() + 4) + (m_marks.empty() ? 0 : kMarkStrip);
}

detail::TickFunction HeatMap::rowTicks() const
{
    // Row labels at a "nice" stride (1, 2, 5, 10, 20, 50...) that leaves a label's height between
    // them; the highlighted row's label is always there, and its neighbours give way to it.
    return [this](double length, const QFontMetricsF &f) {
        std::vector<detail::Tick> ticks;
        if (m_rows <= 0)
            return ticks;
        const int stride = labelStride(length / m_rows, f.height() * 1.4);
        auto posOf = [&](int r) { return 1.0 - (r + 0.5) / m_rows; };
        const bool highlighted = m_highlighted >= 0 && m_highlighted < m_rows;
        for (int r = 0; r < m_rows; r += stride)
            if (!highlighted || std::abs(posOf(r) - posOf(m_highlighted)) * length >= f.height())
                ticks.push_back({posOf(r), rowLabel(r)});
        if (highlighted)
            ticks.push_back({posOf(m_highlighted), QStringLiteral("▶ ") + rowLabel(m_highlighted)});
        return ticks;
    };
}

detail::FrameSpec HeatMap::frameSpec(qreal reserveRight) const
{
    detail::FrameSpec spec;
    spec.title = title();
    spec.reserveRight = reserveRight;
    spec.xGrid = spec.yGrid = false;
    if (!hasData())
        return spec; // the plot says why (emptyText)
    spec.xTitle = m_xAxis.title;
    spec.yTitle = m_rowTitle;
    double x0 = m_x0, x1 = m_x1;
    if (!m_positions.empty()) {
        x0 = m_positions.front();
        x1 = m_positions.back() > x0 ? m_positions.back() : x0 + 1; // one column: an axis around it
    }
    spec.xTicks = detail::numericTicks(x0, x1, m_xAxis.format, false, false, &m_xTicks);
    spec.yTicks = rowTicks();
    // The legend lists what is drawn: the hatching only while some cell has no data.
    if (m_nanCells > 0 && !m_noDataLabel.isEmpty())
        spec.legend.push_back({m_noDataLabel, detail::LegendEntry::Swatch::Fill, theme().noData, Qt::SolidLine, std::nullopt,
                               Qt::BDiagPattern});
    return spec;
}

void HeatMap::paintChart(QPainter &painter, const QRectF &rect) const
{
    const QFontMetricsF fm(painter.font()), tickFm(detail::tickFont(painter.font()));
    detail::FrameSpec spec = frameSpec(colorBarWidth(fm, tickFm));
    // The image's pixel rows are decided before anything is painted: the row axis' title says how
    // many rows share one. No more than the plot has device pixels, so that none is dropped when
    // the image is drawn (the Min of a bin keeps a stalled rank in it).
    const qreal dpr = painter.device() ? painter.device()->devicePixelRatioF() : 1.0;
    const QRectF planned = detail::layoutFrame(painter.font(), rect, theme(), spec).plot;
    const int imageRows = std::clamp(static_cast<int>(std::floor(planned.height() * dpr)), 1, std::max(1, m_rows));
    const int binned = (m_rows + imageRows - 1) / imageRows;
    if (binned > 1 && !m_binnedRowTitle.isEmpty() && hasData())
        spec.yTitle = m_binnedRowTitle.arg(binned);
    m_frame = paintFrame(painter, rect, spec);
    if (!hasData())
        return;
    const QRectF plot = m_frame.plot;
    m_paintedRows = imageRows;
    ensureImage(imageRows, std::max(1, static_cast<int>(std::ceil(plot.width() * dpr))));
    paintCells(painter, plot);
    painter.save();
    painter.setRenderHint(QPainter::Antialiasing, false);
    painter.setPen(theme().axis);
    painter.setBrush(Qt::NoBrush);
    painter.drawRect(plot);
    painter.restore();
    paintMarks(painter, plot);
    paintHighlight(painter, plot);
    paintColorBar(painter, QRectF(m_frame.rightArea.left() + (m_marks.empty() ? 0 : kMarkStrip), plot.top(), kBarW, plot.height()));
}

double HeatMap::columnEdge(const QRectF &plot, int c, double dpr) const
{
    if (c <= 0)
        return plot.left();
    if (c >= m_columns)
        return plot.right();
    // Halfway between two samples, on device pixels, so that neighbouring runs meet without an
    // antialiased seam.
    const double t0 = m_positions.front(), scale = plot.width() / (m_positions.back() - t0);
    const double mid = (m_positions[static_cast<size_t>(c - 1)] + m_positions[static_cast<size_t>(c)]) / 2;
    return std::round((plot.left() + (mid - t0) * scale) * dpr) / dpr;
}

void HeatMap::paintCells(QPainter &painter, const QRectF &plot) const
{
    const Theme &th = theme();
    painter.save();
    if (std::any_of(m_noDataTexels.begin(), m_noDataTexels.begin() + m_imageColumns, [](int n) { return n > 0; })) {
        // Hatched as the legend's swatch is (paintSwatch), so no colour of the scale can be taken for it.
        painter.fillRect(plot, th.noData);
        painter.fillRect(plot, QBrush(detail::textOn(th.noData), Qt::BDiagPattern));
    }
    painter.setRenderHint(QPainter::SmoothPixmapTransform, false); // cells stay crisp, colours exact
    painter.setRenderHint(QPainter::Antialiasing, false);
    const bool positioned = !m_positions.empty() && m_columns >= 2 && m_positions.back() > m_positions.front()
                            && static_cast<int>(m_positions.size()) >= m_columns;
    if (!positioned) {
        painter.drawImage(plot, m_image, QRectF(0, 0, m_imageColumns, m_imageRows));
        painter.restore();
        return;
    }
    // Column c covers the x from halfway after the previous column to halfway before the next.
    // Runs of columns of one width (within half a pixel: regular samples) go in one drawImage.
    const double dpr = std::max(1.0, painter.device() ? painter.device()->devicePixelRatioF() : 1.0);
    const double tolerance = 0.5 / dpr;
    for (int first = 0; first < m_columns;) {
        const double left = columnEdge(plot, first, dpr);
        const double width = columnEdge(plot, first + 1, dpr) - left;
        int end = first + 1;
        while (end < m_columns && std::abs(columnEdge(plot, end + 1, dpr) - (left + width * (end + 1 - first))) <= tolerance)
            ++end;
        painter.drawImage(QRectF(left, plot.top(), columnEdge(plot, end, dpr) - left, plot.height()), m_image,
                          QRectF(first, 0, end - first, m_imageRows));
        first = end;
    }
    painter.restore();
}

void HeatMap::paintMarks(QPainter &painter, const QRectF &plot) const
{
    if (m_marks.empty())
        return;
    const QFontMetricsF fm(painter.font());
    const double rowH = plot.height() / m_rows;
    painter.setPen(theme().alert);
    for (int r = 0; r < std::min(m_rows, static_cast<int>(m_marks.size())); ++r) {
        const QChar mark = m_marks[static_cast<size_t>(r)];
        if (!mark.isNull() && mark != QLatin1Char(' '))
            painter.drawText(QRectF(plot.right() + 2, plot.top() + (r + 0.5) * rowH - fm.height() / 2, 14, fm.height()),
                             Qt::AlignCenter, QString(mark));
    }
}

void HeatMap::paintHighlight(QPainter &painter, const QRectF &plot) const
{
    if (m_highlighted < 0 || m_highlighted >= m_rows)
        return;
    const double rowH = plot.height() / m_rows;
    const double h = std::max(rowH, 2.0);
    const double y = plot.top() + (m_highlighted + 0.5) * rowH;
    painter.setPen(QPen(theme().text, 1.5));
    painter.setBrush(Qt::NoBrush);
    painter.drawRect(QRectF(plot.left() - 1, y - h / 2 - 1, plot.width() + 2, h + 2));
}

void HeatMap::paintColorBar(QPainter &painter, const QRectF &bar) const
{
    // The colour map from max (top) to min, with value ticks and the value title.
    const Theme &th = theme();
    const auto [vlo, vhi] = valueRange();
    const QFont baseFont = painter.font(), tickFont = detail::tickFont(baseFont);
    const QFontMetricsF fm(baseFont), tfm(tickFont);
    const Ticks barTicks = niceTicks(vlo, vhi, 6, m_valueAxis.format, false);
    qreal labelW = 0;
    for (double v : barTicks.values)
        labelW = std::max(labelW, tfm.horizontalAdvance(formatTick(v, barTicks.step, m_valueAxis.format, std::max(std::abs(vlo), std::abs(vhi)))));
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
        painter.drawText(QRectF(bar.right() + 5, y - tfm.height() / 2, labelW + 2, tfm.height()), Qt::AlignLeft | Qt::AlignVCenter,
                         formatTick(v, barTicks.step, m_valueAxis.format, std::max(std::abs(vlo), std::abs(vhi))));
    }
    if (!m_valueAxis.title.isEmpty()) {
        painter.setFont(baseFont);
        painter.setPen(th.text);
        painter.translate(bar.right() + 5 + labelW + 6, bar.center().y());
        painter.rotate(90);
        painter.drawText(QRectF(-bar.height() / 2, -fm.height(), bar.height(), fm.height()), Qt::AlignCenter,
                         fm.elidedText(m_valueAxis.title, Qt::ElideRight, bar.height()));
    }
    painter.restore();
}

int HeatMap::columnAt(double x) const
{
    const QRectF plot = m_frame.plot;
    const double f = (x - plot.left()) / plot.width();
    if (m_positions.empty() || static_cast<int>(m_positions.size()) < m_columns)
        return std::clamp(static_cast<int>(f * m_columns), 0, m_columns - 1);
    // The column whose x is nearest the pointer's (columns reach halfway to their neighbours).
    const double t0 = m_positions.front(), t1 = m_positions[static_cast<size_t>(m_columns - 1)];
    const double t = t1 > t0 ? t0 + f * (t1 - t0) : t0;
    const auto end = m_positions.begin() + m_columns;
    auto it = std::lower_bound(m_positions.begin(), end, t);
    if (it == end || (it != m_positions.begin() && t - *(it - 1) < *it - t))
        --it;
    return static_cast<int>(it - m_positions.begin());
}

Hit HeatMap::hitTest(const QPointF &point) const
{
    Hit hit;
    const QRectF plot = m_frame.plot;
    if (!plot.contains(point) || !hasData())
        return hit;
    hit.kind = Hit::Kind::Cell;
    const double f = (point.y() - plot.top()) / plot.height();
    hit.row = std::clamp(static_cast<int>(f * m_rows), 0, m_rows - 1);
    const int painted = std::max(1, m_paintedRows);
    const int b = std::clamp(static_cast<int>(f * painted), 0, painted - 1);
    hit.rowFirst = static_cast<int>(static_cast<long long>(b) * m_rows / painted);
    hit.rowEnd = std::max(hit.rowFirst + 1, static_cast<int>(static_cast<long long>(b + 1) * m_rows / painted));
    hit.column = columnAt(point.x());
    hit.x = static_cast<int>(m_positions.size()) >= m_columns && !m_positions.empty()
                ? m_positions[static_cast<size_t>(hit.column)]
                : m_x0 + (hit.column + 0.5) * (m_x1 - m_x0) / m_columns;
    hit.y = value(hit.row, hit.column);
    const QString valueName = m_valueAxis.title.isEmpty() ? QStringLiteral("value") : m_valueAxis.title;
    hit.text = m_rowTitle + QLatin1Char(' ') + rowLabel(hit.row) + QLatin1Char('\n') +
               (m_xAxis.title.isEmpty() ? QStringLiteral("x") : m_xAxis.title) + QStringLiteral(": ") +
               formatValue(hit.x, m_xAxis.format) + QLatin1Char('\n') + valueName + QStringLiteral(": ") +
               (std::isnan(hit.y) ? QStringLiteral("no data") : formatValue(hit.y, m_valueAxis.format));
    return hit;
}

} // namespace cppl::charts
