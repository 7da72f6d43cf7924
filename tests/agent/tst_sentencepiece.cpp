// SPDX-License-Identifier: MIT
// SentencePiece tokenizer.model through the libclusterppl_spm.so shim, with real parts: models trained
// here by Debian's spm_train on Tiny Shakespeare (BPE + byte_fallback + identity like Llama's,
// Unigram + nmt_nfkc, Char without BOS), ids identical to spm_encode line for line, decode identical
// to spm_decode and lossless where SentencePiece is, BOS decisions, every bad input's message, and
// `clusterppl-agent tokenize` as a process (a LibTorch process: the protobuf clash the shim avoids).
#include "exit_codes.h"
#include "tokenizer/sentencepiece_tokenizer.h"
#include "tokenizer/tokenizer.h"

#include "cppl/errors.h"

#include "test_files.h"
#include "test_paths.h"
#include "test_skip.h"
#include "test_verify.h"
#include "tokenizer_refusal.h"

#include <QDir>
#include <QFile>
#include <QProcess>
#include <QProcessEnvironment>
#include <QRandomGenerator>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

#include <fstream>
#include <map>
#include <sstream>

using namespace cppl::agent;

using cppl::test::readFile;
using cppl::test::readU32;

namespace {

const QString kShakespeare = QStringLiteral(CPPL_SOURCE_DIR "/../shared/data/tinyshakespeare/input.txt");
const QString kGpt2Json = QStringLiteral(CPPL_SOURCE_DIR "/../shared/data/tokenizers/gpt2/tokenizer.json");
#ifdef CPPL_SPM_SHIM
constexpr bool kBuiltWithShim = true;
#else
constexpr bool kBuiltWithShim = false;
#endif

/// Lines no play has: whitespace runs, digits, NFKC-sensitive and unseen scripts, emoji sequences,
/// control characters, BOM, U+FFFD and text that looks like special pieces.
const char *const kOddLines[] = {
    "  leading spaces,  doubled   spaces and trailing ones  ",
    "\ttabs\tinside\t and a vertical tab \v here",
    "digits 1234567890, 3.14159 and 1,000,000",
    "\xC3\xA9migr\xC3\xA9 na\xC3\xAFve caf\xC3\xA9 \xC3\x86r\xC3\xB8",
    "combining e\xCC\x81 against precomposed \xC3\xA9",
    "\xEF\xAC\x81 ligature, circled \xE2\x91\xA0, fullwidth \xEF\xBC\xA6\xEF\xBC\xB5\xEF\xBC\xAC\xEF\xBC\xAC",
    "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E \xE4\xB8\xAD\xE6\x96\x87 \xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4",
    "emoji \xF0\x9F\x98\x80 family \xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7 flag \xF0\x9F\x87\xA9\xF0\x9F\x87\xAA",
    "control \x01\x02\x1F\x7F characters",
    "literal <s> </s> <unk> <0x41> \xE2\x96\x81 pieces",
    "\xCE\x95\xCE\xBB\xCE\xBB\xCE\xB7\xCE\xBD\xCE\xB9\xCE\xBA\xCE\xAC \xD0\xA0\xD1\x83\xD1\x81\xD1\x81\xD0\xBA\xD0\xB8\xD0\xB9 "
    "\xD7\xA2\xD7\x91\xD7\xA8\xD7\x99\xD7\xAA",
    "\xEF\xBB\xBF BOM, replacement character \xEF\xBF\xBD, noncharacter \xEF\xBF\xBF",
    "",
    "   ",
};

void writeFile(const QString &path, std::string_view content)
{
    std::ofstream(path.toStdString(), std::ios::binary | std::ios::trunc).write(content.data(), static_cast<std::streamsize>(content.size()));
}

/// Lines the way spm_encode reads them: split at '\n', no empty line after a final '\n'.
std::vector<std::string> splitLines(const std::string &text)
{
    std::vector<std::string> lines;
    std::size_t start = 0;
    while (start < text.size()) {
        const std::size_t end = text.find('\n', start);
        if (end == std::string::npos) {
            lines.push_back(text.substr(start));
            break;
        }
        lines.push_back(text.substr(start, end - start));
        start = end + 1;
    }
    return lines;
}

struct Run
{
    int exitCode = -1; ///< -1: did not finish or crashed
    QByteArray out;
    QString err;
};

Run run(const QString &program, const QStringList &args, const QString &stdinFile = {}, const QProcessEnvironment &env = {})
{
    QProcess p;
    if (!stdinFile.isEmpty())
        p.setStandardInputFile(stdinFile);
    if (!env.isEmpty())
        p.setProcessEnvironment(env);
    p.start(program, args);
    if (!p.waitForFinished(300000)) {
        p.kill();
        p.waitForFinished();
        return {-1, {}, program + QStringLiteral(" did not finish in 300 s")};
    }
    return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1, p.readAllStandardOutput(), QString::fromUtf8(p.readAllStandardError())};
}

