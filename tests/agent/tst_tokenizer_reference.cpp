// SPDX-License-Identifier: MIT
// The tokenizer against independent implementations, run by the machine's Node.js from the packages
// pinned in tests/agent/npm/package-lock.json, which scripts/install-deps.sh installs into
// tests/agent/npm/node_modules (tests never reach the network): GPT-2 over all of WikiText-2 test against the npm
// gpt-tokenizer (r50k_base), and the hand-made fixtures plus odd strings against Hugging Face's own
// Rust `tokenizers` crate (its npm binding). Also `clusterppl-agent tokenize` as a real process.
#include "exit_codes.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer_fixtures.h"
#include "npm_reference.h"

#include "test_files.h"
#include "test_paths.h"
#include "test_skip.h"
#include "test_verify.h"

#include <QDir>
#include <QFile>
#include <QProcess>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

#include <fstream>
#include <map>
#include <sstream>

using namespace cppl::agent;
using namespace cppl::test::npm;

using cppl::test::readFile;
using cppl::test::readU32;

namespace {

const QString kGpt2 = kShared + QStringLiteral("/tokenizers/gpt2");

struct CrateRow
{
    std::string name;
    std::string fixture; ///< a fixtures::byName() name, or "gpt2 shared"
    std::string text;
};

std::vector<CrateRow> crateRows()
{
    std::vector<CrateRow> rows;
    for (const auto &row : fixtures::encodeRows())
        rows.push_back({std::string("fixture: ") + row.name, row.fixture, row.text});
    const char *odd[][2] = {
        {"GPT-2: emoji, ZWJ, flags", "hi \xF0\x9F\x91\x8B\xF0\x9F\x8F\xBD \xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9 \xF0\x9F\x87\xA9\xF0\x9F\x87\xAA!"},
        {"GPT-2: CJK, Hangul, fullwidth", "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E\xE3\x81\xAE\xE6\x96\x87\xEF\xBC\x8C\xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4 \xEF\xBC\xA1\xEF\xBC\x91"},
        {"GPT-2: combining marks", "e\xCC\x81 \xC3\xA9 a\xCC\x88\xCC\xA3 Z\xCC\xA4\xCD\x94\xCD\xA7\xCC\x91"},
        {"GPT-2: NEL, LS, NBSP, ideographic space, BOM, tabs", "a\xC2\x85 b\xE2\x80\xA8 c\xC2\xA0 d\xE3\x80\x80 \xEF\xBB\xBF\t\t x \r\n\r\n"},
        {"GPT-2: whitespace runs before words and at the end", "a   b\n\n\n  c \t \n   "},
        {"GPT-2: contractions in any case, digits, fractions", "'s 'S 'll 'LL don't 1234567 \xC2\xBD \xE2\x85\xB7 \xD9\xA3\xD9\xA4"},
        {"GPT-2: special token and look-alikes", "a<|endoftext|>b <|endoftext| <|endoftext|><|endoftext|> <0xFF> \\xff"},
    };
    for (const auto &[name, text] : odd)
        rows.push_back({name, "gpt2 shared", text});
    return rows;
}

/// Every row through the crate in one Node.js run (loading the binding once), keyed by row name.
struct CrateResults
{
    QString error;
    std::map<std::string, std::vector<std::uint32_t>> ids;
    std::map<std::string, std::string> tokenizerFiles;
};

const CrateResults &crateResults()
{
    static QTemporaryDir dir;
    static const CrateResults results = [] {
        CrateResults r;
        nlohmann::json jobs = nlohmann::json::array();
        const auto rows = crateRows();
        for (std::size_t i = 0; i < rows.size(); ++i) {
            std::string tokenizerFile = (kGpt2 + QStringLiteral("/tokenizer.json")).toStdString();
            if (rows[i].fixture != "gpt2 shared") {
                tokenizerFile = dir.filePath(QStringLiteral("tokenizer-%1.json").arg(i)).toStdString();
                std::ofstream(tokenizerFile) << fixtures::byName(rows[i].fixture).dump();
            }
            const std::string textFile = dir.filePath(QStringLiteral("text-%1.txt").arg(i)).toStdString();
            std::ofstream(textFile, std::ios::binary) << rows[i].text;
            jobs.push_back({{"tokenizer", tokenizerFile}, {"text_file", textFile}});
            r.tokenizerFiles[rows[i].name] = tokenizerFile;
        }
        const QString jobsFile = dir.filePath(QStringLiteral("jobs.json"));
        std::ofstream(jobsFile.toStdString()) << jobs.dump();
        const QString outFile = dir.filePath(QStringLiteral("out.json"));
        const Run run_ = run(QStringLiteral("node"), {kScripts + QStringLiteral("/encode_hf.js"), kNpmPrefix, jobsFile, outFile});
        if (run_.exitCode != 0) {
            r.error = QStringLiteral("encode_hf.js failed: ") + run_.err;
            return r;
        }
        const auto out = nlohmann::json::parse(readFile(outFile));
        for (std::size_t i = 0; i < rows.size(); ++i)
            r.ids[rows[i].name] = out.at(i).get<std::vector<std::uint32_t>>();
        return r;
    }();
    return results;
}

} // namespace

