// SPDX-License-Identifier: MIT
// The Cluster page's Slurm job (launcher "slurm"): one editor per field of SlurmSpec, each edit
// checked as typed and applied when it adds no problem; the job's size or its problems below.
#include "cluster_page.h"

#include "profile_model.h"

#include "launch/slurm_job.h"

#include <QAction>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QSpinBox>
#include <QStyle>

using namespace Qt::StringLiterals;

namespace cppl::app {

namespace {
QString qs(const std::string &s) { return QString::fromStdString(s); }
} // namespace

void ClusterPage::buildSlurmForm(QGroupBox *box)
{
    auto *form = new QFormLayout(box);
    form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
    addSlurmQueueFields(box, form);
    addSlurmSizes(box, form);
    addSlurmJobFields(box, form);
    m_slurmStatus = new QLabel(box);
    m_slurmStatus->setObjectName(u"slurmStatus"_s);
    m_slurmStatus->setWordWrap(true);
    m_slurmStatus->setTextInteractionFlags(Qt::TextSelectableByMouse);
    form->addRow(m_slurmStatus);
}

QLineEdit *ClusterPage::addSlurmLine(QGroupBox *box, const QString &placeholder, const QString &tip, const QString &key, SlurmGetter get,
                                     SlurmSetter set)
{
    auto *e = new QLineEdit(box);
    e->setObjectName(u"slurm_"_s + key);
    e->setPlaceholderText(placeholder);
    e->setToolTip(tip);
    QAction *mark = e->addAction(style()->standardIcon(QStyle::SP_MessageBoxWarning), QLineEdit::TrailingPosition);
    mark->setVisible(false);
    m_slurmLines.append({e, key, mark, std::move(get)});
    // Each edit is tried on the profile's current job with only this field changed: checked as
    // typed, applied when editing ends without a problem.
    auto candidate = [this, e, set] {
        SlurmSpec c = m_model->profile().slurm;
        set(c, e->text());
        return c;
    };
    connect(e, &QLineEdit::textEdited, this, [this, candidate] {
        const SlurmSpec c = candidate();
        showSlurmProblems(m_model->slurmProblems(c), c != m_model->profile().slurm);
    });
    connect(e, &QLineEdit::editingFinished, this, [this, candidate] {
        if (m_updatingForm || m_model->profile().launcher != "slurm")
            return;
        applySlurm(candidate());
    });
    return e;
}

void ClusterPage::applySlurm(const SlurmSpec &candidate)
{
    const QStringList problems = m_model->slurmProblems(candidate);
    if (problems.isEmpty())
        m_model->setSlurm(candidate);
    showSlurmProblems(problems, !problems.isEmpty());
}

namespace {

QHBoxLayout *pair(QWidget *box, QWidget *a, const QString &label, QWidget *b)
{
    auto *row = new QHBoxLayout;
    row->addWidget(a, 1);
    row->addWidget(new QLabel(label, box));
    row->addWidget(b, 1);
    return row;
}

std::vector<std::string> words(const QString &text)
{
    std::vector<std::string> out;
    for (const QString &w : text.split(u' ', Qt::SkipEmptyParts))
        out.push_back(w.toStdString());
    return out;
}

QString joined(const std::vector<std::string> &v)
{
    QStringList l;
    for (const auto &w : v)
        l << qs(w);
    return l.join(u' ');
}

std::string trimmed(const QString &t)
{
    return t.trimmed().toStdString();
}

} // namespace

void ClusterPage::addSlurmQueueFields(QGroupBox *box, QFormLayout *form)
{
    QLineEdit *partition = addSlurmLine(box, tr("cluster default"),
                                        tr("sbatch --partition: the partition (queue) to submit to; empty: the cluster's default. "
                                           "Letters, digits and _-., (several, comma separated)"),
                                        u"partition"_s, [](const SlurmSpec &s) { return qs(s.partition); },
                                        [](SlurmSpec &s, const QString &t) { s.partition = trimmed(t); });
    QLineEdit *account = addSlurmLine(box, tr("none"), tr("sbatch --account: the project the job is charged to"), u"account"_s,
                                      [](const SlurmSpec &s) { return qs(s.account); },
                                      [](SlurmSpec &s, const QString &t) { s.account = trimmed(t); });
    form->addRow(tr("Partition"), pair(box, partition, tr("Account"), account));
    QLineEdit *qos = addSlurmLine(box, tr("default"), tr("sbatch --qos: the quality of service"), u"qos"_s,
                                  [](const SlurmSpec &s) { return qs(s.qos); }, [](SlurmSpec &s, const QString &t) { s.qos = trimmed(t); });
    QLineEdit *time = addSlurmLine(box, tr("HH:MM:SS"),
                                   tr("sbatch --time: the job's time limit as MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS; "
                                      "empty: the partition's default. Slurm ends the job when it is reached."),
                                   u"time_limit"_s, [](const SlurmSpec &s) { return qs(s.timeLimit); },
                                   [](SlurmSpec &s, const QString &t) { s.timeLimit = trimmed(t); });
    form->addRow(tr("QoS"), pair(box, qos, tr("Time limit"), time));
}

void ClusterPage::addSlurmSizes(QGroupBox *box, QFormLayout *form)
{
    auto spin = [&](int min, int max, const QString &tip, const QString &key) {
        auto *sb = new QSpinBox(box);
        sb->setObjectName(u"slurm_"_s + key);
        sb->setRange(min, max);
        sb->setToolTip(tip);
        sb->setKeyboardTracking(false); // a value per Enter, focus change or arrow step, not per digit
        return sb;
    };
    m_nodes = spin(1, 1 << 16, tr("Nodes of the allocation (sbatch --nodes)"), u"nodes"_s);
    m_tasksPerNode = spin(1, 1 << 12, tr("Ranks per node: one agent per Slurm task; with the nccl backend, one per GPU"), u"ntasks_per_node"_s);
    m_gpusPerNode = spin(0, 1 << 10, tr("sbatch --gpus-per-node; \"per task\": one GPU per task, unless the evaluation runs on the CPU "
                                        "without NCCL (then none). With the nccl backend at least the tasks per node."),
                         u"gpus_per_node"_s);
    m_gpusPerNode->setSpecialValueText(tr("per task"));
    auto *sizes = new QHBoxLayout;
    sizes->addWidget(m_nodes, 1);
    sizes->addWidget(new QLabel(tr("× tasks"), box));
    sizes->addWidget(m_tasksPerNode, 1);
    sizes->addWidget(new QLabel(tr("GPUs/node"), box));
    sizes->addWidget(m_gpusPerNode, 1);
    form->addRow(tr("Nodes"), sizes);
    for (QSpinBox *sb : {m_nodes, m_tasksPerNode, m_gpusPerNode})
        connect(sb, &QSpinBox::valueChanged, this, [this] {
            if (m_updatingForm || m_model->profile().launcher != "slurm")
                return;
            SlurmSpec c = m_model->profile().slurm;
            c.nodes = m_nodes->value();
            c.ntasksPerNode = m_tasksPerNode->value();
            c.gpusPerNode = m_gpusPerNode->value();
            applySlurm(c);
        });
}

void ClusterPage::addSlurmJobFields(QGroupBox *box, QFormLayout *form)
{
    form->addRow(tr("Constraint"), addSlurmLine(box, tr("any node"), tr("sbatch --constraint: node features, e.g. a100&ib"), u"constraint"_s,
                                                [](const SlurmSpec &s) { return qs(s.constraint); },
                                                [](SlurmSpec &s, const QString &t) { s.constraint = trimmed(t); }));
    form->addRow(tr("sbatch options"),
                 addSlurmLine(box, tr("e.g. --exclusive --mem=0"),
                              tr("More sbatch options, separated by spaces; each one long option (--name or --name=value). ClusterPPL sets "
                                 "--nodes, --ntasks, --job-name, --output, --error, --chdir and --parsable itself. A value with a space "
                                 "in it goes in the profile JSON."),
                              u"sbatch_options"_s, [](const SlurmSpec &s) { return joined(s.sbatchOptions); },
                              [](SlurmSpec &s, const QString &t) { s.sbatchOptions = words(t); }));
    form->addRow(tr("Modules"), addSlurmLine(box, tr("none"), tr("Environment modules loaded in the job before any step (module load NAME), separated by spaces"),
                                             u"modules"_s, [](const SlurmSpec &s) { return joined(s.modules); },
                                             [](SlurmSpec &s, const QString &t) { s.modules = words(t); }));
    form->addRow(tr("Env script"), addSlurmLine(box, tr("none"), tr("A file on the cluster sourced before sbatch and in the job (site settings, a venv)"),
                                                u"env_script"_s, [](const SlurmSpec &s) { return qs(s.envScript); },
                                                [](SlurmSpec &s, const QString &t) { s.envScript = trimmed(t); }));
    QLineEdit *agent = addSlurmLine(box, tr("the host's agent"), tr("The agent's path on the compute nodes; empty: the login host's Agent above"),
                                    u"agent"_s, [](const SlurmSpec &s) { return qs(s.agent); },
                                    [](SlurmSpec &s, const QString &t) { s.agent = trimmed(t); });
    QLineEdit *jobDir = addSlurmLine(box, QString::fromStdString(SlurmSpec{}.jobDir),
                                     tr("Where each run's job files go (script, outputs, keys), relative to the login host's working directory "
                                        "or home; it must be shared with the compute nodes"),
                                     u"job_dir"_s,
                                     // The default shows as the placeholder, not as text.
                                     [](const SlurmSpec &s) { return s.jobDir == SlurmSpec{}.jobDir ? QString() : qs(s.jobDir); },
                                     [](SlurmSpec &s, const QString &t) {
                                         // Empty means the default here (the profile refuses an empty job_dir).
                                         s.jobDir = t.trimmed().isEmpty() ? SlurmSpec{}.jobDir : trimmed(t);
                                     });
    form->addRow(tr("Agent"), pair(box, agent, tr("Job dir"), jobDir));
}

void ClusterPage::refreshSlurmForm()
{
    const ClusterProfile p = m_model->profile();
    const SlurmSpec &s = p.slurm;
    m_slurmBox->setVisible(p.launcher == "slurm");
    placeForm(); // the Slurm job's fields widen the form
    const bool was = m_updatingForm;
    m_updatingForm = true;
    for (const SlurmLine &l : std::as_const(m_slurmLines))
        l.edit->setText(l.get(s));
    m_nodes->setValue(s.nodes);
    m_tasksPerNode->setValue(s.ntasksPerNode);
    m_gpusPerNode->setValue(s.gpusPerNode);
    m_updatingForm = was;
    showSlurmProblems(p.launcher == "slurm" ? m_model->slurmProblems(s) : QStringList(), false);
}

void ClusterPage::showSlurmProblems(const QStringList &problems, bool pending)
{
    for (const SlurmLine &l : std::as_const(m_slurmLines)) {
        QStringList mine;
        for (const QString &p : problems)
            if (p.startsWith(u"slurm."_s + l.key))
                mine << p;
        l.mark->setVisible(!mine.isEmpty());
        l.mark->setToolTip(mine.join(u'\n'));
    }
    if (problems.isEmpty()) {
        const ClusterProfile p = m_model->profile();
        const SlurmSpec &s = p.slurm;
        const int ranks = s.nodes * s.ntasksPerNode;
        // As the driver places them: relative to the login host's working directory, else home.
        QString dir = qs(s.jobDir);
        if (!dir.startsWith(u'/') && !dir.startsWith(u'~'))
            dir = (p.hosts.empty() || p.hosts.front().workdir.empty() ? u"~"_s : qs(p.hosts.front().workdir)) + u'/' + dir;
        m_slurmStatus->setText(tr("%1 × %2 = %3 ranks, %4; job files in %5/RUN-ID on the login node")
                                   .arg(s.nodes)
                                   .arg(s.ntasksPerNode)
                                   .arg(ranks)
                                   .arg(s.gpusPerNode > 0            ? tr("%1 GPUs per node").arg(s.gpusPerNode)
                                        : core::slurmGpusPerNode(p) > 0 ? tr("%1 GPUs per node (one per task)").arg(core::slurmGpusPerNode(p))
                                                                        : tr("no GPUs asked for (CPU evaluation)"))
                                   .arg(dir));
        return;
    }
    m_slurmStatus->setText((pending ? tr("⚠ Not applied: %1") : tr("⚠ %1")).arg(problems.join(u'\n')));
}

QString ClusterPage::slurmStatusText() const
{
    return m_slurmStatus->text();
}

} // namespace cppl::app
