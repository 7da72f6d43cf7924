// SPDX-License-Identifier: MIT
#include "app_main.h"

#include "app_exit_codes.h"
#include "main_window.h"
#include "theme.h"

#include "cppl/config.h"

#include <QApplication>
#include <QCommandLineParser>
#include <QStyleFactory>
#include <QTextStream>
#include <QTimer>

#include <cstdio>
#include <cstring>
#include <optional>

using namespace Qt::StringLiterals;

namespace cppl::app {

namespace {

/// The platform, before QApplication exists: offscreen for --screenshot (and for --help/--version
/// without a display), the scale for --scale. An exit code when there is no display to open the
/// window on.
std::optional<int> preparePlatform(int argc, char **argv)
{
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
    if ((screenshot || (textOnly && noDisplay)) && qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) {
        qputenv("QT_QPA_PLATFORM", "offscreen");
    } else if (noDisplay) {
        std::fputs("clusterppl: no display to open the dashboard on (DISPLAY and WAYLAND_DISPLAY are not set).\n"
                   "  Run it on a desktop, or over ssh with X forwarding (ssh -X), or:\n"
                   "  clusterppl-cli does everything the dashboard does without a display (clusterppl-cli --help);\n"
                   "  clusterppl --screenshot DIR renders the pages to PNG files offscreen.\n",
                   stderr);
        return kAppBadArguments;
    }
    return std::nullopt;
}

void describeApplication()
{
    QApplication::setOrganizationName(u"ClusterPPL"_s);
    QApplication::setApplicationName(u"clusterppl"_s);
    QApplication::setApplicationVersion(QString::fromLatin1(CLUSTERPPL_VERSION_STRING));
    QApplication::setApplicationDisplayName(u"ClusterPPL"_s);
}

struct OptionSet
{
    QCommandLineOption shot{u"screenshot"_s, u"Render every page offscreen to PNG files in DIR and exit."_s, u"DIR"_s};
    QCommandLineOption scale{u"scale"_s, u"Device pixel ratio for --screenshot (1 or 2)."_s, u"N"_s, u"1"_s};
    QCommandLineOption theme{u"theme"_s, u"light or dark (Fusion palettes); default: the desktop's."_s, u"THEME"_s};
    QCommandLineOption ranks{u"synthetic-ranks"_s,
                             u"With --screenshot: feed the Run page a synthetic run of N ranks, and show History and Compare with a "
                             "synthetic node-count sweep (1, 2, 4, 8, ... N ranks, a failed run, a run that lost a rank) in a "
                             "temporary run history; your own run history is not opened."_s,
                             u"N"_s};
    QCommandLineOption profile{u"profile"_s, u"Open this profile instead of the last one."_s, u"FILE"_s};
    QCommandLineOption run{u"run"_s, u"Start the profile's run at once. With --screenshot: run it for real and grab the pages mid-run and finished."_s};
    QCommandLineOption agent{u"agent"_s, u"Agent executable on every host (a build tree's; overrides the profile)."_s, u"PATH"_s};
    QCommandLineOption timeout{u"run-timeout"_s, u"With --screenshot --run: stop the run after S seconds (default 600)."_s, u"S"_s, u"600"_s};
    QCommandLineOption size{u"size"_s, u"With --screenshot: the window's size in logical pixels (default 1500x940)."_s, u"WxH"_s};
};

/// --theme's palette (and the Fusion style), also for every screenshot; false for an unknown theme.
bool applyTheme(const QCommandLineParser &parser, const OptionSet &o, bool screenshot, QTextStream &err)
{
    if (!parser.isSet(o.theme) && !screenshot)
        return true;
    const QString theme = parser.value(o.theme);
    if (!theme.isEmpty() && theme != u"light"_s && theme != u"dark"_s) {
        err << "clusterppl: --theme must be light or dark, got \"" << theme << "\"\n";
        return false;
    }
    QApplication::setStyle(QStyleFactory::create(u"Fusion"_s));
    QApplication::setPalette(themePalette(theme == u"dark"_s));
    return true;
}

/// The checked values of the options; false (the reason on @p err) for one out of range.
bool readOptions(const QCommandLineParser &parser, const OptionSet &o, AppOptions &out, QTextStream &err)
{
    out.screenshot = parser.isSet(o.shot);
    out.screenshotDir = parser.value(o.shot);
    out.profile = parser.value(o.profile);
    out.run = parser.isSet(o.run);
    out.agent = parser.value(o.agent);
    if (parser.isSet(o.ranks)) {
        bool ok = false;
        out.syntheticRanks = parser.value(o.ranks).toInt(&ok);
        if (!ok || out.syntheticRanks < 1 || out.syntheticRanks > 65536) {
            err << "clusterppl: --synthetic-ranks must be 1..65536, got \"" << parser.value(o.ranks) << "\"\n";
            return false;
        }
    }
    if (parser.isSet(o.size)) {
        const QStringList wh = parser.value(o.size).split(u'x');
        bool okW = false, okH = false;
        if (wh.size() == 2)
            out.size = QSize(wh[0].toInt(&okW), wh[1].toInt(&okH));
        const QSize &s = out.size;
        if (!okW || !okH || s.width() < 320 || s.height() < 240 || s.width() > 8192 || s.height() > 8192) {
            err << "clusterppl: --size must be WIDTHxHEIGHT in logical pixels (320x240 to 8192x8192), e.g. 1024x768, got \""
                << parser.value(o.size) << "\"\n";
            return false;
        }
    }
    if (out.screenshot && out.run) {
        bool ok = false;
        out.runTimeoutSeconds = parser.value(o.timeout).toInt(&ok);
        if (!ok || out.runTimeoutSeconds < 1) {
            err << "clusterppl: --run-timeout must be a positive number of seconds, got \"" << parser.value(o.timeout) << "\"\n";
            return false;
        }
    }
    return true;
}

/// The window, its profile, and --run: the application's event loop until the window closes.
int showWindow(QApplication &app, const AppOptions &options)
{
    MainWindow window;
    if (!options.agent.isEmpty())
        window.setAgentOverride(options.agent);
    openStartupProfile(window, options); // a profile that does not open: the message bar says why
    window.show();
    if (options.run)
        QTimer::singleShot(0, &window, [&window] { window.startRun(); });
    return app.exec();
}

} // namespace

bool openStartupProfile(MainWindow &window, const AppOptions &options)
{
    if (options.profile.isEmpty()) {
        window.loadStartupProfile();
        return true;
    }
    return window.openProfile(options.profile);
}

int appMain(int argc, char **argv, ScreenshotCommand screenshots)
{
    if (const std::optional<int> noDisplay = preparePlatform(argc, argv))
        return *noDisplay;
    QApplication app(argc, argv);
    describeApplication();

    QCommandLineParser parser;
    parser.setApplicationDescription(u"ClusterPPL dashboard: configure, launch and watch a cluster evaluation."_s);
    parser.addHelpOption();
    parser.addVersionOption();
    const OptionSet o;
    parser.addOptions({o.shot, o.scale, o.theme, o.ranks, o.profile, o.run, o.agent, o.timeout, o.size});
    parser.process(app);

    QTextStream out(stdout);
    QTextStream err(stderr);
    AppOptions options;
    if (!applyTheme(parser, o, parser.isSet(o.shot), err) || !readOptions(parser, o, options, err))
        return kAppBadArguments;
    if (!options.screenshot)
        return showWindow(app, options);
    if (!screenshots) {
        err << "clusterppl: this build has no --screenshot\n";
        return kAppBadArguments;
    }
    return screenshots(options, out, err);
}

} // namespace cppl::app
