// SPDX-License-Identifier: MIT
// Reports checked by content: runs stored through the real RunHistory in a temporary SQLite file,
// reports written by the real clusterppl-cli (offscreen) and by the library, then read back: the
// PDF through pdftotext, the HTML's numbers and charts, the CSV parsed (RFC 4180), the JSON
// against the export. PNG renders go to $CPPL_REPORT_PNG_DIR when set (for looking at them).
#include "charts/time_series_chart.h"
#include "report/report.h"
#include "report/report_charts.h"
#include "history/run_export.h"
#include "history/run_history.h"
#include "test_paths.h"
#include "test_runs.h"
#include "test_verify.h"

#include <QDir>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QFile>
#include <QImage>
#include <QJsonArray>
#include <QJsonDocument>
#include <QPainter>
#include <QProcess>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QSvgRenderer>
#include <QTemporaryDir>
#include <QTest>
#include <QTimeZone>

#include <cmath>
#include <cstring>

using namespace Qt::StringLiterals;
using namespace cppl::core::history;
using namespace cppl::core::report;

using cppl::test::kCli;

namespace {

// Digits that a rounding display would lose: the reports must show these exactly.
constexpr double kPpl = 7.123456789012345;
constexpr double kPplStderr = 0.0123456789012345;

bool sameBits(double a, double b)
{
    return std::memcmp(&a, &b, sizeof a) == 0;
}

// Figures follow the projection's model (per-rank speed s1 R^-0.05, a collective per 1000 tokens
// costing a + b log2 R), so that the comparison's projection is a sensible one.
RunRecord makeRun(const QString &id, int worldSize, const QString &exact, double ppl, const QDateTime &started)
{
    const qint64 tokens = 400000;
    const double speed = 1000 * std::pow(worldSize, -0.05);
    const double rounds = worldSize == 1 ? 0 : std::ceil(double(tokens) / (worldSize * 1000.0));
    const double comm = worldSize == 1 ? 0 : rounds * (0.002 + 0.003 * std::log2(worldSize));
    double slowest = 0;
    for (int k = 0; k < worldSize; ++k)
        slowest = std::max(slowest, double(tokens / worldSize) / speed * (1 + 0.002 * (k % 7)) + comm);
    const double tps = double(tokens) / slowest;
    QJsonArray ranks;
    for (int k = 0; k < worldSize; ++k)
        ranks.append(QJsonObject{{u"rank"_s, k},
                                 {u"host"_s, u"node-%1.example"_s.arg(k / 2)},
                                 {u"group"_s, k / 2},
                                 {u"tokens"_s, tokens / worldSize},
                                 {u"windows"_s, 10 + k},
                                 {u"rounds"_s, static_cast<qint64>(rounds)},
                                 {u"compute_seconds"_s, double(tokens / worldSize) / speed * (1 + 0.002 * (k % 7))},
                                 {u"wait_seconds"_s, comm * (0.3 + 0.01 * (k % 3))},
                                 {u"transfer_seconds"_s, comm * (0.7 - 0.01 * (k % 3))},
                                 {u"wall_seconds"_s, slowest + 0.001 * k}});
    QJsonObject result = cppl::test::agentResult(worldSize, ppl, kPplStderr, exact, tokens, tps, u"/models/llama-7b"_s,
                                                 u"/data/held,out \"text\".txt"_s);
    if (worldSize > 1) {
        result.insert(u"ranks"_s, ranks);
        result.insert(u"rounds"_s, static_cast<qint64>(rounds));
    }
    RunRecord r = cppl::test::finishedRun(id, QJsonDocument(result).toJson(QJsonDocument::Compact), started, 60);
    r.launcher = u"local"_s;
    r.nodeCount = (worldSize + 1) / 2;
    for (int n = 0; n < r.nodeCount; ++n)
        r.hosts.append(QJsonObject{{u"name"_s, u"node-%1.example"_s.arg(n)}, {u"address"_s, u"10.0.0.%1"_s.arg(n + 1)}, {u"slots"_s, 2}});
    r.versions = QJsonObject{{u"agent"_s, u"0.9.0"_s}, {u"libtorch"_s, u"2.5.1"_s}, {u"nccl"_s, u"2.21.5"_s}};
    for (int k = 0; k < worldSize; ++k)
        for (int i = 0; i < 30; ++i)
            r.samples.push_back({i * 2.0, k, speed * (1 + 0.05 * std::sin(i * 0.4 + k)) - 3 * k, 0.1 * k / worldSize, 0.05, 0, i * 100});
    if (worldSize == 4) {
        r.alerts.push_back({12.5, started.addSecs(12), 3, u"slow-rank"_s, u"rank 3 runs 31% below the median tokens/s"_s});
        r.alerts.push_back({40.25, started.addSecs(40), -1, u"stall"_s, u"no telemetry from rank 2 for 4.0 s"_s});
    }
    return r;
}

/// RFC 4180 parser: quoted fields with doubled quotes, commas and line breaks inside.
std::vector<QStringList> parseCsv(const QString &text)
{
    std::vector<QStringList> rows;
    QStringList row;
    QString field;
    bool quoted = false, wasQuoted = false;
    for (qsizetype i = 0; i < text.size(); ++i) {
        const QChar c = text[i];
        if (quoted) {
            if (c == u'"' && i + 1 < text.size() && text[i + 1] == u'"') {
                field += u'"';
                ++i;
            } else if (c == u'"') {
                quoted = false;
            } else {
                field += c;
            }
        } else if (c == u'"' && field.isEmpty() && !wasQuoted) {
            quoted = wasQuoted = true;
        } else if (c == u',') {
            row << field;
            field.clear();
            wasQuoted = false;
        } else if (c == u'\r' && i + 1 < text.size() && text[i + 1] == u'\n') {
            row << field;
            rows.push_back(row);
            row.clear();
            field.clear();
            wasQuoted = false;
            ++i;
        } else {
            field += c;
        }
    }
    if (!field.isEmpty() || !row.isEmpty()) {
        row << field;
        rows.push_back(row);
    }
    return rows;
}

QString pdfText(const QString &pdf)
{
    QProcess p;
    p.start(u"pdftotext"_s, {u"-layout"_s, pdf, u"-"_s});
    if (!p.waitForFinished(60000) || p.exitStatus() != QProcess::NormalExit || p.exitCode() != 0)
        return {};
    return QString::fromUtf8(p.readAllStandardOutput());
}

int pdfPages(const QString &pdf)
{
    QProcess p;
    p.start(u"pdfinfo"_s, {pdf});
    p.waitForFinished(60000);
    const auto m = QRegularExpression(u"Pages:\\s+(\\d+)"_s).match(QString::fromUtf8(p.readAllStandardOutput()));
    return m.hasMatch() ? m.captured(1).toInt() : -1;
}

QString pngDir()
{
    return qEnvironmentVariable("CPPL_REPORT_PNG_DIR");
}

/// The first page(s) as PNG at 60 dpi into $CPPL_REPORT_PNG_DIR (for a person to look at).
void pdfToPng(const QString &pdf, const QString &name, int firstPage, int lastPage)
{
    if (pngDir().isEmpty())
        return;
    QFile::copy(pdf, QDir(pngDir()).filePath(name + u".pdf"_s));
    QProcess p;
    p.start(u"pdftoppm"_s, {u"-png"_s, u"-r"_s, u"60"_s, u"-f"_s, QString::number(firstPage), u"-l"_s, QString::number(lastPage), pdf,
                            QDir(pngDir()).filePath(name)});
    p.waitForFinished(60000);
}

} // namespace

