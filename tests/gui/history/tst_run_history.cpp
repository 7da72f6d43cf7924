// SPDX-License-Identifier: MIT
// The run history on real SQLite files: schema creation, migration from v1 with its data kept, the
// batching writer, runs left "running" by a dead process, filters, export/import, and the
// comparison and projection on synthetic runs whose figures follow a known model.
#include "run/run_engine.h"
#include "history/comparison.h"
#include "history/run_recorder.h"
#include "history/run_export.h"
#include "history/run_history.h"
#include "history/history_sql.h"
#include "history/sweep.h"

#include "cppl/errors.h"

#include "test_runs.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QProcess>
#include <QSqlDatabase>
#include <QSqlQuery>
#include <QTemporaryDir>
#include <QScopeGuard>
#include <QSignalSpy>
#include <QCryptographicHash>
#include <QTest>
#include <QTimeZone>
#include <QRandomGenerator>
#include <QSysInfo>
#include <QThread>
#include <QElapsedTimer>
#include <QDir>
#include <QFileInfo>

#include <cmath>

using namespace Qt::StringLiterals;
using namespace cppl::core::history;

namespace {

QByteArray resultJson(int worldSize, double ppl, const QString &exact, qint64 tokens, double tps, const QJsonArray &ranks = {},
                      qint64 sync = 1000)
{
    QJsonObject r = cppl::test::agentResult(worldSize, ppl, ppl / 100, exact, tokens, tps, u"/models/m"_s, u"/data/d.txt"_s, sync);
    if (!ranks.isEmpty()) {
        r.insert(u"ranks"_s, ranks);
        qint64 rounds = ranks.first().toObject().value(u"rounds"_s).toInteger();
        r.insert(u"rounds"_s, rounds);
    }
    return QJsonDocument(r).toJson(QJsonDocument::Compact);
}

RunRecord finishedRun(const QString &id, const QByteArray &result, const QDateTime &started)
{
    RunRecord r = cppl::test::finishedRun(id, result, started, 10);
    r.nodeCount = 1;
    return r;
}

// The model the projection assumes, with known parameters: per-rank speed s(R) = s1 R^-alpha,
// collective cost per round c(R) = a + b log2 R, rounds = ceil(N / (R S)).
struct Truth
{
    double s1 = 1000, alpha = 0.15, a = 0.004, b = 0.003;
    qint64 n = 200000, sync = 1000;
    double speed(int r) const { return s1 * std::pow(r, -alpha); }
    double rounds(int r) const { return r == 1 ? 0 : std::max(1.0, std::ceil(double(n) / (r * double(sync)))); }
    double comm(int r) const { return r == 1 ? 0 : a + b * std::log2(r); }
    double tc(int r) const { return double(n) / (r * speed(r)); }
    double tm(int r) const { return rounds(r) * comm(r); }
    double throughput(int r) const { return double(n) / (tc(r) + tm(r)); }
};

RunRecord modelRun(const Truth &t, int r, const QString &exact, double ppl, const QDateTime &when)
{
    QJsonArray ranks;
    if (r > 1)
        for (int k = 0; k < r; ++k)
            ranks.append(QJsonObject{{u"rank"_s, k},
                                     {u"host"_s, u"node%1"_s.arg(k / 2)},
                                     {u"group"_s, k / 2},
                                     {u"tokens"_s, t.n / r},
                                     {u"windows"_s, 10},
                                     {u"rounds"_s, static_cast<qint64>(t.rounds(r))},
                                     {u"compute_seconds"_s, double(t.n / r) / t.speed(r)},
                                     {u"wait_seconds"_s, t.tm(r) * 0.25},
                                     {u"transfer_seconds"_s, t.tm(r) * 0.75},
                                     {u"wall_seconds"_s, t.tc(r) + t.tm(r)}});
    return finishedRun(u"model-r%1"_s.arg(r), resultJson(r, ppl, exact, t.n, t.throughput(r), ranks, t.sync), when);
}

int countRows(const QString &path, const QString &sql)
{
    const QString name = u"count-%1"_s.arg(QRandomGenerator::global()->generate());
    int n = -1;
    {
        QSqlDatabase db = QSqlDatabase::addDatabase(u"QSQLITE"_s, name);
        db.setDatabaseName(path);
        if (db.open()) {
            QSqlQuery q(db);
            if (q.exec(sql) && q.next())
                n = q.value(0).toInt();
        }
    }
    QSqlDatabase::removeDatabase(name);
    return n;
}

} // namespace

class TestRunHistory : public QObject
{
    Q_OBJECT

    QTemporaryDir m_dir;
    int m_files = 0;
    QString freshPath() { return m_dir.filePath(u"store-%1/runs.sqlite"_s.arg(m_files++)); }

private Q_SLOTS:
    void createsSchema()
    {
        const QString path = freshPath();
        {
            RunHistory s(path);
            QCOMPARE(s.versionFound(), 0);
            QVERIFY(s.list().empty());
        }
        QCOMPARE(countRows(path, u"PRAGMA user_version"_s), RunHistory::schemaVersion());
        QCOMPARE(countRows(path, u"SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN "
                                 "('runs', 'rank_samples', 'rank_summary', 'logs', 'alerts')"_s),
                 5);
        {
            QSqlDatabase db = QSqlDatabase::addDatabase(u"QSQLITE"_s, u"wal"_s);
            db.setDatabaseName(path);
            QVERIFY(db.open());
            QSqlQuery q(db);
            QVERIFY(q.exec(u"PRAGMA journal_mode"_s) && q.next());
            QCOMPARE(q.value(0).toString(), u"wal"_s);
        }
        QSqlDatabase::removeDatabase(u"wal"_s);
        // Reopening is a no-op migration.
        RunHistory again(path);
        QCOMPARE(again.versionFound(), RunHistory::schemaVersion());
    }

