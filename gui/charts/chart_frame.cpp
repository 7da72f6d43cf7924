// SPDX-License-Identifier: MIT
#include "charts/chart_frame.h"

#include "charts/color_map.h"

#include <QPainter>

#include <algorithm>
#include <cmath>

namespace cppl::charts::detail {
namespace {

constexpr qreal kPad = 8;
constexpr qreal kTickLen = 4;
constexpr qreal kSwatchWidth = 28;
constexpr int kMaxLegendRows = 3;

} // namespace

QFont scaledFont(QFont f, qreal factor, bool bold)
{
    if (f.pointSizeF() > 0)
        f.setPointSizeF(f.pointSizeF() * factor);
    else
        f.setPixelSize(std::max(1, static_cast<int>(std::lround(f.pixelSize() * factor))));
    f.setBold(bold);
    return f;
}

LegendLayout legendLayout(const QFontMetricsF &fm, const QRectF &area, const Theme &theme, const FrameSpec &spec)
{
    LegendLayout out;
    const size_t n = spec.legend.size();
    if (n == 0 && spec.legendOverflow <= 0)
        return out;
    const qreal rowH = std::max(fm.height(), theme.markerSize + 2) + 4;
    auto widthOf = [&](size_t i) { return kSwatchWidth + 5 + fm.horizontalAdvance(spec.legend[i].label) + 16; };
    auto moreText = [&](size_t shown) {
        const int hidden = static_cast<int>(n - shown) + spec.legendOverflow;
        return hidden > 0 ? QStringLiteral("+%1 more").arg(hidden) : QString();
    };
    // The first `shown` entries in rows, then "+N more" after them: the rows this takes.
    auto place = [&](size_t shown, LegendLayout *l) {
        qreal x = area.left();
        int row = 0;
        auto next = [&](qreal w) {
            if (x > area.left() && x + w > area.right()) {
                ++row;
                x = area.left();
            }
            const QRectF r(x, area.top() + row * rowH, w, rowH);
            x += w;
            return r;
        };
        for (size_t i = 0; i < shown; ++i) {
            const QRectF r = next(widthOf(i));
            if (l)
                l->entries.push_back(r);
        }
        const QString more = moreText(shown);
        if (!more.isEmpty()) {
            const QRectF r = next(fm.horizontalAdvance(more) + 4);
            if (l) {
                l->more = r;
                l->moreText = more;
            }
        }
        return row + 1;
    };
    // As many entries as fit in the rows allowed with the "+N more" that says how many are not
    // listed after them (it used to be drawn over the last row's first entries).
    size_t shown = n;
    while (shown > 0 && place(shown, nullptr) > kMaxLegendRows)
        --shown;
    if (shown + 1 == n && spec.legendOverflow <= 0 && place(n, nullptr) <= kMaxLegendRows + 1)
        shown = n; // "+1 more" stood for one entry: the entry says more in about the same room
    out.height = place(shown, &out) * rowH;
    return out;
}

QStringList titleLines(const QFontMetricsF &fm, const QString &title, qreal width)
{
    if (fm.horizontalAdvance(title) <= width)
        return {title};
    // As many words as fit on the first line; the rest on the second, elided if it must be.
    const QStringList words = title.split(QLatin1Char(' '));
    qsizetype fit = 0;
    QString first;
    for (; fit < words.size(); ++fit) {
        const QString next = fit == 0 ? words[0] : first + QLatin1Char(' ') + words[fit];
        if (fit > 0 && fm.horizontalAdvance(next) > width)
            break;
        first = next;
    }
    if (fit >= words.size()) // one word wider than the chart
        return {fm.elidedText(title, Qt::ElideRight, width)};
    const QString rest = words.mid(fit).join(QLatin1Char(' '));
    return {fm.elidedText(first, Qt::ElideRight, width), fm.elidedText(rest, Qt::ElideRight, width)};
}

QPen seriesPen(const QColor &color, qreal width, Qt::PenStyle dash)
{
    QPen pen(color, width, dash, Qt::FlatCap, Qt::RoundJoin);
    if (dash == Qt::DotLine)
        pen.setDashPattern({1.5, 2.5}); // Qt's dots vanish at 1 px width
    else if (dash == Qt::DashLine)
        pen.setDashPattern({6, 3});
    else if (dash == Qt::DashDotLine)
        pen.setDashPattern({6, 2.5, 1.5, 2.5});
    return pen;
}

void drawPolylineChunked(QPainter &painter, const QPolygonF &poly)
{
    // A wide or antialiased pen turns a polyline into one stroked outline; for a min/max-decimated
    // line that zigzags through every column it has thousands of self-intersections per scanline
    // and fills in seconds. Chunks of 64 points (sharing their end points) fill in milliseconds.
    constexpr qsizetype kChunk = 64;
    for (qsizetype i = 0; i + 1 < poly.size(); i += kChunk - 1)
        painter.drawPolyline(poly.constData() + i, static_cast<int>(std::min(kChunk, poly.size() - i)));
    if (poly.size() == 1)
        painter.drawPoint(poly.front());
}

QColor textOn(const QColor &fill)
{
    return oklabLightness(fill) > 0.62 ? QColor(0x10, 0x10, 0x10) : QColor(0xff, 0xff, 0xff);
}

void paintSwatch(QPainter &painter, const QRectF &box, const LegendEntry &e, const Theme &theme)
{
    painter.save();
    painter.setRenderHint(QPainter::Antialiasing, true);
    const QPointF c = box.center();
    switch (e.swatch) {
    case LegendEntry::Swatch::Line:
        painter.setPen(seriesPen(e.color, std::max<qreal>(theme.lineWidth, 1.5), e.dash));
        painter.drawLine(QPointF(box.left() + 1, c.y()), QPointF(box.right() - 1, c.y()));
        if (e.marker)
            drawMarker(painter, c, *e.marker, theme.markerSize, e.color, theme.background);
        break;
    case LegendEntry::Swatch::Fill:
    case LegendEntry::Swatch::Band: {
        const QRectF r(box.left() + 4, c.y() - 6, box.width() - 8, 12);
        painter.setPen(QPen(e.swatch == LegendEntry::Swatch::Band ? Qt::NoPen : QPen(theme.axis, 1)));
        painter.setBrush(e.color);
        painter.drawRect(r);
        if (e.pattern != Qt::NoBrush) {
            painter.setBrush(QBrush(textOn(e.color), e.pattern));
            painter.drawRect(r);
        }
        if (e.swatch == LegendEntry::Swatch::Band && e.marker) {
            painter.setPen(seriesPen(theme.median, 1.5, Qt::SolidLine));
            painter.drawLine(QPointF(r.left(), c.y()), QPointF(r.right(), c.y()));
        }
        break;
    }
    }
    painter.restore();
}

namespace {

/// Where everything but the data goes, before anything is painted.
struct Layout
{
    Frame frame;
    QFont titleFont;
    QStringList titleText; // the title's lines (wrapped, elided)
    qreal titleTop = 0;
    LegendLayout legend;
    qreal labelW = 0;        // the widest y tick label
    qreal yTitleSpan = 0;    // the length the y title is centred on, and its centre
    qreal yTitleCentre = 0;
};

/// Title and legend from the top; returns where the plot's top edge may start.
qreal layoutHeader(Layout &l, const QFont &base, const QRectF &rect, const Theme &theme, const FrameSpec &spec)
{
    qreal top = rect.top() + kPad;
    l.titleTop = top;
    if (!spec.title.isEmpty()) {
        l.titleFont = scaledFont(base, 1.15, true);
        const QFontMetricsF tf(l.titleFont);
        l.titleText = titleLines(tf, spec.title, rect.width() - 2 * kPad);
        for (qsizetype i = 0; i < l.titleText.size(); ++i)
            top += tf.height();
        top += 4;
    }
    const QRectF legendArea(rect.left() + kPad, top, rect.width() - 2 * kPad, rect.height());
    l.legend = legendLayout(QFontMetricsF(base), legendArea, theme, spec);
    if (l.legend.height > 0)
        top += l.legend.height + 4;
    return top + QFontMetricsF(l.frame.tickFont).height() / 2; // the top y label is centred on the plot's top edge
}

/// The plot between the header, the y labels (whose width follows from the plot's height) and the
/// room reserved right of it; then the x ticks along its width.
void layoutPlot(Layout &l, const QFont &base, const QRectF &rect, const FrameSpec &spec, qreal top)
{
    const QFontMetricsF fm(base), tickFm(l.frame.tickFont);
    qreal bottom = rect.bottom() - kPad - tickFm.height() - kTickLen - 2;
    if (!spec.xTitle.isEmpty())
        bottom -= fm.height() + 2;
    const qreal plotH = std::max<qreal>(bottom - top, 10);
    l.frame.yTicks = spec.yTicks ? spec.yTicks(plotH, tickFm) : std::vector<Tick>{};
    for (const Tick &t : l.frame.yTicks)
        l.labelW = std::max(l.labelW, tickFm.horizontalAdvance(t.label));
    qreal left = rect.left() + kPad + l.labelW + kTickLen + 4;
    if (!spec.yTitle.isEmpty())
        left += fm.height() + 4;
    // Half a tick label of room right of the plot, so the last x label is not cut.
    const qreal right = rect.right() - kPad - spec.reserveRight - tickFm.horizontalAdvance(QStringLiteral("00:00")) / 2;
    l.frame.plot = QRectF(QPointF(left, top), QPointF(std::max(right, left + 10), top + plotH));
    if (spec.reserveRight > 0)
        l.frame.rightArea = QRectF(l.frame.plot.right() + kPad, top, spec.reserveRight, plotH);
    l.frame.xTicks = spec.xTicks ? spec.xTicks(l.frame.plot.width(), tickFm) : std::vector<Tick>{};
}

/// The y axis's title, centred on the plot; a plot shorter than the title (a 1024 px window's
/// chart under three rows of legend read "deviati…") lends it the x axis's labels' height below
/// it, where the title's column is empty.
void layoutYTitle(Layout &l, const QFont &base, const QRectF &rect, const FrameSpec &spec)
{
    if (spec.yTitle.isEmpty())
        return;
    const QFontMetricsF fm(base), tickFm(l.frame.tickFont);
    const QRectF &p = l.frame.plot;
    l.yTitleSpan = p.height();
    l.yTitleCentre = p.center().y();
    if (fm.horizontalAdvance(spec.yTitle) > l.yTitleSpan) {
        const qreal below = std::min(rect.bottom() - kPad, p.bottom() + kTickLen + tickFm.height() + 3 + fm.height());
        l.yTitleSpan = std::max(l.yTitleSpan, below - p.top());
        l.yTitleCentre = p.top() + l.yTitleSpan / 2;
    }
    l.frame.yTitle = fm.elidedText(spec.yTitle, Qt::ElideRight, l.yTitleSpan);
}

Layout layoutAll(const QFont &base, const QRectF &rect, const Theme &theme, const FrameSpec &spec)
{
    Layout l;
    l.frame.tickFont = scaledFont(base, 0.9);
    const qreal top = layoutHeader(l, base, rect, theme, spec);
    layoutPlot(l, base, rect, spec, top);
    layoutYTitle(l, base, rect, spec);
    return l;
}

void paintTitle(QPainter &painter, const Layout &l, const QRectF &rect, const Theme &theme)
{
    if (l.titleText.isEmpty())
        return;
    const QFont base = painter.font();
    painter.setFont(l.titleFont);
    painter.setPen(theme.text);
    const QFontMetricsF tf(l.titleFont);
    qreal top = l.titleTop;
    for (const QString &line : l.titleText) {
        painter.drawText(QRectF(rect.left() + kPad, top, rect.width() - 2 * kPad, tf.height()), Qt::AlignLeft | Qt::AlignVCenter, line);
        top += tf.height();
    }
    painter.setFont(base);
}

void paintLegend(QPainter &painter, const Layout &l, const Theme &theme, const FrameSpec &spec)
{
    for (size_t i = 0; i < l.legend.entries.size(); ++i) {
        const QRectF &r = l.legend.entries[i];
        paintSwatch(painter, QRectF(r.left(), r.top() + 1, kSwatchWidth, r.height() - 2), spec.legend[i], theme);
        painter.setPen(theme.text);
        painter.drawText(QRectF(r.left() + kSwatchWidth + 5, r.top(), r.width() - kSwatchWidth - 5, r.height()),
                         Qt::AlignLeft | Qt::AlignVCenter, spec.legend[i].label);
    }
    if (!l.legend.moreText.isEmpty()) {
        painter.setPen(theme.mutedText);
        painter.drawText(l.legend.more, Qt::AlignLeft | Qt::AlignVCenter, l.legend.moreText);
    }
}

/// Plot background, grid and the two axis lines, snapped to the device's pixel grid so that 1 px
/// lines stay sharp at any DPR.
void paintGrid(QPainter &painter, const Frame &frame, const Theme &theme, const FrameSpec &spec)
{
    const QRectF &p = frame.plot;
    painter.fillRect(p, theme.plotBackground);
    painter.setRenderHint(QPainter::Antialiasing, false);
    painter.setPen(QPen(theme.grid, 1));
    if (spec.yGrid)
        for (const Tick &t : frame.yTicks)
            painter.drawLine(QPointF(p.left(), frame.mapY(t.pos)), QPointF(p.right(), frame.mapY(t.pos)));
    if (spec.xGrid)
        for (const Tick &t : frame.xTicks)
            painter.drawLine(QPointF(frame.mapX(t.pos), p.top()), QPointF(frame.mapX(t.pos), p.bottom()));
    painter.setPen(QPen(theme.axis, 1));
    painter.drawLine(p.bottomLeft(), p.bottomRight());
    painter.drawLine(p.bottomLeft(), p.topLeft());
}

void paintTicks(QPainter &painter, const Layout &l, const Theme &theme)
{
    const Frame &frame = l.frame;
    const QRectF &p = frame.plot;
    const QFontMetricsF tickFm(frame.tickFont);
    painter.setFont(frame.tickFont);
    for (const Tick &t : frame.yTicks) {
        const qreal y = frame.mapY(t.pos);
        painter.setPen(QPen(theme.axis, 1));
        painter.drawLine(QPointF(p.left() - kTickLen, y), QPointF(p.left(), y));
        painter.setPen(theme.mutedText);
        painter.drawText(QRectF(p.left() - kTickLen - 3 - l.labelW - 2, y - tickFm.height() / 2, l.labelW + 2, tickFm.height()),
                         Qt::AlignRight | Qt::AlignVCenter, t.label);
    }
    for (const Tick &t : frame.xTicks) {
        const qreal x = frame.mapX(t.pos);
        painter.setPen(QPen(theme.axis, 1));
        painter.drawLine(QPointF(x, p.bottom()), QPointF(x, p.bottom() + kTickLen));
        painter.setPen(theme.mutedText);
        const qreal w = tickFm.horizontalAdvance(t.label) + 2;
        painter.drawText(QRectF(x - w / 2, p.bottom() + kTickLen + 1, w, tickFm.height()), Qt::AlignCenter, t.label);
    }
}

void paintAxisTitles(QPainter &painter, const Layout &l, const QRectF &rect, const Theme &theme, const FrameSpec &spec)
{
    const QRectF &p = l.frame.plot;
    const QFontMetricsF fm(painter.font()), tickFm(l.frame.tickFont);
    painter.setPen(theme.text);
    if (!spec.xTitle.isEmpty())
        painter.drawText(QRectF(p.left(), p.bottom() + kTickLen + tickFm.height() + 3, p.width(), fm.height()), Qt::AlignCenter,
                         spec.xTitle);
    if (spec.yTitle.isEmpty())
        return;
    painter.save();
    painter.translate(rect.left() + kPad, l.yTitleCentre);
    painter.rotate(-90);
    painter.drawText(QRectF(-l.yTitleSpan / 2, 0, l.yTitleSpan, fm.height()), Qt::AlignCenter, l.frame.yTitle);
    painter.restore();
}

} // namespace

Frame layoutFrame(const QFont &font, const QRectF &rect, const Theme &theme, const FrameSpec &spec)
{
    return layoutAll(font, rect, theme, spec).frame;
}

Frame paintFrame(QPainter &painter, const QRectF &rect, const Theme &theme, const FrameSpec &spec)
{
    painter.fillRect(rect, theme.background);
    const QFont base = painter.font();
    const Layout l = layoutAll(base, rect, theme, spec);
    paintTitle(painter, l, rect, theme);
    paintLegend(painter, l, theme, spec);
    paintGrid(painter, l.frame, theme, spec);
    paintTicks(painter, l, theme);
    painter.setFont(base);
    paintAxisTitles(painter, l, rect, theme, spec);
    painter.setRenderHint(QPainter::Antialiasing, true);
    return l.frame;
}

namespace {

/// The widest label of @p ticks: what one label needs along a horizontal axis.
qreal widestLabel(const Ticks &ticks, ValueFormat format, double extent, const QFontMetricsF &fm)
{
    qreal w = 0;
    for (double v : ticks.values)
        w = std::max(w, fm.horizontalAdvance(formatTick(v, ticks.step, format, extent)));
    return w;
}

/// Ticks along @p length px: as many as their labels leave room for (vertical: two label heights
/// apart; horizontal: the widest label plus a gap).
Ticks fittingTicks(double lo, double hi, ValueFormat format, bool expand, bool vertical, double length, const QFontMetricsF &fm)
{
    const double extent = std::max(std::abs(lo), std::abs(hi));
    if (vertical)
        return niceTicks(lo, hi, std::clamp(static_cast<int>(length / (fm.height() * 2.2)) + 1, 2, 12), format, expand);
    // Widest plausible label at this range decides the spacing.
    const qreal labelW = widestLabel(niceTicks(lo, hi, 10, format, expand), format, extent, fm);
    const int maxCount = static_cast<int>(length / (labelW + 24)) + 1;
    Ticks t = niceTicks(lo, hi, std::clamp(maxCount, 2, 12), format, expand);
    if (expand || !(hi > lo))
        return t;
    // A narrow plot (a 1024 px window's heat map: ~150 px for 6 minutes) got one tick, "5:00",
    // from which no scale can be read: more steps while two or more fit with room between them.
    for (int count = std::clamp(maxCount + 1, 3, 12); t.values.size() < 2 && count <= 12; ++count) {
        const Ticks more = niceTicks(lo, hi, count, format, false);
        if (more.step * length / (hi - lo) < widestLabel(more, format, extent, fm) + 8)
            break; // labels would touch
        t = more;
    }
    return t;
}

} // namespace

TickFunction numericTicks(double lo, double hi, ValueFormat format, bool expand, bool vertical, Ticks *out)
{
    return [=](double length, const QFontMetricsF &fm) {
        const Ticks t = fittingTicks(lo, hi, format, expand, vertical, length, fm);
        *out = t;
        std::vector<Tick> ticks;
        const double span = t.max - t.min;
        for (double v : t.values) {
            const double pos = span > 0 ? (v - t.min) / span : 0.5;
            if (pos >= -1e-9 && pos <= 1 + 1e-9)
                ticks.push_back({pos, formatTick(v, t.step, format, std::max(std::abs(t.min), std::abs(t.max)))});
        }
        return ticks;
    };
}

std::vector<QRectF> paintReferenceLines(QPainter &painter, const Frame &frame, const Theme &theme,
                                        const std::vector<ReferenceLine> &lines, double y0, double y1, ValueFormat format,
                                        const CoversData &covers)
{
    std::vector<QRectF> boxes;
    if (lines.empty() || !(y1 > y0))
        return boxes;
    painter.save();
    painter.setFont(frame.tickFont);
    const QFontMetricsF fm(frame.tickFont);
    for (const ReferenceLine &line : lines) {
        const double t = (line.y - y0) / (y1 - y0);
        if (t < 0 || t > 1)
            continue;
        const qreal y = frame.mapY(t);
        const QColor c = line.color.isValid() ? line.color : theme.reference;
        painter.setRenderHint(QPainter::Antialiasing, false);
        painter.setPen(seriesPen(c, 1, line.style));
        painter.drawLine(QPointF(frame.plot.left(), y), QPointF(frame.plot.right(), y));
        const QString text = line.label.isEmpty() ? formatValue(line.y, format)
                                                  : line.label + QStringLiteral(" (") + formatValue(line.y, format) + QLatin1Char(')');
        const qreal w = fm.horizontalAdvance(text) + 8, h = fm.height();
        // Above or below the line, inside the plot; at its right end unless data runs through the
        // label there (an efficiency falling onto its threshold at the largest run).
        const qreal above = y - h - 2, below = y + 2;
        const bool roomAbove = above >= frame.plot.top(), roomBelow = below + h <= frame.plot.bottom();
        const qreal right = frame.plot.right() - w - 2, left = frame.plot.left() + 2;
        std::vector<QRectF> places;
        for (qreal x : {right, left}) {
            if (roomAbove)
                places.emplace_back(x, above, w, h);
            if (roomBelow || !roomAbove)
                places.emplace_back(x, roomBelow ? below : above, w, h);
        }
        QRectF box = places.front();
        if (covers) {
            const auto free = std::find_if(places.begin(), places.end(), [&](const QRectF &r) { return !covers(r); });
            if (free != places.end())
                box = *free;
        }
        QColor bg = theme.plotBackground;
        bg.setAlpha(220);
        painter.fillRect(box, bg);
        painter.setPen(c);
        painter.drawText(box, Qt::AlignCenter, text);
        boxes.push_back(box);
    }
    painter.restore();
    return boxes;
}

} // namespace cppl::charts::detail

namespace cppl::charts::detail {

QFont tickFont(const QFont &base)
{
    return scaledFont(base, 0.9);
}

void paintDecimated(QPainter &painter, const std::vector<DecimatedPoint> &points, const QRectF &plot, double x0,
                    double sx, double y0, double sy)
{
    QPolygonF poly;
    poly.reserve(static_cast<qsizetype>(points.size()));
    auto flush = [&] {
        if (poly.size() == 1)
            poly.append(poly.front() + QPointF(0.5, 0)); // a lone sample still shows
        if (!poly.isEmpty())
            detail::drawPolylineChunked(painter, poly);
        poly.clear();
    };
    for (const DecimatedPoint &p : points) {
        if (std::isnan(p.y)) {
            flush();
            continue;
        }
        poly.append(QPointF(plot.left() + (p.x - x0) * sx, plot.bottom() - (p.y - y0) * sy));
    }
    flush();
}

} // namespace cppl::charts::detail