class TestReport : public QObject
{
    Q_OBJECT

private:
    QTemporaryDir m_dir;
    QString m_store;

    QString path(const QString &name) const { return m_dir.filePath(name); }

    int cli(const QStringList &args, QString *out = nullptr, QString *err = nullptr)
    {
        QProcess p;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.remove(u"QT_QPA_PLATFORM"_s); // the CLI must choose offscreen by itself
        env.remove(u"DISPLAY"_s);
        env.remove(u"WAYLAND_DISPLAY"_s);
        p.setProcessEnvironment(env);
        QElapsedTimer timer;
        timer.start();
        p.start(kCli, QStringList{u"report"_s} + args + QStringList{u"--store"_s, m_store});
        if (!p.waitForFinished(120000))
            return -1;
        const QString written = args.contains(u"-o"_s) ? args[args.indexOf(u"-o"_s) + 1] : QString();
        if (QFileInfo(written).isFile()) // figures for docs/reports.md
            qInfo("report %s: %lld bytes in %lld ms", qPrintable(QFileInfo(written).fileName()), QFileInfo(written).size(), timer.elapsed());
        if (out)
            *out = QString::fromUtf8(p.readAllStandardOutput());
        if (err)
            *err = QString::fromUtf8(p.readAllStandardError());
        return p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -2;
    }

