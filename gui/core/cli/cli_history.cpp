// SPDX-License-Identifier: MIT
// `clusterppl-cli list|show|compare|delete|export|import|sweep`: text and JSON views of the run
// store (store/), and the recorder hook of `run`.
#include "cli/cli_history.h"

#include "cli/cli_commands.h"
#include "run/run_engine.h"
#include "history/comparison.h"
#include "history/run_export.h"
#include "history/run_recorder.h"
#include "history/run_history.h"
#include "history/precision.h"
#include "history/sweep.h"

#include "cppl/counted.h"
#include "cppl/errors.h"

#include <QCommandLineParser>
#include <QEventLoop>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QSaveFile>
#include <QTextStream>
#include <QTimeZone>

using namespace Qt::StringLiterals;

namespace cppl::core {

using history::RunRecord;
using history::RunHistory;

struct RunRecording
{
    std::unique_ptr<RunHistory> store;
    std::unique_ptr<history::RunRecorder> recorder;
};

void RunRecordingDeleter::operator()(RunRecording *r) const
{
    delete r; // the recorder first (members in reverse), then the history: it writes what is queued
}

namespace {

const QString kHistoryUsage = uR"(Run history (docs/run-history.md). The store is $CLUSTERPPL_STORE, else
~/.local/share/clusterppl/runs.sqlite, shared with the dashboard; --store FILE overrides both.

