// SPDX-License-Identifier: MIT
#pragma once

// The Cluster page: the profile's hosts as groups -> hosts -> slots, a form for the selected host
// (address, SSH), the Slurm job (launcher "slurm"), problems listed and mapped to their rows,
// hostfile and profile files, and pre-flight per host.

#include "run/run_engine.h"

#include "cppl/cluster_profile.h"

#include <QJsonObject>
#include <QPointer>
#include <QWidget>

#include <functional>
#include <vector>

class QBoxLayout;
class QFormLayout;
class QHBoxLayout;
class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QListWidget;
class QAction;
class QSpinBox;
class QTableWidget;
class QSplitter;
class QToolBar;
class QTreeView;
class QGroupBox;
class QVBoxLayout;

namespace cppl::app {

class ProfileModel;

class ClusterPage : public QWidget
{
    Q_OBJECT

public:
    explicit ClusterPage(QWidget *parent = nullptr);

    [[nodiscard]] ProfileModel *model() const noexcept { return m_model; }
    [[nodiscard]] QTreeView *tree() const noexcept { return m_tree; }
    void setProfile(const ClusterProfile &profile, const QString &path);
    [[nodiscard]] ClusterProfile profile() const;
    /// Where the profile came from (relative model/data paths resolve against its directory).
    [[nodiscard]] QString profilePath() const { return m_path; }

    // File operations; each reports a specific failure through failed() and returns false.
    bool openProfile(const QString &path);
    bool saveProfile(const QString &path);
    bool importHostfile(const QString &path);
    bool exportHostfile(const QString &path);

    /// "Check hosts" started (the engine's pre-flight-only mode, MainWindow::checkHosts): every
    /// host shows "checking…" until its report arrives.
    void beginCheck();
    /// A pre-flight report for one host (RunEngine::preflightHost, of a check or of a run): the
    /// tree's Pre-flight column and the per-host list under the form.
    void showPreflight(const cppl::core::run::HostPreflight &report);
    /// The check ended: @p verdict under the per-host list ("every host passed", the first cause).
    void endCheck(bool ok, const QString &verdict);
    [[nodiscard]] QString checkResultsText() const;
    /// The Slurm job's box (shown with launcher "slurm") and its inline verdict, for tests.
    [[nodiscard]] QGroupBox *slurmBox() const noexcept { return m_slurmBox; }
    [[nodiscard]] QGroupBox *hostBox() const noexcept { return m_hostBox; }
    /// Selects these hosts' rows, the first one current (also after an edit that reset the tree).
    void selectHosts(const std::vector<int> &hosts);
    [[nodiscard]] QString slurmStatusText() const;
    /// Whether the form is below the tree (a narrow page: the tree's columns and a readable form do
    /// not fit side by side) rather than beside it.
    [[nodiscard]] bool formBelow() const noexcept { return m_formBelow; }

Q_SIGNALS:
    void failed(const QString &message);
    void info(const QString &message);
    void profileChanged();
    void checkHostsRequested();

protected:
    void resizeEvent(QResizeEvent *event) override;

private:
    /// Beside the tree when the page has room for the tree's columns and a readable form, else below it.
    void placeForm();
    /// What each of the tree's columns needs (its rows shown, its header).
    [[nodiscard]] QList<int> treeColumnWidths() const;
    /// The columns at what they need, the wider ones giving way (eliding) when the tree is narrower.
    void fitTreeColumns();
    // Building the page (cluster_page.cpp): the toolbar, the tree, and beside it the host form,
    // the Slurm job, problems and pre-flight.
    void buildToolbar(QWidget *bar);
    QHBoxLayout *buildProfileRow(QWidget *bar);
    void addTool(QToolBar *tools, const QString &text, const QString &tip, const std::function<void()> &slot);
    void addHostActions(QToolBar *tools);
    void addFileActions(QToolBar *tools);
    void buildTree();
    void buildSide();
    void buildHostForm(QGroupBox *box);
    void connectModel();
    // The Slurm job (cluster_page_slurm.cpp).
    void buildSlurmForm(QGroupBox *box);
    void addSlurmQueueFields(QGroupBox *box, QFormLayout *form);
    void addSlurmSizes(QGroupBox *box, QFormLayout *form);
    void addSlurmJobFields(QGroupBox *box, QFormLayout *form);
    /// Applies @p candidate when it adds no problem; shows its problems (or the job's size).
    void applySlurm(const SlurmSpec &candidate);
    // Pre-flight (cluster_page_preflight.cpp): the note and the per-host reports under the form.
    void buildPreflightReports(QWidget *parent, QVBoxLayout *layout);
    /// Fills the Slurm fields from the profile (a new profile, another launcher); pending invalid
    /// text in a field is replaced.
    void refreshSlurmForm();
    /// Marks the fields @p problems name and shows them (or the job's size) under the fields.
    void showSlurmProblems(const QStringList &problems, bool pending);
    // The environment editors (cluster_page_env.cpp): the cluster's env and the selected host's.
    QWidget *buildEnvEditor(QWidget *parent, const QString &name, const QString &tip);
    void applyEnv(QTableWidget *table);
    void fillEnv(QTableWidget *table, const std::map<std::string, std::string> &env);
    void refreshProblems();
    void refreshForm();
    void refreshFormForHosts(const std::vector<int> &hosts);
    void syncGroupingControls();
    int selectedHost() const;
    int selectedGroup() const;
    /// The hosts the form edits: every selected host row (a slot row: its host; with
    /// @p withGroups, a group row: its hosts), or the current host; ascending.
    std::vector<int> selectedHosts(bool withGroups = true) const;
    void restoreExpansion();