    void migratesFromVersion1()
    {
        const QString path = freshPath();
        QDir().mkpath(QFileInfo(path).absolutePath());
        const QByteArray one = resultJson(1, 3.25, u"xs1:01"_s, 4000, 500.0);
        const QJsonArray ranks{QJsonObject{{u"rank"_s, 0}, {u"host"_s, u"a"_s}, {u"tokens"_s, 2000}, {u"rounds"_s, 2}, {u"compute_seconds"_s, 4.0},
                                           {u"wait_seconds"_s, 0.5}, {u"transfer_seconds"_s, 0.1}},
                               QJsonObject{{u"rank"_s, 1}, {u"host"_s, u"b"_s}, {u"tokens"_s, 2000}, {u"rounds"_s, 2}, {u"compute_seconds"_s, 4.2},
                                           {u"wait_seconds"_s, 0.3}, {u"transfer_seconds"_s, 0.1}}};
        const QByteArray two = resultJson(2, 3.25, u"xs1:01"_s, 4000, 900.0, ranks);
        {
            QSqlDatabase db = cppl::core::history::sql::openConnection(path, u"v1"_s);
            sql::createSchema(db, 1);
            sql::exec(db, u"INSERT INTO runs (id, run_id, status, started, ended, profile, result, ppl, world_size) VALUES "
                          "(1, 'old-one', 'ok', '2026-01-02T03:04:05.000Z', '2026-01-02T03:05:00.000Z', NULL, '%1', 3.25, 1),"
                          "(2, 'old-two', 'ok', '2026-01-03T03:04:05.000Z', NULL, NULL, '%2', 3.25, 2),"
                          "(3, 'old-broken', 'crashed', '2026-01-04T00:00:00.000Z', NULL, NULL, NULL, NULL, 4)"_s.arg(QString::fromUtf8(one),
                                                                                                                      QString::fromUtf8(two)));
            sql::exec(db, u"INSERT INTO logs (run, rank, line) VALUES (1, 0, 'first'), (1, 0, 'second'), (2, 1, 'other'), (1, 0, 'third')"_s);
        }
        sql::closeConnection(u"v1"_s);
        RunHistory s(path);
        QCOMPARE(s.versionFound(), 1);
        QCOMPARE(countRows(path, u"PRAGMA user_version"_s), 3); // through 2 to 3
        const auto runs = s.list();
        QCOMPARE(runs.size(), std::size_t(3));
        const auto a = s.get(u"old-one"_s);
        QVERIFY(a);
        QCOMPARE(a->status, RunStatus::Finished); // v1's "ok"
        QCOMPARE(a->started, QDateTime(QDate(2026, 1, 2), QTime(3, 4, 5), QTimeZone::utc()));
        QCOMPARE(*a->ppl, 3.25);
        QCOMPARE(*a->pplStderr, 0.0325);  // back-filled from the result
        QCOMPARE(a->nllSumExact, u"xs1:01"_s);
        QCOMPARE(a->tokensScored, 4000);
        QCOMPARE(a->protocol, u"llama.cpp"_s);
        QVERIFY(!a->settingsKey.isEmpty());
        QCOMPARE(a->logs.size(), std::size_t(3));
        QCOMPARE(a->logs[0].line, u"first"_s);
        QCOMPARE(a->logs[2].line, u"third"_s);
        QCOMPARE(a->logs[2].seq, 2);
        const auto b = s.get(u"old-two"_s);
        QCOMPARE(b->ranks.size(), std::size_t(2)); // rank summaries from ranks[]
        QCOMPARE(b->ranks[1].waitSeconds, 0.3);
        QCOMPARE(b->groupsCount, 1);
        QCOMPARE(s.get(u"old-broken"_s)->status, RunStatus::Failed); // unknown v1 status
        // The v1 one-rank run is the v2 baseline of the same settings.
        const auto base = s.baselineFor(b->settingsKey);
        QVERIFY(base);
        QCOMPARE(base->runId, u"old-one"_s);
        // Foreign keys hold after the rebuild: deleting takes the logs along.
        QVERIFY(s.remove(u"old-one"_s));
        QCOMPARE(countRows(path, u"SELECT count(*) FROM logs"_s), 1);
    }

    void settingsKeyResolvesDtypeAuto()
    {
        // dtype auto is what the agents pick: float32 on a CPU, bfloat16 on a GPU. With the device
        // named, the key is that dtype's (an auto run and a float32 CPU run are baselines for each
        // other); with device auto too, only auto runs share it.
        auto keyOf = [](const char *dtype, const char *device) {
            cppl::ClusterProfile p;
            p.launcher = "local";
            p.evaluation.model = "/m";
            p.evaluation.text = "/t.txt";
            p.evaluation.dtype = dtype;
            p.evaluation.device = device;
            return settingsKey(settingsInputsFromProfile(p, {}));
        };
        QCOMPARE(cppl::EvaluationSpec{}.dtype, std::string("auto"));
        QCOMPARE(keyOf("auto", "cpu"), keyOf("float32", "cpu"));
        QCOMPARE(keyOf("auto", "cuda"), keyOf("bfloat16", "cuda"));
        QCOMPARE(keyOf("auto", "cuda:1"), keyOf("bfloat16", "cuda"));
        QVERIFY(keyOf("auto", "auto") != keyOf("float32", "auto"));
        QVERIFY(keyOf("auto", "auto") != keyOf("bfloat16", "auto"));
        QVERIFY(keyOf("float32", "cpu") != keyOf("bfloat16", "cpu"));
    }

