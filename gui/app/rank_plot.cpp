// SPDX-License-Identifier: MIT
#include "rank_plot.h"

namespace cppl::app {

void RankPlot::setSelectedRank(int rank)
{
    if (rank == m_selected)
        return; // every rebuild sets it again: no repaint for that
    m_selected = rank;
    QWidget::update();
}

} // namespace cppl::app
