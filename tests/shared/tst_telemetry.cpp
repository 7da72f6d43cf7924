// SPDX-License-Identifier: MIT
#include "cppl/errors.h"
#include "cppl/telemetry.h"

#include "test_exact.h"
#include "test_verify.h"

#include <QTemporaryDir>
#include <QTest>

#include <nlohmann/json.hpp>

#include <sys/stat.h>

using namespace cppl::telemetry;
using Json = nlohmann::json;

Q_DECLARE_METATYPE(DecodeError)

namespace {

Message progressMessage()
{
    Message m;
    m.header.run = "run-42";
    m.header.rank = 3;
    m.header.host = "node07";
    m.header.group = 1;
    m.header.localRank = 1;
    m.header.worldSize = 8;
    m.header.seq = 17;
    m.header.t = 1717171717.25;
    m.header.kind = Kind::Progress;
    m.header.droppedTotal = 2;
    auto &p = m.progress;
    for (double v : {2.5, 0.125, 7.0, 1e-9})
        p.nll.add(v), p.nllSquared.addSquare(v);
    p.tokensScoredTotal = 4;
    p.tokensPerSecond = 1234.5;
    p.windowsDone = 1;
    p.windowsTotal = 10;
    p.computeSecondsTotal = 3.5;
    p.commWaitSecondsTotal = 0.25;
    p.commTransferSecondsTotal = 0.0625;
    p.rssBytes = 123456789;
    p.deviceMemoryBytes = 1 << 30;
    p.deviceMemoryTotalBytes = std::int64_t(80) << 30;
    p.gpuUtilizationPercent = 97;
    p.tpSize = 2;
    p.tpRank = 1;
    p.tpCollectiveSecondsTotal = 0.75;
    cppl::telemetry::Progress::Reference ref;
    ref.tokens = 4;
    for (double v : {0.001, 0.25, 1e-12, 3.0})
        ref.kld.add(v);
    ref.sameTop = 3;
    p.reference = ref;
    return m;
}

Json progressJson()
{
    return Json::parse(encode(progressMessage()));
}

} // namespace