    void settingsKeyCountsQuantization()
    {
        // A run quantized at load is another setting (its baseline is a one-rank run quantized the
        // same way); a float run's key is what it was before quantization existed; the profile's
        // and the result's spellings agree (int4 = int4-sym); a GPTQ checkpoint's own method is
        // the model's, not a setting.
        auto profile = [](const char *quantize, std::int64_t group, bool head) {
            cppl::ClusterProfile p;
            p.launcher = "local";
            p.evaluation.model = "/m";
            p.evaluation.text = "/t.txt";
            p.evaluation.device = "cpu";
            p.evaluation.quantize = quantize;
            p.evaluation.quantGroup = group;
            p.evaluation.quantizeHead = head;
            return settingsInputsFromProfile(p, {});
        };
        const SettingsKeyInputs plain = profile("none", 32, false);
        QVERIFY(plain.quantize.isEmpty());
        QVERIFY(!settingsJson(plain).contains(u"quantize"_s));
        // The key stored databases hold for this float run (the canonical text before quantization existed).
        const QByteArray before = "model=/m\ndata=/t.txt\nprotocol=hf-sliding\ncontext=512\nstride=512\nbatch=0\nmax_windows=0\ndtype=float32\n";
        QCOMPARE(settingsKey(plain), QString::fromLatin1(QCryptographicHash::hash(before, QCryptographicHash::Sha256).toHex().left(32)));
        QVERIFY(settingsKey(profile("int8", 32, false)) != settingsKey(plain));
        QVERIFY(settingsKey(profile("int4", 32, false)) != settingsKey(profile("int4-asym", 32, false)));
        QVERIFY(settingsKey(profile("int4", 32, false)) != settingsKey(profile("int4", 64, false)));
        QVERIFY(settingsKey(profile("int4", 32, false)) != settingsKey(profile("int4", 32, true)));
        QCOMPARE(settingsKey(profile("int4", 32, false)), settingsKey(profile("int4-sym", 32, false)));
        QCOMPARE(settingsJson(profile("int4", 64, true)).value(u"quantize"_s).toString(), u"int4-sym/64/head"_s);
        QJsonObject result{{u"model"_s, QJsonObject{{u"path"_s, u"/m"_s}}}, {u"data"_s, QJsonObject{{u"path"_s, u"/t.txt"_s}}},
                           {u"protocol"_s, u"hf-sliding"_s}, {u"dtype"_s, u"float32"_s}, {u"context"_s, 512}, {u"stride"_s, 512},
                           {u"batch"_s, 0}, {u"max_windows"_s, 0}};
        QCOMPARE(settingsKey(settingsInputsFromResult(result)), settingsKey(plain));
        result.insert(u"quantization"_s, QJsonObject{{u"method"_s, u"int4-sym"_s}, {u"group"_s, 64}, {u"head"_s, true}});
        QCOMPARE(settingsKey(settingsInputsFromResult(result)), settingsKey(profile("int4", 64, true)));
        result.insert(u"quantization"_s, QJsonObject{{u"method"_s, u"gptq-int4"_s}, {u"group"_s, 128}, {u"head"_s, false}});
        QCOMPARE(settingsKey(settingsInputsFromResult(result)), settingsKey(plain));
    }

    void baselinesByDtype()
    {
        // Profiles with dtype auto on GPUs (bfloat16) and on CPUs (float32) share a settings key:
        // a run is compared with a baseline that ran in its dtype, and says why when there is none.
        auto run = [](const QString &id, int world, const QString &dtype, const QString &exact, double ppl, const QDateTime &when) {
            QJsonObject r = cppl::test::agentResult(world, ppl, ppl / 100, exact, 1000, 100.0 * world, u"/models/m"_s, u"/data/d.txt"_s);
            r.insert(u"dtype"_s, dtype);
            RunRecord rec = finishedRun(id, QJsonDocument(r).toJson(QJsonDocument::Compact), when);
            rec.settingsKey = u"one-key"_s; // what settingsInputsFromProfile gives both (dtype and device auto)
            return rec;
        };
        const QDateTime t0(QDate(2026, 12, 1), QTime(9, 0), QTimeZone::utc());
        const RunRecord cpu1 = run(u"cpu-1"_s, 1, u"float32"_s, u"xs1:f32"_s, 4.30, t0);
        const RunRecord gpu1 = run(u"gpu-1"_s, 1, u"bfloat16"_s, u"xs1:bf16"_s, 4.33, t0.addSecs(60));
        const RunRecord cpu4 = run(u"cpu-4"_s, 4, u"float32"_s, u"xs1:f32"_s, 4.30, t0.addSecs(120));
        const RunRecord gpu4 = run(u"gpu-4"_s, 4, u"bfloat16"_s, u"xs1:bf16"_s, 4.33, t0.addSecs(180));
        QCOMPARE(resultDtype(gpu4), u"bfloat16"_s);
        RunHistory s(freshPath());
        for (const RunRecord *r : {&cpu1, &gpu1, &cpu4, &gpu4})
            s.insert(*r);
        QCOMPARE(s.baselineFor(u"one-key"_s)->runId, u"gpu-1"_s); // the newest, whatever it ran in
        QCOMPARE(s.baselineFor(u"one-key"_s, {}, u"float32"_s)->runId, u"cpu-1"_s);
        QCOMPARE(s.baselineFor(u"one-key"_s, {}, u"bfloat16"_s)->runId, u"gpu-1"_s);
        QVERIFY(!s.baselineFor(u"one-key"_s, {}, u"float16"_s));
        // Compared: each with its own dtype's baseline, both bit-identical.
        const Comparison c = compareRuns({cpu1, gpu1, cpu4, gpu4});
        for (const ScalingPoint &p : c.points) {
            QCOMPARE(p.baselineRunId, p.runId.startsWith(u"cpu"_s) ? u"cpu-1"_s : u"gpu-1"_s);
            QVERIFY(p.bitIdentical.value_or(false));
        }
        // Without a bfloat16 baseline the GPU run is not compared, and the warning says why.
        const Comparison only = compareRuns({cpu1, gpu4});
        QCOMPARE(only.points.size(), std::size_t(2));
        QCOMPARE(only.points[1].runId, u"gpu-4"_s);
        QVERIFY(only.points[1].baselineRunId.isEmpty());
        QVERIFY(!only.points[1].bitIdentical.has_value());
        QVERIFY2(only.warnings.join(u'\n').contains(u"run gpu-4 ran in bfloat16, the one-rank baseline of its settings in float32: not compared"_s),
                 qPrintable(only.warnings.join(u'\n')));
    }

    void refusesNewerAndForeignFiles()
    {
        const QString newer = freshPath();
        QDir().mkpath(QFileInfo(newer).absolutePath());
        {
            QSqlDatabase db = sql::openConnection(newer, u"newer"_s);
            sql::exec(db, u"PRAGMA user_version = 99"_s);
        }
        sql::closeConnection(u"newer"_s);
        try {
            RunHistory s(newer);
            QFAIL("a newer schema was opened");
        } catch (const cppl::IoError &e) {
            QVERIFY2(QString::fromUtf8(e.what()).contains(u"schema version 99, newer than"_s), e.what());
        }
        const QString foreign = freshPath();
        QDir().mkpath(QFileInfo(foreign).absolutePath());
        {
            QSqlDatabase db = sql::openConnection(foreign, u"foreign"_s);
            sql::exec(db, u"CREATE TABLE something (x)"_s);
        }
        sql::closeConnection(u"foreign"_s);
        try {
            RunHistory s(foreign);
            QFAIL("a foreign database was opened");
        } catch (const cppl::IoError &e) {
            QVERIFY2(QString::fromUtf8(e.what()).contains(u"not a ClusterPPL run store"_s), e.what());
        }
    }

