// SPDX-License-Identifier: MIT
// The memory plan of tensor parallelism (agent/lib/gpu/batch_sizing.*'s planMemory, `plan --model`):
// the Llama 7B, 13B and 70B configs' weights, K/V and activations per rank against a hand
// computation from config.json's figures; the recommendation; the command's text and JSON; mixtures of
// experts (Mixtral 8x7B, Qwen1.5-MoE-A2.7B) against their published parameter counts.
#include "gpu/batch_sizing.h"

#include "test_paths.h"
#include "test_process.h"
#include "test_verify.h"

#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>

using namespace Qt::StringLiterals;
using cppl::agent::MemoryPlanInput;
using cppl::agent::PlanModel;
using cppl::agent::RankMemory;

namespace {

constexpr std::int64_t kGiB = std::int64_t{1} << 30;

struct Llama
{
    const char *name;
    std::int64_t hidden, layers, heads, kvHeads, intermediate;
};
// The published Llama 2 configs (config.json): vocabulary 32000, head dimension 128, untied.
constexpr Llama k7B{"7B", 4096, 32, 32, 32, 11008};
constexpr Llama k13B{"13B", 5120, 40, 40, 40, 13824};
constexpr Llama k70B{"70B", 8192, 80, 64, 8, 28672};

PlanModel planModel(const Llama &l)
{
    PlanModel m;
    m.shape = {l.hidden, l.intermediate, l.layers, l.heads, l.kvHeads, 0, 32000};
    return m;
}

MemoryPlanInput input(const Llama &l, double freeGiB, std::int64_t batch = 8, std::int64_t context = 4096)
{
    MemoryPlanInput in;
    in.model = planModel(l);
    in.elementBytes = 2;
    in.batch = batch;
    in.context = context;
    in.freeBytes = static_cast<std::int64_t>(freeGiB * double(kGiB));
    return in;
}

/// config.json as Hugging Face writes it for a Llama 2 model.
void writeConfig(const QString &dir, const Llama &l)
{
    QDir().mkpath(dir);
    cppl::test::writeFile(dir + u"/config.json"_s,
                          QStringLiteral(R"({"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": %1,
 "num_hidden_layers": %2, "num_attention_heads": %3, "num_key_value_heads": %4, "intermediate_size": %5,
 "vocab_size": 32000, "max_position_embeddings": 4096, "rms_norm_eps": 1e-05, "hidden_act": "silu",
 "tie_word_embeddings": false, "torch_dtype": "bfloat16"})")
                              .arg(l.hidden)
                              .arg(l.layers)
                              .arg(l.heads)
                              .arg(l.kvHeads)
                              .arg(l.intermediate)
                              .toUtf8());
}

} // namespace