    RunRecord stored(const QString &id) const
    {
        const RunHistory s(m_store);
        const auto r = s.get(id);
        return r ? *r : RunRecord{};
    }

private Q_SLOTS:
    void initTestCase()
    {
        QVERIFY(m_dir.isValid());
        CPPL_VERIFY2(!QStandardPaths::findExecutable(u"pdftotext"_s).isEmpty(),
                 "pdftotext is missing: install poppler-utils (scripts/install-deps.sh)");
        m_store = path(u"runs.sqlite"_s);
        RunHistory s(m_store);
        const QDateTime t0(QDate(2026, 11, 30), QTime(9, 0), QTimeZone::utc());
        s.insert(makeRun(u"base-1"_s, 1, u"xs1:00ff11"_s, kPpl, t0));
        s.insert(makeRun(u"dist-2"_s, 2, u"xs1:00ff11"_s, kPpl, t0.addSecs(100)));
        s.insert(makeRun(u"dist-4"_s, 4, u"xs1:00ff11"_s, kPpl, t0.addSecs(200)));
        RunRecord odd = makeRun(u"odd-4"_s, 4, u"xs1:00ff12"_s, kPpl * (1 + 3e-7), t0.addSecs(300));
        odd.firstCause = u"rank 2: \"CUDA error\", retried\nthen finished"_s; // commas, quotes and a line break for CSV
        s.insert(odd);
        RunRecord big = makeRun(u"wide-1024"_s, 1024, u"xs1:00ff11"_s, kPpl, t0.addSecs(400));
        big.samples.clear(); // 1024 x 30 samples: the band chart's case
        for (int k = 0; k < 1024; ++k)
            for (int i = 0; i < 30; ++i)
                big.samples.push_back({i * 2.0, k, 700.0 + (k == 77 ? -300.0 : 0.0) + 20 * std::sin(i * 0.3 + k), 0.1, 0.05, 0, i * 10});
        s.insert(big);
        RunRecord failed;
        failed.runId = u"failed-2"_s;
        failed.status = RunStatus::Failed;
        failed.started = t0.addSecs(500);
        failed.ended = t0.addSecs(512);
        failed.source = u"cli"_s;
        failed.worldSize = 2;
        failed.exitCode = 11;
        failed.firstCause = u"rank 1 on node-0.example exited with code 3 (model file not found)"_s;
        s.insert(failed);
    }

    void failedRunReportSaysWhy()
    {
        const QString pdf = path(u"failed.pdf"_s), csv = path(u"failed.csv"_s);
        QCOMPARE(cli({u"failed-2"_s, u"-o"_s, pdf}), 0);
        const QString text = pdfText(pdf).simplified();
        CPPL_VERIFY2(text.contains(u"No result: the run ended failed (rank 1 on node-0.example exited with code 3 (model file not found))"_s),
                 qPrintable(text));
        QVERIFY(text.contains(u"No per-rank figures are stored for this run."_s));
        QCOMPARE(cli({u"failed-2"_s, u"-o"_s, csv}), 0);
        QFile f(csv);
        QVERIFY(f.open(QIODevice::ReadOnly));
        const auto rows = parseCsv(QString::fromUtf8(f.readAll()));
        QCOMPARE(rows.size(), size_t(2));
        QCOMPARE(rows[1][rows[0].indexOf(u"status"_s)], u"failed"_s);
        QCOMPARE(rows[1][rows[0].indexOf(u"ppl"_s)], QString()); // no result: empty, never 0
        QCOMPARE(rows[1][rows[0].indexOf(u"exit_code"_s)], u"11"_s);
    }