    void writerBatchesAndKeepsEverything()
    {
        const QString path = freshPath();
        const int kSamples = 5000;
        std::int64_t transactions = 0;
        {
            RunHistory s(path);
            HistoryWriter &w = s.writer();
            RunRecord h;
            h.runId = u"batched"_s;
            h.started = QDateTime::currentDateTimeUtc();
            h.owner = currentOwner();
            w.beginRun(h);
            QElapsedTimer t;
            t.start();
            for (int i = 0; i < kSamples; ++i) {
                w.addSamples(h.runId, {RankSample{i * 0.01, i % 4, 100.0 + i, 0.01, 0.02, 1e-6, i}});
                w.addLogs(h.runId, {LogLine{i % 4, i / 4, i * 0.01, false, u"line %1"_s.arg(i)}});
            }
            // Enqueueing never waits on the disk: 10,000 operations in well under a second.
            qInfo("enqueued %d operations in %lld ms", 2 * kSamples, static_cast<long long>(t.elapsed()));
            QVERIFY(t.elapsed() < 2000);
            w.addAlert(h.runId, StoredAlert{1.5, QDateTime::currentDateTimeUtc(), 2, u"stalled"_s, u"rank 2 stalled"_s});
            w.addSamples(u"no-such-run"_s, {RankSample{}});
            // destructor: drains the queue
            s.flush();
            transactions = w.transactions();
            QCOMPARE(w.operationsDropped(), 1);
            QVERIFY(w.lastError().isEmpty());
        }
        QVERIFY2(transactions < 50, qPrintable(QString::number(transactions)));
        QCOMPARE(countRows(path, u"SELECT count(*) FROM rank_samples"_s), kSamples);
        QCOMPARE(countRows(path, u"SELECT count(*) FROM logs"_s), kSamples);
        QCOMPARE(countRows(path, u"SELECT count(*) FROM alerts"_s), 1);
        // Closing without flush() loses nothing either.
        const QString path2 = freshPath();
        {
            RunHistory s(path2);
            RunRecord h;
            h.runId = u"closed"_s;
            s.writer().beginRun(h);
            for (int i = 0; i < 1000; ++i)
                s.writer().addSamples(h.runId, {RankSample{double(i), 0, 1, 0, 0, 0, i}});
        }
        QCOMPARE(countRows(path2, u"SELECT count(*) FROM rank_samples"_s), 1000);
        // A batch interval bounds what a crash loses: data enqueued is committed within ~1 s
        // without any flush (read by another connection while the writer lives).
        const QString path3 = freshPath();
        RunHistory s(path3);
        RunRecord h;
        h.runId = u"live"_s;
        h.owner = currentOwner();
        s.writer().beginRun(h);
        s.writer().addSamples(h.runId, {RankSample{0.5, 0, 1, 0, 0, 0, 1}});
        QElapsedTimer t;
        t.start();
        while (countRows(path3, u"SELECT count(*) FROM rank_samples"_s) != 1 && t.elapsed() < 5000)
            QThread::msleep(20);
        qInfo("a sample was on disk %lld ms after it was enqueued", static_cast<long long>(t.elapsed()));
        QVERIFY(t.elapsed() <= 1200);
    }

    void runningRunsOfDeadProcessesBecomeInterrupted()
    {
        const QString path = freshPath();
        // A pid that existed and is gone.
        QProcess p;
        p.start(u"true"_s, {});
        QVERIFY(p.waitForFinished());
        const qint64 deadPid = p.processId() > 0 ? p.processId() : 999999;
        {
            RunHistory s(path);
            RunRecord dead;
            dead.runId = u"crashed"_s;
            dead.started = QDateTime::currentDateTimeUtc().addSecs(-60);
            dead.owner = QSysInfo::machineHostName() + u":999999"_s; // pid above pid_max
            Q_UNUSED(deadPid);
            s.writer().beginRun(dead);
            s.writer().addSamples(dead.runId, {RankSample{12.5, 0, 10, 0, 0, 0, 5}, RankSample{12.5, 1, 11, 0, 0, 0, 6}});
            RunRecord alive;
            alive.runId = u"still-running"_s;
            alive.started = QDateTime::currentDateTimeUtc();
            alive.owner = currentOwner(); // this process: it is alive
            s.writer().beginRun(alive);
        }
        RunHistory s(path);
        QCOMPARE(s.interruptedOnOpen(), QStringList{u"crashed"_s});
        const auto r = s.get(u"crashed"_s);
        QCOMPARE(r->status, RunStatus::Interrupted);
        QCOMPARE(r->samples.size(), std::size_t(2));
        QCOMPARE(r->ended, r->started.addMSecs(12500)); // the last thing received
        QVERIFY(r->firstCause.contains(u"ended before the run did"_s));
        QCOMPARE(s.get(u"still-running"_s)->status, RunStatus::Running);
    }

