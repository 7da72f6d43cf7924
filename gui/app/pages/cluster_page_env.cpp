// SPDX-License-Identifier: MIT
// The Cluster page's environment editors: the cluster's env, which every rank of every host gets,
// and the selected host's, which wins for a name both set; rows of name and value (docs/profile.md,
// "env"; docs/launching.md, "The ranks' environment": the launchers pass nothing else to the nodes).
#include "cluster_page.h"
#include "profile_model.h"

#include <QBoxLayout>
#include <QHeaderView>
#include <QPushButton>
#include <QTableWidget>

#include <set>

using namespace Qt::StringLiterals;

namespace cppl::app {

QWidget *ClusterPage::buildEnvEditor(QWidget *parent, const QString &name, const QString &tip)
{
    auto *box = new QWidget(parent);
    auto *layout = new QVBoxLayout(box);
    layout->setContentsMargins(0, 0, 0, 0);
    auto *table = new QTableWidget(0, 2, box);
    table->setObjectName(name);
    table->setHorizontalHeaderLabels({tr("Variable"), tr("Value")});
    table->horizontalHeader()->setStretchLastSection(true);
    table->verticalHeader()->hide();
    table->setToolTip(tip);
    table->setMaximumHeight(table->fontMetrics().height() * 8);
    layout->addWidget(table);
    auto *buttons = new QHBoxLayout;
    auto *add = new QPushButton(tr("Add variable"), box);
    add->setObjectName(name + u"_add"_s);
    auto *remove = new QPushButton(tr("Remove"), box);
    remove->setObjectName(name + u"_remove"_s);
    buttons->addWidget(add);
    buttons->addWidget(remove);
    buttons->addStretch(1);
    layout->addLayout(buttons);
    // A new row is applied once it has a name (an empty name is no variable yet).
    connect(add, &QPushButton::clicked, this, [this, table] {
        const bool was = std::exchange(m_updatingForm, true);
        const int row = table->rowCount();
        table->insertRow(row);
        table->setItem(row, 0, new QTableWidgetItem);
        table->setItem(row, 1, new QTableWidgetItem);
        m_updatingForm = was;
        table->setCurrentCell(row, 0);
        table->editItem(table->item(row, 0));
    });
    connect(remove, &QPushButton::clicked, this, [this, table] {
        std::set<int> rows;
        for (const QTableWidgetItem *item : table->selectedItems())
            rows.insert(item->row());
        if (rows.empty() && table->currentRow() >= 0)
            rows.insert(table->currentRow());
        for (auto it = rows.rbegin(); it != rows.rend(); ++it)
            table->removeRow(*it);
        applyEnv(table);
    });
    connect(table, &QTableWidget::itemChanged, this, [this, table] {
        if (!m_updatingForm)
            applyEnv(table);
    });
    return box;
}

void ClusterPage::applyEnv(QTableWidget *table)
{
    const bool host = table == m_hostEnv;
    const std::vector<int> hosts = selectedHosts();
    if (host && hosts.size() != 1)
        return;
    std::map<std::string, std::string> env;
    for (int r = 0; r < table->rowCount(); ++r) {
        const QTableWidgetItem *key = table->item(r, 0), *value = table->item(r, 1);
        const QString name = key ? key->text().trimmed() : QString();
        if (!name.isEmpty())
            env[name.toStdString()] = value ? value->text().toStdString() : std::string();
    }
    // Refused (a bad name, device visibility): the model says why and the form shows the profile again.
    m_model->setEnvironment(host ? hosts.front() : -1, env);
}

void ClusterPage::fillEnv(QTableWidget *table, const std::map<std::string, std::string> &env)
{
    const bool was = std::exchange(m_updatingForm, true);
    table->setRowCount(0);
    for (const auto &[k, v] : env) {
        const int row = table->rowCount();
        table->insertRow(row);
        table->setItem(row, 0, new QTableWidgetItem(QString::fromStdString(k)));
        table->setItem(row, 1, new QTableWidgetItem(QString::fromStdString(v)));
    }
    m_updatingForm = was;
}

} // namespace cppl::app
