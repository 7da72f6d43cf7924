// SPDX-License-Identifier: MIT
// scripts/build-agent.sh, the way a cluster's user runs it: against this build tree (already
// configured, so nothing is compiled again) it installs the agent into a new prefix and checks the
// installed agent in a clean environment, whose eval gives the build's own result; each thing it
// cannot use (arguments, a Python without torch, a broken LibTorch CMake config, an old CMake)
// fails with its own row and cause, and an old compiler is named. A relocated LibTorch's RUNPATH
// was checked by hand (docs/packaging.md, "The agent on GPU nodes"): it needs a whole agent build.
#include "test_paths.h"
#include "test_process.h"
#include "test_verify.h"

#include <QDir>
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

using namespace cppl::test;

namespace {

const QString kScript = QStringLiteral(CPPL_SOURCE_DIR "/scripts/build-agent.sh");

struct Script
{
    int exitCode = -1;
    QString out;    ///< stdout and stderr
    QString rows;   ///< CPPL_BUILD_AGENT_ROWS: "step\tresult\tdetail" lines
    [[nodiscard]] QString describe() const { return QStringLiteral("exit %1\n%2").arg(exitCode).arg(out); }
    /// The row of @p step: "result\tdetail", or empty.
    [[nodiscard]] QString row(const QString &step) const
    {
        for (const QString &line : rows.split(QLatin1Char('\n')))
            if (line.startsWith(step + QLatin1Char('\t')))
                return line.mid(step.size() + 1);
        return {};
    }
};

Script runScript(const QTemporaryDir &dir, const QStringList &args, const QMap<QString, QString> &extraEnv = {})
{
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    const QString rows = dir.filePath(QStringLiteral("rows.tsv"));
    QFile::remove(rows);
    env.insert(QStringLiteral("CPPL_BUILD_AGENT_ROWS"), rows);
    for (auto it = extraEnv.begin(); it != extraEnv.end(); ++it)
        env.insert(it.key(), it.value());
    QProcess p;
    p.setProcessEnvironment(env);
    p.setProcessChannelMode(QProcess::MergedChannels);
    p.start(QStringLiteral("bash"), QStringList{kScript} + args);
    if (!p.waitForFinished(600000)) {
        p.kill();
        p.waitForFinished();
        return {-1, QStringLiteral("timed out"), {}};
    }
    return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -2, QString::fromUtf8(p.readAll()), QString::fromUtf8(readFile(rows))};
}

/// A Python package named torch in @p dir (put on PYTHONPATH) whose body is @p body.
bool fakeTorch(const QString &dir, const QByteArray &body)
{
    return QDir().mkpath(dir + QStringLiteral("/torch")) && writeFile(dir + QStringLiteral("/torch/__init__.py"), body);
}

} // namespace

