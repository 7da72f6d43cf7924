// SPDX-License-Identifier: MIT
// The Run page's arrangement as the page's width changes: the headline in one row or two, the rank
// table beside the Alerts and Logs tabs or the first of them (run_page.cpp holds the rest).
#include "run_page.h"

#include <QBoxLayout>
#include <QEvent>
#include <QLabel>
#include <QPushButton>
#include <QSplitter>
#include <QTabWidget>

#include <algorithm>

namespace cppl::app {

void RunPage::resizeEvent(QResizeEvent *event)
{
    QWidget::resizeEvent(event);
    placeHeadline();
    placeRankTable();
}

bool RunPage::event(QEvent *event)
{
    // A figure's new text asks for a new layout: whether the headline's one row still holds it.
    if (event->type() == QEvent::LayoutRequest)
        placeHeadline();
    return QWidget::event(event);
}

void RunPage::placeHeadline()
{
    // One row when every figure fits on one line in it: the PPL with tokens over rate and time
    // over telemetry beside it. Narrower, tokens and rate (and telemetry, unless only beside the
    // time it fits) go on a line under the PPL, the time beside the PPL: in a 1024 px window the
    // 1024-rank run's figures wrapped beside the PPL and the headline took three lines. The texts'
    // one-line widths decide, whatever the arrangement now, so it never flips back and forth on
    // its own; a new text (a longer count, the badge) may move the figures.
    const int spacing = m_head->spacing();
    const auto one = [](const QWidget *w) { return w->isHidden() ? 0 : w->sizeHint().width(); };
    const int lead = one(m_run) + one(m_stop) + one(m_phase) + one(m_ppl) + 3 * 12 + 4 * spacing;
    const int telemetry = one(m_telemetry);
    Headline want = Headline::OneRow;
    if (width() < lead + spacing + std::max(one(m_tokens), one(m_rate)) + spacing + std::max(one(m_eta), telemetry)) {
        const int below = one(m_tokens) + m_headBelow->spacing() + one(m_rate);
        want = telemetry > 0 && width() < below + m_headBelow->spacing() + telemetry
                       && width() >= lead + spacing + one(m_eta) + m_times->spacing() + telemetry
                   ? Headline::TelemetryBesideTime
                   : Headline::FiguresBelow;
    }
    if (want == m_headline)
        return;
    // Every item taken is ours to delete (a widget's item too: the widget itself stays, and is
    // added again below with a new item; LeakSanitizer found three items a rearrangement).
    while (QLayoutItem *item = m_headBelow->takeAt(0))
        delete item;
    m_figures->removeWidget(m_tokens);
    m_figures->removeWidget(m_rate);
    m_times->removeWidget(m_telemetry);
    m_headline = want;
    if (want == Headline::OneRow) {
        m_figures->addWidget(m_tokens);
        m_figures->addWidget(m_rate);
        m_times->setDirection(QBoxLayout::TopToBottom);
        m_times->addWidget(m_telemetry);
        return;
    }
    m_headBelow->addWidget(m_tokens);
    m_headBelow->addWidget(m_rate);
    m_times->setDirection(QBoxLayout::LeftToRight);
    (want == Headline::TelemetryBesideTime ? m_times : m_headBelow)->addWidget(m_telemetry);
    m_headBelow->addStretch(1);
}

void RunPage::placeRankTable()
{
    // The table's ten columns and an alert list whose messages can be read (its Time, Rank and
    // Kind columns take some 240 px) side by side need about 1,200 px: at a 1024 px window the
    // table scrolled sideways (Memory, Heard and Msgs lost out of sight) and the alerts showed
    // 60 px of their message. Narrower, the table is the first tab, each with the whole width.
    constexpr int kAlertsWidth = 360;
    const bool inTabs = width() < m_tableWidth + kAlertsWidth;
    // Side by side, the 2:1 split gives the table less than its columns need below ~1,270 px
    // (the default 1400 px window): the alerts give way, down to their minimum. Once the splitter
    // has its new size: resized while hidden (the window opened on another page) it still had its
    // old one here, and the table scrolled sideways in the 1400 px window.
    const auto tableColumns = [this] {
        const QList<int> sizes = m_bottom->sizes();
        if (!m_tableInTabs && sizes.size() == 2 && sizes[0] < m_tableWidth && sizes[0] + sizes[1] >= m_tableWidth + kAlertsWidth - m_bottom->handleWidth())
            m_bottom->setSizes({m_tableWidth, sizes[0] + sizes[1] - m_tableWidth});
    };
    if (inTabs == m_tableInTabs) {
        if (!inTabs)
            QMetaObject::invokeMethod(this, tableColumns, Qt::QueuedConnection);
        return;
    }
    m_tableInTabs = inTabs;
    if (inTabs) {
        m_tabs->insertTab(0, m_tableBox, tr("Ranks"));
        m_tabs->setCurrentIndex(0);
    } else {
        m_tabs->removeTab(m_tabs->indexOf(m_tableBox));
        m_bottom->insertWidget(0, m_tableBox);
        m_tableBox->show();
        m_bottom->setStretchFactor(0, 2); // the rank table needs its ten columns; alerts wrap
        m_bottom->setStretchFactor(1, 1);
        QMetaObject::invokeMethod(this, tableColumns, Qt::QueuedConnection);
    }
}

} // namespace cppl::app