    void listFilters()
    {
        RunHistory s(freshPath());
        const QDateTime t0(QDate(2026, 11, 1), QTime(12, 0), QTimeZone::utc());
        RunRecord a = finishedRun(u"alpha-1"_s, resultJson(1, 3.0, u"xs1:aa"_s, 100, 50), t0);
        RunRecord b = finishedRun(u"beta-2"_s, resultJson(2, 3.0, u"xs1:aa"_s, 100, 90), t0.addDays(1));
        b.nodeCount = 2;
        RunRecord c = finishedRun(u"gamma-4"_s, resultJson(4, 4.0, u"xs1:bb"_s, 100, 150), t0.addDays(2));
        c.protocol = u"hf-sliding"_s;
        c.model = u"/models/other"_s;
        c.status = RunStatus::Failed;
        c.firstCause = u"rank 3 on node7: killed by signal 9"_s;
        for (const auto *r : {&a, &b, &c})
            s.insert(*r);
        auto ids = [&](const RunFilter &f) {
            QStringList out;
            for (const auto &r : s.list(f))
                out << r.runId;
            return out;
        };
        QCOMPARE(ids({}), (QStringList{u"gamma-4"_s, u"beta-2"_s, u"alpha-1"_s})); // newest first
        RunFilter f;
        f.model = u"other"_s;
        QCOMPARE(ids(f), QStringList{u"gamma-4"_s});
        f = {};
        f.protocol = u"llama.cpp"_s;
        QCOMPARE(ids(f), (QStringList{u"beta-2"_s, u"alpha-1"_s}));
        f = {};
        f.status = RunStatus::Failed;
        QCOMPARE(ids(f), QStringList{u"gamma-4"_s});
        f = {};
        f.from = t0.addSecs(3600);
        f.to = t0.addDays(1).addSecs(3600);
        QCOMPARE(ids(f), QStringList{u"beta-2"_s});
        f = {};
        f.worldSize = 1;
        QCOMPARE(ids(f), QStringList{u"alpha-1"_s});
        f = {};
        f.nodeCount = 2;
        QCOMPARE(ids(f), QStringList{u"beta-2"_s});
        f = {};
        f.text = u"node7"_s;
        QCOMPARE(ids(f), QStringList{u"gamma-4"_s});
        f = {};
        f.data = u"d.txt"_s;
        f.limit = 1;
        QCOMPARE(ids(f), QStringList{u"gamma-4"_s});
        // Baseline: the newest finished one-rank run with the key; deleting it removes it.
        QCOMPARE(s.baselineFor(b.settingsKey)->runId, u"alpha-1"_s);
        QVERIFY(!s.baselineFor(b.settingsKey, u"alpha-1"_s));
        QVERIFY(s.remove(u"alpha-1"_s));
        QVERIFY(!s.remove(u"alpha-1"_s));
        QVERIFY(!s.baselineFor(b.settingsKey));
        try {
            s.insert(b);
            QFAIL("a duplicate run id was stored");
        } catch (const cppl::IoError &e) {
            QVERIFY2(QString::fromUtf8(e.what()).contains(u"already in the store"_s), e.what());
        }
    }

    void exportImportRoundTrip()
    {
        RunHistory s(freshPath());
        RunRecord r = modelRun(Truth{}, 4, u"xs1:0123456789abcdef"_s, 3.141592653589793, QDateTime(QDate(2026, 5, 6), QTime(7, 8, 9, 123), QTimeZone::utc()));
        r.runId = u"round-trip"_s;
        r.versions = QJsonObject{{u"agent"_s, u"0.9.0"_s}, {u"libtorch"_s, u"2.1.2"_s}};
        r.preflight = QJsonArray{QJsonObject{{u"host"_s, u"localhost"_s}, {u"ran"_s, true}}};
        r.profile = QJsonObject{{u"name"_s, u"p"_s}};
        r.hosts = QJsonArray{QJsonObject{{u"name"_s, u"localhost"_s}}};
        r.samples = {{0.25, 0, 1234.5678901234567, 0.001, 0.002, -3.3e-7, 10}, {1.25, 3, 99.5, 0.5, 0.25, 1e-9, 20}};
        r.logs = {{0, 0, 0.1, false, u"héllo"_s}, {0, 5, 0.2, true, u"after a gap"_s}, {-1, 0, 0.0, true, u"launcher"_s}};
        r.alerts = {{2.5, r.started.addSecs(2), 1, u"comm-share"_s, u"rank 1 on node0: 12.0%"_s}};
        s.insert(r);
        const RunRecord stored = *s.get(u"round-trip"_s);
        const QJsonObject exported = runToJson(stored);
        const QByteArray text = QJsonDocument(exported).toJson();
        RunHistory other(freshPath());
        other.insert(runFromJson(QJsonDocument::fromJson(text).object()));
        const RunRecord back = *other.get(u"round-trip"_s);
        // Everything equal, numbers bit for bit: the export of the import is the export.
        QCOMPARE(QJsonDocument(runToJson(back)).toJson(), text);
        QCOMPARE(back.samples[0].tokensPerSecond, 1234.5678901234567);
        QCOMPARE(back.logs.size(), std::size_t(3));
        QCOMPARE(back.logsDropped, (std::vector<std::pair<int, std::int64_t>>{{0, 4}}));
        QCOMPARE(back.ranks.size(), std::size_t(4));
        QCOMPARE(back.started, r.started);
        // A bare agent result imports as a finished run.
        const RunRecord bare = runFromJson(QJsonDocument::fromJson(r.resultJson).object(), u"bare"_s);
        QCOMPARE(bare.status, RunStatus::Finished);
        QCOMPARE(bare.worldSize, 4);
        QCOMPARE(bare.nodeCount, 2);
        QCOMPARE(bare.settingsKey, r.settingsKey);
        QCOMPARE(bare.ranks.size(), std::size_t(4));
        // Bad inputs name what is wrong.
        auto refuse = [](const QJsonObject &o, const QString &why) {
            try {
                (void)runFromJson(o);
                QFAIL("accepted");
            } catch (const cppl::ConfigError &e) {
                QVERIFY2(QString::fromUtf8(e.what()).contains(why), e.what());
            }
        };
        refuse(QJsonObject{{u"hello"_s, 1}}, u"neither an exported run"_s);
        refuse(QJsonObject{{u"ppl"_s, 1.0}}, u"no \"nll_sum_exact\""_s);
        QJsonObject wrong = exported;
        wrong[u"version"_s] = 7;
        refuse(wrong, u"\"version\" is 7"_s);
        QJsonObject badStatus = exported;
        QJsonObject run = badStatus[u"run"_s].toObject();
        run[u"status"_s] = u"done"_s;
        badStatus[u"run"_s] = run;
        refuse(badStatus, u"run.status: \"done\""_s);
    }

