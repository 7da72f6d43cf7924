// SPDX-License-Identifier: MIT
#include "cluster_page.h"

#include "host_dialogs.h"
#include "profile_model.h"

#include "cppl/errors.h"
#include "cppl/hostfile.h"

#include <QCheckBox>
#include <QComboBox>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QJsonArray>
#include <QJsonDocument>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QSaveFile>
#include <QSpinBox>
#include <QSplitter>
#include <QToolBar>
#include <QTreeView>
#include <QVBoxLayout>

using namespace Qt::StringLiterals;

namespace cppl::app {

namespace {
QString qs(const std::string &s) { return QString::fromStdString(s); }

// Files are checked in order (exists -> readable -> format -> content) so the message names the
// first thing that is actually wrong.
std::optional<QByteArray> readFile(const QString &path, const QString &what, QString &error)
{
    const QFileInfo fi(path);
    if (!fi.exists()) {
        error = QObject::tr("%1: the %2 does not exist").arg(path, what);
        return std::nullopt;
    }
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) {
        error = QObject::tr("%1: cannot read the %2 (%3)").arg(path, what, f.errorString());
        return std::nullopt;
    }
    return f.readAll();
}

bool writeFile(const QString &path, const QByteArray &bytes, QString &error)
{
    QSaveFile f(path);
    if (!f.open(QIODevice::WriteOnly) || f.write(bytes) != bytes.size() || !f.commit()) {
        error = QObject::tr("%1: cannot write (%2); choose a writable folder").arg(path, f.errorString());
        return false;
    }
    return true;
}
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

    auto *split = new QSplitter(Qt::Horizontal, this);
    m_tree = new QTreeView(split);
    m_tree->setObjectName(u"clusterTree"_s);
    m_tree->setModel(m_model);
    m_tree->setAlternatingRowColors(true);
    m_tree->setSelectionMode(QAbstractItemView::SingleSelection);
    m_tree->setDragDropMode(QAbstractItemView::InternalMove);
    m_tree->setDragEnabled(true);
    m_tree->setAcceptDrops(true);
    m_tree->setDropIndicatorShown(true);
    m_tree->setDefaultDropAction(Qt::MoveAction);
    m_tree->setEditTriggers(QAbstractItemView::DoubleClicked | QAbstractItemView::EditKeyPressed);
    m_tree->header()->setStretchLastSection(true);
    m_tree->setUniformRowHeights(true);

    auto *right = new QWidget(split);
    auto *rightLayout = new QVBoxLayout(right);
    rightLayout->setContentsMargins(0, 0, 0, 0);
    m_hostBox = new QGroupBox(tr("Selected host"), right);
    buildHostForm(m_hostBox);
    rightLayout->addWidget(m_hostBox);
    m_problemsTitle = new QLabel(right);
    rightLayout->addWidget(m_problemsTitle);
    m_problems = new QListWidget(right);
    m_problems->setObjectName(u"problems"_s);
    m_problems->setWordWrap(true);
    m_problems->setToolTip(tr("Every problem of the profile; click one to select its row"));
    rightLayout->addWidget(m_problems);
    m_preflightNote = new QLabel(tr("Pre-flight runs on every host before each launch; \u201cCheck hosts\u201d runs it alone. "
                                    "Its findings (agent and LibTorch versions, GPUs, NCCL, memory, paths) appear in the tree "
                                    "and below."),
                                 right);
    m_preflightNote->setWordWrap(true);
    rightLayout->addWidget(m_preflightNote);
    m_checkResults = new QLabel(right);
    m_checkResults->setObjectName(u"checkResults"_s);
    m_checkResults->setWordWrap(true);
    m_checkResults->setTextFormat(Qt::RichText);
    m_checkResults->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_checkResults->hide();
    rightLayout->addWidget(m_checkResults);
    rightLayout->addStretch(1);
    split->addWidget(m_tree);
    split->addWidget(right);
    split->setStretchFactor(0, 1);
    split->setStretchFactor(1, 0);
    right->setMaximumWidth(right->fontMetrics().horizontalAdvance(QLatin1Char('x')) * 64);
    m_problems->setMaximumHeight(m_problems->fontMetrics().height() * 9);
    layout->addWidget(split, 1);

