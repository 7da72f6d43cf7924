// SPDX-License-Identifier: MIT
// Text datasets: document splitting (WikiText headings, JSONL, directories), UTF-8 checking and
// replacement with Python's semantics, per-document byte and word counts.
#include "data/text_dataset.h"

#include "cppl/errors.h"

#include "test_skip.h"

#include <QTemporaryDir>
#include <QTest>

#include <fstream>
#include <functional>

using namespace cppl;
using namespace cppl::agent;

namespace {

std::string write(const QTemporaryDir &dir, const char *name, const std::string &bytes)
{
    const std::string path = dir.filePath(QString::fromLatin1(name)).toStdString();
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
}

QString ioError(const std::function<void()> &f)
{
    try {
        f();
    } catch (const IoError &e) {
        return QString::fromUtf8(e.what());
    }
    return QStringLiteral("(no IoError)");
}

} // namespace

class TestTextDataset : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void wikiTextSplitsAtTopLevelHeadings()
    {
        const auto docs = splitWikiText(" \n = A = \n text\n = = Sub = = \n more\n = B = \n end\n");
        QCOMPARE(docs.size(), std::size_t{2});
        QCOMPARE(docs[0], std::string(" = A = \n text\n = = Sub = = \n more\n"));
        QCOMPARE(docs[1], std::string(" = B = \n end\n"));
    }

    void wikiTextTestSplitHas62Articles()
    {
        const std::string path = CPPL_SOURCE_DIR "/../shared/data/wikitext-2-raw/wiki.test.raw";
        if (!std::ifstream(path))
            CPPL_SKIP_MISSING("../shared/data is not beside the checkout (CI and developer machines have it)");
        const TextDataset ds = loadTextDataset(path, DatasetFormat::WikiText);
        QCOMPARE(ds.documents.size(), std::size_t{62}); // lines matching ^ = [^=].* = $ in the file
        QVERIFY(ds.documents.front().text.starts_with(" = Robert Boulter = \n"));
        std::int64_t bytes = 0;
        for (const auto &d : ds.documents)
            bytes += d.bytes;
        QCOMPARE(bytes, std::int64_t{1296370 - 2}); // all but the leading " \n"
    }

    void jsonlDocuments()
    {
        QTemporaryDir dir;
        const std::string path = write(dir, "d.jsonl", "{\"text\": \"one two\", \"id\": 1}\n\n{\"text\": \" three \"}\n");
        const TextDataset ds = loadTextDataset(path, DatasetFormat::Jsonl);
        QCOMPARE(ds.documents.size(), std::size_t{2});
        QCOMPARE(ds.documents[1].text, std::string(" three "));
        QCOMPARE(ds.documents[1].words, std::int64_t{3}); // re.split: ['', 'three', '']
        QCOMPARE(ds.documents[1].source, path + ":3");
        const std::string other = write(dir, "e.jsonl", "{\"body\": \"x\"}\n");
        QCOMPARE(loadTextDataset(other, DatasetFormat::Jsonl, "body").documents.size(), std::size_t{1});
    }

    void badInputs_data()
    {
        QTest::addColumn<int>("format");
        QTest::addColumn<QByteArray>("bytes");
        QTest::addColumn<QString>("message");
        QTest::addRow("invalid UTF-8") << int(DatasetFormat::Plain) << QByteArray("caf\xc3\xa9 \xff!") << "invalid UTF-8 at byte offset 6 (byte 0xff)";
        QTest::addRow("surrogate") << int(DatasetFormat::Plain) << QByteArray("a\xed\xa0\x80") << "invalid UTF-8 at byte offset 1";
        QTest::addRow("empty file") << int(DatasetFormat::Plain) << QByteArray() << "the text file is empty";
        QTest::addRow("JSONL not JSON") << int(DatasetFormat::Jsonl) << QByteArray("{\"text\": \"a\"}\n{oops\n") << ":2: not a JSON object";
        QTest::addRow("JSONL missing field") << int(DatasetFormat::Jsonl) << QByteArray("{\"txt\": \"a\"}\n") << ":1: no \"text\" field (choose the field with --jsonl-field)";
        QTest::addRow("JSONL field not a string") << int(DatasetFormat::Jsonl) << QByteArray("{\"text\": 5}\n") << ":1: \"text\" is not a string";
        QTest::addRow("JSONL blank") << int(DatasetFormat::Jsonl) << QByteArray("\n\n") << "no documents in the jsonl dataset";
    }
    void badInputs()
    {
        QFETCH(int, format);
        QFETCH(QByteArray, bytes);
        QFETCH(QString, message);
        QTemporaryDir dir;
        const std::string path = write(dir, "input", bytes.toStdString());
        const QString what = ioError([&] { (void)loadTextDataset(path, static_cast<DatasetFormat>(format)); });
        QVERIFY2(what.startsWith(QString::fromStdString(path)), qPrintable(what));
        QVERIFY2(what.contains(message), qPrintable(what));
    }

    void replacementFollowsPython_data()
    {
        QTest::addColumn<QByteArray>("input");
        QTest::addColumn<QByteArray>("expected");
        QTest::addColumn<qint64>("replaced");
        // Expected values are bytes.decode("utf-8", "replace").encode() in Python 3.
        QTest::addRow("lone 0xff") << QByteArray("a\xff" "b") << QByteArray("a\xef\xbf\xbd" "b") << qint64(1);
        QTest::addRow("truncated at end") << QByteArray("a\xe2\x82") << QByteArray("a\xef\xbf\xbd") << qint64(1);
        QTest::addRow("overlong E0 80") << QByteArray("\xe0\x80") << QByteArray("\xef\xbf\xbd\xef\xbf\xbd") << qint64(2);
        QTest::addRow("beyond U+10FFFF") << QByteArray("\xf4\x90\x80\x80") << QByteArray("\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd") << qint64(4);
        QTest::addRow("valid untouched") << QByteArray("\xf0\x9f\x98\x80 ok") << QByteArray("\xf0\x9f\x98\x80 ok") << qint64(0);
    }
    void replacementFollowsPython()
    {
        QFETCH(QByteArray, input);
        QFETCH(QByteArray, expected);
        QFETCH(qint64, replaced);
        std::string text = input.toStdString();
        QCOMPARE(replaceInvalidUtf8(text), std::int64_t{replaced});
        QCOMPARE(QByteArray::fromStdString(text), expected);
    }

    void replaceModeCounts()
    {
        QTemporaryDir dir;
        const std::string path = write(dir, "t.txt", "x\xff y \xfe");
        const TextDataset ds = loadTextDataset(path, DatasetFormat::Plain, "text", InvalidUtf8::Replace);
        QCOMPARE(ds.replacedSequences, std::int64_t{2});
        QCOMPARE(ds.documents[0].bytes, std::int64_t{10}); // counted after replacement: x + 3 + " y " + 3
    }

    void directoryDocuments()
    {
        QTemporaryDir dir;
        write(dir, "b.txt", "second");
        write(dir, "a.txt", "first doc");
        write(dir, "notes.md", "ignored");
        const TextDataset ds = loadTextDataset(dir.path().toStdString(), DatasetFormat::Directory);
        QCOMPARE(ds.documents.size(), std::size_t{2});
        QCOMPARE(ds.documents[0].text, std::string("first doc"));
        QTemporaryDir empty;
        QVERIFY(ioError([&] { (void)loadTextDataset(empty.path().toStdString(), DatasetFormat::Directory); }).contains(QStringLiteral("no *.txt files")));
    }

    void formatNames()
    {
        for (auto f : {DatasetFormat::Plain, DatasetFormat::WikiText, DatasetFormat::Jsonl, DatasetFormat::Directory})
            QCOMPARE(parseDatasetFormat(datasetFormatName(f)), std::optional<DatasetFormat>(f));
        QVERIFY(!parseDatasetFormat("csv"));
    }
};

QTEST_APPLESS_MAIN(TestTextDataset)
#include "tst_text_dataset.moc"
