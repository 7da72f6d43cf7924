// SPDX-License-Identifier: MIT
// The tokenizer library on small hand-made tokenizer.json files (ids derived by hand in the rows),
// round trips, BOS decisions and every bad input's message.
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode_nfc.h"
#include "tokenizer_fixtures.h"
#include "tokenizer_refusal.h"

#include "cppl/errors.h"

#include "test_skip.h"

#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>
#include <fstream>

using namespace cppl::agent;

namespace {

const QString kGpt2Dir = QStringLiteral(CPPL_SOURCE_DIR "/../shared/data/tokenizers/gpt2");

std::string writeFile(const QString &path, const std::string &content)
{
    std::ofstream(path.toStdString(), std::ios::binary) << content;
    return path.toStdString();
}

/// Writes @p json as DIR/NAME/tokenizer.json (plus tokenizer_config.json when given); returns the directory.
std::string writeFixture(const QTemporaryDir &dir, const QString &name, const nlohmann::json &json, const nlohmann::json &config = nullptr)
{
    const QString sub = dir.filePath(name);
    QDir().mkpath(sub);
    writeFile(sub + QStringLiteral("/tokenizer.json"), json.dump(1));
    if (!config.is_null())
        writeFile(sub + QStringLiteral("/tokenizer_config.json"), config.dump());
    return sub.toStdString();
}

nlohmann::json fixtureByName(const QString &name)
{
    return fixtures::byName(name.toStdString());
}

QList<int> toList(const std::vector<std::uint32_t> &ids)
{
    QList<int> out;
    for (const auto id : ids)
        out.append(static_cast<int>(id));
    return out;
}

nlohmann::json with(nlohmann::json j, const char *key, nlohmann::json value)
{
    j[key] = std::move(value);
    return j;
}

template<std::size_t N>
QByteArray raw(const char (&s)[N]) // keeps embedded NULs
{
    return QByteArray(s, static_cast<qsizetype>(N - 1));
}

bool haveGpt2() { return QFile::exists(kGpt2Dir + QStringLiteral("/tokenizer.json")); }

} // namespace