    /// The dashboard and the CLI kept a history each in earlier builds; the shared one is made from both,
    /// once, and the earlier files are not touched.
    void adoptsTheEarlierStoresOnce()
    {
        QTemporaryDir home;
        const QByteArray oldStore = qgetenv("CLUSTERPPL_STORE"), oldData = qgetenv("XDG_DATA_HOME");
        const auto restore = qScopeGuard([&] {
            qputenv("CLUSTERPPL_STORE", oldStore);
            oldData.isNull() ? qunsetenv("XDG_DATA_HOME") : qputenv("XDG_DATA_HOME", oldData);
        });
        qunsetenv("CLUSTERPPL_STORE");
        qputenv("XDG_DATA_HOME", QFile::encodeName(home.path()));
        const QString target = home.filePath(u"clusterppl/runs.sqlite"_s);
        QCOMPARE(RunHistory::defaultPath(), target);
        QCOMPARE(RunHistory::earlierDefaultPaths(),
                 (QStringList{home.filePath(u"ClusterPPL/clusterppl/runs.sqlite"_s), home.filePath(u"clusterppl-cli/runs.sqlite"_s)}));
        // Nothing earlier: nothing made.
        QCOMPARE(RunHistory::adoptEarlierStores(), QStringList{});
        QVERIFY(!QFileInfo::exists(target));

        const QString dashboard = RunHistory::earlierDefaultPaths()[0], cli = RunHistory::earlierDefaultPaths()[1];
        const QDateTime t0(QDate(2026, 5, 6), QTime(7, 8, 9), QTimeZone::utc());
        RunRecord full = modelRun(Truth{}, 4, u"xs1:0123456789abcdef"_s, 3.25, t0);
        full.runId = u"from-the-dashboard"_s;
        full.samples = {{0.25, 0, 1234.5, 0.001, 0.002, -3.3e-7, 10}, {1.25, 3, 99.5, 0.5, 0.25, 1e-9, 20}};
        full.logs = {{0, 0, 0.1, false, u"a line"_s}};
        full.alerts = {{2.5, t0.addSecs(2), 1, u"comm-share"_s, u"rank 1: 12.0%"_s}};
        QByteArray exported;
        {
            RunHistory d(dashboard);
            d.insert(full);
            exported = QJsonDocument(runToJson(*d.get(full.runId))).toJson();
            RunRecord same = modelRun(Truth{}, 2, u"xs1:01"_s, 3.5, t0.addSecs(60));
            same.runId = u"same-id"_s;
            d.insert(same);
            RunHistory c(cli);
            RunRecord one = modelRun(Truth{}, 1, u"xs1:02"_s, 3.75, t0.addSecs(120));
            one.runId = u"same-id"_s;
            c.insert(one);
            RunRecord crashed; // left running by a recorder that is gone
            crashed.runId = u"crashed"_s;
            crashed.started = t0.addSecs(180);
            crashed.owner = QSysInfo::machineHostName() + u":999999"_s;
            c.writer().beginRun(crashed);
        }
        const auto bytes = [](const QString &path) {
            QFile f(path);
            return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
        };
        const QByteArray dashboardBefore = bytes(dashboard), cliBefore = bytes(cli);
        QVERIFY(!dashboardBefore.isEmpty() && !cliBefore.isEmpty());

        const QStringList lines = RunHistory::adoptEarlierStores();
        QCOMPARE(lines.size(), 3);
        QCOMPARE(lines[0], u"run history: 2 runs from "_s + dashboard);
        QCOMPARE(lines[1], u"run history: 2 runs from "_s + cli + u" (already in the history by id: same-id as same-id.2)"_s);
        QVERIFY2(lines[2].contains(target) && lines[2].contains(u"share"_s), qPrintable(lines[2]));
        // The earlier files as they were (their copies were opened, migrated and marked).
        QCOMPARE(bytes(dashboard), dashboardBefore);
        QCOMPARE(bytes(cli), cliBefore);
        // Only the history itself is left beside it: no staging file, no write-ahead log.
        QCOMPARE(QDir(home.filePath(u"clusterppl"_s)).entryList(QDir::Files), QStringList{u"runs.sqlite"_s});
        {
            RunHistory s(target);
            QCOMPARE(s.list().size(), std::size_t(4));
            const RunRecord back = *s.get(u"from-the-dashboard"_s);
            QCOMPARE(QJsonDocument(runToJson(back)).toJson(), exported); // everything, numbers bit for bit
            QCOMPARE(back.samples.size(), std::size_t(2));
            QCOMPARE(back.samples[0].tokensPerSecond, 1234.5);
            QCOMPARE(back.logs.size(), std::size_t(1));
            QCOMPARE(back.alerts.size(), std::size_t(1));
            QCOMPARE(back.ppl, 3.25);
            QCOMPARE(s.get(u"same-id"_s)->worldSize, 2);
            QCOMPARE(s.get(u"same-id.2"_s)->worldSize, 1);
            QCOMPARE(s.get(u"crashed"_s)->status, RunStatus::Interrupted);
            QVERIFY(s.remove(u"same-id.2"_s));
        }
        // Once: a run deleted from the shared history does not come back.
        QCOMPARE(RunHistory::adoptEarlierStores(), QStringList{});
        QVERIFY(!RunHistory(target).contains(u"same-id.2"_s));

        // A set CLUSTERPPL_STORE is the user's choice: nothing adopted.
        QVERIFY(QFile::remove(target));
        qputenv("CLUSTERPPL_STORE", QFile::encodeName(home.filePath(u"elsewhere.sqlite"_s)));
        QCOMPARE(RunHistory::adoptEarlierStores(), QStringList{});
        QVERIFY(!QFileInfo::exists(target));
        qunsetenv("CLUSTERPPL_STORE");

        // An earlier file that is not a run history: said, with what to do; the other one adopted.
        QFile junk(dashboard);
        QVERIFY(junk.open(QIODevice::WriteOnly | QIODevice::Truncate));
        junk.write("not a database, just some bytes that are long enough to be looked at by SQLite\n");
        junk.close();
        const QStringList second = RunHistory::adoptEarlierStores();
        QCOMPARE(second.size(), 3);
        QVERIFY2(second[0].startsWith(u"run history: the runs in "_s + dashboard + u" could not be read ("_s), qPrintable(second[0]));
        QVERIFY2(second[0].contains(u"clusterppl-cli export RUN"_s), qPrintable(second[0]));
        QCOMPARE(second[1], u"run history: 2 runs from "_s + cli);
        QCOMPARE(RunHistory(target).list().size(), std::size_t(2));
    }