    void pdfRunReportHasEveryStoredFigure()
    {
        const QString pdf = path(u"dist-4.pdf"_s);
        QString out, err;
        QCOMPARE(cli({u"dist-4"_s, u"--format"_s, u"pdf"_s, u"-o"_s, pdf}, &out, &err), 0);
        CPPL_VERIFY2(out.contains(u"wrote "_s), qPrintable(out + err));
        QFile f(pdf);
        QVERIFY(f.open(QIODevice::ReadOnly));
        QVERIFY(f.read(5) == "%PDF-");
        const QString text = pdfText(pdf);
        CPPL_VERIFY2(!text.isEmpty(), "pdftotext read no text");
        const RunRecord r = stored(u"dist-4"_s);
        QVERIFY(text.contains(u"dist-4"_s));
        CPPL_VERIFY2(text.contains(exactNumber(*r.ppl) + u" ± "_s + exactNumber(r.pplStderr)), qPrintable(text.left(3000)));
        QCOMPARE(exactNumber(*r.ppl), u"7.123456789012345"_s);
        QVERIFY(text.contains(u"400000"_s));
        QVERIFY(text.contains(u"bit-identical"_s));
        QVERIFY(text.contains(u"base-1"_s)); // the baseline it was compared with
        QCOMPARE(r.ranks.size(), size_t(4));
        for (const RankSummary &k : r.ranks) {
            // One table row per rank: rank, host, group, tokens, tokens/s (rounded), compute s.
            const QRegularExpression row(u"^\\s*%1\\s+%2\\s+%3\\s+%4\\s+%5\\s+%6\\s"_s.arg(k.rank)
                                             .arg(QRegularExpression::escape(k.host))
                                             .arg(k.group)
                                             .arg(k.tokens)
                                             .arg(QRegularExpression::escape(displayNumber(k.tokensPerSecond)),
                                                  QRegularExpression::escape(displayNumber(k.computeSeconds))),
                                         QRegularExpression::MultilineOption);
            CPPL_VERIFY2(row.match(text).hasMatch(), qPrintable(u"no table row for rank %1 in:\n"_s.arg(k.rank) + text));
        }
        for (const StoredAlert &a : r.alerts)
            CPPL_VERIFY2(text.contains(a.message), qPrintable(a.message));
        QVERIFY(text.contains(u"node-1.example"_s) && text.contains(u"libtorch"_s)); // setup: hosts, versions
        pdfToPng(pdf, u"run-4"_s, 1, 2);
    }

    void pdfOfAManyRankRunSummarisesAndPaginates()
    {
        const QString pdf = path(u"wide.pdf"_s);
        QCOMPARE(cli({u"wide-1024"_s, u"-o"_s, pdf}), 0); // format from the extension
        const QString text = pdfText(pdf);
        QVERIFY(text.contains(u"1024 ranks: tokens/s per rank from"_s));
        QVERIFY(text.contains(u"Slowest 20 ranks"_s) && text.contains(u"Fastest 20 ranks"_s));
        QVERIFY(text.contains(u"every rank is in the CSV and JSON reports"_s));
        pdfToPng(pdf, u"wide"_s, 1, 3);
        CPPL_VERIFY2(text.simplified().contains(u"slowest by mean rate (rank 77"_s), qPrintable(text.left(6000))); // the band chart names the slow rank
        QVERIFY(pdfPages(pdf) >= 2);
        pdfToPng(pdf, u"wide"_s, 1, 3);
    }

