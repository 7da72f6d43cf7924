// SPDX-License-Identifier: MIT
// `clusterppl --screenshot DIR` renders every page offscreen, at 1x and 2x, light and dark, with
// and without a synthetic run; each PNG has the window's size times the scale and is not blank.
// With synthetic ranks History and Compare show a synthetic sweep from a temporary store, and the
// user's own store is left as it was.

#include "history/run_history.h"
#include "test_verify.h"

#include <QDir>
#include <QDirIterator>
#include <QFile>
#include <QFileInfo>
#include <QImage>
#include <QSysInfo>
#include <QProcess>
#include <QProcessEnvironment>
#include <QSet>
#include <QSize>
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>

using namespace Qt::StringLiterals;

namespace {

/// How much longer waits are in this build (3 in the sanitizer presets; CPPL_TIMEOUT_SCALE from
/// clusterppl_add_test).
int timeoutScale()
{
    return std::max(1, qEnvironmentVariableIntValue("CPPL_TIMEOUT_SCALE"));
}

const QString kApp = QStringLiteral(CPPL_APP_EXE);

/// Distinct colours on a coarse grid: a blank or single-colour page has a handful at most.
int colourVariety(const QImage &image)
{
    QSet<QRgb> colours;
    const int step = std::max(1, image.width() / 160);
    for (int y = 0; y < image.height(); y += step)
        for (int x = 0; x < image.width(); x += step)
            colours.insert(image.pixel(x, y));
    return int(colours.size());
}

/// Share of grid cells (of 8 x 8) whose pixels are not all one colour: catches a page that
/// painted only in one corner.
double busyCells(const QImage &image)
{
    int busy = 0;
    for (int cy = 0; cy < 8; ++cy)
        for (int cx = 0; cx < 8; ++cx) {
            QSet<QRgb> c;
            const int x0 = image.width() * cx / 8, x1 = image.width() * (cx + 1) / 8;
            const int y0 = image.height() * cy / 8, y1 = image.height() * (cy + 1) / 8;
            for (int y = y0; y < y1 && c.size() < 2; y += 3)
                for (int x = x0; x < x1 && c.size() < 2; x += 3)
                    c.insert(image.pixel(x, y));
            busy += c.size() > 1;
        }
    return busy / 64.0;
}

QByteArray readAll(const QString &path)
{
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

QStringList filesUnder(const QString &dir)
{
    QStringList out;
    QDirIterator it(dir, QDir::Files | QDir::Hidden, QDirIterator::Subdirectories);
    while (it.hasNext())
        out << it.next();
    out.sort();
    return out;
}

} // namespace

class TestAppScreenshots : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void pages_data()
    {
        QTest::addColumn<int>("scale");
        QTest::addColumn<QString>("theme");
        QTest::addColumn<int>("ranks");
        QTest::addColumn<QStringList>("files");
        QTest::addColumn<QSize>("size"); // the window's, logical pixels
        // Every page: Cluster (also with the message bar at error and info level), Evaluation,
        // History and Compare (an empty store: their empty states), Run idle or synthetic.
        const QStringList common{u"cluster.png"_s, u"message-error.png"_s, u"message-info.png"_s, u"evaluation.png"_s,
                                 u"history.png"_s, u"compare.png"_s};
        const QSize usual(1500, 940);
        QTest::addRow("1x light, idle") << 1 << u"light"_s << 0 << common + QStringList{u"run.png"_s} << usual;
        QTest::addRow("2x dark, idle") << 2 << u"dark"_s << 0 << common + QStringList{u"run.png"_s} << usual;
        // With synthetic ranks History is the synthetic sweep's, with its selected run's detail.
        const QStringList detail{u"history-detail.png"_s, u"history-detail-charts.png"_s};
        QTest::addRow("1x light, 4 ranks") << 1 << u"light"_s << 4 << common + detail + QStringList{u"run-starting-4.png"_s, u"run-live-4.png"_s, u"run-reference-4.png"_s, u"run-recovering-4.png"_s, u"run-finished-4.png"_s, u"run-recovered-4.png"_s} << usual;
        QTest::addRow("2x dark, 1024 ranks") << 2 << u"dark"_s << 1024
                                             << common + detail + QStringList{u"run-starting-1024.png"_s, u"run-live-1024.png"_s, u"run-reference-1024.png"_s, u"run-recovering-1024.png"_s, u"run-finished-1024.png"_s, u"run-recovered-1024.png"_s} << usual;
        // A 1024 px screen: no page (History's filters, the Run page's headline with 1024 ranks)
        // may widen the window beyond it (it was 1,392 px at the least, 1,421 px recovered).
        QTest::addRow("1x light, 1024 ranks, 1024x768")
            << 1 << u"light"_s << 1024
            << common + detail + QStringList{u"run-starting-1024.png"_s, u"run-live-1024.png"_s, u"run-reference-1024.png"_s, u"run-recovering-1024.png"_s, u"run-finished-1024.png"_s, u"run-recovered-1024.png"_s}
            << QSize(1024, 768);
    }

