// SPDX-License-Identifier: MIT
#pragma once

#include "charts/chart.h"

#include <QElapsedTimer>
#include <QPointer>
#include <QTimer>
#include <QWidget>

namespace cppl::charts {

/**
 * Hosts any Chart. Data changes (the chart's changed()) are coalesced: at most one repaint per
 * 40 ms (never processEvents). The first change after a quiet spell joins the paint pass the event
 * loop is about to make (the one a page's other widgets asked for with the same data), not a
 * second pass later; changes sooner wait for the rest of the 40 ms on a single-shot timer and
 * share that one. Hovering shows the chart's hit text as a tooltip (away from anything, the
 * widget's own toolTip(), what the chart shows) and emits hovered(); a click emits picked() so
 * the app can select that rank elsewhere. With autoTheme (the default) the chart follows the
 * widget's palette, light or dark.
 */
class ChartWidget : public QWidget
{
    Q_OBJECT

public:
    static constexpr int kMinRepaintIntervalMs = 40;

    explicit ChartWidget(QWidget *parent = nullptr);
    /// The widget takes ownership when the chart has no parent.
    explicit ChartWidget(Chart *chart, QWidget *parent = nullptr);
    ~ChartWidget() override;

    void setChart(Chart *chart);
    Chart *chart() const { return m_chart; }
    void setAutoTheme(bool on);
    bool autoTheme() const { return m_autoTheme; }
    /// Paint events so far (tests and the bench check the coalescing with it).
    int paintCount() const { return m_paintCount; }

    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;
    /// What the layout is asked for (default 640 x 360 and 240 x 160).
    void setSizeHints(QSize hint, QSize minimum);

Q_SIGNALS:
    void hovered(const cppl::charts::Hit &hit);
    void picked(const cppl::charts::Hit &hit);

protected:
    void paintEvent(QPaintEvent *event) override;
    void mouseMoveEvent(QMouseEvent *event) override;
    void mousePressEvent(QMouseEvent *event) override;
    void leaveEvent(QEvent *event) override;
    void wheelEvent(QWheelEvent *event) override;
    void changeEvent(QEvent *event) override;
    bool event(QEvent *event) override;

private:
    void scheduleRepaint();
    void applyPaletteTheme();

    QPointer<Chart> m_chart;
    QTimer m_repaintTimer;
    QElapsedTimer m_sinceRepaint;
    bool m_autoTheme = true;
    int m_paintCount = 0;
    QSize m_sizeHint{640, 360};
    QSize m_minimumSizeHint{240, 160};
    QMetaObject::Connection m_changedConnection;
};

} // namespace cppl::charts

Q_DECLARE_METATYPE(cppl::charts::Hit)
