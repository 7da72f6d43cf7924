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
 * 40 ms, through a single-shot timer (never processEvents). Hovering shows the chart's hit text as
 * a tooltip and emits hovered(); a click emits picked() so the app can select that rank elsewhere.
 * With autoTheme (the default) the chart follows the widget's palette, light or dark.
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

private:
    void scheduleRepaint();
    void applyPaletteTheme();

    QPointer<Chart> m_chart;
    QTimer m_repaintTimer;
    QElapsedTimer m_sinceRepaint;
    bool m_autoTheme = true;
    int m_paintCount = 0;
    QMetaObject::Connection m_changedConnection;
};

} // namespace cppl::charts

Q_DECLARE_METATYPE(cppl::charts::Hit)
