// SPDX-License-Identifier: MIT
#include "history/history_sql.h"

#include "history/host_resources.h"

#include "cppl/errors.h"

#include <QJsonDocument>
#include <QSqlError>
#include <QSqlQuery>
#include <QVariant>

using namespace Qt::StringLiterals;

namespace cppl::core::history::sql {

namespace {

[[noreturn]] void fail(const QSqlDatabase &db, const QString &what, const QSqlError &e)
{
    throw IoError(QString(db.databaseName() + u": run store: "_s + what + u": "_s + e.text()).toStdString());
}

void run(const QSqlDatabase &db, QSqlQuery &q, const QString &what)
{
    if (!q.exec())
        fail(db, what, q.lastError());
}

QVariant json(const QJsonObject &o)
{
    return o.isEmpty() ? QVariant() : QVariant(QString::fromUtf8(QJsonDocument(o).toJson(QJsonDocument::Compact)));
}
QVariant json(const QJsonArray &a)
{
    return a.isEmpty() ? QVariant() : QVariant(QString::fromUtf8(QJsonDocument(a).toJson(QJsonDocument::Compact)));
}
QVariant opt(const std::optional<double> &v)
{
    return v ? QVariant(*v) : QVariant();
}
QVariant opt(const std::optional<int> &v)
{
    return v ? QVariant(*v) : QVariant();
}
QVariant text(const QString &s)
{
    return s.isNull() ? QVariant(QString(u""_s)) : QVariant(s);
}
QVariant date(const QDateTime &d)
{
    return d.isValid() ? QVariant(d.toUTC().toString(Qt::ISODateWithMs)) : QVariant();
}
QVariant int64(std::int64_t v)
{
    return QVariant::fromValue<qint64>(v);
}

/// Binds @p values to the prepared statement's placeholders in order and runs it.
void execBound(const QSqlDatabase &db, QSqlQuery &q, const QVariantList &values, const QString &what)
{
    for (const QVariant &v : values)
        q.addBindValue(v);
    run(db, q, what);
}

/// Columns and their values side by side, so that a statement's column list and its bindings
/// cannot drift apart.
struct ColumnValues
{
    QStringList columns;
    QVariantList values;
    void add(const QString &column, const QVariant &value)
    {
        columns << column;
        values << value;
    }
};

/// What a run's end fills in, in insertRun and updateEnd alike.
void addOutcome(ColumnValues &row, const RunRecord &rec)
{
    row.add(u"result"_s, rec.resultJson.isEmpty() ? QVariant() : QVariant(QString::fromUtf8(rec.resultJson)));
    row.add(u"ppl"_s, opt(rec.ppl));
    row.add(u"ppl_stderr"_s, opt(rec.pplStderr));
    row.add(u"nll_sum_exact"_s, text(rec.nllSumExact));
    row.add(u"tokens_scored"_s, int64(rec.tokensScored));
    row.add(u"tokens_per_second"_s, opt(rec.tokensPerSecond));
    row.add(u"exit_code"_s, opt(rec.exitCode));
    row.add(u"first_cause"_s, text(rec.firstCause));
}

// Version 1: what the first store held (a minimal history), kept to test the migration path.
const char *const kSchemaV1[] = {
    "CREATE TABLE runs (id INTEGER PRIMARY KEY, run_id TEXT NOT NULL UNIQUE, status TEXT NOT NULL,"
    " started TEXT NOT NULL, ended TEXT, profile TEXT, result TEXT, ppl REAL, world_size INTEGER)",
    "CREATE TABLE logs (run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, rank INTEGER NOT NULL, line TEXT NOT NULL)",
};

const char *const kRunsV2 =
    "CREATE TABLE %1 (id INTEGER PRIMARY KEY, run_id TEXT NOT NULL UNIQUE,"
    " status TEXT NOT NULL CHECK (status IN ('running','finished','failed','stopped','interrupted')),"
    " started TEXT NOT NULL, ended TEXT, source TEXT NOT NULL DEFAULT '', profile_name TEXT NOT NULL DEFAULT '',"
    " profile TEXT, settings TEXT, launcher TEXT NOT NULL DEFAULT '', world_size INTEGER NOT NULL DEFAULT 0,"
    " groups_count INTEGER NOT NULL DEFAULT 0, node_count INTEGER NOT NULL DEFAULT 0, hosts TEXT, groups TEXT,"
    " versions TEXT, preflight TEXT, result TEXT, ppl REAL, ppl_stderr REAL, nll_sum_exact TEXT NOT NULL DEFAULT '',"
    " tokens_scored INTEGER NOT NULL DEFAULT 0, tokens_per_second REAL, exit_code INTEGER, first_cause TEXT NOT NULL DEFAULT '',"
    " model TEXT NOT NULL DEFAULT '', data TEXT NOT NULL DEFAULT '', protocol TEXT NOT NULL DEFAULT '',"
    " settings_key TEXT NOT NULL DEFAULT '', owner TEXT NOT NULL DEFAULT '')";
const char *const kLogsV2 =
    "CREATE TABLE %1 (run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, rank INTEGER NOT NULL,"
    " seq INTEGER NOT NULL, t REAL, stream TEXT NOT NULL DEFAULT 'out' CHECK (stream IN ('out','err')), line TEXT NOT NULL)";
const char *const kRestV2[] = {
    "CREATE INDEX runs_started ON runs(started)",
    "CREATE INDEX runs_baseline ON runs(settings_key, world_size, status, started)",
    "CREATE INDEX logs_run ON logs(run, rank, seq)",
    "CREATE TABLE rank_samples (run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, t REAL NOT NULL,"
    " rank INTEGER NOT NULL, tokens_per_second REAL, wait_share REAL, transfer_share REAL, deviation REAL, tokens INTEGER)",
    "CREATE INDEX rank_samples_run ON rank_samples(run, t, rank)",
    "CREATE TABLE rank_summary (run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, rank INTEGER NOT NULL,"
    " host TEXT, grp INTEGER, tokens INTEGER, windows INTEGER, rounds INTEGER, compute_seconds REAL, wait_seconds REAL,"
    " transfer_seconds REAL, wall_seconds REAL, tokens_per_second REAL, exit_code INTEGER, PRIMARY KEY (run, rank))",
    "CREATE TABLE alerts (run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, t REAL, at TEXT, rank INTEGER,"
    " kind TEXT NOT NULL, message TEXT NOT NULL)",
    "CREATE INDEX alerts_run ON alerts(run)",
};

void setUserVersion(QSqlDatabase &db, int v)
{
    exec(db, u"PRAGMA user_version = %1"_s.arg(v));
}

/// v1 -> v2: the runs table gains every column the history filters and compares on (rebuilt: the
/// status CHECK cannot be added in place), v1's "ok" becomes "finished", logs gain a per-rank line
/// number and a stream, the new tables appear, and every column v2 derives from the result JSON
/// and the profile is back-filled from what v1 kept.
void migrate1to2(QSqlDatabase &db)
{
    exec(db, QString::fromLatin1(kRunsV2).arg(u"runs_v2"_s));
    exec(db, u"INSERT INTO runs_v2 (id, run_id, status, started, ended, profile, result, ppl, world_size) "
             "SELECT id, run_id, CASE status WHEN 'ok' THEN 'finished' WHEN 'running' THEN 'running' WHEN 'stopped' THEN 'stopped' "
             "ELSE 'failed' END, started, ended, profile, result, ppl, COALESCE(world_size, 0) FROM runs"_s);
    exec(db, QString::fromLatin1(kLogsV2).arg(u"logs_v2"_s));
    exec(db, u"INSERT INTO logs_v2 (run, rank, seq, t, stream, line) SELECT run, rank, "
             "ROW_NUMBER() OVER (PARTITION BY run, rank ORDER BY rowid) - 1, NULL, 'out', line FROM logs"_s);
    exec(db, u"DROP TABLE logs"_s);
    exec(db, u"DROP TABLE runs"_s);
    exec(db, u"ALTER TABLE runs_v2 RENAME TO runs"_s);
    exec(db, u"ALTER TABLE logs_v2 RENAME TO logs"_s);
    for (const char *s : kRestV2)
        exec(db, QString::fromLatin1(s));

    QSqlQuery q(db);
    q.prepare(u"SELECT id, profile, result FROM runs"_s);
    run(db, q, u"reading v1 runs"_s);
    struct Row { std::int64_t id; QString profile; QByteArray result; };
    std::vector<Row> rows;
    while (q.next())
        rows.push_back({q.value(0).toLongLong(), q.value(1).toString(), q.value(2).toString().toUtf8()});
    for (const Row &row : rows) {
        RunRecord rec;
        rec.resultJson = row.result;
        const bool hasResult = applyResult(rec);
        SettingsKeyInputs in;
        if (hasResult)
            in = settingsInputsFromResult(QJsonDocument::fromJson(row.result).object());
        if (const auto parsed = parseProfile(row.profile.toStdString()); parsed.ok()) {
            rec.profileName = QString::fromStdString(parsed.profile.name);
            rec.launcher = QString::fromStdString(parsed.profile.launcher);
            rec.nodeCount = static_cast<int>(parsed.profile.hosts.size());
            if (!hasResult) // v1 kept no profile directory: paths as the profile wrote them
                in = settingsInputsFromProfile(parsed.profile, {});
            if (rec.worldSize == 0)
                rec.worldSize = rankLayout(parsed.profile).worldSize();
        }
        QSqlQuery u(db);
        u.prepare(u"UPDATE runs SET profile_name = ?, launcher = ?, node_count = ?, groups_count = ?, groups = ?, ppl_stderr = ?,"
                  " nll_sum_exact = ?, tokens_scored = ?, tokens_per_second = ?, model = ?, data = ?, protocol = ?, settings = ?,"
                  " settings_key = ?, world_size = CASE WHEN world_size > 0 THEN world_size ELSE ? END WHERE id = ?"_s);
        execBound(db, u,
                  {text(rec.profileName), text(rec.launcher), rec.nodeCount, rec.groupsCount, json(rec.groups), opt(rec.pplStderr),
                   text(rec.nllSumExact), int64(rec.tokensScored), opt(rec.tokensPerSecond), text(in.model), text(in.data), text(in.protocol),
                   in.protocol.isEmpty() ? QVariant() : json(settingsJson(in)), in.protocol.isEmpty() ? QString(u""_s) : settingsKey(in),
                   rec.worldSize, int64(row.id)},
                  u"back-filling run columns"_s);
        if (!rec.ranks.empty())
            replaceRankSummary(db, row.id, rec.ranks);
    }
}

/// v2 -> v3: the hosts' CPU cores and GPUs (hosts[].cpus, .gpus), which v2 kept only inside the
/// pre-flight reports and the result: back-filled from them (recordHostResources). The tables stay.
void migrate2to3(QSqlDatabase &db)
{
    QSqlQuery q(db);
    q.prepare(u"SELECT id, hosts, preflight, result FROM runs"_s);
    run(db, q, u"reading v2 runs"_s);
    std::vector<std::pair<std::int64_t, QJsonArray>> updates;
    while (q.next()) {
        RunRecord rec;
        rec.hosts = QJsonDocument::fromJson(q.value(1).toString().toUtf8()).array();
        rec.preflight = QJsonDocument::fromJson(q.value(2).toString().toUtf8()).array();
        rec.resultJson = q.value(3).toString().toUtf8();
        const QJsonArray before = rec.hosts;
        recordHostResources(rec);
        if (rec.hosts != before)
            updates.emplace_back(q.value(0).toLongLong(), rec.hosts);
    }
    for (const auto &[id, hosts] : updates) {
        QSqlQuery u(db);
        u.prepare(u"UPDATE runs SET hosts = ? WHERE id = ?"_s);
        execBound(db, u, {json(hosts), int64(id)}, u"back-filling the hosts' cores and GPUs"_s);
    }
}

} // namespace

void exec(QSqlDatabase &db, const QString &statement)
{
    QSqlQuery q(db);
    if (!q.exec(statement))
        fail(db, statement.left(60), q.lastError());
}

QSqlDatabase openConnection(const QString &path, const QString &connection)
{
    QSqlDatabase db = QSqlDatabase::addDatabase(u"QSQLITE"_s, connection);
    db.setDatabaseName(path);
    db.setConnectOptions(u"QSQLITE_BUSY_TIMEOUT=10000"_s);
    if (!db.open()) {
        const QString why = db.lastError().text();
        db = QSqlDatabase();
        QSqlDatabase::removeDatabase(connection);
        throw IoError(QString(path + u": cannot open the run store: "_s + why
                              + u" (set CLUSTERPPL_STORE to a writable file, or pass --no-store)"_s)
                          .toStdString());
    }
    // WAL: the writer commits while readers (the dashboard, another CLI) keep reading.
    // synchronous=NORMAL in WAL mode loses at most the last commits on a power cut, never corrupts.
    exec(db, u"PRAGMA journal_mode = WAL"_s);
    exec(db, u"PRAGMA synchronous = NORMAL"_s);
    exec(db, u"PRAGMA foreign_keys = ON"_s);
    return db;
}

void closeConnection(const QString &connection)
{
    {
        QSqlDatabase db = QSqlDatabase::database(connection, false);
        if (db.isValid())
            db.close();
    }
    QSqlDatabase::removeDatabase(connection);
}

int userVersion(QSqlDatabase &db)
{
    QSqlQuery q(db);
    if (!q.exec(u"PRAGMA user_version"_s) || !q.next())
        fail(db, u"reading the schema version"_s, q.lastError());
    return q.value(0).toInt();
}

void createSchema(QSqlDatabase &db, int version)
{
    CPPL_ENFORCE(version >= 1 && version <= kCurrentVersion, "unknown schema version");
    if (!db.transaction())
        fail(db, u"begin"_s, db.lastError());
    if (version == 1) {
        for (const char *s : kSchemaV1)
            exec(db, QString::fromLatin1(s));
    } else {
        exec(db, QString::fromLatin1(kRunsV2).arg(u"runs"_s));
        exec(db, QString::fromLatin1(kLogsV2).arg(u"logs"_s));
        for (const char *s : kRestV2)
            exec(db, QString::fromLatin1(s));
    }
    setUserVersion(db, version);
    if (!db.commit())
        fail(db, u"commit"_s, db.lastError());
}

int migrate(QSqlDatabase &db, const QString &path)
{
    const int found = userVersion(db);
    if (found > kCurrentVersion)
        throw IoError(QString(path + u": the run store has schema version %1, newer than this ClusterPPL knows (%2); "
                                     "use a newer ClusterPPL or point CLUSTERPPL_STORE elsewhere"_s.arg(found).arg(kCurrentVersion))
                          .toStdString());
    if (found == 0) {
        QSqlQuery q(db);
        if (!q.exec(u"SELECT count(*) FROM sqlite_master WHERE type = 'table'"_s) || !q.next())
            fail(db, u"inspecting the file"_s, q.lastError());
        if (q.value(0).toInt() != 0)
            throw IoError(QString(path + u": not a ClusterPPL run store (it has tables but no schema version); "
                                         "point CLUSTERPPL_STORE at another file"_s).toStdString());
        createSchema(db, kCurrentVersion);
        return 0;
    }
    for (int v = found; v < kCurrentVersion; ++v) {
        // Table rebuilds drop tables that others reference: foreign keys are off for the step
        // (it cannot change inside a transaction) and checked before the commit.
        exec(db, u"PRAGMA foreign_keys = OFF"_s);
        if (!db.transaction())
            fail(db, u"begin migration"_s, db.lastError());
        try {
            if (v == 1)
                migrate1to2(db);
            if (v == 2)
                migrate2to3(db);
            QSqlQuery check(db);
            if (!check.exec(u"PRAGMA foreign_key_check"_s))
                fail(db, u"foreign key check"_s, check.lastError());
            if (check.next())
                throw IoError(QString(path + u": migration %1 -> %2 left dangling references in table "_s.arg(v).arg(v + 1)
                                      + check.value(0).toString()).toStdString());
            setUserVersion(db, v + 1);
            if (!db.commit())
                fail(db, u"commit migration"_s, db.lastError());
        } catch (...) {
            db.rollback();
            exec(db, u"PRAGMA foreign_keys = ON"_s);
            throw;
        }
        exec(db, u"PRAGMA foreign_keys = ON"_s);
    }
    return found;
}

std::optional<std::int64_t> idOf(QSqlDatabase &db, const QString &runId)
{
    QSqlQuery q(db);
    q.prepare(u"SELECT id FROM runs WHERE run_id = ?"_s);
    execBound(db, q, {runId}, u"looking up a run"_s);
    if (!q.next())
        return std::nullopt;
    return q.value(0).toLongLong();
}

std::int64_t insertRun(QSqlDatabase &db, const RunRecord &rec, bool withDetails)
{
    ColumnValues row;
    row.add(u"run_id"_s, rec.runId);
    row.add(u"status"_s, statusName(rec.status));
    row.add(u"started"_s, date(rec.started.isValid() ? rec.started : QDateTime::currentDateTimeUtc()));
    row.add(u"ended"_s, date(rec.ended));
    row.add(u"source"_s, text(rec.source));
    row.add(u"profile_name"_s, text(rec.profileName));
    row.add(u"profile"_s, json(rec.profile));
    row.add(u"settings"_s, json(rec.settings));
    row.add(u"launcher"_s, text(rec.launcher));
    row.add(u"world_size"_s, rec.worldSize);
    row.add(u"groups_count"_s, rec.groupsCount);
    row.add(u"node_count"_s, rec.nodeCount);
    row.add(u"hosts"_s, json(rec.hosts));
    row.add(u"groups"_s, json(rec.groups));
    row.add(u"versions"_s, json(rec.versions));
    row.add(u"preflight"_s, json(rec.preflight));
    addOutcome(row, rec);
    row.add(u"model"_s, text(rec.model));
    row.add(u"data"_s, text(rec.data));
    row.add(u"protocol"_s, text(rec.protocol));
    row.add(u"settings_key"_s, text(rec.settingsKey));
    row.add(u"owner"_s, text(rec.owner));
    QSqlQuery q(db);
    q.prepare(u"INSERT INTO runs ("_s + row.columns.join(u", "_s) + u") VALUES ("_s + QStringList(row.columns.size(), u"?"_s).join(u","_s)
              + u")"_s);
    execBound(db, q, row.values, u"recording run "_s + rec.runId);
    const std::int64_t id = q.lastInsertId().toLongLong();
    if (withDetails) {
        replaceRankSummary(db, id, rec.ranks);
        insertSamples(db, id, rec.samples);
        insertLogs(db, id, rec.logs);
        for (const auto &a : rec.alerts)
            insertAlert(db, id, a);
    }
    return id;
}

void updatePreflight(QSqlDatabase &db, std::int64_t id, const QJsonArray &preflight, const QJsonObject &versions, const QJsonArray &hosts)
{
    QSqlQuery q(db);
    q.prepare(u"UPDATE runs SET preflight = ?, versions = ?, hosts = ? WHERE id = ?"_s);
    execBound(db, q, {json(preflight), json(versions), json(hosts), int64(id)}, u"recording pre-flight"_s);
}

void updateEnd(QSqlDatabase &db, std::int64_t id, const RunRecord &rec)
{
    ColumnValues row;
    row.add(u"status"_s, statusName(rec.status));
    row.add(u"ended"_s, date(rec.ended));
    addOutcome(row, rec);
    row.add(u"versions"_s, json(rec.versions));
    row.add(u"groups"_s, json(rec.groups));
    row.add(u"groups_count"_s, rec.groupsCount);
    row.add(u"world_size"_s, rec.worldSize);
    row.add(u"settings"_s, json(rec.settings)); // a Slurm run adds its job id, partition and nodes at the end
    row.add(u"hosts"_s, json(rec.hosts));       // rank 0's CPUs, from the result
    QSqlQuery q(db);
    q.prepare(u"UPDATE runs SET "_s + row.columns.join(u" = ?, "_s) + u" = ?, owner = '' WHERE id = ?"_s);
    execBound(db, q, row.values + QVariantList{int64(id)}, u"recording the end of run "_s + rec.runId);
    replaceRankSummary(db, id, rec.ranks);
}

void insertSamples(QSqlDatabase &db, std::int64_t id, const std::vector<RankSample> &samples)
{
    if (samples.empty())
        return;
    QSqlQuery q(db);
    q.prepare(u"INSERT INTO rank_samples (run, t, rank, tokens_per_second, wait_share, transfer_share, deviation, tokens)"
              " VALUES (?,?,?,?,?,?,?,?)"_s);
    for (const auto &s : samples)
        execBound(db, q, {int64(id), s.t, s.rank, s.tokensPerSecond, s.waitShare, s.transferShare, s.deviation, int64(s.tokens)},
                  u"recording samples"_s);
}

void insertLogs(QSqlDatabase &db, std::int64_t id, const std::vector<LogLine> &lines)
{
    if (lines.empty())
        return;
    QSqlQuery q(db);
    q.prepare(u"INSERT INTO logs (run, rank, seq, t, stream, line) VALUES (?,?,?,?,?,?)"_s);
    for (const auto &l : lines)
        execBound(db, q, {int64(id), l.rank, int64(l.seq), l.t, l.isStderr ? u"err"_s : u"out"_s, text(l.line)}, u"recording log lines"_s);
}

void trimLogs(QSqlDatabase &db, std::int64_t id, int rank, std::int64_t fromSeq, std::int64_t toSeq)
{
    QSqlQuery q(db);
    q.prepare(u"DELETE FROM logs WHERE run = ? AND rank = ? AND seq >= ? AND seq < ?"_s);
    execBound(db, q, {int64(id), rank, int64(fromSeq), int64(toSeq)}, u"trimming log lines"_s);
}

void insertAlert(QSqlDatabase &db, std::int64_t id, const StoredAlert &a)
{
    QSqlQuery q(db);
    q.prepare(u"INSERT INTO alerts (run, t, at, rank, kind, message) VALUES (?,?,?,?,?,?)"_s);
    execBound(db, q, {int64(id), a.t, date(a.when), a.rank, text(a.kind), text(a.message)}, u"recording an alert"_s);
}

void replaceRankSummary(QSqlDatabase &db, std::int64_t id, const std::vector<RankSummary> &ranks)
{
    QSqlQuery del(db);
    del.prepare(u"DELETE FROM rank_summary WHERE run = ?"_s);
    execBound(db, del, {int64(id)}, u"replacing rank summaries"_s);
    QSqlQuery q(db);
    q.prepare(u"INSERT INTO rank_summary (run, rank, host, grp, tokens, windows, rounds, compute_seconds, wait_seconds,"
              " transfer_seconds, wall_seconds, tokens_per_second, exit_code) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)"_s);
    for (const auto &r : ranks)
        execBound(db, q,
                  {int64(id), r.rank, text(r.host), r.group, int64(r.tokens), int64(r.windows), int64(r.rounds), r.computeSeconds, r.waitSeconds,
                   r.transferSeconds, r.wallSeconds, r.tokensPerSecond, opt(r.exitCode)},
                  u"recording rank summaries"_s);
}

} // namespace cppl::core::history::sql