    void comparisonOnAKnownModel()
    {
        const Truth t;
        const QDateTime when(QDate(2026, 11, 30), QTime(10, 0), QTimeZone::utc());
        std::vector<RunRecord> runs;
        for (int r : {1, 2, 4, 8})
            runs.push_back(modelRun(t, r, r == 8 ? u"xs1:other"_s : u"xs1:same"_s, r == 8 ? 3.5 * 1.0002 : 3.5, when.addSecs(r)));
        const Comparison c = compareRuns(runs);
        QCOMPARE(c.points.size(), std::size_t(4));
        for (const ScalingPoint &p : c.points) {
            const double eff = t.throughput(p.worldSize) / (t.throughput(1) * p.worldSize);
            QVERIFY(std::abs(p.efficiency - eff) < 1e-12);
            QVERIFY(std::abs(p.idealTokensPerSecond - t.throughput(1) * p.worldSize) < 1e-9);
            const double share = p.worldSize == 1 ? 0 : t.tm(p.worldSize) / (t.tc(p.worldSize) + t.tm(p.worldSize));
            QVERIFY2(std::abs(p.commShare - share) < 1e-12, qPrintable(u"%1 vs %2"_s.arg(p.commShare).arg(share)));
            QVERIFY(std::abs(p.waitShare - share * 0.25) < 1e-12);
            QCOMPARE(p.baselineRunId, u"model-r1"_s);
        }
        QCOMPARE(c.points[1].deviationText(), u"bit-identical"_s);
        QCOMPARE(c.points[3].bitIdentical, std::optional<bool>(false));
        QVERIFY(std::abs(*c.points[3].relativeDeviation - 2e-4) < 1e-12);
        QCOMPARE(c.points[3].deviationText(), u"+0.0002"_s);
        // Recommendation: the largest world size whose efficiency is at least the threshold.
        int expected = 1;
        for (int r : {1, 2, 4, 8})
            if (t.throughput(r) / (t.throughput(1) * r) >= 0.75)
                expected = r;
        QCOMPARE(c.recommendedWorldSize, std::optional<int>(expected));
        QVERIFY(expected > 1 && expected < 8); // the data is built so that the threshold bites
        // The fit recovers the model: parameters, projections, a zero held-out error.
        const Projection &p = c.projection;
        QVERIFY2(p.available, qPrintable(p.why));
        QCOMPARE(p.topology, u"hierarchical"_s);
        QVERIFY(std::abs(std::exp(p.computeSpeed.a) - t.s1) < 1e-6);
        QVERIFY(std::abs(-p.computeSpeed.b - t.alpha) < 1e-9);
        // c(1) = 0 is a point of the fit, so a + b log2 R is exact only on R >= 2: small residual.
        QVERIFY(p.collectiveHierarchical.rmsError < 0.01);
        for (const ProjectionPoint &pp : p.points) {
            QVERIFY(pp.ranks >= 16 && pp.ranks <= 1024);
            QVERIFY(pp.efficiency > 0 && pp.efficiency < 1);
            QVERIFY(pp.commShare > 0 && pp.commShare < 1);
        }
        QVERIFY(p.points.front().efficiency > p.points.back().efficiency);
        QVERIFY(p.heldOut.available);
        QCOMPARE(p.heldOut.ranks, 8);
        qInfo("synthetic held-out: efficiency %+.3f points, comm share %+.3f points", p.heldOut.efficiencyErrorPoints(),
              p.heldOut.commShareErrorPoints());
        QVERIFY(std::abs(p.heldOut.efficiencyErrorPoints()) < 5);
        // An exact power law with c(R) = b log2 R (a = 0) is recovered to rounding, held out too.
        Truth exact;
        exact.a = 0;
        std::vector<RunRecord> e;
        for (int r : {1, 2, 4, 8})
            e.push_back(modelRun(exact, r, u"xs1:s"_s, 3.5, when.addSecs(r)));
        const Comparison ce = compareRuns(e);
        QVERIFY(ce.projection.collectiveHierarchical.rmsError < 1e-12);
        QVERIFY(std::abs(ce.projection.heldOut.efficiencyErrorPoints()) < 1e-9);
        QVERIFY(std::abs(ce.projection.heldOut.throughputRelativeError()) < 1e-12);
        const ProjectionPoint &p64 = ce.projection.points[2];
        QCOMPARE(p64.ranks, 64);
        QVERIFY(std::abs(p64.tokensPerSecond / exact.throughput(64) - 1) < 1e-9);
        QVERIFY(std::abs(p64.efficiency - exact.throughput(64) / (exact.throughput(1) * 64)) < 1e-9);
        // JSON and text carry the same figures.
        const QJsonObject j = comparisonToJson(c);
        QCOMPARE(j[u"points"_s].toArray()[2].toObject()[u"efficiency"_s].toDouble(), c.points[2].efficiency);
        QCOMPARE(j[u"recommended_world_size"_s].toInt(), expected);
        QVERIFY(formatComparison(c).contains(u"bit-identical"_s));
        // Too little to fit.
        const Comparison one = compareRuns({runs[0]});
        QVERIFY(!one.projection.available);
        QVERIFY(one.projection.why.contains(u"two or more world sizes"_s));
    }