    ProfileModel *m_model = nullptr;
    QTreeView *m_tree = nullptr;
    QSplitter *m_split = nullptr;   // the tree and m_side: side by side, or one above the other
    QWidget *m_side = nullptr;      // the host form, the Slurm job, problems and pre-flight
    QBoxLayout *m_sideLayout = nullptr; // top to bottom beside the tree, left to right below it
    int m_sideMaxWidth = 0;         // beside the tree: the form's widest
    bool m_formBelow = false;
    QListWidget *m_problems = nullptr;
    QLabel *m_problemsTitle = nullptr;
    QLabel *m_nameLabel = nullptr;
    QComboBox *m_launcher = nullptr;
    QComboBox *m_grouping = nullptr;
    QSpinBox *m_groupSize = nullptr;
    QGroupBox *m_hostBox = nullptr;
    QLineEdit *m_address = nullptr;
    QLineEdit *m_label = nullptr;
    QLineEdit *m_alias = nullptr;
    QLineEdit *m_user = nullptr;
    QLineEdit *m_port = nullptr;
    QLineEdit *m_identity = nullptr;
    QCheckBox *m_password = nullptr;
    QLineEdit *m_agent = nullptr;
    QLineEdit *m_workdir = nullptr;
    QTableWidget *m_hostEnv = nullptr;    // the selected host's env (one host only)
    QTableWidget *m_clusterEnv = nullptr; // the cluster's env, every host's ranks
    // The Slurm job: one editor per field of SlurmSpec; each edit is checked as typed and applied
    // when it adds no problem (an invalid value stays in its field, marked, and is not applied).
    using SlurmSetter = std::function<void(SlurmSpec &, const QString &)>;
    using SlurmGetter = std::function<QString(const SlurmSpec &)>;
    struct SlurmLine
    {
        QLineEdit *edit = nullptr;
        QString key; ///< the profile's field ("partition", "sbatch_options"): messages start "slurm.<key>"
        QAction *mark = nullptr;
        SlurmGetter get; ///< the field as the editor shows it (refreshSlurmForm)
    };
    /// One field's editor: checked as typed, applied when editing ends without a problem.
    QLineEdit *addSlurmLine(QGroupBox *box, const QString &placeholder, const QString &tip, const QString &key, SlurmGetter get,
                            SlurmSetter set);
    QGroupBox *m_slurmBox = nullptr;
    QList<SlurmLine> m_slurmLines;
    QSpinBox *m_nodes = nullptr;
    QSpinBox *m_tasksPerNode = nullptr;
    QSpinBox *m_gpusPerNode = nullptr;
    QLabel *m_slurmStatus = nullptr;
    QLabel *m_preflightNote = nullptr;
    QLabel *m_checkResults = nullptr; // per host: summary and details of the last pre-flight
    QStringList m_checkLines;
    QString m_path;
    bool m_updatingForm = false;
};

} // namespace cppl::app
