// SPDX-License-Identifier: MIT
#pragma once

// Fits a table's columns to the width it has, as a desktop table does in a small window: every
// column as wide as its header and the rows shown need (the sort arrow's room only where it is
// drawn: QHeaderView's ResizeToContents keeps it on every column, ~26 px each), elastic columns
// (long names, whole in their tooltips) shrinking and eliding, optional columns hidden, lowest
// priority first, until nothing scrolls sideways. The header's context menu shows or hides any
// column; a column chosen there is never shown or hidden on its own again. A column the user
// resized keeps that width (a resize of the window or new rows do not undo it) until "Fit
// columns to the window" in the same menu.

#include <QHash>
#include <QList>
#include <QObject>
#include <QSet>

#include <vector>

class QTableView;
class QTimer;

namespace cppl::app {

/// A column that may give way: its width (changed in place) and the narrowest it may become.
struct Shrinkable
{
    int *width;
    int floor;
};

/// Takes up to @p excess pixels from @p columns, from each in proportion to its room above its
/// floor (never below it); returns the pixels taken. ColumnFit's elastic columns and the Cluster
/// page's tree columns give way so.
int shrinkInProportion(const std::vector<Shrinkable> &columns, int excess);

class ColumnFit : public QObject
{
    Q_OBJECT

public:
    struct Options
    {
        /// Columns that give way first, down to comfortChars average characters (from maxChars,
        /// or whole when there is room), and after the optional columns down to minChars.
        QList<int> elastic;
        int minChars = 10;
        int comfortChars = 14;
        int maxChars = 18;
        /// Columns hidden when the others still do not fit, the first first; shown again when
        /// there is room.
        QList<int> optional;
        /// Per elastic column, a text it keeps room for whole (History's run id: an ordinary id
        /// whole, a sweep's longer one elided); its floor instead of the characters above.
        QHash<int, QString> keepRoomFor;
    };

    /// Takes over @p view's column widths (the header's sections become Interactive).
    ColumnFit(QTableView *view, Options options);

    /// The columns hidden to fit (not those hidden from the header's menu).
    [[nodiscard]] QSet<int> fittedAway() const { return m_fittedAway; }
    /// Fits now (also done on every resize, model reset, new rows and sort).
    void fit();
    /// The columns the user resized by hand, with their widths (kept by fit()).
    [[nodiscard]] QHash<int, int> userWidths() const { return m_userWidth; }
    /// Forgets the hand-set widths and shown/hidden choices and fits again (the menu's "Fit columns to the window").
    void reset();

protected:
    bool eventFilter(QObject *watched, QEvent *event) override;

private:
    void showMenu(const QPoint &pos);
    [[nodiscard]] int naturalWidth(int column) const;
    /// The narrowest an elastic column gives way to at @p chars characters.
    [[nodiscard]] int floorWidth(int column, int chars) const;
    [[nodiscard]] int lastShown() const; // the last column shown, left to right

    QTableView *m_view = nullptr;
    const QObject *m_viewport = nullptr; // compared with, never called
    Options m_options;
    QTimer *m_later = nullptr;
    QSet<int> m_fittedAway;
    QSet<int> m_userShown;  // chosen in the menu: kept
    QSet<int> m_userHidden;
    QHash<int, int> m_userWidth; // resized by hand: kept
    bool m_fitting = false;
};

} // namespace cppl::app
