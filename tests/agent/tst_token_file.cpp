// SPDX-License-Identifier: MIT
#include "token_file.h"

#include "cppl/errors.h"

#include <QTemporaryDir>
#include <QTest>

#include <cstring>
#include <fstream>

using namespace cppl;
using namespace cppl::agent;

namespace {

std::string writeFile(const QTemporaryDir &dir, const char *name, const std::string &bytes)
{
    const std::string path = dir.filePath(QString::fromLatin1(name)).toStdString();
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
}

template<typename T>
std::string le(std::initializer_list<T> values)
{
    std::string s;
    for (T v : values)
        for (std::size_t b = 0; b < sizeof(T); ++b)
            s += static_cast<char>((static_cast<std::uint64_t>(v) >> (8 * b)) & 0xff);
    return s;
}

// A .npy v1 file the way numpy.save writes it: magic, version, header padded to 64 bytes.
std::string npy(const std::string &descr, const std::string &shape, const std::string &payload, bool fortran = false)
{
    std::string header = "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") + ", 'shape': " + shape + ", }";
    while ((10 + header.size() + 1) % 64 != 0)
        header += ' ';
    header += '\n';
    std::string s = "\x93NUMPY";
    s += '\x01';
    s += '\x00';
    s += static_cast<char>(header.size() & 0xff);
    s += static_cast<char>(header.size() >> 8);
    return s + header + payload;
}

} // namespace

class TestTokenFile : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void readsEveryFormat()
    {
        QTemporaryDir dir;
        const std::vector<std::uint32_t> expected{0, 7, 65535, 3};
        QCOMPARE(readTokenFile(writeFile(dir, "a.u16", le<std::uint16_t>({0, 7, 65535, 3}))).ids, expected);
        QCOMPARE(readTokenFile(writeFile(dir, "a.u32", le<std::uint32_t>({0, 7, 65535, 3}))).ids, expected);
        QCOMPARE(readTokenFile(writeFile(dir, "a.npy", npy("<i4", "(4,)", le<std::int32_t>({0, 7, 65535, 3})))).ids, expected);
        QCOMPARE(readTokenFile(writeFile(dir, "b.npy", npy("<i8", "(2, 2)", le<std::int64_t>({0, 7, 65535, 3})))).ids, expected);
        QCOMPARE(readTokenFile(writeFile(dir, "c.npy", npy("<u2", "(4,)", le<std::uint16_t>({0, 7, 65535, 3})))).ids, expected);
        const auto t = readTokenFile(writeFile(dir, "d.npy", npy("<u4", "(4,)", le<std::uint32_t>({0, 7, 65535, 3}))));
        QCOMPARE(t.ids, expected);
        QCOMPARE(t.format, std::string("npy:u4"));
        const auto text = readTextAsBytes(writeFile(dir, "t.txt", "h\xc3\xa9"));
        QCOMPARE(text.ids, (std::vector<std::uint32_t>{'h', 0xc3, 0xa9}));
    }

    void badFiles_data()
    {
        QTest::addColumn<QString>("name");
        QTest::addColumn<QByteArray>("bytes");
        QTest::addColumn<QString>("message");
        QTest::addRow("empty") << "e.u32" << QByteArray() << "the token file is empty";
        QTest::addRow("odd u16") << "o.u16" << QByteArray("abc") << "3 bytes is an odd length for 16-bit tokens";
        QTest::addRow("truncated u32") << "t.u32" << QByteArray("abcdef") << "6 bytes is not a multiple of 4";
        QTest::addRow("unknown extension") << "x.txt" << QByteArray("abcd") << "unknown token file type";
        QTest::addRow("not npy") << "n.npy" << QByteArray("hello world!") << "not a .npy file";
        const std::string neg = npy("<i4", "(2,)", le<std::int32_t>({5, -1}));
        QTest::addRow("negative id") << "neg.npy" << QByteArray::fromStdString(neg) << "token 1 is negative (-1)";
        const std::string big = npy("<i8", "(1,)", le<std::int64_t>({std::int64_t{1} << 40}));
        QTest::addRow("id beyond 32 bits") << "big.npy" << QByteArray::fromStdString(big) << "does not fit 32 bits";
        const std::string shortNpy = npy("<i4", "(10,)", le<std::int32_t>({1, 2}));
        QTest::addRow("truncated npy") << "s.npy" << QByteArray::fromStdString(shortNpy) << "the header promises 10 x i4 but 8 bytes follow";
        const std::string floats = npy("<f4", "(1,)", le<std::int32_t>({1}));
        QTest::addRow("float npy") << "f.npy" << QByteArray::fromStdString(floats) << "has no integer 'descr'";
        const std::string bigEndian = npy(">i4", "(1,)", le<std::int32_t>({1}));
        QTest::addRow("big-endian npy") << "be.npy" << QByteArray::fromStdString(bigEndian) << "big-endian .npy arrays are not supported";
        const std::string fortran = npy("<i4", "(1,)", le<std::int32_t>({1}), true);
        QTest::addRow("fortran order") << "fo.npy" << QByteArray::fromStdString(fortran) << "Fortran-ordered";
        std::string longHeader = npy("<i4", "(1,)", le<std::int32_t>({1}));
        longHeader[8] = '\xff';
        longHeader[9] = '\x7f';
        QTest::addRow("header longer than file") << "h.npy" << QByteArray::fromStdString(longHeader) << "runs past the end of the file";
    }
    void badFiles()
    {
        QFETCH(QString, name);
        QFETCH(QByteArray, bytes);
        QFETCH(QString, message);
        QTemporaryDir dir;
        const std::string path = writeFile(dir, name.toLatin1().constData(), bytes.toStdString());
        try {
            (void)readTokenFile(path);
            QFAIL("expected IoError");
        } catch (const IoError &e) {
            const QString what = QString::fromUtf8(e.what());
            QVERIFY2(what.startsWith(QString::fromStdString(path)), e.what()); // names the file
            QVERIFY2(what.contains(message), e.what());
        }
    }

    void missingFileIsNamed()
    {
        QVERIFY_THROWS_EXCEPTION(IoError, (void)readTokenFile("/nonexistent/tokens.u32"));
        QVERIFY_THROWS_EXCEPTION(IoError, (void)readTextAsBytes("/nonexistent/text.txt"));
    }

    void vocabularyCheckNamesPosition()
    {
        TokenStream t;
        t.path = "data.u32";
        t.ids = {1, 2, 300, 4};
        checkVocabulary(t, 301);
        try {
            checkVocabulary(t, 256);
            QFAIL("expected IoError");
        } catch (const IoError &e) {
            QCOMPARE(QString::fromUtf8(e.what()),
                     QStringLiteral("data.u32: token 2 has id 300, outside the model's vocabulary of 256 (was the data tokenised for another model?)"));
        }
    }
};

QTEST_APPLESS_MAIN(TestTokenFile)
#include "tst_token_file.moc"