    void htmlIsSelfContainedAndCarriesTheStoredNumbers()
    {
        const QString html = path(u"dist-4.html"_s);
        QCOMPARE(cli({u"dist-4"_s, u"--format"_s, u"html"_s, u"-o"_s, html}), 0);
        QFile f(html);
        QVERIFY(f.open(QIODevice::ReadOnly));
        const QString text = QString::fromUtf8(f.readAll());
        if (!pngDir().isEmpty())
            QFile::copy(html, QDir(pngDir()).filePath(u"run-4.html"_s));
        QVERIFY(!text.contains(u"http://"_s, Qt::CaseInsensitive));
        QVERIFY(!text.contains(u"https://"_s, Qt::CaseInsensitive));
        // Only references inside the file: url(#id) of the SVG fill patterns.
        QVERIFY(!QRegularExpression(u"(src|href)\\s*=\\s*\"(?!#)|url\\((?!#)|@import"_s).match(text).hasMatch());
        QVERIFY(text.contains(u"prefers-color-scheme: dark"_s));
        const qsizetype svgs = text.count(u"<svg"_s);
        QCOMPARE(svgs, qsizetype(4)); // 2 charts, light and dark
        const RunRecord r = stored(u"dist-4"_s);
        QVERIFY(text.contains(exactNumber(*r.ppl) + u" ± "_s + exactNumber(r.pplStderr)));
        QVERIFY(text.contains(u"bit-identical"_s));
        // Every figure cell carries the stored value exactly; displayed text is its rounding.
        QStringList values;
        const QRegularExpression cell(u"<td class=\"num\" data-value=\"([^\"]*)\">([^<]*)</td>"_s);
        for (auto it = cell.globalMatch(text); it.hasNext();)
            values << it.next().captured(1);
        for (const RankSummary &k : r.ranks)
            for (double v : {k.tokensPerSecond, k.computeSeconds, k.waitSeconds, k.transferSeconds})
                CPPL_VERIFY2(values.contains(exactNumber(v)), qPrintable(exactNumber(v)));
        for (const QString &v : values) {
            bool ok = false;
            v.toDouble(&ok);
            CPPL_VERIFY2(ok, qPrintable(v));
        }
        for (const StoredAlert &a : r.alerts)
            QVERIFY(text.contains(a.message.toHtmlEscaped()));
        // The charts as a browser would draw them: rendered to PNG, and not blank.
        const QRegularExpression svgRe(u"<svg.*?</svg>"_s, QRegularExpression::DotMatchesEverythingOption);
        int n = 0;
        for (auto it = svgRe.globalMatch(text); it.hasNext(); ++n) {
            QSvgRenderer renderer(it.next().captured(0).toUtf8());
            QVERIFY(renderer.isValid());
            QImage img(900, 340, QImage::Format_ARGB32);
            img.fill(Qt::transparent);
            QPainter p(&img);
            renderer.render(&p);
            p.end();
            int distinct = 0;
            QRgb first = img.pixel(450, 170);
            for (int y = 0; y < img.height(); y += 7)
                for (int x = 0; x < img.width(); x += 7)
                    distinct += img.pixel(x, y) != first;
            CPPL_VERIFY2(distinct > 100, "an SVG chart renders blank");
            if (!pngDir().isEmpty())
                img.save(QDir(pngDir()).filePath(u"html-chart-%1.png"_s.arg(n)));
        }
        QCOMPARE(n, 4);
    }

