// SPDX-License-Identifier: MIT
// The Cluster page's files: profiles (JSON) and DeepSpeed hostfiles, read and written with
// shared/'s parsers, every failure reported through failed() with its specific cause.
#include "cluster_page.h"

#include "profile_model.h"

#include "cppl/hostfile.h"

#include <QFile>
#include <QFileInfo>
#include <QSaveFile>

#include <optional>

using namespace Qt::StringLiterals;

namespace cppl::app {

namespace {
QString qs(const std::string &s) { return QString::fromStdString(s); }

// Files are checked in order (exists -> readable -> format -> content) so the message names the
// first thing that is actually wrong.
std::optional<QByteArray> readFile(const QString &path, const QString &what, QString &error)
{
    const QFileInfo fi(path);
    if (!fi.exists()) {
        error = QObject::tr("%1: the %2 does not exist").arg(path, what);
        return std::nullopt;
    }
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) {
        error = QObject::tr("%1: cannot read the %2 (%3)").arg(path, what, f.errorString());
        return std::nullopt;
    }
    return f.readAll();
}

bool writeFile(const QString &path, const QByteArray &bytes, QString &error)
{
    QSaveFile f(path);
    if (!f.open(QIODevice::WriteOnly) || f.write(bytes) != bytes.size() || !f.commit()) {
        error = QObject::tr("%1: cannot write (%2); choose a writable folder").arg(path, f.errorString());
        return false;
    }
    return true;
}

} // namespace

bool ClusterPage::openProfile(const QString &path)
{
    QString error;
    const auto bytes = readFile(path, tr("profile"), error);
    if (!bytes) {
        Q_EMIT failed(error);
        return false;
    }
    const ProfileParseResult r = parseProfile(std::string_view(bytes->constData(), size_t(bytes->size())), path.toStdString());
    if (!r.ok()) {
        QStringList lines;
        for (const auto &e : r.errors)
            lines << qs(e);
        Q_EMIT failed(tr("%1 is not a valid profile:\n%2").arg(path, lines.join(u'\n')));
        return false;
    }
    setProfile(r.profile, QFileInfo(path).absoluteFilePath());
    Q_EMIT info(tr("Opened %1").arg(QFileInfo(path).fileName())); // the full path: the status bar's profile label
    return true;
}

bool ClusterPage::saveProfile(const QString &path)
{
    QString error;
    if (!writeFile(path, QByteArray::fromStdString(profileToJson(m_model->profile())), error)) {
        Q_EMIT failed(error);
        return false;
    }
    m_path = QFileInfo(path).absoluteFilePath();
    Q_EMIT info(tr("Saved %1").arg(QFileInfo(path).fileName()));
    return true;
}

bool ClusterPage::importHostfile(const QString &path)
{
    QString error;
    const auto bytes = readFile(path, tr("hostfile"), error);
    if (!bytes) {
        Q_EMIT failed(error);
        return false;
    }
    const HostfileParseResult r = parseHostfile(std::string_view(bytes->constData(), size_t(bytes->size())), path.toStdString());
    if (!r.ok()) {
        QStringList lines;
        for (const auto &e : r.errors)
            lines << qs(e);
        Q_EMIT failed(tr("%1 is not a valid hostfile:\n%2").arg(path, lines.join(u'\n')));
        return false;
    }
    // The hosts replace the cluster; the evaluation settings and thresholds stay, and so does
    // what every earlier host shared (the agent's path, the SSH login...), which a hostfile cannot say.
    ClusterProfile p = profileFromHosts(r.hosts, "ssh");
    const ClusterProfile old = m_model->profile();
    p.evaluation = old.evaluation;
    p.thresholds = old.thresholds;
    p.name = QFileInfo(path).completeBaseName().toStdString();
    QStringList kept;
    for (const std::string &f : carrySharedHostSettings(old.hosts, p.hosts))
        kept << qs(f);
    setProfile(p, m_path);
    QString msg = r.hosts.size() == 1 ? tr("Imported 1 host from %1").arg(path) : tr("Imported %1 hosts from %2").arg(r.hosts.size()).arg(path);
    if (!kept.isEmpty())
        msg += tr("; every host keeps what the earlier hosts shared: %1").arg(kept.join(u", "_s));
    Q_EMIT info(msg);
    return true;
}

bool ClusterPage::exportHostfile(const QString &path)
{
    QString error;
    if (!writeFile(path, QByteArray::fromStdString(hostfileFromHosts(m_model->profile().hosts)), error)) {
        Q_EMIT failed(error);
        return false;
    }
    Q_EMIT info(tr("Exported the hosts to %1").arg(path));
    return true;
}

} // namespace cppl::app
