// SPDX-License-Identifier: MIT
#include "run/agent_locator.h"

#include <QCoreApplication>
#include <QFileInfo>
#include <QStandardPaths>
#include <QStringList>

using namespace Qt::StringLiterals;

namespace cppl::core::run {

QString localAgentFor(const ClusterProfile &profile)
{
    if (profile.hosts.empty())
        return {};
    const QString name = QString::fromStdString(profile.hosts.front().agent);
    if (name.contains(u'/') || !QStandardPaths::findExecutable(name).isEmpty())
        return {};
    const QString dir = QCoreApplication::applicationDirPath();
    for (const QString &candidate : {QString(dir + u'/' + name), QString(dir + u"/../agent/"_s + name), QString(dir + u"/../../agent/"_s + name)})
        if (QFileInfo(candidate).isExecutable())
            return QFileInfo(candidate).canonicalFilePath();
    return {};
}

} // namespace cppl::core::run
