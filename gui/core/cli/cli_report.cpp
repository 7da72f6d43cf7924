// SPDX-License-Identifier: MIT
#include "cli/cli_report.h"

#include "cli/cli_commands.h"
#include "cli/cli_history.h"
#include "report/report.h"
#include "history/run_history.h"

#include "cppl/errors.h"

#include <QCommandLineParser>
#include <QFileInfo>
#include <QGuiApplication>
#include <QTextStream>

#include <stdexcept>

using namespace Qt::StringLiterals;

namespace cppl::core {

namespace {

const QString kReportUsage = uR"(clusterppl-cli report RUN... --format pdf|html|csv|json -o PATH [--store FILE] [--threshold PCT]

  One RUN: a run report (setup, result with the deviation from the stored one-rank baseline, the
  per-rank table, charts, alerts). Several: a comparison report (scaling table, efficiency, comm
  share, recommendation, projection) followed by each run.
  pdf   A4, vector charts, selectable text.
  html  One self-contained file: inline CSS and SVG charts, no network, light and dark.
  csv   PATH gets one row per run; PATH with "-ranks" before the extension one row per rank
        (report.csv -> report-ranks.csv); when PATH is a directory: runs.csv and ranks.csv.
  json  Everything: each stored run as `export` writes it, and the comparison.
  --format defaults to the extension of PATH. docs/reports.md describes every field.

Exit codes: 0 written, 2 bad arguments, 3 store or file not readable/writable, 4 unknown run id.
)"_s;

} // namespace

int cliReport(const QStringList &arguments, QTextStream &out, QTextStream &err)
{
    const QStringList args = arguments.mid(1);
    if (args.contains(u"--help"_s) || args.contains(u"-h"_s)) {
        out << kReportUsage;
        return kCliOk;
    }
    QCommandLineParser p;
    const QCommandLineOption format(u"format"_s, {}, u"FORMAT"_s), output({u"o"_s, u"output"_s}, {}, u"PATH"_s),
        storeOpt(u"store"_s, {}, u"FILE"_s), threshold(u"threshold"_s, {}, u"PCT"_s);
    p.addOptions({format, output, storeOpt, threshold});
    auto bad = [&](const QString &why) {
        err << "clusterppl-cli: report: " << why << "\n" << kReportUsage;
        return kCliBadArguments;
    };
    if (!p.parse(QStringList{u"clusterppl-cli"_s} + args))
        return bad(p.errorText());
    if (p.positionalArguments().isEmpty())
        return bad(u"give one RUN id (a run report) or several (a comparison report); clusterppl-cli list shows them"_s);
    if (!p.isSet(output))
        return bad(u"-o PATH is required (the report file; for csv also PATH-ranks.csv)"_s);
    const QString path = p.value(output);
    const QString formatText = p.isSet(format) ? p.value(format) : QFileInfo(path).suffix();
    const auto fmt = report::parseFormat(formatText);
    if (!fmt)
        return bad(u"--format: \""_s + formatText + u"\" is not one of pdf, html, csv, json"_s);
    double thr = 0.75;
    if (p.isSet(threshold)) {
        bool ok = false;
        thr = p.value(threshold).toDouble(&ok) / 100;
        if (!ok || thr <= 0 || thr > 1)
            return bad(u"--threshold: expected a percentage in (0, 100], got \""_s + p.value(threshold) + u'"');
    }
    if ((*fmt == report::ReportFormat::Pdf || *fmt == report::ReportFormat::Html) && !qobject_cast<QGuiApplication *>(QCoreApplication::instance())) {
        err << "clusterppl-cli: report: the " << report::formatName(*fmt)
            << " format draws charts and needs a QGuiApplication; this build of the command has none\n";
        return kCliFailed;
    }

    const history::RunHistory s(p.isSet(storeOpt) ? p.value(storeOpt) : defaultHistoryPath(err));
    report::ReportData data;
    try {
        data = report::loadReport(s, p.positionalArguments(), thr);
    } catch (const std::out_of_range &e) {
        err << "clusterppl-cli: " << e.what() << '\n';
        return kCliUnknownRun;
    }
    const QStringList written = report::writeReport(data, *fmt, path);
    for (const QString &f : written)
        out << "wrote " << QFileInfo(f).absoluteFilePath() << '\n';
    return kCliOk;
}

} // namespace cppl::core
