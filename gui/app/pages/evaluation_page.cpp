// SPDX-License-Identifier: MIT
#include "evaluation_page.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QJsonObject>
#include <QLabel>
#include <QLineEdit>
#include <QProcess>
#include <QPushButton>
#include <QScrollArea>
#include <QSettings>
#include <QSpinBox>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTimer>
#include <QToolButton>
#include <QVBoxLayout>

#include <algorithm>

using namespace Qt::StringLiterals;

namespace cppl::app {

namespace {
/// A percent spin box's value as the fraction the profile keeps: the decimal shown, divided by 100
/// in decimal (0.7 % is 0.007, not 0.7 / 100 = 0.007000000000000001).
double fractionOf(const QDoubleSpinBox *percent)
{
    return QString(QString::number(percent->value(), 'f', percent->decimals()) + u"e-2"_s).toDouble();
}

/// The "evaluation" settings group's version: 2 since on_rank_loss continue became the default
/// with the dynamic schedule, 3 since dtype auto became the default (restoreSettings reads an
/// older saved "fail", or "float32", as the default).
constexpr int kSettingsVersion = 3;
QString qs(const std::string &s) { return QString::fromStdString(s); }
void setCombo(QComboBox *c, const QString &value)
{
    const int i = c->findData(value);
    if (i >= 0)
        c->setCurrentIndex(i);
}
QComboBox *combo(QWidget *parent, std::initializer_list<std::pair<QString, QString>> items)
{
    auto *c = new QComboBox(parent);
    for (const auto &[value, label] : items)
        c->addItem(label, value);
    return c;
}
} // namespace

EvaluationPage::EvaluationPage(QWidget *parent)
    : QWidget(parent)
    , m_debounce(new QTimer(this))
    , m_tmp(new QTemporaryDir)
{
    auto *outer = new QHBoxLayout(this);
    QVBoxLayout *column = buildFormColumn(outer);
    QWidget *formHost = column->parentWidget();
    column->addWidget(buildModelAndData(formHost));
    column->addWidget(buildProtocolAndComputation(formHost));
    column->addWidget(buildSyncAndAlerts(formHost));
    auto *save = new QPushButton(tr("Save preset into profile"), formHost);
    save->setToolTip(tr("Copy these settings into the cluster profile (then save the profile to keep them in its file)"));
    column->addWidget(save, 0, Qt::AlignLeft);
    column->addStretch(1);
    outer->addWidget(buildPreviewBox(), 2);

    m_debounce->setSingleShot(true);
    m_debounce->setInterval(300);
    connect(m_debounce, &QTimer::timeout, this, &EvaluationPage::runPreview);
    connect(save, &QPushButton::clicked, this, &EvaluationPage::saveIntoProfileRequested);
    connectEdits();
    load(EvaluationSpec{}, Thresholds{});
}

QVBoxLayout *EvaluationPage::buildFormColumn(QHBoxLayout *outer)
{
    auto *scroll = new QScrollArea(this);
    scroll->setWidgetResizable(true);
    scroll->setFrameShape(QFrame::NoFrame);
    // Vertically only: when the window is too short (the message bar above), the vertical bar took
    // its width from the form and a horizontal bar appeared to scroll by those few pixels.
    scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    auto *formHost = new QWidget(scroll);
    auto *column = new QVBoxLayout(formHost);
    scroll->setWidget(formHost);
    outer->addWidget(scroll, 3);
    return column;
}

QWidget *EvaluationPage::buildModelAndData(QWidget *parent)
{
    auto *what = new QGroupBox(tr("Model and data"), parent);
    auto *wf = new QFormLayout(what);
    m_modelKind = combo(what, {{u"hf"_s, tr("Hugging Face directory")}, {u"torchscript"_s, tr("TorchScript file (.pt)")}});
    m_modelKind->setToolTip(tr("A directory with config.json + safetensors (Llama, Mistral, Qwen2, GPT-2), or a "
                               "TorchScript module. The model decides every number: a different model is a different PPL."));
    wf->addRow(tr("Model kind"), m_modelKind);
    m_model = new QLineEdit(what);
    m_model->setToolTip(tr("Path as seen on the hosts (relative paths resolve against the profile's folder)"));
    wf->addRow(tr("Model"), withBrowseButton(m_model, [this] {
                   return m_modelKind->currentData() == u"hf"_s
                              ? QFileDialog::getExistingDirectory(this, tr("Model directory"), resolve(m_model->text()))
                              : QFileDialog::getOpenFileName(this, tr("TorchScript model"), resolve(m_model->text()),
                                                             tr("TorchScript (*.pt *.pth);;All files (*)"));
               }));
    m_dataKind = combo(what, {{u"tokens"_s, tr("Token ids (.u16/.u32/.npy)")},
                              {u"text"_s, tr("Text + tokenizer")},
                              {u"documents"_s, tr("Documents (folder, JSONL, WikiText) + tokenizer")}});
    m_dataKind->setToolTip(tr("Token ids are scored as they are. Text and documents are tokenized first; documents "
                              "are scored each on its own (no window crosses a document boundary)."));
    wf->addRow(tr("Data kind"), m_dataKind);
    m_data = new QLineEdit(what);
    m_data->setToolTip(tr("The held-out data; every token of it is scored exactly once across all ranks"));
    wf->addRow(tr("Data"), withBrowseButton(m_data, [this] {
                   return m_dataKind->currentData() == u"documents"_s
                              ? QFileDialog::getExistingDirectory(this, tr("Documents folder"), resolve(m_data->text()))
                              : QFileDialog::getOpenFileName(this, tr("Data"), resolve(m_data->text()));
               }));
    m_tokenizer = new QLineEdit(what);
    m_tokenizer->setToolTip(tr("\"bytes\" (one token per UTF-8 byte), a tokenizer.json, a SentencePiece .model, or a "
                               "model folder holding one. A different tokenizer changes the token count and so the PPL; "
                               "bits per byte stay comparable."));
    wf->addRow(tr("Tokenizer"), m_tokenizer);
    return what;
}

QLayout *EvaluationPage::withBrowseButton(QLineEdit *edit, const std::function<QString()> &ask)
{
    auto *row = new QHBoxLayout;
    row->addWidget(edit, 1);
    auto *browse = new QToolButton(edit->parentWidget());
    browse->setText(tr("Browse…"));
    row->addWidget(browse);
    connect(browse, &QToolButton::clicked, this, [this, edit, ask] {
        if (const QString p = ask(); !p.isEmpty())
            edit->setText(p);
        schedulePreview();
    });
    return row;
}

QWidget *EvaluationPage::buildProtocolAndComputation(QWidget *parent)
{
    auto *how = new QGroupBox(tr("Protocol and computation"), parent);
    auto *hf = new QFormLayout(how);
    addWindowing(how, hf);
    addComputation(how, hf);
    addSchedule(how, hf);
    addQuantization(how, hf);
    return how;
}

void EvaluationPage::addWindowing(QWidget *how, QFormLayout *hf)
{
    m_protocol = combo(how, {{u"hf-sliding"_s, tr("Hugging Face sliding window")},
                             {u"llama.cpp"_s, tr("llama.cpp perplexity")},
                             {u"lm-eval-rolling"_s, tr("lm-eval rolling loglikelihood")}});
    m_protocol->setToolTip(tr("Which tokens are scored with how much context. Each reproduces its tool's numbers; "
                              "they differ from each other (llama.cpp scores only each chunk's second half)."));
    hf->addRow(tr("Protocol"), m_protocol);
    m_context = new QSpinBox(how);
    m_context->setRange(2, 1 << 24);
    m_context->setToolTip(tr("Tokens per model call. Longer context gives each scored token more history: PPL usually "
                             "drops, cost rises with it."));
    hf->addRow(tr("Context"), m_context);
    m_stride = new QSpinBox(how);
    m_stride->setRange(0, 1 << 24);
    m_stride->setSpecialValueText(tr("= context"));
    m_stride->setToolTip(tr("Hugging Face sliding window step. Smaller than the context: windows overlap, every scored "
                            "token sees more history (lower PPL) and the run costs context/stride times more."));
    hf->addRow(tr("Stride"), m_stride);
    // "Auto" passes no --batch: on CUDA the agents size it from free GPU memory (the smallest every
    // rank can afford, in the result's batch_from); on the CPU they use 8.
    auto *batchRow = new QWidget(how);
    auto *batchLayout = new QHBoxLayout(batchRow);
    batchLayout->setContentsMargins(0, 0, 0, 0);
    m_batchAuto = new QCheckBox(tr("Auto (from GPU memory)"), batchRow);
    m_batchAuto->setObjectName(u"batchAuto"_s);
    m_batchAuto->setToolTip(tr("Let the agents choose: on a GPU the largest batch its free memory allows (every rank "
                               "agrees on the smallest; the result's batch_from says why), on the CPU 8. "
                               "Changes speed and memory only, never the result's bits."));
    m_batch = new QSpinBox(batchRow);
    m_batch->setRange(1, 1 << 16);
    m_batch->setValue(8);
    m_batch->setToolTip(tr("Windows per forward pass. Changes speed and memory only, never the result's bits."));
    batchLayout->addWidget(m_batchAuto);
    batchLayout->addWidget(m_batch, 1);
    hf->addRow(tr("Batch"), batchRow);
    m_maxWindows = new QSpinBox(how);
    m_maxWindows->setRange(0, std::numeric_limits<int>::max());
    m_maxWindows->setSpecialValueText(tr("all"));
    m_maxWindows->setToolTip(tr("Evaluate only the first K windows: a quick look, not the data's PPL"));
    hf->addRow(tr("Max windows"), m_maxWindows);
}

void EvaluationPage::addComputation(QWidget *how, QFormLayout *hf)
{
    m_dtype = combo(how, {{u"auto"_s, tr("auto (bfloat16 on GPUs, else float32)")},
                          {u"float32"_s, u"float32"_s},
                          {u"bfloat16"_s, u"bfloat16"_s},
                          {u"float16"_s, u"float16"_s}});
    m_dtype->setObjectName(u"dtype"_s);
    m_dtype->setToolTip(tr("Weights and activations. Log-softmax is always float32; lower precision shifts the PPL "
                           "slightly (compare against a float32 run). auto: each agent picks bfloat16 on a GPU and "
                           "float32 on the CPU; the result names the one that ran."));
    hf->addRow(tr("Precision"), m_dtype);
    m_device = combo(how, {{u"auto"_s, tr("auto (GPU when present)")}, {u"cpu"_s, u"cpu"_s}, {u"cuda"_s, u"cuda"_s}});
    m_device->setToolTip(tr("Where the model runs. CPU and GPU kernels round differently: the last digits may differ."));
    hf->addRow(tr("Device"), m_device);
    m_backend = combo(how, {{u"auto"_s, tr("auto (NCCL on GPUs)")}, {u"gloo"_s, u"gloo"_s}, {u"nccl"_s, u"nccl"_s}});
    m_backend->setToolTip(tr("The collectives' transport. The exact integer reduction gives the same bits on either."));
    hf->addRow(tr("Backend"), m_backend);
    m_topology = combo(how, {{u"hierarchical"_s, tr("hierarchical (groups, then leaders)")}, {u"flat"_s, tr("flat all-reduce")}});
    m_topology->setToolTip(tr("Hierarchical keeps most traffic inside node groups. Both give the same bits; only the "
                              "comm share differs."));
    hf->addRow(tr("Topology"), m_topology);
    m_tensorParallel = new QSpinBox(how);
    m_tensorParallel->setObjectName(u"tensorParallel"_s);
    m_tensorParallel->setRange(1, 1024);
    m_tensorParallel->setToolTip(tr("Ranks per tensor-parallel group: N consecutive ranks of one host split the model "
                                    "(group k is ranks kN to kN+N-1); the groups evaluate different batches. Every host's "
                                    "slots must be a multiple of N. 1: every rank holds the whole model. The preview "
                                    "shows what one rank holds."));
    hf->addRow(tr("Tensor parallel"), m_tensorParallel);
}

void EvaluationPage::addSchedule(QWidget *how, QFormLayout *hf)
{
    m_schedule = combo(how, {{u"dynamic"_s, tr("dynamic batches")}, {u"static"_s, tr("static shards")}});
    m_schedule->setToolTip(tr("Dynamic (the default): ranks claim global batches as they go, so a slow rank no longer "
                              "holds the others up. Static: each rank gets a fixed, balanced shard (for comparison). "
                              "Both give one rank's bits."));
    hf->addRow(tr("Schedule"), m_schedule);
    m_onRankLoss = combo(how, {{u"continue"_s, tr("continue without it")}, {u"fail"_s, tr("fail the run")}});
    m_onRankLoss->setToolTip(tr("When a rank dies or stalls past the collective timeout: let the others redo its "
                                "unfinished batches and finish with the same bits (the default with the dynamic "
                                "schedule; rank 0 may be lost too), or end the run at once (fail fast; static shards "
                                "cannot move to another rank, so a static run always fails)."));
    hf->addRow(tr("Lost rank"), m_onRankLoss);
    m_overlapSync = combo(how, {{u"on"_s, tr("overlap with the next round")}, {u"off"_s, tr("wait for each round")}});
    m_overlapSync->setObjectName(u"overlapSync"_s);
    m_overlapSync->setToolTip(tr("Overlap: round r's aggregation runs on a communication thread while round r+1 computes, "
                                 "so the wait for it mostly hides behind compute. Wait: every rank aggregates each "
                                 "round before it computes the next. The result's bits are the same either way, "
                                 "also in a run that continues without a lost rank."));
    hf->addRow(tr("Sync rounds"), m_overlapSync);
}

void EvaluationPage::addQuantization(QWidget *how, QFormLayout *hf)
{
    const std::initializer_list<std::pair<QString, QString>> schemes{
        {u"none"_s, tr("none")}, {u"int8"_s, u"int8"_s}, {u"int4"_s, tr("int4 (symmetric)")}, {u"int4-asym"_s, tr("int4, asymmetric")}};
    m_quantize = combo(how, schemes);
    m_quantize->setObjectName(u"quantize"_s);
    m_quantize->setToolTip(tr("Weights of every linear layer rounded to int8 or int4 at load, in groups of input features "
                              "with a float16 scale each: less memory, faster on CPUs with VNNI; the PPL moves "
                              "(compare with a reference model). The same bits on any number of ranks."));
    m_quantGroup = new QSpinBox(how);
    m_quantGroup->setObjectName(u"quantGroup"_s);
    m_quantGroup->setRange(32, 1 << 20);
    m_quantGroup->setSingleStep(32);
    m_quantGroup->setValue(32);
    m_quantGroup->setToolTip(tr("Input features per scale (a multiple of 32)"));
    m_quantizeHead = new QCheckBox(tr("head too"), how);
    m_quantizeHead->setObjectName(u"quantizeHead"_s);
    m_quantizeHead->setToolTip(tr("Quantize the vocabulary head as well (embeddings and norms never are)"));
    auto *row = new QWidget(how);
    auto *rl = new QHBoxLayout(row);
    rl->setContentsMargins(0, 0, 0, 0);
    rl->addWidget(m_quantize, 1);
    rl->addWidget(new QLabel(tr("group"), row));
    rl->addWidget(m_quantGroup);
    rl->addWidget(m_quantizeHead);
    hf->addRow(tr("Quantization"), row);
    m_referenceModel = new QLineEdit(how);
    m_referenceModel->setObjectName(u"referenceModel"_s);
    m_referenceModel->setPlaceholderText(tr("none: a Hugging Face directory to compare with, token by token"));
    m_referenceModel->setToolTip(tr("Each rank also evaluates this model (the same tokenizer) on the same windows: KL "
                                    "divergence, top-token agreement and the PPL ratio, exact across ranks."));
    m_referenceDtype = combo(how, {{u"auto"_s, tr("auto")}, {u"float32"_s, u"float32"_s}, {u"bfloat16"_s, u"bfloat16"_s}, {u"float16"_s, u"float16"_s}});
    m_referenceDtype->setObjectName(u"referenceDtype"_s);
    m_referenceQuantize = combo(how, schemes);
    m_referenceQuantize->setObjectName(u"referenceQuantize"_s);
    auto *ref = new QWidget(how);
    auto *refl = new QHBoxLayout(ref);
    refl->setContentsMargins(0, 0, 0, 0);
    refl->addWidget(m_referenceModel, 1);
    refl->addWidget(m_referenceDtype);
    refl->addWidget(m_referenceQuantize);
    hf->addRow(tr("Reference model"), ref);
}

QWidget *EvaluationPage::buildSyncAndAlerts(QWidget *parent)
{
    auto *th = new QGroupBox(tr("Sync and alerts"), parent);
    auto *tf = new QFormLayout(th);
    m_sync = new QSpinBox(th);
    m_sync->setRange(-1, std::numeric_limits<int>::max());
    m_sync->setSpecialValueText(tr("only at the end"));
    // Counts with the locale's digit grouping, as the preview and the Run page write them ("8,192").
    for (QSpinBox *count : {m_context, m_stride, m_maxWindows, m_sync})
        count->setGroupSeparatorShown(true);
    m_sync->setToolTip(tr("Ranks merge their sums about every this many scored tokens each (0: every batch). More "
                          "often: a fresher live PPL and more comm share. The final PPL is the same either way."));
    tf->addRow(tr("Sync every (tokens)"), m_sync);
    // Both in percent, as the Run page shows them ("alert threshold 15.0%", "deviation … 0.01%");
    // the profile keeps fractions (thresholds() and load() convert).
    m_tolerance = new QDoubleSpinBox(th);
    m_tolerance->setObjectName(u"deviationTolerance"_s);
    m_tolerance->setDecimals(4);
    m_tolerance->setRange(0, 100);
    m_tolerance->setSingleStep(0.01);
    m_tolerance->setSuffix(tr(" %"));
    m_tolerance->setSpecialValueText(tr("none: bit-identical"));
    m_tolerance->setToolTip(tr("Allowed relative deviation of the final PPL from a one-rank baseline, in percent (none: "
                               "must be bit-identical). Past it, the run is flagged."));
    tf->addRow(tr("Deviation tolerance"), m_tolerance);
    m_commShare = new QDoubleSpinBox(th);
    m_commShare->setObjectName(u"commShareAlert"_s);
    m_commShare->setDecimals(1);
    m_commShare->setRange(0, 100);
    m_commShare->setSingleStep(0.5);
    m_commShare->setSuffix(tr(" %"));
    m_commShare->setToolTip(tr("Alert when a rank spends more than this share of its time communicating "
                               "(waiting for stragglers + transfer). Does not change any number."));
    tf->addRow(tr("Comm share alert"), m_commShare);
    m_stall = new QDoubleSpinBox(th);
    m_stall->setRange(0.1, 86400);
    m_stall->setSuffix(tr(" s"));
    m_stall->setToolTip(tr("A rank silent this long is shown as stalled and alerted on"));
    tf->addRow(tr("Stall after"), m_stall);
    m_timeout = new QDoubleSpinBox(th);
    m_timeout->setRange(1, 7 * 86400);
    m_timeout->setSuffix(tr(" s"));
    m_timeout->setToolTip(tr("A collective that takes longer is aborted and the run fails (rather than hanging)"));
    tf->addRow(tr("Collective timeout"), m_timeout);
    return th;
}

QWidget *EvaluationPage::buildPreviewBox()
{
    auto *previewBox = new QGroupBox(tr("Preview (clusterppl-agent plan)"), this);
    auto *pl = new QVBoxLayout(previewBox);
    m_preview = new QLabel(tr("Waiting for settings…"), previewBox);
    m_preview->setObjectName(u"planPreview"_s);
    m_preview->setWordWrap(true);
    m_preview->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_preview->setAlignment(Qt::AlignTop | Qt::AlignLeft);
    pl->addWidget(m_preview);
    m_shards = new QTableWidget(0, 3, previewBox);
    m_shards->setHorizontalHeaderLabels({tr("Rank"), tr("Windows"), tr("Scored tokens")});
    m_shards->verticalHeader()->hide();
    m_shards->horizontalHeader()->setStretchLastSection(true);
    m_shards->setEditTriggers(QAbstractItemView::NoEditTriggers);
    pl->addWidget(m_shards, 1);
    return previewBox;
}

void EvaluationPage::connectEdits()
{
    for (QLineEdit *e : {m_model, m_data, m_tokenizer})
        connect(e, &QLineEdit::textChanged, this, &EvaluationPage::schedulePreview);
    for (QComboBox *c : {m_modelKind, m_dataKind, m_protocol, m_dtype, m_device, m_backend, m_topology, m_schedule, m_onRankLoss, m_overlapSync,
                         m_quantize, m_referenceDtype, m_referenceQuantize})
        connect(c, &QComboBox::currentIndexChanged, this, &EvaluationPage::schedulePreview);
    connect(m_referenceModel, &QLineEdit::textChanged, this, &EvaluationPage::schedulePreview);
    connect(m_quantGroup, &QSpinBox::valueChanged, this, &EvaluationPage::schedulePreview);
    connect(m_quantizeHead, &QCheckBox::toggled, this, &EvaluationPage::schedulePreview);
    for (QSpinBox *s : {m_context, m_stride, m_batch, m_maxWindows, m_sync, m_tensorParallel})
        connect(s, &QSpinBox::valueChanged, this, &EvaluationPage::schedulePreview);
    connect(m_batchAuto, &QCheckBox::toggled, this, [this](bool on) {
        m_batch->setEnabled(!on);
        schedulePreview();
    });
    for (QDoubleSpinBox *s : {m_tolerance, m_commShare, m_stall, m_timeout})
        connect(s, &QDoubleSpinBox::valueChanged, this, [this] {
            if (!m_loading)
                Q_EMIT changed();
        });
    connect(m_dataKind, &QComboBox::currentIndexChanged, this, &EvaluationPage::updateDataMode);
    connect(m_protocol, &QComboBox::currentIndexChanged, this, &EvaluationPage::updateDataMode);
    connect(m_schedule, &QComboBox::currentIndexChanged, this, &EvaluationPage::updateDataMode);
}

EvaluationPage::~EvaluationPage()
{
    if (m_plan) {
        // Its finished() would reach a half-destroyed page (the temporary directory is gone, the
        // labels follow): nobody listens any more, then it is ended and reaped.
        m_plan->disconnect(this);
        m_plan->kill();
        m_plan->waitForFinished(2000);
    }
    delete m_tmp;
}

void EvaluationPage::load(const EvaluationSpec &e, const Thresholds &t)
{
    m_loading = true;
    m_loadTimeoutSeconds = e.loadTimeoutSeconds;
    const QString model = qs(e.model);
    setCombo(m_modelKind, model.endsWith(u".pt"_s) || model.endsWith(u".pth"_s) ? u"torchscript"_s : u"hf"_s);
    m_model->setText(model);
    if (!e.tokens.empty()) {
        setCombo(m_dataKind, u"tokens"_s);
        m_data->setText(qs(e.tokens));
    } else {
        const QString text = qs(e.text);
        const bool docs = QFileInfo(resolve(text)).isDir() || text.endsWith(u".jsonl"_s);
        setCombo(m_dataKind, docs ? u"documents"_s : u"text"_s);
        m_data->setText(text);
    }
    m_tokenizer->setText(qs(e.tokenizer));
    setCombo(m_protocol, qs(e.protocol));
    m_context->setValue(int(e.context));
    m_stride->setValue(int(e.stride));
    m_batchAuto->setChecked(e.batch == kAutoBatch);
    m_batch->setEnabled(e.batch != kAutoBatch);
    if (e.batch != kAutoBatch)
        m_batch->setValue(int(e.batch));
    m_maxWindows->setValue(int(std::min<std::int64_t>(e.maxWindows, std::numeric_limits<int>::max())));
    setCombo(m_dtype, qs(e.dtype));
    setCombo(m_device, qs(e.device));
    setCombo(m_backend, qs(e.backend));
    setCombo(m_topology, qs(e.topology));
    setCombo(m_schedule, qs(e.schedule));
    setCombo(m_onRankLoss, qs(e.onRankLoss));
    m_onRankLoss->setProperty("dynamicChoice", QVariant()); // updateDataMode: what the dynamic schedule had
    setCombo(m_overlapSync, e.overlapSync ? u"on"_s : u"off"_s);
    setCombo(m_quantize, qs(e.quantize == "int4-sym" ? "int4" : e.quantize));
    m_quantGroup->setValue(int(std::clamp<std::int64_t>(e.quantGroup, 32, 1 << 20)));
    m_quantizeHead->setChecked(e.quantizeHead);
    m_referenceModel->setText(qs(e.referenceModel));
    setCombo(m_referenceDtype, qs(e.referenceDtype));
    setCombo(m_referenceQuantize, qs(e.referenceQuantize == "int4-sym" ? "int4" : e.referenceQuantize));
    m_tensorParallel->setValue(e.tensorParallel);
    m_sync->setValue(int(std::clamp<std::int64_t>(t.syncEveryTokens, -1, std::numeric_limits<int>::max())));
    m_tolerance->setValue(t.deviationTolerance * 100);
    m_commShare->setValue(t.commShareAlert * 100);
    m_stall->setValue(t.stallSeconds);
    m_timeout->setValue(t.collectiveTimeoutSeconds);
    m_loading = false;
    updateDataMode();
    schedulePreview();
}

EvaluationSpec EvaluationPage::evaluation() const
{
    EvaluationSpec e;
    e.model = m_model->text().trimmed().toStdString();
    if (m_dataKind->currentData() == u"tokens"_s)
        e.tokens = m_data->text().trimmed().toStdString();
    else
        e.text = m_data->text().trimmed().toStdString();
    e.tokenizer = m_tokenizer->text().trimmed().isEmpty() ? "bytes" : m_tokenizer->text().trimmed().toStdString();
    e.protocol = m_protocol->currentData().toString().toStdString();
    e.context = m_context->value();
    e.stride = m_stride->value();
    e.batch = m_batchAuto->isChecked() ? kAutoBatch : m_batch->value();
    e.maxWindows = m_maxWindows->value();
    e.dtype = m_dtype->currentData().toString().toStdString();
    e.device = m_device->currentData().toString().toStdString();
    e.backend = m_backend->currentData().toString().toStdString();
    e.topology = m_topology->currentData().toString().toStdString();
    e.schedule = m_schedule->currentData().toString().toStdString();
    e.onRankLoss = m_onRankLoss->currentData().toString().toStdString();
    e.overlapSync = m_overlapSync->currentData() == u"on"_s;
    e.loadTimeoutSeconds = m_loadTimeoutSeconds;
    e.quantize = m_quantize->currentData().toString().toStdString();
    e.quantGroup = m_quantGroup->value();
    e.quantizeHead = m_quantizeHead->isChecked();
    e.referenceModel = m_referenceModel->text().trimmed().toStdString();
    e.referenceDtype = m_referenceDtype->currentData().toString().toStdString();
    e.referenceQuantize = m_referenceQuantize->currentData().toString().toStdString();
    e.tensorParallel = m_tensorParallel->value();
    return e;
}

Thresholds EvaluationPage::thresholds() const
{
    Thresholds t;
    t.syncEveryTokens = m_sync->value();
    t.deviationTolerance = fractionOf(m_tolerance);
    t.commShareAlert = fractionOf(m_commShare);
    t.stallSeconds = m_stall->value();
    t.collectiveTimeoutSeconds = m_timeout->value();
    return t;
}

void EvaluationPage::setBaseDirectory(const QString &dir)
{
    m_base = dir;
    schedulePreview();
}

void EvaluationPage::setWorldSize(int ranks)
{
    if (ranks == m_worldSize)
        return;
    m_worldSize = std::max(ranks, 1);
    schedulePreview();
}

QString EvaluationPage::resolve(const QString &path) const
{
    if (path.isEmpty() || QFileInfo(path).isAbsolute() || m_base.isEmpty())
        return path;
    return QDir::cleanPath(m_base + u'/' + path);
}

void EvaluationPage::updateDataMode()
{
    const bool tokens = m_dataKind->currentData() == u"tokens"_s;
    m_tokenizer->setEnabled(!tokens);
    m_stride->setEnabled(m_protocol->currentData() == u"hf-sliding"_s);
    // Static shards cannot move to another rank: a static run fails on a lost rank, whatever was chosen.
    // Back on the dynamic schedule, the choice made there returns.
    const bool dynamic = m_schedule->currentData() == u"dynamic"_s;
    const char *kept = "dynamicChoice";
    if (!dynamic && m_onRankLoss->currentData() != u"fail"_s) {
        m_onRankLoss->setProperty(kept, m_onRankLoss->currentData());
        m_onRankLoss->setCurrentIndex(m_onRankLoss->findData(u"fail"_s));
    } else if (dynamic && m_onRankLoss->property(kept).isValid()) {
        m_onRankLoss->setCurrentIndex(m_onRankLoss->findData(m_onRankLoss->property(kept)));
        m_onRankLoss->setProperty(kept, QVariant());
    }
    m_onRankLoss->setEnabled(dynamic);
}

void EvaluationPage::saveSettings() const
{
    QSettings s;
    s.beginGroup(u"evaluation"_s);
    const EvaluationSpec e = evaluation();
    const Thresholds t = thresholds();
    s.setValue(u"saved"_s, true);
    s.setValue(u"version"_s, kSettingsVersion);
    s.setValue(u"model"_s, qs(e.model));
    s.setValue(u"tokens"_s, qs(e.tokens));
    s.setValue(u"text"_s, qs(e.text));
    s.setValue(u"tokenizer"_s, qs(e.tokenizer));
    s.setValue(u"protocol"_s, qs(e.protocol));
    s.setValue(u"context"_s, qint64(e.context));
    s.setValue(u"stride"_s, qint64(e.stride));
    s.setValue(u"batch"_s, qint64(e.batch));
    s.setValue(u"maxWindows"_s, qint64(e.maxWindows));
    s.setValue(u"dtype"_s, qs(e.dtype));
    s.setValue(u"device"_s, qs(e.device));
    s.setValue(u"backend"_s, qs(e.backend));
    s.setValue(u"topology"_s, qs(e.topology));
    s.setValue(u"schedule"_s, qs(e.schedule));
    s.setValue(u"onRankLoss"_s, qs(e.onRankLoss));
    s.setValue(u"overlapSync"_s, e.overlapSync);
    s.setValue(u"quantize"_s, qs(e.quantize));
    s.setValue(u"quantGroup"_s, qint64(e.quantGroup));
    s.setValue(u"quantizeHead"_s, e.quantizeHead);
    s.setValue(u"referenceModel"_s, qs(e.referenceModel));
    s.setValue(u"referenceDtype"_s, qs(e.referenceDtype));
    s.setValue(u"referenceQuantize"_s, qs(e.referenceQuantize));
    s.setValue(u"tensorParallel"_s, e.tensorParallel);
    s.setValue(u"syncEveryTokens"_s, qint64(t.syncEveryTokens));
    s.setValue(u"deviationTolerance"_s, t.deviationTolerance);
    s.setValue(u"commShareAlert"_s, t.commShareAlert);
    s.setValue(u"stallSeconds"_s, t.stallSeconds);
    s.setValue(u"collectiveTimeoutSeconds"_s, t.collectiveTimeoutSeconds);
    s.setValue(u"base"_s, m_base);
}

bool EvaluationPage::restoreSettings()
{
    QSettings s;
    s.beginGroup(u"evaluation"_s);
    if (!s.value(u"saved"_s).toBool())
        return false;
    EvaluationSpec e;
    Thresholds t;
    auto str = [&](const char *key, std::string &out) { out = s.value(QString::fromLatin1(key), qs(out)).toString().toStdString(); };
    auto i64 = [&](const char *key, std::int64_t &out) { out = s.value(QString::fromLatin1(key), qint64(out)).toLongLong(); };
    auto dbl = [&](const char *key, double &out) { out = s.value(QString::fromLatin1(key), out).toDouble(); };
    str("model", e.model);
    str("tokens", e.tokens);
    str("text", e.text);
    str("tokenizer", e.tokenizer);
    str("protocol", e.protocol);
    i64("context", e.context);
    i64("stride", e.stride);
    i64("batch", e.batch);
    i64("maxWindows", e.maxWindows);
    str("dtype", e.dtype);
    str("device", e.device);
    str("backend", e.backend);
    str("topology", e.topology);
    str("schedule", e.schedule);
    str("onRankLoss", e.onRankLoss);
    // Settings saved before surviving a lost rank became the default (no "version", or 1) hold
    // "fail" whenever the user never touched the control: fail was the default then, and the page
    // saves every field. Such a "fail" cannot be told from a chosen one, so it reads as a profile
    // without on_rank_loss does: the schedule's default (continue with the dynamic schedule).
    // Saved from version 2 on, a "fail" is kept (docs/dashboard.md, "Settings").
    const int version = s.value(u"version"_s, 1).toInt();
    if (version < 2 && e.onRankLoss == "fail")
        e.onRankLoss = defaultOnRankLoss(e.schedule);
    // Likewise the precision: float32 was the default before auto (version 3), so an old
    // "float32" reads as auto (bfloat16 on GPUs, float32 on the CPU). From version 3 on it is kept.
    if (version < 3 && e.dtype == "float32")
        e.dtype = "auto";
    e.overlapSync = s.value(u"overlapSync"_s, e.overlapSync).toBool();
    str("quantize", e.quantize);
    i64("quantGroup", e.quantGroup);
    e.quantizeHead = s.value(u"quantizeHead"_s, e.quantizeHead).toBool();
    str("referenceModel", e.referenceModel);
    str("referenceDtype", e.referenceDtype);
    str("referenceQuantize", e.referenceQuantize);
    e.tensorParallel = std::max(1, s.value(u"tensorParallel"_s, e.tensorParallel).toInt());
    i64("syncEveryTokens", t.syncEveryTokens);
    dbl("deviationTolerance", t.deviationTolerance);
    dbl("commShareAlert", t.commShareAlert);
    dbl("stallSeconds", t.stallSeconds);
    dbl("collectiveTimeoutSeconds", t.collectiveTimeoutSeconds);
    // The directory relative paths were written against; one that is gone (a deleted checkout, an
    // unmounted share) would send every relative path nowhere: the profile's own stays then.
    if (const QString base = s.value(u"base"_s).toString(); !base.isEmpty() && QFileInfo(base).isDir())
        m_base = base;
    load(e, t);
    return true;
}

} // namespace cppl::app