struct TrainedModel
{
    QString path;          ///< DIR/NAME.model
    QStringList trainArgs; ///< beyond --input, --model_prefix, --vocab_size
    int vocabSize = 1000;
};

/// The models every test uses, trained once per run into a temporary directory.
std::map<QString, TrainedModel> &models()
{
    static std::map<QString, TrainedModel> m = {
        {QStringLiteral("bpe"),
         {{},
          {QStringLiteral("--model_type=bpe"), QStringLiteral("--byte_fallback=true"), QStringLiteral("--normalization_rule_name=identity"),
           QStringLiteral("--remove_extra_whitespaces=false"), QStringLiteral("--split_digits=true")}}},
        {QStringLiteral("unigram"), {{}, {QStringLiteral("--model_type=unigram")}}},
        {QStringLiteral("char"), {{}, {QStringLiteral("--model_type=char"), QStringLiteral("--bos_id=-1")}, 0}},
    };
    return m;
}

QString firstDifference(const std::vector<std::string> &lines, std::size_t line, const std::vector<std::uint32_t> &ours,
                        const std::vector<std::uint32_t> &theirs)
{
    const auto join = [](const std::vector<std::uint32_t> &ids) {
        QStringList s;
        for (const auto id : ids)
            s << QString::number(id);
        return s.join(QLatin1Char(' '));
    };
    return QStringLiteral("line %1 \"%2\": ours [%3], spm_encode [%4]")
        .arg(line + 1)
        .arg(QString::fromStdString(lines[line]), join(ours), join(theirs));
}

/// Empty when equal, else the first differing byte offset with the text around it.
QString byteDifference(const std::string &ours, const std::string &expected)
{
    if (ours == expected)
        return {};
    std::size_t i = 0;
    while (i < ours.size() && i < expected.size() && ours[i] == expected[i])
        ++i;
    const std::size_t from = i > 30 ? i - 30 : 0;
    return QStringLiteral("%1 bytes against %2, first difference at byte %3:\n  got      \"%4\"\n  expected \"%5\"")
        .arg(ours.size())
        .arg(expected.size())
        .arg(i)
        .arg(QString::fromUtf8(QByteArray::fromStdString(ours.substr(from, 60)).toPercentEncoding(" ,.:;!?'")),
             QString::fromUtf8(QByteArray::fromStdString(expected.substr(from, 60)).toPercentEncoding(" ,.:;!?'")));
}

std::unique_ptr<Tokenizer> loadModel(const QString &name)
{
    return Tokenizer::load(models().at(name).path.toStdString());
}

} // namespace

class TestSentencePiece : public QObject
{
    Q_OBJECT

    QTemporaryDir m_dir;
    QString m_text; ///< Tiny Shakespeare and the odd lines, one file