class TestTelemetry : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void progressRoundTrip()
    {
        const Message m = progressMessage();
        const std::string bytes = encode(m);
        QVERIFY(bytes.starts_with("{\"v\":1,\"run\":\"run-42\""));
        Message d;
        const auto r = decode(bytes, d);
        CPPL_VERIFY2(r.ok(), std::string(decodeErrorName(r.error)).c_str());
        QCOMPARE(d.header.run, m.header.run);
        QCOMPARE(d.header.rank, 3);
        QCOMPARE(d.header.seq, 17);
        CPPL_COMPARE_BITS(d.header.t, m.header.t);
        QCOMPARE(d.header.droppedTotal, 2);
        QVERIFY(d.header.kind == Kind::Progress);
        QVERIFY(d.progress.nll == m.progress.nll); // bit for bit through the "xs1:" text form
        QVERIFY(d.progress.nllSquared == m.progress.nllSquared);
        CPPL_COMPARE_BITS(d.progress.tokensPerSecond, 1234.5);
        CPPL_COMPARE_BITS(d.progress.commTransferSecondsTotal, 0.0625);
        QCOMPARE(d.progress.deviceMemoryBytes.value(), 1 << 30);
        QCOMPARE(d.progress.deviceMemoryTotalBytes.value(), std::int64_t(80) << 30);
        QCOMPARE(d.progress.gpuUtilizationPercent.value(), 97);
        QCOMPARE(d.progress.tpSize.value(), 2);
        QCOMPARE(d.progress.tpRank.value(), 1);
        CPPL_COMPARE_BITS(d.progress.tpCollectiveSecondsTotal.value(), 0.75);
        QVERIFY(d.progress.reference.has_value());
        QCOMPARE(d.progress.reference->tokens, 4);
        QVERIFY(d.progress.reference->kld == m.progress.reference->kld); // exact, as nll_exact
        QCOMPARE(d.progress.reference->sameTop, 3);
        // Every value is a scalar: PlotJuggler's ZeroMQ source plots it unchanged.
        const Json flat = Json::parse(bytes);
        for (const auto &[k, v] : flat.items())
            CPPL_VERIFY2(v.is_primitive(), k.c_str());
    }

    void everyKindRoundTrips_data()
    {
        QTest::addColumn<int>("kind");
        for (int k = 0; k < kKindCount; ++k)
            QTest::addRow("%s", std::string(kindName(static_cast<Kind>(k))).c_str()) << k;
    }
    void everyKindRoundTrips()
    {
        QFETCH(int, kind);
        Message m = progressMessage();
        m.header.kind = static_cast<Kind>(kind);
        m.phase = Phase::Syncing;
        m.sync = {3, 9, 0.5, 0.01};
        m.level = LogLevel::Warning;
        m.text = "line with \"quotes\", a tab\t and bad UTF-8 \xff";
        m.exitCode = 5;
        m.resultJson = R"({"ppl": 12.5, "nested": {"a": [1, 2]}})";
        Message d;
        const auto r = decode(encode(m), d);
        CPPL_VERIFY2(r.ok(), (std::string(decodeErrorName(r.error)) + " " + r.field).c_str());
        QVERIFY(d.header.kind == m.header.kind);
        switch (m.header.kind) {
        case Kind::Hello:
        case Kind::Heartbeat:
            QVERIFY(d.phase == Phase::Syncing);
            break;
        case Kind::Sync:
            QCOMPARE(d.sync.round, 3);
            QCOMPARE(d.sync.roundsTotal, 9);
            CPPL_COMPARE_BITS(d.sync.waitSeconds, 0.5);
            break;
        case Kind::Log:
            QVERIFY(d.level == LogLevel::Warning);
            QVERIFY(d.text.starts_with("line with \"quotes\", a tab\t"));
            QVERIFY(d.text.ends_with("\xEF\xBF\xBD")); // the bad byte became U+FFFD
            break;
        case Kind::Result:
            QCOMPARE(d.resultJson, m.resultJson);
            break;
        case Kind::Error:
        case Kind::Bye:
            QCOMPARE(d.exitCode.value(), 5);
            break;
        case Kind::Progress:
            break;
        }
    }

    void malformedMessagesAreRejected_data()
    {
        QTest::addColumn<QByteArray>("bytes");
        QTest::addColumn<DecodeError>("error");
        QTest::addColumn<QByteArray>("field");
        auto with = [](auto edit) {
            Json j = progressJson();
            edit(j);
            return QByteArray::fromStdString(j.dump());
        };
        auto row = [&](const char *name, QByteArray bytes, DecodeError e, const char *field = "") {
            QTest::newRow(name) << bytes << e << QByteArray(field);
        };
        row("empty", "", DecodeError::NotJson);
        row("garbage", "\x01\x02zzz", DecodeError::NotJson);
        row("truncated", QByteArray::fromStdString(encode(progressMessage())).chopped(5), DecodeError::NotJson);
        row("trailing bytes", QByteArray::fromStdString(encode(progressMessage())) + "{}", DecodeError::NotJson);
        row("invalid UTF-8 in a string", "{\"v\":1,\"run\":\"a\xff\"}", DecodeError::NotJson);
        row("array at the top", "[1,2]", DecodeError::NotFlatObject);
        row("number at the top", "42", DecodeError::NotFlatObject);
        row("nested object", with([](Json &j) { j["extra"] = Json::object({{"a", 1}}); }), DecodeError::NotFlatObject);
        row("nested array", with([](Json &j) { j["extra"] = Json::array({1}); }), DecodeError::NotFlatObject);
        row("duplicate key", "{\"v\":1,\"v\":1}", DecodeError::DuplicateKey, "v");
        row("tp_rank without tp_size", with([](Json &j) { j.erase("tp_size"); }), DecodeError::MissingField, "tp_size");
        row("tp seconds without tp_size", with([](Json &j) { j.erase("tp_size"), j.erase("tp_rank"); }), DecodeError::MissingField, "tp_size");
        row("tp_rank outside the group", with([](Json &j) { j["tp_rank"] = 2; }), DecodeError::OutOfRange, "tp_rank");
        row("tp_size over the world", with([](Json &j) { j["tp_size"] = 9; }), DecodeError::OutOfRange, "tp_size");
        row("kld_exact without ref_tokens_total", with([](Json &j) { j.erase("ref_tokens_total"), j.erase("same_top_total"); }),
            DecodeError::MissingField, "ref_tokens_total");
        row("same_top_total without ref_tokens_total", with([](Json &j) { j.erase("ref_tokens_total"), j.erase("kld_exact"); }),
            DecodeError::MissingField, "ref_tokens_total");
        row("ref_tokens_total without kld_exact", with([](Json &j) { j.erase("kld_exact"); }), DecodeError::MissingField, "kld_exact");
        row("ref_tokens_total without same_top_total", with([](Json &j) { j.erase("same_top_total"); }), DecodeError::MissingField,
            "same_top_total");
        row("same_top_total over the tokens compared", with([](Json &j) { j["same_top_total"] = 5; }), DecodeError::OutOfRange,
            "same_top_total");
        row("ref_tokens_total negative", with([](Json &j) { j["ref_tokens_total"] = -1; }), DecodeError::OutOfRange, "ref_tokens_total");
        row("kld_exact not an accumulator", with([](Json &j) { j["kld_exact"] = "0.25"; }), DecodeError::BadExactSum, "kld_exact");
        row("kld_exact a number", with([](Json &j) { j["kld_exact"] = 0.25; }), DecodeError::WrongType, "kld_exact");
        row("tp_size zero", with([](Json &j) { j["tp_size"] = 0; }), DecodeError::OutOfRange, "tp_size");
        row("tp seconds negative", with([](Json &j) { j["tp_collective_seconds_total"] = -1; }), DecodeError::OutOfRange,
            "tp_collective_seconds_total");
        row("GPU utilisation over 100", with([](Json &j) { j["gpu_utilization_percent"] = 101; }), DecodeError::OutOfRange,
            "gpu_utilization_percent");
        row("GPU utilisation negative", with([](Json &j) { j["gpu_utilization_percent"] = -1; }), DecodeError::OutOfRange,
            "gpu_utilization_percent");
        row("GPU utilisation as float", with([](Json &j) { j["gpu_utilization_percent"] = 97.5; }), DecodeError::WrongType,
            "gpu_utilization_percent");
        row("device total below used", with([](Json &j) { j["device_memory_total_bytes"] = 1000; }), DecodeError::OutOfRange,
            "device_memory_total_bytes");
        row("device total without used", with([](Json &j) { j.erase("device_memory_bytes"); }), DecodeError::MissingField,
            "device_memory_bytes");
        row("device used as string", with([](Json &j) { j["device_memory_bytes"] = "1"; }), DecodeError::WrongType,
            "device_memory_bytes");
        row("too large", QByteArray(static_cast<int>(kMaxMessageBytes) + 1, ' '), DecodeError::TooLarge);
        row("no version", with([](Json &j) { j.erase("v"); }), DecodeError::BadVersion, "v");
        row("version 2", with([](Json &j) { j["v"] = 2; }), DecodeError::BadVersion, "v");
        row("version as string", with([](Json &j) { j["v"] = "1"; }), DecodeError::BadVersion, "v");
        row("no run", with([](Json &j) { j.erase("run"); }), DecodeError::MissingField, "run");
        row("run with a space", with([](Json &j) { j["run"] = "a b"; }), DecodeError::OutOfRange, "run");
        row("run too long", with([](Json &j) { j["run"] = std::string(kMaxRunIdBytes + 1, 'r'); }), DecodeError::OutOfRange, "run");
        row("empty host", with([](Json &j) { j["host"] = ""; }), DecodeError::OutOfRange, "host");
        row("host with control byte", with([](Json &j) { j["host"] = "a\nb"; }), DecodeError::OutOfRange, "host");
        row("rank as string", with([](Json &j) { j["rank"] = "3"; }), DecodeError::WrongType, "rank");
        row("rank as float", with([](Json &j) { j["rank"] = 3.0; }), DecodeError::WrongType, "rank");
        row("rank >= world size", with([](Json &j) { j["rank"] = 8; }), DecodeError::OutOfRange, "rank");
        row("negative rank", with([](Json &j) { j["rank"] = -1; }), DecodeError::OutOfRange, "rank");
        row("world size 0", with([](Json &j) { j["world_size"] = 0; }), DecodeError::OutOfRange, "world_size");
        row("world size 2^21", with([](Json &j) { j["world_size"] = 1 << 21; }), DecodeError::OutOfRange, "world_size");
        row("group >= world size", with([](Json &j) { j["group"] = 9; }), DecodeError::OutOfRange, "group");
        row("negative seq", with([](Json &j) { j["seq"] = -5; }), DecodeError::OutOfRange, "seq");
        row("seq above int64", "{\"v\":1,\"run\":\"r\",\"host\":\"h\",\"world_size\":1,\"rank\":0,\"group\":0,\"local_rank\":0,"
                               "\"seq\":18446744073709551615,\"t\":1.0,\"dropped_total\":0,\"kind\":\"bye\"}",
            DecodeError::OutOfRange, "seq");
        row("t as string", with([](Json &j) { j["t"] = "now"; }), DecodeError::WrongType, "t");
        row("negative t", with([](Json &j) { j["t"] = -1.0; }), DecodeError::OutOfRange, "t");
        row("t = 1e300", with([](Json &j) { j["t"] = 1e300; }), DecodeError::OutOfRange, "t");
        row("t null", with([](Json &j) { j["t"] = nullptr; }), DecodeError::WrongType, "t");
        row("negative dropped_total", with([](Json &j) { j["dropped_total"] = -1; }), DecodeError::OutOfRange, "dropped_total");
        row("unknown kind", with([](Json &j) { j["kind"] = "gossip"; }), DecodeError::UnknownKind, "kind");
        row("kind as number", with([](Json &j) { j["kind"] = 2; }), DecodeError::WrongType, "kind");
        row("progress without nll_exact", with([](Json &j) { j.erase("nll_exact"); }), DecodeError::MissingField, "nll_exact");
        row("nll_exact not xs1", with([](Json &j) { j["nll_exact"] = "12.5"; }), DecodeError::BadExactSum, "nll_exact");
        row("nll_exact upper-case hex", with([](Json &j) {
                std::string s = j["nll_exact"];
                for (std::size_t i = 4; i < s.size(); ++i)
                    s[i] = static_cast<char>(std::toupper(s[i]));
                j["nll_exact"] = s;
            }),
            DecodeError::BadExactSum, "nll_exact");
        row("nll_sq_exact as number", with([](Json &j) { j["nll_sq_exact"] = 1.5; }), DecodeError::WrongType, "nll_sq_exact");
        row("negative tokens", with([](Json &j) { j["tokens_scored_total"] = -1; }), DecodeError::OutOfRange, "tokens_scored_total");
        row("tokens as bool", with([](Json &j) { j["tokens_scored_total"] = true; }), DecodeError::WrongType, "tokens_scored_total");
        row("windows_done > windows_total", with([](Json &j) { j["windows_done"] = 11; }), DecodeError::OutOfRange, "windows_done");
        row("negative rate", with([](Json &j) { j["tokens_per_second"] = -0.5; }), DecodeError::OutOfRange, "tokens_per_second");
        row("negative wait", with([](Json &j) { j["comm_wait_seconds_total"] = -1e-9; }), DecodeError::OutOfRange,
            "comm_wait_seconds_total");
        row("no rss_bytes", with([](Json &j) { j.erase("rss_bytes"); }), DecodeError::MissingField, "rss_bytes");
        row("device memory as string", with([](Json &j) { j["device_memory_bytes"] = "1G"; }), DecodeError::WrongType,
            "device_memory_bytes");
        row("heartbeat without phase", with([](Json &j) { j["kind"] = "heartbeat"; }), DecodeError::MissingField, "phase");
        row("heartbeat with bad phase", with([](Json &j) { j["kind"] = "heartbeat"; j["phase"] = "dreaming"; }),
            DecodeError::OutOfRange, "phase");
        row("sync round 0", with([](Json &j) {
                j["kind"] = "sync", j["round"] = 0, j["rounds_total"] = 3, j["wait_seconds"] = 0.0, j["transfer_seconds"] = 0.0;
            }),
            DecodeError::OutOfRange, "round");
        row("sync round > total", with([](Json &j) {
                j["kind"] = "sync", j["round"] = 4, j["rounds_total"] = 3, j["wait_seconds"] = 0.0, j["transfer_seconds"] = 0.0;
            }),
            DecodeError::OutOfRange, "round");
        row("log with bad level", with([](Json &j) { j["kind"] = "log", j["level"] = "loud", j["message"] = "x"; }),
            DecodeError::OutOfRange, "level");
        row("log too long", with([](Json &j) { j["kind"] = "log", j["level"] = "info", j["message"] = std::string(kMaxTextBytes + 1, 'x'); }),
            DecodeError::OutOfRange, "message");
        row("error without exit code", with([](Json &j) { j["kind"] = "error", j["message"] = "x"; }), DecodeError::MissingField,
            "exit_code");
        row("error exit code 256", with([](Json &j) { j["kind"] = "error", j["message"] = "x", j["exit_code"] = 256; }),
            DecodeError::OutOfRange, "exit_code");
        row("result_json not JSON", with([](Json &j) { j["kind"] = "result", j["result_json"] = "{oops"; }), DecodeError::WrongType,
            "result_json");
        row("result_json an array", with([](Json &j) { j["kind"] = "result", j["result_json"] = "[1]"; }), DecodeError::WrongType,
            "result_json");
    }
    void malformedMessagesAreRejected()
    {
        QFETCH(QByteArray, bytes);
        QFETCH(DecodeError, error);
        QFETCH(QByteArray, field);
        Message m;
        const auto r = decode(std::string_view(bytes.constData(), static_cast<std::size_t>(bytes.size())), m);
        QCOMPARE(std::string(decodeErrorName(r.error)), std::string(decodeErrorName(error)));
        if (!field.isEmpty())
            QCOMPARE(r.field, field.toStdString());
        DecodeCounters c;
        c.count(r.error);
        QCOMPARE(c.rejectedTotal(), 1);
        QCOMPARE(c.rejected[static_cast<std::size_t>(error)], 1);
    }

    void deviceFieldsAreOptional()
    {
        // A rank without a GPU (or an agent from before these fields): absent, not an error.
        Json j = progressJson();
        for (const char *k : {"device_memory_bytes", "device_memory_total_bytes", "gpu_utilization_percent"})
            j.erase(k);
        Message d;
        QVERIFY(decode(j.dump(), d).ok());
        QVERIFY(!d.progress.deviceMemoryBytes && !d.progress.deviceMemoryTotalBytes && !d.progress.gpuUtilizationPercent);
        QCOMPARE(d.progress.rssBytes, 123456789);
        // And the encoder writes none of them when they are absent.
        const std::string bytes = encode(d);
        QVERIFY(bytes.find("device_memory") == std::string::npos && bytes.find("gpu_utilization") == std::string::npos);
        // Memory without utilisation (MIG slices report none) is fine too.
        j = progressJson();
        j.erase("gpu_utilization_percent");
        QVERIFY(decode(j.dump(), d).ok());
        QVERIFY(d.progress.deviceMemoryTotalBytes && !d.progress.gpuUtilizationPercent);
    }

    void tensorParallelFieldsAreOptional()
    {
        // A rank without --tensor-parallel (or an agent from before these fields): absent, not an error.
        Json j = progressJson();
        for (const char *k : {"tp_size", "tp_rank", "tp_collective_seconds_total"})
            j.erase(k);
        Message d;
        QVERIFY(decode(j.dump(), d).ok());
        QVERIFY(!d.progress.tpSize && !d.progress.tpRank && !d.progress.tpCollectiveSecondsTotal);
        QVERIFY(encode(d).find("tp_") == std::string::npos);
        // A leader may leave out its member number; the size alone says it is grouped.
        j = progressJson();
        j.erase("tp_rank");
        QVERIFY(decode(j.dump(), d).ok());
        QCOMPARE(d.progress.tpSize.value(), 2);
        QVERIFY(!d.progress.tpRank);
    }

    void referenceFieldsAreOptional()
    {
        // A run without --reference-model (or an agent from before these fields): absent, not an error.
        Json j = progressJson();
        for (const char *k : {"ref_tokens_total", "kld_exact", "same_top_total"})
            j.erase(k);
        Message d;
        QVERIFY(decode(j.dump(), d).ok());
        QVERIFY(!d.progress.reference);
        const std::string bytes = encode(d);
        QVERIFY(bytes.find("kld") == std::string::npos && bytes.find("ref_tokens") == std::string::npos
                && bytes.find("same_top") == std::string::npos);
    }

    void unknownKeysAreIgnored()
    {
        Json j = progressJson();
        j["gpu_temperature_celsius"] = 71.5;
        Message m;
        QVERIFY(decode(j.dump(), m).ok());
    }

    void integerSecondsAreAccepted()
    {
        Json j = progressJson();
        j["t"] = 1717171717;
        j["compute_seconds_total"] = 3;
        Message m;
        QVERIFY(decode(j.dump(), m).ok());
        CPPL_COMPARE_BITS(m.progress.computeSecondsTotal, 3.0);
    }

    void resultStatsReadTheAggregatedResult()
    {
        const auto p = progressMessage().progress;
        Json r{{"ppl", 1.0}, {"nll_sum_exact", p.nll.toString()}, {"nll_sq_sum_exact", p.nllSquared.toString()},
               {"tokens_scored", 4}, {"windows", 1}};
        const auto s = resultStats(r.dump());
        QVERIFY(s.has_value());
        QVERIFY(s->nll == p.nll);
        QCOMPARE(s->tokens, 4);
        QVERIFY(!resultStats("{\"ppl\":1}").has_value());
        QVERIFY(!resultStats("not json").has_value());
    }

    void credentialsRoundTripAndPermissions()
    {
        Credentials c;
        c.serverPublic = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7";
        c.clientPublic = {"Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID"};
        c.clientSecret = "D:)Q[IlAW!ahhC2ac:9*A}h:p?([4%wOTJ%JR%cs";
        QVERIFY(c.hasClient());
        QVERIFY(!c.hasServer());
        const auto parsed = parseCredentials(formatCredentials(c), "test");
        QCOMPARE(parsed.serverPublic, c.serverPublic);
        QCOMPARE(parsed.clientPublic, c.clientPublic);
        QCOMPARE(parsed.clientSecret, c.clientSecret);

        QTemporaryDir dir;
        const std::string path = dir.filePath(QStringLiteral("keys")).toStdString();
        writeCredentialsFile(path, c);
        struct stat st{};
        QCOMPARE(::stat(path.c_str(), &st), 0);
        QCOMPARE(st.st_mode & 0777, 0600u);
        QCOMPARE(readCredentialsFile(path).clientSecret, c.clientSecret);
        ::chmod(path.c_str(), 0640);
        try {
            (void)readCredentialsFile(path);
            QFAIL("a group-readable key file was accepted");
        } catch (const cppl::ConfigError &e) {
            CPPL_VERIFY2(std::string(e.what()).find("chmod 600") != std::string::npos, e.what());
        }
    }

    void badCredentialsName_data()
    {
        QTest::addColumn<QByteArray>("text");
        QTest::addColumn<QByteArray>("message");
        QTest::newRow("no equals") << QByteArray("server_public rq:rM") << QByteArray("test:1: expected `key = value`");
        QTest::newRow("short key") << QByteArray("\n# c\nserver_public = abc") << QByteArray("test:3: server_public must be a 40-character");
        QTest::newRow("unknown key") << QByteArray("colour = rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7")
                                     << QByteArray("test:1: unknown key `colour`");
        QTest::newRow("twice") << QByteArray("server_public = rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7\n"
                                             "server_public = rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7")
                               << QByteArray("test:2: server_public is given twice");
    }
    void badCredentialsName()
    {
        QFETCH(QByteArray, text);
        QFETCH(QByteArray, message);
        try {
            (void)parseCredentials(text.toStdString(), "test");
            QFAIL("accepted");
        } catch (const cppl::ConfigError &e) {
            CPPL_VERIFY2(std::string(e.what()).starts_with(message.toStdString()), e.what());
        }
    }

    void endpoints_data()
    {
        QTest::addColumn<QString>("text");
        QTest::addColumn<QString>("host"); // empty: rejected
        QTest::addColumn<int>("port");
        QTest::addColumn<bool>("loopback");
        QTest::newRow("ipv4 loopback") << "tcp://127.0.0.1:5557" << "127.0.0.1" << 5557 << true;
        QTest::newRow("127/8") << "tcp://127.1.2.3:1" << "127.1.2.3" << 1 << true;
        QTest::newRow("localhost") << "tcp://localhost:65535" << "localhost" << 65535 << true;
        QTest::newRow("ipv6 loopback") << "tcp://[::1]:5557" << "::1" << 5557 << true;
        QTest::newRow("LAN address") << "tcp://10.0.0.5:5557" << "10.0.0.5" << 5557 << false;
        QTest::newRow("name that starts with 127.") << "tcp://127.example.org:5557" << "127.example.org" << 5557 << false;
        QTest::newRow("host name") << "tcp://dashboard:5557" << "dashboard" << 5557 << false;
        QTest::newRow("no scheme") << "10.0.0.5:5557" << "" << 0 << false;
        QTest::newRow("port 0") << "tcp://10.0.0.5:0" << "" << 0 << false;
        QTest::newRow("port too big") << "tcp://10.0.0.5:65536" << "" << 0 << false;
        QTest::newRow("no port") << "tcp://10.0.0.5" << "" << 0 << false;
        QTest::newRow("wildcard") << "tcp://*:5557" << "" << 0 << false;
    }
    void endpoints()
    {
        QFETCH(QString, text);
        QFETCH(QString, host);
        QFETCH(int, port);
        QFETCH(bool, loopback);
        if (host.isEmpty()) {
            QVERIFY_THROWS_EXCEPTION(cppl::ConfigError, (void)parseEndpoint(text.toStdString()));
            return;
        }
        const auto e = parseEndpoint(text.toStdString());
        QCOMPARE(QString::fromStdString(e.host), host);
        QCOMPARE(e.port, port);
        QCOMPARE(e.isLoopback(), loopback);
        QCOMPARE(QString::fromStdString(e.zmq()), text);
    }
};

QTEST_APPLESS_MAIN(TestTelemetry)
#include "tst_telemetry.moc"
