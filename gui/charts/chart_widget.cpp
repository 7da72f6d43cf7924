// SPDX-License-Identifier: MIT
#include "charts/chart_widget.h"

#include <QEvent>
#include <QHelpEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <QWheelEvent>

#include <cstdlib>

namespace cppl::charts {

ChartWidget::ChartWidget(QWidget *parent)
    : QWidget(parent)
{
    qRegisterMetaType<cppl::charts::Hit>();
    setMouseTracking(true);
    setAttribute(Qt::WA_OpaquePaintEvent); // the chart fills every pixel
    m_repaintTimer.setSingleShot(true);
    connect(&m_repaintTimer, &QTimer::timeout, this, [this] { update(); });
}

ChartWidget::ChartWidget(Chart *chart, QWidget *parent)
    : ChartWidget(parent)
{
    setChart(chart);
}

ChartWidget::~ChartWidget() = default;

void ChartWidget::setChart(Chart *chart)
{
    if (m_chart)
        disconnect(m_changedConnection);
    m_chart = chart;
    if (chart) {
        if (!chart->parent())
            chart->setParent(this);
        m_changedConnection = connect(chart, &Chart::changed, this, &ChartWidget::scheduleRepaint);
        applyPaletteTheme();
    }
    update();
}

void ChartWidget::setAutoTheme(bool on)
{
    m_autoTheme = on;
    applyPaletteTheme();
}

void ChartWidget::applyPaletteTheme()
{
    if (!m_autoTheme || !m_chart)
        return;
    Theme t = Theme::fromPalette(palette());
    t.font = m_chart->theme().font;
    m_chart->setTheme(t);
}

void ChartWidget::scheduleRepaint()
{
    // The first change after a quiet spell paints in the pass the event loop is about to make
    // anyway (a live page's snapshot asks for one), not in a second pass on a timer after it;
    // changes within 40 ms of the last paint wait for the rest of the interval and share that one.
    if (m_repaintTimer.isActive())
        return;
    const qint64 since = m_sinceRepaint.isValid() ? m_sinceRepaint.elapsed() : kMinRepaintIntervalMs;
    if (since >= kMinRepaintIntervalMs)
        update();
    else
        m_repaintTimer.start(static_cast<int>(kMinRepaintIntervalMs - since));
}

void ChartWidget::paintEvent(QPaintEvent *)
{
    ++m_paintCount;
    m_sinceRepaint.start();
    QPainter painter(this);
    if (!m_chart) {
        painter.fillRect(rect(), palette().window());
        return;
    }
    m_chart->paint(painter, QRectF(rect()));
}

void ChartWidget::mouseMoveEvent(QMouseEvent *event)
{
    if (!m_chart)
        return;
    const Hit hit = m_chart->hitTest(event->position());
    Q_EMIT hovered(hit);
    if (hit.isValid())
        QToolTip::showText(event->globalPosition().toPoint(), hit.text, this);
    else
        QToolTip::hideText();
}

void ChartWidget::mousePressEvent(QMouseEvent *event)
{
    if (!m_chart || event->button() != Qt::LeftButton)
        return;
    const Hit hit = m_chart->hitTest(event->position());
    if (hit.isValid())
        Q_EMIT picked(hit);
}

void ChartWidget::leaveEvent(QEvent *)
{
    QToolTip::hideText();
    Q_EMIT hovered(Hit{});
}

void ChartWidget::wheelEvent(QWheelEvent *event)
{
    // One step per wheel notch (120); a chart that does not scroll leaves the event to the parent.
    const QPoint delta = event->angleDelta();
    const int steps = (std::abs(delta.x()) > std::abs(delta.y()) ? delta.x() : -delta.y()) / 120;
    if (m_chart && steps != 0 && m_chart->scrollBy(steps))
        event->accept();
    else
        event->ignore();
}

void ChartWidget::changeEvent(QEvent *event)
{
    if (event->type() == QEvent::PaletteChange || event->type() == QEvent::FontChange)
        applyPaletteTheme();
    QWidget::changeEvent(event);
}

bool ChartWidget::event(QEvent *event)
{
    if (event->type() != QEvent::ToolTip)
        return QWidget::event(event);
    // What is under the pointer, else what the chart shows (the widget's own tooltip).
    const auto *help = static_cast<QHelpEvent *>(event);
    const Hit hit = m_chart ? m_chart->hitTest(QPointF(help->pos())) : Hit{};
    if (hit.isValid() && !hit.text.isEmpty())
        QToolTip::showText(help->globalPos(), hit.text, this);
    else if (!toolTip().isEmpty())
        QToolTip::showText(help->globalPos(), toolTip(), this);
    else
        QToolTip::hideText();
    return true;
}

QSize ChartWidget::sizeHint() const
{
    return m_sizeHint;
}

QSize ChartWidget::minimumSizeHint() const
{
    return m_minimumSizeHint;
}

void ChartWidget::setSizeHints(QSize hint, QSize minimum)
{
    m_sizeHint = hint;
    m_minimumSizeHint = minimum;
    updateGeometry();
}

} // namespace cppl::charts
