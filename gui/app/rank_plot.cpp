// SPDX-License-Identifier: MIT
#include "rank_plot.h"

#include "charts/chart_theme.h"

#include <QPainter>

namespace cppl::app {

void RankPlot::setSelectedRank(int rank)
{
    if (rank == m_selected)
        return; // every rebuild sets it again: no repaint for that
    m_selected = rank;
    QWidget::update();
}

void RankPlot::paintTitled(QPainter &painter, const cppl::charts::Theme &theme, const QString &title)
{
    painter.fillRect(rect(), theme.background);
    QFont bold = font();
    bold.setBold(true);
    painter.setFont(bold);
    painter.setPen(theme.text);
    painter.drawText(QRectF(0, 2, width(), QFontMetricsF(font()).height() + 4), Qt::AlignHCenter, title);
    painter.setFont(font());
}

} // namespace cppl::app
