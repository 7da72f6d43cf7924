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

bool SshPrompter::askHostKey(const QString &host, const QString &fingerprint)
{
    const QString key = host + u' ' + fingerprint;
    if (m_acceptedThisSession.contains(key))
        return true;
    HostKeyDialog::Answer answer = HostKeyDialog::Refuse;
    if (m_hostKeyHook) {
        answer = m_hostKeyHook(host, fingerprint);
    } else {
        HostKeyDialog dialog(host, fingerprint, m_parent);
        dialog.exec();
        answer = dialog.answer();
    }
    if (answer == HostKeyDialog::AcceptOnce)
        m_acceptedThisSession.insert(key);
    return answer != HostKeyDialog::Refuse;
}

std::optional<QString> SshPrompter::askSecret(const QString &prompt)
{
    if (m_secretHook)
        return m_secretHook(prompt);
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
        bool result = false;
        if (!self)
            return false;
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

namespace {
QString gib(double bytes)
{
    return QString::number(bytes / (1024.0 * 1024.0 * 1024.0), 'f', 1) + u" GiB"_s;
}
} // namespace

QString preflightSummary(const QJsonObject &report, const QStringList &problems)
{
    if (report.isEmpty())
        return problems.isEmpty() ? QObject::tr("no report") : QObject::tr("✗ %1").arg(problems.front());
    QStringList parts;
    parts << (problems.isEmpty() ? u"✓"_s : u"✗"_s);
    parts << QObject::tr("agent %1").arg(report.value(u"agent_version"_s).toString());
    parts << QObject::tr("LibTorch %1").arg(report.value(u"libtorch_version"_s).toString());
    const QJsonArray gpus = report.value(u"cuda"_s).toObject().value(u"devices"_s).toArray();
    parts << (gpus.size() == 1 ? QObject::tr("1 GPU") : QObject::tr("%1 GPUs").arg(gpus.size()));
    parts << (report.value(u"nccl"_s).toObject().value(u"available"_s).toBool() ? QObject::tr("NCCL") : QObject::tr("no NCCL"));
    parts << QObject::tr("%1 free").arg(gib(report.value(u"memory_available_bytes"_s).toDouble()));
    if (!problems.isEmpty())
        parts << (problems.size() == 1 ? QObject::tr("1 problem") : QObject::tr("%1 problems").arg(problems.size()));
    return parts.join(u"  "_s);
}

QString preflightDetails(const QJsonObject &report, const QStringList &problems)
{
    QString text;
    for (const QString &p : problems)
        text += QObject::tr("Problem: %1\n").arg(p);
    if (!report.isEmpty())
        text += QString::fromUtf8(QJsonDocument(report).toJson(QJsonDocument::Indented));
    return text.trimmed();
}

} // namespace cppl::app