    void pages()
    {
        QFETCH(int, scale);
        QFETCH(QString, theme);
        QFETCH(int, ranks);
        QFETCH(QStringList, files);
        QFETCH(QSize, size);
        QTemporaryDir dir;
        QProcess p;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(u"XDG_CONFIG_HOME"_s, dir.filePath(u"config"_s)); // no settings from elsewhere
        env.insert(u"QT_QPA_PLATFORM"_s, u"offscreen"_s);
        env.insert(u"CLUSTERPPL_STORE"_s, dir.filePath(u"store.sqlite"_s)); // an empty history
        p.setProcessEnvironment(env);
        QStringList args{u"--screenshot"_s, dir.filePath(u"shots"_s), u"--scale"_s, QString::number(scale), u"--theme"_s, theme};
        if (ranks > 0)
            args << u"--synthetic-ranks"_s << QString::number(ranks);
        args << u"--size"_s << u"%1x%2"_s.arg(size.width()).arg(size.height());
        p.start(kApp, args);
        QVERIFY(p.waitForFinished(120000 * timeoutScale()));
        const QString err = QString::fromLocal8Bit(p.readAllStandardError());
        CPPL_VERIFY2(p.exitStatus() == QProcess::NormalExit && p.exitCode() == 0, qPrintable(err));
        const QStringList printed = QString::fromLocal8Bit(p.readAllStandardOutput()).split(u'\n', Qt::SkipEmptyParts);
        QCOMPARE(printed.size(), files.size());
        for (const QString &f : files) {
            const QString path = QDir(dir.filePath(u"shots"_s)).filePath(f);
            CPPL_VERIFY2(printed.contains(path), qPrintable(path));
            QImage image(path);
            CPPL_VERIFY2(!image.isNull(), qPrintable(path));
            // History › Open's dialog at its own size (1000 x 700, less in a smaller window).
            const bool dialog = f.startsWith(u"history-detail"_s);
            const QSize expected = dialog ? QSize(std::min(1000, size.width()), std::min(700, size.height())) : size;
            CPPL_VERIFY2(image.width() == expected.width() * scale, qPrintable(u"%1: %2 px wide"_s.arg(f).arg(image.width())));
            QCOMPARE(image.height(), expected.height() * scale);
            const int variety = colourVariety(image);
            const double busy = busyCells(image);
            CPPL_VERIFY2(variety > 40, qPrintable(u"%1: %2 colours"_s.arg(f).arg(variety)));
            // History and Compare of an empty store show a sentence in a quiet page, by design;
            // with synthetic ranks they show the sweep, and the summary is a page of text.
            const bool emptyState = ranks == 0 && (f == u"history.png"_s || f == u"compare.png"_s);
            CPPL_VERIFY2(busy > (emptyState || f == u"history-detail.png"_s ? 0.2 : 0.4), qPrintable(u"%1: %2 of the page painted"_s.arg(f).arg(busy)));
            // Dark means dark: the top-left corner (window background) follows the theme.
            const int lightness = QColor(image.pixel(2, image.height() / 2)).lightness();
            CPPL_VERIFY2(theme == u"dark"_s ? lightness < 100 : lightness > 150, qPrintable(u"%1: %2"_s.arg(f).arg(lightness)));
        }
    }

