// SPDX-License-Identifier: MIT
#pragma once

// Every stored run (docs/run-history.md) as a sortable, filterable table with Open (a read-only
// detail view), Re-run, Resume, Compare selected, Export report and Delete. The page reads through the window's
// RunHistory; it never writes except to delete.

#include "history/run_record.h"

#include <QWidget>

class QAction;
class QComboBox;
class QDateEdit;
class QLabel;
class QLineEdit;
class QPushButton;
class QTableView;
class QToolButton;
class QVBoxLayout;

namespace cppl::core::history {
class RunHistory;
}

namespace cppl::app {

class HistoryFilterModel;
class HistoryModel;

class HistoryPage : public QWidget
{
    Q_OBJECT

public:
    explicit HistoryPage(QWidget *parent = nullptr);

    /// The history to read (not owned; null: the page says why it is empty).
    void setHistory(cppl::core::history::RunHistory *history, const QString &unavailableReason = {});
    /// Reads the history again (after a run ends, a delete, an import).
    void refresh();
    /// Deletes without asking (the Delete button asks first); false with failed() when one is missing.
    bool deleteRuns(const QStringList &runIds);
    /// Run ids of the selected rows, in the view's order.
    [[nodiscard]] QStringList selectedRunIds() const;
    void selectRuns(const QStringList &runIds);

    [[nodiscard]] HistoryModel *model() const noexcept { return m_model; }
    [[nodiscard]] HistoryFilterModel *filter() const noexcept { return m_filter; }
    [[nodiscard]] QTableView *view() const noexcept { return m_view; }
    [[nodiscard]] QLineEdit *searchEdit() const noexcept { return m_search; }
    [[nodiscard]] QToolButton *resumeButton() const noexcept { return m_resume; }
    /// The selected run's resume state, as shown above the buttons (empty: none to show).
    [[nodiscard]] QString resumeText() const;
    /// Writes the report of @p runIds (one: a run report; several: a comparison) as stored, with
    /// the history's one-rank baselines; the files written, or empty with *error (Export report…).
    QStringList exportReport(const QStringList &runIds, const QString &path, const QString &format, QString *error) const;
    /// Export report…: asks where (a file dialog over @p dialogParent, this page by default) and
    /// exports, with info() or failed() saying what happened.
    void askExport(const QStringList &runIds, QWidget *dialogParent = nullptr);

Q_SIGNALS:
    void compareRequested(const QStringList &runIds);
    void rerunRequested(const cppl::core::history::RunRecord &run);
    /// Resume: finish the interrupted run from its last committed round, with the profile it ran
    /// (@p onProfileHosts false) or on the Cluster page's profile (true; its evaluation must be the run's).
    void resumeRequested(const cppl::core::history::RunRecord &run, bool onProfileHosts);
    void failed(const QString &text);
    void info(const QString &text);

private:
    void buildFilters(QVBoxLayout *outer);
    void buildTable(QVBoxLayout *outer);
    void buildButtons(QVBoxLayout *outer);
    void connectFilters();
    void connectButtons();
    /// Delete…: asks first (this cannot be undone), then deleteRuns().
    void confirmDelete();
    void applyFilters();
    void fillChoices();
    void updateButtons();
    void openSelected();

    cppl::core::history::RunHistory *m_history = nullptr;
    HistoryModel *m_model = nullptr;
    HistoryFilterModel *m_filter = nullptr;
    QTableView *m_view = nullptr;
    QLineEdit *m_search = nullptr;
    QComboBox *m_modelBox = nullptr, *m_dataBox = nullptr, *m_protocolBox = nullptr, *m_statusBox = nullptr, *m_nodesBox = nullptr;
    QDateEdit *m_from = nullptr, *m_to = nullptr;
    QLabel *m_count = nullptr;
    QLabel *m_empty = nullptr; // over the table while it shows no row: why, and what fills it
    QPushButton *m_open = nullptr, *m_rerun = nullptr, *m_compare = nullptr, *m_export = nullptr, *m_delete = nullptr;
    QPushButton *m_refresh = nullptr;
    QToolButton *m_resume = nullptr; // click: the run's own profile; its menu: the Cluster page's hosts
    QAction *m_resumeOnHosts = nullptr;
    QLabel *m_resumeInfo = nullptr;  // the selected run's progress, or why it cannot be resumed
};

} // namespace cppl::app
