// SPDX-License-Identifier: MIT
// The Cluster page's pre-flight: each host's report in the tree's Pre-flight column (summary, the
// whole report as its tooltip) and, whole, under the form; Check hosts' verdict below them.
#include "cluster_page.h"

#include "host_dialogs.h"
#include "profile_model.h"

#include <QLabel>
#include <QVBoxLayout>

using namespace Qt::StringLiterals;

namespace cppl::app {

namespace {
QString qs(const std::string &s) { return QString::fromStdString(s); }
} // namespace

void ClusterPage::buildPreflightReports(QWidget *parent, QVBoxLayout *layout)
{
    m_preflightNote = new QLabel(tr("Pre-flight runs on every host before each launch; \u201cCheck hosts\u201d runs it alone. "
                                    "Its findings (agent and LibTorch versions, GPUs, NCCL, memory, paths) appear in the tree "
                                    "and below."),
                                 parent);
    m_preflightNote->setWordWrap(true);
    layout->addWidget(m_preflightNote);
    m_checkResults = new QLabel(parent);
    m_checkResults->setObjectName(u"checkResults"_s);
    m_checkResults->setWordWrap(true);
    m_checkResults->setTextFormat(Qt::RichText);
    m_checkResults->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_checkResults->hide();
    layout->addWidget(m_checkResults);
}

void ClusterPage::showPreflight(const cppl::core::run::HostPreflight &report)
{
    const bool ok = report.ran && report.problems.isEmpty();
    const QString summary = preflightSummary(report.report, report.problems);
    const QString details = preflightDetails(report.report, report.problems);
    m_model->setPreflight(report.host, ok, summary, details.isEmpty() ? summary : details); // the tooltip: the whole of an elided cell
    // Inline under the form too: the whole report of every host, not only a tooltip away.
    m_checkLines << u"<p><b>%1</b> %2%3</p>"_s.arg(report.host.toHtmlEscaped(), summary.toHtmlEscaped(),
                                                   details.isEmpty() ? QString()
                                                                     : u"<br><small>%1</small>"_s.arg(details.toHtmlEscaped().replace(u'\n', u"<br>"_s)));
    m_checkResults->setText(m_checkLines.join(QString()));
    m_checkResults->show();
    placeForm(); // and the columns fitted to the tree
}

void ClusterPage::beginCheck()
{
    m_model->clearPreflight();
    for (const HostSpec &h : m_model->profile().hosts)
        m_model->setPreflight(qs(h.name), true, tr("… checking"), tr("Pre-flight is running on this host"));
    m_checkLines.clear();
    m_checkResults->setText(tr("Checking every host (pre-flight only; nothing is launched)…"));
    m_checkResults->show();
}

QString ClusterPage::checkResultsText() const
{
    return m_checkResults->isVisible() ? m_checkResults->text() : QString();
}

void ClusterPage::endCheck(bool ok, const QString &verdict)
{
    QString html = m_checkLines.join(QString());
    html += u"<p><b>%1 %2</b></p>"_s.arg(ok ? u"✓"_s : u"✗"_s, verdict.toHtmlEscaped().replace(u'\n', u"<br>"_s));
    m_checkResults->setText(html);
    m_checkResults->show();
}

} // namespace cppl::app