    void syntheticHistoryLeavesTheUserStoreAlone_data()
    {
        QTest::addColumn<bool>("synthetic");
        QTest::addColumn<bool>("earlier"); // the user's store where earlier builds of the dashboard kept it
        QTest::addRow("synthetic sweep") << true << false;
        // The control: without synthetic ranks the screenshots show the user's store, opened as
        // the dashboard opens it (which marks a run whose recorder is gone interrupted: a write).
        QTest::addRow("the user's store (control)") << false << false;
        // The dashboard's own earlier store: adopted into the shared one (its run marked there),
        // the earlier file left as it was.
        QTest::addRow("the user's earlier store, adopted") << false << true;
    }

    void syntheticHistoryLeavesTheUserStoreAlone()
    {
        QFETCH(bool, synthetic);
        QFETCH(bool, earlier);
        QTemporaryDir dir;
        // The user's store where the dashboard finds it (no $CLUSTERPPL_STORE), holding a run left
        // "running" by a recorder that is gone: whoever opens the history marks it interrupted.
        const QString data = dir.filePath(u"data"_s);
        const QString shared = data + u"/clusterppl/runs.sqlite"_s; // shared with clusterppl-cli
        const QString userStore = earlier ? data + u"/ClusterPPL/clusterppl/runs.sqlite"_s : shared;
        {
            cppl::core::history::RunHistory store(userStore);
            cppl::core::history::RunRecord r;
            r.runId = u"users-own-run"_s;
            r.status = cppl::core::history::RunStatus::Running;
            r.started = QDateTime::currentDateTimeUtc();
            r.owner = QSysInfo::machineHostName() + u":2147483000"_s; // no such process
            store.insert(r);
        }
        const QByteArray before = readAll(userStore);
        const QStringList filesBefore = filesUnder(data);
        QVERIFY(!before.isEmpty());
        // A user who left the dashboard on History: the window opens its store as it starts.
        QDir().mkpath(dir.filePath(u"config/ClusterPPL"_s));
        QFile conf(dir.filePath(u"config/ClusterPPL/clusterppl.conf"_s));
        QVERIFY(conf.open(QIODevice::WriteOnly));
        conf.write("[window]\npage=3\n");
        conf.close();

        QProcess p;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.remove(u"CLUSTERPPL_STORE"_s);
        env.insert(u"HOME"_s, dir.filePath(u"home"_s));
        env.insert(u"XDG_DATA_HOME"_s, data);
        env.insert(u"XDG_CONFIG_HOME"_s, dir.filePath(u"config"_s));
        env.insert(u"QT_QPA_PLATFORM"_s, u"offscreen"_s);
        p.setProcessEnvironment(env);
        QStringList args{u"--screenshot"_s, dir.filePath(u"shots"_s), u"--theme"_s, u"light"_s, u"--size"_s, u"1024x700"_s};
        if (synthetic)
            args << u"--synthetic-ranks"_s << u"4"_s;
        p.start(kApp, args);
        QVERIFY(p.waitForFinished(120000 * timeoutScale()));
        CPPL_VERIFY2(p.exitStatus() == QProcess::NormalExit && p.exitCode() == 0, qPrintable(QString::fromLocal8Bit(p.readAllStandardError())));

        const bool untouched = readAll(userStore) == before && filesUnder(data) == filesBefore;
        if (earlier) {
            QCOMPARE(readAll(userStore), before);
            const cppl::core::history::RunHistory adopted(shared);
            QCOMPARE(adopted.get(u"users-own-run"_s)->status, cppl::core::history::RunStatus::Interrupted);
        } else {
            CPPL_VERIFY2(untouched == synthetic, synthetic ? "the user's store was opened" : "the control did not see its store opened");
        }
        for (const QString &f : {u"history.png"_s, u"compare.png"_s}) {
            const QImage image(QDir(dir.filePath(u"shots"_s)).filePath(f));
            CPPL_VERIFY2(!image.isNull(), qPrintable(f));
            QCOMPARE(image.width(), 1024);
            // The sweep fills History's table and Compare's charts; the user's store of one run, or
            // an empty Compare, leaves most of the page plain.
            const double busy = busyCells(image);
            if (synthetic)
                CPPL_VERIFY2(busy > 0.5, qPrintable(u"%1: %2 of the page painted"_s.arg(f).arg(busy)));
        }
        QCOMPARE(QFileInfo::exists(QDir(dir.filePath(u"shots"_s)).filePath(u"history-detail.png"_s)), synthetic);
    }

