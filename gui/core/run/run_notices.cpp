// SPDX-License-Identifier: MIT
#include "run/run_notices.h"

#include "cppl/cluster_profile.h"

#include <QCoreApplication>
#include <QLocale>
#include <QStringList>

using namespace Qt::StringLiterals;

namespace cppl::core::run {

namespace {

QString tr(const char *text)
{
    return QCoreApplication::translate("RunEngine", text); // the engine's context: one catalogue for its words
}

/// The agents' --groups list ("0,1;2,3") as a reader reads it: "[0–1] [2–3]"; beyond 6 groups
/// "[0–7] [8–15] [16–23] … [1016–1023] (128 groups)", one line, not a screenful.
QString groupsText(const std::string &groups)
{
    QStringList out;
    for (const QString &g : QString::fromStdString(groups).split(u';', Qt::SkipEmptyParts)) {
        std::vector<int> ranks;
        for (const QString &r : g.split(u',', Qt::SkipEmptyParts))
            ranks.push_back(r.toInt());
        out << u"["_s + QString::fromStdString(rankListText(std::move(ranks))) + u"]"_s;
    }
    constexpr qsizetype kNamed = 6;
    if (out.size() > kNamed)
        return tr("%1 … %2 (%3 groups)").arg(out.mid(0, 3).join(u' '), out.back(), QLocale().toString(qlonglong(out.size())));
    return out.join(u' ');
}

} // namespace

QString phaseName(RunPhase phase)
{
    switch (phase) {
    case RunPhase::Idle: return u"idle"_s;
    case RunPhase::Preflight: return u"pre-flight"_s;
    case RunPhase::Launching: return u"launching"_s;
    case RunPhase::Running: return u"running"_s;
    case RunPhase::Stopping: return u"stopping"_s;
    case RunPhase::Finished: return u"finished"_s;
    case RunPhase::Failed: return u"failed"_s;
    case RunPhase::Stopped: return u"stopped"_s;
    }
    return u"?"_s;
}

QString runStartNotice(const QString &runId, int ranks, int hosts, const QString &launcher, const std::string &groups,
                       const QString &masterAddr, int masterPort)
{
    const QLocale loc;
    return (ranks == 1 ? tr("run %1: %2 rank on %3 (%4), groups %5, master %6:%7")
                       : tr("run %1: %2 ranks on %3 (%4), groups %5, master %6:%7"))
        .arg(runId, loc.toString(ranks), hosts == 1 ? tr("1 host") : tr("%1 hosts").arg(loc.toString(hosts)), launcher, groupsText(groups),
             masterAddr, QString::number(masterPort));
}

QString rankLostNotice(const std::vector<int> &ranks)
{
    const QString which = QString::fromStdString(rankListText(ranks));
    return ranks.size() == 1 ? tr("rank %1 lost; the others regrouped without it and the run goes on").arg(which)
                             : tr("ranks %1 lost; the others regrouped without them and the run goes on").arg(which);
}

QString rankLostAlertText(int rank, const QString &host, const QString &cause, int round, RunPhase endedAs)
{
    QString how;
    if (!cause.isEmpty())
        how += u": "_s + cause;
    if (round >= 0)
        how += tr(" (after round %1)").arg(round);
    if (endedAs == RunPhase::Failed || endedAs == RunPhase::Stopped)
        return tr("rank %1 (%2) lost%3; the others went on without it until the run %4")
            .arg(QString::number(rank), host, how, endedAs == RunPhase::Failed ? tr("failed") : tr("was stopped"));
    if (endedAs == RunPhase::Finished) // the list of a finished run does not end on "goes on"
        return tr("rank %1 (%2) lost%3; the others finished the run without it, its unfinished batches evaluated again")
            .arg(QString::number(rank), host, how);
    // What matters first (the list shows two lines of it): lost, and the run goes on.
    return tr("rank %1 (%2) lost, the run goes on without it%3; the others redo its unfinished batches").arg(QString::number(rank), host, how);
}

QString recoveredNotice(const QString &recovered)
{
    return tr("recovered (%1)").arg(recovered);
}

QString checkpointRegroupNotice(int firstRound, int lastSaved)
{
    // What a user can do about it (resume), not how the checkpoints work (epochs, ledgers).
    if (lastSaved < 0)
        return tr("if the run is interrupted before round %1 (the first after the regrouping) is "
                  "saved, it cannot be resumed: no round was saved before the loss")
            .arg(firstRound);
    if (lastSaved >= firstRound)
        return tr("if the run is interrupted, it can be resumed from its last saved round (round %1 so far)").arg(lastSaved);
    return tr("if the run is interrupted, it can be resumed from round %1, the last one saved; "
              "the next to be saved is round %2, the first after the regrouping")
        .arg(lastSaved)
        .arg(firstRound);
}

QString rankLostDetail(const cppl::lines::RankLost &lost)
{
    return QString::fromStdString(cppl::lines::describe(lost)); // the agent's own words, as its stderr says them
}

QString regroupedWithoutDetail(int rank, const QString &host, int round)
{
    return tr("rank %1 (%2): lost after round %3; the others regrouped without it").arg(rank).arg(host).arg(round);
}

QString rankEndedText(int rank, const QString &host, const QString &how)
{
    return tr("rank %1 on %2 ended: %3").arg(rank).arg(host, how);
}

QString failedAfterLossText(int rank, const QString &host, const QString &how, const std::vector<int> &lost)
{
    return tr("run failed: rank %1 on %2: %3 first, after %4 lost (the others had gone on without %5)")
        .arg(rank)
        .arg(host, how, (lost.size() == 1 ? tr("rank %1") : tr("ranks %1")).arg(QString::fromStdString(rankListText(lost))),
             lost.size() == 1 ? tr("it") : tr("them"));
}

QString failureWords(const QString &cause)
{
    QString c = cause.startsWith(u"run failed: "_s) ? cause.mid(12) : cause;
    return c.replace(u"\n  "_s, u"; "_s).replace(u'\n', u' ').trimmed();
}

} // namespace cppl::core::run
