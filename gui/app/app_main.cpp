// SPDX-License-Identifier: MIT
#include "app_main.h"

#include "app_exit_codes.h"
#include "live_capture.h"
#include "main_window.h"
#include "screenshot.h"

#include "cppl/config.h"
#include "cppl/errors.h"

#include <QApplication>
#include <QCommandLineParser>
#include <QSize>
#include <QStyleFactory>
#include <QTextStream>
#include <QTimer>

#include <cstdio>
#include <cstring>
#include <memory>

using namespace Qt::StringLiterals;

namespace cppl::app {

int appMain(int argc, char **argv)
{
    // Options that must act before QApplication exists (platform, scale) are read by hand.
    bool screenshot = false;
    bool textOnly = false; // --help, --version: answered with or without a display
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        if (std::strcmp(a, "--screenshot") == 0)
            screenshot = true;
        if (std::strcmp(a, "--scale") == 0 && i + 1 < argc)
            qputenv("QT_SCALE_FACTOR", argv[i + 1]);
        for (const char *o : {"-h", "-?", "--help", "--help-all", "-v", "--version"})
            textOnly = textOnly || std::strcmp(a, o) == 0;
    }
    // Without a display Qt's own words are "could not connect to display" and "Reinstalling the
    // application may fix this problem", which sends a user on a cluster's login node the wrong
    // way. A platform the user chose (QT_QPA_PLATFORM) is left to Qt.
    const bool noDisplay = qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM") && qEnvironmentVariableIsEmpty("DISPLAY")
                           && qEnvironmentVariableIsEmpty("WAYLAND_DISPLAY");
    if ((screenshot || (textOnly && noDisplay)) && qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM"))
        qputenv("QT_QPA_PLATFORM", "offscreen");
    else if (noDisplay) {
        std::fputs("clusterppl: no display to open the dashboard on (DISPLAY and WAYLAND_DISPLAY are not set).\n"
                   "  Run it on a desktop, or over ssh with X forwarding (ssh -X), or:\n"
                   "  clusterppl-cli does everything the dashboard does without a display (clusterppl-cli --help);\n"
                   "  clusterppl --screenshot DIR renders the pages to PNG files offscreen.\n",
                   stderr);
        return kAppBadArguments;
    }

    QApplication app(argc, argv);
    QApplication::setOrganizationName(u"ClusterPPL"_s);
    QApplication::setApplicationName(u"clusterppl"_s);
    QApplication::setApplicationVersion(QString::fromLatin1(CLUSTERPPL_VERSION_STRING));
    QApplication::setApplicationDisplayName(u"ClusterPPL"_s);

    QCommandLineParser parser;
    parser.setApplicationDescription(u"ClusterPPL dashboard: configure, launch and watch a cluster evaluation."_s);
    parser.addHelpOption();
    parser.addVersionOption();
    const QCommandLineOption shotOpt(u"screenshot"_s, u"Render every page offscreen to PNG files in DIR and exit."_s, u"DIR"_s);
    const QCommandLineOption scaleOpt(u"scale"_s, u"Device pixel ratio for --screenshot (1 or 2)."_s, u"N"_s, u"1"_s);
    const QCommandLineOption themeOpt(u"theme"_s, u"light or dark (Fusion palettes); default: the desktop's."_s, u"THEME"_s);
    const QCommandLineOption ranksOpt(u"synthetic-ranks"_s, u"With --screenshot: feed the Run page a synthetic run of N ranks, and show History and Compare with a synthetic "
                                      "node-count sweep (1, 2, 4, 8, ... N ranks, a failed run, a run that lost a rank) in a temporary run "
                                      "store; your own run store is not opened."_s, u"N"_s);
    const QCommandLineOption profileOpt(u"profile"_s, u"Open this profile instead of the last one."_s, u"FILE"_s);
    const QCommandLineOption runOpt(u"run"_s,
                                    u"Start the profile's run at once. With --screenshot: run it for real and grab the pages mid-run and finished."_s);
    const QCommandLineOption agentOpt(u"agent"_s, u"Agent executable on every host (a build tree's; overrides the profile)."_s, u"PATH"_s);
    const QCommandLineOption timeoutOpt(u"run-timeout"_s, u"With --screenshot --run: stop the run after S seconds (default 600)."_s, u"S"_s, u"600"_s);
    const QCommandLineOption sizeOpt(u"size"_s, u"With --screenshot: the window's size in logical pixels (default 1500x940)."_s, u"WxH"_s);
    parser.addOptions({shotOpt, scaleOpt, themeOpt, ranksOpt, profileOpt, runOpt, agentOpt, timeoutOpt, sizeOpt});
    parser.process(app);

    QTextStream err(stderr);
    if (parser.isSet(themeOpt) || screenshot) {
        const QString theme = parser.value(themeOpt);
        if (!theme.isEmpty() && theme != u"light"_s && theme != u"dark"_s) {
            err << "clusterppl: --theme must be light or dark, got \"" << theme << "\"\n";
            return kAppBadArguments;
        }
        QApplication::setStyle(QStyleFactory::create(u"Fusion"_s));
        QApplication::setPalette(themePalette(theme == u"dark"_s));
    }
    int ranks = 0;
    if (parser.isSet(ranksOpt)) {
        bool ok = false;
        ranks = parser.value(ranksOpt).toInt(&ok);
        if (!ok || ranks < 1 || ranks > 65536) {
            err << "clusterppl: --synthetic-ranks must be 1..65536, got \"" << parser.value(ranksOpt) << "\"\n";
            return kAppBadArguments;
        }
    }

    QSize size(1500, 940);
    if (parser.isSet(sizeOpt)) {
        const QStringList wh = parser.value(sizeOpt).split(u'x');
        bool okW = false, okH = false;
        if (wh.size() == 2)
            size = QSize(wh[0].toInt(&okW), wh[1].toInt(&okH));
        if (!okW || !okH || size.width() < 320 || size.height() < 240 || size.width() > 8192 || size.height() > 8192) {
            err << "clusterppl: --size must be WIDTHxHEIGHT in logical pixels (320x240 to 8192x8192), e.g. 1024x768, got \""
                << parser.value(sizeOpt) << "\"\n";
            return kAppBadArguments;
        }
    }

    // Screenshots with synthetic ranks show History and Compare with a synthetic sweep, from a
    // temporary store the window opens instead of the user's (made before the window, which may
    // open its store at once: the page it remembers).
    std::unique_ptr<ScreenshotHistory> shotHistory;
    if (screenshot && ranks > 0 && !parser.isSet(runOpt)) {
        try {
            shotHistory = std::make_unique<ScreenshotHistory>(ranks);
        } catch (const cppl::Error &e) {
            err << "clusterppl: " << e.what() << '\n';
            return kAppIoError;
        }
    }
    MainWindow window(nullptr, shotHistory ? shotHistory->path() : QString());
    if (parser.isSet(agentOpt))
        window.setAgentOverride(parser.value(agentOpt));
    if (parser.isSet(profileOpt)) {
        if (!window.openProfile(parser.value(profileOpt)) && screenshot) {
            err << "clusterppl: cannot open the profile " << parser.value(profileOpt) << '\n';
            return kAppIoError;
        }
    } else {
        window.loadStartupProfile();
    }
    if (screenshot && parser.isSet(runOpt)) {
        bool ok = false;
        const int timeout = parser.value(timeoutOpt).toInt(&ok);
        if (!ok || timeout < 1) {
            err << "clusterppl: --run-timeout must be a positive number of seconds, got \"" << parser.value(timeoutOpt) << "\"\n";
            return kAppBadArguments;
        }
        window.resize(size);
        QString error;
        const QStringList files = captureLiveRun(window, parser.value(shotOpt), timeout, &error);
        if (files.isEmpty()) {
            err << "clusterppl: " << error << '\n';
            return kAppCaptureFailed;
        }
        QTextStream out(stdout);
        for (const QString &f : files)
            out << f << '\n';
        return kAppOk;
    }
    if (screenshot) {
        ScreenshotOptions o;
        o.directory = parser.value(shotOpt);
        o.syntheticRanks = ranks;
        o.sweep = shotHistory ? &shotHistory->sweep() : nullptr;
        o.width = size.width();
        o.height = size.height();
        QString error;
        const QStringList files = renderScreenshots(window, o, &error);
        if (files.isEmpty()) {
            err << "clusterppl: " << error << '\n';
            return kAppIoError;
        }
        QTextStream out(stdout);
        for (const QString &f : files)
            out << f << '\n';
        return kAppOk;
    }
    window.show();
    if (parser.isSet(runOpt))
        QTimer::singleShot(0, &window, [&window] { window.startRun(); });
    return app.exec();
}

} // namespace cppl::app
