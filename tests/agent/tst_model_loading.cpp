// SPDX-License-Identifier: MIT
// Loading a model's weights: WeightSource's tensors and the slices tensor parallelism will read
// (rows, columns), the pages each release drops from the resident set (and only those), and every
// Linear storage against at::linear, stacked parts and Conv1D weights included.
#include "eval/linear.h"
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
        const Linear qkv = Linear::load(src, {{{"q", 5}, {"k", 3}, {"v", 3}}, 12, true}, k);
        const Linear c = Linear::load(src, {{{"c", 7}}, 12, true, true}, k);
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
        const Linear head = Linear::tied(src, "embed", table, LinearKind::PackedFloat32);
        std::vector<float> row(16);
        for (std::int64_t r : {0, 31, 32, 4095, 4096, 4099}) {
            QVERIFY(head.unpackRow(r, row.data()));
            QVERIFY2(std::memcmp(row.data(), e[r].data_ptr<float>(), sizeof(float) * 16) == 0, qPrintable(QStringLiteral("row %1").arg(r)));
        }
        QVERIFY(!Linear::tied(src, "embed", table, LinearKind::Torch).unpackRow(0, row.data()));
        const at::Tensor x = randomFloats({3, 16}, 17);
        QVERIFY2(at::allclose(head(x), at::linear(x, e), 1e-4, 1e-5), "the tied head's logits");
    }
};

QTEST_GUILESS_MAIN(TestModelLoading)
#include "tst_model_loading.moc"
