// SPDX-License-Identifier: MIT
// The agent -> launcher line protocol (docs/agent-lines.md): every kind round trips, the lines of
// agents before the protocol (no "v") still decode, every malformed case names its problem and
// member, other output is not ours, and unknown kinds and newer versions are kept and warned about once.
#include "cppl/agent_lines.h"
#include "cppl/sharding.h"

#include "test_verify.h"

#include <QTest>

#include <algorithm>

#include <nlohmann/json.hpp>

using namespace cppl::lines;
using Json = nlohmann::ordered_json;
using namespace Qt::StringLiterals;

Q_DECLARE_METATYPE(cppl::lines::Problem)
Q_DECLARE_METATYPE(cppl::lines::Status)

namespace {

Checkpoint checkpointEvent()
{
    Checkpoint c;
    c.round = 7;
    for (std::size_t i = 0; i < c.words.size(); ++i)
        c.words[i] = static_cast<std::int64_t>(i) * 1000003 - 5;
    c.words[1] = INT64_MIN; // exact as decimal strings, where a double would round
    c.words[2] = INT64_MAX;
    c.schedule = "dynamic";
    c.worldSize = 4;
    c.syncEvery = cppl::kSyncAtEnd;
    c.batchCount = 192;
    c.batch = 2;
    c.fingerprint = {"aa11", "bb22", "llama.cpp context 128 stride 128"};
    c.epoch = 2;
    return c;
}

RankLost rankLostEvent(bool afterLastRound = false)
{
    RankLost e;
    e.rank = 2;
    e.host = "node1";
    e.cause = "died: its connection closed";
    e.round = 4;
    e.windowsKept = 120;
    e.batchesRequeued = afterLastRound ? 0 : 3;
    e.ranksLeft = afterLastRound ? 0 : 3;
    e.afterLastRound = afterLastRound;
    return e;
}

Decoded decodeOk(const std::string &line)
{
    Decoded d = decode(line);
    if (!d.ok()) // the caller's std::get then throws: the test fails either way, this says why
        QTest::qFail(("not decoded: " + line + ": " + d.reason()).c_str(), __FILE__, __LINE__);
    return d;
}

/// @p object with @p key set to the JSON text @p value (or removed, when empty), as a line of @p tag.
std::string edited(std::string_view tag, const std::string &object, const std::string &key, const std::string &value)
{
    Json j = Json::parse(object);
    if (value.empty())
        j.erase(key);
    else
        j[key] = Json::parse(value);
    return std::string(tag) + ' ' + j.dump();
}

std::string bodyOf(const std::string &line)
{
    return line.substr(line.find(' ') + 1);
}

} // namespace

