// SPDX-License-Identifier: MIT
// Loading a model's weights: WeightSource's tensors and the slices tensor parallelism will read
// (rows, columns), the pages each release drops from the resident set (and only those), every
// Linear storage against at::linear, stacked parts and Conv1D weights included, and the staged
// (pinned, on a GPU) upload's order, checked over a copy queue whose copies a thread makes late.
#include "eval/linear.h"
#include "eval/staged_upload.h"
#include "eval/weight_source.h"
#include "model/safetensors.h"

#include "cppl/errors.h"
#include "test_skip.h"

#include <ATen/ATen.h>

#include <QTemporaryDir>
#include <QTest>

#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

using namespace cppl;
using namespace cppl::agent;

namespace {

std::int64_t pageSize() { return static_cast<std::int64_t>(::sysconf(_SC_PAGESIZE)); }

struct Stored
{
    std::string name;
    at::Tensor values; ///< float32 or bfloat16, contiguous
};

// model.safetensors in `dir` holding `tensors` in order, the header padded with spaces so the data
// section starts on a page: each tensor's bytes then lie at known page offsets.
void writeCheckpoint(const QString &dir, const std::vector<Stored> &tensors)
{
    nlohmann::json header = nlohmann::json::object();
    std::string data;
    for (const Stored &t : tensors) {
        const auto bytes = static_cast<std::size_t>(t.values.numel() * t.values.element_size());
        header[t.name] = {{"dtype", t.values.scalar_type() == at::kFloat ? "F32" : "BF16"},
                          {"shape", t.values.sizes().vec()},
                          {"data_offsets", {data.size(), data.size() + bytes}}};
        data.append(static_cast<const char *>(t.values.data_ptr()), bytes);
    }
    std::string text = header.dump();
    const std::size_t page = static_cast<std::size_t>(pageSize());
    text.resize((text.size() + 8 + page - 1) / page * page - 8, ' ');
    std::ofstream f((dir + QStringLiteral("/model.safetensors")).toStdString(), std::ios::binary);
    const std::uint64_t n = text.size();
    for (int b = 0; b < 8; ++b)
        f.put(static_cast<char>((n >> (8 * b)) & 0xff));
    f << text << data;
}

// Resident bytes of the mapping that holds `p` (its Rss line in /proc/self/smaps).
std::int64_t residentBytesAround(const void *p)
{
    std::ifstream smaps("/proc/self/smaps");
    const auto at = reinterpret_cast<std::uintptr_t>(p);
    bool inside = false;
    for (std::string line; std::getline(smaps, line);) {
        std::uintptr_t lo = 0, hi = 0;
        char dash = 0;
        std::istringstream range(line);
        if (line.find(':') > line.find(' ') && (range >> std::hex >> lo >> dash >> hi) && dash == '-') {
            inside = lo <= at && at < hi;
            continue;
        }
        if (inside && line.rfind("Rss:", 0) == 0)
            return std::stoll(line.substr(4)) * 1024;
    }
    return -1;
}

at::Tensor randomFloats(std::vector<std::int64_t> shape, std::uint64_t seed)
{
    at::manual_seed(seed);
    return at::randn(shape, at::TensorOptions().dtype(at::kFloat));
}

LoadOptions cpuFloat32()
{
    LoadOptions o;
    o.dtype = at::kFloat;
    return o;
}

bool sameBits(const at::Tensor &a, const at::Tensor &b)
{
    const at::Tensor x = a.contiguous(), y = b.contiguous();
    return x.sizes() == y.sizes() && std::memcmp(x.data_ptr(), y.data_ptr(), static_cast<std::size_t>(x.numel() * x.element_size())) == 0;
}

// Every page of [p, p + bytes) read once, so that it is resident.
void touchPages(const unsigned char *p, std::size_t bytes)
{
    volatile unsigned char sink = 0;
    for (std::size_t i = 0; i < bytes; i += static_cast<std::size_t>(pageSize()))
        sink = static_cast<unsigned char>(sink + p[i]);
    (void)sink;
}

// A queue that never waits for its fences: the host overwrites buffers the thread has not copied yet.
class NoWaitQueue final : public CopyQueue
{
public:
    explicit NoWaitQueue(int delayMicroseconds) : m_inner(delayMicroseconds) {}
    at::Tensor hostBuffer(std::int64_t bytes) override { return m_inner.hostBuffer(bytes); }
    void enqueue(const at::Tensor &dst, const at::Tensor &src) override { m_inner.enqueue(dst, src); }
    void mark(int slot) override { m_inner.mark(slot); }
    void wait(int /*slot*/) override {}
    void publish() override { m_inner.publish(); }
    std::string name() const override { return "no-wait"; }

private:
    ThreadCopyQueue m_inner;
};

std::string errorOf(const std::function<void()> &f)
{
    try {
        f();
    } catch (const Error &e) {
        return e.what();
    }
    return "(no error)";
}

} // namespace

