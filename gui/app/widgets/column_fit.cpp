// SPDX-License-Identifier: MIT
#include "column_fit.h"

#include <QEvent>
#include <QHeaderView>
#include <QMenu>
#include <QScopedValueRollback>
#include <QStyleOptionHeader>
#include <QTableView>
#include <QTimer>

#include <algorithm>
#include <map>

namespace cppl::app {

int shrinkInProportion(const std::vector<Shrinkable> &columns, int excess)
{
    int give = 0;
    for (const Shrinkable &c : columns)
        give += std::max(0, *c.width - c.floor);
    if (excess <= 0 || give == 0)
        return 0;
    const int shrink = std::min(give, excess);
    int left = shrink;
    for (const Shrinkable &c : columns) {
        const int can = std::max(0, *c.width - c.floor);
        // In proportion, rounded up so that the last pixels are taken too; never past the floor.
        const int take = std::min({left, can, int(qint64(shrink) * can / give + 1)});
        *c.width -= take;
        left -= take;
    }
    return shrink - left;
}

ColumnFit::ColumnFit(QTableView *view, Options options)
    : QObject(view)
    , m_view(view)
    , m_options(std::move(options))
    , m_later(new QTimer(this))
{
    QHeaderView *header = view->horizontalHeader();
    header->setSectionResizeMode(QHeaderView::Interactive);
    header->setContextMenuPolicy(Qt::CustomContextMenu);
    connect(header, &QWidget::customContextMenuRequested, this, &ColumnFit::showMenu);
    m_later->setSingleShot(true);
    m_later->setInterval(0);
    connect(m_later, &QTimer::timeout, this, &ColumnFit::fit);
    view->viewport()->installEventFilter(this);
    m_viewport = view->viewport();
    const auto later = [this] { m_later->start(); };
    if (QAbstractItemModel *model = view->model()) {
        connect(model, &QAbstractItemModel::modelReset, this, later);
        connect(model, &QAbstractItemModel::rowsInserted, this, later);
        connect(model, &QAbstractItemModel::rowsRemoved, this, later);
        connect(model, &QAbstractItemModel::layoutChanged, this, later);
        connect(model, &QAbstractItemModel::dataChanged, this, later);
    }
    connect(header, &QHeaderView::sortIndicatorChanged, this, later);
    // A drag on a section's edge: the width is the user's from now on. Resizes of our own, and the
    // stretched last section following the viewport, are not.
    connect(header, &QHeaderView::sectionResized, this, [this, header](int column, int, int size) {
        if (m_fitting || size <= 0 || (header->stretchLastSection() && column == lastShown()))
            return;
        m_userWidth[column] = size;
    });
    m_later->start();
}

int ColumnFit::lastShown() const
{
    const QHeaderView *header = m_view->horizontalHeader();
    for (int visual = header->count() - 1; visual >= 0; --visual) {
        const int c = header->logicalIndex(visual);
        if (!header->isSectionHidden(c))
            return c;
    }
    return -1;
}

void ColumnFit::reset()
{
    m_userWidth.clear();
    m_userShown.clear();
    m_userHidden.clear();
    fit();
}

bool ColumnFit::eventFilter(QObject *watched, QEvent *event)
{
    // The viewport as it was when watched: while the view is destroyed (its scroll area part
    // gone, ASan/UBSan saw it) its widgets still send events here, and m_view->viewport() would
    // be a call into a destroyed part.
    if (watched == m_viewport && event->type() == QEvent::Resize) {
        if (m_fitting)
            m_later->start(); // a scroll bar came or went while fitting
        else
            fit();
    }
    return QObject::eventFilter(watched, event);
}

int ColumnFit::naturalWidth(int column) const
{
    // The header's label (QHeaderView's own measure of a section, without the sort arrow's room
    // unless the arrow is drawn on it) or the rows shown, whichever is wider.
    const QHeaderView *header = m_view->horizontalHeader();
    QStyleOptionHeader opt;
    opt.initFrom(header);
    opt.section = column;
    opt.orientation = Qt::Horizontal;
    opt.text = m_view->model()->headerData(column, Qt::Horizontal).toString();
    QSize size = header->style()->sizeFromContents(QStyle::CT_HeaderSection, &opt, QSize(), header);
    if (header->isSortIndicatorShown() && header->sortIndicatorSection() == column)
        size.rwidth() += size.height() + header->style()->pixelMetric(QStyle::PM_HeaderMargin, &opt, header);
    // A character's room either side, so that labels of narrow columns ("Ranks", "tok/s") do not
    // run into each other (the style's margin is a few pixels).
    size.rwidth() += 2 * header->fontMetrics().averageCharWidth();
    return std::max(size.width(), static_cast<const QAbstractItemView *>(m_view)->sizeHintForColumn(column)); // public there
}

int ColumnFit::floorWidth(int column, int chars) const
{
    const QFontMetrics fm = m_view->fontMetrics();
    const auto keep = m_options.keepRoomFor.constFind(column);
    if (keep == m_options.keepRoomFor.constEnd())
        return chars * fm.averageCharWidth();
    // The text, the cell's margins and the grid line, as the rows' own size hints measure them.
    return fm.horizontalAdvance(*keep) + 2 * (m_view->style()->pixelMetric(QStyle::PM_FocusFrameHMargin, nullptr, m_view) + 1)
           + (m_view->showGrid() ? 1 : 0);
}

void ColumnFit::fit()
{
    const QAbstractItemModel *model = m_view->model();
    if (m_fitting || !model)
        return;
    const QScopedValueRollback guard(m_fitting, true);
    m_later->stop();
    const int columns = model->columnCount();
    const int room = m_view->viewport()->width();
    const int ch = m_view->fontMetrics().averageCharWidth();
    std::map<int, int> width, whole; // the columns shown; the elastic ones' names whole
    int total = 0;
    for (int c = 0; c < columns; ++c) {
        if (m_userHidden.contains(c))
            continue;
        if (const auto user = m_userWidth.constFind(c); user != m_userWidth.constEnd()) {
            width[c] = *user; // as the user left it: neither elastic nor optional
            total += *user;
            continue;
        }
        int w = naturalWidth(c);
        if (m_options.elastic.contains(c)) {
            whole[c] = w;
            w = std::min(w, std::max(m_options.maxChars * ch, floorWidth(c, m_options.maxChars)));
        }
        width[c] = w;
        total += w;
    }
    // Elastic columns give way first, as far as a comfortable width, then optional columns go
    // (the first first, unless chosen in the menu), then the elastic ones give way to their minimum.
    const auto shrinkElastic = [&](int chars) {
        if (total <= room)
            return;
        std::vector<Shrinkable> give;
        for (int c : m_options.elastic)
            if (width.count(c) && !m_userWidth.contains(c))
                give.push_back({&width[c], floorWidth(c, chars)});
        total -= shrinkInProportion(give, total - room);
    };
    shrinkElastic(m_options.comfortChars);
    QSet<int> away;
    for (int c : m_options.optional) {
        if (total <= room)
            break;
        if (!width.count(c) || m_userShown.contains(c) || m_userWidth.contains(c))
            continue;
        total -= width[c];
        width.erase(c);
        away.insert(c);
    }
    shrinkElastic(m_options.minChars);
    // Room to spare: the elastic columns' names whole, before the last column stretches.
    for (int c : m_options.elastic) {
        if (total >= room || !width.count(c) || !whole.count(c) || width[c] >= whole[c])
            continue;
        const int grow = std::min(room - total, whole[c] - width[c]);
        width[c] += grow;
        total += grow;
    }
    m_fittedAway = away;
    QHeaderView *header = m_view->horizontalHeader();
    for (int c = 0; c < columns; ++c) {
        const bool hide = !width.count(c);
        if (m_view->isColumnHidden(c) != hide)
            m_view->setColumnHidden(c, hide);
        if (!hide && header->sectionSize(c) != width[c])
            header->resizeSection(c, width[c]); // the last one shown stretches, when the header does
    }
}

void ColumnFit::showMenu(const QPoint &pos)
{
    const QAbstractItemModel *model = m_view->model();
    if (!model)
        return;
    QMenu menu(m_view);
    int shown = 0;
    for (int c = 0; c < model->columnCount(); ++c)
        shown += m_view->isColumnHidden(c) ? 0 : 1;
    for (int c = 0; c < model->columnCount(); ++c) {
        QAction *a = menu.addAction(model->headerData(c, Qt::Horizontal).toString().replace(u'\n', u' '));
        a->setCheckable(true);
        a->setChecked(!m_view->isColumnHidden(c));
        a->setEnabled(!(a->isChecked() && shown == 1)); // one column stays
        connect(a, &QAction::toggled, this, [this, c](bool on) {
            (on ? m_userShown : m_userHidden).insert(c);
            (on ? m_userHidden : m_userShown).remove(c);
            fit();
        });
    }
    menu.addSeparator();
    QAction *fitAll = menu.addAction(tr("Fit columns to the window"));
    fitAll->setEnabled(!m_userWidth.isEmpty() || !m_userShown.isEmpty() || !m_userHidden.isEmpty());
    connect(fitAll, &QAction::triggered, this, &ColumnFit::reset);
    menu.exec(m_view->horizontalHeader()->mapToGlobal(pos));
}

} // namespace cppl::app