class TestAgentLines : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void tags()
    {
        for (int k = 0; k < kKindCount; ++k) {
            const auto kind = static_cast<Kind>(k);
            QVERIFY(tagOf(kind).starts_with(kPrefix));
            QVERIFY(kindFromTag(tagOf(kind)) == kind);
        }
        QCOMPARE(std::string(tagOf(Kind::Result)), std::string("CLUSTERPPL_RESULT"));
        QCOMPARE(std::string(tagOf(Kind::RankLost)), std::string("CLUSTERPPL_RANK_LOST"));
        QCOMPARE(std::string(tagOf(Kind::StoreReady)), std::string("CLUSTERPPL_STORE"));
        QVERIFY(!kindFromTag("CLUSTERPPL_FUTURE"));
    }

    void ledgerRoundTrips()
    {
        const Ledger e{3, 11, {{0, 4}, {8, 9}, {10, 12}}, 1};
        const std::string line = encode(e);
        QCOMPARE(line, std::string(R"(CLUSTERPPL_LEDGER {"rank":3,"round":11,"batches":"0-3,8,10-11","epoch":1,"v":1})"));
        const Decoded d = decodeOk(line);
        QVERIFY(d.kind == Kind::Ledger);
        QCOMPARE(d.version, 1);
        const auto &l = std::get<Ledger>(d.event);
        QCOMPARE(l.rank, 3);
        QCOMPARE(l.round, 11);
        QVERIFY(l.batches == e.batches);
        QCOMPARE(l.epoch, 1);
        // Before a regrouping the epoch is not written (agents before it did not write it either).
        QVERIFY(encode(Ledger{0, 0, {}, 0}) == R"(CLUSTERPPL_LEDGER {"rank":0,"round":0,"batches":"","v":1})");
    }

    void checkpointRoundTrips()
    {
        const Checkpoint c = checkpointEvent();
        const Decoded d = decodeOk(encode(c));
        const auto &e = std::get<Checkpoint>(d.event);
        QCOMPARE(e.round, 7);
        QVERIFY(e.words == c.words);
        QCOMPARE(e.schedule, c.schedule);
        QCOMPARE(e.worldSize, 4);
        QCOMPARE(e.syncEvery, cppl::kSyncAtEnd);
        QCOMPARE(e.batchCount, 192);
        QCOMPARE(e.batch, 2);
        QVERIFY(e.fingerprint == c.fingerprint);
        QCOMPARE(e.epoch, 2);
        QCOMPARE(e.formatVersion, 1);
        QVERIFY(e.more.empty());
        // The document for checkpoint.json: the same object without "v".
        const Json doc = Json::parse(checkpointDocument(e));
        QVERIFY(!doc.contains("v"));
        QCOMPARE(doc["format"].get<std::string>(), std::string("clusterppl-checkpoint"));
        QCOMPARE(doc["sync_every_tokens"].get<std::string>(), std::string("end"));
        QCOMPARE(doc["words"][1].get<std::string>(), std::to_string(INT64_MIN));
        Json line = Json::parse(bodyOf(encode(c)));
        line.erase("v");
        QCOMPARE(line.dump(), doc.dump());
    }

    void checkpointKeepsWhatANewerAgentAdded()
    {
        // A later version 1 agent may add members: a launcher that does not know them keeps them
        // in checkpoint.json, so the agent that resumes from it reads them back.
        std::string line = encode(checkpointEvent());
        line.insert(line.rfind(",\"v\":1}"), R"(,"quantization":{"bits":4,"group":128},"note":"x")");
        const Decoded decoded = decodeOk(line);
        const auto &e = std::get<Checkpoint>(decoded.event);
        QCOMPARE(e.more.size(), std::size_t(2));
        QCOMPARE(e.more[0].first, std::string("quantization"));
        QCOMPARE(e.more[0].second, std::string(R"({"bits":4,"group":128})"));
        const Json doc = Json::parse(checkpointDocument(e));
        QCOMPARE(doc["quantization"]["group"].get<int>(), 128);
        QCOMPARE(doc["note"].get<std::string>(), std::string("x"));
        QCOMPARE(encode(e), line); // and a second launcher passes them on unchanged
    }

    /// Every cut of a whole line ends early (whatever follows may complete it); the whole line, a
    /// syntax error before the end, trailing bytes and other output do not.
    void endsEarlyAtEveryCut()
    {
        std::string line = encode(checkpointEvent());
        line.insert(line.rfind(",\"v\":1}"), ",\"note\":\"\\u00e9 \\\"quoted\\\" tr\"");
        QVERIFY(!endsEarly(line));
        const std::size_t body = line.find(' ') + 1;
        for (std::size_t cut = body; cut < line.size(); ++cut)
            CPPL_VERIFY2(endsEarly(line.substr(0, cut)), ("not early at " + std::to_string(cut) + ": " + line.substr(0, cut)).c_str());
        QVERIFY(endsEarly("CLUSTERPPL_CHECKPOINT "));
        QVERIFY(endsEarly("CLUSTERPPL_SOMETHING_NEW {\"a\":[1,"));  // a newer agent's kind, cut
        QVERIFY(!endsEarly("CLUSTERPPL_LEDGER {\"rank\":x"));       // a syntax error, before the end
        QVERIFY(!endsEarly(line + "}"));                              // trailing bytes
        QVERIFY(!endsEarly("{\"rank\":1"));                          // not ours
        QVERIFY(!endsEarly("Final estimate: PPL = 4.6"));
    }

    void regroupRoundTrips()
    {
        const Regroup r{2, 5, {{1, 1, {{1, 4}}}, {0, -1, {}}}};
        const std::string line = encode(r);
        QCOMPARE(line, std::string(R"(CLUSTERPPL_REGROUP {"epoch":2,"first_round":5,"lost":[{"rank":1,"round":1,"batches":"1-3"},{"rank":0,"round":-1,"batches":""}],"v":1})"));
        const Decoded decoded = decodeOk(line);
        const auto &e = std::get<Regroup>(decoded.event);
        QCOMPARE(e.epoch, 2);
        QCOMPARE(e.firstRound, 5);
        QCOMPARE(e.lost.size(), std::size_t(2));
        QCOMPARE(e.lost[0].rank, 1);
        QVERIFY(e.lost[0].batches == (BatchRanges{{1, 4}}));
        QCOMPARE(e.lost[1].round, -1);
    }

    void rankLostRoundTrips_data()
    {
        QTest::addColumn<bool>("afterLastRound");
        QTest::addColumn<QString>("human");
        QTest::addRow("while the run goes on") << false
                                               << u"rank 2 (node1) died: its connection closed; lost after round 4, 120 of its windows kept, "
                                                  "3 batches queued again so far"_s;
        QTest::addRow("after the last round") << true
                                              << u"rank 2 (node1) died: its connection closed; lost after the last round (4), all 120 of its "
                                                 "windows kept, nothing to redo"_s;
    }
    void rankLostRoundTrips()
    {
        QFETCH(bool, afterLastRound);
        QFETCH(QString, human);
        const RankLost r = rankLostEvent(afterLastRound);
        const Decoded decoded = decodeOk(encode(r));
        const auto &e = std::get<RankLost>(decoded.event);
        QCOMPARE(e.rank, 2);
        QCOMPARE(e.host, std::string("node1"));
        QCOMPARE(e.cause, r.cause);
        QCOMPARE(e.round, 4);
        QCOMPARE(e.windowsKept, 120);
        QCOMPARE(e.batchesRequeued, r.batchesRequeued);
        QCOMPARE(e.ranksLeft, r.ranksLeft);
        QCOMPARE(e.afterLastRound, afterLastRound);
        QCOMPARE(QString::fromStdString(describe(e)), human); // the words the agent's stderr keeps for humans
    }

    void storeAndResultRoundTrip()
    {
        QCOMPARE(encode(StoreReady{29500, "0.0.0.0"}), std::string(R"(CLUSTERPPL_STORE {"port":29500,"addr":"0.0.0.0","v":1})"));
        const Decoded decoded = decodeOk(encode(StoreReady{1, "127.0.0.1"}));
        const auto &s = std::get<StoreReady>(decoded.event);
        QCOMPARE(s.port, 1);
        QCOMPARE(s.addr, std::string("127.0.0.1"));
        // The result object comes back as the agent's --json holds it: the same bytes, "v" taken off.
        Json r;
        r["ppl"] = 12.345678901234567;
        r["nll_sum_exact"] = "xs1:0123";
        r["tokens_scored"] = 4096;
        r["ranks"] = Json::array({Json{{"rank", 0}, {"tokens", 1.5e300}}, Json{{"rank", 1}, {"host", "n\u00e9"}}});
        r["version"] = "1.2.3";
        r["neg_zero"] = -0.0;
        const std::string text = r.dump();
        const std::string line = encode(Result{text});
        QVERIFY(line.starts_with("CLUSTERPPL_RESULT {\"ppl\":"));
        QVERIFY(line.ends_with(",\"v\":1}"));
        const Decoded back = decodeOk(line);
        QCOMPARE(std::get<Result>(back.event).json, text);
        // Not an object: written as it is, and then malformed.
        QCOMPARE(encode(Result{"[1]"}), std::string("CLUSTERPPL_RESULT [1]"));
        QVERIFY(decode(encode(Result{"[1]"})).problem == Problem::NotObject);
        QVERIFY(decode(encode(Result{"{\"ppl\": 1"})).problem == Problem::NotJson);
    }

    void badUtf8IsReplacedNotThrown()
    {
        RankLost r = rankLostEvent();
        r.cause = "exit \xff\xfe cut";
        const Decoded decoded = decodeOk(encode(r));
        const auto &e = std::get<RankLost>(decoded.event);
        QCOMPARE(e.cause, std::string("exit \xef\xbf\xbd\xef\xbf\xbd cut"));
        // A line that arrives with bad UTF-8 in it is no JSON (the rows of malformed() pass through QString, which repairs it).
        const Decoded bad = decode("CLUSTERPPL_RANK_LOST {\"host\":\"\xff\"}");
        QVERIFY(bad.status == Status::Malformed && bad.problem == Problem::NotJson);
    }

    /// Lines are ASCII alone, whatever their text holds: srun -l cuts a long line at a byte, and the
    /// pieces pass through text before the Slurm launcher joins them, so no character may be split.
    void linesAreAscii()
    {
        RankLost r = rankLostEvent();
        r.host = "n\xc5\x93ud-3";              // "nœud-3"
        r.cause = "died: \xe2\x80\x94 its connection closed \xf0\x9f\x94\x8c"; // an em dash, an emoji (a surrogate pair)
        Checkpoint c = checkpointEvent();
        c.fingerprint.plan = "context 128 \xe2\x80\x93 stride 128";
        for (const std::string &line : {encode(r), encode(c), encode(Result{R"({"host":"n\u0153ud","ppl":4.5})"})}) {
            CPPL_VERIFY2(std::all_of(line.begin(), line.end(), [](char ch) { return static_cast<unsigned char>(ch) < 0x80; }), line.c_str());
            QVERIFY(decode(line).ok());
        }
        const Decoded d = decodeOk(encode(r));
        QCOMPARE(std::get<RankLost>(d.event).host, r.host);
        QCOMPARE(std::get<RankLost>(d.event).cause, r.cause);
        QVERIFY(std::get<Checkpoint>(decodeOk(encode(c)).event).fingerprint == c.fingerprint);
        // checkpoint.json, for people to read, keeps its characters.
        QVERIFY(checkpointDocument(c).find("\xe2\x80\x93") != std::string::npos);
    }

    void linesOfAgentsBeforeTheProtocol_data()
    {
        QTest::addColumn<QString>("line");
        QTest::addColumn<int>("kind");
        // What agents printed before the protocol had a version: they read as version 1.
        QTest::addRow("ledger") << u"CLUSTERPPL_LEDGER {\"rank\":1,\"round\":0,\"batches\":\"1,5-6\"}"_s << int(Kind::Ledger);
        QTest::addRow("ledger after a regrouping") << u"CLUSTERPPL_LEDGER {\"rank\":1,\"round\":3,\"batches\":\"\",\"epoch\":1}"_s << int(Kind::Ledger);
        QTest::addRow("regroup") << u"CLUSTERPPL_REGROUP {\"epoch\":1,\"first_round\":7,\"lost\":[{\"rank\":2,\"round\":5,\"batches\":\"3-5,17,40-41\"}]}"_s
                                 << int(Kind::Regroup);
        QTest::addRow("store") << u"CLUSTERPPL_STORE {\"port\":40321,\"addr\":\"127.0.0.1\"}"_s << int(Kind::StoreReady);
        QTest::addRow("result") << u"CLUSTERPPL_RESULT {\"ppl\":1.5,\"tokens_scored\":3}"_s << int(Kind::Result);
        QString words;
        for (int i = 0; i < cppl::NllStats::kReduceWords; ++i)
            words += (i ? u","_s : QString()) + u"\"%1\""_s.arg(i * 7 - 3);
        QTest::addRow("checkpoint") << u"CLUSTERPPL_CHECKPOINT {\"format\":\"clusterppl-checkpoint\",\"version\":1,\"round\":3,\"words\":[%1],"
                                       "\"schedule\":\"static\",\"world_size\":2,\"sync_every_tokens\":256,\"batch_count\":40,"
                                       "\"fingerprint\":{\"model\":\"m\",\"data\":\"d\",\"plan\":\"p\"}}"_s.arg(words)
                                    << int(Kind::Checkpoint);
    }
    void linesOfAgentsBeforeTheProtocol()
    {
        QFETCH(QString, line);
        QFETCH(int, kind);
        const Decoded d = decodeOk(line.toStdString());
        QVERIFY(d.kind == static_cast<Kind>(kind));
        QCOMPARE(d.version, 1);
        if (kind == int(Kind::Result)) // as sent: nothing to take off
            QCOMPARE(std::get<Result>(d.event).json, bodyOf(line.toStdString()));
        if (kind == int(Kind::Checkpoint)) {
            const auto &c = std::get<Checkpoint>(d.event);
            QCOMPARE(c.batch, 0); // not recorded then
            QCOMPARE(c.syncEvery, 256);
            QCOMPARE(c.words[1], 4);
        }
        // And an agent of this version writes the same members, in the same order, "v" last.
        const std::string again = encode(d.event);
        if (kind != int(Kind::Result))
            QCOMPARE(again.substr(0, again.size() - 7) + "}", line.toStdString());
    }

    void malformed_data()
    {
        QTest::addColumn<QString>("line");
        QTest::addColumn<Problem>("problem");
        QTest::addColumn<QString>("field");
        const std::string ledger = bodyOf(encode(Ledger{1, 2, {{0, 2}}, 0}));
        const std::string checkpoint = bodyOf(encode(checkpointEvent()));
        const std::string regroup = bodyOf(encode(Regroup{1, 3, {{1, 1, {{1, 4}}}}}));
        const std::string lost = bodyOf(encode(rankLostEvent()));
        const std::string store = bodyOf(encode(StoreReady{5, "h"}));
        const auto row = [](const char *name, const std::string &line, Problem p, const char *field = "") {
            QTest::addRow("%s", name) << QString::fromStdString(line) << p << QString::fromLatin1(field);
        };
        const auto E = [](std::string_view tag, const std::string &o, const char *key, const std::string &value) { return edited(tag, o, key, value); };
        row("nothing after the tag", "CLUSTERPPL_LEDGER", Problem::NotJson);
        row("empty after the space", "CLUSTERPPL_LEDGER ", Problem::NotJson);
        row("not JSON", "CLUSTERPPL_LEDGER {rank:1}", Problem::NotJson);
        row("trailing bytes", "CLUSTERPPL_LEDGER " + ledger + " x", Problem::NotJson);
        row("cut short", "CLUSTERPPL_CHECKPOINT " + checkpoint.substr(0, 40), Problem::NotJson);
        row("an array", "CLUSTERPPL_REGROUP [1,2]", Problem::NotObject);
        row("a string", "CLUSTERPPL_STORE \"port\"", Problem::NotObject);
        row("too large", "CLUSTERPPL_RESULT {\"x\":\"" + std::string(kMaxLineBytes, 'a') + "\"}", Problem::TooLarge);
        row("v zero", E("CLUSTERPPL_LEDGER", ledger, "v", "0"), Problem::BadVersion, "v");
        row("v negative", E("CLUSTERPPL_LEDGER", ledger, "v", "-1"), Problem::BadVersion, "v");
        row("v a string", E("CLUSTERPPL_LEDGER", ledger, "v", "\"1\""), Problem::BadVersion, "v");
        row("v a float", E("CLUSTERPPL_LEDGER", ledger, "v", "1.0"), Problem::BadVersion, "v");
        row("v beyond int64", E("CLUSTERPPL_LEDGER", ledger, "v", "18446744073709551615"), Problem::BadVersion, "v");
        row("ledger without rank", E("CLUSTERPPL_LEDGER", ledger, "rank", ""), Problem::MissingField, "rank");
        row("ledger rank negative", E("CLUSTERPPL_LEDGER", ledger, "rank", "-1"), Problem::OutOfRange, "rank");
        row("ledger rank beyond int64", E("CLUSTERPPL_LEDGER", ledger, "rank", "9223372036854775808"), Problem::OutOfRange, "rank");
        row("ledger rank beyond int", E("CLUSTERPPL_LEDGER", ledger, "rank", "2147483648"), Problem::OutOfRange, "rank");
        row("ledger round a float", E("CLUSTERPPL_LEDGER", ledger, "round", "2.0"), Problem::WrongType, "round");
        row("ledger round null", E("CLUSTERPPL_LEDGER", ledger, "round", "null"), Problem::WrongType, "round");
        row("ledger batches backwards", E("CLUSTERPPL_LEDGER", ledger, "batches", "\"3-1\""), Problem::OutOfRange, "batches");
        row("ledger batches a number", E("CLUSTERPPL_LEDGER", ledger, "batches", "3"), Problem::WrongType, "batches");
        row("ledger epoch negative", E("CLUSTERPPL_LEDGER", ledger, "epoch", "-2"), Problem::OutOfRange, "epoch");
        row("checkpoint of another format", E("CLUSTERPPL_CHECKPOINT", checkpoint, "format", "\"x\""), Problem::OutOfRange, "format");
        row("checkpoint without words", E("CLUSTERPPL_CHECKPOINT", checkpoint, "words", ""), Problem::MissingField, "words");
        row("checkpoint words short", E("CLUSTERPPL_CHECKPOINT", checkpoint, "words", "[\"1\",\"2\"]"), Problem::OutOfRange, "words");
        row("checkpoint words an object", E("CLUSTERPPL_CHECKPOINT", checkpoint, "words", "{}"), Problem::WrongType, "words");
        {
            Json j = Json::parse(checkpoint);
            j["words"][3] = 5;
            row("checkpoint word a number", "CLUSTERPPL_CHECKPOINT " + j.dump(), Problem::WrongType, "words[3]");
            j["words"][3] = "5x";
            row("checkpoint word not decimal", "CLUSTERPPL_CHECKPOINT " + j.dump(), Problem::OutOfRange, "words[3]");
            j["words"][3] = "99999999999999999999";
            row("checkpoint word beyond int64", "CLUSTERPPL_CHECKPOINT " + j.dump(), Problem::OutOfRange, "words[3]");
        }
        row("checkpoint sync never", E("CLUSTERPPL_CHECKPOINT", checkpoint, "sync_every_tokens", "\"never\""), Problem::OutOfRange,
            "sync_every_tokens");
        row("checkpoint world size 0", E("CLUSTERPPL_CHECKPOINT", checkpoint, "world_size", "0"), Problem::OutOfRange, "world_size");
        row("checkpoint batch 0", E("CLUSTERPPL_CHECKPOINT", checkpoint, "batch", "0"), Problem::OutOfRange, "batch");
        row("checkpoint without fingerprint", E("CLUSTERPPL_CHECKPOINT", checkpoint, "fingerprint", ""), Problem::MissingField, "fingerprint");
        row("checkpoint fingerprint without plan", E("CLUSTERPPL_CHECKPOINT", checkpoint, "fingerprint", R"({"model":"m","data":"d"})"),
            Problem::MissingField, "fingerprint.plan");
        row("regroup epoch 0", E("CLUSTERPPL_REGROUP", regroup, "epoch", "0"), Problem::OutOfRange, "epoch");
        row("regroup lost nobody", E("CLUSTERPPL_REGROUP", regroup, "lost", "[]"), Problem::OutOfRange, "lost");
        row("regroup lost not objects", E("CLUSTERPPL_REGROUP", regroup, "lost", "[1]"), Problem::WrongType, "lost[0]");
        row("regroup lost rank missing", E("CLUSTERPPL_REGROUP", regroup, "lost", R"([{"round":1,"batches":""}])"), Problem::MissingField,
            "lost[0].rank");
        row("regroup lost batches bad", E("CLUSTERPPL_REGROUP", regroup, "lost", R"([{"rank":1,"round":1,"batches":"1,,2"}])"),
            Problem::OutOfRange, "lost[0].batches");
        row("rank lost without host", E("CLUSTERPPL_RANK_LOST", lost, "host", ""), Problem::MissingField, "host");
        row("rank lost host empty", E("CLUSTERPPL_RANK_LOST", lost, "host", "\"\""), Problem::OutOfRange, "host");
        row("rank lost flag a number", E("CLUSTERPPL_RANK_LOST", lost, "after_last_round", "1"), Problem::WrongType, "after_last_round");
        row("store port 0", E("CLUSTERPPL_STORE", store, "port", "0"), Problem::OutOfRange, "port");
        row("store port 65536", E("CLUSTERPPL_STORE", store, "port", "65536"), Problem::OutOfRange, "port");
        row("store addr a number", E("CLUSTERPPL_STORE", store, "addr", "1"), Problem::WrongType, "addr");
    }
    void malformed()
    {
        QFETCH(QString, line);
        QFETCH(Problem, problem);
        QFETCH(QString, field);
        const std::string text = line.toStdString();
        LineReader reader;
        const Decoded d = reader.read(text);
        CPPL_VERIFY2(d.status == Status::Malformed && d.problem == problem && d.field == field.toStdString(),
                     (std::string(problemName(d.problem)) + " " + d.field + ": " + d.reason()).c_str());
        QVERIFY(d.kind.has_value()); // the tag is known: a consumer knows whose line went wrong
        QVERIFY(d.reason().starts_with("malformed CLUSTERPPL_"));
        QVERIFY(d.warning.empty());
        QCOMPARE(reader.counters().malformed[static_cast<std::size_t>(problem)], 1);
        QCOMPARE(reader.counters().malformedTotal(), 1);
        QVERIFY(!peekKind(text) || peekKind(text) == d.kind);
    }

    void notOurs_data()
    {
        QTest::addColumn<QString>("line");
        QTest::addRow("empty") << QString();
        QTest::addRow("final estimate") << u"Final estimate: PPL = 12.3456 +/- 0.0812"_s;
        QTest::addRow("the prefix alone") << u"CLUSTERPPL_"_s;
        QTest::addRow("lower case") << u"CLUSTERPPL_result {}"_s;
        QTest::addRow("no space") << u"CLUSTERPPL_RESULT{}"_s;
        QTest::addRow("indented") << u" CLUSTERPPL_RESULT {}"_s;
        QTest::addRow("labelled") << u"[rank 1] CLUSTERPPL_RESULT {}"_s;
        QTest::addRow("an environment variable") << u"CLUSTERPPL_STORE=/tmp/x.sqlite"_s;
        QTest::addRow("a tag too long") << u"CLUSTERPPL_%1 {}"_s.arg(QString(60, u'A'));
    }
    void notOurs()
    {
        QFETCH(QString, line);
        const Decoded d = decode(line.toStdString());
        QVERIFY(d.status == Status::NotOurs);
        QVERIFY(!d.kind);
        QVERIFY(!peekKind(line.toStdString()));
    }

    void unknownKindIsKeptAndWarnedOnce()
    {
        LineReader reader;
        const std::string a = R"(CLUSTERPPL_TP_GROUP {"ranks":[0,1],"v":1})";
        const Decoded first = reader.read(a);
        QVERIFY(first.status == Status::UnknownKind);
        QCOMPARE(first.raw, a);
        QCOMPARE(first.tag, std::string("CLUSTERPPL_TP_GROUP"));
        QVERIFY(!first.kind);
        CPPL_VERIFY2(first.warning.find("CLUSTERPPL_TP_GROUP") != std::string::npos
                         && first.warning.find("kept as output, not acted on") != std::string::npos,
                     first.warning.c_str());
        // Whatever follows an unknown tag is its kind's business, JSON or not.
        const Decoded second = reader.read("CLUSTERPPL_TP_GROUP 0,1");
        QVERIFY(second.status == Status::UnknownKind);
        QVERIFY(second.warning.empty()); // once per tag
        QVERIFY(!reader.read("CLUSTERPPL_OTHER_THING x").warning.empty());
        QCOMPARE(reader.counters().unknownKind, 3);
        QCOMPARE(reader.counters().accepted, 0);
    }

    void newerVersionIsKeptAndWarnedOnce()
    {
        LineReader reader;
        const std::string v2 = R"(CLUSTERPPL_LEDGER {"rank":1,"round":2,"batches":{"from":0,"to":3},"v":2})";
        const Decoded d = reader.read(v2);
        QVERIFY(d.status == Status::NewerVersion);
        QVERIFY(d.kind == Kind::Ledger);
        QCOMPARE(d.version, 2);
        QCOMPARE(d.raw, v2);
        CPPL_VERIFY2(d.warning.find("version 2, newer than this ClusterPPL reads (1)") != std::string::npos, d.warning.c_str());
        QVERIFY(reader.read(v2).warning.empty());
        QVERIFY(!reader.read(R"(CLUSTERPPL_LEDGER {"v":3})").warning.empty()); // another version: said again
        QVERIFY(!reader.read(R"(CLUSTERPPL_STORE {"v":2})").warning.empty());   // another kind
        QCOMPARE(reader.counters().newerVersion, 4);
        // An older version of this protocol is read as this one: v1 lines after a v2 line.
        QVERIFY(reader.read(encode(Ledger{1, 3, {}, 0})).ok());
        QCOMPARE(reader.counters().accepted, 1);
    }

    void carriageReturnAndPeek()
    {
        const std::string line = encode(StoreReady{80, "h"}) + "\r";
        QVERIFY(decode(line).ok());
        QVERIFY(peekKind(line) == Kind::StoreReady);
        QVERIFY(peekKind("CLUSTERPPL_RESULT not even JSON") == Kind::Result);
        QVERIFY(!peekKind("CLUSTERPPL_FUTURE {}"));
    }

    void batchRanges_data()
    {
        QTest::addColumn<QString>("text");
        QTest::addColumn<bool>("ok");
        QTest::addColumn<QString>("formatted");
        QTest::addRow("none") << QString() << true << QString();
        QTest::addRow("one") << u"8"_s << true << u"8"_s;
        QTest::addRow("ranges") << u"0-3,8,10-11"_s << true << u"0-3,8,10-11"_s;
        QTest::addRow("a range of one") << u"4-4"_s << true << u"4"_s;
        QTest::addRow("out of order, kept") << u"8,0-3"_s << true << u"8,0-3"_s;
        QTest::addRow("backwards") << u"3-1"_s << false << QString();
        QTest::addRow("empty part") << u"1,,2"_s << false << QString();
        QTest::addRow("trailing comma") << u"1,"_s << false << QString();
        QTest::addRow("leading comma") << u",1"_s << false << QString();
        QTest::addRow("space") << u"1, 2"_s << false << QString();
        QTest::addRow("plus") << u"+1"_s << false << QString();
        QTest::addRow("negative") << u"-1"_s << false << QString();
        QTest::addRow("letters") << u"a"_s << false << QString();
        QTest::addRow("open range") << u"3-"_s << false << QString();
        QTest::addRow("the largest int64") << u"9223372036854775807"_s << false << QString();
        QTest::addRow("below it") << u"9223372036854775806"_s << true << u"9223372036854775806"_s;
    }
    void batchRanges()
    {
        QFETCH(QString, text);
        QFETCH(bool, ok);
        QFETCH(QString, formatted);
        const auto r = parseBatchRanges(text.toStdString());
        QCOMPARE(r.has_value(), ok);
        if (ok)
            QCOMPARE(QString::fromStdString(formatBatchRanges(*r)), formatted);
    }
};

QTEST_GUILESS_MAIN(TestAgentLines)
#include "tst_agent_lines.moc"
