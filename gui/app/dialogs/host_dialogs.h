// SPDX-License-Identifier: MIT
#pragma once

#include "run/preflight.h"

// SSH questions asked on a host's launcher thread, answered in the GUI: unknown host keys (with
// the SHA256 fingerprint) and passphrases/passwords (masked). Nothing typed here is stored.

#include "launch/launcher.h"

#include <QDialog>
#include <QJsonObject>
#include <QPointer>
#include <QSet>

#include <functional>
#include <optional>

namespace cppl::app {

class HostKeyDialog : public QDialog
{
    Q_OBJECT

public:
    enum Answer { Refuse, AcceptOnce, AcceptAlways };
    HostKeyDialog(const QString &host, const QString &fingerprint, QWidget *parent = nullptr);
    [[nodiscard]] Answer answer() const noexcept { return m_answer; }

private:
    Answer m_answer = Refuse;
};

/**
 * Lives on the GUI thread; install() fills a LauncherSettings with callbacks that block the
 * calling host thread (BlockingQueuedConnection) until the user answered. A hook lets tests answer
 * host keys without a dialog.
 */
class SshPrompter : public QObject
{
    Q_OBJECT

public:
    explicit SshPrompter(QWidget *dialogParent);

    void install(cppl::core::LauncherSettings &settings);

    using HostKeyHook = std::function<HostKeyDialog::Answer(const QString &host, const QString &fingerprint)>;
    void setHostKeyHook(HostKeyHook hook) { m_hostKeyHook = std::move(hook); }

    cppl::core::HostKeyAnswer askHostKey(const QString &host, const QString &fingerprint);
    std::optional<QString> askSecret(const QString &prompt);

private:
    QPointer<QWidget> m_parent;
    HostKeyHook m_hostKeyHook;
    QSet<QString> m_acceptedThisSession; // "host fingerprint" accepted once
};

using cppl::core::run::preflightDetails; // run/preflight.h: the CLI's `check` prints the same
using cppl::core::run::preflightSummary;

} // namespace cppl::app
