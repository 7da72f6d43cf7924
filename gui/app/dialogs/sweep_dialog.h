// SPDX-License-Identifier: MIT
#pragma once

// Run › Sweep…: the rank counts, and the precision axis as `clusterppl-cli sweep --quantize` has it
// (none, int8, int4, int4-asym checked; a reference model, by default the model itself).

#include <QDialog>
#include <QStringList>

#include <vector>

class QCheckBox;
class QLabel;
class QLineEdit;

namespace cppl::app {

class SweepDialog : public QDialog
{
    Q_OBJECT

public:
    /// @p slots: the profile's slots (the hint); @p counts: the rank counts offered ("1,2,4").
    SweepDialog(int slots, const QString &counts, QWidget *parent = nullptr);

    /// The rank counts (history::parseRankList: throws ConfigError naming a bad item).
    [[nodiscard]] std::vector<int> counts() const;
    /// The precisions checked, in the CLI's order; empty: a sweep over rank counts alone.
    [[nodiscard]] QStringList precisions() const;
    /// The reference model directory (empty: the profile's, else the model itself).
    [[nodiscard]] QString referenceModel() const;

    void setCounts(const QString &counts);
    void setPrecisionChecked(const QString &precision, bool on);
    void setReferenceModel(const QString &dir);

private:
    void updateReference();

    QLineEdit *m_counts = nullptr;
    std::vector<QCheckBox *> m_precisions;
    QLineEdit *m_reference = nullptr;
    QLabel *m_referenceNote = nullptr;
};

} // namespace cppl::app