    void csvRoundTripsEveryStoredValue()
    {
        const QString csv = path(u"cmp.csv"_s);
        QString out;
        QCOMPARE(cli({u"base-1"_s, u"odd-4"_s, u"dist-4"_s, u"--format"_s, u"csv"_s, u"-o"_s, csv}, &out), 0);
        QVERIFY(out.contains(path(u"cmp-ranks.csv"_s)));
        QFile runsFile(csv), ranksFile(path(u"cmp-ranks.csv"_s));
        QVERIFY(runsFile.open(QIODevice::ReadOnly) && ranksFile.open(QIODevice::ReadOnly));
        const auto runs = parseCsv(QString::fromUtf8(runsFile.readAll()));
        QCOMPARE(runs.size(), size_t(4));
        const QStringList h = runs[0];
        auto col = [&](const QString &name) { return static_cast<int>(h.indexOf(name)); };
        RunHistory s(m_store);
        const ReportData data = loadReport(s, {u"base-1"_s, u"odd-4"_s, u"dist-4"_s});
        for (size_t i = 1; i < runs.size(); ++i) {
            const QStringList &row = runs[i];
            QCOMPARE(row.size(), h.size());
            const RunRecord &r = data.runs[i - 1];
            QCOMPARE(row[col(u"run_id"_s)], r.runId);
            QVERIFY(sameBits(row[col(u"ppl"_s)].toDouble(), *r.ppl));
            QVERIFY(sameBits(row[col(u"ppl_stderr"_s)].toDouble(), *r.pplStderr));
            QVERIFY(sameBits(row[col(u"tokens_per_second"_s)].toDouble(), *r.tokensPerSecond));
            QCOMPARE(row[col(u"nll_sum_exact"_s)], r.nllSumExact);
            QCOMPARE(row[col(u"tokens_scored"_s)].toLongLong(), r.tokensScored);
            QCOMPARE(row[col(u"world_size"_s)].toInt(), r.worldSize);
            QCOMPARE(row[col(u"data"_s)], r.data); // a comma and quotes, quoted
            QCOMPARE(row[col(u"first_cause"_s)], r.firstCause); // a line break inside a field
            const ScalingPoint *p = data.pointOf(r.runId);
            QVERIFY(p);
            QVERIFY(sameBits(row[col(u"efficiency"_s)].toDouble(), p->efficiency));
            QVERIFY(sameBits(row[col(u"comm_share"_s)].toDouble(), p->commShare));
            QVERIFY(sameBits(row[col(u"wait_share"_s)].toDouble(), p->waitShare));
            QCOMPARE(row[col(u"deviation"_s)], p->deviationText());
        }
        QCOMPARE(runs[2][col(u"bit_identical"_s)], u"false"_s); // odd-4
        QCOMPARE(runs[3][col(u"bit_identical"_s)], u"true"_s);  // dist-4

        const auto ranks = parseCsv(QString::fromUtf8(ranksFile.readAll()));
        QCOMPARE(ranks.size(), size_t(1 + data.runs[0].ranks.size() + 4 + 4));
        const QStringList rh = ranks[0];
        auto rcol = [&](const QString &name) { return static_cast<int>(rh.indexOf(name)); };
        size_t row = 1;
        for (const RunRecord &r : data.runs)
            for (const RankSummary &k : r.ranks) {
                const QStringList &f = ranks[row++];
                QCOMPARE(f[rcol(u"run_id"_s)], r.runId);
                QCOMPARE(f[rcol(u"rank"_s)].toInt(), k.rank);
                QCOMPARE(f[rcol(u"host"_s)], k.host);
                QCOMPARE(f[rcol(u"group"_s)].toInt(), k.group);
                QCOMPARE(f[rcol(u"tokens"_s)].toLongLong(), k.tokens);
                QVERIFY(sameBits(f[rcol(u"tokens_per_second"_s)].toDouble(), k.tokensPerSecond));
                QVERIFY(sameBits(f[rcol(u"compute_seconds"_s)].toDouble(), k.computeSeconds));
                QVERIFY(sameBits(f[rcol(u"wait_seconds"_s)].toDouble(), k.waitSeconds));
                QVERIFY(sameBits(f[rcol(u"transfer_seconds"_s)].toDouble(), k.transferSeconds));
                QVERIFY(sameBits(f[rcol(u"wall_seconds"_s)].toDouble(), k.wallSeconds));
            }
        // A directory gets runs.csv and ranks.csv.
        QVERIFY(QDir(m_dir.path()).mkpath(u"csvdir"_s));
        QCOMPARE(cli({u"dist-2"_s, u"--format"_s, u"csv"_s, u"-o"_s, path(u"csvdir"_s)}), 0);
        QVERIFY(QFile::exists(path(u"csvdir/runs.csv"_s)) && QFile::exists(path(u"csvdir/ranks.csv"_s)));
    }

