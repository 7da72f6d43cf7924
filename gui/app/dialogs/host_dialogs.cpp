// SPDX-License-Identifier: MIT
#include "host_dialogs.h"

#include <QDialogButtonBox>
#include <QFontDatabase>
#include <QInputDialog>
#include <QJsonArray>
#include <QJsonDocument>
#include <QLabel>
#include <QPushButton>
#include <QThread>
#include <QVBoxLayout>

using namespace Qt::StringLiterals;

namespace cppl::app {

HostKeyDialog::HostKeyDialog(const QString &host, const QString &fingerprint, QWidget *parent)
    : QDialog(parent)
{
    setWindowTitle(tr("Unknown host key — %1").arg(host));
    auto *layout = new QVBoxLayout(this);
    auto *text = new QLabel(tr("<p>The SSH server <b>%1</b> is not in your known_hosts file.</p>"
                               "<p>Compare this fingerprint with the one its administrator gives you "
                               "(<tt>ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub</tt> on the host) "
                               "before you accept it:</p>")
                                .arg(host.toHtmlEscaped()),
                            this);
    text->setWordWrap(true);
    auto *fp = new QLabel(fingerprint, this);
    fp->setObjectName(u"fingerprint"_s);
    fp->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    fp->setTextInteractionFlags(Qt::TextSelectableByMouse);
    auto *buttons = new QDialogButtonBox(this);
    auto *always = buttons->addButton(tr("Accept and remember"), QDialogButtonBox::AcceptRole);
    auto *once = buttons->addButton(tr("Accept for this session"), QDialogButtonBox::AcceptRole);
    auto *refuse = buttons->addButton(tr("Refuse"), QDialogButtonBox::RejectRole);
    refuse->setDefault(true);
    always->setObjectName(u"acceptAlways"_s);
    once->setObjectName(u"acceptOnce"_s);
    refuse->setObjectName(u"refuse"_s);
    connect(always, &QPushButton::clicked, this, [this] { m_answer = AcceptAlways; accept(); });
    connect(once, &QPushButton::clicked, this, [this] { m_answer = AcceptOnce; accept(); });
    connect(refuse, &QPushButton::clicked, this, [this] { m_answer = Refuse; reject(); });
    layout->addWidget(text);
    layout->addWidget(fp);
    layout->addWidget(buttons);
}

SshPrompter::SshPrompter(QWidget *dialogParent)
    : QObject(dialogParent)
    , m_parent(dialogParent)
{
}

cppl::core::HostKeyAnswer SshPrompter::askHostKey(const QString &host, const QString &fingerprint)
{
    using cppl::core::HostKeyAnswer;
    // "This session" lives only in this object: the launcher is told AcceptOnce, so it writes nothing.
    const QString key = host + u' ' + fingerprint;
    if (m_acceptedThisSession.contains(key))
        return HostKeyAnswer::AcceptOnce;
    HostKeyDialog::Answer answer = HostKeyDialog::Refuse;
    if (m_hostKeyHook) {
        answer = m_hostKeyHook(host, fingerprint);
    } else {
        HostKeyDialog dialog(host, fingerprint, m_parent);
        dialog.exec();
        answer = dialog.answer();
    }
    switch (answer) {
    case HostKeyDialog::AcceptOnce:
        m_acceptedThisSession.insert(key);
        return HostKeyAnswer::AcceptOnce;
    case HostKeyDialog::AcceptAlways:
        return HostKeyAnswer::AcceptAlways;
    case HostKeyDialog::Refuse:
        break;
    }
    return HostKeyAnswer::Refuse;
}

std::optional<QString> SshPrompter::askSecret(const QString &prompt)
{
    bool ok = false;
    const QString text = QInputDialog::getText(m_parent, tr("SSH"), prompt, QLineEdit::Password, {}, &ok);
    if (!ok)
        return std::nullopt;
    return text;
}

void SshPrompter::install(cppl::core::LauncherSettings &settings)
{
    // The launcher calls these on a host's thread: hop to the GUI thread and wait for the answer.
    QPointer<SshPrompter> self(this);
    settings.newHostKeys = cppl::core::NewHostKeys::Ask;
    settings.askNewHostKey = [self](const std::string &host, const std::string &fingerprint) {
        cppl::core::HostKeyAnswer result = cppl::core::HostKeyAnswer::Refuse;
        if (!self)
            return result;
        auto ask = [&] { result = self->askHostKey(QString::fromStdString(host), QString::fromStdString(fingerprint)); };
        if (QThread::currentThread() == self->thread())
            ask();
        else
            QMetaObject::invokeMethod(self, ask, Qt::BlockingQueuedConnection);
        return result;
    };
    settings.passphrase = [self](const std::string &prompt) -> std::optional<std::string> {
        std::optional<QString> result;
        if (!self)
            return std::nullopt;
        auto ask = [&] { result = self->askSecret(QString::fromStdString(prompt)); };
        if (QThread::currentThread() == self->thread())
            ask();
        else
            QMetaObject::invokeMethod(self, ask, Qt::BlockingQueuedConnection);
        if (!result)
            return std::nullopt;
        return result->toStdString();
    };
}

} // namespace cppl::app