class TestMemoryPlan : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void weightsPerRank_data()
    {
        QTest::addColumn<int>("model"); // 0: 7B, 1: 13B, 2: 70B
        QTest::addColumn<int>("n");
        QTest::addColumn<qint64>("sharded");    // parameters
        QTest::addColumn<qint64>("replicated"); // parameters
        // By hand, per layer: q and o 2·H·H, gate/up/down 3·H·I, k and v 2·H·KV·128; the embedding
        // and the head 2·V·H (vocabulary ranges of ceil(V/N)); RMSNorms 2·H per layer and H.
        // 7B: 32·(2·4096·4096 + 3·4096·11008 + 2·4096·4096) = 6,476,005,376; 2·32000·4096 =
        // 262,144,000; norms 32·8192 + 4096 = 266,240: 6,738,415,616 in all (Llama 2 7B's 6.74 B).
        QTest::addRow("7B, N = 1") << 0 << 1 << qint64(6'476'005'376 + 262'144'000) << qint64(266'240);
        QTest::addRow("7B, N = 2") << 0 << 2 << qint64(3'238'002'688 + 131'072'000) << qint64(266'240);
        // 13B: 40·(2·5120·5120 + 3·5120·13824 + 2·5120·5120) = 40·(52,428,800 + 212,336,640 +
        // 52,428,800) = 12,687,769,600; 2·32000·5120 = 327,680,000; norms 40·10240 + 5120 = 414,720.
        QTest::addRow("13B, N = 1") << 1 << 1 << qint64(12'687'769'600 + 327'680'000) << qint64(414'720);
        QTest::addRow("13B, N = 4") << 1 << 4 << qint64(3'171'942'400 + 81'920'000) << qint64(414'720);
        // 70B: 80·(2·8192·8192 + 3·8192·28672 + 2·8192·8·128) = 80·(134,217,728 + 704,643,072 +
        // 16,777,216) = 68,451,041,280; 2·32000·8192 = 524,288,000; norms 80·16384 + 8192 = 1,318,912.
        QTest::addRow("70B, N = 8: K/V heads split") << 2 << 8 << qint64(8'556'380'160 + 65'536'000) << qint64(1'318'912);
        // N = 16 > 8 K/V heads: each rank holds the one K/V head its query heads read, replicated:
        // sharded 80·838,860,800 / 16 = 4,194,304,000 and 2·2000·8192 = 32,768,000; replicated k and
        // v 80·2·8192·128 = 167,772,160 beside the norms.
        QTest::addRow("70B, N = 16: K/V heads replicated") << 2 << 16 << qint64(4'194'304'000 + 32'768'000) << qint64(167'772'160 + 1'318'912);
    }
    void weightsPerRank()
    {
        QFETCH(int, model);
        QFETCH(int, n);
        QFETCH(qint64, sharded);
        QFETCH(qint64, replicated);
        const Llama l = std::array{k7B, k13B, k70B}[static_cast<std::size_t>(model)];
        MemoryPlanInput in = input(l, 80);
        in.gpusPerNode = 16;
        const RankMemory r = cppl::agent::rankMemory(in, n);
        QVERIFY2(r.splittable(), r.refusal.c_str());
        QCOMPARE(r.shardedWeightBytes, 2 * sharded); // bfloat16
        QCOMPARE(r.replicatedWeightBytes, 2 * replicated);
        QCOMPARE(r.weightBytes, 2 * (sharded + replicated));
        // float32 doubles every figure; int8 linear layers take 1 + 2/32 bytes a weight, the rest stays bfloat16.
        in.elementBytes = 4;
        QCOMPARE(cppl::agent::rankMemory(in, n).weightBytes, 4 * (sharded + replicated));
    }

    void quantizedLinearLayers()
    {
        // 7B at N = 1 with int4 (0.5 + 2/32 bytes a weight): 6,476,005,376 · 0.5625 = 3,642,753,024
        // bytes of linear layers, and the embedding, head and norms in bfloat16: 2·262,410,240.
        MemoryPlanInput in = input(k7B, 80);
        in.quantize = "int4";
        QCOMPARE(cppl::agent::rankMemory(in, 1).weightBytes, qint64(3'642'753'024 + 2 * 262'410'240));
        in.quantize = "int8"; // 1.0625 bytes a weight
        QCOMPARE(cppl::agent::rankMemory(in, 1).weightBytes, qint64(6'880'755'712 + 2 * 262'410'240));
        QCOMPARE(cppl::agent::linearBytesPerWeight(2, "none"), 2.0);
    }

    void kvAndActivations()
    {
        // 7B at N = 2, bfloat16, one window of 4096 tokens: 16 heads and 16 K/V heads of 128, 5504
        // intermediate columns, 16000 vocabulary rows per rank.
        const RankMemory r = cppl::agent::rankMemory(input(k7B, 80, 1, 4096), 2);
        // K/V of one layer: 4096 tokens · 2 · 16 heads · 128 · 2 bytes.
        QCOMPARE(r.kvBytes, qint64(33'554'432));
        // The layer's peak per token: x, its norm, q, k, v: (2·4096 + 48·128)·2 = 28,672; plus the
        // MLP's (3·4096 + 3·5504)·2 = 57,600 (the largest step); the scores of 128-query blocks
        // 16·128·4096·(2·2 + 4) = 67,108,864: 4096·86,272 + 67,108,864 = 420,478,976 (above the
        // logits' 4096·4096·2·2 + 4096·16000·2 + 4096·8 = 198,213,632).
        QCOMPARE(r.activationBytes, qint64(420'478'976));
        // The reserve: 1 GiB, and NCCL's buffers of a run over NCCL (8 ranks: the sums' two one-channel
        // communicators; N = 2: the group's own).
        QCOMPARE(r.reserveBytes, cppl::agent::kBatchReserveBytes + 2 * cppl::agent::kNcclSumCommunicatorBytes + cppl::agent::kNcclCommunicatorBytes);
        QCOMPARE(r.totalBytes, r.weightBytes + r.activationBytes + r.reserveBytes);
        MemoryPlanInput alone = input(k7B, 80, 1, 4096);
        alone.ranks = 1; // one rank: no NCCL communicator at all
        QCOMPARE(cppl::agent::rankMemory(alone, 1).reserveBytes, cppl::agent::kBatchReserveBytes);
        QCOMPARE(cppl::agent::rankMemory(input(k7B, 80, 8, 4096), 2).activationBytes, 8 * qint64(420'478'976));
    }

    void fitsAsTheAgentsBatchSizingJudges()
    {
        // 7B at N = 1 on 24 GiB, 8 ranks: (24 GiB - 13,476,831,232 - 1 GiB - 2 · 128 MiB) · 0.85 =
        // 9,308,175,974 bytes for windows of 673,185,792 (N = 1: 4096·131,584 + 134,217,728): 13 fit,
        // auto takes 8; as chooseBatch judges a rank of a hierarchical run over NCCL.
        const RankMemory r = cppl::agent::rankMemory(input(k7B, 24), 1);
        cppl::agent::BatchSizingInput b;
        b.freeBytes = b.totalBytes = static_cast<std::int64_t>(24 * double(kGiB));
        b.weightBytes = r.weightBytes;
        b.ncclCommunicators = 2; // the budget reads memory figures only, not the model's shape
        const std::int64_t agents = cppl::agent::chooseBatch(b).budgetBytes;
        CPPL_VERIFY2(std::abs(static_cast<double>(agents) - 9'308'175'974.0) <= 1.0, std::to_string(agents).c_str());
        // The plan's budget, from its own figures, is the agent's.
        const double plans = static_cast<double>(b.freeBytes - r.weightBytes - r.reserveBytes) * cppl::agent::kBatchMemoryShare;
        QVERIFY(std::abs(plans - static_cast<double>(agents)) <= 1.0);
        QCOMPARE(r.weightBytes, qint64(13'476'831'232));
        QCOMPARE(r.activationBytes, 8 * qint64(673'185'792));
        QVERIFY(r.fits);
        QCOMPARE(r.maxBatch, qint64(8));
        QVERIFY(!cppl::agent::rankMemory(input(k7B, 24, 16), 1).fits);
        QVERIFY(!cppl::agent::rankMemory(input(k7B, 0), 1).fits); // no memory given: no verdict
    }

    void recommendsTheSmallestNThatFits_data()
    {
        QTest::addColumn<int>("model");
        QTest::addColumn<double>("gib");
        QTest::addColumn<int>("recommended"); // 0: nothing fits
        QTest::addColumn<QString>("why");
        QTest::addRow("7B on 80 GiB") << 0 << 80.0 << 1 << "N = 1: the smallest that fits 8 windows of 4096 tokens in 80.00 GiB per GPU; data-parallel width 8 (8 ranks / 1)";
        QTest::addRow("13B on 24 GiB") << 1 << 24.0 << 2 << "N = 2: the smallest";
        // 70B: 137.95 GB of weights; N = 2 holds 68,977,967,104 bytes and 8 windows of 864,026,624.
        QTest::addRow("70B on 80 GiB") << 2 << 80.0 << 2 << "data-parallel width 4 (8 ranks / 2)";
        QTest::addRow("70B on 24 GiB") << 2 << 24.0 << 8 << "N = 8";
        QTest::addRow("70B on 16 GiB") << 2 << 16.0 << 0 << "nothing fits 8 windows of 4096 tokens in 16.00 GiB: at N = 8 (the largest this node allows)";
    }
    void recommendsTheSmallestNThatFits()
    {
        QFETCH(int, model);
        QFETCH(double, gib);
        QFETCH(int, recommended);
        QFETCH(QString, why);
        const Llama l = std::array{k7B, k13B, k70B}[static_cast<std::size_t>(model)];
        const cppl::agent::MemoryPlan p = cppl::agent::planMemory(input(l, gib));
        QCOMPARE(p.recommended, recommended);
        QCOMPARE(p.candidates.size(), std::size_t{4}); // 1, 2, 4, 8: the divisors of 8 GPUs per node
        CPPL_VERIFY2(QString::fromStdString(p.why).contains(why), p.why.c_str());
        for (const RankMemory &c : p.candidates)
            QCOMPARE(c.fits, recommended > 0 && c.n >= recommended); // more ranks per group, less per rank
    }

    void refusesWhatTheAgentRefuses()
    {
        // 40 heads (13B) do not divide by 3; 8 K/V heads (70B) neither divide by 3 nor divide it.
        QCOMPARE(cppl::agent::tensorParallelRefusal(planModel(k13B), 3),
                 std::string("--tensor-parallel 3: the model's 40 attention heads do not divide by it"));
        PlanModel odd = planModel(k70B);
        odd.shape.heads = 48;
        QCOMPARE(cppl::agent::tensorParallelRefusal(odd, 3),
                 std::string("--tensor-parallel 3: the model's 8 key/value heads can be neither split by it nor replicated to it"));
        MemoryPlanInput in = input(k13B, 80);
        in.gpusPerNode = 16; // 16 does not divide 40 heads: listed as refused, never recommended
        const cppl::agent::MemoryPlan p = cppl::agent::planMemory(in);
        QCOMPARE(p.candidates.back().n, 16);
        QVERIFY(!p.candidates.back().splittable());
    }

    void commandWritesTextAndJson()
    {
        QTemporaryDir dir;
        const QString model = dir.filePath(u"llama-70b"_s);
        writeConfig(model, k70B);
        const QString json = dir.filePath(u"plan.json"_s);
        const cppl::test::ProcessResult r = cppl::test::runProcess(
            cppl::test::kAgent, {u"plan"_s, u"--model"_s, model, u"--tensor-parallel"_s, u"4"_s, u"--gpu-memory"_s, u"80"_s, u"--context"_s,
                                 u"4096"_s, u"--ranks"_s, u"16"_s, u"--json"_s, json});
        CPPL_VERIFY2(r.exitCode == 0, qPrintable(r.describe()));
        CPPL_VERIFY2(r.out.contains(u"Recommended: N = 2: the smallest that fits 8 windows of 4096 tokens in 80.00 GiB per GPU; "
                                    "data-parallel width 8 (16 ranks / 2)"_s),
                     qPrintable(r.out));
        CPPL_VERIFY2(r.out.contains(u"--tensor-parallel 4: fits"_s), qPrintable(r.out));
        const QJsonObject m = cppl::test::readJson(json).value(u"memory"_s).toObject();
        QCOMPARE(m.value(u"recommended"_s).toInt(), 2);
        QCOMPARE(m.value(u"data_parallel_width"_s).toInt(), 8);
        const QJsonObject asked = m.value(u"asked"_s).toObject();
        QCOMPARE(asked.value(u"tensor_parallel"_s).toInt(), 4);
        // 70B at N = 4: 68,451,041,280 / 4 + 2·8000·8192 sharded, 1,318,912 replicated, bfloat16.
        QCOMPARE(asked.value(u"weights_bytes"_s).toInteger(), 2 * (qint64(17'112'760'320) + 131'072'000 + 1'318'912));
        QVERIFY(asked.value(u"fits"_s).toBool());
        QCOMPARE(m.value(u"candidates"_s).toArray().size(), 4);
        // Bad flags are bad arguments, named.
        const cppl::test::ProcessResult bad = cppl::test::runProcess(cppl::test::kAgent, {u"plan"_s, u"--model"_s, model, u"--gpu-memory"_s, u"lots"_s});
        CPPL_VERIFY2(bad.exitCode == 2 && bad.err.contains(u"--gpu-memory \"lots\""_s), qPrintable(bad.describe()));
        const cppl::test::ProcessResult q = cppl::test::runProcess(cppl::test::kAgent, {u"plan"_s, u"--model"_s, model, u"--quantize"_s, u"int3"_s});
        CPPL_VERIFY2(q.exitCode == 2 && q.err.contains(u"--quantize \"int3\" is not one of none, int8, int4"_s), qPrintable(q.describe()));
    }

    // A mixture of experts: every expert counted (the published totals: Mixtral 8x7B 46.7B, 12.9B
    // active; Qwen1.5-MoE-A2.7B 14.3B, 2.7B active), split by the experts' intermediate columns.
    void plansAMixtureOfExperts_data()
    {
        QTest::addColumn<QByteArray>("config");
        QTest::addColumn<qint64>("params");
        QTest::addColumn<qint64>("active");
        QTest::addColumn<qint64>("sharded"); // bytes at N = 2, bfloat16
        QTest::addColumn<qint64>("replicated");
        QTest::addColumn<QString>("shape");
        // Mixtral 8x7B: (attention 41,943,040 + experts 8 x 176,160,768) x 32 layers / 2 + 16,000 x 4096 x 2
        // vocabulary rows sharded; norms 266,240 (bfloat16) and the routers 32 x 8 x 4096 (double) replicated.
        QTest::addRow("Mixtral 8x7B") << QByteArray(R"({"model_type": "mixtral", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
                    "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 32000, "num_local_experts": 8, "num_experts_per_tok": 2,
                    "max_position_embeddings": 32768, "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "sliding_window": null})")
                                     << qint64(46'702'792'704) << qint64(12'879'925'248) << qint64(2 * (23'219'666'944 + 131'072'000))
                                     << qint64(2 * 266'240 + 8 * 1'048'576) << u"top 2 of 8 experts of 14336 in 32 layers"_s;
        // Qwen1.5-MoE-A2.7B: q/k/v biases, 60 experts of 1408, top 4, a shared expert of 5632 and its gate.
        QTest::addRow("Qwen1.5-MoE-A2.7B")
            << QByteArray(R"({"model_type": "qwen2_moe", "hidden_size": 2048, "num_hidden_layers": 24, "num_attention_heads": 16,
                    "num_key_value_heads": 16, "intermediate_size": 5632, "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632,
                    "num_experts": 60, "num_experts_per_tok": 4, "norm_topk_prob": false, "decoder_sparse_step": 1, "mlp_only_layers": [],
                    "vocab_size": 151936, "max_position_embeddings": 8192, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
                    "tie_word_embeddings": false, "use_sliding_window": false})")
            << qint64(14'315'784'192) << qint64(2'689'173'504)
            << qint64(2) * ((qint64(24) * (4 * 2048 * 2048 + 3 * 2048 * (60 * 1408 + 5632)) + 24 * 3 * 2048) / 2 + qint64(75'968) * 2048 * 2)
            << qint64(2) * (24 * 2 * 2048 + 2048) + qint64(8) * 24 * 61 * 2048 << u"top 4 of 60 experts of 1408 and a shared expert of 5632 in 24 layers"_s;
    }
    void plansAMixtureOfExperts()
    {
        QFETCH(QByteArray, config);
        QFETCH(qint64, params);
        QFETCH(qint64, active);
        QFETCH(qint64, sharded);
        QFETCH(qint64, replicated);
        QFETCH(QString, shape);
        QTemporaryDir dir;
        cppl::test::writeFile(dir.filePath(u"config.json"_s), config);
        const QString json = dir.filePath(u"plan.json"_s);
        const cppl::test::ProcessResult r =
            cppl::test::runProcess(cppl::test::kAgent, {u"plan"_s, u"--model"_s, dir.path(), u"--tensor-parallel"_s, u"2"_s, u"--json"_s, json});
        CPPL_VERIFY2(r.exitCode == 0, qPrintable(r.describe()));
        CPPL_VERIFY2(r.out.contains(shape) && r.out.contains(u"%1 parameters, %2 active per token"_s.arg(params).arg(active)), qPrintable(r.out));
        const QJsonObject m = cppl::test::readJson(json).value(u"memory"_s).toObject();
        QCOMPARE(m.value(u"params"_s).toInteger(), params);
        QCOMPARE(m.value(u"active_params_per_token"_s).toInteger(), active);
        const QJsonObject asked = m.value(u"asked"_s).toObject();
        QCOMPARE(asked.value(u"weights_sharded_bytes"_s).toInteger(), sharded);
        QCOMPARE(asked.value(u"weights_replicated_bytes"_s).toInteger(), replicated);
        QCOMPARE(asked.value(u"weights_bytes"_s).toInteger(), sharded + replicated);
    }

    // Experts whose width N does not divide are refused as the agent refuses them.
    void refusesExpertsNotDividingN()
    {
        PlanModel m = planModel(k7B);
        m.experts = 8;
        m.topK = 2;
        m.sparseLayers = m.shape.layers;
        m.expertIntermediate = 14337;
        QCOMPARE(cppl::agent::tensorParallelRefusal(m, 2), std::string("--tensor-parallel 2: the experts' intermediate size 14337 does not divide by it"));
        m.expertIntermediate = 1408;
        m.sharedIntermediate = 5633;
        QCOMPARE(cppl::agent::tensorParallelRefusal(m, 2),
                 std::string("--tensor-parallel 2: the shared expert's intermediate size 5633 does not divide by it"));
        m.sharedIntermediate = 5632;
        QVERIFY(cppl::agent::tensorParallelRefusal(m, 2).empty());
    }
};

QTEST_GUILESS_MAIN(TestMemoryPlan)
#include "tst_memory_plan.moc"