    void jsonEqualsTheExport()
    {
        const QString json = path(u"cmp.json"_s);
        QCOMPARE(cli({u"base-1"_s, u"dist-2"_s, u"dist-4"_s, u"-o"_s, json}), 0);
        QFile f(json);
        QVERIFY(f.open(QIODevice::ReadOnly));
        QJsonParseError e{};
        const QJsonObject o = QJsonDocument::fromJson(f.readAll(), &e).object();
        QCOMPARE(e.error, QJsonParseError::NoError);
        QCOMPARE(o.value(u"kind"_s).toString(), u"comparison"_s);
        const QJsonArray runs = o.value(u"runs"_s).toArray();
        QCOMPARE(runs.size(), 3);
        const QStringList ids{u"base-1"_s, u"dist-2"_s, u"dist-4"_s};
        RunHistory s(m_store);
        for (int i = 0; i < 3; ++i)
            QCOMPARE(runs[i].toObject(), runToJson(*s.get(ids[i])));
        QCOMPARE(o.value(u"comparison"_s).toObject(), comparisonToJson(loadReport(s, ids).comparison));
    }

    void comparisonReportHasScalingProjectionAndRecommendation()
    {
        const QString pdf = path(u"cmp.pdf"_s);
        QCOMPARE(cli({u"base-1"_s, u"dist-2"_s, u"dist-4"_s, u"-o"_s, pdf}), 0);
        const QString text = pdfText(pdf);
        pdfToPng(pdf, u"cmp"_s, 1, 3);
        RunHistory s(m_store);
        const ReportData data = loadReport(s, {u"base-1"_s, u"dist-2"_s, u"dist-4"_s});
        QVERIFY(text.contains(u"Scaling"_s) && text.contains(u"efficiency"_s));
        QVERIFY(text.contains(u"Recommendation: "_s));
        QVERIFY(!data.comparison.recommendation.isEmpty());
        CPPL_VERIFY2(text.contains(data.comparison.recommendation.left(40)), qPrintable(data.comparison.recommendation));
        QVERIFY(data.comparison.projection.available);
        QVERIFY(text.contains(u"Projection"_s) && text.contains(u"held-out check"_s));
        for (const ScalingPoint &p : data.comparison.points) {
            const QRegularExpression row(u"^\\s*%1\\s+%2\\s+%3\\s+%4\\s+%5\\s+%6 %"_s.arg(p.runId)
                                             .arg(p.worldSize)
                                             .arg(p.nodes)
                                             .arg(displayNumber(p.tokensPerSecond), displayNumber(p.idealTokensPerSecond),
                                                  displayNumber(p.efficiency * 100, 3)),
                                         QRegularExpression::MultilineOption);
            CPPL_VERIFY2(row.match(text).hasMatch(), qPrintable(p.runId + u"\n"_s + text.left(4000)));
        }
        for (const ProjectionPoint &p : data.comparison.projection.points)
            CPPL_VERIFY2(QRegularExpression(u"^\\s*%1\\s+%2\\s+%3 %"_s.arg(p.ranks).arg(displayNumber(p.tokensPerSecond), displayNumber(p.efficiency * 100, 3)),
                                        QRegularExpression::MultilineOption)
                         .match(text)
                         .hasMatch(),
                     qPrintable(QString::number(p.ranks)));

        // Throughput, efficiency and projection over the ranks on a log axis, as Compare draws them
        // (a linear axis put every run below a tenth of the largest in its first pixels); tok/s on a
        // log axis too, each run where its stored figures put it.
        const auto charts = comparisonCharts(data, reportTheme(false));
        int logCharts = 0;
        for (const ReportChart &c : charts) {
            const auto *line = qobject_cast<const cppl::charts::TimeSeriesChart *>(c.chart.get());
            if (!line)
                continue;
            ++logCharts;
            QCOMPARE(line->xAxis().format, cppl::charts::ValueFormat::Log2Count);
            if (c.id != u"throughput"_s)
                continue;
            QCOMPARE(line->yAxis().format, cppl::charts::ValueFormat::Log10Si);
            QCOMPARE(line->series(0).x.size(), data.comparison.points.size());
            for (std::size_t i = 0; i < data.comparison.points.size(); ++i) {
                const ScalingPoint &p = data.comparison.points[i];
                QCOMPARE(std::exp2(line->series(0).x[i]), double(p.worldSize));
                QVERIFY(std::abs(std::pow(10.0, line->series(0).y[i]) / p.tokensPerSecond - 1) < 1e-12);
                QVERIFY(std::abs(std::pow(10.0, line->series(1).y[i]) / p.idealTokensPerSecond - 1) < 1e-12);
            }
        }
        QCOMPARE(logCharts, 3);

        const QString html = path(u"cmp.html"_s);
        QCOMPARE(cli({u"base-1"_s, u"dist-2"_s, u"dist-4"_s, u"-o"_s, html}), 0);
        QFile f(html);
        QVERIFY(f.open(QIODevice::ReadOnly));
        const QString h = QString::fromUtf8(f.readAll());
        QVERIFY(!h.contains(u"http://"_s) && !h.contains(u"https://"_s));
        QVERIFY(h.contains(u"id=\"chart-comparison-projection\""_s) && h.contains(u"id=\"chart-comparison-throughput\""_s));
        for (const ScalingPoint &p : data.comparison.points)
            QVERIFY(h.contains(u"data-value=\""_s + exactNumber(p.efficiency) + u'"'));
        if (!pngDir().isEmpty())
            QFile::copy(html, QDir(pngDir()).filePath(u"cmp.html"_s));
    }

