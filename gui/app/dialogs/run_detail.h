// SPDX-License-Identifier: MIT
#pragma once

// A read-only view of one stored run (History > Open): setup and result, the per-rank summary,
// its stored samples as charts, logs and alerts.

#include "history/run_record.h"

#include <QDialog>

class QTabWidget;

namespace cppl::app {

class RunDetailDialog : public QDialog
{
    Q_OBJECT

public:
    explicit RunDetailDialog(const cppl::core::history::RunRecord &run, QWidget *parent = nullptr);
    [[nodiscard]] QTabWidget *tabs() const noexcept { return m_tabs; }

Q_SIGNALS:
    /// Export report… pressed: the run's report is wanted (History asks where and writes it).
    void exportRequested(const QString &runId);

private:
    QTabWidget *m_tabs = nullptr;
};

} // namespace cppl::app
