// SPDX-License-Identifier: MIT
#pragma once

// What the Run page's hand-painted per-rank plots share (the rank heat map and the comm-share
// bars): one selected rank they outline, a click that reports a rank, and a titled background.

#include <QWidget>

class QPainter;

namespace cppl::charts {
struct Theme;
}

namespace cppl::app {

class RankPlot : public QWidget
{
    Q_OBJECT

public:
    using QWidget::QWidget;
    void setSelectedRank(int rank);

Q_SIGNALS:
    void rankClicked(int rank);

protected:
    /// Fills the widget with the theme's background and draws @p title bold and centred at the top;
    /// the painter is left with the widget's own font.
    void paintTitled(QPainter &painter, const cppl::charts::Theme &theme, const QString &title);

    int m_selected = -1;
};

} // namespace cppl::app