  list [--json] [--model S] [--data S] [--protocol P] [--status S] [--since DATE] [--until DATE]
       [--world-size N] [--nodes N] [--search TEXT] [--limit N]
      Stored runs, newest first. S: part of the path; DATE: ISO 8601 (2026-11-30 or 2026-11-30T12:00Z);
      status: running, finished, failed, stopped, interrupted.
  show RUN [--json] [--logs]
      One run in full: setup, versions, result, per-rank figures, alerts (and its kept log lines).
  compare RUN... [--json] [--threshold PCT]
      Throughput vs ranks with the ideal line, scaling efficiency, comm share (wait/transfer), PPL
      and its deviation from the one-rank baseline, the recommendation and the projection.
  delete RUN
  export RUN -o FILE.json
      Everything the store has about the run, as one JSON document.
  import FILE.json [--run-id ID]
      An exported run, or a bare agent result JSON (docs/result-json.md).
  sweep --profile PROFILE.json --nodes 1,2,4[,8] [--json OUT] [--threshold PCT] [--agent PATH]
        [--no-preflight] [--run-id-prefix P] [--quantize LIST [--reference-model DIR]]
      The same evaluation at each rank count (the profile's first N slots in host order), one
      after another, each stored; then the comparison. --json OUT: the comparison as JSON.
      --quantize none,int8,int4[,int4-asym]: a precision sweep, each precision at each rank count
      (--nodes default: all the profile's slots), compared with its reference model token by token
      (--reference-model, else the profile's reference_model, else the model itself; every run's
      tokens/s include the reference's pass): PPL ratio, KLD mean and p99, top-token agreement,
      tokens/s, weights and load RSS per rank side by side.

Exit codes: 0 ok, 1 failed (a sweep run failed), 2 bad arguments, 3 file or store not
readable/writable, 4 unknown run id.
)"_s;

const QStringList kCommands{u"list"_s, u"show"_s, u"compare"_s, u"delete"_s, u"export"_s, u"import"_s, u"sweep"_s};

struct Usage : std::runtime_error
{
    using std::runtime_error::runtime_error;
};
struct UnknownRun : std::runtime_error
{
    using std::runtime_error::runtime_error;
};

[[noreturn]] void usage(const QString &why)
{
    throw Usage(why.toStdString());
}

QString storePath(const QCommandLineParser &p, const QCommandLineOption &o, QTextStream &err)
{
    return p.isSet(o) ? p.value(o) : defaultHistoryPath(err);
}

RunRecord mustGet(const RunHistory &s, const QString &id)
{
    auto r = s.get(id);
    if (!r)
        throw UnknownRun(QString(u"no run \""_s + id + u"\" in "_s + s.path() + u" (clusterppl-cli list shows the stored ones)"_s).toStdString());
    return std::move(*r);
}

void writeJsonFile(const QString &path, const QJsonObject &o)
{
    QSaveFile f(path);
    const QByteArray bytes = QJsonDocument(o).toJson(QJsonDocument::Indented);
    if (!f.open(QIODevice::WriteOnly) || f.write(bytes) != bytes.size() || !f.commit())
        throw IoError(QString(path + u": cannot write: "_s + f.errorString()).toStdString());
}

QString fmt(const std::optional<double> &v, int decimals)
{
    return v ? QString::number(*v, 'f', decimals) : u"-"_s;
}

QJsonObject summaryJson(const RunRecord &r)
{
    QJsonObject o = history::runToJson(r).value(u"run"_s).toObject();
    // A listing stays small: the blobs are for show/export.
    for (const char16_t *k : {u"profile", u"preflight", u"result", u"hosts"})
        o.remove(QString::fromUtf16(k));
    return o;
}

double parseThreshold(const QCommandLineParser &p, const QCommandLineOption &o)
{
    if (!p.isSet(o))
        return 0.75;
    bool ok = false;
    const double v = p.value(o).toDouble(&ok);
    if (!ok || v <= 0 || v > 100)
        usage(u"--threshold: expected a percentage in (0, 100], got \""_s + p.value(o) + u'"');
    return v / 100;
}

QCommandLineParser &parse(QCommandLineParser &p, const QString &command, const QStringList &args, const QList<QCommandLineOption> &options)
{
    p.addOptions(options);
    if (!p.parse(QStringList{u"clusterppl-cli"_s} + args))
        usage(command + u": "_s + p.errorText());
    return p;
}

int list(const QStringList &args, QTextStream &out, QTextStream &err, const QCommandLineOption &storeOpt)
{
    const QCommandLineOption json(u"json"_s), model(u"model"_s, {}, u"S"_s), data(u"data"_s, {}, u"S"_s), protocol(u"protocol"_s, {}, u"P"_s),
        status(u"status"_s, {}, u"S"_s), since(u"since"_s, {}, u"DATE"_s), until(u"until"_s, {}, u"DATE"_s), ws(u"world-size"_s, {}, u"N"_s),
        nodes(u"nodes"_s, {}, u"N"_s), search(u"search"_s, {}, u"TEXT"_s), limit(u"limit"_s, {}, u"N"_s);
    QCommandLineParser p;
    parse(p, u"list"_s, args, {storeOpt, json, model, data, protocol, status, since, until, ws, nodes, search, limit});
    if (!p.positionalArguments().isEmpty())
        usage(u"list: unexpected argument \""_s + p.positionalArguments().front() + u"\" (filters are options: --model, --status, ...)"_s);
    history::RunFilter f;
    f.model = p.value(model);
    f.data = p.value(data);
    f.protocol = p.value(protocol);
    f.text = p.value(search);
    if (p.isSet(status)) {
        f.status = history::parseStatus(p.value(status));
        if (!f.status)
            usage(u"--status: \""_s + p.value(status) + u"\" is not one of running, finished, failed, stopped, interrupted"_s);
    }
    auto date = [&](const QCommandLineOption &o, bool endOfDay) {
        QDateTime d = QDateTime::fromString(p.value(o), Qt::ISODateWithMs);
        if (!d.isValid()) {
            const QDate day = QDate::fromString(p.value(o), Qt::ISODate);
            if (day.isValid())
                d = endOfDay ? day.endOfDay(QTimeZone::utc()) : day.startOfDay(QTimeZone::utc());
        }
        if (!d.isValid())
            usage(u"--%1: \"%2\" is not an ISO 8601 date (2026-11-30 or 2026-11-30T12:00:00Z)"_s.arg(o.names().front(), p.value(o)));
        return d;
    };
    if (p.isSet(since))
        f.from = date(since, false);
    if (p.isSet(until))
        f.to = date(until, true);
    auto integer = [&](const QCommandLineOption &o) {
        bool ok = false;
        const int n = p.value(o).toInt(&ok);
        if (!ok || n < 1)
            usage(u"--%1: expected a positive integer, got \"%2\""_s.arg(o.names().front(), p.value(o)));
        return n;
    };
    if (p.isSet(ws))
        f.worldSize = integer(ws);
    if (p.isSet(nodes))
        f.nodeCount = integer(nodes);
    if (p.isSet(limit))
        f.limit = integer(limit);
    const RunHistory s(storePath(p, storeOpt, err));
    const auto runs = s.list(f);
    if (p.isSet(json)) {
        QJsonArray a;
        for (const RunRecord &r : runs)
            a.append(summaryJson(r));
        out << QJsonDocument(QJsonObject{{u"store"_s, s.path()}, {u"runs"_s, a}}).toJson(QJsonDocument::Indented);
        return kCliOk;
    }
    out << QString::asprintf("%-34s %-11s %-20s %5s %5s %-12s %-22s %10s %s\n", "run", "status", "started (UTC)", "ranks", "nodes", "protocol",
                             "ppl +/- stderr", "tokens/s", "model");
    for (const RunRecord &r : runs)
        out << QString::asprintf("%-34s %-11s %-20s %5d %5d %-12s %-22s %10s %s\n", qPrintable(r.runId), qPrintable(history::statusName(r.status)),
                                 qPrintable(r.started.toString(u"yyyy-MM-dd HH:mm:ss"_s)), r.worldSize, r.nodeCount, qPrintable(r.protocol),
                                 qPrintable(r.ppl ? fmt(r.ppl, 4) + u" +/- "_s + fmt(r.pplStderr, 4) : u"-"_s), qPrintable(fmt(r.tokensPerSecond, 1)),
                                 qPrintable(QFileInfo(r.model).fileName()));
    out << QString::fromStdString(cppl::counted(static_cast<std::int64_t>(runs.size()), "run", "runs")) << " in " << s.path() << '\n';
    return kCliOk;
}

int show(const QStringList &args, QTextStream &out, QTextStream &err, const QCommandLineOption &storeOpt)
{
    const QCommandLineOption json(u"json"_s), logs(u"logs"_s);
    QCommandLineParser p;
    parse(p, u"show"_s, args, {storeOpt, json, logs});
    if (p.positionalArguments().size() != 1)
        usage(u"show takes one RUN id"_s);
    const RunHistory s(storePath(p, storeOpt, err));
    const RunRecord r = mustGet(s, p.positionalArguments().front());
    if (p.isSet(json)) {
        QJsonObject o = history::runToJson(r);
        if (!p.isSet(logs))
            o.remove(u"logs"_s);
        out << QJsonDocument(o).toJson(QJsonDocument::Indented);
        return kCliOk;
    }
    out << "run        " << r.runId << " (" << history::statusName(r.status) << (r.exitCode ? u", exit %1"_s.arg(*r.exitCode) : QString()) << ")\n"
        << "started    " << r.started.toString(Qt::ISODate) << (r.ended.isValid() ? u", ended "_s + r.ended.toString(Qt::ISODate) : QString())
        << '\n'
        << "source     " << r.source << (r.profileName.isEmpty() ? QString() : u", profile \""_s + r.profileName + u'"') << '\n'
        << "cluster    " << QString::fromStdString(cppl::counted(r.worldSize, "rank", "ranks")) << " on "
        << QString::fromStdString(cppl::counted(r.nodeCount, "node", "nodes")) << ", "
        << QString::fromStdString(cppl::counted(r.groupsCount, "group", "groups")) << ", launcher " << r.launcher
        << '\n'
        << "evaluation " << r.protocol << ", model " << r.model << ", data " << r.data << '\n'
        << "settings   " << QJsonDocument(r.settings).toJson(QJsonDocument::Compact) << " (key " << r.settingsKey << ")\n"
        << "versions   " << QJsonDocument(r.versions).toJson(QJsonDocument::Compact) << '\n';
    if (r.ppl)
        out << "result     ppl " << fmt(r.ppl, 6) << " +/- " << fmt(r.pplStderr, 6) << " over " << r.tokensScored << " tokens, "
            << fmt(r.tokensPerSecond, 1) << " tokens/s\n"
            << "exact sum  " << r.nllSumExact << '\n';
    if (!r.firstCause.isEmpty())
        out << "cause      " << r.firstCause << '\n';
    for (const QJsonValue &v : r.lostRanks) { // --on-rank-loss continue: finished without them
        const QJsonObject l = v.toObject();
        out << "recovered  rank " << l.value(u"rank"_s).toInt() << " (" << l.value(u"host"_s).toString() << "): " << l.value(u"cause"_s).toString()
            << "; lost after round " << l.value(u"round"_s).toInt() << '\n';
    }
    if (!r.ranks.empty()) {
        out << "rank host                 group   tokens  compute s   wait s  transfer s  tokens/s  exit\n";
        for (const auto &k : r.ranks)
            out << QString::asprintf("%4d %-20s %5d %8lld %10.3f %8.3f %11.4f %9.1f  %s\n", k.rank, qPrintable(k.host), k.group,
                                     static_cast<long long>(k.tokens), k.computeSeconds, k.waitSeconds, k.transferSeconds, k.tokensPerSecond,
                                     k.exitCode ? qPrintable(QString::number(*k.exitCode)) : "-");
    }
    out << "samples    " << r.samples.size() << " (per-rank telemetry, downsampled)\n";
    out << "logs       " << r.logs.size() << " lines kept";
    for (const auto &[rank, n] : r.logsDropped)
        out << ", rank " << rank << ": " << n << " dropped";
    out << '\n';
    for (const auto &a : r.alerts)
        out << QString::asprintf("alert      %8.2f s  %-14s %s\n", a.t, qPrintable(a.kind), qPrintable(a.message));
    if (p.isSet(logs))
        for (const auto &l : r.logs)
            out << "[rank " << l.rank << (l.isStderr ? " err" : " out") << " #" << l.seq << "] " << l.line << '\n';
    return kCliOk;
}

history::Comparison compareStored(const RunHistory &s, const QStringList &ids, double threshold)
{
    std::vector<RunRecord> runs, baselines;
    for (const QString &id : ids)
        runs.push_back(mustGet(s, id));
    for (const RunRecord &r : runs)
        for (RunRecord &b : history::storedBaselines(s, r))
            baselines.push_back(std::move(b));
    history::CompareOptions o;
    o.threshold = threshold;
    return history::compareRuns(runs, baselines, o);
}

int compare(const QStringList &args, QTextStream &out, QTextStream &err, const QCommandLineOption &storeOpt)
{
    const QCommandLineOption json(u"json"_s), threshold(u"threshold"_s, {}, u"PCT"_s);
    QCommandLineParser p;
    parse(p, u"compare"_s, args, {storeOpt, json, threshold});
    if (p.positionalArguments().isEmpty())
        usage(u"compare takes one or more RUN ids"_s);
    const RunHistory s(storePath(p, storeOpt, err));
    const history::Comparison c = compareStored(s, p.positionalArguments(), parseThreshold(p, threshold));
    if (p.isSet(json))
        out << QJsonDocument(history::comparisonToJson(c)).toJson(QJsonDocument::Indented);
    else
        out << history::formatComparison(c);
    return kCliOk;
}

/// One run of a sweep, recorded into @p s as `run` records one, with the stored one-rank run of the
/// same settings as its baseline (the previous run's end is on disk first). True when it finished.
bool sweepRun(RunHistory &s, const run::RunRequest &req, int ranks, QTextStream &err)
{
    run::RunRequest r = req;
    s.flush(); // the previous run's end is on disk: it can be this one's baseline
    const QString dir = QFileInfo(r.profilePath).absolutePath();
    if (const auto b = s.baselineFor(history::settingsKey(history::settingsInputsFromProfile(r.profile, dir))))
        r.baselineResultJson = b->resultJson;
    run::RunEngine engine;
    history::RunRecorder::Options ro;
    ro.source = u"sweep"_s;
    history::RunRecorder recorder(s, ro);
    recorder.attach(&engine);
    QEventLoop loop;
    QObject::connect(&engine, &run::RunEngine::finished, &loop, &QEventLoop::quit, Qt::QueuedConnection);
    QObject::connect(&engine, &run::RunEngine::alertRaised, [&](const run::RunAlert &a) {
        err << "clusterppl-cli: sweep: " << r.runId << ": ALERT (" << run::alertKindName(a.kind) << "): " << a.message << '\n';
        err.flush();
    });
    err << "clusterppl-cli: sweep: " << QString::fromStdString(cppl::counted(ranks, "rank", "ranks")) << ": run " << r.runId << '\n';
    err.flush();
    if (engine.start(r) || !run::isTerminal(engine.phase()))
        loop.exec();
    const run::RunOutcome &o = engine.outcome();
    if (o.exitCode != kCliOk) {
        err << "clusterppl-cli: sweep: " << r.runId << " failed (exit " << o.exitCode << "): " << (o.summary.isEmpty() ? o.firstCause : o.summary) << '\n';
        err.flush();
        return false;
    }
    const QJsonObject result = QJsonDocument::fromJson(o.resultJson).object();
    err << "clusterppl-cli: sweep: " << r.runId << ": ppl " << QString::number(result.value(u"ppl"_s).toDouble(), 'f', 6) << ", "
        << QString::number(result.value(u"tokens_per_second"_s).toDouble(), 'f', 1) << " tokens/s\n";
    err.flush();
    return true;
}

/// Prints a finished sweep's comparison (and writes it to --json): by rank count, by precision, or both.
void reportSweep(const RunHistory &s, const QStringList &ids, bool byRanks, bool byPrecision, double threshold, const QString &jsonPath,
                 QTextStream &out)
{
    QJsonObject o;
    if (byRanks) {
        const history::Comparison c = compareStored(s, ids, threshold);
        out << history::formatComparison(c);
        o = history::comparisonToJson(c);
    }
    if (byPrecision) {
        std::vector<RunRecord> runs;
        for (const QString &id : ids)
            if (auto r = s.get(id))
                runs.push_back(std::move(*r));
        const auto rows = history::precisionRows(runs);
        out << history::formatPrecisions(rows);
        o.insert(u"precisions"_s, history::precisionsToJson(rows));
    }
    if (!jsonPath.isEmpty()) {
        o.insert(u"runs"_s, QJsonArray::fromStringList(ids));
        writeJsonFile(jsonPath, o);
    }
}

int sweep(const QStringList &args, QTextStream &out, QTextStream &err, const QCommandLineOption &storeOpt)
{
    const QCommandLineOption profileOpt(u"profile"_s, {}, u"FILE"_s), nodesOpt(u"nodes"_s, {}, u"LIST"_s), json(u"json"_s, {}, u"FILE"_s),
        threshold(u"threshold"_s, {}, u"PCT"_s), agent(u"agent"_s, {}, u"PATH"_s), noPreflight(u"no-preflight"_s),
        prefix(u"run-id-prefix"_s, {}, u"P"_s), quantizeOpt(u"quantize"_s, {}, u"LIST"_s), referenceOpt(u"reference-model"_s, {}, u"DIR"_s);
    QCommandLineParser p;
    parse(p, u"sweep"_s, args, {storeOpt, profileOpt, nodesOpt, json, threshold, agent, noPreflight, prefix, quantizeOpt, referenceOpt});
    if (!p.positionalArguments().isEmpty())
        usage(u"sweep: unexpected argument \""_s + p.positionalArguments().front() + u'"');
    if (!p.isSet(profileOpt))
        usage(u"sweep needs --profile FILE"_s);
    if (p.isSet(referenceOpt) && !p.isSet(quantizeOpt))
        usage(u"sweep: --reference-model goes with --quantize (a precision sweep)"_s);
    const double thr = parseThreshold(p, threshold);
    const QString profilePath = p.value(profileOpt);
    const ClusterProfile base = loadProfile(profilePath.toStdString());
    const bool byPrecision = p.isSet(quantizeOpt);
    const QStringList precisions = byPrecision ? history::parsePrecisionList(p.value(quantizeOpt)) : QStringList{QString()};
    int slots = 0;
    for (const HostSpec &h : base.hosts)
        slots += h.slots;
    const QString nodes = p.value(nodesOpt).isEmpty() ? (byPrecision ? QString::number(slots) : u"1,2,4,8"_s) : p.value(nodesOpt);
    const std::vector<int> counts = history::parseRankList(nodes);
    std::vector<run::RunRequest> runs;
    std::vector<int> runRanks;
    const QString runPrefix = p.isSet(prefix) ? p.value(prefix) : u"sweep-"_s + run::generateRunId();
    // Every run checked before anything runs.
    for (history::SweepRun &planned : history::planSweep(base, counts, byPrecision ? precisions : QStringList{}, p.value(referenceOpt))) {
        run::RunRequest req;
        req.profile = std::move(planned.profile);
        req.profilePath = profilePath;
        req.runId = runPrefix + u'-' + planned.idSuffix;
        if (const QString why = run::validateRunId(req.runId); !why.isEmpty())
            usage(u"--run-id-prefix: "_s + why);
        req.agent = p.value(agent);
        req.preflight = !p.isSet(noPreflight);
        runs.push_back(std::move(req));
        runRanks.push_back(planned.ranks);
    }
    RunHistory s(storePath(p, storeOpt, err));
    QStringList ids;
    int failures = 0;
    for (std::size_t i = 0; i < runs.size(); ++i) {
        if (s.contains(runs[i].runId))
            usage(u"run id "_s + runs[i].runId + u" is already in the store; choose another --run-id-prefix"_s);
        failures += sweepRun(s, runs[i], runRanks[i], err) ? 0 : 1;
        ids << runs[i].runId;
    }
    s.flush();
    if (const QString e = s.writer().lastError(); !e.isEmpty())
        err << "clusterppl-cli: sweep: the store reported: " << e << '\n';
    reportSweep(s, ids, !byPrecision || counts.size() > 1, byPrecision, thr, p.isSet(json) ? p.value(json) : QString(), out);
    if (failures > 0) {
        err << "clusterppl-cli: sweep: " << failures << " of " << runs.size() << " runs failed\n";
        return kCliFailed;
    }
    return kCliOk;
}

int historyCommand(const QStringList &arguments, QTextStream &out, QTextStream &err)
{
    const QString command = arguments.front();
    const QStringList args = arguments.mid(1);
    const QCommandLineOption storeOpt(u"store"_s, {}, u"FILE"_s);
    if (command == u"list"_s)
        return list(args, out, err, storeOpt);
    if (command == u"show"_s)
        return show(args, out, err, storeOpt);
    if (command == u"compare"_s)
        return compare(args, out, err, storeOpt);
    if (command == u"sweep"_s)
        return sweep(args, out, err, storeOpt);
    if (command == u"delete"_s) {
        QCommandLineParser p;
        parse(p, command, args, {storeOpt});
        if (p.positionalArguments().size() != 1)
            usage(u"delete takes one RUN id"_s);
        RunHistory s(storePath(p, storeOpt, err));
        if (!s.remove(p.positionalArguments().front()))
            throw UnknownRun(QString(u"no run \""_s + p.positionalArguments().front() + u"\" in "_s + s.path()).toStdString());
        out << "deleted " << p.positionalArguments().front() << '\n';
        return kCliOk;
    }
    if (command == u"export"_s) {
        const QCommandLineOption output({u"o"_s, u"output"_s}, {}, u"FILE"_s);
        QCommandLineParser p;
        parse(p, command, args, {storeOpt, output});
        if (p.positionalArguments().size() != 1 || !p.isSet(output))
            usage(u"export takes one RUN id and -o FILE.json"_s);
        const RunHistory s(storePath(p, storeOpt, err));
        writeJsonFile(p.value(output), history::runToJson(mustGet(s, p.positionalArguments().front())));
        out << "exported " << p.positionalArguments().front() << " to " << p.value(output) << '\n';
        return kCliOk;
    }
    // import
    const QCommandLineOption runId(u"run-id"_s, {}, u"ID"_s);
    QCommandLineParser p;
    parse(p, command, args, {storeOpt, runId});
    if (p.positionalArguments().size() != 1)
        usage(u"import takes one FILE.json"_s);
    const QString path = p.positionalArguments().front();
    QFile f(path);
    if (!f.exists())
        throw IoError(QString(path + u": the file to import does not exist"_s).toStdString());
    if (!f.open(QIODevice::ReadOnly))
        throw IoError(QString(path + u": cannot read: "_s + f.errorString()).toStdString());
    QJsonParseError pe{};
    const QJsonDocument doc = QJsonDocument::fromJson(f.readAll(), &pe);
    if (!doc.isObject())
        throw ConfigError(QString(path + u": not a JSON object"_s + (pe.error != QJsonParseError::NoError ? u" ("_s + pe.errorString() + u" at byte "_s
                                                                                                           + QString::number(pe.offset) + u')'
                                                                                                     : QString()))
                              .toStdString());
    RunRecord rec;
    try {
        rec = history::runFromJson(doc.object(), p.value(runId));
    } catch (const ConfigError &e) {
        throw ConfigError(QString(path + u": "_s + QString::fromUtf8(e.what())).toStdString());
    }
    if (p.isSet(runId))
        rec.runId = p.value(runId);
    RunHistory s(storePath(p, storeOpt, err));
    if (s.contains(rec.runId))
        usage(u"import: run "_s + rec.runId + u" is already in the store (delete it, or import with --run-id NEW)"_s);
    s.insert(rec);
    out << "imported " << rec.runId << " (" << history::statusName(rec.status) << ", "
        << QString::fromStdString(cppl::counted(rec.worldSize, "rank", "ranks")) << ")\n";
    return kCliOk;
}

} // namespace

QString defaultHistoryPath(QTextStream &err)
{
    for (const QString &line : RunHistory::adoptEarlierStores())
        err << "clusterppl-cli: " << line << '\n';
    return RunHistory::defaultPath();
}

bool isHistoryCommand(const QString &command)
{
    return kCommands.contains(command);
}

int cliHistory(const QStringList &arguments, QTextStream &out, QTextStream &err)
{
    if (arguments.size() >= 2 && (arguments.contains(u"--help"_s) || arguments.contains(u"-h"_s))) {
        out << kHistoryUsage;
        return kCliOk;
    }
    try {
        return historyCommand(arguments, out, err);
    } catch (const Usage &e) {
        err << "clusterppl-cli: " << QString::fromUtf8(e.what()) << " (clusterppl-cli " << arguments.front() << " --help)\n";
        return kCliBadArguments;
    } catch (const UnknownRun &e) {
        err << "clusterppl-cli: " << QString::fromUtf8(e.what()) << '\n';
        return kCliUnknownRun;
    }
    // cppl::Error (IoError 3, ConfigError 2, others 1) is mapped by cliMain.
}

RunRecordingPtr recordRun(run::RunEngine &engine, run::RunRequest &request, QTextStream &err, QString *refusal)
{
    RunRecordingPtr rec(new RunRecording);
    try {
        rec->store = std::make_unique<RunHistory>(defaultHistoryPath(err));
    } catch (const cppl::Error &e) {
        err << "clusterppl-cli: warning: this run is not recorded in the history: " << QString::fromUtf8(e.what()) << '\n';
        return {};
    }
    if (request.runId.isEmpty())
        request.runId = run::generateRunId();
    history::RunRecorder::Options options;
    if (rec->store->contains(request.runId)) {
        // Scripts re-run with fixed ids: the old run stays, this one is recorded next to it.
        options.recordAs = rec->store->freeRunId(request.runId);
        if (!run::validateRunId(options.recordAs).isEmpty()) {
            *refusal = u"--run-id: run "_s + request.runId + u" is already in the history ("_s + rec->store->path()
                       + u"); choose another id, delete the old run (clusterppl-cli delete ID), or pass --no-store"_s;
            return {};
        }
        err << "clusterppl-cli: run " << request.runId << " is already in the history; this run is recorded as " << options.recordAs << '\n';
    }
    if (request.baselineResultJson.isEmpty()) {
        const QString dir = request.profilePath.isEmpty() ? QString() : QFileInfo(request.profilePath).absolutePath();
        if (const auto b = rec->store->baselineFor(history::settingsKey(history::settingsInputsFromProfile(request.profile, dir)))) {
            request.baselineResultJson = b->resultJson;
            err << "clusterppl-cli: baseline: one-rank run " << b->runId << " of the same settings (ppl " << fmt(b->ppl, 6) << ")\n";
        }
    }
    rec->recorder = std::make_unique<history::RunRecorder>(*rec->store, options);
    rec->recorder->attach(&engine);
    return rec;
}

} // namespace cppl::core