    void comparisonLeavesSharedHostsOutOfTheFit()
    {
        // A sweep on one 4-core machine: at 8 ranks they share its cores, so that run measures the
        // machine's contention, not scaling. Said, with the run, and left out of the projection's
        // fit: the projection is the one of 1, 2 and 4 ranks alone.
        const Truth t;
        const QDateTime when(QDate(2026, 11, 30), QTime(10, 0), QTimeZone::utc());
        std::vector<RunRecord> runs;
        for (int r : {1, 2, 4, 8}) {
            RunRecord rec = modelRun(t, r, u"xs1:same"_s, 3.5, when.addSecs(r));
            rec.launcher = u"local"_s;
            rec.hosts = {QJsonObject{{u"name"_s, u"localhost"_s}, {u"address"_s, u"127.0.0.1"_s}, {u"slots"_s, r}, {u"cpus"_s, 4}}};
            rec.settings.insert(u"device"_s, u"cpu"_s);
            runs.push_back(rec);
        }
        const Comparison c = compareRuns(runs);
        const Comparison alone = compareRuns({runs[0], runs[1], runs[2]});
        QCOMPARE(c.points.size(), std::size_t(4)); // measured and shown
        for (int i = 0; i < 3; ++i)
            QVERIFY(c.points[std::size_t(i)].sharedHosts.isEmpty());
        QCOMPARE(c.points[3].sharedHosts, u"8 ranks share the 4 CPU cores of localhost"_s);
        QVERIFY2(c.warnings.join(u'\n').contains(u"run model-r8: 8 ranks share the 4 CPU cores of localhost"_s), qPrintable(c.warnings.join(u'\n')));
        QCOMPARE(c.projection.excluded, QStringList{u"model-r8"_s});
        QVERIFY2(c.projection.available, qPrintable(c.projection.why));
        QCOMPARE(c.projection.computeSpeed.a, alone.projection.computeSpeed.a);
        QCOMPARE(c.projection.computeSpeed.b, alone.projection.computeSpeed.b);
        QCOMPARE(c.projection.heldOut.ranks, 4);
        QCOMPARE(c.projection.points.size(), alone.projection.points.size());
        for (std::size_t i = 0; i < c.projection.points.size(); ++i)
            QCOMPARE(c.projection.points[i].tokensPerSecond, alone.projection.points[i].tokensPerSecond);
        // clusterppl-cli compare (text and --json) says it too.
        const QString text = formatComparison(c);
        QVERIFY2(text.contains(u"left out of the fit: model-r8"_s) && text.contains(u"warning: run model-r8: 8 ranks share"_s), qPrintable(text));
        const QJsonObject j = comparisonToJson(c);
        QCOMPARE(j[u"projection"_s].toObject()[u"excluded_runs"_s].toArray(), QJsonArray{u"model-r8"_s});
        QCOMPARE(j[u"points"_s].toArray()[3].toObject()[u"shared_hosts"_s].toString(), c.points[3].sharedHosts);
        QVERIFY(j[u"points"_s].toArray()[2].toObject()[u"shared_hosts"_s].isNull());
        // Nothing left to fit: said why.
        const Comparison two = compareRuns({runs[0], runs[3]});
        QVERIFY(!two.projection.available);
        QVERIFY2(two.projection.why.contains(u"left out: model-r8"_s), qPrintable(two.projection.why));
    }

    /// The recorder keeps each rank's first and last lines and counts the rest; a run that never
    /// got planned (refused at start) is still recorded, as failed with its cause.
    void recorderKeepsHeadAndTailOfLogs()
    {
        const QString path = freshPath();
        {
            RunHistory s(path);
            cppl::core::run::RunEngine engine;
            RunRecorder::Options o;
            o.logHead = 100;
            o.logTail = 300;
            o.recordAs = u"log-trim"_s;
            RunRecorder rec(s, o);
            rec.attach(&engine);
            Q_EMIT engine.planned();
            for (int i = 0; i < 5000; ++i)
                Q_EMIT engine.rankOutput(i % 2, i % 3 == 0, u"line %1"_s.arg(i));
            s.flush();
            const RunRecord r = *s.get(u"log-trim"_s);
            QCOMPARE(r.status, RunStatus::Running);
            for (int rank : {0, 1}) {
                std::vector<LogLine> lines;
                for (const LogLine &l : r.logs)
                    if (l.rank == rank)
                        lines.push_back(l);
                // head + tail, plus at most one trimming chunk not yet deleted
                QVERIFY2(lines.size() >= 400 && lines.size() < 400 + 256, qPrintable(QString::number(lines.size())));
                QCOMPARE(lines.front().seq, 0);
                QCOMPARE(lines[99].seq, 99);
                QCOMPARE(lines.back().seq, 2499);
                QCOMPARE(lines.back().line, u"line %1"_s.arg(4998 + rank));
                QCOMPARE(lines[lines.size() - 300].seq, 2200); // the whole tail is there
            }
            QCOMPARE(r.logsDropped.size(), std::size_t(2));
            QCOMPARE(r.logsDropped[0].second + static_cast<std::int64_t>(std::count_if(r.logs.begin(), r.logs.end(), [](const LogLine &l) {
                         return l.rank == 0;
                     })),
                     2500);
        }
        RunHistory s(path);
        cppl::core::run::RunEngine engine;
        RunRecorder rec(s);
        rec.attach(&engine);
        cppl::core::run::RunRequest req;
        req.runId = u"refused-at-start"_s; // the profile has no hosts: refused before planning
        QSignalSpy finished(&engine, &cppl::core::run::RunEngine::finished);
        QVERIFY(!engine.start(req));
        QVERIFY(finished.wait(5000));
        s.flush();
        const RunRecord r = *s.get(u"refused-at-start"_s);
        QCOMPARE(r.status, RunStatus::Failed);
        QCOMPARE(r.exitCode, std::optional<int>(cppl::core::kCliBadArguments));
        QVERIFY2(r.firstCause.contains(u"profile is not valid"_s), qPrintable(r.firstCause));
    }

    void leastSquares()
    {
        const LinearFit f = fitLine({1, 2, 3, 4}, {3, 5, 7, 9.5});
        QVERIFY(std::abs(f.b - 2.15) < 1e-12);
        QVERIFY(std::abs(f.a - 0.75) < 1e-12);
        QVERIFY(f.rmsError > 0);
        const LinearFit c = fitLine({2, 2}, {1, 3});
        QCOMPARE(c.b, 0.0);
        QCOMPARE(c.a, 2.0);
    }

    void sweepProfiles()
    {
        cppl::ClusterProfile p;
        p.name = "c";
        for (int i = 0; i < 3; ++i) {
            cppl::HostSpec h;
            h.name = "h" + std::to_string(i);
            h.slots = 2;
            p.hosts.push_back(h);
        }
        p.grouping.mode = cppl::GroupingSpec::Mode::BySize;
        p.grouping.size = 4;
        const auto three = profileForRanks(p, 3);
        QCOMPARE(three.hosts.size(), std::size_t(2));
        QCOMPARE(three.hosts[1].slots, 1);
        QCOMPARE(three.grouping.size, 3);
        QCOMPARE(cppl::rankLayout(three).worldSize(), 3);
        QCOMPARE(profileForRanks(p, 6).hosts.size(), std::size_t(3));
        QVERIFY_THROWS_EXCEPTION(cppl::ConfigError, (void)profileForRanks(p, 7));
        QCOMPARE(parseRankList(u"4,1,2,2"_s), (std::vector<int>{1, 2, 4}));
        QVERIFY_THROWS_EXCEPTION(cppl::ConfigError, (void)parseRankList(u"1,x"_s));
        QVERIFY_THROWS_EXCEPTION(cppl::ConfigError, (void)parseRankList(u"0"_s));
    }
};

QTEST_GUILESS_MAIN(TestRunHistory)
#include "tst_run_history.moc"