    void requireShim()
    {
        if (!kBuiltWithShim)
            CPPL_SKIP_MISSING("built without SentencePiece support (libsentencepiece-dev was missing at configure time)");
    }

private Q_SLOTS:
    void initTestCase()
    {
#ifdef CPPL_SPM_SHIM
        // The test executable is not clusterppl-agent, so the shim is not next to it.
        qputenv("CLUSTERPPL_SPM_SHIM", QByteArrayLiteral(CPPL_SPM_SHIM));
#endif
        if (!kBuiltWithShim)
            return;
        if (!QFile::exists(kShakespeare))
            CPPL_SKIP_MISSING("../shared/data/tinyshakespeare/input.txt is not present");
        if (QStandardPaths::findExecutable(QStringLiteral("spm_train")).isEmpty()
            || QStandardPaths::findExecutable(QStringLiteral("spm_encode")).isEmpty())
            CPPL_SKIP_MISSING("spm_train/spm_encode are not installed (Debian package sentencepiece; scripts/install-deps.sh)");
        QVERIFY(m_dir.isValid());
        std::string text = readFile(kShakespeare);
        for (const char *line : kOddLines)
            text += std::string(line) + "\n";
        m_text = m_dir.filePath(QStringLiteral("text.txt"));
        writeFile(m_text, text);
        for (auto &[name, model] : models()) {
            const QString prefix = m_dir.filePath(name);
            QStringList args = {QStringLiteral("--input=") + kShakespeare, QStringLiteral("--model_prefix=") + prefix,
                                QStringLiteral("--minloglevel=2"), QStringLiteral("--num_threads=2")};
            if (model.vocabSize > 0)
                args << QStringLiteral("--vocab_size=%1").arg(model.vocabSize);
            else
                args << QStringLiteral("--vocab_size=80") << QStringLiteral("--hard_vocab_limit=false");
            const Run r = run(QStringLiteral("spm_train"), args + model.trainArgs);
            CPPL_VERIFY2(r.exitCode == 0, qPrintable(QStringLiteral("spm_train for %1 failed: %2").arg(name, r.err)));
            model.path = prefix + QStringLiteral(".model");
        }
    }