    connect(m_model, &ProfileModel::editRefused, this, [this](const QString &m) {
        Q_EMIT failed(tr("Edit refused: %1").arg(m));
        refreshForm();
    });
    connect(m_model, &ProfileModel::profileEdited, this, [this] {
        refreshProblems();
        syncGroupingControls();
        Q_EMIT profileChanged();
    });
    connect(m_model, &ProfileModel::groupingChanged, this,
            [this] { Q_EMIT info(tr("Grouping is now explicit: groups list their hosts by name.")); });
    connect(m_model, &QAbstractItemModel::modelReset, this, &ClusterPage::restoreExpansion);
    connect(m_tree->selectionModel(), &QItemSelectionModel::currentChanged, this, &ClusterPage::refreshForm);
    connect(m_problems, &QListWidget::itemActivated, this, [this](QListWidgetItem *item) {
        const QModelIndex idx = m_model->indexOfProblem(item->text());
        if (idx.isValid()) {
            m_tree->setCurrentIndex(idx);
            m_tree->scrollTo(idx);
        }
    });
    connect(m_problems, &QListWidget::itemClicked, m_problems, &QListWidget::itemActivated);
    refreshProblems();
    refreshForm();
}

void ClusterPage::buildToolbar(QWidget *bar)
{
    auto *layout = new QVBoxLayout(bar);
    layout->setContentsMargins(0, 0, 0, 0);
    auto *row = new QHBoxLayout;
    m_nameLabel = new QLabel(bar);
    QFont f = m_nameLabel->font();
    f.setBold(true);
    m_nameLabel->setFont(f);
    row->addWidget(m_nameLabel);
    row->addStretch(1);
    row->addWidget(new QLabel(tr("Launcher"), bar));
    m_launcher = new QComboBox(bar);
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
    layout->addLayout(row);

    auto *tools = new QToolBar(bar);
    tools->setToolButtonStyle(Qt::ToolButtonTextOnly);
    auto add = [&](const QString &text, const QString &tip, auto slot) {
        QAction *a = tools->addAction(text);
        a->setToolTip(tip);
        connect(a, &QAction::triggered, this, slot);
        return a;
    };
    add(tr("Add host"), tr("Add a host to the selected group"), [this] {
        const int g = selectedGroup();
        if (m_model->addHost(g, {}).isEmpty())
            m_tree->setCurrentIndex(m_model->indexOfHost(int(m_model->profile().hosts.size()) - 1));
    });
    add(tr("Add group"), tr("Add an empty group (grouping becomes explicit); drag hosts onto it"),
        [this] { m_model->addGroup({}); });
    add(tr("Remove"), tr("Remove the selected host, or the selected empty group"), [this] {
        const int h = selectedHost();
        if (h >= 0)
            m_model->removeHost(h);
        else if (selectedGroup() >= 0)
            m_model->removeGroup(selectedGroup());
    });
    add(tr("Move up"), tr("Move the host one place up (ranks are numbered host by host)"), [this] {
        const int h = selectedHost();
        if (h >= 0 && m_model->moveHost(h, -1).isEmpty())
            m_tree->setCurrentIndex(m_model->indexOfHost(h - 1));
    });
    add(tr("Move down"), tr("Move the host one place down"), [this] {
        const int h = selectedHost();
        if (h >= 0 && m_model->moveHost(h, +1).isEmpty())
            m_tree->setCurrentIndex(m_model->indexOfHost(h + 1));
    });
    add(tr("Check hosts"), tr("Run the agent's pre-flight (versions, GPUs, NCCL, memory, paths) and show it per host"),
        [this] { Q_EMIT checkHostsRequested(); });
    tools->addSeparator();
    add(tr("Open profile…"), tr("Open a profile JSON (docs/profile.md)"), [this] {
        const QString p = QFileDialog::getOpenFileName(this, tr("Open profile"), {}, tr("Profiles (*.json);;All files (*)"));
        if (!p.isEmpty())
            openProfile(p);
    });
    add(tr("Save profile…"), tr("Save the profile as JSON"), [this] {
        const QString p = QFileDialog::getSaveFileName(this, tr("Save profile"), m_path, tr("Profiles (*.json)"));
        if (!p.isEmpty())
            saveProfile(p);
    });
    add(tr("Import hostfile…"), tr("Read a DeepSpeed hostfile (HOST slots=N [group=NAME])"), [this] {
        const QString p = QFileDialog::getOpenFileName(this, tr("Import hostfile"));
        if (!p.isEmpty())
            importHostfile(p);
    });
    add(tr("Export hostfile…"), tr("Write the hosts as a DeepSpeed hostfile with group= labels"), [this] {
        const QString p = QFileDialog::getSaveFileName(this, tr("Export hostfile"));
        if (!p.isEmpty())
            exportHostfile(p);
    });
    layout->addWidget(tools);

    connect(m_launcher, &QComboBox::activated, this, [this] {
        m_model->setLauncher(m_launcher->currentData().toString());
        refreshForm();
    });
    connect(m_grouping, &QComboBox::activated, this, [this] {
        m_model->setGrouping(GroupingSpec::Mode(m_grouping->currentData().toInt()), m_groupSize->value());
    });
    connect(m_groupSize, &QSpinBox::editingFinished, this, [this] {
        if (GroupingSpec::Mode(m_grouping->currentData().toInt()) == GroupingSpec::Mode::BySize)
            m_model->setGrouping(GroupingSpec::Mode::BySize, m_groupSize->value());
    });
}

