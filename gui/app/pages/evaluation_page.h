// SPDX-License-Identifier: MIT
#pragma once

// The Evaluation page: what is evaluated and how (model, data, protocol, windows, precision,
// backend) and the thresholds that raise alerts. A live preview runs `clusterppl-agent plan` on
// the same settings (debounced; a stale preview is killed), so the user sees the windows, scored
// tokens, rounds and tokens per rank before pressing Run.

#include "cppl/cluster_profile.h"

#include <QJsonObject>
#include <QMap>
#include <QPointer>
#include <QWidget>

#include <functional>

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QFormLayout;
class QHBoxLayout;
class QJsonArray;
class QLabel;
class QLayout;
class QLineEdit;
class QProcess;
class QSpinBox;
class QTableWidget;
class QTemporaryDir;
class QTimer;
class QVBoxLayout;

namespace cppl::app {

class EvaluationPage : public QWidget
{
    Q_OBJECT

public:
    explicit EvaluationPage(QWidget *parent = nullptr);
    ~EvaluationPage() override;

    /// Shows a profile's evaluation settings and thresholds.
    void load(const EvaluationSpec &evaluation, const Thresholds &thresholds);
    [[nodiscard]] EvaluationSpec evaluation() const;
    [[nodiscard]] Thresholds thresholds() const;
    /// Relative paths resolve against this directory (the profile's) for the preview.
    void setBaseDirectory(const QString &dir);
    [[nodiscard]] QString baseDirectory() const { return m_base; }
    /// World size the preview shards for (the cluster's total slots).
    void setWorldSize(int ranks);
    void setAgent(const QString &agent) { m_agent = agent; }
    /// GPUs per host for the memory plan: a tensor-parallel group stays on one host (the smallest
    /// host's slots).
    void setGpusPerNode(int gpus);
    /// A host's pre-flight report (`preflight --json`): its GPUs' memory, the smallest of which the
    /// preview's memory plan is judged against (none reported: the plan says so).
    void notePreflight(const QJsonObject &report);

    void saveSettings() const;
    /// False when nothing was saved yet (first start).
    bool restoreSettings();

    /// The preview's last result, for tests: "" while none.
    [[nodiscard]] QString previewText() const;

Q_SIGNALS:
    void saveIntoProfileRequested();
    void changed();
    void previewUpdated();

private:
    // Building the page (evaluation_page.cpp): the form's column in a vertical scroll area, its
    // three boxes, the preview beside it.
    QVBoxLayout *buildFormColumn(QHBoxLayout *outer);
    QWidget *buildModelAndData(QWidget *parent);
    /// @p edit and a Browse… button that sets it to what @p ask returns (unless empty).
    QLayout *withBrowseButton(QLineEdit *edit, const std::function<QString()> &ask);
    QWidget *buildProtocolAndComputation(QWidget *parent);
    void addWindowing(QWidget *box, QFormLayout *form);
    void addComputation(QWidget *box, QFormLayout *form);
    void addSchedule(QWidget *box, QFormLayout *form);
    void addQuantization(QWidget *box, QFormLayout *form);
    QWidget *buildSyncAndAlerts(QWidget *parent);
    QWidget *buildPreviewBox();
    void connectEdits();
    void updateDataMode();
    QString resolve(const QString &path) const;

    // The preview (evaluation_preview.cpp).
    void schedulePreview();
    void runPreview();
    /// The agent's `plan` arguments for the page's settings, writing its JSON to @p json; empty
    /// when plan cannot read this data (a tokenizer other than bytes).
    [[nodiscard]] QStringList planArguments(const QString &json) const;
    void showPlan(const QJsonObject &plan);
    void showShards(const QJsonArray &shards, bool dynamic);
    /// A preview that is only a sentence: no plan to show (no data it reads, a failed plan).
    void showPreviewMessage(const QString &text);
    QString dynamicNote(const QJsonObject &plan) const;
    /// plan --model's arguments when the model is a directory with a config.json; else none.
    [[nodiscard]] QStringList memoryPlanArguments() const;
    /// The preview's sentence on plan --json's "memory" (docs/planning.md).
    [[nodiscard]] QString memoryNote(const QJsonObject &plan) const;
    /// The smallest GPU memory the pre-flight reports named (bytes); 0: none known.
    [[nodiscard]] qint64 gpuMemoryBytes() const;

    QComboBox *m_modelKind = nullptr;
    QLineEdit *m_model = nullptr;
    QComboBox *m_dataKind = nullptr;
    QLineEdit *m_data = nullptr;
    QLineEdit *m_tokenizer = nullptr;
    QComboBox *m_protocol = nullptr;
    QSpinBox *m_context = nullptr;
    QSpinBox *m_stride = nullptr;
    QSpinBox *m_batch = nullptr;
    QCheckBox *m_batchAuto = nullptr; ///< checked: EvaluationSpec::batch = kAutoBatch (no --batch)
    QSpinBox *m_maxWindows = nullptr;
    QComboBox *m_dtype = nullptr;
    QComboBox *m_device = nullptr;
    QComboBox *m_backend = nullptr;
    QComboBox *m_topology = nullptr;
    QComboBox *m_schedule = nullptr;
    QComboBox *m_onRankLoss = nullptr;
    QComboBox *m_overlapSync = nullptr; ///< "on" / "off": EvaluationSpec::overlapSync
    // EvaluationSpec::quantize ... referenceQuantize (docs/profile.md)
    QComboBox *m_quantize = nullptr;
    QSpinBox *m_quantGroup = nullptr;
    QCheckBox *m_quantizeHead = nullptr;
    QLineEdit *m_referenceModel = nullptr;
    QComboBox *m_referenceDtype = nullptr;
    QComboBox *m_referenceQuantize = nullptr;
    QSpinBox *m_tensorParallel = nullptr; ///< EvaluationSpec::tensorParallel
    /// EvaluationSpec::loadTimeoutSeconds: no field of its own on the page; a loaded profile's value
    /// is kept for the run and the saved profile.
    double m_loadTimeoutSeconds = EvaluationSpec{}.loadTimeoutSeconds;
    QSpinBox *m_sync = nullptr;
    QDoubleSpinBox *m_tolerance = nullptr;
    QDoubleSpinBox *m_commShare = nullptr;
    QDoubleSpinBox *m_stall = nullptr;
    QDoubleSpinBox *m_timeout = nullptr;
    QLabel *m_preview = nullptr;
    QTableWidget *m_shards = nullptr;
    QTimer *m_debounce = nullptr;
    QPointer<QProcess> m_plan;
    QTemporaryDir *m_tmp = nullptr;
    QString m_agent;
    QString m_base;
    int m_worldSize = 1;
    int m_gpusPerNode = 1;
    QMap<QString, qint64> m_gpuMemory; ///< host -> its smallest GPU's memory, from pre-flight
    int m_job = 0;
    bool m_loading = false;
};

} // namespace cppl::app