class TestModelLoading : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void slicesAreTheTensorsParts()
    {
        QTemporaryDir dir;
        const at::Tensor w = randomFloats({6, 10}, 1);
        const at::Tensor b = randomFloats({6}, 2);
        const at::Tensor half = randomFloats({4, 5}, 3).to(at::kBFloat16);
        writeCheckpoint(dir.path(), {{"w", w}, {"b", b}, {"h", half}});
        WeightSource src(SafetensorsCheckpoint::openDirectory(dir.path().toStdString()), cpuFloat32());
        QVERIFY(sameBits(src.get("w", {6, 10}), w));
        QVERIFY(sameBits(src.getRows("w", {6, 10}, 2, 3), w.narrow(0, 2, 3)));
        QVERIFY(sameBits(src.getRows("b", {6}, 4, 2), b.narrow(0, 4, 2)));
        const at::Tensor cols = src.getColumns("w", {6, 10}, 7, 3);
        QCOMPARE(cols.sizes().vec(), (std::vector<std::int64_t>{6, 3}));
        QVERIFY(sameBits(cols, w.narrow(1, 7, 3)));
        // A stored dtype other than the evaluation's is converted, slices included.
        QVERIFY(sameBits(src.get("h", {4, 5}), half.to(at::kFloat)));
        QVERIFY(sameBits(src.getColumns("h", {4, 5}, 1, 2), half.to(at::kFloat).narrow(1, 1, 2)));
        // Only what was read counts: 60 + 30 + 2 + 18 + 20 + 8 parameters, in float32.
        QCOMPARE(src.params(), std::int64_t{60 + 30 + 2 + 18 + 20 + 8});
        QCOMPARE(src.bytes(), src.params() * 4);
        QVERIFY(QString::fromStdString(errorOf([&] { (void)src.getRows("w", {10, 6}, 0, 1); })).contains(QStringLiteral("has shape [6, 10], expected [10, 6]")));
    }

    void releasesDropExactlyTheirPages()
    {
        // Rows of one page, and rows of two pages whose second half is one whole page: each release
        // must drop exactly the whole pages of its slice from the resident set, and the values stay
        // readable (faulted back in from the file).
        const std::int64_t page = pageSize(), perPage = page / 4;
        QTemporaryDir dir;
        const at::Tensor rows = randomFloats({16, perPage}, 4);
        const at::Tensor wide = randomFloats({8, 2 * perPage}, 5);
        writeCheckpoint(dir.path(), {{"rows", rows}, {"wide", wide}});
        WeightSource src(SafetensorsCheckpoint::openDirectory(dir.path().toStdString()), cpuFloat32());
        const at::Tensor r = src.get("rows", {16, perPage}), w = src.get("wide", {8, 2 * perPage});
        (void)r.sum().item<float>(); // every page resident
        (void)w.sum().item<float>();
        const std::int64_t before = residentBytesAround(r.data_ptr());
        QVERIFY2(before >= (16 + 16) * page, qPrintable(QStringLiteral("resident %1").arg(before)));

        src.releaseRows("rows", 4, 3);
        QCOMPARE(residentBytesAround(r.data_ptr()), before - 3 * page);
        src.releaseColumns("wide", 0, perPage / 2); // half a page per row: nothing whole to drop
        QCOMPARE(residentBytesAround(r.data_ptr()), before - 3 * page);
        src.releaseColumns("wide", perPage, perPage); // the second page of each of the 8 rows
        QCOMPARE(residentBytesAround(r.data_ptr()), before - 11 * page);
        src.release("rows");
        QCOMPARE(residentBytesAround(r.data_ptr()), before - 24 * page);

        QVERIFY(sameBits(r, rows));
        QVERIFY(sameBits(w, wide));
    }

    void stagedUploadKeepsTheBits_data()
    {
        QTest::addColumn<qint64>("chunkBytes");
        QTest::addColumn<int>("buffers");
        QTest::addRow("4 bytes a chunk, 2 buffers") << qint64(4) << 2;
        QTest::addRow("100 bytes, 1 buffer") << qint64(100) << 1;
        QTest::addRow("1000 bytes, 3 buffers") << qint64(1000) << 3;
        QTest::addRow("a tensor a chunk") << qint64(1 << 20) << 2;
    }
    void stagedUploadKeepsTheBits()
    {
        // Every kind of source a WeightSource places, through a StagedUpload whose copies a thread
        // makes 50 us late: the bits of Tensor::to, contiguous, with the read callback covering each
        // source's units once and in order, and never more chunks queued than buffers.
        QFETCH(qint64, chunkBytes);
        QFETCH(int, buffers);
        const at::Tensor w = randomFloats({6, 10}, 1), half = randomFloats({4, 5}, 3).to(at::kBFloat16);
        struct Case
        {
            const char *what;
            at::Tensor src;
            at::ScalarType dtype;
        };
        const Case cases[] = {{"float32", w, at::kFloat},
                              {"float32 -> bfloat16", w, at::kBFloat16},
                              {"bfloat16 -> float32", half, at::kFloat},
                              {"columns 7-9 (strided) -> bfloat16", w.narrow(1, 7, 3), at::kBFloat16},
                              {"columns 1-2 of bfloat16 -> float32", half.narrow(1, 1, 2), at::kFloat},
                              {"rows 2-4", w.narrow(0, 2, 3), at::kFloat},
                              {"a scalar", at::tensor(3.5F), at::kFloat},
                              {"no rows", at::empty({0, 10}, at::kFloat), at::kFloat}};
        auto queue = std::make_unique<ThreadCopyQueue>(50);
        const ThreadCopyQueue *q = queue.get();
        StagedUpload up(std::move(queue), chunkBytes, buffers);
        std::int64_t bytes = 0;
        for (const Case &c : cases) {
            std::int64_t next = 0;
            const at::Tensor out = up.upload(c.src, c.dtype, at::Device(at::kCPU), [&](std::int64_t first, std::int64_t count) {
                QCOMPARE(first, next);
                next += count;
            });
            QVERIFY2(out.is_contiguous() && out.scalar_type() == c.dtype && sameBits(out, c.src.to(c.dtype)), c.what);
            QCOMPARE(next, StagedUpload::byRows(c.src) ? c.src.size(0) : c.src.numel());
            bytes += out.numel() * out.element_size();
        }
        QCOMPARE(up.stats().tensors, std::int64_t{8});
        QCOMPARE(up.stats().bytes, bytes);
        QVERIFY2(q->maxQueued() >= 1 && q->maxQueued() <= buffers, qPrintable(QString::number(q->maxQueued())));
        if (chunkBytes == 4)
            // 4 bytes of the evaluation dtype a chunk (1 float32, 2 bfloat16), a strided source's row at least
            QCOMPARE(up.stats().chunks, std::int64_t{60 + 30 + 20 + 6 + 4 + 30 + 1});
        const WeightUploadInfo info = up.info();
        QVERIFY(QString::fromStdString(info.method).contains(QStringLiteral("test queue")));
        QCOMPARE(info.buffers, buffers);
    }

    void stagedUploadOverlapsAndWaits()
    {
        // The host fills the second buffer while the first one's copy is still queued (the overlap
        // that makes it faster than Tensor::to), and waits for a buffer's copy before filling it again:
        // a queue that skipped those waits gives other bits (what keeps the test above honest).
        const at::Tensor src = randomFloats({8, 1000}, 14);
        auto slow = std::make_unique<ThreadCopyQueue>(20000);
        const ThreadCopyQueue *q = slow.get();
        {
            StagedUpload up(std::move(slow), 4000, 2); // a row a chunk
            QVERIFY(sameBits(up.upload(src, at::kFloat, at::Device(at::kCPU)), src));
            QCOMPARE(up.stats().chunks, std::int64_t{8});
            QVERIFY2(up.stats().waitSeconds > 0.05, qPrintable(QString::number(up.stats().waitSeconds))); // 6 waits of up to 20 ms
            QCOMPARE(q->maxQueued(), 2);
        }
        StagedUpload broken(std::make_unique<NoWaitQueue>(5000), 4000, 2);
        QVERIFY(!sameBits(broken.upload(src, at::kFloat, at::Device(at::kCPU)), src));
    }

    void weightSourceStagesAndReleases()
    {
        // A WeightSource with a staged upload hands out the same tensors and slices, and drops each
        // chunk's mapped pages once it is read (on a GPU the host then holds about two chunks of the
        // checkpoint, not all of it): 16 pages of "rows", the second page of each of 8 "wide" rows.
        const std::int64_t page = pageSize(), perPage = page / 4;
        QTemporaryDir dir;
        const at::Tensor rows = randomFloats({16, perPage}, 15), wide = randomFloats({8, 2 * perPage}, 16);
        writeCheckpoint(dir.path(), {{"rows", rows}, {"wide", wide}});
        WeightSource src(SafetensorsCheckpoint::openDirectory(dir.path().toStdString()), cpuFloat32(),
                         std::make_unique<StagedUpload>(std::make_unique<ThreadCopyQueue>(50), page, 2));
        const TensorView &v = src.view("rows", {16, perPage});
        touchPages(v.data, 32 * static_cast<std::size_t>(page)); // "rows" and "wide", one after the other
        const std::int64_t before = residentBytesAround(v.data);
        QVERIFY2(before >= 32 * page, qPrintable(QStringLiteral("resident %1").arg(before)));
        QVERIFY(sameBits(src.get("rows", {16, perPage}), rows));
        QCOMPARE(residentBytesAround(v.data), before - 16 * page);
        QVERIFY(sameBits(src.getColumns("wide", {8, 2 * perPage}, perPage, perPage), wide.narrow(1, perPage, perPage)));
        QCOMPARE(residentBytesAround(v.data), before - 24 * page);
        QVERIFY(sameBits(src.getRows("wide", {8, 2 * perPage}, 2, 3), wide.narrow(0, 2, 3)));
        const WeightUploadInfo info = src.uploadInfo();
        QCOMPARE(info.chunks, std::int64_t{16 + 8 + 6});
        QCOMPARE(src.bytes(), (16 * perPage + 8 * perPage + 3 * 2 * perPage) * 4);
        // Without one, on the CPU: in place over the mapping.
        WeightSource plain(SafetensorsCheckpoint::openDirectory(dir.path().toStdString()), cpuFloat32());
        QCOMPARE(QString::fromStdString(plain.uploadInfo().method), QStringLiteral("host"));
        QCOMPARE(plain.get("rows", {16, perPage}).data_ptr(), static_cast<void *>(const_cast<unsigned char *>(plain.view("rows", {16, perPage}).data)));
    }

    void linearStoragesMatchAtLinear_data()
    {
        QTest::addColumn<int>("kind");
        QTest::addRow("torch (at::linear)") << int(LinearKind::Torch);
        QTest::addRow("onednn") << int(LinearKind::OneDnn);
        QTest::addRow("packed float32 (the agent's kernels)") << int(LinearKind::PackedFloat32);
    }
    void linearStoragesMatchAtLinear()
    {
        // A stacked q/k/v with biases and a Conv1D weight stored [in, out]: the whole output, its parts
        // and the row-major into() (fresh and accumulating) against at::linear on the same weights.
        QFETCH(int, kind);
        const auto k = static_cast<LinearKind>(kind);
        if (k == LinearKind::OneDnn && !at::hasMKLDNN())
            CPPL_SKIP_MISSING("this LibTorch has no oneDNN (mkldnn); Debian's has it");
        QTemporaryDir dir;
        const at::Tensor q = randomFloats({5, 12}, 6), kk = randomFloats({3, 12}, 7), v = randomFloats({3, 12}, 8);
        const at::Tensor qb = randomFloats({5}, 9), kb = randomFloats({3}, 10), vb = randomFloats({3}, 11);
        const at::Tensor conv = randomFloats({12, 7}, 12), convb = randomFloats({7}, 13);
        writeCheckpoint(dir.path(), {{"q.weight", q}, {"q.bias", qb}, {"k.weight", kk}, {"k.bias", kb}, {"v.weight", v}, {"v.bias", vb},
                                     {"c.weight", conv}, {"c.bias", convb}});
        WeightSource src(SafetensorsCheckpoint::openDirectory(dir.path().toStdString()), cpuFloat32());
        LinearPlan plan;
        plan.kind = k;
        const Linear qkv = Linear::load(src, {{{"q", 5}, {"k", 3}, {"v", 3}}, 12, true}, plan);
        const Linear c = Linear::load(src, {{{"c", 7}}, 12, true, true}, plan);
        QCOMPARE(qkv.outFeatures(), std::int64_t{11});
        QCOMPARE(c.inFeatures(), std::int64_t{12});

        const at::Tensor x = randomFloats({2, 3, 12}, 14);
        const at::Tensor want = at::linear(x, at::cat({q, kk, v}), at::cat({qb, kb, vb}));
        const at::Tensor got = qkv(x);
        QCOMPARE(got.sizes().vec(), (std::vector<std::int64_t>{2, 3, 11}));
        QVERIFY2(at::allclose(got, want, 1e-5, 1e-5), "stacked q/k/v");
        const std::vector<at::Tensor> parts = qkv.parts(x);
        QCOMPARE(parts.size(), std::size_t{3});
        QVERIFY(sameBits(parts[1], got.narrow(-1, 5, 3)));
        QVERIFY2(at::allclose(parts[2], at::linear(x, v, vb), 1e-5, 1e-5), "the v part");
        QVERIFY2(at::allclose(c(x), at::linear(x, conv.t(), convb), 1e-5, 1e-5), "Conv1D [in, out]");

        // into(): rows of x with a wider stride, into rows of out with a wider stride.
        const at::Tensor rows = at::cat({x.reshape({6, 12}), at::zeros({6, 4})}, 1).contiguous();
        at::Tensor out = randomFloats({6, 13}, 15);
        const at::Tensor start = out.clone();
        qkv.into(rows.data_ptr<float>(), 16, 6, out.data_ptr<float>(), 13, false);
        if (k == LinearKind::PackedFloat32) // the same kernel: the row stride never changes a sum
            QVERIFY(sameBits(out.narrow(1, 0, 11), got.reshape({6, 11})));
        QVERIFY2(at::allclose(out.narrow(1, 0, 11), want.reshape({6, 11}), 1e-5, 1e-5), "into()");
        QVERIFY(sameBits(out.narrow(1, 11, 2), start.narrow(1, 11, 2))); // past the columns: untouched
        out.copy_(start);
        qkv.into(rows.data_ptr<float>(), 16, 6, out.data_ptr<float>(), 13, true);
        QVERIFY2(at::allclose(out.narrow(1, 0, 11), start.narrow(1, 0, 11) + want.reshape({6, 11}), 1e-5, 1e-5), "accumulated");
    }

    void tiedHeadGivesBackTheEmbedding()
    {
        // The packed head of a tied model is where the native lookup reads embedding rows from: the
        // very values it was packed from, while the embedding's mapped pages are released.
        QTemporaryDir dir;
        const at::Tensor e = randomFloats({4100, 16}, 16); // past one 4096-row block
        writeCheckpoint(dir.path(), {{"embed", e}});
        WeightSource src(SafetensorsCheckpoint::openDirectory(dir.path().toStdString()), cpuFloat32());
        const at::Tensor table = src.get("embed", {4100, 16});
        LinearPlan packed, torch;
        packed.kind = LinearKind::PackedFloat32;
        const Linear head = Linear::tied(src, "embed", table, packed);
        std::vector<float> row(16);
        for (std::int64_t r : {0, 31, 32, 4095, 4096, 4099}) {
            QVERIFY(head.unpackRow(r, row.data()));
            QVERIFY2(std::memcmp(row.data(), e[r].data_ptr<float>(), sizeof(float) * 16) == 0, qPrintable(QStringLiteral("row %1").arg(r)));
        }
        QVERIFY(!Linear::tied(src, "embed", table, torch).unpackRow(0, row.data()));
        const at::Tensor x = randomFloats({3, 16}, 17);
        QVERIFY2(at::allclose(head(x), at::linear(x, e), 1e-4, 1e-5), "the tied head's logits");
    }
};

QTEST_GUILESS_MAIN(TestModelLoading)
#include "tst_model_loading.moc"