void ClusterPage::buildHostForm(QGroupBox *box)
{
    auto *form = new QFormLayout(box);
    auto line = [&](const QString &label, const QString &tip, ProfileModel::HostField field) {
        auto *e = new QLineEdit(box);
        e->setToolTip(tip);
        form->addRow(label, e);
        connect(e, &QLineEdit::editingFinished, this, [this, e, field] {
            if (m_updatingForm || selectedHost() < 0)
                return;
            const int h = selectedHost();
            m_model->setHostField(h, field, e->text());
            m_tree->setCurrentIndex(m_model->indexOfHost(h));
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
    m_password->setToolTip(tr("The password is asked for at launch in a masked prompt and never stored"));
    form->addRow(QString(), m_password);
    connect(m_password, &QCheckBox::toggled, this, [this](bool on) {
        if (!m_updatingForm && selectedHost() >= 0)
            m_model->setHostField(selectedHost(), ProfileModel::HostField::SshPassword, on);
    });
    m_agent = line(tr("Agent"), tr("The agent executable on that host (a bare name is looked up on PATH, then next "
                                   "to the dashboard)"),
                   ProfileModel::HostField::Agent);
    m_workdir = line(tr("Working directory"), tr("Relative model and data paths resolve here; empty: home"),
                     ProfileModel::HostField::Workdir);
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
    for (int c = 0; c < ProfileModel::ColPreflight; ++c)
        m_tree->resizeColumnToContents(c);
}

void ClusterPage::setProfile(const ClusterProfile &profile, const QString &path)
{
    m_path = path;
    m_model->setProfile(profile);
    m_nameLabel->setText(tr("Profile: %1").arg(profile.name.empty() ? tr("(unnamed)") : qs(profile.name)));
    m_nameLabel->setToolTip(path);
    syncGroupingControls();
    refreshForm();
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

void ClusterPage::refreshForm()
{
    const int h = selectedHost();
    const ClusterProfile p = m_model->profile();
    m_updatingForm = true;
    m_hostBox->setEnabled(h >= 0);
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
    } else {
        m_hostBox->setTitle(tr("Select a host to edit it"));
        for (QLineEdit *e : {m_address, m_label, m_alias, m_user, m_port, m_identity, m_agent, m_workdir})
            e->clear();
    }
    const bool ssh = p.launcher == "ssh" || p.launcher == "slurm"; // a Slurm login node is reached over SSH
    for (QWidget *w : {static_cast<QWidget *>(m_alias), static_cast<QWidget *>(m_user), static_cast<QWidget *>(m_port),
                       static_cast<QWidget *>(m_identity), static_cast<QWidget *>(m_password)})
        w->setEnabled(ssh);
    m_updatingForm = false;
}

bool ClusterPage::openProfile(const QString &path)
{
    QString error;
    const auto bytes = readFile(path, tr("profile"), error);
    if (!bytes) {
        Q_EMIT failed(error);
        return false;
    }
    const ProfileParseResult r = parseProfile(std::string_view(bytes->constData(), size_t(bytes->size())), path.toStdString());
    if (!r.ok()) {
        QStringList lines;
        for (const auto &e : r.errors)
            lines << qs(e);
        Q_EMIT failed(tr("%1 is not a valid profile:\n%2").arg(path, lines.join(u'\n')));
        return false;
    }
    setProfile(r.profile, QFileInfo(path).absoluteFilePath());
    Q_EMIT info(tr("Opened %1").arg(path));
    return true;
}

bool ClusterPage::saveProfile(const QString &path)
{
    QString error;
    if (!writeFile(path, QByteArray::fromStdString(profileToJson(m_model->profile())), error)) {
        Q_EMIT failed(error);
        return false;
    }
    m_path = QFileInfo(path).absoluteFilePath();
    Q_EMIT info(tr("Saved %1").arg(path));
    return true;
}

bool ClusterPage::importHostfile(const QString &path)
{
    QString error;
    const auto bytes = readFile(path, tr("hostfile"), error);
    if (!bytes) {
        Q_EMIT failed(error);
        return false;
    }
    const HostfileParseResult r = parseHostfile(std::string_view(bytes->constData(), size_t(bytes->size())), path.toStdString());
    if (!r.ok()) {
        QStringList lines;
        for (const auto &e : r.errors)
            lines << qs(e);
        Q_EMIT failed(tr("%1 is not a valid hostfile:\n%2").arg(path, lines.join(u'\n')));
        return false;
    }
    // The hosts replace the cluster; the evaluation settings and thresholds stay.
    ClusterProfile p = profileFromHosts(r.hosts, "ssh");
    const ClusterProfile old = m_model->profile();
    p.evaluation = old.evaluation;
    p.thresholds = old.thresholds;
    p.name = QFileInfo(path).completeBaseName().toStdString();
    setProfile(p, m_path);
    Q_EMIT info(tr("Imported %1 host(s) from %2").arg(r.hosts.size()).arg(path).replace(u"1 host(s)"_s, u"1 host"_s).replace(u"host(s)"_s, u"hosts"_s));
    return true;
}

bool ClusterPage::exportHostfile(const QString &path)
{
    QString error;
    if (!writeFile(path, QByteArray::fromStdString(hostfileFromHosts(m_model->profile().hosts)), error)) {
        Q_EMIT failed(error);
        return false;
    }
    Q_EMIT info(tr("Exported the hosts to %1").arg(path));
    return true;
}

void ClusterPage::showPreflight(const cppl::core::run::HostPreflight &report)
{
    const bool ok = report.ran && report.problems.isEmpty();
    const QString summary = preflightSummary(report.report, report.problems);
    const QString details = preflightDetails(report.report, report.problems);
    m_model->setPreflight(report.host, ok, summary, details);
    // Inline under the form too: the whole report of every host, not only a tooltip away.
    m_checkLines << u"<p><b>%1</b> %2<br><small>%3</small></p>"_s.arg(report.host.toHtmlEscaped(), summary.toHtmlEscaped(),
                                                                      details.toHtmlEscaped().replace(u'\n', u"<br>"_s));
    m_checkResults->setText(m_checkLines.join(QString()));
    m_checkResults->show();
    for (int c = ProfileModel::ColRole; c < ProfileModel::ColumnCount; ++c)
        m_tree->resizeColumnToContents(c);
}

void ClusterPage::beginCheck()
{
    m_model->clearPreflight();
    for (const HostSpec &h : m_model->profile().hosts)
        m_model->setPreflight(qs(h.name), true, tr("… checking"), tr("Pre-flight is running on this host"));
    m_checkLines.clear();
    m_checkResults->setText(tr("Checking every host (pre-flight only; nothing is launched)…"));
    m_checkResults->show();
}

QString ClusterPage::checkResultsText() const
{
    return m_checkResults->isVisible() ? m_checkResults->text() : QString();
}

void ClusterPage::endCheck(bool ok, const QString &verdict)
{
    QString html = m_checkLines.join(QString());
    html += u"<p><b>%1 %2</b></p>"_s.arg(ok ? u"✓"_s : u"✗"_s, verdict.toHtmlEscaped().replace(u'\n', u"<br>"_s));
    m_checkResults->setText(html);
    m_checkResults->show();
}

} // namespace cppl::app