    /// With no display (a login node over plain ssh) the dashboard says what to do instead of
    /// Qt's "could not connect to display"; --help and --version answer there too, and
    /// --screenshot renders offscreen by itself.
    void withoutADisplay_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<int>("code");
        QTest::addColumn<QString>("printed"); // on stdout for code 0, on stderr otherwise
        QTest::addRow("no arguments") << QStringList{} << 2 << u"no display to open the dashboard on"_s;
        QTest::addRow("--run") << QStringList{u"--run"_s} << 2 << u"clusterppl-cli does everything"_s;
        QTest::addRow("--help") << QStringList{u"--help"_s} << 0 << u"--screenshot <DIR>"_s;
        QTest::addRow("-h") << QStringList{u"-h"_s} << 0 << u"--synthetic-ranks <N>"_s;
        QTest::addRow("--version") << QStringList{u"--version"_s} << 0 << u"clusterppl "_s; // "clusterppl 0.1.0"
        QTest::addRow("--screenshot") << QStringList{u"--screenshot"_s, u"shots"_s, u"--size"_s, u"640x480"_s} << 0 << u"cluster.png"_s;
    }

    void withoutADisplay()
    {
        QFETCH(QStringList, args);
        QFETCH(int, code);
        QFETCH(QString, printed);
        QTemporaryDir dir;
        QProcess p;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        for (const QString &v : {u"DISPLAY"_s, u"WAYLAND_DISPLAY"_s, u"QT_QPA_PLATFORM"_s})
            env.remove(v);
        env.insert(u"XDG_CONFIG_HOME"_s, dir.filePath(u"config"_s));
        env.insert(u"CLUSTERPPL_STORE"_s, dir.filePath(u"store.sqlite"_s));
        p.setProcessEnvironment(env);
        p.setWorkingDirectory(dir.path());
        p.start(kApp, args);
        QVERIFY(p.waitForFinished(120000 * timeoutScale()));
        const QString out = QString::fromLocal8Bit(p.readAllStandardOutput());
        const QString err = QString::fromLocal8Bit(p.readAllStandardError());
        CPPL_VERIFY2(p.exitStatus() == QProcess::NormalExit && p.exitCode() == code,
                     qPrintable(u"exit %1, stderr: %2"_s.arg(p.exitCode()).arg(err)));
        CPPL_VERIFY2((code == 0 ? out : err).contains(printed), qPrintable(u"stdout: %1\nstderr: %2"_s.arg(out, err)));
        CPPL_VERIFY2(!err.contains(u"could not connect to display"_s) && !err.contains(u"Reinstalling"_s), qPrintable(err));
    }
};

QTEST_GUILESS_MAIN(TestAppScreenshots)
#include "tst_app_screenshots.moc"
