// SPDX-License-Identifier: MIT
#include "app_paths.h"

#include <QCoreApplication>
#include <QFileInfo>
#include <QStandardPaths>
#include <QStringList>

using namespace Qt::StringLiterals;

namespace cppl::app {

QString defaultProfilePath()
{
    const QString dir = QCoreApplication::applicationDirPath();
    // Installed first (relocatable prefix), then the configured prefix, then a build tree's sources:
    // an installed binary must never pick up a stale checkout.
    const QStringList candidates{
        QString(dir + u"/../share/clusterppl/profiles/local-default.json"_s),
        QString(QStringLiteral(CPPL_INSTALL_DATADIR) + u"/profiles/local-default.json"_s),
        QString(QStringLiteral(CPPL_SOURCE_DIR) + u"/resources/profiles/local-default.json"_s),
    };
    for (const QString &c : candidates)
        if (QFileInfo(c).isReadable())
            return QFileInfo(c).canonicalFilePath();
    return {};
}

QString findAgent(const QString &name)
{
    if (name.contains(u'/'))
        return QFileInfo(name).isExecutable() ? QFileInfo(name).absoluteFilePath() : QString();
    const QString dir = QCoreApplication::applicationDirPath();
    for (const QString &c : {QString(dir + u'/' + name), QString(dir + u"/../agent/"_s + name),
                             QString(dir + u"/../../agent/"_s + name)})
        if (QFileInfo(c).isExecutable())
            return QFileInfo(c).canonicalFilePath();
    return QStandardPaths::findExecutable(name);
}

} // namespace cppl::app
