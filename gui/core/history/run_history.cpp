// SPDX-License-Identifier: MIT
#include "history/run_history.h"

#include "history/history_sql.h"

#include "cppl/errors.h"

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QSqlError>
#include <QSqlQuery>
#include <QStandardPaths>
#include <QSysInfo>
#include <QTemporaryDir>
#include <QTimeZone>
#include <QVariant>

#include <algorithm>
#include <atomic>

#include <cerrno>
#include <cstring>
#include <signal.h>
#include <unistd.h>

using namespace Qt::StringLiterals;

namespace cppl::core::history {

namespace {

QSqlDatabase dbOf(const QString &connection)
{
    return QSqlDatabase::database(connection, false);
}

[[noreturn]] void fail(const QString &path, const QString &what, const QSqlError &e)
{
    throw IoError(QString(path + u": run store: "_s + what + u": "_s + e.text()).toStdString());
}

QJsonObject objectOf(const QVariant &v)
{
    return QJsonDocument::fromJson(v.toString().toUtf8()).object();
}
QJsonArray arrayOf(const QVariant &v)
{
    return QJsonDocument::fromJson(v.toString().toUtf8()).array();
}
std::optional<double> optDouble(const QVariant &v)
{
    return v.isNull() ? std::nullopt : std::optional<double>(v.toDouble());
}
QDateTime dateOf(const QVariant &v)
{
    if (v.isNull())
        return {};
    QDateTime d = QDateTime::fromString(v.toString(), Qt::ISODateWithMs);
    d.setTimeZone(QTimeZone::utc());
    return d;
}

const QString kColumns =
    u"id, run_id, status, started, ended, source, profile_name, profile, settings, launcher, world_size, groups_count, node_count,"
    " hosts, groups, versions, preflight, result, ppl, ppl_stderr, nll_sum_exact, tokens_scored, tokens_per_second, exit_code,"
    " first_cause, model, data, protocol, settings_key, owner"_s;

RunRecord recordOf(const QSqlQuery &q)
{
    RunRecord r;
    int i = 0;
    r.id = q.value(i++).toLongLong();
    r.runId = q.value(i++).toString();
    r.status = parseStatus(q.value(i++).toString()).value_or(RunStatus::Failed);
    r.started = dateOf(q.value(i++));
    r.ended = dateOf(q.value(i++));
    r.source = q.value(i++).toString();
    r.profileName = q.value(i++).toString();
    r.profile = objectOf(q.value(i++));
    r.settings = objectOf(q.value(i++));
    r.launcher = q.value(i++).toString();
    r.worldSize = q.value(i++).toInt();
    r.groupsCount = q.value(i++).toInt();
    r.nodeCount = q.value(i++).toInt();
    r.hosts = arrayOf(q.value(i++));
    r.groups = arrayOf(q.value(i++));
    r.versions = objectOf(q.value(i++));
    r.preflight = arrayOf(q.value(i++));
    r.resultJson = q.value(i++).toString().toUtf8();
    r.lostRanks = lostRanksOf(r.resultJson);
    r.ppl = optDouble(q.value(i++));
    r.pplStderr = optDouble(q.value(i++));
    r.nllSumExact = q.value(i++).toString();
    r.tokensScored = q.value(i++).toLongLong();
    r.tokensPerSecond = optDouble(q.value(i++));
    const QVariant exit = q.value(i++);
    if (!exit.isNull())
        r.exitCode = exit.toInt();
    r.firstCause = q.value(i++).toString();
    r.model = q.value(i++).toString();
    r.data = q.value(i++).toString();
    r.protocol = q.value(i++).toString();
    r.settingsKey = q.value(i++).toString();
    r.owner = q.value(i++).toString();
    return r;
}

bool processGone(const QString &owner)
{
    const qsizetype colon = owner.lastIndexOf(u':');
    if (colon <= 0)
        return true;
    if (owner.left(colon) != QSysInfo::machineHostName())
        return true; // recorded on another machine and copied here: nobody is writing it
    bool ok = false;
    const qint64 pid = owner.mid(colon + 1).toLongLong(&ok);
    if (!ok || pid <= 0)
        return true;
    return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

/// ~/.local/share, or $XDG_DATA_HOME. Not AppDataLocation: that holds the application's name,
/// and the dashboard and the CLI share one history.
QString dataHome()
{
    const QString dir = QStandardPaths::writableLocation(QStandardPaths::GenericDataLocation);
    return dir.isEmpty() ? QDir::homePath() + u"/.local/share"_s : dir;
}

/// Copies an earlier store (with its write-ahead log, where a process still has it open) to
/// @p copy and moves its runs into @p into; the line that says what happened.
QString adoptOne(RunHistory &into, const QString &from, const QString &copy)
{
    const QString tail = u"; they are still there: CLUSTERPPL_STORE=%1 clusterppl-cli export RUN -o run.json, "
                         "then clusterppl-cli import run.json"_s.arg(from);
    for (const QString &suffix : {u""_s, u"-wal"_s})
        if (QFileInfo::exists(from + suffix) && !QFile::copy(from + suffix, copy + suffix))
            return u"the runs in %1 could not be read (cannot copy %2 to %3)"_s.arg(from, from + suffix, copy + suffix) + tail;
    try {
        const RunHistory old(copy);
        std::vector<RunRecord> runs = old.list();
        std::reverse(runs.begin(), runs.end()); // oldest first, as they were stored
        QStringList renamed;
        qsizetype moved = 0;
        for (const RunRecord &brief : runs) {
            std::optional<RunRecord> run = old.get(brief.runId);
            if (!run)
                continue;
            ++moved;
            const QString id = into.freeRunId(run->runId);
            if (id != run->runId) {
                renamed << run->runId + u" as "_s + id;
                run->runId = id;
            }
            into.insert(*run);
        }
        return u"%1 run%2 from %3"_s.arg(moved).arg(moved == 1 ? u""_s : u"s"_s, from)
               + (renamed.isEmpty() ? QString() : u" (already in the history by id: %1)"_s.arg(renamed.join(u", "_s)));
    } catch (const cppl::Error &e) {
        return u"the runs in %1 could not be read (%2)"_s.arg(from, QString::fromUtf8(e.what())) + tail;
    }
}

} // namespace

QString RunHistory::defaultPath()
{
    const QString env = qEnvironmentVariable("CLUSTERPPL_STORE");
    if (!env.isEmpty())
        return env;
    return dataHome() + u"/clusterppl/runs.sqlite"_s;
}

QStringList RunHistory::earlierDefaultPaths()
{
    const QString home = dataHome();
    return {home + u"/ClusterPPL/clusterppl/runs.sqlite"_s, home + u"/clusterppl-cli/runs.sqlite"_s};
}

QStringList RunHistory::adoptEarlierStores()
{
    if (!qEnvironmentVariableIsEmpty("CLUSTERPPL_STORE"))
        return {};
    const QString target = defaultPath();
    if (QFileInfo::exists(target))
        return {};
    QStringList earlier;
    for (const QString &p : earlierDefaultPaths())
        if (QFileInfo::exists(p))
            earlier << p;
    if (earlier.isEmpty())
        return {};

    const QString staging = target + u".adopting-"_s + QString::number(QCoreApplication::applicationPid());
    const auto removeStaging = [&staging] {
        for (const QString &suffix : {u""_s, u"-wal"_s, u"-shm"_s})
            QFile::remove(staging + suffix);
    };
    removeStaging();
    QTemporaryDir copies;
    if (!copies.isValid())
        throw IoError(QString(target + u": cannot make a temporary directory to read the earlier run stores in: "_s + copies.errorString())
                          .toStdString());
    QStringList lines;
    try {
        RunHistory into(staging);
        for (int i = 0; i < earlier.size(); ++i)
            lines << adoptOne(into, earlier[i], copies.filePath(u"earlier-%1.sqlite"_s.arg(i)));
    } catch (...) {
        removeStaging();
        throw;
    }
    // The connection is closed: SQLite has folded its write-ahead log into the file.
    const QByteArray from = QFile::encodeName(staging), to = QFile::encodeName(target);
    const bool linked = ::link(from.constData(), to.constData()) == 0;
    const int why = errno;
    removeStaging();
    if (!linked && why == EEXIST)
        return {}; // another process adopted them first
    if (!linked)
        throw IoError(QString(target + u": cannot create the run history: "_s + QString::fromLocal8Bit(std::strerror(why))
                              + u" (set CLUSTERPPL_STORE to a writable file)"_s)
                          .toStdString());
    for (QString &l : lines)
        l = u"run history: "_s + l;
    lines << u"run history: the dashboard and clusterppl-cli now share %1; the earlier files were left as they were"_s.arg(target);
    return lines;
}

int RunHistory::schemaVersion() noexcept
{
    return sql::kCurrentVersion;
}

RunHistory::RunHistory(const QString &path, Options options) : m_path(path), m_options(options)
{
    static std::atomic<int> serial{0};
    m_connection = u"clusterppl-store-%1"_s.arg(serial++);
    const QFileInfo info(path);
    if (!QDir().mkpath(info.absolutePath()))
        throw IoError(QString(path + u": cannot create the run store's directory "_s + info.absolutePath()
                              + u" (set CLUSTERPPL_STORE to a writable file, or pass --no-store)"_s)
                          .toStdString());
    QSqlDatabase db = sql::openConnection(path, m_connection);
    try {
        m_versionFound = sql::migrate(db, path);
        markInterrupted();
    } catch (...) {
        db = QSqlDatabase();
        sql::closeConnection(m_connection);
        throw;
    }
}

RunHistory::~RunHistory()
{
    m_writer.reset(); // drains the queue
    sql::closeConnection(m_connection);
}

void RunHistory::markInterrupted()
{
    QSqlDatabase db = dbOf(m_connection);
    QSqlQuery q(db);
    if (!q.exec(u"SELECT run_id, owner FROM runs WHERE status = 'running'"_s))
        fail(m_path, u"finding unfinished runs"_s, q.lastError());
    QStringList gone;
    while (q.next())
        if (processGone(q.value(1).toString()))
            gone << q.value(0).toString();
    for (const QString &id : gone) {
        // Everything received before the crash stays; the end is the last thing that arrived.
        QSqlQuery last(db);
        last.prepare(u"SELECT r.started, (SELECT MAX(t) FROM rank_samples WHERE run = r.id), (SELECT MAX(t) FROM logs WHERE run = r.id),"
                     " (SELECT MAX(t) FROM alerts WHERE run = r.id) FROM runs r WHERE r.run_id = ?"_s);
        last.addBindValue(id);
        if (!last.exec() || !last.next())
            fail(m_path, u"reading run "_s + id, last.lastError());
        double seconds = 0;
        for (int i = 1; i <= 3; ++i)
            if (!last.value(i).isNull())
                seconds = std::max(seconds, last.value(i).toDouble());
        const QDateTime ended = dateOf(last.value(0)).addMSecs(static_cast<qint64>(seconds * 1000));
        QSqlQuery u(db);
        u.prepare(u"UPDATE runs SET status = 'interrupted', owner = '', ended = ?, first_cause = CASE WHEN first_cause = '' THEN"
                  " 'the recording process ended before the run did (crash, SIGKILL, power loss)' ELSE first_cause END"
                  " WHERE run_id = ? AND status = 'running'"_s);
        u.addBindValue(ended.toString(Qt::ISODateWithMs));
        u.addBindValue(id);
        if (!u.exec())
            fail(m_path, u"marking run "_s + id + u" interrupted"_s, u.lastError());
        m_interrupted << id;
    }
}

std::vector<RunRecord> RunHistory::select(const QString &where, const QVariantList &binds, int limit) const
{
    QSqlQuery q(dbOf(m_connection));
    QString statement = u"SELECT "_s + kColumns + u" FROM runs"_s + (where.isEmpty() ? QString() : u" WHERE "_s + where)
                        + u" ORDER BY started DESC, id DESC"_s;
    if (limit > 0)
        statement += u" LIMIT %1"_s.arg(limit);
    q.prepare(statement);
    for (const QVariant &b : binds)
        q.addBindValue(b);
    if (!q.exec())
        fail(m_path, u"listing runs"_s, q.lastError());
    std::vector<RunRecord> out;
    while (q.next())
        out.push_back(recordOf(q));
    // Final per-rank figures are small and every comparison needs them.
    QSqlQuery r(dbOf(m_connection));
    r.prepare(u"SELECT rank, host, grp, tokens, windows, rounds, compute_seconds, wait_seconds, transfer_seconds, wall_seconds,"
              " tokens_per_second, exit_code FROM rank_summary WHERE run = ? ORDER BY rank"_s);
    for (RunRecord &rec : out) {
        r.addBindValue(QVariant::fromValue<qint64>(rec.id));
        if (!r.exec())
            fail(m_path, u"reading rank summaries"_s, r.lastError());
        while (r.next()) {
            RankSummary s;
            s.rank = r.value(0).toInt();
            s.host = r.value(1).toString();
            s.group = r.value(2).toInt();
            s.tokens = r.value(3).toLongLong();
            s.windows = r.value(4).toLongLong();
            s.rounds = r.value(5).toLongLong();
            s.computeSeconds = r.value(6).toDouble();
            s.waitSeconds = r.value(7).toDouble();
            s.transferSeconds = r.value(8).toDouble();
            s.wallSeconds = r.value(9).toDouble();
            s.tokensPerSecond = r.value(10).toDouble();
            if (!r.value(11).isNull())
                s.exitCode = r.value(11).toInt();
            rec.ranks.push_back(s);
        }
    }
    return out;
}

std::vector<RunRecord> RunHistory::list(const RunFilter &f) const
{
    QStringList where;
    QVariantList binds;
    auto like = [](const QString &s) { return QVariant(u"%"_s + s + u"%"_s); };
    if (!f.model.isEmpty()) {
        where << u"model LIKE ?"_s;
        binds << like(f.model);
    }
    if (!f.data.isEmpty()) {
        where << u"data LIKE ?"_s;
        binds << like(f.data);
    }
    if (!f.protocol.isEmpty()) {
        where << u"protocol = ?"_s;
        binds << f.protocol;
    }
    if (f.status) {
        where << u"status = ?"_s;
        binds << statusName(*f.status);
    }
    if (f.from.isValid()) {
        where << u"started >= ?"_s;
        binds << f.from.toUTC().toString(Qt::ISODateWithMs);
    }
    if (f.to.isValid()) {
        where << u"started <= ?"_s;
        binds << f.to.toUTC().toString(Qt::ISODateWithMs);
    }
    if (f.worldSize > 0) {
        where << u"world_size = ?"_s;
        binds << f.worldSize;
    }
    if (f.nodeCount > 0) {
        where << u"node_count = ?"_s;
        binds << f.nodeCount;
    }
    if (!f.text.isEmpty()) {
        where << u"(run_id LIKE ? OR profile_name LIKE ? OR model LIKE ? OR data LIKE ? OR first_cause LIKE ?)"_s;
        for (int i = 0; i < 5; ++i)
            binds << like(f.text);
    }
    return select(where.join(u" AND "_s), binds, f.limit);
}

bool RunHistory::contains(const QString &runId) const
{
    QSqlDatabase db = dbOf(m_connection);
    return sql::idOf(db, runId).has_value();
}

QString RunHistory::freeRunId(const QString &runId) const
{
    QString id = runId;
    for (int n = 2; contains(id); ++n)
        id = runId + u'.' + QString::number(n);
    return id;
}

std::optional<RunRecord> RunHistory::get(const QString &runId) const
{
    auto rows = select(u"run_id = ?"_s, {runId}, 1);
    if (rows.empty())
        return std::nullopt;
    RunRecord rec = std::move(rows.front());
    const QVariant id = QVariant::fromValue<qint64>(rec.id);
    QSqlQuery q(dbOf(m_connection));
    q.prepare(u"SELECT t, rank, tokens_per_second, wait_share, transfer_share, deviation, tokens FROM rank_samples WHERE run = ? ORDER BY t, rank"_s);
    q.addBindValue(id);
    if (!q.exec())
        fail(m_path, u"reading samples"_s, q.lastError());
    while (q.next())
        rec.samples.push_back({q.value(0).toDouble(), q.value(1).toInt(), q.value(2).toDouble(), q.value(3).toDouble(), q.value(4).toDouble(),
                               q.value(5).toDouble(), q.value(6).toLongLong()});
    q.prepare(u"SELECT rank, seq, t, stream, line FROM logs WHERE run = ? ORDER BY rank, seq"_s);
    q.addBindValue(id);
    if (!q.exec())
        fail(m_path, u"reading logs"_s, q.lastError());
    while (q.next())
        rec.logs.push_back({q.value(0).toInt(), q.value(1).toLongLong(), q.value(2).toDouble(), q.value(3).toString() == u"err"_s,
                            q.value(4).toString()});
    // Lines a rank printed but the history did not keep: the highest line number + 1 minus those kept.
    q.prepare(u"SELECT rank, MAX(seq) + 1 - COUNT(*) FROM logs WHERE run = ? GROUP BY rank HAVING MAX(seq) + 1 - COUNT(*) > 0 ORDER BY rank"_s);
    q.addBindValue(id);
    if (!q.exec())
        fail(m_path, u"counting dropped log lines"_s, q.lastError());
    while (q.next())
        rec.logsDropped.emplace_back(q.value(0).toInt(), q.value(1).toLongLong());
    q.prepare(u"SELECT t, at, rank, kind, message FROM alerts WHERE run = ? ORDER BY t, rowid"_s);
    q.addBindValue(id);
    if (!q.exec())
        fail(m_path, u"reading alerts"_s, q.lastError());
    while (q.next())
        rec.alerts.push_back({q.value(0).toDouble(), dateOf(q.value(1)), q.value(2).toInt(), q.value(3).toString(), q.value(4).toString()});
    return rec;
}

bool RunHistory::remove(const QString &runId)
{
    QSqlQuery q(dbOf(m_connection));
    q.prepare(u"DELETE FROM runs WHERE run_id = ?"_s); // ON DELETE CASCADE takes samples, logs, alerts, ranks
    q.addBindValue(runId);
    if (!q.exec())
        fail(m_path, u"deleting run "_s + runId, q.lastError());
    return q.numRowsAffected() > 0;
}

std::optional<RunRecord> RunHistory::baselineFor(const QString &key, const QString &excludeRunId, const QString &dtype) const
{
    if (key.isEmpty())
        return std::nullopt;
    // Newest first; with a dtype, the newest that ran in it among the last few of the key. One rank
    // is the baseline; a tensor-parallel key (settingsKey: N > 1 is a key of its own, which no
    // one-rank run has) takes one group, world size N.
    const QVariantList binds{key, excludeRunId.isNull() ? u""_s : excludeRunId};
    const QString where = u"settings_key = ? AND status = 'finished' AND nll_sum_exact != '' AND run_id != ? AND "_s;
    for (const auto &[sizes, limit] : {std::pair{u"world_size = 1"_s, dtype.isEmpty() ? 1 : 32}, std::pair{u"world_size > 1"_s, 64}}) {
        auto rows = select(where + sizes, binds, limit);
        for (RunRecord &r : rows)
            if (r.worldSize == baselineWorldSize(r) && (dtype.isEmpty() || resultDtype(r) == dtype))
                return std::move(r);
    }
    return std::nullopt;
}

void RunHistory::insert(const RunRecord &record)
{
    QSqlDatabase db = dbOf(m_connection);
    if (sql::idOf(db, record.runId))
        throw IoError(QString(m_path + u": run "_s + record.runId + u" is already in the store (delete it first, or import it under another id)"_s)
                          .toStdString());
    if (!db.transaction())
        fail(m_path, u"begin"_s, db.lastError());
    try {
        sql::insertRun(db, record, true);
    } catch (...) {
        db.rollback();
        throw;
    }
    if (!db.commit())
        fail(m_path, u"commit"_s, db.lastError());
}

HistoryWriter &RunHistory::writer()
{
    if (!m_writer)
        m_writer = std::make_unique<HistoryWriter>(m_path, m_options.writer);
    return *m_writer;
}

void RunHistory::flush()
{
    if (m_writer)
        m_writer->flush();
}

} // namespace cppl::core::history
