// SPDX-License-Identifier: MIT
#include "report_export.h"

#include "cppl/errors.h"

#include <QCoreApplication>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QSettings>

using namespace Qt::StringLiterals;

namespace cppl::app {

namespace {

struct FileType
{
    const char *format;
    const char *filter;
};

// In the order the dialog lists them; the first is the default.
constexpr FileType kTypes[] = {
    {"pdf", QT_TRANSLATE_NOOP("ReportExport", "PDF (*.pdf)")},
    {"html", QT_TRANSLATE_NOOP("ReportExport", "HTML, self-contained (*.html *.htm)")},
    {"csv", QT_TRANSLATE_NOOP("ReportExport", "CSV, runs and ranks (*.csv)")},
    {"json", QT_TRANSLATE_NOOP("ReportExport", "JSON (*.json)")},
};

QString filterText(const FileType &t)
{
    return QCoreApplication::translate("ReportExport", t.filter);
}

} // namespace

QString reportFormatOf(const QString &path)
{
    const auto format = cppl::core::report::parseFormat(QFileInfo(path).suffix());
    return format ? cppl::core::report::formatName(*format) : QString();
}

std::optional<ReportTarget> askReportTarget(QWidget *parent, const QString &title, const QString &suggestedName)
{
    QSettings settings;
    const QString dir = settings.value(u"reports/lastDir"_s, QDir::homePath()).toString();
    QStringList filters;
    for (const FileType &t : kTypes)
        filters << filterText(t);
    QString chosen;
    QString path = QFileDialog::getSaveFileName(parent, title, QDir(dir).filePath(suggestedName), filters.join(u";;"_s), &chosen);
    if (path.isEmpty())
        return std::nullopt;
    QString format = reportFormatOf(path);
    if (format.isEmpty()) {
        format = u"pdf"_s;
        for (const FileType &t : kTypes)
            if (chosen == filterText(t))
                format = QString::fromLatin1(t.format);
        path += u'.' + format;
    }
    settings.setValue(u"reports/lastDir"_s, QFileInfo(path).absolutePath());
    return ReportTarget{path, format};
}

QStringList writeReportTo(const std::function<cppl::core::report::ReportData()> &make, const QString &path, const QString &format,
                          QString *error)
{
    const auto f = cppl::core::report::parseFormat(format);
    if (!f) {
        *error = QCoreApplication::translate("ReportExport", "%1: unknown report format \"%2\"; use pdf, html, csv or json").arg(path, format);
        return {};
    }
    try {
        return cppl::core::report::writeReport(make(), *f, path);
    } catch (const cppl::Error &e) {
        *error = QString::fromUtf8(e.what());
    } catch (const std::exception &e) {
        *error = u"%1: %2"_s.arg(path, QString::fromUtf8(e.what()));
    }
    return {};
}

} // namespace cppl::app
