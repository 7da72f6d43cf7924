// SPDX-License-Identifier: MIT
// The Evaluation page's preview: `clusterppl-agent plan` on the page's settings (debounced; a
// stale plan is killed and its answer ignored), shown as a sentence and the static split per rank.
#include "evaluation_page.h"

#include <QComboBox>
#include <QCheckBox>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLocale>
#include <QProcess>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTimer>

#include <algorithm>

using namespace Qt::StringLiterals;

namespace cppl::app {

namespace {
QString qs(const std::string &s) { return QString::fromStdString(s); }
} // namespace

QString EvaluationPage::previewText() const
{
    return m_preview->text();
}

void EvaluationPage::schedulePreview()
{
    if (m_loading)
        return;
    Q_EMIT changed();
    ++m_job; // anything still running is now stale
    if (m_plan)
        m_plan->kill();
    m_debounce->start();
}

void EvaluationPage::showPreviewMessage(const QString &text)
{
    m_preview->setText(text);
    m_shards->setRowCount(0);
    Q_EMIT previewUpdated();
}

QStringList EvaluationPage::planArguments(const QString &json) const
{
    const EvaluationSpec e = evaluation();
    const Thresholds t = thresholds();
    QStringList args{u"plan"_s, u"--schedule"_s, qs(e.schedule.empty() ? std::string("dynamic") : e.schedule)};
    if (!e.tokens.empty())
        args << u"--tokens"_s << resolve(qs(e.tokens));
    else if (e.tokenizer == "bytes" && !e.text.empty() && !QFileInfo(resolve(qs(e.text))).isDir())
        args << u"--text"_s << resolve(qs(e.text)) << u"--tokenizer"_s << u"bytes"_s;
    const QStringList memory = memoryPlanArguments();
    if (args.size() == 3 && memory.isEmpty())
        return {}; // plan reads token files, and text with the bytes tokenizer only; a model's config.json
    args << memory << u"--protocol"_s << qs(e.protocol) << u"--context"_s << QString::number(e.context) << u"--ranks"_s
         << QString::number(m_worldSize) << u"--sync-every-tokens"_s
         << (t.syncEveryTokens < 0 ? u"end"_s : QString::number(t.syncEveryTokens)) << u"--json"_s << json;
    if (e.protocol == "hf-sliding" && e.stride > 0)
        args << u"--stride"_s << QString::number(e.stride);
    if (e.maxWindows > 0)
        args << u"--max-windows"_s << QString::number(e.maxWindows);
    // Auto: plan's default (8), what the agents use on the CPU; on a GPU the batch (and so a static
    // schedule's batch-aligned shards) is known only once the agents have measured free memory.
    if (e.batch != kAutoBatch)
        args << u"--batch"_s << QString::number(e.batch);
    return args;
}

void EvaluationPage::runPreview()
{
    if (m_agent.isEmpty()) {
        m_preview->setText(tr("No preview: clusterppl-agent was not found next to the dashboard or on PATH."));
        Q_EMIT previewUpdated();
        return;
    }
    const QString json = m_tmp->filePath(u"plan-%1.json"_s.arg(m_job));
    const QStringList args = planArguments(json);
    if (args.isEmpty())
        return showPreviewMessage(tr("No preview for this data: plan reads token files and text with the bytes tokenizer. "
                                     "Tokenize first (clusterppl-agent tokenize) to preview a tokenizer's windows."));
    auto *proc = new QProcess(this);
    m_plan = proc;
    const int job = m_job;
    m_preview->setText(tr("Planning…"));
    connect(proc, &QProcess::finished, this, [this, proc, job, json](int code, QProcess::ExitStatus status) {
        proc->deleteLater();
        if (job != m_job)
            return; // stale: the settings changed while it ran
        if (status != QProcess::NormalExit || code != 0) {
            const QString err = QString::fromLocal8Bit(proc->readAllStandardError()).trimmed();
            return showPreviewMessage(tr("The plan failed: %1").arg(err.isEmpty() ? tr("exit code %1").arg(code) : err));
        }
        QFile f(json);
        const QJsonObject plan = f.open(QIODevice::ReadOnly) ? QJsonDocument::fromJson(f.readAll()).object() : QJsonObject();
        QFile::remove(json);
        showPlan(plan);
    });
    connect(proc, &QProcess::errorOccurred, this, [this, proc, job](QProcess::ProcessError err) {
        if (err != QProcess::FailedToStart || job != m_job)
            return;
        m_preview->setText(tr("No preview: cannot start %1 (%2)").arg(m_agent, proc->errorString()));
        proc->deleteLater();
        Q_EMIT previewUpdated();
    });
    proc->start(m_agent, args);
}

void EvaluationPage::showPlan(const QJsonObject &o)
{
    if (!o.contains(u"windows"_s)) // the memory plan alone: plan cannot read this data
        return showPreviewMessage(tr("No preview of the windows for this data: plan reads token files and text with the bytes "
                                     "tokenizer.") + memoryNote(o));
    const qint64 dataTokens = o.value(u"data"_s).toObject().value(u"tokens"_s).toInteger();
    const qint64 scored = o.value(u"tokens_scored"_s).toInteger();
    const QJsonArray shards = o.value(u"shards"_s).toArray();
    // Dynamic: the rounds follow the ranks' speeds; the static count is what equal speeds give.
    const bool dynamic = o.value(u"schedule"_s).toString(m_schedule->currentData().toString()) == u"dynamic"_s;
    const QLocale loc; // grouped digits, as the Run page and History write counts
    m_preview->setText(tr("<b>%1</b> windows, <b>%2</b> of %3 tokens scored (%4%), %5<b>%6</b> sync rounds, "
                          "%7 ranks: about <b>%8</b> scored tokens per rank.")
                           .arg(loc.toString(o.value(u"windows"_s).toInteger()), loc.toString(scored), loc.toString(dataTokens),
                                dataTokens > 0 ? loc.toString(100.0 * double(scored) / double(dataTokens), 'f', 1) : loc.toString(0),
                                dynamic ? tr("about ") : QString(), loc.toString(o.value(u"rounds"_s).toInteger()),
                                loc.toString(o.value(u"world_size"_s).toInteger()),
                                loc.toString(shards.isEmpty() ? qint64(0) : scored / shards.size()))
                       + dynamicNote(o)
                       + (m_batchAuto->isChecked() ? tr(" Batch auto: planned with 8, what the CPU uses; on a GPU the "
                                                        "agents size it from free memory when the run starts.")
                                                   : QString())
                       + memoryNote(o));
    showShards(shards, dynamic);
    Q_EMIT previewUpdated();
}

void EvaluationPage::showShards(const QJsonArray &shards, bool dynamic)
{
    // Dynamic: no rank has these windows; the header says what the rows are.
    // On two lines: on one, the three columns were 385 px wide and the preview of a 1024 px
    // window (about 320 px) scrolled sideways, the scored tokens out of sight.
    m_shards->setHorizontalHeaderLabels(dynamic ? QStringList{tr("Rank"), tr("Windows\n(static split)"), tr("Scored tokens\n(static split)")}
                                                : QStringList{tr("Rank"), tr("Windows"), tr("Scored tokens")});
    m_shards->setRowCount(int(shards.size()));
    const QLocale loc;
    for (int r = 0; r < shards.size(); ++r) {
        const QJsonObject s = shards[r].toObject();
        const qint64 windows = s.value(u"end_window"_s).toInteger() - s.value(u"first_window"_s).toInteger();
        const QStringList cells{QString::number(s.value(u"rank"_s).toInt()), loc.toString(windows),
                                loc.toString(s.value(u"tokens_scored"_s).toInteger())};
        for (int c = 0; c < 3; ++c) {
            auto *item = new QTableWidgetItem(cells[c]);
            item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
            m_shards->setItem(r, c, item);
        }
    }
    m_shards->resizeColumnToContents(0); // "Rank", not the default 100 px
    m_shards->resizeColumnToContents(1); // its header, "Windows (static split)", in full
}

QString EvaluationPage::dynamicNote(const QJsonObject &plan) const
{
    if (m_schedule->currentData().toString() != u"dynamic"_s)
        return {};
    // plan --schedule dynamic (its default) names the global batches; an older agent's plan does not.
    const QJsonObject g = plan.value(u"global_batches"_s).toObject();
    const qint64 windows = plan.value(u"windows"_s).toInteger();
    const qint64 batch = std::max<qint64>(1, g.contains(u"windows_per_batch"_s) ? g.value(u"windows_per_batch"_s).toInteger()
                                                                                 : plan.value(u"batch"_s).toInteger());
    const qint64 count = g.contains(u"count"_s) ? g.value(u"count"_s).toInteger() : (windows + batch - 1) / batch;
    return tr(" Dynamic schedule: <b>%1</b> global batches of %2 windows, claimed by the ranks as they go (a slower rank "
              "takes fewer; the sync rounds follow the ranks' speeds); the table shows the static split, for comparison.")
        .arg(QLocale().toString(count), QLocale().toString(batch));
}

void EvaluationPage::setGpusPerNode(int gpus)
{
    if (gpus == m_gpusPerNode)
        return;
    m_gpusPerNode = std::max(gpus, 1);
    schedulePreview();
}

void EvaluationPage::notePreflight(const QJsonObject &report)
{
    qint64 smallest = 0;
    for (const QJsonValue &d : report.value(u"cuda"_s).toObject().value(u"devices"_s).toArray()) {
        const qint64 bytes = d.toObject().value(u"memory_bytes"_s).toInteger();
        if (bytes > 0 && (smallest == 0 || bytes < smallest))
            smallest = bytes;
    }
    const QString host = report.value(u"host"_s).toString();
    if (smallest > 0)
        m_gpuMemory.insert(host, smallest);
    else
        m_gpuMemory.remove(host);
    // A new plan, without changed(): a report changes no setting.
    ++m_job;
    if (m_plan)
        m_plan->kill();
    m_debounce->start();
}

qint64 EvaluationPage::gpuMemoryBytes() const
{
    qint64 smallest = 0;
    for (const qint64 bytes : m_gpuMemory)
        smallest = smallest == 0 ? bytes : std::min(smallest, bytes);
    return smallest;
}

QStringList EvaluationPage::memoryPlanArguments() const
{
    const EvaluationSpec e = evaluation();
    const QString dir = resolve(qs(e.model));
    if (e.model.empty() || !QFileInfo(dir + u"/config.json"_s).isFile())
        return {}; // a TorchScript module, or no model yet: no config.json to plan from
    // auto: what the agents pick, bfloat16 on a GPU, float32 on the CPU.
    const QString dtype = e.dtype != "auto" ? qs(e.dtype) : e.device == "cpu" ? u"float32"_s : u"bfloat16"_s;
    QStringList a{u"--model"_s, dir, u"--tensor-parallel"_s, QString::number(e.tensorParallel), u"--gpus-per-node"_s,
                  QString::number(m_gpusPerNode), u"--dtype"_s, dtype};
    if (const qint64 bytes = gpuMemoryBytes(); bytes > 0)
        a << u"--gpu-memory"_s << QString::number(double(bytes) / double(qint64(1) << 30), 'f', 3);
    return a;
}

QString EvaluationPage::memoryNote(const QJsonObject &plan) const
{
    const QJsonObject m = plan.value(u"memory"_s).toObject();
    if (m.isEmpty())
        return {};
    const QJsonObject a = m.value(u"asked"_s).toObject();
    const QLocale loc;
    auto gib = [&](const QJsonValue &bytes) { return loc.toString(double(bytes.toInteger()) / double(qint64(1) << 30), 'f', 2); };
    QString text = u"<br><br>"_s + tr("<b>Memory per rank</b> with tensor parallel %1 (%2): ").arg(a.value(u"tensor_parallel"_s).toInt())
                                        .arg(m.value(u"dtype"_s).toString());
    if (a.contains(u"refusal"_s))
        return text + a.value(u"refusal"_s).toString().toHtmlEscaped() + u"."_s;
    text += tr("weights <b>%1 GiB</b> (%2 sharded, %3 replicated), K/V %4 GiB (one layer), activations %5 GiB for %6 windows of %7 "
               "tokens: <b>%8 GiB</b> with the reserve")
                .arg(gib(a.value(u"weights_bytes"_s)), gib(a.value(u"weights_sharded_bytes"_s)), gib(a.value(u"weights_replicated_bytes"_s)),
                     gib(a.value(u"kv_bytes"_s)), gib(a.value(u"activation_bytes"_s)), loc.toString(m.value(u"batch"_s).toInteger()),
                     loc.toString(m.value(u"context"_s).toInteger()), gib(a.value(u"total_bytes"_s)));
    if (m.value(u"gpu_memory_bytes"_s).isNull())
        return text + tr(". No GPU memory known: pre-flight has found no GPU (Check hosts on the cluster page asks each host), "
                         "so the plan gives no verdict.");
    return text + tr(" of %1 GiB per GPU (the smallest pre-flight found): <b>%2</b>. Recommended: %3.")
                      .arg(gib(m.value(u"gpu_memory_bytes"_s)), a.value(u"fits"_s).toBool() ? tr("fits") : tr("does not fit"),
                           m.value(u"why"_s).toString().toHtmlEscaped());
}

} // namespace cppl::app