    void idsIdenticalToSpmEncode_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<QString>("description");
        QTest::addRow("BPE, byte_fallback, identity normalizer (Llama-style)")
            << "bpe" << "SentencePiece BPE, 1000 ids, byte_fallback, normalizer identity, dummy prefix";
        QTest::addRow("Unigram, nmt_nfkc normalizer") << "unigram" << "SentencePiece Unigram, 1000 ids, normalizer nmt_nfkc, dummy prefix";
        QTest::addRow("Char, no BOS") << "char" << "SentencePiece Char, ";
    }
    void idsIdenticalToSpmEncode()
    {
        requireShim();
        QFETCH(QString, model);
        QFETCH(QString, description);
        const QString path = models().at(model).path;
        const Run r = run(QStringLiteral("spm_encode"), {QStringLiteral("--model=") + path, QStringLiteral("--output_format=id")}, m_text);
        CPPL_VERIFY2(r.exitCode == 0, qPrintable(r.err));
        const auto tokenizer = Tokenizer::load(path.toStdString());
        CPPL_VERIFY2(QString::fromStdString(tokenizer->description()).startsWith(description), tokenizer->description().c_str());
        // spm_encode encodes each line on its own; so do we here (the whole text is encoded at once below).
        const std::vector<std::string> lines = splitLines(readFile(m_text));
        const QList<QByteArray> theirLines = r.out.split('\n');
        CPPL_VERIFY2(theirLines.size() == static_cast<qsizetype>(lines.size()) + 1 && theirLines.back().isEmpty(),
                 qPrintable(QStringLiteral("spm_encode wrote %1 lines for %2").arg(theirLines.size()).arg(lines.size())));
        std::size_t compared = 0;
        for (std::size_t i = 0; i < lines.size(); ++i) {
            std::vector<std::uint32_t> theirs;
            for (const QByteArray &id : theirLines[static_cast<qsizetype>(i)].split(' '))
                if (!id.isEmpty())
                    theirs.push_back(id.toUInt());
            const auto ours = tokenizer->encode(lines[i]);
            CPPL_VERIFY2(ours == theirs, qPrintable(firstDifference(lines, i, ours, theirs)));
            compared += ours.size();
        }
        QVERIFY(compared > 250000);
        qInfo("%s: %zu ids on %zu lines identical to spm_encode", qPrintable(model), compared, lines.size());
    }

    void decodeIdenticalToSpmDecode_data()
    {
        QTest::addColumn<QString>("model");
        for (const auto &[name, model] : models())
            QTest::addRow("%s", qPrintable(name)) << name;
    }
    void decodeIdenticalToSpmDecode()
    {
        requireShim();
        QFETCH(QString, model);
        const auto tokenizer = loadModel(model);
        const std::vector<std::string> lines = splitLines(readFile(m_text));
        std::string idsText;
        std::vector<std::vector<std::uint32_t>> ids;
        for (const auto &line : lines) {
            ids.push_back(tokenizer->encode(line));
            for (std::size_t k = 0; k < ids.back().size(); ++k)
                idsText += (k ? " " : "") + std::to_string(ids.back()[k]);
            idsText += '\n';
        }
        const QString idsFile = m_dir.filePath(model + QStringLiteral(".ids"));
        writeFile(idsFile, idsText);
        const Run r = run(QStringLiteral("spm_decode"), {QStringLiteral("--model=") + models().at(model).path, QStringLiteral("--input_format=id")},
                          idsFile);
        CPPL_VERIFY2(r.exitCode == 0, qPrintable(r.err));
        const std::vector<std::string> theirs = splitLines(r.out.toStdString());
        QCOMPARE(theirs.size(), lines.size());
        for (std::size_t i = 0; i < lines.size(); ++i)
            CPPL_VERIFY2(tokenizer->decode(ids[i]) == theirs[i], qPrintable(QStringLiteral("line %1: \"%2\" decodes to \"%3\", spm_decode \"%4\"")
                                                                            .arg(i + 1)
                                                                            .arg(QString::fromStdString(lines[i]),
                                                                                 QString::fromStdString(tokenizer->decode(ids[i])),
                                                                                 QString::fromStdString(theirs[i]))));
    }

    void wholeTextRoundTripIsLossless()
    {
        // identity normalizer + byte_fallback (Llama's setup) loses nothing: every byte comes back,
        // newlines, whitespace runs, unseen scripts and control characters included.
        requireShim();
        const auto tokenizer = loadModel(QStringLiteral("bpe"));
        // Except U+2581 itself: SentencePiece writes spaces as U+2581, so a literal one comes back as a space.
        QCOMPARE(tokenizer->decode(tokenizer->encode("a\xE2\x96\x81" "b")), std::string("a b"));
        std::string text = readFile(m_text);
        for (std::size_t at; (at = text.find("\xE2\x96\x81")) != std::string::npos;)
            text.erase(at, 3);
        const auto ids = tokenizer->encode(text);
        QVERIFY(ids.size() > 400000);
        const QString difference = byteDifference(tokenizer->decode(ids), text);
        CPPL_VERIFY2(difference.isEmpty(), qPrintable(difference));
    }

    void vocabularyAndTokenIds()
    {
        requireShim();
        const auto tokenizer = loadModel(QStringLiteral("bpe"));
        QCOMPARE(tokenizer->vocabSize(), std::int64_t{1000});
        QCOMPARE(tokenizer->tokenId("<unk>"), std::optional<std::uint32_t>(0));
        QCOMPARE(tokenizer->tokenId("<s>"), std::optional<std::uint32_t>(1));
        QCOMPARE(tokenizer->tokenId("</s>"), std::optional<std::uint32_t>(2));
        QCOMPARE(tokenizer->tokenId("<0x0A>"), std::optional<std::uint32_t>(3 + 0x0A)); // byte pieces follow the specials
        QCOMPARE(tokenizer->tokenId("no such piece"), std::nullopt);
        QCOMPARE(tokenizer->tokenId(""), std::nullopt);
        // Every piece maps back to its id.
        const auto &spm = dynamic_cast<const SentencePieceTokenizer &>(*tokenizer);
        QCOMPARE(spm.summary().pieces, std::int64_t{1000});
        QCOMPARE(spm.summary().bytePieces, std::int64_t{256});
        for (std::uint32_t id = 0; id < 1000; ++id)
            QCOMPARE(tokenizer->tokenId(spm.piece(id)), std::optional<std::uint32_t>(id));
        QCOMPARE(spm.piece(1000), std::string());
        // "▁the" is a piece of any English model this size; encode uses it for " the".
        const auto the = tokenizer->tokenId("\xE2\x96\x81the");
        QVERIFY(the.has_value());
        QCOMPARE(tokenizer->encode("the"), std::vector<std::uint32_t>{*the});
        QVERIFY(tokenizer->encode("").empty());
        QCOMPARE(tokenizer->droppedBytes(), std::int64_t{0});
    }

    void encodeAndDecodeRefuseBadInput()
    {
        requireShim();
        const auto tokenizer = loadModel(QStringLiteral("bpe"));
        try {
            (void)tokenizer->encode(std::string("caf\xE9 au lait"));
            QFAIL("invalid UTF-8 must be refused");
        } catch (const cppl::IoError &e) {
            CPPL_VERIFY2(QString::fromUtf8(e.what()).contains(QStringLiteral("invalid UTF-8 at byte offset 3;")), e.what());
        }
        try {
            (void)tokenizer->decode(std::vector<std::uint32_t>{5, 1000});
            QFAIL("an id past the vocabulary must be refused");
        } catch (const cppl::IoError &e) {
            CPPL_VERIFY2(QString::fromUtf8(e.what()).contains(QStringLiteral("id 1000 at position 1 is not in the vocabulary of")), e.what());
            CPPL_VERIFY2(QString::fromUtf8(e.what()).contains(QStringLiteral("(ids 0..999)")), e.what());
        }
        // Control pieces decode to nothing, as in SentencePiece.
        const auto hello = tokenizer->encode("Hello");
        std::vector<std::uint32_t> withSpecials = {1};
        withSpecials.insert(withSpecials.end(), hello.begin(), hello.end());
        withSpecials.push_back(2);
        QCOMPARE(tokenizer->decode(withSpecials), std::string("Hello"));
    }

    void bosDecisions_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<QByteArray>("config"); // tokenizer_config.json next to the model, empty: none
        QTest::addColumn<QString>("mode");
        QTest::addColumn<int>("expected"); // the BOS id added, -1: none, -2: refused
        QTest::addColumn<QString>("reason"); // part of the reason, or of the error
        QTest::addRow("auto, model with BOS, no tokenizer_config.json: adds <s>")
            << "bpe" << QByteArray() << "auto" << 1 << "--bos auto: the SentencePiece model defines BOS <s> = 1 and SentencePiece tokenizers (Llama's) add it by default (no tokenizer_config.json next to it)";
        QTest::addRow("auto, add_bos_token false") << "bpe" << QByteArray(R"({"add_bos_token": false})") << "auto" << -1
                                                   << "--bos auto: add_bos_token false in ";
        QTest::addRow("auto, add_bos_token true, bos_token object") << "unigram" << QByteArray(R"({"add_bos_token": true, "bos_token": {"content": "<s>"}})")
                                                                  << "auto" << 1 << "--bos auto: add_bos_token true in ";
        QTest::addRow("auto, config without add_bos_token") << "bpe" << QByteArray(R"({"model_max_length": 2048})") << "auto" << 1
                                                            << "tokenizer_config.json has no add_bos_token)";
        QTest::addRow("always, bos_token names another piece") << "bpe" << QByteArray(R"({"bos_token": "</s>"})") << "always" << 2
                                                               << "--bos always (bos_token of ";
        QTest::addRow("never") << "bpe" << QByteArray() << "never" << -1 << "--bos never";
        QTest::addRow("auto, model without BOS") << "char" << QByteArray() << "auto" << -1 << "--bos auto: the SentencePiece model has no BOS (bos_id -1)";
        QTest::addRow("always, model without BOS: refused") << "char" << QByteArray() << "always" << -2
                                                            << "--bos always, but the tokenizer names no BOS token (the SentencePiece model has bos_id -1 and no tokenizer_config.json is next to it)";
        QTest::addRow("auto, add_bos_token true, model without BOS: refused")
            << "char" << QByteArray(R"({"add_bos_token": true})") << "auto" << -2 << "--bos auto adds BOS (add_bos_token true in ";
        QTest::addRow("always, model without BOS, bos_token </s>") << "char" << QByteArray(R"({"bos_token": "</s>"})") << "always" << 2
                                                                   << "--bos always (bos_token of ";
    }
    void bosDecisions()
    {
        requireShim();
        QFETCH(QString, model);
        QFETCH(QByteArray, config);
        QFETCH(QString, mode);
        QFETCH(int, expected);
        QFETCH(QString, reason);
        // A model directory the way checkpoints ship it: tokenizer.model (+ tokenizer_config.json).
        QTemporaryDir dir;
        QVERIFY(QFile::copy(models().at(model).path, dir.filePath(QStringLiteral("tokenizer.model"))));
        if (!config.isEmpty())
            writeFile(dir.filePath(QStringLiteral("tokenizer_config.json")), config.toStdString());
        const auto tokenizer = Tokenizer::load(dir.path().toStdString());
        QCOMPARE(QString::fromStdString(tokenizer->path()), dir.filePath(QStringLiteral("tokenizer.model")));
        try {
            const BosDecision d = tokenizer->bosDecision(*parseBosMode(mode.toStdString()));
            CPPL_VERIFY2(expected != -2, ("expected a refusal, got: " + d.reason).c_str());
            QCOMPARE(d.add, expected >= 0);
            if (d.add) {
                QCOMPARE(d.id, static_cast<std::uint32_t>(expected));
                QCOMPARE(d.token, expected == 1 ? std::string("<s>") : std::string("</s>"));
            }
            CPPL_VERIFY2(QString::fromStdString(d.reason).contains(reason), d.reason.c_str());
        } catch (const cppl::ConfigError &e) {
            CPPL_VERIFY2(expected == -2, e.what());
            CPPL_VERIFY2(QString::fromUtf8(e.what()).contains(reason), e.what());
        }
    }

    void directoryPrefersTokenizerJson()
    {
        requireShim();
        if (!QFile::exists(kGpt2Json))
            CPPL_SKIP_MISSING("../shared/data/tokenizers/gpt2 is not present");
        QTemporaryDir dir;
        QVERIFY(QFile::copy(models().at(QStringLiteral("bpe")).path, dir.filePath(QStringLiteral("tokenizer.model"))));
        QVERIFY(QFile::copy(kGpt2Json, dir.filePath(QStringLiteral("tokenizer.json"))));
        CPPL_VERIFY2(Tokenizer::load(dir.path().toStdString())->description().starts_with("Hugging Face tokenizer.json"), "tokenizer.json first");
        QFile::remove(dir.filePath(QStringLiteral("tokenizer.json")));
        CPPL_VERIFY2(Tokenizer::load(dir.path().toStdString())->description().starts_with("SentencePiece BPE"), "then tokenizer.model");
    }

    void badModelFiles_data()
    {
        QTest::addColumn<QByteArray>("content"); // <missing>, <truncated>: made in the test
        QTest::addColumn<QString>("message");
        const QString notModel = QStringLiteral("not a SentencePiece model: ");
        QTest::addRow("missing file") << QByteArray("<missing>") << "no such file or directory; --tokenizer takes a tokenizer.json, a SentencePiece tokenizer.model";
        QTest::addRow("empty file") << QByteArray() << notModel + "the file is empty (a tokenizer.model is the binary protobuf spm_train writes";
        QTest::addRow("text") << QByteArray("not a protobuf\n") << notModel + "the protobuf is malformed at byte 0: wire type 6 of field 13 is not used by SentencePiece models";
        QTest::addRow("a tokenizer.json under the wrong name") << QByteArray("\n {\"model\": {}}") << notModel + "the file is JSON text";
        QTest::addRow("Git LFS pointer") << QByteArray("version https://git-lfs.github.com/spec/v1\noid sha256:0\nsize 499723\n")
                                         << "not a SentencePiece model but a Git LFS pointer; fetch the real file (git lfs pull)";
        QTest::addRow("truncated model (last byte missing)") << QByteArray("<truncated>") << " bytes runs past the end of the file";
        QTest::addRow("protobuf without pieces") << QByteArray("\x1a\x02\x0a\x00", 4) << notModel + "it holds no pieces (vocabulary)";
        QTest::addRow("piece without text") << QByteArray("\x0a\x02\x18\x01", 4) << notModel + "the protobuf is malformed at byte 0: piece 0 has no text";
        QTest::addRow("overlong varint") << QByteArray(12, '\xff') << notModel + "the protobuf is malformed at byte 0: overlong field tag";
        // Passes the agent's format check; SentencePiece itself refuses it (with or without the shim
        // the message names the file and what to do).
        QTest::addRow("pieces but no <unk>") << QByteArray("\x0a\x05\x0a\x01" "a" "\x18\x01", 7)
                                             << (kBuiltWithShim ? QStringLiteral("SentencePiece refuses the model: Internal: unk is not defined")
                                                                : QStringLiteral("this agent was built without SentencePiece support; install "
                                                                                 "libsentencepiece-dev and rebuild, or use a tokenizer.json"));
    }
    void badModelFiles()
    {
        QFETCH(QByteArray, content);
        QFETCH(QString, message);
        QTemporaryDir dir;
        QString path = dir.filePath(QStringLiteral("tokenizer.model"));
        if (content == "<missing>") {
            path = dir.filePath(QStringLiteral("nothing/tokenizer.model"));
        } else if (content == "<truncated>") {
            requireShim();
            const std::string real = readFile(models().at(QStringLiteral("bpe")).path);
            writeFile(path, real.substr(0, real.size() - 1));
        } else {
            writeFile(path, content.toStdString());
        }
        cppl::test::verifyLoadRefused(path, message);
    }

    void randomAndMutatedFilesNeverCrash()
    {
        // Random bytes, and real models with bytes overwritten: each either loads or throws cppl::Error.
        requireShim();
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("fuzz.model"));
        const std::string real = readFile(models().at(QStringLiteral("unigram")).path);
        QRandomGenerator random(20240611);
        int randomRefused = 0;
        int mutatedLoaded = 0;
        int mutatedRefused = 0;
        for (int round = 0; round < 300; ++round) {
            std::string bytes;
            const bool mutated = round % 2 == 1;
            if (!mutated) {
                bytes.resize(random.bounded(1, 4096));
                for (auto &b : bytes)
                    b = static_cast<char>(random.bounded(256));
            } else {
                bytes = real;
                for (int k = 0; k < 1 + round % 8; ++k)
                    bytes[random.bounded(static_cast<quint32>(bytes.size()))] = static_cast<char>(random.bounded(256));
            }
            writeFile(path, bytes);
            bool loaded = false;
            try {
                const auto tokenizer = Tokenizer::load(path.toStdString());
                (void)tokenizer->decode(tokenizer->encode("To be, or not to be: that is the question."));
                loaded = true;
            } catch (const cppl::Error &) {
            }
            if (mutated)
                ++(loaded ? mutatedLoaded : mutatedRefused);
            else if (!loaded)
                ++randomRefused;
        }
        qInfo("150 files of random bytes: %d refused; 150 mutated models: %d loaded, %d refused", randomRefused, mutatedLoaded, mutatedRefused);
        QCOMPARE(randomRefused, 150);
    }

    void tokenizeCommandWritesTheLibraryIds_data()
    {
        QTest::addColumn<QString>("bos");
        QTest::addColumn<bool>("bosExpected");
        QTest::addRow("--bos auto: <s> first") << "auto" << true;
        QTest::addRow("--bos never") << "never" << false;
    }
    void tokenizeCommandWritesTheLibraryIds()
    {
        // clusterppl-agent links LibTorch (and its libprotobuf 3.21): the shim must work there.
        requireShim();
        QFETCH(QString, bos);
        QFETCH(bool, bosExpected);
        QTemporaryDir dir;
        const QString out = dir.filePath(QStringLiteral("text.u32"));
        const QString model = models().at(QStringLiteral("bpe")).path;
        const Run r = run(cppl::test::kAgent, {QStringLiteral("tokenize"), QStringLiteral("--tokenizer"), model, QStringLiteral("--text"),
                                                           m_text, QStringLiteral("--out"), out, QStringLiteral("--bos"), bos});
        CPPL_VERIFY2(r.exitCode == kExitOk, qPrintable(QStringLiteral("exit %1: %2").arg(r.exitCode).arg(r.err)));
        const QString stdoutText = QString::fromUtf8(r.out);
        CPPL_VERIFY2(stdoutText.contains(QStringLiteral("(SentencePiece BPE, 1000 ids, byte_fallback")), qPrintable(stdoutText));
        CPPL_VERIFY2(stdoutText.contains(bosExpected ? QStringLiteral("bos        adds <s> = 1 (--bos auto: the SentencePiece model defines BOS")
                                                 : QStringLiteral("bos        none (--bos never)")),
                 qPrintable(stdoutText));
        const auto tokenizer = Tokenizer::load(model.toStdString());
        std::vector<std::uint32_t> expected;
        if (bosExpected)
            expected.push_back(1);
        tokenizer->encode(readFile(m_text), expected);
        const auto written = readU32(out);
        QCOMPARE(written.size(), expected.size());
        QVERIFY(written == expected);
        CPPL_VERIFY2(stdoutText.contains(QStringLiteral("ids        %1 -> ").arg(expected.size())), qPrintable(stdoutText));
        qInfo("clusterppl-agent tokenize: %zu ids, as the library encodes them", expected.size());
    }

    void tokenizeCommandWithoutAShim_data()
    {
        QTest::addColumn<QString>("shim"); // CLUSTERPPL_SPM_SHIM, or <copied agent>: the agent alone in a directory
        QTest::addColumn<QString>("message");
        QTest::addRow("CLUSTERPPL_SPM_SHIM names no file")
            << "/nonexistent/libclusterppl_spm.so" << "CLUSTERPPL_SPM_SHIM=/nonexistent/libclusterppl_spm.so does not exist; point it at libclusterppl_spm.so or unset it";
        QTest::addRow("CLUSTERPPL_SPM_SHIM is not a library") << "<text file>" << "cannot load the SentencePiece shim ";
        QTest::addRow("CLUSTERPPL_SPM_SHIM is another library") << "<libpcre2>" << "is not the ClusterPPL SentencePiece shim (it does not export cppl_spm_abi_version, ";
        QTest::addRow("agent installed without its shim") << "<copied agent>" << "the SentencePiece shim libclusterppl_spm.so was not found (looked in ";
    }
    void tokenizeCommandWithoutAShim()
    {
        requireShim();
        QFETCH(QString, shim);
        QFETCH(QString, message);
        QTemporaryDir dir;
        QString agent = cppl::test::kAgent;
        auto env = QProcessEnvironment::systemEnvironment();
        env.remove(QStringLiteral("CLUSTERPPL_SPM_SHIM"));
        if (shim == QStringLiteral("<copied agent>")) {
            agent = dir.filePath(QStringLiteral("clusterppl-agent"));
            QVERIFY(QFile::copy(cppl::test::kAgent, agent));
        } else if (shim == QStringLiteral("<text file>")) {
            writeFile(shim = dir.filePath(QStringLiteral("libclusterppl_spm.so")), "not ELF");
        } else if (shim == QStringLiteral("<libpcre2>")) {
            // A real shared library the agent also loads, found where this process mapped it.
            for (const auto &line : QString::fromStdString(readFile(QStringLiteral("/proc/self/maps"))).split(QLatin1Char('\n')))
                if (line.contains(QStringLiteral("libpcre2-8.so")))
                    shim = line.mid(line.indexOf(QLatin1Char('/')));
            CPPL_VERIFY2(shim.startsWith(QLatin1Char('/')), "libpcre2-8 is not mapped into this process");
        }
        if (!shim.startsWith(QLatin1Char('<')))
            env.insert(QStringLiteral("CLUSTERPPL_SPM_SHIM"), shim);
        const QString model = models().at(QStringLiteral("bpe")).path;
        const Run r = run(agent, {QStringLiteral("tokenize"), QStringLiteral("--tokenizer"), model, QStringLiteral("--text"), m_text,
                                  QStringLiteral("--out"), dir.filePath(QStringLiteral("out.u32"))},
                          {}, env);
        QCOMPARE(r.exitCode, int(kExitBadModel));
        CPPL_VERIFY2(r.err.contains(QStringLiteral("clusterppl-agent: ") + model + QStringLiteral(": ")), qPrintable(r.err));
        CPPL_VERIFY2(r.err.contains(message), qPrintable(r.err));
    }
};

QTEST_GUILESS_MAIN(TestSentencePiece)
#include "tst_sentencepiece.moc"