class TestBuildAgent : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void installsAndChecksTheInstalledAgent()
    {
        QTemporaryDir dir;
        const QString prefix = dir.filePath(QStringLiteral("opt/clusterppl"));
        const Script s = runScript(dir, {QStringLiteral("--build-dir"), QStringLiteral(CPPL_BINARY_DIR), QStringLiteral("--prefix"), prefix,
                                         QStringLiteral("--python"), QStringLiteral("/usr/bin/python3"), QStringLiteral("--jobs"), QStringLiteral("1")});
        CPPL_VERIFY2(s.exitCode == 0, qPrintable(s.describe()));
        CPPL_VERIFY2(s.row(QStringLiteral("torch package")).startsWith(QStringLiteral("ok\t")), qPrintable(s.describe()));
        CPPL_VERIFY2(s.row(QStringLiteral("configure")) == QStringLiteral("ok\talready configured: " CPPL_BINARY_DIR " (")
                             + s.row(QStringLiteral("configure")).section(QStringLiteral(" ("), 1),
                     qPrintable(s.describe()));
        CPPL_VERIFY2(s.row(QStringLiteral("install")).startsWith(QStringLiteral("ok\t") + prefix + QStringLiteral("/bin/clusterppl-agent")), qPrintable(s.describe()));
        for (const char *file : {"/bin/clusterppl-agent", "/lib/clusterppl/clusterppl-agent-torch", "/share/clusterppl/models/shakespeare-byte-llama/config.json"})
            CPPL_VERIFY2(QFileInfo::exists(prefix + QLatin1String(file)), file);
        // Debian's LibTorch is in the system's directories: nothing to add, and never the build tree.
        CPPL_VERIFY2(s.row(QStringLiteral("libraries")).endsWith(QStringLiteral("(system directories, no RUNPATH)")), qPrintable(s.describe()));
        const ProcessResult elf = runProcess(QStringLiteral("readelf"), {QStringLiteral("-d"), prefix + QStringLiteral("/lib/clusterppl/clusterppl-agent-torch")});
        QCOMPARE(elf.exitCode, 0);
        CPPL_VERIFY2(!elf.out.contains(QStringLiteral("RUNPATH")) && !elf.out.contains(QStringLiteral("RPATH")), qPrintable(elf.out));
        CPPL_VERIFY2(s.row(QStringLiteral("installed agent: preflight")).startsWith(QStringLiteral("ok\thost ")), qPrintable(s.describe()));
        // libgloo-dev's headers: CPU ranks can be combined, and the row says where Gloo came from.
        CPPL_VERIFY2(s.row(QStringLiteral("Gloo")) == QStringLiteral("ok\theaders in /usr/include"), qPrintable(s.describe()));

        // The installed agent's eval gives the build's own result for the same windows.
        const ProcessResult own = runProcess(kAgent, {QStringLiteral("eval"), QStringLiteral("--model"), kModel, QStringLiteral("--text"), kText,
                                                      QStringLiteral("--tokenizer"), QStringLiteral("bytes"), QStringLiteral("--protocol"),
                                                      QStringLiteral("llama.cpp"), QStringLiteral("--context"), QStringLiteral("256"),
                                                      QStringLiteral("--batch"), QStringLiteral("4"), QStringLiteral("--max-windows"),
                                                      QStringLiteral("8"), QStringLiteral("--quiet")});
        QCOMPARE(own.exitCode, 0);
        const QString estimate = own.out.section(QStringLiteral("Final estimate: "), 1).trimmed();
        QVERIFY2(estimate.startsWith(QStringLiteral("PPL = ")), qPrintable(own.describe()));
        CPPL_VERIFY2(s.row(QStringLiteral("installed agent: eval cpu")) == QStringLiteral("ok\t") + estimate + QStringLiteral(" on 8 windows of the demo model"),
                     qPrintable(s.describe()));
        // What to put in a profile.
        CPPL_VERIFY2(s.out.contains(QStringLiteral("\"agent\": \"") + prefix + QStringLiteral("/bin/clusterppl-agent\"")), qPrintable(s.describe()));
        CPPL_VERIFY2(!s.out.contains(QStringLiteral(" FAIL ")), qPrintable(s.describe()));
    }

    void refusesBadArguments_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QString>("message");
        QTest::newRow("unknown") << QStringList{QStringLiteral("--gpu")} << QStringLiteral("build-agent.sh: unknown argument '--gpu'");
        QTest::newRow("no value") << QStringList{QStringLiteral("--prefix")} << QStringLiteral("build-agent.sh: --prefix needs a value");
        QTest::newRow("jobs") << QStringList{QStringLiteral("--jobs"), QStringLiteral("0")}
                              << QStringLiteral("build-agent.sh: --jobs takes a positive number, not '0'");
        QTest::newRow("gloo include") << QStringList{QStringLiteral("--gloo-include"), QStringLiteral("/nonexistent")}
                                      << QStringLiteral("build-agent.sh: --gloo-include /nonexistent: no gloo/algorithm.h and gloo/config.h there "
                                                        "(an installed Gloo's include directory)");
    }
    void refusesBadArguments()
    {
        QFETCH(QStringList, args);
        QFETCH(QString, message);
        QTemporaryDir dir;
        const Script s = runScript(dir, args);
        CPPL_VERIFY2(s.exitCode == 2 && s.out.startsWith(message + QStringLiteral(" (--help lists the arguments)")), qPrintable(s.describe()));
        CPPL_VERIFY2(s.rows.isEmpty(), qPrintable(s.describe())); // nothing ran
        const Script help = runScript(dir, {QStringLiteral("--help")});
        CPPL_VERIFY2(help.exitCode == 0 && help.out.contains(QStringLiteral("--prefix DIR")), qPrintable(help.describe()));
    }

    /// Gloo's headers from a directory of their own (--gloo-include: a pip torch has none): CMake
    /// takes them as a system directory for the one file that includes them; libgloo-dev's, in
    /// /usr/include, is never added (an -isystem /usr/include breaks libstdc++'s #include_next).
    void glooHeadersFromElsewhere()
    {
        QTemporaryDir dir;
        const QString inc = dir.filePath(QStringLiteral("gloo-include"));
        QVERIFY(QDir().mkpath(inc));
        const ProcessResult copy = runProcess(QStringLiteral("cp"), {QStringLiteral("-r"), QStringLiteral("/usr/include/gloo"), inc});
        CPPL_VERIFY2(copy.exitCode == 0, qPrintable(copy.describe()));
        const QString build = dir.filePath(QStringLiteral("build"));
        const ProcessResult conf = runProcess(QStringLiteral("cmake"), {QStringLiteral("-S"), QStringLiteral(CPPL_SOURCE_DIR), QStringLiteral("-B"), build,
                                                                         QStringLiteral("-G"), QStringLiteral("Ninja"), QStringLiteral("-DCLUSTERPPL_BUILD_GUI=OFF"),
                                                                         QStringLiteral("-DBUILD_TESTING=OFF"), QStringLiteral("-DCLUSTERPPL_BUILD_BENCH=OFF"),
                                                                         QStringLiteral("-DGLOO_INCLUDE_DIR=") + inc},
                                              300000);
        CPPL_VERIFY2(conf.exitCode == 0, qPrintable(conf.describe()));
        CPPL_VERIFY2(readFile(build + QStringLiteral("/generated/cppl/config.h")).contains("#define CLUSTERPPL_HAVE_GLOO 1"), qPrintable(conf.describe()));
        auto glooCommand = [](const QString &tree) {
            return runProcess(QStringLiteral("ninja"), {QStringLiteral("-C"), tree, QStringLiteral("-t"), QStringLiteral("commands"),
                                                        QStringLiteral("agent/CMakeFiles/clusterppl_agent_libtorch.dir/lib/distributed/gloo_backend.cpp.o")})
                .out.trimmed()
                .section(QLatin1Char('\n'), -1);
        };
        const QString theirs = glooCommand(build);
        CPPL_VERIFY2(theirs.contains(QStringLiteral("-isystem ") + inc + QLatin1Char(' ')) && theirs.contains(QStringLiteral("-DUSE_C10D_GLOO")),
                     qPrintable(theirs));
        const QString ours = glooCommand(QStringLiteral(CPPL_BINARY_DIR)); // libgloo-dev's
        CPPL_VERIFY2(ours.contains(QStringLiteral("-DUSE_C10D_GLOO")) && !ours.contains(QStringLiteral("-isystem /usr/include ")), qPrintable(ours));
    }

    /// Each missing piece: its own row, FAIL, exit 1, with the cause and what to do.
    void failsWithTheCause_data()
    {
        QTest::addColumn<QByteArray>("torch");      ///< the fake torch package's __init__.py; empty: none
        QTest::addColumn<QByteArray>("torchCmake"); ///< its TorchConfig.cmake; empty: none
        QTest::addColumn<QString>("cmakeVersion");  ///< a fake cmake on PATH says this version; empty: the real one
        QTest::addColumn<QString>("step");
        QTest::addColumn<QString>("detail");        ///< the row's detail contains this
        QTest::newRow("python without torch") << QByteArray("raise ImportError('no torch in this venv')\n") << QByteArray() << QString()
                                              << QStringLiteral("torch package")
                                              << QStringLiteral("/usr/bin/python3 cannot import torch: ImportError: no torch in this venv "
                                                                "(--python names another interpreter, e.g. a venv's bin/python)");
        const QByteArray fake = "import types\n__version__ = '9.9.9'\nversion = types.SimpleNamespace(cuda=None)\n"
                                "utils = types.SimpleNamespace(cmake_prefix_path=__path__[0] + '/share/cmake')\n";
        QTest::newRow("broken LibTorch config") << fake << QByteArray("message(FATAL_ERROR \"this LibTorch is broken on purpose\")\n") << QString()
                                                << QStringLiteral("configure") << QStringLiteral("this LibTorch is broken on purpose");
        QTest::newRow("cmake too old") << QByteArray() << QByteArray() << QStringLiteral("3.20.2") << QStringLiteral("cmake")
                                       << QStringLiteral("3.20.2 is too old: 3.25 or newer is needed");
    }
    void failsWithTheCause()
    {
        QFETCH(QByteArray, torch);
        QFETCH(QByteArray, torchCmake);
        QFETCH(QString, cmakeVersion);
        QFETCH(QString, step);
        QFETCH(QString, detail);
        QTemporaryDir dir;
        QMap<QString, QString> env;
        if (!torch.isEmpty()) {
            QVERIFY(fakeTorch(dir.filePath(QStringLiteral("py")), torch));
            env.insert(QStringLiteral("PYTHONPATH"), dir.filePath(QStringLiteral("py")));
        }
        if (!torchCmake.isEmpty()) {
            QVERIFY(QDir().mkpath(dir.filePath(QStringLiteral("py/torch/share/cmake/Torch"))));
            QVERIFY(writeFile(dir.filePath(QStringLiteral("py/torch/share/cmake/Torch/TorchConfig.cmake")), torchCmake));
        }
        if (!cmakeVersion.isEmpty()) {
            QVERIFY(QDir().mkpath(dir.filePath(QStringLiteral("bin"))));
            const QString fakeCmake = dir.filePath(QStringLiteral("bin/cmake"));
            QVERIFY(writeFile(fakeCmake, "#!/bin/sh\necho 'cmake version " + cmakeVersion.toUtf8() + "'\n"));
            QVERIFY(QFile::setPermissions(fakeCmake, QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner));
            env.insert(QStringLiteral("PATH"), dir.filePath(QStringLiteral("bin:")) + qEnvironmentVariable("PATH"));
        }
        const QString build = dir.filePath(QStringLiteral("build"));
        const Script s = runScript(dir, {QStringLiteral("--build-dir"), build, QStringLiteral("--prefix"), dir.filePath(QStringLiteral("prefix")),
                                         QStringLiteral("--python"), QStringLiteral("/usr/bin/python3")},
                                   env);
        CPPL_VERIFY2(s.exitCode == 1, qPrintable(s.describe()));
        const QString row = s.row(step);
        CPPL_VERIFY2(row.startsWith(QStringLiteral("FAIL\t")) && row.contains(detail), qPrintable(s.describe()));
        // The table says it too, and the failing step is the last: nothing after it ran.
        CPPL_VERIFY2(s.out.contains(QStringLiteral("== build-agent summary")), qPrintable(s.describe()));
        CPPL_VERIFY2(s.rows.trimmed().section(QLatin1Char('\n'), -1).startsWith(step + QLatin1Char('\t')), qPrintable(s.describe()));
        QVERIFY(!QFileInfo::exists(dir.filePath(QStringLiteral("prefix/bin/clusterppl-agent"))));
        // A failed configure leaves no cache behind, so that the next run configures again.
        QVERIFY(!QFileInfo::exists(build + QStringLiteral("/CMakeCache.txt")));
        if (step == QStringLiteral("configure"))
            CPPL_VERIFY2(row.endsWith(QStringLiteral("(all of it: ") + build + QStringLiteral("/configure.log)")), qPrintable(s.describe()));
    }

    /// A compiler older than the one the project is built with: said before anything is built,
    /// and the compiler's own refusal then ends the configure.
    void oldCompilerIsNamed()
    {
        QTemporaryDir dir;
        const QString fake = dir.filePath(QStringLiteral("g++-8"));
        QVERIFY(writeFile(fake, "#!/bin/sh\ncase \"$1\" in\n  --version) echo 'c++ (GCC) 8.5.0 20210514 (Red Hat 8.5.0-4)'; "
                                "echo 'Copyright (C) 2018 Free Software Foundation, Inc.';;\n"
                                "  -dumpversion) echo 8;;\n  *) echo 'g++-8: error: unrecognized command-line option' >&2; exit 1;;\nesac\n"));
        QVERIFY(QFile::setPermissions(fake, QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner));
        const QString build = dir.filePath(QStringLiteral("build"));
        const Script s = runScript(dir, {QStringLiteral("--build-dir"), build, QStringLiteral("--prefix"), dir.filePath(QStringLiteral("prefix")),
                                         QStringLiteral("--python"), QStringLiteral("/usr/bin/python3")},
                                   {{QStringLiteral("CXX"), fake}});
        CPPL_VERIFY2(s.exitCode == 1, qPrintable(s.describe()));
        CPPL_VERIFY2(s.row(QStringLiteral("cmake")).startsWith(QStringLiteral("ok\t")) && s.row(QStringLiteral("cmake")).contains(QStringLiteral("8.5.0")),
                     qPrintable(s.describe()));
        CPPL_VERIFY2(s.row(QStringLiteral("compiler")).startsWith(QStringLiteral("warn\tGCC 8: the agent is built and tested with GCC 12")),
                     qPrintable(s.describe()));
        CPPL_VERIFY2(s.row(QStringLiteral("configure")).startsWith(QStringLiteral("FAIL\t")), qPrintable(s.describe()));
    }
};

QTEST_GUILESS_MAIN(TestBuildAgent)
#include "tst_build_agent.moc"
