// SPDX-License-Identifier: MIT
#include "cluster_page.h"

#include "column_fit.h"
#include "host_dialogs.h"
#include "profile_model.h"

#include <QCheckBox>
#include <QComboBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QMenu>
#include <QSpinBox>
#include <QSplitter>
#include <QTableWidget>
#include <QStyle>
#include <QToolBar>
#include <QToolButton>
#include <QTreeView>
#include <QVBoxLayout>

#include <algorithm>
#include <set>

using namespace Qt::StringLiterals;

namespace cppl::app {

namespace {
QString qs(const std::string &s) { return QString::fromStdString(s); }
} // namespace

ClusterPage::ClusterPage(QWidget *parent)
    : QWidget(parent)
    , m_model(new ProfileModel(this))
{
    auto *layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    auto *bar = new QWidget(this);
    buildToolbar(bar);
    layout->addWidget(bar);
    m_split = new QSplitter(Qt::Horizontal, this);
    buildTree();
    buildSide();
    m_split->addWidget(m_tree);
    m_split->addWidget(m_side);
    m_split->setStretchFactor(0, 1);
    m_split->setStretchFactor(1, 0);
    // Never squeezed out of sight: placed below the form in a page not shown yet (Qt's default
    // size), the tree was collapsed and stayed so.
    m_split->setCollapsible(0, false);
    m_sideMaxWidth = m_side->fontMetrics().horizontalAdvance(QLatin1Char('x')) * 64;
    m_side->setMaximumWidth(m_sideMaxWidth);
    m_problems->setMaximumHeight(m_problems->fontMetrics().height() * 9);
    layout->addWidget(m_split, 1);
    connect(m_split, &QSplitter::splitterMoved, this, &ClusterPage::fitTreeColumns);
    connectModel();
    refreshProblems();
    refreshForm();
    refreshSlurmForm();
}

void ClusterPage::buildTree()
{
    m_tree = new QTreeView(m_split);
    m_tree->setObjectName(u"clusterTree"_s);
    m_tree->setModel(m_model);
    m_tree->setAlternatingRowColors(true);
    // Several hosts (Ctrl/Shift-click, or a group row) are edited together in the host form.
    m_tree->setSelectionMode(QAbstractItemView::ExtendedSelection);
    m_tree->setDragDropMode(QAbstractItemView::InternalMove);
    m_tree->setDragEnabled(true);
    m_tree->setAcceptDrops(true);
    m_tree->setDropIndicatorShown(true);
    m_tree->setDefaultDropAction(Qt::MoveAction);
    m_tree->setEditTriggers(QAbstractItemView::DoubleClicked | QAbstractItemView::EditKeyPressed);
    m_tree->header()->setStretchLastSection(true);
    m_tree->setUniformRowHeights(true);
}

void ClusterPage::buildSide()
{
    // The form beside the tree (wide) or below it (narrow, placeForm): two columns then, the host
    // form and the rest (Slurm job, problems, pre-flight) side by side.
    m_side = new QWidget(m_split);
    m_sideLayout = new QBoxLayout(QBoxLayout::TopToBottom, m_side);
    m_sideLayout->setContentsMargins(0, 0, 0, 0);
    m_hostBox = new QGroupBox(tr("Selected host"), m_side);
    buildHostForm(m_hostBox);
    m_sideLayout->addWidget(m_hostBox, 0, Qt::AlignTop);
    auto *rest = new QWidget(m_side);
    auto *restLayout = new QVBoxLayout(rest);
    restLayout->setContentsMargins(0, 0, 0, 0);
    m_sideLayout->addWidget(rest, 1);
    m_slurmBox = new QGroupBox(tr("Slurm job"), rest);
    m_slurmBox->setObjectName(u"slurmBox"_s);
    m_slurmBox->setToolTip(tr("What the job asks Slurm for. The host above is the login node: the job is submitted there "
                              "with sbatch, and its ranks are the job's tasks on the allocated nodes (docs/launching.md)."));
    buildSlurmForm(m_slurmBox);
    restLayout->addWidget(m_slurmBox);
    auto *envBox = new QGroupBox(tr("Environment of every host"), rest);
    auto *envLayout = new QVBoxLayout(envBox);
    QWidget *env = buildEnvEditor(envBox, u"env_cluster"_s,
                                  tr("Every rank's environment on every host (a host's own wins): the settings clusters need, such as "
                                     "NCCL_SOCKET_IFNAME, NCCL_IB_HCA, GLOO_SOCKET_IFNAME (docs/launching.md)"));
    m_clusterEnv = env->findChild<QTableWidget *>(u"env_cluster"_s);
    envLayout->addWidget(env);
    restLayout->addWidget(envBox);
    m_problemsTitle = new QLabel(rest);
    m_problemsTitle->setWordWrap(true);
    restLayout->addWidget(m_problemsTitle);
    m_problems = new QListWidget(rest);
    m_problems->setObjectName(u"problems"_s);
    m_problems->setWordWrap(true);
    m_problems->setToolTip(tr("Every problem of the profile; click one to select its row"));
    restLayout->addWidget(m_problems);
    buildPreflightReports(rest, restLayout);
    restLayout->addStretch(1);
}

void ClusterPage::connectModel()
{
    connect(m_model, &ProfileModel::editRefused, this, [this](const QString &m) {
        Q_EMIT failed(tr("Edit refused: %1").arg(m));
        refreshForm();
    });
    connect(m_model, &ProfileModel::profileEdited, this, [this] {
        refreshForm(); // what the selected hosts now share (and an edit from the tree)
        refreshProblems();
        syncGroupingControls();
        Q_EMIT profileChanged();
    });
    connect(m_model, &ProfileModel::groupingChanged, this,
            [this] { Q_EMIT info(tr("Grouping is now explicit: groups list their hosts by name.")); });
    connect(m_model, &QAbstractItemModel::modelReset, this, &ClusterPage::restoreExpansion);
    connect(m_tree->selectionModel(), &QItemSelectionModel::currentChanged, this, &ClusterPage::refreshForm);
    connect(m_tree->selectionModel(), &QItemSelectionModel::selectionChanged, this, &ClusterPage::refreshForm);
    connect(m_problems, &QListWidget::itemActivated, this, [this](QListWidgetItem *item) {
        const QModelIndex idx = m_model->indexOfProblem(item->text());
        if (idx.isValid()) {
            m_tree->setCurrentIndex(idx);
            m_tree->scrollTo(idx);
        }
    });
    connect(m_problems, &QListWidget::itemClicked, m_problems, &QListWidget::itemActivated);
}

void ClusterPage::resizeEvent(QResizeEvent *event)
{
    QWidget::resizeEvent(event);
    placeForm();
}

void ClusterPage::placeForm()
{
    // What the tree's columns need, as sized to their contents (the pre-flight column, last, at
    // least its header and "not checked"; a longer report elides, whole in its tooltip and under
    // the form), beside a form whose fields can be read. Side by side in a 1024 px window the tree
    // had ~420 px for ~700 px of columns and scrolled sideways; there the form goes below it, the
    // host form and the rest side by side.
    int tree = 2 * m_tree->frameWidth() + m_tree->style()->pixelMetric(QStyle::PM_ScrollBarExtent);
    for (int w : treeColumnWidths())
        tree += w;
    int form = fontMetrics().horizontalAdvance(QLatin1Char('x')) * 40;
    form = std::max(form, m_hostBox->minimumSizeHint().width());
    if (m_slurmBox->isVisibleTo(this))
        form = std::max(form, m_slurmBox->minimumSizeHint().width());
    const bool below = width() < tree + m_split->handleWidth() + form;
    // Below, the form at its height and the rest for the tree, once the splitter has its new
    // size (a page not shown yet gets its size later).
    const auto fitBelow = [this] {
        const QList<int> sizes = m_split->sizes();
        const int side = m_side->sizeHint().height();
        if (m_formBelow && sizes.size() == 2 && sizes[1] != side && sizes[0] + sizes[1] - side >= 6 * fontMetrics().height())
            m_split->setSizes({sizes[0] + sizes[1] - side, side});
    };
    if (below == m_formBelow) {
        const QList<int> sizes = m_split->sizes();
        if (!below && sizes.size() == 2 && sizes[0] < tree && sizes[0] + sizes[1] >= tree + form)
            // Beside, the tree keeps its columns while the form can give way (down to its minimum).
            m_split->setSizes({tree, sizes[0] + sizes[1] - tree});
        if (below)
            QMetaObject::invokeMethod(this, fitBelow, Qt::QueuedConnection);
        QMetaObject::invokeMethod(this, &ClusterPage::fitTreeColumns, Qt::QueuedConnection);
        return;
    }
    m_formBelow = below;
    m_side->setMaximumWidth(below ? QWIDGETSIZE_MAX : m_sideMaxWidth);
    m_sideLayout->setDirection(below ? QBoxLayout::LeftToRight : QBoxLayout::TopToBottom);
    m_sideLayout->setStretch(0, below ? 1 : 0); // below: two columns of equal width
    m_split->setOrientation(below ? Qt::Vertical : Qt::Horizontal);
    if (below) {
        QMetaObject::invokeMethod(this, fitBelow, Qt::QueuedConnection);
    } else {
        const int total = m_split->width();
        m_split->setSizes({total - std::min(m_sideMaxWidth, total - tree), std::min(m_sideMaxWidth, total - tree)});
    }
    QMetaObject::invokeMethod(this, &ClusterPage::fitTreeColumns, Qt::QueuedConnection);
}

QList<int> ClusterPage::treeColumnWidths() const
{
    // As resizeColumnToContents sizes them: the rows shown or the header, whichever is wider; the
    // pre-flight column, last, at least its header and "not checked" (a longer report elides,
    // whole in its tooltip and under the form).
    const auto *view = static_cast<const QAbstractItemView *>(m_tree); // sizeHintForColumn is public there
    const QHeaderView *header = m_tree->header();
    QList<int> widths;
    for (int c = 0; c < ProfileModel::ColPreflight; ++c)
        widths << (m_tree->isColumnHidden(c) ? 0 : std::max(view->sizeHintForColumn(c), header->sectionSizeHint(c)));
    // (Stretched, the header keeps the last section at its default size at least.)
    widths << std::max({header->sectionSizeHint(ProfileModel::ColPreflight), fontMetrics().horizontalAdvance(tr("not checked")) + 16,
                        header->defaultSectionSize()});
    return widths;
}

void ClusterPage::fitTreeColumns()
{
    // Each column as wide as its contents. Wider than the tree (a Slurm profile's "4 GPUs, allocated
    // at start", "login node: submits the job", an SSH target, in a 1024 px window even below the
    // form), the wider columns give way in proportion, down to 8 characters, and elide: the form
    // above the rows says the whole of the selected host.
    QList<int> widths = treeColumnWidths();
    const int room = m_tree->viewport()->width();
    const int floor = fontMetrics().averageCharWidth() * 8;
    // The pre-flight column (last, stretching) keeps its minimum; the others give way.
    int total = 0;
    std::vector<Shrinkable> columns;
    for (int c = 0; c < int(widths.size()); ++c) {
        total += widths[c];
        if (c < ProfileModel::ColPreflight)
            columns.push_back({&widths[c], floor});
    }
    shrinkInProportion(columns, total - room);
    for (int c = 0; c < ProfileModel::ColPreflight; ++c) // the last one stretches
        if (!m_tree->isColumnHidden(c))
            m_tree->header()->resizeSection(c, widths[c]);
}

void ClusterPage::buildToolbar(QWidget *bar)
{
    auto *layout = new QVBoxLayout(bar);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addLayout(buildProfileRow(bar));
    auto *tools = new QToolBar(bar);
    tools->setObjectName(u"clusterTools"_s);
    tools->setToolButtonStyle(Qt::ToolButtonTextOnly);
    addHostActions(tools);
    tools->addSeparator();
    addFileActions(tools);
    layout->addWidget(tools);

    connect(m_launcher, &QComboBox::activated, this, [this] {
        m_model->setLauncher(m_launcher->currentData().toString());
        syncGroupingControls(); // a refused switch shows the launcher the profile still has
        refreshForm();
        refreshSlurmForm();
    });
    connect(m_grouping, &QComboBox::activated, this, [this] {
        m_model->setGrouping(GroupingSpec::Mode(m_grouping->currentData().toInt()), m_groupSize->value());
    });
    connect(m_groupSize, &QSpinBox::editingFinished, this, [this] {
        if (GroupingSpec::Mode(m_grouping->currentData().toInt()) == GroupingSpec::Mode::BySize)
            m_model->setGrouping(GroupingSpec::Mode::BySize, m_groupSize->value());
    });
}

QHBoxLayout *ClusterPage::buildProfileRow(QWidget *bar)
{
    auto *row = new QHBoxLayout;
    m_nameLabel = new QLabel(bar);
    QFont f = m_nameLabel->font();
    f.setBold(true);
    m_nameLabel->setFont(f);
    row->addWidget(m_nameLabel);
    row->addStretch(1);
    row->addWidget(new QLabel(tr("Launcher"), bar));
    m_launcher = new QComboBox(bar);
    m_launcher->setObjectName(u"launcher"_s);
    m_launcher->addItem(tr("local (this machine)"), u"local"_s);
    m_launcher->addItem(tr("ssh"), u"ssh"_s);
    m_launcher->addItem(tr("slurm (sbatch on the login node)"), u"slurm"_s);
    m_launcher->setToolTip(tr("local: every rank is a process on this machine. ssh: one SSH session per host "
                              "starts its ranks (keys from ssh-agent or the host's identity file). slurm: the one "
                              "host is the login node; the profile's \"slurm\" object says what to ask for."));
    row->addWidget(m_launcher);
    row->addWidget(new QLabel(tr("Groups"), bar));
    m_grouping = new QComboBox(bar);
    m_grouping->addItem(tr("one per host"), int(GroupingSpec::Mode::ByHost));
    m_grouping->addItem(tr("by host label"), int(GroupingSpec::Mode::ByLabel));
    m_grouping->addItem(tr("consecutive ranks"), int(GroupingSpec::Mode::BySize));
    m_grouping->addItem(tr("explicit"), int(GroupingSpec::Mode::Explicit));
    m_grouping->setToolTip(tr("Node groups reduce inside first, then their leaders all-reduce. The grouping never "
                              "changes the result's bits, only how much traffic crosses groups."));
    row->addWidget(m_grouping);
    m_groupSize = new QSpinBox(bar);
    m_groupSize->setRange(1, 4096);
    m_groupSize->setPrefix(tr("size "));
    m_groupSize->setToolTip(tr("Ranks per group when grouping consecutive ranks"));
    row->addWidget(m_groupSize);
    return row;
}

void ClusterPage::addTool(QToolBar *tools, const QString &text, const QString &tip, const std::function<void()> &slot)
{
    QAction *a = tools->addAction(text);
    a->setToolTip(tip);
    connect(a, &QAction::triggered, this, slot);
}

void ClusterPage::addHostActions(QToolBar *tools)
{
    addTool(tools, tr("Add host"), tr("Add a host to the selected group"), [this] {
        const int g = selectedGroup();
        if (m_model->addHost(g, {}).isEmpty())
            m_tree->setCurrentIndex(m_model->indexOfHost(int(m_model->profile().hosts.size()) - 1));
    });
    addTool(tools, tr("Add group"), tr("Add an empty group (grouping becomes explicit); drag hosts onto it"), [this] { m_model->addGroup({}); });
    addTool(tools, tr("Remove"), tr("Remove the selected hosts, or the selected empty group"), [this] {
        if (const std::vector<int> hosts = selectedHosts(false); !hosts.empty())
            m_model->removeHosts(hosts);
        else if (selectedGroup() >= 0)
            m_model->removeGroup(selectedGroup());
    });
    addTool(tools, tr("Move up"), tr("Move the selected hosts one place up (ranks are numbered host by host)"),
            [this] { selectHosts(m_model->moveHosts(selectedHosts(false), -1)); });
    addTool(tools, tr("Move down"), tr("Move the selected hosts one place down"), [this] { selectHosts(m_model->moveHosts(selectedHosts(false), +1)); });
    addTool(tools, tr("Check hosts"), tr("Run the agent's pre-flight (versions, GPUs, NCCL, memory, paths) and show it per host"),
            [this] { Q_EMIT checkHostsRequested(); });
}

void ClusterPage::addFileActions(QToolBar *tools)
{
    addTool(tools, tr("Open profile…"), tr("Open a profile JSON (docs/profile.md)"), [this] {
        const QString p = QFileDialog::getOpenFileName(this, tr("Open profile"), {}, tr("Profiles (*.json);;All files (*)"));
        if (!p.isEmpty())
            openProfile(p);
    });
    addTool(tools, tr("Save profile…"), tr("Save the profile as JSON"), [this] {
        const QString p = QFileDialog::getSaveFileName(this, tr("Save profile"), m_path, tr("Profiles (*.json)"));
        if (!p.isEmpty())
            saveProfile(p);
    });
    // The hostfile's two actions behind one menu button: with all ten actions side by side the
    // toolbar was ~890 px wide, and a 1024 px window's page (~870 px) hid "Export hostfile…" behind
    // the toolbar's overflow chevron.
    auto *hostfile = new QToolButton(tools);
    hostfile->setObjectName(u"hostfileButton"_s);
    hostfile->setText(tr("Hostfile"));
    hostfile->setToolTip(tr("Import or export the hosts as a DeepSpeed hostfile (HOST slots=N [group=NAME])"));
    hostfile->setPopupMode(QToolButton::InstantPopup);
    hostfile->setToolButtonStyle(Qt::ToolButtonTextOnly);
    auto *hostfileMenu = new QMenu(hostfile);
    QAction *importAction = hostfileMenu->addAction(tr("Import hostfile…"));
    importAction->setToolTip(tr("Read a DeepSpeed hostfile (HOST slots=N [group=NAME])"));
    connect(importAction, &QAction::triggered, this, [this] {
        const QString p = QFileDialog::getOpenFileName(this, tr("Import hostfile"));
        if (!p.isEmpty())
            importHostfile(p);
    });
    QAction *exportAction = hostfileMenu->addAction(tr("Export hostfile…"));
    exportAction->setToolTip(tr("Write the hosts as a DeepSpeed hostfile with group= labels"));
    connect(exportAction, &QAction::triggered, this, [this] {
        const QString p = QFileDialog::getSaveFileName(this, tr("Export hostfile"));
        if (!p.isEmpty())
            exportHostfile(p);
    });
    hostfileMenu->setToolTipsVisible(true);
    hostfile->setMenu(hostfileMenu);
    tools->addWidget(hostfile);
}

void ClusterPage::buildHostForm(QGroupBox *box)
{
    auto *form = new QFormLayout(box);
    auto line = [&](const QString &label, const QString &tip, ProfileModel::HostField field) {
        auto *e = new QLineEdit(box);
        e->setToolTip(tip);
        e->setObjectName(u"host_"_s + QString::number(int(field)));
        form->addRow(label, e);
        connect(e, &QLineEdit::editingFinished, this, [this, e, field] {
            const std::vector<int> hosts = selectedHosts();
            if (m_updatingForm || hosts.empty())
                return;
            if (hosts.size() > 1 && !e->isModified())
                return; // left as it was ("differs" included): nothing to apply to all of them
            e->setModified(false);
            // Applied: profileEdited refreshes the form; refused: the value stays in its field,
            // with the message.
            m_model->setHostsField(hosts, field, e->text());
            selectHosts(hosts);
        });
        return e;
    };
    m_address = line(tr("Address"), tr("Where to connect; empty: the host's name"), ProfileModel::HostField::Address);
    m_label = line(tr("Group label"), tr("The hostfile's group=NAME (e.g. the rack); used when grouping by label"),
                   ProfileModel::HostField::Label);
    m_alias = line(tr("SSH alias"), tr("A Host entry of ~/.ssh/config (takes precedence over the address)"),
                   ProfileModel::HostField::SshAlias);
    m_user = line(tr("SSH user"), tr("Login user; empty: ~/.ssh/config or your user name"), ProfileModel::HostField::SshUser);
    m_port = line(tr("SSH port"), tr("1..65535 (default 22)"), ProfileModel::HostField::SshPort);
    m_identity = line(tr("Identity file"), tr("Private key; empty: ssh-agent, then ~/.ssh defaults. Passphrases are "
                                              "asked for when needed and never stored."),
                      ProfileModel::HostField::SshIdentity);
    m_password = new QCheckBox(tr("Allow password login after keys"), box);
    m_password->setObjectName(u"host_"_s + QString::number(int(ProfileModel::HostField::SshPassword)));
    m_password->setToolTip(tr("The password is asked for at launch in a masked prompt and never stored"));
    form->addRow(QString(), m_password);
    // stateChanged, not toggled: "differs" (partly checked) counts as checked, so its click to
    // checked toggles nothing.
    connect(m_password, &QCheckBox::stateChanged, this, [this](int state) {
        const std::vector<int> hosts = selectedHosts();
        if (m_updatingForm || hosts.empty() || state == Qt::PartiallyChecked)
            return;
        const bool on = state == Qt::Checked;
        m_password->setTristate(false); // "differs" is only shown, never chosen
        m_model->setHostsField(hosts, ProfileModel::HostField::SshPassword, on);
        selectHosts(hosts);
    });
    m_agent = line(tr("Agent"), tr("The agent executable on that host (a bare name is looked up on PATH, then next "
                                   "to the dashboard). For GPU nodes, scripts/build-agent.sh builds one against your "
                                   "torch package, installs it and prints this path"),
                   ProfileModel::HostField::Agent);
    m_workdir = line(tr("Working directory"), tr("Relative model and data paths resolve here; empty: home"),
                     ProfileModel::HostField::Workdir);
    QWidget *env = buildEnvEditor(box, u"env_host"_s,
                                  tr("This host's ranks' environment (its value wins over the cluster's): NCCL_SOCKET_IFNAME, NCCL_IB_HCA, "
                                     "LD_LIBRARY_PATH... Nothing of this machine's environment reaches the hosts; device visibility is "
                                     "the host's devices list, not a variable"));
    m_hostEnv = env->findChild<QTableWidget *>(u"env_host"_s);
    form->addRow(tr("Environment"), env);
}


void ClusterPage::restoreExpansion()
{
    // Resets collapse everything; a cluster of a few hosts reads best fully open, a big one with
    // its groups open and slots closed.
    const bool big = m_model->profile().hosts.size() > 16;
    for (int g = 0; g < m_model->groupCount(); ++g) {
        const QModelIndex gi = m_model->indexOfGroup(g);
        m_tree->expand(gi);
        if (!big)
            for (int r = 0; r < m_model->rowCount(gi); ++r)
                m_tree->expand(m_model->index(r, 0, gi));
    }
    placeForm(); // and the columns fitted to the tree
}

void ClusterPage::setProfile(const ClusterProfile &profile, const QString &path)
{
    m_path = path;
    m_model->setProfile(profile);
    m_nameLabel->setText(tr("Profile: %1").arg(profile.name.empty() ? tr("(unnamed)") : qs(profile.name)));
    m_nameLabel->setToolTip(path);
    syncGroupingControls();
    refreshForm();
    refreshSlurmForm();
}

ClusterProfile ClusterPage::profile() const
{
    return m_model->profile();
}

void ClusterPage::syncGroupingControls()
{
    const ClusterProfile p = m_model->profile();
    m_launcher->setCurrentIndex(m_launcher->findData(qs(p.launcher)));
    m_grouping->setCurrentIndex(m_grouping->findData(int(p.grouping.mode)));
    m_groupSize->setEnabled(p.grouping.mode == GroupingSpec::Mode::BySize);
    if (p.grouping.mode == GroupingSpec::Mode::BySize)
        m_groupSize->setValue(p.grouping.size);
}

void ClusterPage::refreshProblems()
{
    const QStringList problems = m_model->problems();
    m_problems->clear();
    m_problems->addItems(problems);
    m_problems->setVisible(!problems.isEmpty());
    m_problemsTitle->setText(problems.isEmpty() ? tr("✓ No problems: the profile is ready to run.")
                                                : tr("⚠ %1 to fix before Run:")
                                      .arg(problems.size() == 1 ? tr("1 problem") : tr("%1 problems").arg(problems.size())));
}

int ClusterPage::selectedHost() const
{
    return m_model->hostIndexOf(m_tree->currentIndex());
}

int ClusterPage::selectedGroup() const
{
    QModelIndex i = m_tree->currentIndex();
    while (i.isValid() && i.parent().isValid())
        i = i.parent();
    return i.isValid() ? i.row() : -1;
}

std::vector<int> ClusterPage::selectedHosts(bool withGroups) const
{
    std::set<int> hosts;
    for (const QModelIndex &i : m_tree->selectionModel()->selectedRows()) {
        if (const int h = m_model->hostIndexOf(i); h >= 0)
            hosts.insert(h);
        else if (withGroups && !i.parent().isValid())
            for (int r = 0; r < m_model->rowCount(i); ++r)
                if (const int gh = m_model->hostIndexOf(m_model->index(r, 0, i)); gh >= 0)
                    hosts.insert(gh);
    }
    if (hosts.empty() && selectedHost() >= 0)
        hosts.insert(selectedHost());
    return {hosts.begin(), hosts.end()};
}

void ClusterPage::selectHosts(const std::vector<int> &hosts)
{
    if (hosts.empty())
        return;
    QItemSelection selection;
    for (const int h : hosts)
        if (const QModelIndex i = m_model->indexOfHost(h); i.isValid())
            selection.select(i, i);
    QItemSelectionModel *sm = m_tree->selectionModel();
    sm->setCurrentIndex(m_model->indexOfHost(hosts.front()), QItemSelectionModel::NoUpdate);
    sm->select(selection, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
}

void ClusterPage::refreshForm()
{
    const std::vector<int> selected = selectedHosts();
    if (selected.size() > 1)
        return refreshFormForHosts(selected);
    const int h = selected.empty() ? -1 : selected.front();
    const ClusterProfile p = m_model->profile();
    m_updatingForm = true;
    m_hostBox->setEnabled(h >= 0);
    m_address->setEnabled(true);
    m_password->setTristate(false);
    for (QLineEdit *e : {m_address, m_label, m_alias, m_user, m_port, m_identity, m_agent, m_workdir})
        e->setPlaceholderText(QString());
    if (h >= 0 && h < int(p.hosts.size())) {
        const HostSpec &host = p.hosts[size_t(h)];
        m_hostBox->setTitle(tr("Host %1").arg(qs(host.name)));
        m_address->setText(qs(host.address));
        m_label->setText(qs(host.group));
        m_alias->setText(qs(host.ssh.alias));
        m_user->setText(qs(host.ssh.user));
        m_port->setText(QString::number(host.ssh.port));
        m_identity->setText(qs(host.ssh.identityFile));
        m_password->setChecked(host.ssh.passwordAuth);
        m_agent->setText(qs(host.agent));
        m_workdir->setText(qs(host.workdir));
        fillEnv(m_hostEnv, host.env);
    } else {
        m_hostBox->setTitle(tr("Select a host to edit it"));
        for (QLineEdit *e : {m_address, m_label, m_alias, m_user, m_port, m_identity, m_agent, m_workdir})
            e->clear();
        fillEnv(m_hostEnv, {});
    }
    m_hostEnv->setEnabled(true);
    fillEnv(m_clusterEnv, p.env);
    const bool ssh = p.launcher == "ssh" || p.launcher == "slurm"; // a Slurm login node is reached over SSH
    for (QWidget *w : {static_cast<QWidget *>(m_alias), static_cast<QWidget *>(m_user), static_cast<QWidget *>(m_port),
                       static_cast<QWidget *>(m_identity), static_cast<QWidget *>(m_password)})
        w->setEnabled(ssh);
    m_updatingForm = false;
}

void ClusterPage::refreshFormForHosts(const std::vector<int> &hosts)
{
    const ClusterProfile p = m_model->profile();
    m_updatingForm = true;
    m_hostBox->setEnabled(true);
    m_hostBox->setTitle(tr("%n hosts: an edit applies to all of them", nullptr, int(hosts.size())));
    // A value they share is shown; one that differs is empty, and stays as each host has it
    // unless typed over.
    auto show = [&](QLineEdit *e, auto value) {
        const QString first = value(p.hosts[size_t(hosts.front())]);
        const bool same = std::all_of(hosts.begin(), hosts.end(), [&](int h) { return value(p.hosts[size_t(h)]) == first; });
        e->setText(same ? first : QString());
        e->setPlaceholderText(same ? QString() : tr("differs"));
    };
    show(m_label, [](const HostSpec &h) { return qs(h.group); });
    show(m_user, [](const HostSpec &h) { return qs(h.ssh.user); });
    show(m_port, [](const HostSpec &h) { return QString::number(h.ssh.port); });
    show(m_identity, [](const HostSpec &h) { return qs(h.ssh.identityFile); });
    show(m_agent, [](const HostSpec &h) { return qs(h.agent); });
    show(m_workdir, [](const HostSpec &h) { return qs(h.workdir); });
    // Where to connect is each host's own.
    for (QLineEdit *e : {m_address, m_alias}) {
        e->clear();
        e->setPlaceholderText(tr("one per host"));
    }
    m_address->setEnabled(false);
    fillEnv(m_hostEnv, {}); // each host's own: edited one host at a time
    m_hostEnv->setEnabled(false);
    fillEnv(m_clusterEnv, p.env);
    const bool passwords = p.hosts[size_t(hosts.front())].ssh.passwordAuth;
    const bool samePassword = std::all_of(hosts.begin(), hosts.end(), [&](int h) { return p.hosts[size_t(h)].ssh.passwordAuth == passwords; });
    m_password->setTristate(!samePassword);
    m_password->setCheckState(!samePassword ? Qt::PartiallyChecked : passwords ? Qt::Checked : Qt::Unchecked);
    const bool ssh = p.launcher == "ssh" || p.launcher == "slurm";
    for (QWidget *w : {static_cast<QWidget *>(m_user), static_cast<QWidget *>(m_port), static_cast<QWidget *>(m_identity),
                       static_cast<QWidget *>(m_password)})
        w->setEnabled(ssh);
    m_alias->setEnabled(false);
    m_updatingForm = false;
}

} // namespace cppl::app
