// SPDX-License-Identifier: MIT
#include "sweep_dialog.h"

#include "history/sweep.h"

#include <QCheckBox>
#include <QDialogButtonBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QVBoxLayout>

using namespace Qt::StringLiterals;

namespace cppl::app {

namespace {
// The CLI's names and order (history::parsePrecisionList).
const QStringList kPrecisions{u"none"_s, u"int8"_s, u"int4"_s, u"int4-asym"_s};
} // namespace

SweepDialog::SweepDialog(int slots, const QString &counts, QWidget *parent)
    : QDialog(parent)
{
    setWindowTitle(tr("Sweep"));
    setMinimumWidth(560); // the wrapped notes read in whole lines, the four checkboxes in one row
    auto *layout = new QVBoxLayout(this);
    auto *intro = new QLabel(tr("Run the same evaluation at each rank count, one after another, then compare them. "
                                "With precisions checked, each precision runs at each count against a reference model, and "
                                "Compare shows their quality, speed and memory side by side."),
                             this);
    intro->setWordWrap(true);
    layout->addWidget(intro);
    auto *form = new QFormLayout;
    m_counts = new QLineEdit(counts, this);
    m_counts->setObjectName(u"sweepCounts"_s);
    form->addRow(tr("Rank counts (the profile has %1 slots):").arg(slots), m_counts);
    auto *row = new QHBoxLayout;
    for (const QString &q : kPrecisions) {
        auto *box = new QCheckBox(q, this);
        box->setObjectName(u"sweepPrecision-"_s + q);
        box->setToolTip(q == u"none"_s ? tr("The weights as stored (the profile's dtype)") : tr("Weights quantized at load: --quantize %1").arg(q));
        connect(box, &QCheckBox::toggled, this, &SweepDialog::updateReference);
        row->addWidget(box);
        m_precisions.push_back(box);
    }
    row->addStretch(1);
    form->addRow(tr("Precisions:"), row);
    auto *refRow = new QHBoxLayout;
    m_reference = new QLineEdit(this);
    m_reference->setObjectName(u"sweepReference"_s);
    m_reference->setPlaceholderText(tr("the model itself"));
    auto *browse = new QPushButton(tr("Browse…"), this);
    connect(browse, &QPushButton::clicked, this, [this] {
        const QString dir = QFileDialog::getExistingDirectory(this, tr("Reference model"), m_reference->text());
        if (!dir.isEmpty())
            m_reference->setText(dir);
    });
    refRow->addWidget(m_reference, 1);
    refRow->addWidget(browse);
    form->addRow(tr("Reference model:"), refRow);
    layout->addLayout(form);
    m_referenceNote = new QLabel(this);
    m_referenceNote->setWordWrap(true);
    layout->addWidget(m_referenceNote);
    auto *buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
    connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    layout->addWidget(buttons);
    updateReference();
}

std::vector<int> SweepDialog::counts() const
{
    return cppl::core::history::parseRankList(m_counts->text());
}

QStringList SweepDialog::precisions() const
{
    QStringList out;
    for (const QCheckBox *box : m_precisions)
        if (box->isChecked())
            out << box->text();
    return out;
}

QString SweepDialog::referenceModel() const
{
    return precisions().isEmpty() ? QString() : m_reference->text().trimmed();
}

void SweepDialog::setCounts(const QString &counts)
{
    m_counts->setText(counts);
}

void SweepDialog::setPrecisionChecked(const QString &precision, bool on)
{
    for (QCheckBox *box : m_precisions)
        if (box->text() == precision)
            box->setChecked(on);
}

void SweepDialog::setReferenceModel(const QString &dir)
{
    m_reference->setText(dir);
}

void SweepDialog::updateReference()
{
    const bool byPrecision = !precisions().isEmpty();
    m_reference->setEnabled(byPrecision);
    m_referenceNote->setText(byPrecision ? tr("Every run, the unquantized one too, evaluates the same reference model, so their tokens "
                                              "per second compare (each includes the reference's pass).")
                                         : tr("No precision checked: the profile's precision at every count."));
}

} // namespace cppl::app