class TestTokenizer : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void encodesFixtures_data()
    {
        QTest::addColumn<QString>("fixture");
        QTest::addColumn<QByteArray>("text");
        QTest::addColumn<QList<int>>("expected");
        for (const auto &row : fixtures::encodeRows()) // hand-derived ids; the derivations are in tokenizer_fixtures.h
            QTest::addRow("%s", row.name) << QString::fromUtf8(row.fixture) << QByteArray::fromStdString(row.text)
                                          << QList<int>(row.expected.begin(), row.expected.end());
    }
    void encodesFixtures()
    {
        QFETCH(QString, fixture);
        QFETCH(QByteArray, text);
        QFETCH(QList<int>, expected);
        QTemporaryDir dir;
        const auto tokenizer = Tokenizer::load(writeFixture(dir, QStringLiteral("t"), fixtureByName(fixture)));
        const auto ids = tokenizer->encode(std::string_view(text.constData(), static_cast<std::size_t>(text.size())));
        QCOMPARE(toList(ids), expected);
        // A second encode is served from the word cache and must not differ.
        QCOMPARE(toList(tokenizer->encode(std::string_view(text.constData(), static_cast<std::size_t>(text.size())))), expected);
    }

    void decodesFixtures_data()
    {
        QTest::addColumn<QString>("fixture");
        QTest::addColumn<QList<int>>("ids");
        QTest::addColumn<QByteArray>("text");
        QTest::addRow("byte-level") << "llama3" << QList<int>{0, 17, 3, 15, 16, 19, 20, 12} << QByteArray("I'M 12345 ok\n\nX");
        QTest::addRow("SentencePiece legacy: Replace, Fuse, Strip one space") << "spm legacy" << QList<int>{271, 276} << QByteArray("hello world");
        QTest::addRow("SentencePiece Metaspace decoder") << "spm metaspace" << QList<int>{271, 276} << QByteArray("hello world");
        QTest::addRow("byte fallback back to bytes") << "spm legacy" << QList<int>{267, 108, 229, 133, 175} << QByteArray("hi\xE2\x82\xAC");
        QTest::addRow("a lone continuation byte stays a byte") << "spm legacy" << QList<int>{267, 3 + 0x82} << QByteArray("h\x82");
        QTest::addRow("added tokens decode to their text") << "added" << QList<int>{0, 6, 1, 5} << QByteArray("a<mask>b<|eot|>");
    }
    void decodesFixtures()
    {
        QFETCH(QString, fixture);
        QFETCH(QList<int>, ids);
        QFETCH(QByteArray, text);
        QTemporaryDir dir;
        const auto tokenizer = Tokenizer::load(writeFixture(dir, QStringLiteral("t"), fixtureByName(fixture)));
        std::vector<std::uint32_t> v(ids.begin(), ids.end());
        QCOMPARE(QByteArray::fromStdString(tokenizer->decode(v)), text);
    }

    void gpt2RoundTrip_data()
    {
        QTest::addColumn<QByteArray>("text");
        QTest::addRow("emoji, skin tone, ZWJ family, flag") << QByteArray("hi \xF0\x9F\x91\x8B\xF0\x9F\x8F\xBD family \xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7 \xF0\x9F\x87\xA9\xF0\x9F\x87\xAA!");
        QTest::addRow("CJK and Hangul") << QByteArray("\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E\xE3\x81\xAE\xE6\x96\x87\xE3\x80\x81\xE4\xB8\xAD\xE6\x96\x87\xEF\xBC\x8C\xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4");
        QTest::addRow("combining marks") << QByteArray("e\xCC\x81 vs \xC3\xA9, a\xCC\x88\xCC\xA3, Z\xCC\xA4\xCD\x94\xCD\xA7\xCC\x91");
        QTest::addRow("control characters, NUL, NEL, LS, BOM")
            << raw("a\0b\x01\t\r\n\x1B[0m\x7F \xC2\x85 \xE2\x80\xA8 \xEF\xBB\xBFz");
        QTest::addRow("invalid-looking sequences as text")
            << QByteArray("\\xff\\xfe <0xFF> \xEF\xBF\xBD \xEF\xBF\xBE <|endoftext|> <|endoftext| <|endoftext|><|endoftext|>");
        QTest::addRow("whitespace runs, NBSP, ideographic space")
            << QByteArray("a  \t\n\n  b   \xC2\xA0\xE3\x80\x80 c   \n");
        QTest::addRow("contractions, digits, fractions") << QByteArray("'s'S'll'LL 123456789 \xC2\xBD \xE2\x85\xB7 x'");
        QTest::addRow("4-byte letters and noncharacters") << QByteArray("\xF0\x90\x8C\xB0\xF0\x90\x8C\xB1 \xF4\x8F\xBF\xBF \xEF\xBF\xBF");
    }
    void gpt2RoundTrip()
    {
        if (!haveGpt2())
            CPPL_SKIP_MISSING("../shared/data/tokenizers/gpt2 is not present");
        QFETCH(QByteArray, text);
        const auto tokenizer = Tokenizer::load(kGpt2Dir.toStdString());
        const std::string_view view(text.constData(), static_cast<std::size_t>(text.size()));
        const auto ids = tokenizer->encode(view);
        QVERIFY(!ids.empty());
        QCOMPARE(QByteArray::fromStdString(tokenizer->decode(ids)), text);
        if (text.contains("<|endoftext|>"))
            QVERIFY(std::count(ids.begin(), ids.end(), 50256u) == text.count("<|endoftext|>"));
    }

    void bosDecisions_data()
    {
        QTest::addColumn<QString>("setup");
        QTest::addColumn<QString>("mode");
        QTest::addColumn<bool>("add");
        QTest::addColumn<int>("id");
        QTest::addColumn<QString>("reason");
        QTest::addRow("GPT-2 auto: the ByteLevel post-processor adds nothing") << "gpt2 shared" << "auto" << false << 0 << "post_processor ByteLevel adds no special tokens";
        QTest::addRow("GPT-2 always: bos_token from tokenizer_config.json") << "gpt2 shared" << "always" << true << 50256 << "tokenizer_config.json bos_token";
        QTest::addRow("GPT-2 never") << "gpt2 shared" << "never" << false << 0 << "--bos never";
        QTest::addRow("template puts <s> before the text") << "spm" << "auto" << true << 1 << "TemplateProcessing puts <s> before the text";
        QTest::addRow("add_bos_token false overrides the template") << "spm + add_bos_token false" << "auto" << false << 0 << "add_bos_token = false";
        QTest::addRow("add_bos_token true without a template") << "gpt2 fixture + config" << "auto" << true << 1 << "add_bos_token = true";
    }
    void bosDecisions()
    {
        QFETCH(QString, setup);
        QFETCH(QString, mode);
        QFETCH(bool, add);
        QFETCH(int, id);
        QFETCH(QString, reason);
        QTemporaryDir dir;
        std::string path;
        if (setup == QStringLiteral("gpt2 shared")) {
            if (!haveGpt2())
                CPPL_SKIP_MISSING("../shared/data/tokenizers/gpt2 is not present");
            path = kGpt2Dir.toStdString();
        } else if (setup == QStringLiteral("spm")) {
            path = writeFixture(dir, QStringLiteral("t"), fixtures::sentencePieceStyle(true));
        } else if (setup == QStringLiteral("spm + add_bos_token false")) {
            path = writeFixture(dir, QStringLiteral("t"), fixtures::sentencePieceStyle(true), {{"add_bos_token", false}});
        } else {
            path = writeFixture(dir, QStringLiteral("t"), fixtures::gpt2Style(), {{"add_bos_token", true}, {"bos_token", {{"content", "'"}}}});
        }
        const auto tokenizer = Tokenizer::load(path);
        const BosDecision d = tokenizer->bosDecision(*parseBosMode(mode.toStdString()));
        QCOMPARE(d.add, add);
        if (add)
            QCOMPARE(static_cast<int>(d.id), id);
        QVERIFY2(QString::fromStdString(d.reason).contains(reason), d.reason.c_str());
    }

    void bosWithoutToken()
    {
        QTemporaryDir dir;
        const auto tokenizer = Tokenizer::load(writeFixture(dir, QStringLiteral("t"), fixtures::gpt2Style()));
        QVERIFY(!tokenizer->bosDecision(BosMode::Auto).add);
        try {
            (void)tokenizer->bosDecision(BosMode::Always);
            QFAIL("--bos always without a BOS token must be refused");
        } catch (const cppl::ConfigError &e) {
            QVERIFY2(QString::fromUtf8(e.what()).contains(QStringLiteral("--bos always, but the tokenizer names no BOS token")), e.what());
        }
        QVERIFY(!parseBosMode("sometimes"));
    }

    void notesTruncationOnce()
    {
        QTemporaryDir dir;
        auto json = fixtures::gpt2Style();
        json["truncation"] = {{"direction", "Right"}, {"max_length", 3}, {"strategy", "LongestFirst"}, {"stride", 0}};
        json["padding"] = {{"strategy", "BatchLongest"}};
        const auto tokenizer = Tokenizer::load(writeFixture(dir, QStringLiteral("t"), json));
        QCOMPARE(tokenizer->notes().size(), std::size_t{2});
        QVERIFY(tokenizer->notes()[0].find("\"truncation\" block (max_length 3) is ignored") != std::string::npos);
        // Nothing is truncated: 11 ids from a text that max_length 3 would cut.
        QCOMPARE(tokenizer->encode("I'M 12345 ok\n\nX").size(), std::size_t{11});
    }

    void addedIdsAsHuggingFaceAssigns()
    {
        QTemporaryDir dir;
        const auto tokenizer = Tokenizer::load(writeFixture(dir, QStringLiteral("t"), fixtures::addedTokens(10)));
        QCOMPARE(tokenizer->vocabSize(), std::int64_t{9});
        QCOMPARE(tokenizer->tokenId("<keep>"), std::optional<std::uint32_t>(8));
        QCOMPARE(tokenizer->notes().size(), std::size_t{1});
        QVERIFY2(tokenizer->notes()[0].find("4 added token(s) get other ids than the file says, as Hugging Face assigns them "
                                            "(added_tokens[0] \"<|eot|>\" has id 10 in the file but gets 5)")
                     != std::string::npos,
                 tokenizer->notes()[0].c_str());
    }

    void badTokenizerFiles_data()
    {
        QTest::addColumn<QByteArray>("content");
        QTest::addColumn<QString>("message");
        auto withModel = [](nlohmann::json model) { return QByteArray::fromStdString(fixtures::tokenizerJson(model, nullptr, nullptr, nullptr).dump()); };
        auto withPre = [](nlohmann::json pre) {
            return QByteArray::fromStdString(fixtures::tokenizerJson(fixtures::bpe({"a"}, {}), nullptr, pre, nullptr).dump());
        };
        QTest::addRow("missing file") << QByteArray("<missing>") << "no such file or directory; --tokenizer takes a tokenizer.json";
        QTest::addRow("directory without tokenizer.json") << QByteArray("<directory>") << "the directory has no tokenizer.json";
        QTest::addRow("SentencePiece .model that is not one") << QByteArray("<spm>") << "not a SentencePiece model: the protobuf is malformed at byte 0";
        QTest::addRow("not JSON") << QByteArray("{\"model\": {\"type\": ") << "not valid JSON";
        QTest::addRow("JSON but not an object") << QByteArray("[1, 2]") << "expected a JSON object at the top level";
        QTest::addRow("no model") << QByteArray("{\"version\": \"1.0\"}") << "(top level): missing \"model\"";
        QTest::addRow("WordPiece model") << withModel({{"type", "WordPiece"}, {"vocab", {{"a", 0}}}, {"unk_token", "[UNK]"}})
                                         << "model.type: model \"WordPiece\" is not supported (supported: BPE";
        QTest::addRow("Unigram model") << withModel({{"type", "Unigram"}, {"vocab", {{"a", -1.0}}}})
                                       << "model.type: model \"Unigram\" is not supported (supported: BPE";
        QTest::addRow("merge with a token that is not in the vocab") << withModel(fixtures::bpe({"a", "b", "ab"}, {"a b", "a zz"}))
                                                                     << "model.merges[1]: \"a zz\": token \"zz\" is not in model.vocab; the vocab and merges disagree";
        QTest::addRow("merge whose result is not in the vocab") << withModel(fixtures::bpe({"a", "b"}, {"a b"}))
                                                                << "model.merges[0]: \"a b\": the merged token \"ab\" is not in model.vocab";
        QTest::addRow("merge that is not two tokens") << withModel(fixtures::bpe({"a", "b"}, {"a b c"}))
                                                      << "model.merges[0]: \"a b c\" is not two tokens separated by one space";
        QTest::addRow("negative id") << withModel(with(fixtures::bpe({"a"}, {}), "vocab", {{"a", -3}}))
                                     << "model.vocab[\"a\"]: expected an id between 0 and";
        QTest::addRow("ids far sparser than the vocabulary") << withModel(with(fixtures::bpe({"a"}, {}), "vocab", {{"a", 200000000}}))
                                                            << "model.vocab: ids reach 200000000 but only 1 tokens are listed";
        QTest::addRow("BPE dropout") << withModel(with(fixtures::bpe({"a"}, {}), "dropout", 0.1))
                                     << "model.dropout: BPE dropout 0.1 makes tokenization random";
        QTest::addRow("regex that PCRE2 rejects")
            << withPre({{"type", "Sequence"},
                        {"pretokenizers", {{{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}, {"invert", false}}}}})
            << "pre_tokenizer.pretokenizers[0].pattern.Regex: PCRE2 rejects the regex at offset 9: missing closing parenthesis";
        QTest::addRow("unknown split behaviour")
            << withPre({{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "Glued"}, {"invert", false}})
            << "pre_tokenizer.behavior: \"Glued\" is unknown (expected Removed, Isolated";
        QTest::addRow("unsupported pre-tokenizer") << withPre({{"type", "Whitespace"}})
                                                   << "pre_tokenizer.type: pre-tokenizer \"Whitespace\" is not supported (supported: ByteLevel, Split, Metaspace, Digits, Sequence";
        QTest::addRow("unsupported normalizer")
            << QByteArray::fromStdString(fixtures::tokenizerJson(fixtures::bpe({"a"}, {}), {{"type", "NFKC"}}, nullptr, nullptr).dump())
            << "normalizer.type: normalizer \"NFKC\" is not supported (supported: Prepend, Replace, NFC, Sequence";
        QTest::addRow("Metaspace replacement of two characters")
            << withPre({{"type", "Metaspace"}, {"replacement", "__"}, {"prepend_scheme", "always"}, {"split", true}})
            << "pre_tokenizer.replacement: expected exactly one character, found \"__\"";
    }
    void badTokenizerFiles()
    {
        QFETCH(QByteArray, content);
        QFETCH(QString, message);
        QTemporaryDir dir;
        QString path = dir.filePath(QStringLiteral("tokenizer.json"));
        if (content == "<missing>")
            path = dir.filePath(QStringLiteral("nothing/tokenizer.json"));
        else if (content == "<directory>")
            path = dir.path();
        else if (content == "<spm>")
            writeFile(path = dir.filePath(QStringLiteral("tokenizer.model")), "not a protobuf");
        else
            writeFile(path, content.toStdString());
        cppl::test::verifyLoadRefused(path, message);
    }

    void invalidUtf8NamesTheOffset_data()
    {
        QTest::addColumn<QByteArray>("text");
        QTest::addColumn<int>("offset");
        QTest::addRow("stray continuation byte") << QByteArray("abc\x80z") << 3;
        QTest::addRow("overlong slash") << QByteArray("ab\xC0\xAF") << 2;
        QTest::addRow("UTF-16 surrogate") << QByteArray("x\xED\xA0\x80") << 1;
        QTest::addRow("above U+10FFFF") << QByteArray("\xF4\x90\x80\x80") << 0;
        QTest::addRow("truncated at the end") << QByteArray("hello \xE2\x82") << 6;
        QTest::addRow("Latin-1 after 9 ASCII bytes") << QByteArray("123456789\xE9t\xE9") << 9;
    }
    void invalidUtf8NamesTheOffset()
    {
        QFETCH(QByteArray, text);
        QFETCH(int, offset);
        const std::string_view view(text.constData(), static_cast<std::size_t>(text.size()));
        QCOMPARE(findInvalidUtf8(view), std::optional<std::size_t>(static_cast<std::size_t>(offset)));
        QTemporaryDir dir;
        const auto tokenizer = Tokenizer::load(writeFixture(dir, QStringLiteral("t"), fixtures::gpt2Style()));
        try {
            (void)tokenizer->encode(view);
            QFAIL("invalid UTF-8 must be refused");
        } catch (const cppl::IoError &e) {
            QVERIFY2(QString::fromUtf8(e.what()).contains(QStringLiteral("invalid UTF-8 at byte offset %1;").arg(offset)), e.what());
        }
    }

    void droppedBytesAreCounted()
    {
        QTemporaryDir dir;
        const auto tokenizer = Tokenizer::load(writeFixture(dir, QStringLiteral("t"), fixtures::gpt2Style()));
        QCOMPARE(tokenizer->encode("Iz zz"), (std::vector<std::uint32_t>{0, 3})); // I, Ġ; z has no token
        QCOMPARE(tokenizer->droppedBytes(), std::int64_t{3});
    }

    // Qwen3's NFC normalizer (unicode_nfc.h): the expected bytes are Python's unicodedata.normalize("NFC").
    void unicodeNfc_data()
    {
        QTest::addColumn<QByteArray>("text");
        QTest::addColumn<QByteArray>("nfc");
        QTest::addRow("decomposed acute") << QByteArray("e\xcc\x81 cafe\xcc\x81") << QByteArray("\xc3\xa9 caf\xc3\xa9");
        QTest::addRow("two marks, reordered") << QByteArray("a\xcc\x88\xcc\xa3") << QByteArray("\xe1\xba\xa1\xcc\x88");
        QTest::addRow("Hangul L V T, LV + T") << QByteArray("\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8 \xea\xb0\x80\xe1\x86\xa8")
                                              << QByteArray("\xea\xb0\x81 \xea\xb0\x81");
        QTest::addRow("singletons") << QByteArray("\xe2\x84\xab \xe2\x84\xa6") << QByteArray("\xc3\x85 \xce\xa9");
        QTest::addRow("composition exclusion") << QByteArray("\xe0\xa5\x98") << QByteArray("\xe0\xa4\x95\xe0\xa4\xbc");
        QTest::addRow("blocked, reordered") << QByteArray("A\xcc\x8a\xcc\xa7 q\xcc\x87\xcc\xa3") << QByteArray("\xc3\x85\xcc\xa7 q\xcc\xa3\xcc\x87");
        QTest::addRow("already NFC") << QByteArray("\xe1\xba\x9b\xcc\xa3 \xe6\x97\xa5 plain") << QByteArray("\xe1\xba\x9b\xcc\xa3 \xe6\x97\xa5 plain");
        QTest::addRow("invalid bytes kept, composing nothing") << QByteArray("e\xff\xcc\x81 \xc3") << QByteArray("e\xff\xcc\x81 \xc3");
    }
    void unicodeNfc()
    {
        QFETCH(QByteArray, text);
        QFETCH(QByteArray, nfc);
        QCOMPARE(QByteArray::fromStdString(cppl::agent::unicodeNfc(text.toStdString())), nfc);
    }

    void decodeRefusesUnknownIds()
    {
        QTemporaryDir dir;
        const auto tokenizer = Tokenizer::load(writeFixture(dir, QStringLiteral("t"), fixtures::addedTokens()));
        QCOMPARE(tokenizer->vocabSize(), std::int64_t{9}); // model ids 0..4, added 5..8
        const std::vector<std::uint32_t> ids{0, 9};
        try {
            (void)tokenizer->decode(ids);
            QFAIL("id 9 is not in the vocabulary");
        } catch (const cppl::IoError &e) {
            QVERIFY2(QString::fromUtf8(e.what()).contains(QStringLiteral("id 9 at position 1 is not in the vocabulary")), e.what());
        }
    }
};

QTEST_GUILESS_MAIN(TestTokenizer)
#include "tst_tokenizer.moc"