class TestTokenizerReference : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase()
    {
        if (!QFile::exists(kWikiText) || !QFile::exists(kGpt2 + QStringLiteral("/tokenizer.json")))
            CPPL_SKIP_MISSING("../shared/data (WikiText-2, GPT-2 tokenizer) is not present");
    }

    void gpt2IdenticalToGptTokenizerOnWikiText()
    {
        if (const QString missing = missingNpmPackages(); !missing.isEmpty())
            CPPL_SKIP_MISSING(qPrintable(missing));
        QTemporaryDir dir;
        const QString npmIds = dir.filePath(QStringLiteral("npm.u32"));
        const Run r = run(QStringLiteral("node"), {kScripts + QStringLiteral("/encode_r50k.js"), kNpmPrefix, kWikiText, npmIds});
        CPPL_VERIFY2(r.exitCode == 0, qPrintable(r.err));
        const auto theirs = readU32(npmIds);
        const std::string text = readFile(kWikiText);
        const auto tokenizer = Tokenizer::load(kGpt2.toStdString());
        const auto ours = tokenizer->encode(text);
        // The shared tokenizer.json carries truncation max_length 50: nothing may be cut.
        QVERIFY(ours.size() > 200000);
        const QString diff = firstDifference(ours, theirs, *tokenizer, text, QStringLiteral("gpt-tokenizer"));
        CPPL_VERIFY2(diff.isEmpty(), qPrintable(diff));
        qInfo("%zu ids identical to %s (%s)", ours.size(), qPrintable(pinnedPackages().filter(QStringLiteral("gpt-tokenizer@")).join(QString())), qPrintable(r.out.trimmed()));
    }

    void gpt2RoundTripOnWikiText()
    {
        const std::string text = readFile(kWikiText);
        const auto tokenizer = Tokenizer::load(kGpt2.toStdString());
        const std::string back = tokenizer->decode(tokenizer->encode(text));
        QCOMPARE(back.size(), text.size());
        QVERIFY(back == text);
    }

    void identicalToHuggingFaceCrate_data()
    {
        QTest::addColumn<QString>("fixture"); // a fixtures::byName() name, or "gpt2 shared"
        QTest::addColumn<QByteArray>("text");
        for (const CrateRow &row : crateRows())
            QTest::addRow("%s", row.name.c_str()) << QString::fromStdString(row.fixture) << QByteArray::fromStdString(row.text);
    }
    void identicalToHuggingFaceCrate()
    {
        QFETCH(QString, fixture);
        QFETCH(QByteArray, text);
        if (const QString missing = missingNpmPackages(); !missing.isEmpty())
            CPPL_SKIP_MISSING(qPrintable(missing));
        const CrateResults &crate = crateResults();
        CPPL_VERIFY2(crate.error.isEmpty(), qPrintable(crate.error));
        const std::string name = QTest::currentDataTag();
        const auto tokenizer = Tokenizer::load(crate.tokenizerFiles.at(name));
        const auto ours = tokenizer->encode(text.toStdString());
        const QString diff = firstDifference(ours, crate.ids.at(name), *tokenizer, text.toStdString(), QStringLiteral("HF crate"));
        CPPL_VERIFY2(diff.isEmpty(), qPrintable(diff));
    }

    void tokenizeCommandWritesTheLibraryIds_data()
    {
        QTest::addColumn<QString>("bos");
        QTest::addColumn<bool>("bosExpected");
        QTest::addRow("--bos auto: GPT-2 adds none") << "auto" << false;
        QTest::addRow("--bos always: <|endoftext|> first") << "always" << true;
    }
    void tokenizeCommandWritesTheLibraryIds()
    {
        QFETCH(QString, bos);
        QFETCH(bool, bosExpected);
        QTemporaryDir dir;
        const QString out = dir.filePath(QStringLiteral("wiki.u32"));
        const Run r = run(cppl::test::kAgent, {QStringLiteral("tokenize"), QStringLiteral("--tokenizer"), kGpt2, QStringLiteral("--text"),
                                                           kWikiText, QStringLiteral("--out"), out, QStringLiteral("--bos"), bos});
        CPPL_VERIFY2(r.exitCode == kExitOk, qPrintable(r.err));
        CPPL_VERIFY2(r.out.contains(QStringLiteral(" MB/s")) && r.out.contains(QStringLiteral(" ids/s")), qPrintable(r.out));
        // The truncation block is announced once, and ignored.
        QCOMPARE(r.err.count(QStringLiteral("\"truncation\" block (max_length 50) is ignored")), 1);
        const auto tokenizer = Tokenizer::load(kGpt2.toStdString());
        std::vector<std::uint32_t> expected;
        if (bosExpected)
            expected.push_back(50256);
        tokenizer->encode(readFile(kWikiText), expected);
        const auto written = readU32(out);
        QCOMPARE(written.size(), expected.size());
        QVERIFY(written == expected);
        CPPL_VERIFY2(r.out.contains(QStringLiteral("ids        %1 -> ").arg(expected.size())), qPrintable(r.out));
    }

    void tokenizeCommandBadInput_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<int>("exitCode");
        QTest::addColumn<QString>("message");
        const QString missing = QStringLiteral("/nonexistent/tokenizer.json");
        QTest::addRow("missing tokenizer") << QStringList{QStringLiteral("--tokenizer"), missing, QStringLiteral("--text"), kWikiText, QStringLiteral("--out"), QStringLiteral("OUT")}
                                           << int(kExitBadModel) << missing + QStringLiteral(": no such file or directory");
        QTest::addRow("no --tokenizer") << QStringList{QStringLiteral("--text"), kWikiText, QStringLiteral("--out"), QStringLiteral("OUT")} << int(kExitBadArguments)
                                        << "--tokenizer is required: a tokenizer.json or a SentencePiece tokenizer.model, or a model directory holding one";
        QTest::addRow("bad --bos") << QStringList{QStringLiteral("--tokenizer"), kGpt2, QStringLiteral("--text"), kWikiText, QStringLiteral("--out"), QStringLiteral("OUT"), QStringLiteral("--bos"), QStringLiteral("yes")}
                                   << int(kExitBadArguments) << "--bos \"yes\" is unknown (expected auto, always or never)";
        QTest::addRow("missing text") << QStringList{QStringLiteral("--tokenizer"), kGpt2, QStringLiteral("--text"), QStringLiteral("/nonexistent.txt"), QStringLiteral("--out"), QStringLiteral("OUT")}
                                      << int(kExitBadData) << "/nonexistent.txt: cannot open the text file";
        QTest::addRow("invalid UTF-8") << QStringList{QStringLiteral("--tokenizer"), kGpt2, QStringLiteral("--text"), QStringLiteral("LATIN1"), QStringLiteral("--out"), QStringLiteral("OUT")}
                                       << int(kExitBadData) << "latin1.txt: invalid UTF-8 at byte offset 3;";
    }
    void tokenizeCommandBadInput()
    {
        QFETCH(QStringList, args);
        QFETCH(int, exitCode);
        QFETCH(QString, message);
        QTemporaryDir dir;
        const QString latin1 = dir.filePath(QStringLiteral("latin1.txt"));
        std::ofstream(latin1.toStdString(), std::ios::binary) << "caf\xE9 au lait";
        args.replaceInStrings(QStringLiteral("LATIN1"), latin1);
        args.replaceInStrings(QStringLiteral("OUT"), dir.filePath(QStringLiteral("out.u32")));
        const Run r = run(cppl::test::kAgent, QStringList{QStringLiteral("tokenize")} + args);
        QCOMPARE(r.exitCode, exitCode);
        CPPL_VERIFY2(r.err.contains(message), qPrintable(r.err));
    }
};

QTEST_GUILESS_MAIN(TestTokenizerReference)
#include "tst_tokenizer_reference.moc"