    void badInputIsNamed()
    {
        QString out, err;
        QCOMPARE(cli({u"no-such-run"_s, u"-o"_s, path(u"x.pdf"_s)}, &out, &err), 4);
        CPPL_VERIFY2(err.contains(u"no-such-run"_s) && err.contains(m_store), qPrintable(err));
        QVERIFY(!QFile::exists(path(u"x.pdf"_s)));
        QCOMPARE(cli({u"dist-4"_s, u"--format"_s, u"docx"_s, u"-o"_s, path(u"x.docx"_s)}, &out, &err), 2);
        QVERIFY(err.contains(u"docx"_s) && err.contains(u"pdf, html, csv, json"_s));
        QCOMPARE(cli({u"dist-4"_s, u"--format"_s, u"pdf"_s}, &out, &err), 2);
        QVERIFY(err.contains(u"-o PATH"_s));
        QCOMPARE(cli({u"dist-4"_s, u"-o"_s, path(u"no-dir/x.pdf"_s)}, &out, &err), 3);
        QVERIFY(err.contains(path(u"no-dir/x.pdf"_s)));
    }

    void comparisonReportSaysWhereRanksSharedCores()
    {
        // Four CPU ranks on a 2-core machine measured that machine's contention, not scaling: the
        // comparison report says so, and the projection is fitted without that run.
        {
            RunHistory s(m_store);
            RunRecord shared = makeRun(u"shared-4"_s, 4, u"xs1:00ff11"_s, kPpl, QDateTime(QDate(2026, 11, 30), QTime(10, 0), QTimeZone::utc()));
            shared.hosts = {QJsonObject{{u"name"_s, u"localhost"_s}, {u"address"_s, u"127.0.0.1"_s}, {u"slots"_s, 4}, {u"cpus"_s, 2}}};
            shared.settings.insert(u"device"_s, u"cpu"_s);
            s.insert(shared);
        }
        const QString html = path(u"shared.html"_s);
        QCOMPARE(cli({u"base-1"_s, u"dist-2"_s, u"shared-4"_s, u"-o"_s, html}), 0);
        QFile f(html);
        QVERIFY(f.open(QIODevice::ReadOnly));
        const QString h = QString::fromUtf8(f.readAll());
        CPPL_VERIFY2(h.contains(u"run shared-4: 4 ranks share the 2 CPU cores of localhost"_s), qPrintable(h));
        CPPL_VERIFY2(h.contains(u"left out of the fit"_s) && h.contains(u"shared-4: their ranks shared"_s), qPrintable(h));
    }
};

QTEST_MAIN(TestReport)
#include "tst_report.moc"
