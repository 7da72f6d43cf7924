// SPDX-License-Identifier: MIT
#pragma once

// What the Run page's hand-painted per-rank plots share (the rank heat map and the comm-share
// bars): one selected rank they outline and a click that reports a rank. Their title, legend and
// axes are laid out by the chart module's frame (charts/chart_frame.h), as on the line charts.

#include <QWidget>

namespace cppl::app {

class RankPlot : public QWidget
{
    Q_OBJECT

public:
    using QWidget::QWidget;
    void setSelectedRank(int rank);
    /// The plot area (inside the axes) as last painted; empty before the first paint.
    [[nodiscard]] QRectF plotRect() const noexcept { return m_plot; }

Q_SIGNALS:
    void rankClicked(int rank);

protected:
    int m_selected = -1;
    QRectF m_plot; // as last painted (clicks, tooltips)
};

} // namespace cppl::app
