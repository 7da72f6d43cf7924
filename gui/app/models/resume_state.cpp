// SPDX-License-Identifier: MIT
#include "resume_state.h"

#include <QFileInfo>
#include <QObject>

using namespace Qt::StringLiterals;
using cppl::core::history::RunRecord;
using cppl::core::history::RunStatus;

namespace cppl::app {

QString runDirectoryOf(const RunRecord &run)
{
    const QString recorded = run.settings.value(u"run_directory"_s).toString();
    return recorded.isEmpty() ? cppl::core::run::defaultRunDirectory(run.runId) : recorded;
}

std::optional<cppl::core::run::ResumeSource> loadResumeFrom(const QString &directory, QString *error)
{
    auto source = cppl::core::run::loadResumeSource(directory, error);
    const QString prefix = u"--resume "_s + directory + u": "_s;
    if (!source && error->startsWith(prefix))
        error->remove(0, prefix.size());
    return source;
}

QString resumeProgressText(const cppl::core::run::ResumeSource &s)
{
    return QObject::tr("stopped after round %1 (%2 of %3 global batches), resumable").arg(s.round).arg(s.batchesDone).arg(s.batchCount);
}

ResumeState resumeStateOf(const RunRecord &run)
{
    ResumeState st;
    if (run.status != RunStatus::Interrupted && run.status != RunStatus::Stopped && run.status != RunStatus::Failed)
        return st;
    const QString dir = runDirectoryOf(run);
    if (!QFileInfo(dir).isDir())
        return st; // an imported run, or a directory removed since: nothing to resume from, nothing to say
    QString why;
    st.source = loadResumeFrom(dir, &why);
    if (st.source && st.source->runId != run.runId && !run.runId.startsWith(st.source->runId + u'.')) {
        // A later run with the same --log-dir: the directory is no longer this run's.
        st.kind = ResumeState::Kind::Refused;
        st.text = QObject::tr("its run directory %1 now holds run %2 (a later run used the same directory)").arg(dir, st.source->runId);
        st.source.reset();
        return st;
    }
    if (st.source) {
        st.kind = ResumeState::Kind::Resumable;
        st.text = resumeProgressText(*st.source);
        return st;
    }
    st.kind = QFileInfo::exists(dir + u'/' + QLatin1StringView(cppl::core::run::kResultFile)) ? ResumeState::Kind::Resumed
                                                                                             : ResumeState::Kind::Refused;
    st.text = why;
    return st;
}

} // namespace cppl::app
